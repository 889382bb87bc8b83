//! `reachweaver-reference`: a ReachWeaver command line that follows the
//! backend contract, so the MCP server can be tested and shown against a
//! real program with a real database instead of a mock.
//!
//! `main` only maps the outcome of `run` to an exit code: 0 done with nothing
//! to report, 1 done with findings, 2 an error (with the error document).

mod analysis;
mod args;
mod commands;
mod dates;
mod db;
mod error;
mod files;
mod render;
mod spec;

use std::io::Write;
use std::process::ExitCode;

use crate::args::Args;
use crate::commands::{Ctx, Outcome, Paths};
use crate::error::CliError;

fn main() -> ExitCode {
    let argv: Result<Vec<String>, _> = std::env::args_os()
        .skip(1)
        .map(|a| a.into_string())
        .collect();
    let (json, result) = match argv {
        Ok(argv) => (args::wants_json(&argv), run(&argv)),
        Err(_) => (
            false,
            Err(CliError::bad_argument(
                "An argument is not valid UTF-8 text.",
            )),
        ),
    };
    let mut stdout = std::io::stdout().lock();
    // A closed stdout (a reader that went away) is not worth a second error.
    match result {
        Ok((outcome, as_json)) => {
            let text = if as_json {
                format!("{}\n", outcome.doc)
            } else {
                outcome
                    .text
                    .clone()
                    .unwrap_or_else(|| render::to_text(&outcome.doc))
            };
            let _ = stdout.write_all(text.as_bytes());
            let _ = stdout.flush();
            ExitCode::from(if outcome.findings { 1 } else { 0 })
        }
        Err(err) => {
            if json {
                let _ = writeln!(stdout, "{}", err.to_document());
                let _ = stdout.flush();
            }
            eprintln!("reachweaver: {} ({})", err.message(), err.code());
            ExitCode::from(2)
        }
    }
}

/// Parses the command line, runs the command, and says whether to print JSON.
fn run(argv: &[String]) -> Result<(Outcome, bool), CliError> {
    let invocation = args::split(argv)?;
    let commands = commands::registry();
    let spec = commands
        .iter()
        .find(|c| c.name == invocation.command)
        .ok_or_else(|| {
            CliError::new(
                "unknown_command",
                format!(
                    "There is no command named {:?}; run `describe` to list them.",
                    invocation.command
                ),
            )
        })?;
    let parsed = Args::parse(spec, invocation.rest)?;
    let cwd = std::env::current_dir().map_err(|e| {
        CliError::new(
            "io_error",
            format!("The current folder cannot be read: {e}."),
        )
    })?;
    let env_home = std::env::var("REACHWEAVER_HOME").ok();
    let ctx = Ctx {
        paths: Paths::resolve(&invocation.globals, env_home.as_deref(), &cwd),
        cwd,
        commands: &commands,
    };
    let as_json = parsed.text("--format") == Some("json");
    let outcome = commands::dispatch(&ctx, spec, &parsed)?;
    Ok((outcome, as_json))
}
