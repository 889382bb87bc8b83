//! The backend's catalog (docs/BACKEND.md, Catalog), parsed and checked
//! once at start.
//!
//! Everything the server offers is derived from this one document, so a
//! catalog the server misreads would become tools that run the wrong thing.
//! Nothing here guesses, but a problem is contained where it is: an unknown
//! type, tag or field, a malformed name or two arguments that would map to
//! the same property withhold that one command (a backend's new release must
//! not take the whole server down), while a problem with the document itself
//! (not JSON, an unknown `catalog` version, no `commands` array) refuses it.
//!
//! Checking never stops at the first problem: every one is collected as a
//! [`Diagnostic`] with a JSON pointer, so `tools --check` can show a backend
//! author all of them at once.
//!
//! Text the backend writes for people (program name and version, summaries,
//! argument help) reaches clients and log lines, so it is cleaned here, once:
//! control characters and bidirectional overrides are removed and lengths
//! are capped.

mod model;
mod parse;
mod text;

pub use self::model::*;
pub use self::parse::{is_valid_name, parse, FLAG_NAME_PATTERN, POSITIONAL_NAME_PATTERN};
pub use self::text::{clean_text, one_line, quote, CleanText};

#[cfg(test)]
pub(crate) use self::parse::tests;
