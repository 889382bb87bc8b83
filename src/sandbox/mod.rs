//! The sandbox: one policy per run, applied in a fork-exec'd helper child.
//!
//! INTERFACE (used by run.rs and app.rs; keep these names):
//! - `SandboxOptions`: what the server knows at start (plain data).
//! - `Sandbox::detect(&SandboxOptions) -> Result<Sandbox, SandboxError>`:
//!   probes the kernel once; in `require` mode refuses when a promised layer
//!   is missing.
//! - `Sandbox::layers_line()`: the layers in force, for the start-up line.
//! - `Sandbox::spawn(&self, RunKind, &[String] argv, cwd) -> Result<SandboxedChild, SandboxError>`:
//!   argv[0] is the absolute backend path; stdin is /dev/null; stdout and
//!   stderr are pipes the caller reads.
//! - `SandboxedChild { stdout, stderr }`, `.pid()`, `.kill_tree()`,
//!   `.wait()`, `.try_wait()`; dropping it kills what is left and removes
//!   the run's private temp folder.
//!
//! PLACEHOLDER: this first version runs the backend unconfined in its own
//! process group; the kernel layers replace it.

use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, ChildStdout, Command, ExitStatus, Stdio};

use crate::cli::SandboxMode;

/// What kind of run: a read-only tool (and the catalog), or the `draft` tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunKind {
    ReadOnly,
    Draft,
}

/// Everything the sandbox needs to know, fixed at start.
#[derive(Debug, Clone, Default)]
pub struct SandboxOptions {
    pub mode: SandboxMode,
    /// The canonical backend executable.
    pub backend: PathBuf,
    /// The root folder (read-only for tools).
    pub root: PathBuf,
    /// Extra read-only paths: home, accounts, profile, database.
    pub read: Vec<PathBuf>,
    /// The database, whose folder `draft` may write.
    pub db: Option<PathBuf>,
    /// `--allow-read` paths (read + execute).
    pub allow_read: Vec<PathBuf>,
    /// `--pass-env` names.
    pub pass_env: Vec<String>,
}

#[derive(Debug)]
pub enum SandboxError {
    /// The kernel lacks a layer that `require` mode promises.
    Unavailable(String),
    /// A layer that start-up found available did not apply in this run.
    LayerFailed(String),
    /// Spawning or piping failed.
    Io(std::io::Error),
}

impl std::fmt::Display for SandboxError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SandboxError::Unavailable(m) => write!(f, "sandbox unavailable: {m}"),
            SandboxError::LayerFailed(m) => write!(f, "sandbox layer failed: {m}"),
            SandboxError::Io(e) => write!(f, "could not start the sandboxed run: {e}"),
        }
    }
}

impl std::error::Error for SandboxError {}

/// `sandbox status|run|probe`.
pub fn cli(_globals: &crate::cli::Globals, _cmd: crate::cli::SandboxCommand) -> anyhow::Result<u8> {
    eprintln!("reachweaver-mcp: sandbox: not yet");
    Ok(2)
}

/// The hidden helper: confine this process, then execve the backend. Returns only on failure.
pub fn helper_main(_policy: &str) -> anyhow::Result<u8> {
    anyhow::bail!("sandbox helper: not yet")
}

/// One escape attempt of the probe suite, run inside the sandbox.
pub fn probe_attempt(_name: &str, _args: &[String]) -> u8 {
    2
}

pub struct Sandbox {
    opts: SandboxOptions,
}

impl Sandbox {
    pub fn detect(opts: &SandboxOptions) -> Result<Sandbox, SandboxError> {
        Ok(Sandbox { opts: opts.clone() })
    }

    pub fn layers_line(&self) -> String {
        "none (placeholder)".to_string()
    }

    pub fn spawn(
        &self,
        _kind: RunKind,
        argv: &[String],
        cwd: &Path,
    ) -> Result<SandboxedChild, SandboxError> {
        use std::os::unix::process::CommandExt;
        let _ = &self.opts;
        let (prog, rest) = argv
            .split_first()
            .ok_or_else(|| SandboxError::LayerFailed("empty argv".into()))?;
        let mut child = Command::new(prog)
            .args(rest)
            .current_dir(cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .map_err(SandboxError::Io)?;
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        Ok(SandboxedChild {
            child,
            stdout,
            stderr,
        })
    }
}

pub struct SandboxedChild {
    child: Child,
    pub stdout: Option<ChildStdout>,
    pub stderr: Option<ChildStderr>,
}

impl SandboxedChild {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Kill the run's whole process tree.
    pub fn kill_tree(&mut self) {
        // SAFETY: kill(2) with a negative pid signals the process group the child leads.
        unsafe {
            libc::kill(-(self.child.id() as i32), libc::SIGKILL);
        }
    }

    pub fn wait(&mut self) -> std::io::Result<ExitStatus> {
        self.child.wait()
    }

    pub fn try_wait(&mut self) -> std::io::Result<Option<ExitStatus>> {
        self.child.try_wait()
    }
}

impl Drop for SandboxedChild {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.kill_tree();
            let _ = self.child.wait();
        }
    }
}
