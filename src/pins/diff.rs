//! What changed between the pins on file and what the backend offers now,
//! as one readable line per change, with every character a reader could
//! not see (controls, zero-width and bidirectional marks) shown escaped.

use serde_json::Value;

use crate::canonical;

/// One changed value: where, and what it was and is (`None`: absent).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Change {
    /// `backend` or ``tool `NAME` ``.
    pub subject: String,
    /// The member, and below it the path to the changed value
    /// (`inputSchema/properties/limit/maximum`); empty for a whole tool.
    pub field: String,
    pub before: Option<Value>,
    pub after: Option<Value>,
}

impl Change {
    /// `tool `x`: description: "old" -> "new"`, escaped.
    pub(crate) fn line(&self) -> String {
        let shown = |v: &Option<Value>| match v {
            None => "(absent)".to_string(),
            Some(v) => escape(&canonical::to_string(v).unwrap_or_else(|_| v.to_string())),
        };
        let what = match (self.field.is_empty(), &self.before, &self.after) {
            (true, None, Some(_)) => return format!("{}: new tool", self.subject),
            (true, Some(_), None) => return format!("{}: removed", self.subject),
            (true, _, _) => self.subject.clone(),
            (false, _, _) => format!("{}: {}", self.subject, escape(&self.field)),
        };
        format!("{what}: {} -> {}", shown(&self.before), shown(&self.after))
    }
}

/// Whether a reader could not see `c` or could be misled by it: control
/// characters, zero-width and invisible formatting characters, and the
/// bidirectional embeddings, overrides, isolates and marks.
fn hidden(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{00AD}' | '\u{034F}' | '\u{061C}' | '\u{115F}' | '\u{1160}' | '\u{17B4}'
            | '\u{17B5}' | '\u{180E}' | '\u{200B}'..='\u{200F}' | '\u{2028}'..='\u{202E}'
            | '\u{2060}'..='\u{206F}' | '\u{3164}' | '\u{FE00}'..='\u{FE0F}' | '\u{FEFF}'
            | '\u{FFA0}' | '\u{FFF9}'..='\u{FFFB}' | '\u{E0000}'..='\u{E007F}')
}

/// `text` with each hidden character as `\u{XXXX}` (and `\` doubled, so
/// an escape in the text itself cannot pass for one of these).
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c == '\\' {
            out.push_str("\\\\");
        } else if hidden(c) {
            out.push_str(&format!("\\u{{{:04X}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// Every leaf that differs between `before` and `after`, below `field`.
pub(crate) fn walk(
    subject: &str,
    field: &str,
    before: Option<&Value>,
    after: Option<&Value>,
    out: &mut Vec<Change>,
) {
    let join = |k: &str| {
        if field.is_empty() {
            k.to_string()
        } else {
            format!("{field}/{k}")
        }
    };
    match (before, after) {
        (Some(Value::Object(a)), Some(Value::Object(b))) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                walk(subject, &join(k), a.get(k), b.get(k), out);
            }
        }
        (Some(Value::Array(a)), Some(Value::Array(b))) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                walk(subject, &join(&i.to_string()), Some(x), Some(y), out);
            }
        }
        (a, b) if a != b => out.push(Change {
            subject: subject.to_string(),
            field: field.to_string(),
            before: a.cloned(),
            after: b.cloned(),
        }),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn hidden_characters_are_escaped_and_nothing_else() {
        assert_eq!(escape("plain text é ü 漢"), "plain text é ü 漢");
        assert_eq!(escape("a\u{200B}b"), "a\\u{200B}b");
        assert_eq!(
            escape("\u{202A}\u{202E}\u{2066}\u{2069}"),
            "\\u{202A}\\u{202E}\\u{2066}\\u{2069}"
        );
        assert_eq!(
            escape("\u{0007}\u{007F}\u{0085}"),
            "\\u{0007}\\u{007F}\\u{0085}"
        );
        assert_eq!(escape("\u{FEFF}\u{E0041}"), "\\u{FEFF}\\u{E0041}");
        // Just outside the ranges: visible characters stay as they are.
        assert_eq!(
            escape("\u{2029}\u{202F}\u{2065}\u{206A}"),
            "\\u{2029}\u{202F}\\u{2065}\\u{206A}"
        );
        assert_eq!(escape("\u{200A}\u{2010}"), "\u{200A}\u{2010}");
        assert_eq!(escape("\u{2027}"), "\u{2027}");
        // A literal backslash-u in the text cannot pass for an escape.
        assert_eq!(escape("\\u{200B}"), "\\\\u{200B}");
    }

    #[test]
    fn leaves_that_differ_are_named_by_their_path() {
        let a = json!({"description": "Count.", "inputSchema": {"properties": {"n": {"maximum": 9}}, "required": ["n"]}});
        let b = json!({"description": "Count\u{200B}.", "inputSchema": {"properties": {"n": {"maximum": 10}}, "required": ["n", "m"]}});
        let mut out = Vec::new();
        walk("tool `t`", "", Some(&a), Some(&b), &mut out);
        let lines: Vec<String> = out.iter().map(Change::line).collect();
        assert_eq!(
            lines,
            [
                "tool `t`: description: \"Count.\" -> \"Count\\u{200B}.\"",
                "tool `t`: inputSchema/properties/n/maximum: 9 -> 10",
                "tool `t`: inputSchema/required: [\"n\"] -> [\"n\",\"m\"]",
            ]
        );
        let mut same = Vec::new();
        walk("x", "", Some(&a), Some(&a), &mut same);
        assert!(same.is_empty());
    }

    #[test]
    fn whole_tools_added_and_removed_read_so() {
        let t = json!({"name": "t"});
        let added = Change {
            subject: "tool `t`".into(),
            field: String::new(),
            before: None,
            after: Some(t.clone()),
        };
        assert_eq!(added.line(), "tool `t`: new tool");
        let removed = Change {
            after: None,
            before: Some(t),
            ..added
        };
        assert_eq!(removed.line(), "tool `t`: removed");
        let mut out = Vec::new();
        walk("backend", "version", Some(&json!("1.0")), None, &mut out);
        assert_eq!(out[0].line(), "backend: version: \"1.0\" -> (absent)");
    }
}
