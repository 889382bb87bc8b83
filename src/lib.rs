//! reachweaver-mcp as a library: every step of a request in its own module,
//! in the order the data flows (frame → jsonrpc → era → dispatch → tools →
//! validate → confine (+ protect) → argv → sandbox → run → redact → envelope). The
//! binary is a thin `main`; the library form lets fuzz targets and
//! benchmarks reach the pure steps directly. What each file does is in
//! docs/ARCHITECTURE.md, "Module map".
//!
//! Only the modules `main`, the fuzz targets and the benchmark use are
//! public; everything else is crate-private, and items inside are
//! `pub(crate)` unless a public module hands them out.

pub mod argv;
pub mod audit;
mod call;
mod cancel;
mod canonical;
pub mod catalog;
mod check;
pub mod cli;
mod client_config;
mod config;
pub mod confine;
pub mod dispatch;
mod envelope;
pub mod era;
pub mod error;
pub mod frame;
pub mod jsonrpc;
mod limits;
mod log;
pub mod output;
pub mod pins;
pub mod protect;
pub mod redact;
mod run;
pub mod sandbox;
mod sandbox_cli;
mod serve;
pub mod startup;
pub mod subcommands;
pub mod tools;
pub mod validate;
