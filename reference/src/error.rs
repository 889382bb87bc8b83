//! The one error type every command returns.
//!
//! The backend contract gives errors exactly one shape on stdout
//! (`{"error": {"code": ..., "message": ...}}`, exit 2), so everything that can
//! go wrong inside is folded into a code and a sentence here, at the point where
//! the cause is still known, instead of being stringified at the edge.

use std::fmt;
use std::path::Path;

use serde_json::{json, Value};

/// A failure that ends the run with exit code 2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CliError {
    code: &'static str,
    message: String,
}

impl CliError {
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        CliError {
            code,
            message: message.into(),
        }
    }

    pub fn bad_argument(message: impl Into<String>) -> Self {
        CliError::new("bad_argument", message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        CliError::new("not_found", message)
    }

    /// A file the command needs could not be read; the message names it so the
    /// owner knows which one.
    pub fn unreadable(path: &Path, err: &std::io::Error) -> Self {
        if err.kind() == std::io::ErrorKind::NotFound {
            CliError::new(
                "file_not_found",
                format!("{} does not exist.", path.display()),
            )
        } else {
            CliError::new(
                "io_error",
                format!("{} could not be read: {}.", path.display(), err),
            )
        }
    }

    pub fn invalid_file(path: &Path, why: impl fmt::Display) -> Self {
        CliError::new(
            "invalid_file",
            format!("{} is not valid: {}.", path.display(), why),
        )
    }

    pub fn database(err: &rusqlite::Error) -> Self {
        CliError::new(
            "database_error",
            format!("The database query failed: {err}."),
        )
    }

    pub fn code(&self) -> &'static str {
        self.code
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    /// The error document of the contract.
    pub fn to_document(&self) -> Value {
        json!({"error": {"code": self.code, "message": self.message}})
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

impl std::error::Error for CliError {}

impl From<rusqlite::Error> for CliError {
    fn from(err: rusqlite::Error) -> Self {
        CliError::database(&err)
    }
}
