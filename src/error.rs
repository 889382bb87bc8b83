//! Typed errors, and the one place they become wire shapes: JSON-RPC error
//! objects for protocol faults, tool-error documents for everything a tool
//! call can get wrong.

use serde_json::{json, Value};

/// Every error code a client can see in a tool-error document, in one
/// place. Each is answered as an `isError` result (exit code 2) carrying
/// `{"error": {"code", "message"}}`, never as a JSON-RPC error: the call
/// itself was well-formed, and the message says what to change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// `invalid_argument`: an argument has the wrong type, range or form.
    InvalidArgument,
    /// `unknown_argument`: an argument the tool does not take (or that this server withholds).
    UnknownArgument,
    /// `missing_argument`: a required argument is missing.
    MissingArgument,
    /// `path_outside_root`: a path argument resolves outside the root folder.
    PathOutsideRoot,
    /// `path_not_found`: a path argument names nothing that exists.
    PathNotFound,
    /// `path_protected`: a path argument names a fixed file or matches a protected pattern.
    PathProtected,
    /// `output_too_large`: the result was larger than --max-output-bytes.
    OutputTooLarge,
    /// `timeout`: the run passed --call-timeout and was stopped.
    Timeout,
    /// `rate_limited`: more calls started in the last minute than --max-calls-per-minute allows.
    RateLimited,
    /// `backend_failed`: the backend crashed, printed no valid document, or could not be started.
    BackendFailed,
    /// `sandbox_failed`: the sandbox could not be set up, so nothing ran.
    SandboxFailed,
}

impl ErrorCode {
    pub const ALL: [ErrorCode; 11] = [
        ErrorCode::InvalidArgument,
        ErrorCode::UnknownArgument,
        ErrorCode::MissingArgument,
        ErrorCode::PathOutsideRoot,
        ErrorCode::PathNotFound,
        ErrorCode::PathProtected,
        ErrorCode::OutputTooLarge,
        ErrorCode::Timeout,
        ErrorCode::RateLimited,
        ErrorCode::BackendFailed,
        ErrorCode::SandboxFailed,
    ];

    /// The code as it appears on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidArgument => "invalid_argument",
            ErrorCode::UnknownArgument => "unknown_argument",
            ErrorCode::MissingArgument => "missing_argument",
            ErrorCode::PathOutsideRoot => "path_outside_root",
            ErrorCode::PathNotFound => "path_not_found",
            ErrorCode::PathProtected => "path_protected",
            ErrorCode::OutputTooLarge => "output_too_large",
            ErrorCode::Timeout => "timeout",
            ErrorCode::RateLimited => "rate_limited",
            ErrorCode::BackendFailed => "backend_failed",
            ErrorCode::SandboxFailed => "sandbox_failed",
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failure of one tool call that the client sees as an `isError` result
/// with the error document `{"error": {"code", "message"}}` and exit code 2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolError {
    code: ErrorCode,
    message: String,
}

impl ToolError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    /// The code as it appears on the wire.
    pub fn code(&self) -> &'static str {
        self.code.as_str()
    }

    pub fn error_code(&self) -> ErrorCode {
        self.code
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    /// The contract's error document (docs/BACKEND.md, Output and exit codes).
    pub fn document(&self) -> Value {
        json!({"error": {"code": self.code.as_str(), "message": self.message}})
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
        let e = ToolError::new(ErrorCode::PathOutsideRoot, "Use a path inside the root.");
        assert_eq!(
            e.document(),
            json!({"error": {"code": "path_outside_root", "message": "Use a path inside the root."}})
        );
    }

    #[test]
    fn error_codes_are_unique_snake_case_words() {
        let mut seen = std::collections::HashSet::new();
        for c in ErrorCode::ALL {
            let s = c.as_str();
            assert!(seen.insert(s), "{s} twice");
            assert!(
                s.chars().all(|ch| ch.is_ascii_lowercase() || ch == '_'),
                "{s}"
            );
            assert_eq!(c.to_string(), s);
        }
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
