//! reachweaver-mcp: serve the read-only side of a ReachWeaver command line
//! to MCP clients, with every backend run confined by the kernel.
//!
//! `main` only maps `run()` to an exit code; each step of a request has its
//! own module, named after the step (see README "Layout").

use std::process::ExitCode;

use reachweaver_mcp::{app, cli};

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
