//! The edge: subcommands, start-up (backend, sandbox, catalog, tools, built
//! once), and the per-call path shared by `mcp-serve` and `call`.
//!
//! Start-up does everything that can fail slowly or be misconfigured before
//! a client is served, so a running server only ever takes the short, fixed
//! path of [`App::call`]; `tools` and `call` go through the very same code so
//! an owner can see and try exactly what a client would get.
//!
//! INTERFACE (used by dispatch.rs and serve.rs; keep these names):
//! - `App { tools, instructions, max_concurrent }`
//! - `App::start(&Globals, &ServeArgs) -> anyhow::Result<App>`
//! - `App::call(&self, &Tool, &Map<String, Value>, &Cancel) -> CallOutcome`
//!   (validates, rate-limits, runs sandboxed, maps, redacts, logs one line).

use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use serde_json::{json, Map, Value};

use crate::argv::Invocation;
use crate::cancel::Cancel;
use crate::catalog::{self, Program};
use crate::cli::{Cli, Command, Globals, ServeArgs};
use crate::confine::Root;
use crate::envelope::Envelope;
use crate::error::ToolError;
use crate::limits::{RateLimiter, CATALOG_MAX_BYTES, CATALOG_TIMEOUT};
use crate::redact::Redactor;
use crate::run::{self, Bounds, CallEnd, RunEnd};
use crate::sandbox::{RunKind, Sandbox, SandboxOptions};
use crate::tools::{self, Report, Tool, ToolKind, ToolSet, Verdict};
use crate::validate;

pub const SERVER_NAME: &str = "reachweaver-mcp";
pub const SERVER_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The command served when `--backend` is not given.
const DEFAULT_BACKEND: &str = "reachweaver";

const INSTRUCTIONS: &str = "Read-only tools for the ReachWeaver command line. \
Each tool runs the ReachWeaver command of the same name once, in a sandbox with no network \
that can read only the shared root folder; file arguments are paths inside that folder. \
Every result is a JSON envelope {\"exit_code\": N, \"output\": ...}: exit_code 0 means done \
with nothing to report, 1 means done with findings (a normal answer), and 2 means an error, \
with output {\"error\": {\"code\": \"...\", \"message\": \"...\"}} saying what to change.";

pub struct App {
    pub tools: ToolSet,
    pub instructions: String,
    pub max_concurrent: usize,
    report: Report,
    backend: PathBuf,
    program: Program,
    invocation: Invocation,
    root: Root,
    sandbox: Sandbox,
    limiter: RateLimiter,
    redactor: Redactor,
    bounds: Bounds,
}

pub enum CallOutcome {
    Done(Envelope),
    /// Cancelled by the client: nothing is written for it.
    Cancelled,
}

/// The four global options, in contract order (CONTRACT.md §1).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct GlobalPaths {
    home: Option<PathBuf>,
    db: Option<PathBuf>,
    accounts: Option<PathBuf>,
    profile: Option<PathBuf>,
}

impl GlobalPaths {
    fn iter(&self) -> impl Iterator<Item = (&'static str, &PathBuf)> {
        [
            ("--home", &self.home),
            ("--db", &self.db),
            ("--accounts", &self.accounts),
            ("--profile", &self.profile),
        ]
        .into_iter()
        .filter_map(|(flag, p)| p.as_ref().map(|p| (flag, p)))
    }

    fn argv(&self) -> anyhow::Result<Vec<String>> {
        self.iter()
            .map(|(flag, p)| Ok(format!("{flag}={}", utf8(p, flag)?)))
            .collect()
    }
}

impl App {
    pub fn start(globals: &Globals, serve: &ServeArgs) -> anyhow::Result<App> {
        Self::start_with_helper(globals, serve, None)
    }

    /// `start`, with the program re-run as the sandbox helper named (for
    /// code whose own process is not the server, such as tests).
    pub fn start_with_helper(
        globals: &Globals,
        serve: &ServeArgs,
        helper: Option<PathBuf>,
    ) -> anyhow::Result<App> {
        let cwd = std::env::current_dir().context("cannot read the current folder")?;
        let backend = resolve_backend(globals.backend.as_deref(), &cwd)?;
        let backend_str = utf8(&backend, "--backend")?;

        let owner = GlobalPaths {
            home: globals.home.as_deref().map(|p| absolute(&cwd, p)),
            db: globals.db.as_deref().map(|p| absolute(&cwd, p)),
            accounts: globals.accounts.as_deref().map(|p| absolute(&cwd, p)),
            profile: globals.profile.as_deref().map(|p| absolute(&cwd, p)),
        };
        let given_root = serve.root.as_deref().map(|r| absolute(&cwd, r));

        let mut options = SandboxOptions {
            mode: serve.sandbox,
            backend: backend.clone(),
            root: PathBuf::new(),
            read: owner.iter().map(|(_, p)| p.clone()).collect(),
            db: owner.db.clone(),
            allow_read: serve.allow_read.iter().map(|p| absolute(&cwd, p)).collect(),
            pass_env: serve.pass_env.clone(),
            helper,
        };

        // The catalog is read with the owner's globals only, in a sandbox
        // whose root is the best guess available before the catalog is known.
        let provisional = given_root
            .clone()
            .or_else(|| owner.home.clone())
            .unwrap_or_else(|| cwd.clone());
        let provisional = Root::new(&provisional).map_err(|e| anyhow!("{e}"))?;
        options.root = provisional.path().to_path_buf();
        let sandbox = Sandbox::detect(&options).map_err(|e| anyhow!("{e}"))?;
        let catalog = read_catalog(&sandbox, &backend_str, &owner.argv()?, provisional.path())?;

        let fixed = GlobalPaths {
            home: owner.home.clone().or_else(|| catalog.paths.home.clone()),
            db: owner.db.clone().or_else(|| catalog.paths.db.clone()),
            accounts: owner
                .accounts
                .clone()
                .or_else(|| catalog.paths.accounts.clone()),
            profile: owner
                .profile
                .clone()
                .or_else(|| catalog.paths.profile.clone()),
        };
        let root_path = given_root
            .or_else(|| fixed.home.clone())
            .unwrap_or_else(|| cwd.clone());
        let root = Root::new(&root_path).map_err(|e| anyhow!("{e}"))?;
        if let Some(home) =
            std::env::var_os("HOME").and_then(|h| PathBuf::from(h).canonicalize().ok())
        {
            if home == root.path() {
                eprintln!(
                    "{SERVER_NAME}: warning: the root is your home folder {}; tool calls can read every file in it. Pass --root with a smaller folder.",
                    root.path().display()
                );
            }
        }

        options.root = root.path().to_path_buf();
        options.read = fixed
            .iter()
            .filter(|(flag, p)| owner.iter().any(|(f, _)| f == *flag) || p.exists())
            .map(|(_, p)| p.clone())
            .collect();
        options.db = fixed.db.clone();
        let sandbox = Sandbox::detect(&options).map_err(|e| anyhow!("{e}"))?;

        let (tool_set, report) = tools::build(&catalog, serve.allow_drafts);
        let invocation = Invocation::new(
            backend_str,
            fixed.argv()?,
            catalog.format_flag.clone(),
            catalog.end_of_options,
        );

        let mut line = format!(
            "{SERVER_NAME}: serving {} ({} {}): {} tool{}; sandbox: {}",
            backend.display(),
            catalog.program.name,
            catalog.program.version,
            tool_set.len(),
            if tool_set.len() == 1 { "" } else { "s" },
            sandbox.layers_line()
        );
        if tool_set.is_empty() {
            line.push_str("; warning: the backend's catalog has no command that can be offered (`tools` says why)");
        }
        if serve.allow_drafts && !tool_set.iter().any(|t| t.kind == ToolKind::Draft) {
            line.push_str(
                "; warning: --allow-drafts given, but the backend has no eligible `draft` command",
            );
        }
        eprintln!("{line}");

        let max_concurrent = match serve.max_concurrent_calls {
            Some(n) => n as usize,
            None => std::thread::available_parallelism().map_or(1, |n| n.get()),
        };
        Ok(App {
            tools: tool_set,
            instructions: INSTRUCTIONS.to_string(),
            max_concurrent,
            report,
            backend,
            program: catalog.program.clone(),
            invocation,
            root,
            sandbox,
            limiter: RateLimiter::new(serve.max_calls_per_minute),
            redactor: Redactor::from_env(),
            bounds: Bounds {
                max_stdout: usize::try_from(serve.max_output_bytes).unwrap_or(usize::MAX),
                timeout: (serve.call_timeout > 0).then(|| Duration::from_secs(serve.call_timeout)),
            },
        })
    }

    /// Validate, confine, build argv, rate-limit, run, map, redact; one log line.
    pub fn call(&self, tool: &Tool, args: &Map<String, Value>, cancel: &Cancel) -> CallOutcome {
        let started = Instant::now();
        let log = |exit: &str, extra: &str| {
            crate::log::line(format!(
                "call tool={} exit={exit}{extra} ms={}",
                tool.name,
                started.elapsed().as_millis()
            ));
        };

        let argv = match self.prepare(tool, args) {
            Ok(argv) => argv,
            Err(e) => {
                log("2", &format!(" error={}", e.code()));
                return CallOutcome::Done(self.finish(Envelope::from_error(&e)));
            }
        };
        if cancel.is_cancelled() {
            log("cancelled", "");
            return CallOutcome::Cancelled;
        }
        if let Err(e) = self.limiter.try_start() {
            log("2", &format!(" error={}", e.code()));
            return CallOutcome::Done(self.finish(Envelope::from_error(&e)));
        }

        let kind = match tool.kind {
            ToolKind::ReadOnly => RunKind::ReadOnly,
            ToolKind::Draft => RunKind::Draft,
        };
        match run::run_tool(
            &self.sandbox,
            kind,
            &argv,
            self.root.path(),
            self.bounds,
            cancel,
        ) {
            CallEnd::Answer(envelope) => {
                let envelope = self.finish(envelope);
                let bytes = envelope.to_text().len();
                log(&envelope.exit_code.to_string(), &format!(" bytes={bytes}"));
                CallOutcome::Done(envelope)
            }
            CallEnd::Failed(e) => {
                let envelope = self.finish(Envelope::from_error(&e));
                let bytes = envelope.to_text().len();
                log("2", &format!(" error={} bytes={bytes}", e.code()));
                CallOutcome::Done(envelope)
            }
            CallEnd::TimedOut(e) => {
                let envelope = self.finish(Envelope::from_error(&e));
                let bytes = envelope.to_text().len();
                log("timeout", &format!(" bytes={bytes}"));
                CallOutcome::Done(envelope)
            }
            CallEnd::Cancelled => {
                log("cancelled", "");
                CallOutcome::Cancelled
            }
        }
    }

    fn prepare(&self, tool: &Tool, args: &Map<String, Value>) -> Result<Vec<String>, ToolError> {
        let call = validate::validate(tool, args)?.confine(&self.root)?;
        self.invocation.build(&call)
    }

    /// Every string of the envelope passes through redaction before it leaves.
    fn finish(&self, envelope: Envelope) -> Envelope {
        Envelope {
            exit_code: envelope.exit_code,
            output: self.redactor.redact_value(envelope.output),
        }
    }

    /// `tools --json`: stable machine form.
    fn tools_json(&self) -> Value {
        json!({
            "backend": {
                "path": self.backend.display().to_string(),
                "name": self.program.name,
                "version": self.program.version,
            },
            "root": self.root.path().display().to_string(),
            "globals": self.invocation.globals(),
            "tool_count": self.tools.len(),
            "commands": self.report.to_json(&self.tools),
        })
    }

    /// `tools`: for people.
    fn tools_text(&self) -> String {
        let mut out = format!(
            "backend: {} ({} {})\nroot: {}\n",
            self.backend.display(),
            self.program.name,
            self.program.version,
            self.root.path().display()
        );
        if !self.invocation.globals().is_empty() {
            out.push_str(&format!(
                "globals: {}\n",
                self.invocation.globals().join(" ")
            ));
        }
        out.push_str(&format!(
            "{} of {} commands offered as tools\n\n",
            self.tools.len(),
            self.report.commands.len()
        ));
        out.push_str(&self.report.to_text());
        out
    }
}

/// Run `describe --format=json` once and check what it printed.
fn read_catalog(
    sandbox: &Sandbox,
    backend: &str,
    owner_globals: &[String],
    cwd: &Path,
) -> anyhow::Result<catalog::Catalog> {
    let argv = Invocation::describe(backend, owner_globals);
    let what = format!("`{backend} describe --format=json`");
    let bounds = Bounds {
        max_stdout: CATALOG_MAX_BYTES,
        timeout: Some(CATALOG_TIMEOUT),
    };
    let end = run::run_once(
        sandbox,
        RunKind::ReadOnly,
        &argv,
        cwd,
        bounds,
        &Cancel::new(),
    )
    .map_err(|e| anyhow!("could not run {what}: {e}"))?;
    let finished = match end {
        RunEnd::Finished(f) => f,
        RunEnd::TooLarge => bail!("{what} printed more than {} MiB", CATALOG_MAX_BYTES >> 20),
        RunEnd::TimedOut => bail!(
            "{what} did not finish within {} seconds",
            CATALOG_TIMEOUT.as_secs()
        ),
        RunEnd::HeldOpen(_) => bail!("{what} left a process running that kept its output open"),
        RunEnd::Cancelled => bail!("{what} was cancelled"),
    };
    if finished.exit != run::Exit::Code(0) {
        let detail = serde_json::from_slice::<Value>(&finished.stdout)
            .ok()
            .and_then(|d| d["error"]["message"].as_str().map(str::to_string))
            .or_else(|| run::first_line(&finished.stderr))
            .unwrap_or_else(|| "no message".to_string());
        let how = match finished.exit {
            run::Exit::Code(c) => format!("exit code {c}"),
            run::Exit::Signal(s) => format!("signal {s}"),
        };
        bail!("{what} failed ({how}): {detail}");
    }
    catalog::parse(&finished.stdout).map_err(|e| anyhow!("{e}"))
}

/// `--backend`, else `reachweaver` on PATH, as an absolute canonical executable.
fn resolve_backend(given: Option<&Path>, cwd: &Path) -> anyhow::Result<PathBuf> {
    let candidate = match given {
        Some(p) if p.as_os_str().as_bytes().contains(&b'/') => cwd.join(p),
        Some(p) => find_on_path(p).ok_or_else(|| {
            anyhow!("cannot find the backend `{}` on PATH; pass --backend with its path", p.display())
        })?,
        None => find_on_path(Path::new(DEFAULT_BACKEND)).ok_or_else(|| {
            anyhow!("cannot find `{DEFAULT_BACKEND}` on PATH; install it or pass --backend with its path")
        })?,
    };
    let canonical = candidate
        .canonicalize()
        .with_context(|| format!("the backend {} cannot be used", candidate.display()))?;
    if !is_executable_file(&canonical) {
        bail!(
            "the backend {} is not an executable file",
            canonical.display()
        );
    }
    Ok(canonical)
}

/// `p` against `cwd`: canonical when it exists (so the sandbox grants the
/// real file), else with `.` components dropped and `..` left for the
/// backend to resolve as it would on the command line.
fn absolute(cwd: &Path, p: &Path) -> PathBuf {
    let joined = cwd.join(p);
    if let Ok(canonical) = joined.canonicalize() {
        return canonical;
    }
    let mut out = PathBuf::new();
    for c in joined.components() {
        if c != std::path::Component::CurDir {
            out.push(c.as_os_str());
        }
    }
    out
}

fn find_on_path(name: &Path) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(name))
        .find(|p| is_executable_file(p))
}

fn is_executable_file(p: &Path) -> bool {
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

fn utf8(p: &Path, what: &str) -> anyhow::Result<String> {
    p.to_str()
        .map(str::to_string)
        .ok_or_else(|| anyhow!("{what} {} is not valid UTF-8", p.display()))
}

/// `--arg KEY=VALUE ...` or `--args-json '{...}'` -> the arguments object.
fn call_arguments(pairs: &[String], json_text: Option<&str>) -> anyhow::Result<Map<String, Value>> {
    if let Some(text) = json_text {
        return match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(m)) => Ok(m),
            Ok(_) => bail!("--args-json must be a JSON object"),
            Err(e) => bail!("--args-json is not valid JSON: {e}"),
        };
    }
    let mut grouped: Vec<(String, Vec<Value>)> = Vec::new();
    for pair in pairs {
        let (key, raw) = pair
            .split_once('=')
            .ok_or_else(|| anyhow!("--arg `{pair}` has no `=`; write --arg KEY=VALUE"))?;
        if key.is_empty() {
            bail!("--arg `{pair}` has an empty key");
        }
        let value =
            serde_json::from_str::<Value>(raw).unwrap_or_else(|_| Value::String(raw.to_string()));
        match grouped.iter_mut().find(|(k, _)| k == key) {
            Some((_, values)) => values.push(value),
            None => grouped.push((key.to_string(), vec![value])),
        }
    }
    Ok(grouped
        .into_iter()
        .map(|(k, mut values)| {
            let v = if values.len() == 1 {
                values.remove(0)
            } else {
                Value::Array(values)
            };
            (k, v)
        })
        .collect())
}

pub fn run(cli: Cli) -> anyhow::Result<u8> {
    match cli.command {
        Command::McpServe(args) => {
            if args.print_config.is_some() {
                return crate::client_config::print(&cli.globals, &args);
            }
            let app = App::start(&cli.globals, &args)?;
            crate::serve::serve(std::sync::Arc::new(app));
            Ok(0)
        }
        Command::Sandbox(cmd) => crate::sandbox::cli(&cli.globals, cmd),
        Command::SandboxHelper { policy } => crate::sandbox::helper_main(&policy),
        Command::ProbeAttempt { name, args } => Ok(crate::sandbox::probe_attempt(&name, &args)),
        Command::Tools { json, serve } => {
            let app = App::start(&cli.globals, &serve)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&app.tools_json())?);
            } else {
                print!("{}", app.tools_text());
            }
            Ok(0)
        }
        Command::Call {
            tool,
            arg,
            args_json,
            serve,
        } => {
            let args = call_arguments(&arg, args_json.as_deref())?;
            let app = App::start(&cli.globals, &serve)?;
            let Some(t) = app.tools.get(&tool) else {
                eprintln!("{SERVER_NAME}: {}", unknown_tool(&app, &tool));
                return Ok(2);
            };
            match app.call(t, &args, &Cancel::new()) {
                CallOutcome::Done(envelope) => {
                    println!("{}", envelope.to_text());
                    Ok(u8::try_from(envelope.exit_code).unwrap_or(2))
                }
                CallOutcome::Cancelled => {
                    eprintln!("{SERVER_NAME}: the call was cancelled");
                    Ok(2)
                }
            }
        }
    }
}

/// Say why `name` is not a tool: withheld (and why), or unknown.
fn unknown_tool(app: &App, name: &str) -> String {
    let withheld = app.report.get(name).or_else(|| {
        app.report
            .commands
            .iter()
            .find(|c| tools::tool_name(&c.command) == name)
    });
    match withheld.map(|c| (&c.command, &c.verdict)) {
        Some((command, Verdict::Withheld { reasons })) => {
            let list: Vec<String> = reasons.iter().map(ToString::to_string).collect();
            format!(
                "the backend command `{command}` is not offered as a tool: {}",
                list.join("; ")
            )
        }
        Some((command, Verdict::Offered { tool, .. })) => {
            format!("the backend command `{command}` is offered as the tool `{tool}`; call that")
        }
        None => format!("no tool named `{name}`; `{SERVER_NAME} tools` lists what is offered"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::SandboxMode;
    use std::sync::Arc;

    /// An app serving the integration tests' fake backend.
    fn fixture_app(max_calls: u32) -> (tempfile::TempDir, App) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir_all(&root).unwrap();
        let globals = Globals {
            backend: Some(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/shelfcheck")),
            db: Some(dir.path().join("shelf.db")),
            ..Globals::default()
        };
        let serve = ServeArgs {
            root: Some(root),
            max_output_bytes: 262_144,
            max_calls_per_minute: max_calls,
            call_timeout: 60,
            sandbox: SandboxMode::BestEffort,
            ..ServeArgs::default()
        };
        let helper = crate::sandbox::helper_next_to_test_binary();
        let app = App::start_with_helper(&globals, &serve, Some(helper)).unwrap();
        (dir, app)
    }

    fn call(app: &App, tool: &str, args: Value) -> Envelope {
        let tool = app.tools.get(tool).unwrap();
        match app.call(tool, args.as_object().unwrap(), &Cancel::new()) {
            CallOutcome::Done(e) => e,
            CallOutcome::Cancelled => panic!("cancelled"),
        }
    }

    fn code(e: &Envelope) -> &str {
        e.output["error"]["code"].as_str().unwrap_or("")
    }

    #[test]
    fn rate_limit_counts_started_calls_only() {
        let (_dir, app) = fixture_app(2);
        assert_eq!(call(&app, "selftest", json!({"mode": "ok"})).exit_code, 0);
        for _ in 0..3 {
            assert_eq!(
                code(&call(&app, "selftest", json!({"mode": "nope"}))),
                "invalid_argument"
            );
        }
        // A failed run still started, so it counts.
        assert_eq!(
            code(&call(&app, "selftest", json!({"mode": "crash"}))),
            "backend_failed"
        );
        let refused = call(&app, "selftest", json!({"mode": "ok"}));
        assert_eq!(code(&refused), "rate_limited");
        assert!(refused.output["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Wait "));
        // Validation comes first and stays exact while the budget is spent.
        assert_eq!(
            code(&call(&app, "selftest", json!({"mode": "nope"}))),
            "invalid_argument"
        );
    }

    #[test]
    fn cancelling_a_running_call_answers_nothing_and_returns_promptly() {
        let (_dir, app) = fixture_app(60);
        let tool = app.tools.get("selftest").unwrap();
        let cancel = Cancel::new();
        let c2 = cancel.clone();
        let canceller = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            c2.cancel();
        });
        let t = Instant::now();
        let args = json!({"mode": "slow", "seconds": 30});
        let outcome = app.call(tool, args.as_object().unwrap(), &cancel);
        canceller.join().unwrap();
        assert!(matches!(outcome, CallOutcome::Cancelled));
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    }

    #[test]
    fn a_call_cancelled_before_it_starts_does_not_run() {
        let (dir, app) = fixture_app(60);
        let tool = app.tools.get("selftest").unwrap();
        let cancel = Cancel::new();
        cancel.cancel();
        let args = json!({"mode": "ok"});
        assert!(matches!(
            app.call(tool, args.as_object().unwrap(), &cancel),
            CallOutcome::Cancelled
        ));
        let ran = std::fs::read_to_string(dir.path().join("shelf.db")).unwrap_or_default();
        assert!(!ran.contains("ran selftest"), "{ran}");
    }

    #[test]
    fn calls_run_concurrently_from_worker_threads() {
        let (_dir, app) = fixture_app(60);
        let app = Arc::new(app);
        let t = Instant::now();
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let app = Arc::clone(&app);
                std::thread::spawn(move || {
                    call(&app, "selftest", json!({"mode": "slow", "seconds": 1}))
                })
            })
            .collect();
        for w in workers {
            assert_eq!(w.join().unwrap().output, json!({"status": "slept"}));
        }
        assert!(
            t.elapsed() < Duration::from_millis(1900),
            "ran one after the other: {:?}",
            t.elapsed()
        );
    }

    #[test]
    fn instructions_and_concurrency_are_set() {
        let (_dir, app) = fixture_app(60);
        assert!(app.instructions.contains("exit_code"));
        assert!(app.max_concurrent >= 1);
        assert_eq!(app.tools.len(), 4);
    }

    #[test]
    fn app_can_be_shared_between_worker_threads() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<App>();
    }

    #[test]
    fn arg_pairs_parse_as_json_or_string_and_repeat_into_arrays() {
        let pairs: Vec<String> = [
            "days=14",
            "strict=true",
            "name=q3 plan",
            "ch=x",
            "ch=linkedin",
            "label=\"14\"",
            "eq=a=b",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let m = call_arguments(&pairs, None).unwrap();
        assert_eq!(
            Value::Object(m),
            json!({"days": 14, "strict": true, "name": "q3 plan", "ch": ["x", "linkedin"], "label": "14", "eq": "a=b"})
        );
    }

    #[test]
    fn arg_pairs_and_json_errors() {
        assert!(call_arguments(&["nokey".to_string()], None).is_err());
        assert!(call_arguments(&["=v".to_string()], None).is_err());
        assert!(call_arguments(&[], Some("[1]")).is_err());
        assert!(call_arguments(&[], Some("{")).is_err());
        assert_eq!(
            call_arguments(&[], Some(r#"{"a": [1]}"#)).unwrap()["a"],
            json!([1])
        );
        assert!(call_arguments(&[], None).unwrap().is_empty());
    }

    #[test]
    fn global_paths_are_in_contract_order() {
        let g = GlobalPaths {
            home: Some("/h".into()),
            db: None,
            accounts: Some("/h/a.yaml".into()),
            profile: Some("/h/p.yaml".into()),
        };
        assert_eq!(
            g.argv().unwrap(),
            vec!["--home=/h", "--accounts=/h/a.yaml", "--profile=/h/p.yaml"]
        );
    }

    #[test]
    fn backend_resolution() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("rw");
        std::fs::write(&exe, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        let plain = dir.path().join("plain");
        std::fs::write(&plain, "").unwrap();

        let got = resolve_backend(Some(Path::new("./rw")), dir.path()).unwrap();
        assert_eq!(got, exe.canonicalize().unwrap());
        let e = resolve_backend(Some(Path::new("./plain")), dir.path()).unwrap_err();
        assert!(e.to_string().contains("not an executable file"), "{e}");
        let e = resolve_backend(Some(Path::new("./missing")), dir.path()).unwrap_err();
        assert!(e.to_string().contains("cannot be used"), "{e}");
        let e = resolve_backend(Some(Path::new("surely-no-such-backend-here")), dir.path())
            .unwrap_err();
        assert!(e.to_string().contains("on PATH"), "{e}");
    }
}
