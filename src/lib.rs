//! reachweaver-mcp as a library: every step of a request in its own module,
//! in the order the data flows (frame → jsonrpc → era → dispatch → tools →
//! validate → confine (+ protect) → argv → sandbox → run → redact → envelope). The
//! binary is a thin `main`; the library form lets fuzz targets and
//! benchmarks reach the pure steps directly.

pub mod app;
pub mod argv;
pub mod call;
pub mod cancel;
pub mod catalog;
pub mod check;
pub mod cli;
pub mod client_config;
pub mod config;
pub mod confine;
pub mod dispatch;
pub mod envelope;
pub mod era;
pub mod error;
pub mod frame;
pub mod jsonrpc;
pub mod limits;
pub mod log;
pub mod protect;
pub mod redact;
pub mod run;
pub mod sandbox;
pub mod sandbox_cli;
pub mod serve;
pub mod startup;
pub mod tools;
pub mod validate;
