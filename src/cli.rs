//! The command line, parsed in two stages: clap turns argv into these raw
//! structs; `config.rs` turns them into checked, absolute settings.
//!
//! Each subcommand takes only its own options: `tools` the start-up ones,
//! `call` those and a call's bounds, `mcp-serve` all of them.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// `--version`: the server's version and the backend catalog versions it reads.
fn version_text() -> &'static str {
    static TEXT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TEXT.get_or_init(|| {
        format!(
            "{} (reads backend catalog version {})",
            env!("CARGO_PKG_VERSION"),
            crate::catalog::CATALOG_VERSION
        )
    })
}

/// Every message this program prints about itself starts with its name,
/// parse errors too (clap's own start with `error:`); help and `--version`
/// are printed as they are.
pub fn exit_on_parse_error(err: clap::Error) -> std::process::ExitCode {
    use clap::error::ErrorKind;
    if matches!(
        err.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        let _ = err.print();
        return std::process::ExitCode::from(u8::try_from(err.exit_code()).unwrap_or(2));
    }
    eprint!("{}", with_program_prefix(&err.render().to_string()));
    std::process::ExitCode::from(2)
}

/// clap's rendered message with `error: ` replaced by the program's name.
pub fn with_program_prefix(rendered: &str) -> String {
    match rendered.strip_prefix("error: ") {
        Some(rest) => format!("reachweaver-mcp: {rest}"),
        None => format!("reachweaver-mcp: {rendered}"),
    }
}

/// `--call-timeout`: a count of whole seconds. `5m` or `1.5` are the
/// likely mistakes, so the message says what to write instead.
fn whole_seconds(value: &str) -> Result<u64, String> {
    value.parse::<u64>().map_err(|_| {
        format!("give whole seconds as digits only, such as 300 for five minutes (not {value:?})")
    })
}

/// `--backend`'s value. An empty one is nearly always a
/// `--backend "$(command -v reachweaver)"` whose lookup found nothing, so it
/// is reported as a backend not found rather than as a missing value.
#[derive(Debug, Clone, Copy)]
struct BackendPath;

/// The message for `--backend ""`.
pub const EMPTY_BACKEND: &str = "--backend: the backend was not found: the value is empty, as \
`$(command -v reachweaver)` gives when `reachweaver` is not installed on PATH; install it, \
pass its absolute path, or leave --backend out to look `reachweaver` up on PATH";

impl clap::builder::TypedValueParser for BackendPath {
    type Value = PathBuf;

    fn parse_ref(
        &self,
        _cmd: &clap::Command,
        _arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<PathBuf, clap::Error> {
        if value.is_empty() {
            return Err(clap::Error::raw(
                clap::error::ErrorKind::ValueValidation,
                format!("{EMPTY_BACKEND}\n"),
            ));
        }
        Ok(PathBuf::from(value))
    }
}

#[derive(Debug, Parser)]
#[command(
    name = "reachweaver-mcp",
    version = version_text(),
    about = "Serve the read-only side of the ReachWeaver command line to MCP clients, \
             every tool call confined by the kernel.",
    long_about = None
)]
pub struct Cli {
    #[command(flatten)]
    pub globals: Globals,
    #[command(subcommand)]
    pub command: CliCommand,
}

/// Options fixed at start and passed to every backend run (docs/BACKEND.md, Global options).
#[derive(Debug, Args, Clone, Default)]
pub struct Globals {
    /// The ReachWeaver command to serve (default: `reachweaver` on PATH).
    #[arg(
        long,
        global = true,
        value_name = "PATH",
        value_parser = BackendPath,
        help_heading = "Backend (fixed at start)"
    )]
    pub backend: Option<PathBuf>,
    /// The backend's home folder (passed as --home).
    #[arg(
        long,
        global = true,
        value_name = "DIR",
        help_heading = "Backend (fixed at start)"
    )]
    pub home: Option<PathBuf>,
    /// The backend's database file (passed as --db).
    #[arg(
        long,
        global = true,
        value_name = "FILE",
        help_heading = "Backend (fixed at start)"
    )]
    pub db: Option<PathBuf>,
    /// The backend's accounts file (passed as --accounts).
    #[arg(
        long,
        global = true,
        value_name = "FILE",
        help_heading = "Backend (fixed at start)"
    )]
    pub accounts: Option<PathBuf>,
    /// The backend's profile file (passed as --profile).
    #[arg(
        long,
        global = true,
        value_name = "FILE",
        help_heading = "Backend (fixed at start)"
    )]
    pub profile: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum CliCommand {
    /// Speak MCP on stdin/stdout until stdin closes (calls already received are answered first).
    #[command(name = "mcp-serve")]
    McpServe(ServeArgs),
    /// List what a client would get: each backend command offered as which tool, or withheld and why.
    Tools {
        /// Print JSON for machines.
        #[arg(long)]
        json: bool,
        /// For backend authors: check the catalog and list every problem; exit 0 clean, 1 warnings, 2 errors.
        #[arg(long)]
        check: bool,
        /// With --check: compare what is offered with the pins in FILE (exit 0 same, 1 changed, 2 error); with --update: rewrite them.
        #[arg(long, value_name = "FILE")]
        pin: Option<PathBuf>,
        /// Rewrite the pins in FILE (--pin) with what is offered now, after reviewing `--check`.
        #[arg(long, requires = "pin", conflicts_with = "check")]
        update: bool,
        #[command(flatten)]
        start: StartArgs,
    },
    /// Run one tool call through the full server path and print its envelope.
    Call {
        /// The tool name (as `tools` lists it).
        tool: String,
        /// One argument as KEY=VALUE (repeatable); VALUE is read as JSON when it parses, else as a string.
        #[arg(long = "arg", value_name = "KEY=VALUE")]
        arg: Vec<String>,
        /// All arguments as one JSON object.
        #[arg(long = "args-json", value_name = "JSON", conflicts_with = "arg")]
        args_json: Option<String>,
        #[command(flatten)]
        start: StartArgs,
        #[command(flatten)]
        limits: CallLimits,
    },
    /// Inspect and exercise the kernel sandbox.
    #[command(subcommand)]
    Sandbox(SandboxCommand),
    /// Work with audit logs written by `mcp-serve --audit-log`.
    #[command(subcommand)]
    Audit(AuditCommand),
    /// Internal: one escape attempt, run inside the sandbox by `sandbox probe`.
    #[command(name = "__probe-attempt", hide = true)]
    ProbeAttempt {
        /// The attempt's name.
        name: String,
        /// Attempt-specific arguments.
        args: Vec<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Check each file's chain (and HMACs with --audit-key); exit 0 intact, 1 broken, 3 torn last line.
    Verify {
        /// The log files, oldest first (a rotated file before the one that follows it).
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
        /// The key the server signed with.
        #[arg(long, value_name = "FILE")]
        audit_key: Option<PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
pub enum SandboxCommand {
    /// Show which sandbox layers this kernel offers and which mcp-serve would use.
    Status {
        /// Print JSON for machines.
        #[arg(long)]
        json: bool,
    },
    /// Run any command under the read-only tool policy; exit code is the command's.
    Run {
        /// The folder the command may read (default: the current folder).
        #[arg(long, value_name = "DIR")]
        root: Option<PathBuf>,
        /// Another path the command may read and execute (repeatable).
        #[arg(long = "allow-read", value_name = "PATH")]
        allow_read: Vec<PathBuf>,
        /// Hide files matching this pattern too (repeatable), as `mcp-serve --protect` does.
        #[arg(long = "protect", value_name = "PATTERN")]
        protect: Vec<String>,
        #[command(flatten)]
        report: DeniedReport,
        /// The command and its arguments.
        #[arg(last = true, required = true, value_name = "CMD")]
        command: Vec<String>,
    },
    /// Try every escape inside the sandbox; exit 1 if any got through.
    Probe {
        /// Print JSON for machines.
        #[arg(long)]
        json: bool,
        /// Switch one layer off to see what the others still hold (says so loudly).
        #[arg(long, value_enum, value_name = "LAYER")]
        without: Option<crate::sandbox::Layer>,
        /// Also write the results as a JUnit XML report (one test per attempt).
        #[arg(long, value_name = "FILE")]
        junit: Option<PathBuf>,
    },
    /// Print an AppArmor profile that lets this binary use user namespaces where Ubuntu restricts them (Linux).
    #[command(
        name = "apparmor-profile",
        after_help = "Install (where kernel.apparmor_restrict_unprivileged_userns=1, e.g. Ubuntu 24.04):\n  \
            reachweaver-mcp sandbox apparmor-profile | sudo tee /etc/apparmor.d/reachweaver-mcp\n  \
            sudo apparmor_parser -r /etc/apparmor.d/reachweaver-mcp\n\
            Remove:\n  \
            sudo apparmor_parser -R /etc/apparmor.d/reachweaver-mcp && sudo rm /etc/apparmor.d/reachweaver-mcp\n\
            The profile names the binary's path: print and install it again after moving the binary."
    )]
    ApparmorProfile {
        /// The binary the profile is for (default: this one), e.g. a packaged copy; its canonical path is used.
        #[arg(long, value_name = "PATH")]
        exe: Option<PathBuf>,
        /// The policy ABI to write (default: the installed apparmor_parser's; 3.0 has no userns rule).
        #[arg(long, value_name = "ABI", value_parser = ["3.0", "4.0"])]
        abi: Option<String>,
    },
}

// The sandbox's own setting; the command line only names it.
pub use crate::sandbox::SandboxMode;

/// Options of every subcommand that starts the backend (`mcp-serve`, `tools`, `call`).
#[derive(Debug, Args, Clone, Default)]
pub struct StartArgs {
    /// Offer the `draft` tool, the only one that may write (inside the database's folder).
    // `=true|false` is accepted too, because a client's config template (an MCP Bundle's
    // args) can only pass a checkbox's value, never leave the flag out.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", default_value_t = false, action = clap::ArgAction::Set)]
    pub allow_drafts: bool,
    /// The folder file arguments must stay inside (default: the home, else the current folder).
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// `require` fails closed when a layer is missing; `best-effort` runs with what the kernel offers.
    #[arg(long, value_enum, default_value_t = SandboxMode::Require)]
    pub sandbox: SandboxMode,
    /// Another path the backend may read and execute (repeatable), e.g. an interpreter's library folder.
    #[arg(long = "allow-read", value_name = "PATH")]
    pub allow_read: Vec<PathBuf>,
    /// Refuse path arguments matching this pattern too (repeatable), e.g. `*.sqlite` or `private/`.
    #[arg(long = "protect", value_name = "PATTERN")]
    pub protect: Vec<String>,
    /// Pass this environment variable through to the backend (repeatable).
    #[arg(long = "pass-env", value_name = "NAME")]
    pub pass_env: Vec<String>,
}

/// Bounds of one tool call (`mcp-serve` and `call`).
#[derive(Debug, Args, Clone, Default)]
pub struct CallLimits {
    /// Largest tool output accepted, in bytes (1024..=4194304).
    #[arg(long, value_name = "N", default_value_t = 262_144,
          value_parser = clap::value_parser!(u64).range(1024..=4_194_304))]
    pub max_output_bytes: u64,
    /// Seconds a call may run before it is killed, in whole seconds (0 = no limit).
    #[arg(long, value_name = "SECS", default_value_t = 120, value_parser = whole_seconds)]
    pub call_timeout: u64,
}

/// Options of `mcp-serve`: those of `call`, plus the server's own.
#[derive(Debug, Args, Clone, Default)]
pub struct ServeArgs {
    #[command(flatten)]
    pub start: StartArgs,
    #[command(flatten)]
    pub limits: CallLimits,
    /// Tool calls allowed to start in any 60-second window.
    #[arg(long, value_name = "N", default_value_t = 60,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_calls_per_minute: u32,
    /// Tool calls that may run at once (default: the number of CPUs).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_concurrent_calls: Option<u32>,
    /// Print the ready-to-paste configuration entry for a desktop client and exit.
    #[arg(long, value_enum, value_name = "CLIENT")]
    pub print_config: Option<ConfigClient>,
    #[command(flatten)]
    pub audit: AuditArgs,
    #[command(flatten)]
    pub pins: PinArgs,
}

/// Tools pinned (docs/PINS.md).
#[derive(Debug, Args, Clone, Default)]
pub struct PinArgs {
    /// Pin the backend and its tools in FILE on first start; later starts compare with it.
    #[arg(long, value_name = "FILE", help_heading = "Pins")]
    pub pin: Option<PathBuf>,
    /// What a change from the pins does: refuse to serve, or serve and log it.
    #[arg(long, value_enum, value_name = "MODE", default_value_t = crate::pins::PinMode::Refuse,
          requires = "pin", help_heading = "Pins")]
    pub pin_mode: crate::pins::PinMode,
}

impl PinArgs {
    pub fn settings(&self) -> crate::pins::Settings {
        crate::pins::Settings {
            file: self.pin.clone(),
            mode: self.pin_mode,
        }
    }
}

/// The audit log (docs/AUDIT.md).
#[derive(Debug, Args, Clone, Default)]
pub struct AuditArgs {
    /// Append one tamper-evident JSON line per request to FILE (start, tools/list, each call, stop).
    #[arg(long, value_name = "FILE", help_heading = "Audit log")]
    pub audit_log: Option<PathBuf>,
    /// Sign every line, and each call's arguments, with HMAC-SHA-256 under the key in FILE (kept away from the log).
    #[arg(long, value_name = "FILE", help_heading = "Audit log")]
    pub audit_key: Option<PathBuf>,
    /// fdatasync the log after every line.
    #[arg(long, help_heading = "Audit log")]
    pub audit_sync: bool,
    /// Refuse a call (audit_failed) whose start cannot be written to the log.
    #[arg(long, help_heading = "Audit log")]
    pub audit_required: bool,
}

impl AuditArgs {
    pub fn settings(&self) -> crate::audit::Settings {
        crate::audit::Settings {
            log: self.audit_log.clone(),
            key: self.audit_key.clone(),
            sync: self.audit_sync,
            required: self.audit_required,
        }
    }
}

impl ServeArgs {
    /// The values clap gives when no option is passed.
    pub fn default_values() -> Self {
        #[derive(Parser)]
        struct Only {
            #[command(flatten)]
            serve: ServeArgs,
        }
        Only::parse_from(["x"]).serve
    }

    /// What `tools` and `call` start with: their own options, the server's defaults for the rest.
    pub fn for_subcommand(start: StartArgs, limits: Option<CallLimits>) -> Self {
        let defaults = Self::default_values();
        ServeArgs {
            start,
            limits: limits.unwrap_or(defaults.limits.clone()),
            ..defaults
        }
    }
}

#[derive(Debug, Copy, Clone, PartialEq, Eq, ValueEnum)]
pub enum ConfigClient {
    /// Claude Desktop's `mcpServers` entry (also what most desktop clients read).
    ClaudeDesktop,
}

/// `sandbox run`'s report of what the command tried and was refused
/// (docs/DENIED.md).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct DeniedReport {
    /// Write what the command tried and was refused (network attempts, system calls) as JSON.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Write it as JUnit XML: one failing case per attempted destination or refused call.
    #[arg(long = "report-junit", value_name = "FILE")]
    pub report_junit: Option<PathBuf>,
    /// Exit 86 when anything was refused (compatibility calls aside), the filter killed the
    /// command, or nobody could watch, whatever the command's exit.
    #[arg(long = "fail-on-denied")]
    pub fail_on_denied: bool,
}
