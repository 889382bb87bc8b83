//! The one shape every tool result has (docs/BACKEND.md, What the client receives):
//! `{"exit_code": N, "output": <document>}`.

use serde_json::{json, Map, Value};

use crate::error::ToolError;

/// The `_meta` member naming what a tool run was confined by.
pub(crate) const META_SANDBOX: &str = "io.reachweaver/sandbox";

/// The `_meta` member telling what a tool run tried and was refused
/// (docs/DENIED.md).
pub(crate) const META_DENIED: &str = "io.reachweaver/denied";

/// The `_meta` member counting what redaction hid (only when it hid
/// anything; never what it was).
pub(crate) const META_REDACTED: &str = "io.reachweaver/redacted";

#[derive(Debug, Clone, PartialEq)]
pub struct Envelope {
    pub exit_code: i32,
    pub output: Value,
    /// Members of the result's `_meta` (the sandbox attestation, the
    /// redaction count): about the call, never part of its answer.
    pub meta: Map<String, Value>,
}

impl Envelope {
    /// A finished run: exit 0 or 1 with the command's document, or exit 2 with its error document.
    pub fn from_run(exit_code: i32, output: Value) -> Self {
        Self {
            exit_code,
            output,
            meta: Map::new(),
        }
    }

    /// A failure the server itself reports; a message redacted already
    /// (before it was cut) counts its replacements here.
    pub fn from_error(err: &ToolError) -> Self {
        let mut meta = Map::new();
        if err.redacted() > 0 {
            meta.insert(META_REDACTED.into(), Value::from(err.redacted()));
        }
        Self {
            exit_code: 2,
            output: err.document(),
            meta,
        }
    }

    pub fn is_error(&self) -> bool {
        self.exit_code == 2
    }

    pub fn to_value(&self) -> Value {
        json!({"exit_code": self.exit_code, "output": self.output})
    }

    /// The compact JSON text sent as the result's one text item.
    pub fn to_text(&self) -> String {
        self.to_value().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_envelope_has_exit_2_and_document() {
        let e = Envelope::from_error(&ToolError::new(
            crate::error::ErrorCode::Timeout,
            "The call ran too long.",
        ));
        assert!(e.is_error());
        assert_eq!(
            e.to_value(),
            json!({"exit_code": 2, "output": {"error": {"code": "timeout", "message": "The call ran too long."}}})
        );
    }

    #[test]
    fn findings_are_not_an_error() {
        let e = Envelope::from_run(1, json!({"findings": [1]}));
        assert!(!e.is_error());
        assert_eq!(e.to_text(), r#"{"exit_code":1,"output":{"findings":[1]}}"#);
    }
}
