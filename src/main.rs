//! reachweaver-mcp: serve the read-only side of a ReachWeaver command line
//! to MCP clients, with every backend run confined by the kernel.
//!
//! `main` only maps `subcommands::run()` to an exit code; each step of a
//! request has its own module, named after the step (the module list in
//! `src/lib.rs`, and docs/ARCHITECTURE.md, "Module map").

use std::process::ExitCode;

use reachweaver_mcp::{cli, output, sandbox, subcommands};

use clap::Parser;

fn main() -> ExitCode {
    // The sandbox helper (`__sandbox-helper`: on Linux the zygote, started
    // once per sandbox, or a run's re-executed helper where runs can't have
    // their own user and PID namespaces) skips argument parsing and stays
    // single-threaded. It is only ever started with this first argument.
    let mut args = std::env::args_os().skip(1);
    if args.next().is_some_and(|a| a == "__sandbox-helper") {
        let policy = args
            .next()
            .and_then(|a| a.into_string().ok())
            .unwrap_or_default();
        if let Err(err) = sandbox::helper_main(&policy) {
            eprintln!("reachweaver-mcp: {err:#}");
        }
        return ExitCode::from(127);
    }
    let cli = match cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => return cli::exit_on_parse_error(err),
    };
    match subcommands::run(cli) {
        Ok(code) => ExitCode::from(code),
        // A reader that closed our stdout (`tools --json | head -1`) got what it wanted.
        Err(err) if output::is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("reachweaver-mcp: {err:#}");
            ExitCode::from(2)
        }
    }
}
