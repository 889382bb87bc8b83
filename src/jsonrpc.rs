//! JSON-RPC 2.0: turning one line into a typed message, and responses back
//! into one line. Ids are kept as the exact JSON value received, so strings,
//! 0, negatives and integers past 2^53 come back digit for digit.

use serde_json::{json, Map, Value};

use crate::error::{RpcCode, RpcError};
use crate::frame::{exceeds_depth, MAX_DEPTH};

#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// A request to answer. `params` is `{}` when absent.
    Request {
        id: Value,
        method: String,
        params: Map<String, Value>,
    },
    /// A notification: never answered, whatever it holds.
    Notification { method: String, params: Value },
    /// A response sent by the client; this server asks nothing, so it's dropped.
    Response,
    /// Not a valid message: answered with `error` and `id` (null when unreadable).
    Invalid { id: Value, error: RpcError },
}

/// Refused with `code`; `specifics` follow the code's label.
fn invalid(id: Value, code: RpcCode, specifics: &str) -> Incoming {
    Incoming::Invalid {
        id,
        error: RpcError::detailed(code, specifics),
    }
}

/// A JSON string or integer; anything else (null, fractions, `1.0`, `1e3`,
/// booleans, objects, arrays) is not a valid id.
pub fn is_valid_id(id: &Value) -> bool {
    match id {
        Value::String(_) => true,
        Value::Number(n) => {
            // The number's own text (kept exactly) decides: digits with an optional sign.
            let text = n.to_string();
            let digits = text.strip_prefix('-').unwrap_or(&text);
            !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
        }
        _ => false,
    }
}

/// Parse one line (without its LF) into a message.
pub fn parse_line(line: &[u8]) -> Incoming {
    let Ok(text) = std::str::from_utf8(line) else {
        return invalid(
            Value::Null,
            RpcCode::ParseError,
            "the line is not valid UTF-8.",
        );
    };
    if exceeds_depth(line, MAX_DEPTH) {
        return invalid(
            Value::Null,
            RpcCode::InvalidRequest,
            "the message nests deeper than 64 levels.",
        );
    }
    let value: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(_) => {
            return invalid(
                Value::Null,
                RpcCode::ParseError,
                "the line is not valid JSON.",
            )
        }
    };
    classify(value)
}

fn classify(value: Value) -> Incoming {
    let mut obj = match value {
        Value::Object(obj) => obj,
        Value::Array(_) => {
            return invalid(
                Value::Null,
                RpcCode::InvalidRequest,
                "batches are not supported; send one message per line.",
            )
        }
        _ => {
            return invalid(
                Value::Null,
                RpcCode::InvalidRequest,
                "a message must be a JSON object.",
            )
        }
    };

    let has_method = obj.contains_key("method");
    if !has_method && (obj.contains_key("result") || obj.contains_key("error")) {
        return Incoming::Response;
    }

    let id = obj.remove("id");
    let echo = match &id {
        Some(v) if is_valid_id(v) => v.clone(),
        _ => Value::Null,
    };
    if let Some(v) = &id {
        if !is_valid_id(v) {
            return invalid(
                Value::Null,
                RpcCode::InvalidRequest,
                "id must be a string or an integer.",
            );
        }
    }
    if obj.get("jsonrpc") != Some(&Value::String("2.0".into())) {
        return invalid(echo, RpcCode::InvalidRequest, "jsonrpc must be \"2.0\".");
    }
    let method = match obj.remove("method") {
        Some(Value::String(m)) => m,
        _ => return invalid(echo, RpcCode::InvalidRequest, "method must be a string."),
    };
    let params = obj.remove("params");

    let Some(id) = id else {
        return Incoming::Notification {
            method,
            params: params.unwrap_or(Value::Null),
        };
    };
    let params = match params {
        None => Map::new(),
        Some(Value::Object(p)) => p,
        Some(Value::Array(_)) => {
            return invalid(
                id,
                RpcCode::InvalidParams,
                "params must be an object, not an array.",
            )
        }
        Some(_) => {
            return invalid(
                id,
                RpcCode::InvalidRequest,
                "params must be an object when present.",
            )
        }
    };
    Incoming::Request { id, method, params }
}

/// A success response.
pub fn result(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// An error response.
pub fn error(id: &Value, err: &RpcError) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": err.to_json()})
}

/// Serialize one outbound message as one line (no LF). U+2028, U+2029 and
/// U+0085 are escaped because some clients split lines on them.
pub fn to_line(message: &Value) -> String {
    let text = message.to_string();
    if !text.contains(['\u{2028}', '\u{2029}', '\u{85}']) {
        return text;
    }
    // serde_json emits these only inside strings, where `\uXXXX` means the same.
    text.replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029")
        .replace('\u{85}', "\\u0085")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err_of(line: &str) -> (Value, RpcCode) {
        match parse_line(line.as_bytes()) {
            Incoming::Invalid { id, error } => (id, error.code),
            other => panic!("expected an error for {line}, got {other:?}"),
        }
    }

    #[test]
    fn valid_ids() {
        for ok in [
            r#""7""#,
            "0",
            "-3",
            "9007199254740993",
            "123456789012345678901234567890",
            r#""""#,
        ] {
            assert!(is_valid_id(&serde_json::from_str(ok).unwrap()), "{ok}");
        }
        for bad in ["null", "1.5", "1.0", "1e3", "true", "{}", "[]"] {
            assert!(!is_valid_id(&serde_json::from_str(bad).unwrap()), "{bad}");
        }
    }

    #[test]
    fn big_ids_round_trip_digit_for_digit() {
        let line = r#"{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"ping"}"#;
        let Incoming::Request { id, .. } = parse_line(line.as_bytes()) else {
            panic!("not a request")
        };
        let out = to_line(&result(&id, json!({})));
        assert_eq!(
            out,
            r#"{"jsonrpc":"2.0","id":123456789012345678901234567890,"result":{}}"#
        );
    }

    #[test]
    fn framing_errors() {
        assert_eq!(err_of("{\"jsonrpc\":"), (Value::Null, RpcCode::ParseError));
        assert_eq!(err_of("[]"), (Value::Null, RpcCode::InvalidRequest));
        assert_eq!(
            err_of(r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#),
            (Value::Null, RpcCode::InvalidRequest)
        );
        assert_eq!(err_of("42"), (Value::Null, RpcCode::InvalidRequest));
        assert_eq!(err_of("null"), (Value::Null, RpcCode::InvalidRequest));
        assert_eq!(
            err_of(r#"{"jsonrpc":"1.0","id":5,"method":"ping"}"#),
            (json!(5), RpcCode::InvalidRequest)
        );
        assert_eq!(
            err_of(r#"{"jsonrpc":"2.0","method":7}"#),
            (Value::Null, RpcCode::InvalidRequest)
        );
        assert_eq!(
            err_of(r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#),
            (Value::Null, RpcCode::InvalidRequest)
        );
        assert_eq!(
            err_of(r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#),
            (Value::Null, RpcCode::InvalidRequest)
        );
        assert_eq!(
            err_of(r#"{"jsonrpc":"2.0","id":4,"method":"ping","params":[1]}"#),
            (json!(4), RpcCode::InvalidParams)
        );
        assert_eq!(
            err_of(r#"{"jsonrpc":"2.0","id":4,"method":"ping","params":null}"#),
            (json!(4), RpcCode::InvalidRequest)
        );
        assert_eq!(
            err_of(r#"{"jsonrpc":"2.0","id":4,"method":"ping","params":3}"#),
            (json!(4), RpcCode::InvalidRequest)
        );
    }

    #[test]
    fn invalid_utf8_is_a_parse_error() {
        match parse_line(b"\xff\xfe{\"jsonrpc\":\"2.0\"}") {
            Incoming::Invalid { id, error } => {
                assert_eq!(id, Value::Null);
                assert_eq!(error.code, RpcCode::ParseError);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn notifications_and_responses() {
        assert!(matches!(
            parse_line(br#"{"jsonrpc":"2.0","method":"notifications/whatever","params":5}"#),
            Incoming::Notification { .. }
        ));
        assert_eq!(
            parse_line(br#"{"jsonrpc":"2.0","id":99,"result":{}}"#),
            Incoming::Response
        );
    }

    #[test]
    fn member_order_and_missing_params() {
        assert_eq!(
            parse_line(br#"{"method":"ping","jsonrpc":"2.0","id":3}"#),
            Incoming::Request {
                id: json!(3),
                method: "ping".into(),
                params: Map::new()
            }
        );
    }

    #[test]
    fn line_separators_are_escaped() {
        let v = json!({"t": "a\u{2028}b\u{2029}c\u{85}d"});
        let line = to_line(&v);
        assert_eq!(line, r#"{"t":"a\u2028b\u2029c\u0085d"}"#);
        assert_eq!(serde_json::from_str::<Value>(&line).unwrap(), v);
    }
}
