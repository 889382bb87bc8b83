//! Typed errors, and the one place they become wire shapes: JSON-RPC error
//! objects for protocol faults, tool-error documents for everything a tool
//! call can get wrong.

use serde_json::{json, Value};

/// A failure of one tool call that the client sees as an `isError` result
/// with the error document `{"error": {"code", "message"}}` and exit code 2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolError {
    code: String,
    message: String,
}

impl ToolError {
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            code: code.into(),
            message: message.into(),
        }
    }

    pub fn code(&self) -> &str {
        &self.code
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    /// The contract's error document (CONTRACT.md §3).
    pub fn document(&self) -> Value {
        json!({"error": {"code": self.code, "message": self.message}})
    }
}

impl std::fmt::Display for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code(), self.message())
    }
}

impl std::error::Error for ToolError {}

/// A protocol-level failure, answered as a JSON-RPC error object.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    pub fn to_json(&self) -> Value {
        let mut err = json!({"code": self.code, "message": self.message});
        if let Some(data) = &self.data {
            err["data"] = data.clone();
        }
        err
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_error_document_shape() {
        let e = ToolError::new("path_outside_root", "Use a path inside the root.");
        assert_eq!(
            e.document(),
            json!({"error": {"code": "path_outside_root", "message": "Use a path inside the root."}})
        );
    }

    #[test]
    fn rpc_error_data_only_when_given() {
        assert_eq!(
            RpcError::new(-32601, "Method not found").to_json(),
            json!({"code": -32601, "message": "Method not found"})
        );
        assert_eq!(
            RpcError::new(-32022, "x")
                .with_data(json!({"a": 1}))
                .to_json()["data"],
            json!({"a": 1})
        );
    }
}
