//! RFC 8785 (JSON Canonicalization Scheme) for the values serde_json holds:
//! object members sorted by the UTF-16 code units of their names, no
//! whitespace, strings with only the escapes the RFC allows, and numbers in
//! the ECMAScript form of the IEEE 754 double they denote.
//!
//! The one subset: a number whose value is outside the double range (such
//! as `1e400`) has no canonical form, and is an error here; a number with
//! more precision than a double holds is canonicalized as the nearest
//! double, as the RFC requires (docs/AUDIT.md, "Argument HMAC").

use serde_json::{Number, Value};

/// Why a value has no canonical form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NotCanonical(pub String);

impl std::fmt::Display for NotCanonical {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "number {} has no canonical form (outside the double range)",
            self.0
        )
    }
}

/// The canonical text of `value`.
pub(crate) fn to_string(value: &Value) -> Result<String, NotCanonical> {
    let mut out = String::new();
    write(value, &mut out)?;
    Ok(out)
}

fn write(value: &Value, out: &mut String) -> Result<(), NotCanonical> {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&number(n)?),
        Value::String(s) => string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write(item, out)?;
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut members: Vec<(&String, &Value)> = map.iter().collect();
            members.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
            out.push('{');
            for (i, (k, v)) in members.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                string(k, out);
                out.push(':');
                write(v, out)?;
            }
            out.push('}');
        }
    }
    Ok(())
}

/// A string as RFC 8785 section 3.2.2.2 writes it: `"` and `\` escaped,
/// the five short control escapes, other controls as `\u00xx` (lower-case
/// hex), everything else as its UTF-8 bytes.
fn string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// ECMAScript's Number.prototype.toString of the double `n` denotes.
fn number(n: &Number) -> Result<String, NotCanonical> {
    let text = n.to_string();
    let f: f64 = text.parse().map_err(|_| NotCanonical(text.clone()))?;
    if !f.is_finite() {
        return Err(NotCanonical(text));
    }
    Ok(es_number(f))
}

fn es_number(f: f64) -> String {
    if f == 0.0 {
        // Both zeros are "0".
        return "0".into();
    }
    // Rust's `{:e}` gives the shortest digits that round-trip, as
    // ECMAScript asks: "d.ddde±x".
    let sci = format!("{:e}", f.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let exp: i32 = exp.parse().unwrap_or(0);
    let k = digits.len() as i32;
    // n: the position of the decimal point relative to the digits.
    let n = exp + 1;
    let mut out = String::new();
    if f < 0.0 {
        out.push('-');
    }
    if k <= n && n <= 21 {
        out.push_str(&digits);
        out.extend(std::iter::repeat_n('0', (n - k) as usize));
    } else if 0 < n && n <= 21 {
        out.push_str(&digits[..n as usize]);
        out.push('.');
        out.push_str(&digits[n as usize..]);
    } else if -6 < n && n <= 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', (-n) as usize));
        out.push_str(&digits);
    } else {
        out.push_str(&digits[..1]);
        if k > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        out.push(if n > 0 { '+' } else { '-' });
        out.push_str(&(n - 1).abs().to_string());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn canon(text: &str) -> String {
        to_string(&serde_json::from_str(text).unwrap()).unwrap()
    }

    #[test]
    fn members_sort_by_utf16_code_units_not_by_code_points() {
        // RFC 8785 section 3.2.3: U+1F600 (surrogates D83D DE00) sorts
        // before U+FB33 as UTF-16, after it as code points.
        let text = r#"{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One","\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis"}"#;
        let keys: Vec<String> = {
            let c = canon(text);
            let v: serde_json::Map<String, Value> = serde_json::from_str(&c).unwrap();
            v.keys().cloned().collect()
        };
        assert_eq!(
            keys,
            [
                "\r",
                "1",
                "\u{80}",
                "\u{f6}",
                "\u{20ac}",
                "\u{1f600}",
                "\u{fb33}"
            ]
        );
    }

    #[test]
    fn the_rfc_8785_section_3_2_2_example() {
        let input = r#"{
          "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
          "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
          "literals": [null, true, false]
        }"#;
        assert_eq!(
            canon(input),
            r#"{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}"#
        );
    }

    #[test]
    fn numbers_take_the_ecmascript_form_at_each_boundary() {
        for (input, want) in [
            ("0", "0"),
            ("-0", "0"),
            ("-0.0", "0"),
            ("1", "1"),
            ("-1", "-1"),
            ("1.0", "1"),
            ("100", "100"),
            ("1e20", "100000000000000000000"),
            ("1e21", "1e+21"),
            ("123456789012345678901", "123456789012345680000"),
            ("1e-6", "0.000001"),
            ("1e-7", "1e-7"),
            ("1.5e-7", "1.5e-7"),
            ("0.1", "0.1"),
            ("9007199254740993", "9007199254740992"),
            ("1.7976931348623157e308", "1.7976931348623157e+308"),
            ("5e-324", "5e-324"),
            ("-1.25e+25", "-1.25e+25"),
            ("295147905179352830000", "295147905179352830000"),
        ] {
            assert_eq!(canon(input), want, "{input}");
        }
    }

    #[test]
    fn a_number_beyond_the_double_range_has_no_canonical_form() {
        let v: Value = serde_json::from_str("[1e400]").unwrap();
        assert!(matches!(to_string(&v), Err(NotCanonical(n)) if n.contains("400")));
    }

    #[test]
    fn every_control_character_is_escaped_and_nothing_else() {
        let s: String = (0u32..0x20).filter_map(char::from_u32).collect();
        let got = to_string(&Value::String(format!("{s}\u{7f}/é\u{2028}"))).unwrap();
        assert_eq!(
            got,
            "\"\\u0000\\u0001\\u0002\\u0003\\u0004\\u0005\\u0006\\u0007\\b\\t\\n\\u000b\\f\\r\
             \\u000e\\u000f\\u0010\\u0011\\u0012\\u0013\\u0014\\u0015\\u0016\\u0017\\u0018\
             \\u0019\\u001a\\u001b\\u001c\\u001d\\u001e\\u001f\u{7f}/é\u{2028}\""
        );
    }

    #[test]
    fn nesting_and_empty_containers() {
        assert_eq!(
            to_string(&json!({"b": [], "a": {"d": {}, "c": [1, "x", null]}})).unwrap(),
            r#"{"a":{"c":[1,"x",null],"d":{}},"b":[]}"#
        );
    }
}
