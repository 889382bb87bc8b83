//! reachweaver-mcp: serve the read-only side of a ReachWeaver command line
//! to MCP clients, with every backend run confined by the kernel.
//!
//! `main` only maps `run()` to an exit code; each step of a request has its
//! own module, named after the step (see README "Layout").

mod app;
mod argv;
mod cancel;
mod catalog;
mod cli;
mod client_config;
mod confine;
mod dispatch;
mod envelope;
mod era;
mod error;
mod frame;
mod jsonrpc;
mod limits;
mod log;
mod redact;
mod run;
mod sandbox;
mod serve;
mod tools;
mod validate;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    match app::run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            eprintln!("reachweaver-mcp: {err:#}");
            ExitCode::from(2)
        }
    }
}
