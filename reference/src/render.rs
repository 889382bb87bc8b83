//! Text output: the JSON document laid out for a person at a terminal.
//!
//! Every command builds its answer once, as JSON; text mode prints that same
//! document indented, so the two formats can never disagree.

use serde_json::Value;

pub fn to_text(doc: &Value) -> String {
    let mut out = String::new();
    match doc {
        Value::Object(_) | Value::Array(_) => write_value(&mut out, doc, 0),
        other => {
            out.push_str(&scalar(other));
            out.push('\n');
        }
    }
    out
}

fn scalar(value: &Value) -> String {
    match value {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn is_scalar(value: &Value) -> bool {
    !matches!(value, Value::Object(_) | Value::Array(_))
}

fn write_value(out: &mut String, value: &Value, indent: usize) {
    let pad = "  ".repeat(indent);
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                match v {
                    Value::Array(items) if items.is_empty() => {
                        out.push_str(&format!("{pad}{key}: none\n"));
                    }
                    Value::Object(m) if m.is_empty() => {
                        out.push_str(&format!("{pad}{key}: none\n"));
                    }
                    v if is_scalar(v) => {
                        out.push_str(&format!("{pad}{key}: {}\n", scalar(v)));
                    }
                    v => {
                        out.push_str(&format!("{pad}{key}:\n"));
                        write_value(out, v, indent + 1);
                    }
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                if is_scalar(item) {
                    out.push_str(&format!("{pad}- {}\n", scalar(item)));
                } else {
                    // The first field shares the dash's line, the rest follow indented.
                    let mut nested = String::new();
                    write_value(&mut nested, item, indent + 1);
                    let trimmed = nested.trim_start();
                    out.push_str(&format!("{pad}- {trimmed}"));
                }
            }
        }
        other => {
            out.push_str(&format!("{pad}{}\n", scalar(other)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nested_documents_indent() {
        let text = to_text(&json!({"a": 1, "b": [{"x": "y", "z": [1]}], "c": []}));
        assert_eq!(text, "a: 1\nb:\n  - x: y\n    z:\n      - 1\nc: none\n");
    }
}
