//! `sandbox status|run|probe`: let owners and CI jobs see, on their own
//! machine, which layers the kernel gives and that they hold, with the same
//! policy a tool call gets.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;

use super::{platform, RunKind, Sandbox, SandboxOptions};
use crate::cli::{Globals, SandboxCommand, SandboxMode};

/// `sandbox status|run|probe`.
pub fn cli(globals: &Globals, cmd: SandboxCommand) -> anyhow::Result<u8> {
    match cmd {
        SandboxCommand::Status { json } => status(json),
        SandboxCommand::Run {
            root,
            allow_read,
            command,
        } => run(globals, root, allow_read, command),
        SandboxCommand::Probe { json, without } => probe(json, without),
    }
}

fn status(json: bool) -> anyhow::Result<u8> {
    let report = platform::status();
    let mut out = std::io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(&mut out, &report)?;
        writeln!(out)?;
    } else {
        writeln!(out, "platform: {} {}", report.platform, report.kernel)?;
        if let Some(abi) = report.landlock_abi {
            writeln!(out, "landlock ABI: {abi}")?;
        }
        for l in &report.layers {
            let mark = if l.available {
                "available"
            } else {
                "missing  "
            };
            writeln!(out, "  {mark}  {:<15} {}", l.name, l.detail)?;
        }
        if report.require_missing.is_empty() {
            writeln!(
                out,
                "mcp-serve (--sandbox require) would use: {}",
                report.require_layers
            )?;
        } else {
            writeln!(
                out,
                "mcp-serve (--sandbox require) would refuse to start: missing {}",
                report.require_missing.join("; ")
            )?;
            writeln!(
                out,
                "mcp-serve --sandbox best-effort would use: {}",
                report.best_effort_layers
            )?;
        }
    }
    Ok(0)
}

/// Make a path absolute and canonical, with a message naming it.
fn canonical(p: &Path) -> anyhow::Result<PathBuf> {
    std::fs::canonicalize(p).with_context(|| format!("{}", p.display()))
}

/// The options `sandbox run` uses: the read-only tool policy with `CMD` as
/// the backend, the globals' files readable, `--root` (default: the current
/// folder) as root and working folder.
fn run_options(
    globals: &Globals,
    root: Option<PathBuf>,
    allow_read: Vec<PathBuf>,
    program: &str,
) -> anyhow::Result<SandboxOptions> {
    let backend = if program.contains('/') {
        canonical(Path::new(program))?
    } else {
        let path = std::env::var("PATH").unwrap_or_default();
        let found = super::policy::find_on_path(program, &path)
            .with_context(|| format!("{program}: not found on PATH"))?;
        canonical(&found)?
    };
    let root = match root {
        Some(r) => canonical(&r)?,
        None => canonical(&std::env::current_dir()?)?,
    };
    if root == Path::new("/") {
        anyhow::bail!("a root of / is refused: it would open every file to the run");
    }
    let mut read = Vec::new();
    for p in [&globals.home, &globals.accounts, &globals.profile]
        .into_iter()
        .flatten()
    {
        read.push(canonical(p)?);
    }
    let db = match &globals.db {
        Some(p) => Some(canonical(p)?),
        None => None,
    };
    let allow_read = allow_read
        .iter()
        .map(|p| canonical(p))
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(SandboxOptions {
        mode: SandboxMode::Require,
        backend,
        root,
        read,
        db,
        allow_read,
        pass_env: Vec::new(),
    })
}

fn run(
    globals: &Globals,
    root: Option<PathBuf>,
    allow_read: Vec<PathBuf>,
    command: Vec<String>,
) -> anyhow::Result<u8> {
    let (program, args) = command
        .split_first()
        .context("sandbox run needs a command")?;
    let opts = run_options(globals, root, allow_read, program)?;
    let sandbox = Sandbox::detect(&opts)?;
    let mut argv = vec![opts.backend.to_string_lossy().into_owned()];
    argv.extend(args.iter().cloned());
    let mut child = sandbox.spawn(RunKind::ReadOnly, &argv, &opts.root)?;
    let out = child
        .stdout
        .take()
        .map(|mut s| std::thread::spawn(move || std::io::copy(&mut s, &mut std::io::stdout())));
    let err = child
        .stderr
        .take()
        .map(|mut s| std::thread::spawn(move || std::io::copy(&mut s, &mut std::io::stderr())));
    let status = child.wait()?;
    for t in [out, err].into_iter().flatten() {
        let _ = t.join();
    }
    Ok(exit_code(status))
}

/// A shell's view of an exit status: the code, or 128 + the signal.
pub fn exit_code(status: std::process::ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => c as u8,
        (None, Some(s)) => (128 + s) as u8,
        _ => 125,
    }
}

fn probe(json: bool, without: Option<super::Layer>) -> anyhow::Result<u8> {
    platform::probe(json, without)
}
