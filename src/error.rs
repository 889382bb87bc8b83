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
    /// `resource_exhausted`: the server itself ran out of threads, processes
    /// or open files before the command could start, so nothing ran.
    ResourceExhausted,
    /// `audit_failed`: `--audit-required` is set and the call's start could
    /// not be written to the audit log, so nothing ran.
    AuditFailed,
    /// `backend_changed`: `--pin` is set and the backend's file no longer
    /// matches its pinned SHA-256, so nothing ran.
    BackendChanged,
}

impl ErrorCode {
    pub const ALL: [ErrorCode; 14] = [
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
        ErrorCode::ResourceExhausted,
        ErrorCode::AuditFailed,
        ErrorCode::BackendChanged,
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
            ErrorCode::ResourceExhausted => "resource_exhausted",
            ErrorCode::AuditFailed => "audit_failed",
            ErrorCode::BackendChanged => "backend_changed",
        }
    }

    /// The sentence a client gets when nothing more specific is known: what
    /// went wrong and what to change, so a model can act on the code alone.
    pub fn hint(self) -> &'static str {
        match self {
            ErrorCode::InvalidArgument => {
                "An argument has the wrong type, range or form; check it against the tool's inputSchema."
            }
            ErrorCode::UnknownArgument => {
                "An argument is not one this tool takes through this server; call it without that argument."
            }
            ErrorCode::MissingArgument => {
                "A required argument is missing; add it (the tool's inputSchema lists them)."
            }
            ErrorCode::PathOutsideRoot => {
                "A path points outside the root folder; give a path inside it, for example relative to it."
            }
            ErrorCode::PathNotFound => {
                "A path names no file inside the root folder; check the name (relative paths are taken from the root)."
            }
            ErrorCode::PathProtected => {
                "A path names a file no tool may read; choose another file."
            }
            ErrorCode::OutputTooLarge => {
                "The result was larger than this server returns; ask for less and try again."
            }
            ErrorCode::Timeout => {
                "The command ran too long and was stopped; ask for less, or try again later."
            }
            ErrorCode::RateLimited => {
                "Too many tool calls started in the last minute; wait and try again."
            }
            ErrorCode::BackendFailed => {
                "The command failed without a usable answer; try again, or report it to the server's owner."
            }
            ErrorCode::SandboxFailed => {
                "The sandbox could not be set up for this call, so nothing ran; report it to the server's owner."
            }
            ErrorCode::ResourceExhausted => {
                "The server ran out of threads, processes or open files before the command could start, so nothing ran; try again when fewer calls are running."
            }
            ErrorCode::BackendChanged => {
                "The server's backend program was changed since its owner approved it, so nothing ran; report it to the server's owner."
            }
            ErrorCode::AuditFailed => {
                "The server's audit log could not be written, and its owner requires every call to be recorded, so nothing ran; report it to the server's owner."
            }
        }
    }

    /// The message skeleton for this code, with one `{}` that the call site
    /// fills with its specifics (see [`ToolError::templated`]). Codes whose
    /// messages differ in shape from site to site (which argument, which
    /// path, which failure) leave the whole sentence to the site: `"{}"`.
    pub fn template(self) -> &'static str {
        match self {
            ErrorCode::OutputTooLarge => {
                "The result was larger than {} bytes, the most this server returns; ask for less \
                 (narrower arguments, fewer items or a shorter period) and try again."
            }
            ErrorCode::Timeout => {
                "The command did not finish within {} seconds and was stopped; ask for less, or try again later."
            }
            ErrorCode::RateLimited => "Too many tool calls: {} and try again.",
            ErrorCode::SandboxFailed => {
                "The sandbox could not be set up for this call, so nothing ran ({})."
            }
            ErrorCode::AuditFailed => {
                "The call was not run: {}, and this server records every call before it runs; \
                 report it to the server's owner."
            }
            ErrorCode::ResourceExhausted => {
                "The server ran out of {} before the command could start, so nothing ran; try again \
                 when fewer calls are running, or ask the server's owner to raise its limits."
            }
            ErrorCode::InvalidArgument
            | ErrorCode::UnknownArgument
            | ErrorCode::MissingArgument
            | ErrorCode::PathOutsideRoot
            | ErrorCode::PathNotFound
            | ErrorCode::PathProtected
            | ErrorCode::BackendFailed
            | ErrorCode::BackendChanged => "{}",
        }
    }

    /// How a client sees this code on the wire. Every code is a tool result
    /// (the request itself was well-formed); JSON-RPC errors are kept for
    /// protocol faults, listed in [`RpcCode`].
    pub fn answer(self) -> Answer {
        match self {
            ErrorCode::InvalidArgument
            | ErrorCode::UnknownArgument
            | ErrorCode::MissingArgument
            | ErrorCode::PathOutsideRoot
            | ErrorCode::PathNotFound
            | ErrorCode::PathProtected
            | ErrorCode::OutputTooLarge
            | ErrorCode::Timeout
            | ErrorCode::RateLimited
            | ErrorCode::BackendFailed
            | ErrorCode::SandboxFailed
            | ErrorCode::ResourceExhausted
            | ErrorCode::AuditFailed
            | ErrorCode::BackendChanged => Answer::ToolResult { exit_code: 2 },
        }
    }
}

/// The wire form of a failure: an `isError` tool result, or a JSON-RPC error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// A `tools/call` result with `isError: true` whose envelope carries this
    /// exit code and the error document.
    ToolResult { exit_code: i32 },
    /// A JSON-RPC error object with this code.
    RpcError(RpcCode),
}

/// Every JSON-RPC error code this server sends, in one place.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RpcCode {
    /// -32700: the line is not JSON (or not UTF-8).
    ParseError,
    /// -32600: JSON, but not a request this server accepts (shape, id, batch, size, order).
    InvalidRequest,
    /// -32601: no such method (including methods later revisions removed).
    MethodNotFound,
    /// -32602: the method exists but its params are wrong, or the session is not initialized.
    InvalidParams,
    /// -32603: a fault inside the server while answering.
    InternalError,
    /// -32022: a handshake-less request names a revision this server does not serve.
    UnsupportedProtocolVersion,
}

impl RpcCode {
    pub const ALL: [RpcCode; 6] = [
        RpcCode::ParseError,
        RpcCode::InvalidRequest,
        RpcCode::MethodNotFound,
        RpcCode::InvalidParams,
        RpcCode::InternalError,
        RpcCode::UnsupportedProtocolVersion,
    ];

    /// The number on the wire.
    pub fn as_i64(self) -> i64 {
        match self {
            RpcCode::ParseError => -32700,
            RpcCode::InvalidRequest => -32600,
            RpcCode::MethodNotFound => -32601,
            RpcCode::InvalidParams => -32602,
            RpcCode::InternalError => -32603,
            RpcCode::UnsupportedProtocolVersion => -32022,
        }
    }

    /// The label every message with this code starts with; sites add the
    /// specifics after it (see [`RpcError::detailed`]).
    pub fn label(self) -> &'static str {
        match self {
            RpcCode::ParseError => "Parse error",
            RpcCode::InvalidRequest => "Invalid Request",
            RpcCode::MethodNotFound => "Method not found",
            RpcCode::InvalidParams => "Invalid params",
            RpcCode::InternalError => "Internal error",
            RpcCode::UnsupportedProtocolVersion => "Unsupported protocol version",
        }
    }
}

impl std::fmt::Display for RpcCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.as_i64())
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
    /// Secrets already replaced in `message` (redaction before a cut), so
    /// the result's redaction count still holds them.
    redacted: usize,
}

impl ToolError {
    /// A message written whole by the call site.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            redacted: 0,
        }
    }

    /// This error, saying `n` secrets were replaced in its message already.
    pub fn with_redacted(mut self, n: usize) -> Self {
        self.redacted = n;
        self
    }

    /// How many secrets were replaced in the message before it got here.
    pub fn redacted(&self) -> usize {
        self.redacted
    }

    /// The code's [template](ErrorCode::template) with the site's specifics in its slot.
    pub fn templated(code: ErrorCode, specifics: &str) -> Self {
        Self::new(code, code.template().replacen("{}", specifics, 1))
    }

    /// Only the code's [hint](ErrorCode::hint), for a site with nothing to add.
    pub fn of(code: ErrorCode) -> Self {
        Self::new(code, code.hint())
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
    pub code: RpcCode,
    pub message: String,
    pub data: Option<Value>,
}

impl RpcError {
    /// A message written whole by the call site.
    pub fn new(code: RpcCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// `"<label>: <specifics>"`, the form of nearly every message sent.
    pub fn detailed(code: RpcCode, specifics: impl std::fmt::Display) -> Self {
        Self::new(code, format!("{}: {specifics}", code.label()))
    }

    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    pub fn to_json(&self) -> Value {
        let mut err = json!({"code": self.code.as_i64(), "message": self.message});
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
            RpcError::new(RpcCode::MethodNotFound, "Method not found").to_json(),
            json!({"code": -32601, "message": "Method not found"})
        );
        assert_eq!(
            RpcError::new(RpcCode::UnsupportedProtocolVersion, "x")
                .with_data(json!({"a": 1}))
                .to_json()["data"],
            json!({"a": 1})
        );
    }

    #[test]
    fn every_code_has_an_actionable_hint_and_a_one_slot_template() {
        for c in ErrorCode::ALL {
            let hint = c.hint();
            assert!(hint.ends_with('.') && hint.contains(';'), "{c}: {hint}");
            assert_eq!(c.template().matches("{}").count(), 1, "{c}");
            assert_eq!(ToolError::of(c).message(), hint);
            assert_eq!(ToolError::of(c).code(), c.as_str());
        }
    }

    #[test]
    fn templates_put_the_specifics_in_the_slot_once() {
        let e = ToolError::templated(ErrorCode::Timeout, "30");
        assert_eq!(
            e.message(),
            "The command did not finish within 30 seconds and was stopped; ask for less, or try again later."
        );
        // Specifics that look like a slot are not filled again.
        let e = ToolError::templated(ErrorCode::SandboxFailed, "{}");
        assert_eq!(
            e.message(),
            "The sandbox could not be set up for this call, so nothing ran ({})."
        );
        assert_eq!(
            ToolError::templated(ErrorCode::PathNotFound, "whole text.").message(),
            "whole text."
        );
        assert_eq!(
            ToolError::templated(ErrorCode::OutputTooLarge, "262144").message(),
            "The result was larger than 262144 bytes, the most this server returns; ask for less \
             (narrower arguments, fewer items or a shorter period) and try again."
        );
        assert_eq!(
            ToolError::templated(
                ErrorCode::RateLimited,
                "at most 2 may start per minute. Wait 5 seconds"
            )
            .message(),
            "Too many tool calls: at most 2 may start per minute. Wait 5 seconds and try again."
        );
        assert_eq!(
            ToolError::templated(ErrorCode::ResourceExhausted, "open files").message(),
            "The server ran out of open files before the command could start, so nothing ran; \
             try again when fewer calls are running, or ask the server's owner to raise its limits."
        );
    }

    #[test]
    fn every_code_is_an_is_error_result_with_exit_2() {
        for c in ErrorCode::ALL {
            assert_eq!(c.answer(), Answer::ToolResult { exit_code: 2 }, "{c}");
        }
    }

    #[test]
    fn rpc_codes_are_the_json_rpc_numbers() {
        let numbers: Vec<i64> = RpcCode::ALL.iter().map(|c| c.as_i64()).collect();
        assert_eq!(numbers, [-32700, -32600, -32601, -32602, -32603, -32022]);
        assert_eq!(RpcCode::InvalidParams.to_string(), "-32602");
        assert_eq!(
            RpcError::detailed(RpcCode::InvalidRequest, "x").message,
            "Invalid Request: x"
        );
    }
}
