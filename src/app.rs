//! The edge: subcommands, start-up (backend, sandbox, catalog, tools, built
//! once), and the per-call path shared by `mcp-serve` and `call`.
//!
//! INTERFACE (used by dispatch.rs and serve.rs; keep these names):
//! - `App { tools, server_name, server_version, instructions, max_concurrent }`
//! - `App::start(&Globals, &ServeArgs) -> anyhow::Result<App>`
//! - `App::call(&self, &Tool, &Map<String, Value>, &Cancel) -> CallOutcome`
//!   (validates, rate-limits, runs sandboxed, maps, redacts, logs one line).

use serde_json::{Map, Value};

use crate::cancel::Cancel;
use crate::cli::{Cli, Command, Globals, ServeArgs};
use crate::envelope::Envelope;
use crate::tools::{Tool, ToolSet};

pub const SERVER_NAME: &str = "reachweaver-mcp";
pub const SERVER_VERSION: &str = env!("CARGO_PKG_VERSION");

pub struct App {
    pub tools: ToolSet,
    pub instructions: String,
    pub max_concurrent: usize,
}

pub enum CallOutcome {
    Done(Envelope),
    /// Cancelled by the client: nothing is written for it.
    Cancelled,
}

impl App {
    pub fn start(_globals: &Globals, _serve: &ServeArgs) -> anyhow::Result<App> {
        anyhow::bail!("not yet")
    }

    pub fn call(&self, _tool: &Tool, _args: &Map<String, Value>, _cancel: &Cancel) -> CallOutcome {
        CallOutcome::Cancelled
    }
}

pub fn run(cli: Cli) -> anyhow::Result<u8> {
    match cli.command {
        Command::McpServe(args) => {
            let app = App::start(&cli.globals, &args)?;
            crate::serve::serve(std::sync::Arc::new(app));
            Ok(0)
        }
        Command::Sandbox(cmd) => crate::sandbox::cli(&cli.globals, cmd),
        Command::SandboxHelper { policy } => crate::sandbox::helper_main(&policy),
        Command::ProbeAttempt { name, args } => Ok(crate::sandbox::probe_attempt(&name, &args)),
        Command::Tools { .. } | Command::Call { .. } => {
            eprintln!("reachweaver-mcp: not yet");
            Ok(2)
        }
    }
}
