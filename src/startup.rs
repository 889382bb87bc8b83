//! Start-up: resolve the configuration, read the backend's catalog in the
//! sandbox, build the tools, once.
//!
//! Start-up does everything that can fail slowly or be misconfigured before
//! a client is served, so a running server only ever takes the short, fixed
//! path of [`App::call`](crate::call); `tools` and `call` go through the very
//! same code so an owner can see and try exactly what a client would get.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::argv::Invocation;
use crate::cancel::Cancel;
use crate::catalog::{self, CatalogError, Program};
use crate::cli::{Globals, ServeArgs};
use crate::config::{Config, ConfigError, Owner, OwnerInput};
use crate::confine::{Root, RootError};
use crate::dispatch::{ProtocolInput, ServerIdentity};
use crate::limits::{RateLimiter, CATALOG_MAX_BYTES, CATALOG_TIMEOUT};
use crate::protect::{self, PatternError, Protected};
use crate::redact::Redactor;
use crate::run::{self, RunBounds, RunEnd, RunError};
use crate::sandbox::policy::is_loader_or_interpreter_hook;
use crate::sandbox::SandboxMode;
use crate::sandbox::{RunKind, Sandbox, SandboxError};
use crate::tools::{self, ToolReport, ToolSet};

mod files;
pub(crate) use files::Resolved;

pub const SERVER_NAME: &str = "reachweaver-mcp";
pub const SERVER_VERSION: &str = env!("CARGO_PKG_VERSION");
const SERVER_TITLE: &str = "ReachWeaver (read-only, sandboxed)";
const SERVER_DESCRIPTION: &str =
    "Read-only ReachWeaver tools; every call runs in a kernel-confined child process.";

const INSTRUCTIONS: &str = "Read-only tools for the ReachWeaver command line. \
Each tool runs the ReachWeaver command of the same name once, in a sandbox with no network \
that can read only the shared root folder; file arguments are paths inside that folder. \
Every result is a JSON envelope {\"exit_code\": N, \"output\": ...}: exit_code 0 means done \
with nothing to report, 1 means done with findings (a normal answer), and 2 means an error, \
with output {\"error\": {\"code\": \"...\", \"message\": \"...\"}} saying what to change.";

/// Lines and bytes of a failed backend's error output shown at start.
const STDERR_TAIL_LINES: usize = 20;
const STDERR_TAIL_BYTES: usize = 4096;

/// Why the server could not start. Each layer's error is kept whole (its
/// message and its source chain are the ones shown), so `tools --check`
/// can still read every finding off a refused catalog.
#[derive(Debug)]
pub enum StartError {
    Config(ConfigError),
    Root(RootError),
    Protect(PatternError),
    Sandbox(SandboxError),
    /// The backend's path must pass through argv as UTF-8.
    BackendNotUtf8(PathBuf),
    /// `describe` could not be started: what was run, and why not.
    DescribeNotRun {
        what: String,
        source: RunError,
    },
    /// `describe` ran but gave no catalog; the message says how it ended.
    DescribeFailed(String),
    /// The catalog was read and refused.
    Catalog(CatalogError),
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::Config(e) => std::fmt::Display::fmt(e, f),
            StartError::Root(e) => std::fmt::Display::fmt(e, f),
            StartError::Protect(e) => std::fmt::Display::fmt(e, f),
            StartError::Sandbox(e) => std::fmt::Display::fmt(e, f),
            StartError::BackendNotUtf8(p) => {
                write!(f, "--backend {}: is not valid UTF-8", p.display())
            }
            StartError::DescribeNotRun { what, .. } => write!(f, "could not run {what}"),
            StartError::DescribeFailed(message) => f.write_str(message),
            StartError::Catalog(e) => std::fmt::Display::fmt(e, f),
        }
    }
}

impl std::error::Error for StartError {
    // A wrapped layer error stands for itself: its sources follow, not it again.
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StartError::Config(e) => e.source(),
            StartError::Root(e) => e.source(),
            StartError::Protect(e) => e.source(),
            StartError::Sandbox(e) => e.source(),
            StartError::Catalog(e) => e.source(),
            StartError::DescribeNotRun { source, .. } => Some(source),
            StartError::BackendNotUtf8(_) | StartError::DescribeFailed(_) => None,
        }
    }
}

macro_rules! start_error_from {
    ($($variant:ident($t:ty)),*) => {$(
        impl From<$t> for StartError {
            fn from(e: $t) -> Self {
                StartError::$variant(e)
            }
        }
    )*};
}
start_error_from!(
    Config(ConfigError),
    Root(RootError),
    Protect(PatternError),
    Sandbox(SandboxError),
    Catalog(CatalogError)
);

/// A started server: the tools, and everything a call needs, fixed.
pub struct App {
    pub tools: ToolSet,
    pub instructions: String,
    pub max_concurrent: usize,
    /// The configuration resolved at start (what `tools` shows); a call
    /// uses the current one, from [`App::files`].
    pub config: Config,
    pub(crate) report: ToolReport,
    pub(crate) program: Program,
    /// The backend's command line, the root and what no path argument may
    /// name, as resolved at start.
    pub(crate) invocation: Invocation,
    pub(crate) root: Root,
    pub(crate) protected: Protected,
    /// The root and the fixed files as served now, resolved again when one
    /// of them is replaced.
    pub(crate) files: files::Files,
    pub(crate) limiter: RateLimiter,
    pub(crate) redactor: Redactor,
    pub(crate) bounds: RunBounds,
    /// How many protected entries every run hides (found at start), and a
    /// note when the scan for them stopped at its bounds.
    pub(crate) masked: usize,
    /// How many of those are hidden as another name of a protected or fixed file.
    pub(crate) masked_links: usize,
    pub(crate) mask_note: Option<String>,
    /// The backend's file as hashed at start, re-identified before each
    /// call (`None`: it could not be read); `--pin` sets what it must be.
    pub(crate) watch: Option<crate::pins::Watch>,
    /// The SHA-256 of the canonical (RFC 8785) `describe` document.
    pub(crate) describe_sha256: String,
    /// The start-up line (stderr): what is served, how it is confined,
    /// what was granted, and every note and warning.
    pub startup_line: String,
}

impl App {
    /// Start, and print the start-up line.
    pub fn start(globals: &Globals, serve: &ServeArgs) -> Result<App, StartError> {
        let app = Self::start_quiet(globals, serve)?;
        eprintln!("{}", app.startup_line);
        Ok(app)
    }

    /// Start without printing the start-up line, for `mcp-serve`, which
    /// adds what its pool of call workers got before printing it.
    pub fn start_quiet(globals: &Globals, serve: &ServeArgs) -> Result<App, StartError> {
        Self::start_with_helper(globals, serve, None)
    }

    /// `start_quiet`, with the program re-run as the sandbox helper named
    /// (for code whose own process is not the server, such as tests).
    pub fn start_with_helper(
        globals: &Globals,
        serve: &ServeArgs,
        helper: Option<PathBuf>,
    ) -> Result<App, StartError> {
        let owner = Owner::resolve(&OwnerInput {
            globals,
            backend_option: "--backend",
            root: serve.start.root.as_deref(),
            allow_read: &serve.start.allow_read,
        })?;
        warn_dropped_env(&serve.start.pass_env);
        let backend_str = owner
            .backend
            .to_str()
            .ok_or_else(|| StartError::BackendNotUtf8(owner.backend.clone()))?
            .to_string();

        // The catalog is read with the owner's globals only, in a sandbox
        // whose root is the best guess available before the catalog is
        // known. The kernel is probed this once: the final grants, and
        // those of files replaced later, are set on what it found.
        let options =
            owner.sandbox_options(serve.start.sandbox, &serve.start.pass_env, helper.clone())?;
        // The protected patterns are regexes that take milliseconds to
        // compile: done on a thread of their own while the probe and the
        // trial run wait for the sandbox's processes. (Without that thread
        // they are compiled where first needed.)
        let _ = std::thread::Builder::new()
            .name("patterns".into())
            .spawn(crate::protect::warm_defaults);
        let mut detected = Sandbox::detect_untried(&options)?;
        // A call the sandbox can't start is answered within its timeout.
        detected.bound_waits(
            (serve.limits.call_timeout > 0).then(|| Duration::from_secs(serve.limits.call_timeout)),
        );
        let redactor = Redactor::from_env(&serve.start.pass_env);
        warn_unredactable_env(&redactor);
        let globals_argv = owner.globals_argv()?;
        // The backend hashed before its catalog is read: with `--pin` the
        // catalog comes from the very file whose digest is checked against
        // the pins, as every later run does.
        let watch = crate::pins::Watch::start(&owner.backend).ok();
        let exe = watch
            .as_ref()
            .filter(|_| serve.pins.pin.is_some())
            .map(crate::pins::Watch::file);
        let read = |sandbox: &Sandbox| {
            read_catalog(
                sandbox,
                &backend_str,
                &globals_argv,
                &options.root,
                exe.as_deref().map(std::os::fd::AsFd::as_fd),
                &redactor,
            )
        };
        // The catalog read is the sandbox's trial run: a run that started
        // had every layer applied. One that could not start is tried again
        // only if the trial run gave layers up (best-effort mode).
        let (catalog, describe_sha256) = match read(&detected) {
            Err(not_run @ StartError::DescribeNotRun { .. }) => {
                if detected.tried(false)? {
                    read(&detected)?
                } else {
                    return Err(not_run);
                }
            }
            other => {
                detected.tried(true)?;
                other?
            }
        };

        let inputs = files::Inputs {
            globals: globals.clone(),
            root: serve.start.root.clone(),
            allow_read: serve.start.allow_read.clone(),
            protect: serve.start.protect.clone(),
            mode: serve.start.sandbox,
            pass_env: serve.start.pass_env.clone(),
            helper,
            cwd: owner.cwd.clone(),
            backend: owner.backend.clone(),
            backend_str: backend_str.clone(),
            paths: catalog.paths.clone(),
            format_flag: catalog.format_flag.clone(),
            end_of_options: catalog.end_of_options,
        };
        let first = files::resolve(&inputs, &[], detected)?;
        let config = first.config.clone();
        let sandbox = &first.sandbox;
        let mask_note = mask_scan_note(&first.cut);

        // A draft is offered only where its promise holds (or, in
        // best-effort mode, with the start-up line saying it does not).
        // Whatever the mode, a draft writes only the owner's own database.
        let db_refused = serve
            .start
            .allow_drafts
            .then(|| draft_database_refusal(&config))
            .flatten();
        let drafts_refused = (serve.start.allow_drafts && db_refused.is_none())
            .then(|| sandbox.drafts_refused())
            .flatten();
        let refuse_drafts = db_refused.is_some()
            || (drafts_refused.is_some() && serve.start.sandbox == SandboxMode::Require);
        let (tool_set, report) = tools::build(&catalog, serve.start.allow_drafts && !refuse_drafts);
        let mut line = format!(
            "{SERVER_NAME}: serving {} ({} {}): {} tool{}; sandbox: {}; {}",
            config.backend.display(),
            catalog.program.name,
            catalog.program.version,
            tool_set.len(),
            if tool_set.len() == 1 { "" } else { "s" },
            sandbox.layers_line(),
            config.granted_line(
                serve.start.allow_drafts && !refuse_drafts,
                crate::sandbox::backend_folder(&config.backend).as_deref()
            ),
        );
        let promises = sandbox.promises_line(serve.start.allow_drafts && !refuse_drafts);
        if !promises.is_empty() {
            line.push_str(&format!("; {promises}"));
        }
        if let Some(why) = &db_refused {
            line.push_str(&format!(
                "; refused: --allow-drafts ({why}; the draft tool is withheld)"
            ));
        }
        match (&drafts_refused, refuse_drafts) {
            (Some(why), true) => line.push_str(&format!(
                "; refused: --allow-drafts ({why}; the draft tool is withheld: keep the database \
                 alone in its folder, give the server user namespaces, or use --sandbox best-effort)"
            )),
            (Some(why), false) => line.push_str(&format!(
                "; GIVEN UP (best-effort): {why}; drafts are offered without it"
            )),
            _ => {}
        }
        for note in catalog.notes() {
            line.push_str(&format!("; note: {note}"));
        }
        if let Some(note) = &mask_note {
            line.push_str(&format!("; note: {note}"));
        }
        if tool_set.is_empty() {
            line.push_str("; warning: the backend's catalog has no command that can be offered (`tools` says why)");
        }
        if let Some(warning) = missing_database_warning(&config) {
            line.push_str(&format!("; warning: {warning}"));
        }
        if serve.start.allow_drafts
            && !refuse_drafts
            && !tool_set.iter().any(|t| t.kind == RunKind::Draft)
        {
            line.push_str(
                "; warning: --allow-drafts given, but the backend has no eligible `draft` command",
            );
        }
        let max_concurrent = match serve.max_concurrent_calls {
            Some(n) => n as usize,
            None => std::thread::available_parallelism().map_or(1, |n| n.get()),
        };
        let first = std::sync::Arc::new(first);
        Ok(App {
            tools: tool_set,
            instructions: INSTRUCTIONS.to_string(),
            max_concurrent,
            config,
            report,
            program: catalog.program.clone(),
            invocation: first.invocation.clone(),
            root: first.root.clone(),
            protected: first.protected.clone(),
            masked: first.masked,
            masked_links: first.masked_links,
            files: files::Files::new(inputs, std::sync::Arc::clone(&first)),
            limiter: RateLimiter::new(serve.max_calls_per_minute),
            redactor,
            bounds: RunBounds {
                max_stdout: usize::try_from(serve.limits.max_output_bytes).unwrap_or(usize::MAX),
                timeout: (serve.limits.call_timeout > 0)
                    .then(|| Duration::from_secs(serve.limits.call_timeout)),
            },
            mask_note,
            watch,
            describe_sha256,
            startup_line: line,
        })
    }

    /// What the protocol layer serves: the tool lists, the instructions and
    /// this server's identity.
    pub fn protocol_input(&self) -> ProtocolInput {
        ProtocolInput::new(self.tools.iter(), self.instructions.clone(), identity())
            .with_tools_sha256(crate::pins::served_sha256(self.tools.iter()))
    }

    /// What the pins need of this server (docs/PINS.md).
    pub(crate) fn offered(&self) -> crate::pins::Offered<'_> {
        crate::pins::Offered {
            backend: &self.config.backend,
            backend_sha256: self.watch.as_ref().map(crate::pins::Watch::start_sha256),
            version: &self.program.version,
            describe_sha256: &self.describe_sha256,
            tools: &self.tools,
        }
    }

    /// `--pin`: compare with the pins (or write them), and from then on
    /// expect the pinned backend before each call.
    pub(crate) fn pin(
        &mut self,
        settings: &crate::pins::Settings,
    ) -> Result<(), crate::pins::PinError> {
        if let Some(expect) = crate::pins::at_start(&self.offered(), settings)? {
            if let Some(w) = self.watch.as_mut() {
                w.pin(&expect.sha256, expect.refuse);
            }
        }
        Ok(())
    }

    /// What was offered and withheld, and every catalog finding.
    pub fn report(&self) -> &ToolReport {
        &self.report
    }

    /// The longest a call may run (`None`: no limit).
    pub fn call_timeout(&self) -> Option<Duration> {
        self.bounds.timeout
    }
}

/// Why `--allow-drafts` can't be honoured with this configuration's
/// database (`None`: it can). Only a database the owner names with `--db`
/// may be written: the backend's catalog is the backend's own word, and a
/// proposal of `.git/config` or a `Makefile` would otherwise be a file the
/// owner's next `git status` or `make` runs outside any sandbox.
pub fn draft_database_refusal(config: &Config) -> Option<String> {
    match &config.db {
        None => Some(
            "a draft writes only the database you name with --db, and none was given".to_string(),
        ),
        Some(d) if !d.owner_given() => Some(format!(
            "a draft writes only the database you name with --db; the backend's catalog \
             proposes {}, which runs may read but no draft may write (pass --db={} to allow it)",
            d.path.display(),
            d.path.display()
        )),
        Some(_) => None,
    }
}

/// A database that is named but not there yet: every command that reads it
/// fails, and no tool can create it (creating it is a write), so the owner
/// hears it at start rather than from the first failed call.
pub fn missing_database_warning(config: &Config) -> Option<String> {
    let db = config.db.as_ref().filter(|d| !d.exists)?;
    Some(format!(
        "the database {} does not exist yet: tools that read it will fail until you create it \
         (with the backend's own command, such as `reachweaver init`, at your terminal); the \
         next call after that uses it",
        db.path.display()
    ))
}

/// This server as `serverInfo` names it.
pub fn identity() -> ServerIdentity {
    ServerIdentity {
        name: SERVER_NAME.to_string(),
        version: SERVER_VERSION.to_string(),
        title: SERVER_TITLE.to_string(),
        description: SERVER_DESCRIPTION.to_string(),
    }
}

/// `--pass-env` names a run never gets, because they make a loader or an
/// interpreter run code the backend did not choose: say so at start rather
/// than drop them silently.
pub fn dropped_env_names(pass: &[String]) -> Vec<&str> {
    pass.iter()
        .map(String::as_str)
        .filter(|n| *n == "TMPDIR" || is_loader_or_interpreter_hook(n))
        .collect()
}

fn warn_dropped_env(pass: &[String]) {
    let dropped = dropped_env_names(pass);
    if !dropped.is_empty() {
        eprintln!(
            "{SERVER_NAME}: warning: --pass-env {} ignored: a run never gets variables that change how a loader or an interpreter starts (TMPDIR is always the run's own)",
            dropped.join(", ")
        );
    }
}

/// Said at start and by `tools` when the scan for protected files to hide
/// in runs stopped at its bounds, since what it did not reach stays visible.
fn mask_scan_note(cut: &[PathBuf]) -> Option<String> {
    if cut.is_empty() {
        return None;
    }
    let folders: Vec<String> = cut.iter().map(|p| p.display().to_string()).collect();
    Some(format!(
        "the scan for protected files to hide in runs stopped at its limit ({} entries or {} folders deep) in {}: a protected file beyond it is still refused as an argument by its name, but a run that walks the folder can read it unless it lies in a protected folder, and other names (hard links) of protected files beyond it are neither refused nor hidden",
        protect::WALK_MAX_ENTRIES,
        protect::WALK_MAX_DEPTH,
        folders.join(", ")
    ))
}

/// A secret the owner passes to runs but redaction cannot look for: say so
/// rather than let the owner believe it is redacted.
fn warn_unredactable_env(redactor: &Redactor) {
    if !redactor.too_short().is_empty() {
        eprintln!(
            "{SERVER_NAME}: warning: --pass-env {}: the value is shorter than {} characters, too short to redact from results; runs still get it",
            redactor.too_short().join(", "),
            crate::redact::MIN_PASSED_SECRET_LEN
        );
    }
}

/// Run `describe --format=json` once and check what it printed.
fn read_catalog(
    sandbox: &Sandbox,
    backend: &str,
    owner_globals: &[String],
    cwd: &std::path::Path,
    exe: Option<std::os::fd::BorrowedFd<'_>>,
    redactor: &Redactor,
) -> Result<(catalog::Catalog, String), StartError> {
    let argv = Invocation::describe(backend, owner_globals);
    let what = format!("`{backend} describe --format=json`");
    let bounds = RunBounds {
        max_stdout: CATALOG_MAX_BYTES,
        timeout: Some(CATALOG_TIMEOUT),
    };
    let end = run::run_once(
        sandbox,
        RunKind::ReadOnly,
        &argv,
        cwd,
        exe,
        bounds,
        &Cancel::new(),
    )
    .map_err(|source| StartError::DescribeNotRun {
        what: what.clone(),
        source,
    })?;
    let failed = |message: String| Err(StartError::DescribeFailed(message));
    let finished = match end {
        RunEnd::Finished(f) => f,
        RunEnd::TooLarge => {
            return failed(format!(
                "{what} printed more than {} MiB",
                CATALOG_MAX_BYTES >> 20
            ))
        }
        RunEnd::TimedOut => {
            return failed(format!(
                "{what} did not finish within {} seconds",
                CATALOG_TIMEOUT.as_secs()
            ))
        }
        RunEnd::HeldOpen(_) => {
            return failed(format!(
                "{what} left a process running that kept its output open"
            ))
        }
        RunEnd::Cancelled => return failed(format!("{what} was cancelled")),
        RunEnd::MemoryExceeded(bound) => {
            return failed(format!(
                "{what} used more than the {} MiB of memory a run may use",
                bound >> 20
            ))
        }
    };
    if finished.exit != run::Exit::Code(0) {
        let detail = serde_json::from_slice::<Value>(&finished.stdout)
            .ok()
            .and_then(|d| d["error"]["message"].as_str().map(str::to_string))
            .or_else(|| {
                run::error_line(&finished.stderr)
                    .map(|l| redactor.redact_and_cut(&l, run::MAX_MESSAGE_CHARS))
            })
            .unwrap_or_else(|| "no message".to_string());
        let how = match finished.exit {
            run::Exit::Code(c) => format!("exit code {c}"),
            run::Exit::Signal(s) => format!("signal {s}"),
        };
        // Redacted whole, then cut: a cut must not split a secret in two.
        let mut message = format!(
            "{what} failed ({how}): {}",
            run::cut(&redactor.redact_str(&catalog::one_line(&detail)))
        );
        if let Some(tail) = stderr_tail(&finished.stderr, redactor) {
            message.push_str("\nthe last lines of its error output:\n");
            message.push_str(&tail);
        }
        message.push('\n');
        message.push_str(&describe_hint(
            backend,
            crate::sandbox::backend_folder(Path::new(backend)).as_deref(),
        ));
        return failed(message);
    }
    // Catalog text reaches clients through tools/list: it passes the same
    // text redaction as results, before the catalog's own checks cut long
    // texts (a cut first could leave part of a secret unrecognised). Keys
    // are the catalog's own, so no key makes a value secret here.
    crate::audit::note_catalog(&finished.stdout);
    let describe_sha256 = describe_digest(&finished.stdout);
    let bytes = match serde_json::from_slice::<Value>(&finished.stdout) {
        Ok(doc) => {
            let (doc, _) = redactor.redact_strings(doc);
            serde_json::to_vec(&doc).unwrap_or(finished.stdout)
        }
        Err(_) => finished.stdout,
    };
    // Kept typed: `tools --check` reads every finding off the error.
    Ok((catalog::parse(&bytes)?, describe_sha256))
}

/// The digest of the `describe` document's canonical form, so that only a
/// change of content changes it (the bytes if it has no canonical form).
fn describe_digest(stdout: &[u8]) -> String {
    let canonical = serde_json::from_slice::<Value>(stdout)
        .ok()
        .and_then(|doc| crate::canonical::to_string(&doc).ok());
    match canonical {
        Some(text) => crate::audit::chain::sha256_hex(text.as_bytes()),
        None => crate::audit::chain::sha256_hex(stdout),
    }
}

/// What to try when `describe` failed: the run is sandboxed, so a backend
/// that works at the owner's terminal can still fail here for want of a
/// file it was not granted. The server does not run it unconfined to find
/// out (not even once, to diagnose): it says how the owner can compare.
pub fn describe_hint(backend: &str, backend_folder: Option<&Path>) -> String {
    let granted = match backend_folder {
        Some(folder) => format!("read its folder {}", folder.display()),
        None => "read only its own file, not the files beside it, as it is not laid out as \
                 PREFIX/bin/NAME"
            .to_string(),
    };
    format!(
        "hint: in the sandbox the backend may {granted} (plus the root, the home and the system \
         folders). If `{backend} describe --format=json` works when you run it yourself, it \
         needs a file the sandbox does not grant: give that file's folder with --allow-read DIR, \
         or install the backend as PREFIX/bin/NAME outside your home folder (docs/BACKEND.md, \
         \"Where a backend may read\"). `reachweaver-mcp sandbox run --allow-read DIR -- {backend} \
         describe --format=json` runs it in the same sandbox, with its error output."
    )
}

/// The end of a backend's error output, bounded in lines and bytes,
/// control characters replaced, secrets redacted, each line indented.
pub fn stderr_tail(stderr: &[u8], redactor: &Redactor) -> Option<String> {
    let start = stderr.len().saturating_sub(STDERR_TAIL_BYTES);
    let text = String::from_utf8_lossy(&stderr[start..]);
    let lines: Vec<&str> = text
        .lines()
        // A cut in the middle of a line would show half a line: drop it.
        .skip(usize::from(start > 0))
        .filter(|l| !l.trim().is_empty())
        .collect();
    if lines.is_empty() {
        return None;
    }
    let shown = &lines[lines.len().saturating_sub(STDERR_TAIL_LINES)..];
    let cleaned: Vec<String> = shown
        .iter()
        .map(|l| {
            let clean: String = l
                .chars()
                .map(|c| if c.is_control() && c != '\t' { ' ' } else { c })
                .collect();
            format!("  | {}", redactor.redact_str(&clean))
        })
        .collect();
    Some(cleaned.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stderr_tail_is_bounded_and_redacted() {
        let r = Redactor::new([("API_TOKEN".to_string(), "s3cr3t-value-123".to_string())]);
        let mut err = String::new();
        for i in 0..100 {
            err.push_str(&format!("line {i}\n"));
        }
        err.push_str("ValueError: token s3cr3t-value-123 refused\n");
        let tail = stderr_tail(err.as_bytes(), &r).unwrap();
        assert_eq!(tail.lines().count(), STDERR_TAIL_LINES, "{tail}");
        assert!(tail.lines().next().unwrap().contains("line 81"), "{tail}");
        assert!(!tail.contains("s3cr3t-value-123"), "{tail}");
        assert!(tail.ends_with("refused"), "{tail}");

        let huge = "x".repeat(10_000) + "\nlast\n";
        let tail = stderr_tail(huge.as_bytes(), &r).unwrap();
        assert!(tail.len() <= STDERR_TAIL_BYTES + 16, "{}", tail.len());
        assert!(tail.ends_with("last"));
        assert_eq!(stderr_tail(b"\n \n", &r), None);
    }

    /// Shown through anyhow as before the typed error: the same text, the
    /// same chain, nothing said twice.
    #[test]
    fn start_errors_read_as_their_layer_errors() {
        use anyhow::Context;
        let alt = |e: anyhow::Error| format!("{e:#}");
        let bad = || Protected::new(&["a/../b".to_string()], &[]).unwrap_err();
        assert_eq!(
            alt(StartError::from(bad()).into()),
            alt(anyhow::Error::new(bad()))
        );
        let wait = || RunError::Wait(std::io::Error::other("gone"));
        let typed = StartError::DescribeNotRun {
            what: "`b describe --format=json`".into(),
            source: wait(),
        };
        let before = Err::<(), _>(wait())
            .context("could not run `b describe --format=json`")
            .unwrap_err();
        assert_eq!(alt(typed.into()), alt(before));
        assert_eq!(
            StartError::BackendNotUtf8(PathBuf::from("/x")).to_string(),
            "--backend /x: is not valid UTF-8"
        );
        assert!(matches!(
            StartError::from(catalog::parse(b"{}").unwrap_err()),
            StartError::Catalog(_)
        ));
    }

    #[test]
    fn the_describe_hint_names_what_the_backend_may_read() {
        let own = describe_hint("/home/u/rw/backend.js", None);
        assert!(own.contains("read only its own file"), "{own}");
        assert!(own.contains("--allow-read DIR"), "{own}");
        assert!(own.contains("PREFIX/bin/NAME"), "{own}");
        assert!(
            own.contains(
                "sandbox run --allow-read DIR -- /home/u/rw/backend.js describe --format=json"
            ),
            "{own}"
        );
        let tree = describe_hint("/opt/rw/bin/rw", Some(Path::new("/opt/rw")));
        assert!(tree.contains("read its folder /opt/rw "), "{tree}");
        assert!(!tree.contains("own file"), "{tree}");
    }

    #[test]
    fn a_named_database_that_is_not_there_is_warned_about() {
        use crate::config::{Fixed, Source};
        let db = |exists| Fixed {
            path: PathBuf::from("/srv/rw/data/rw.db"),
            source: Source::Option("--db"),
            exists,
            id: None,
        };
        let config = |db| Config {
            backend: PathBuf::from("/opt/rw/bin/rw"),
            home: None,
            db,
            accounts: None,
            profile: None,
            root: PathBuf::from("/srv/rw"),
            root_source: Source::Option("--root"),
            allow_read: Vec::new(),
        };
        let w = missing_database_warning(&config(Some(db(false)))).unwrap();
        assert!(
            w.starts_with(
                "the database /srv/rw/data/rw.db does not exist yet: tools that read it will fail"
            ),
            "{w}"
        );
        assert!(w.ends_with("the next call after that uses it"), "{w}");
        assert_eq!(missing_database_warning(&config(Some(db(true)))), None);
        assert_eq!(missing_database_warning(&config(None)), None);
    }

    #[test]
    fn loader_and_interpreter_hooks_are_named_when_dropped() {
        let pass: Vec<String> = ["LANG", "PYTHONPATH", "LD_PRELOAD", "MY_VAR", "TMPDIR"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(
            dropped_env_names(&pass),
            vec!["PYTHONPATH", "LD_PRELOAD", "TMPDIR"]
        );
    }
}
