//! The sandbox: every backend run happens in a child confined by the kernel,
//! with one policy per run built as plain data and applied in a helper
//! process (on Linux, a long-lived zygote per sandbox that forks each run).
//! The server process itself is never restricted.
//!
//! INTERFACE (used by run.rs and app.rs; keep these names):
//! - `SandboxOptions`: what the server knows at start (plain data).
//! - `Sandbox::detect(&SandboxOptions) -> Result<Sandbox, SandboxError>`:
//!   probes the kernel once; in `require` mode refuses when a promised layer
//!   is missing.
//! - `Sandbox::layers_line()`: the layers in force, for the start-up line.
//! - `Sandbox::spawn(&self, RunKind, &[String] argv, cwd) -> Result<SandboxedChild, SandboxError>`:
//!   argv[0] is the absolute backend path; stdin is /dev/null; stdout and
//!   stderr are pipes the caller reads. Call it from a thread that lives as
//!   long as the run: where Linux runs use a re-executed helper (no user or
//!   PID namespace for runs), the run's parent-death signal follows the
//!   spawning thread.
//! - `SandboxedChild { stdout, stderr }`, `.pid()`, `.kill_tree()`,
//!   `.wait()`, `.try_wait()`; dropping it kills what is left and removes
//!   the run's private temp folder.
//!
//! The layers, their order and what each one holds are described in
//! `sandbox/LAYERS.md`; `policy.rs` decides what a run may touch; the
//! platform modules enforce it.

mod commands;
// Built on every platform so its golden tests run everywhere; only macOS
// starts processes with it.
#[cfg_attr(not(target_os = "macos"), allow(dead_code))]
pub mod macos;
pub mod policy;

#[cfg(target_os = "linux")]
pub mod linux;
#[cfg(target_os = "linux")]
mod probe;
#[cfg(target_os = "linux")]
use linux::platform;
#[cfg(target_os = "macos")]
use macos::spawn as platform;
#[cfg(not(any(target_os = "linux", target_os = "macos")))]
mod unsupported;
#[cfg(not(any(target_os = "linux", target_os = "macos")))]
use unsupported as platform;

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, ChildStdout, ExitStatus};

use crate::cli::SandboxMode;

pub use commands::cli;

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
    /// The program re-run as the sandbox helper; `None` is this program
    /// itself. Only code sets it: tests whose process is not the server.
    pub helper: Option<PathBuf>,
}

/// The server binary next to a test executable (`target/<profile>/deps/x`
/// → `target/<profile>/reachweaver-mcp`), for tests that spawn runs from
/// inside a test process.
#[doc(hidden)]
pub fn helper_next_to_test_binary() -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_default();
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let helper = dir.join("reachweaver-mcp");
    assert!(
        helper.exists(),
        "the server binary is missing at {}: build it first (cargo build)",
        helper.display()
    );
    helper
}

/// A layer the owner (or the probe's layer matrix) can switch off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Layer {
    Landlock,
    Seccomp,
    Netns,
    Caps,
}

impl Layer {
    pub fn name(self) -> &'static str {
        match self {
            Layer::Landlock => "landlock",
            Layer::Seccomp => "seccomp",
            Layer::Netns => "netns",
            Layer::Caps => "caps",
        }
    }
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

/// One layer as `sandbox status` reports it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LayerStatus {
    pub name: &'static str,
    pub available: bool,
    pub detail: String,
}

/// What `sandbox status` prints.
#[derive(Debug, Clone, serde::Serialize)]
pub struct StatusReport {
    pub platform: &'static str,
    pub kernel: String,
    /// The Landlock ABI (Linux), `None` elsewhere.
    pub landlock_abi: Option<i32>,
    pub layers: Vec<LayerStatus>,
    /// What `--sandbox require` would refuse for (empty: it starts).
    pub require_missing: Vec<String>,
    /// The start-up line's layers in `require` and `best-effort` mode.
    pub require_layers: String,
    pub best_effort_layers: String,
}

/// The hidden helper: confine this process, then execve the backend. Returns only on failure.
pub fn helper_main(policy: &str) -> anyhow::Result<u8> {
    platform::helper_main(policy)
}

/// One escape attempt of the probe suite, run inside the sandbox.
pub fn probe_attempt(name: &str, args: &[String]) -> u8 {
    platform::probe_attempt(name, args)
}

/// The sandbox set up for one backend, with what the kernel offers.
pub struct Sandbox {
    opts: SandboxOptions,
    state: platform::State,
}

impl Sandbox {
    /// Probe the kernel and find the backend's runtime paths. Cheap (a
    /// couple of short-lived forks); may be called more than once.
    pub fn detect(opts: &SandboxOptions) -> Result<Sandbox, SandboxError> {
        sweep_stale_tmpdirs();
        Ok(Sandbox {
            state: platform::State::detect(opts)?,
            opts: opts.clone(),
        })
    }

    pub fn layers_line(&self) -> String {
        self.state.layers_line()
    }

    pub fn spawn(
        &self,
        kind: RunKind,
        argv: &[String],
        cwd: &Path,
    ) -> Result<SandboxedChild, SandboxError> {
        self.spawn_with_stdin(kind, argv, cwd, None)
    }

    /// Like `spawn`, with a chosen stdin (only the probe's terminal attempt
    /// uses this; tool runs always get /dev/null).
    pub(crate) fn spawn_with_stdin(
        &self,
        kind: RunKind,
        argv: &[String],
        cwd: &Path,
        stdin: Option<OwnedFd>,
    ) -> Result<SandboxedChild, SandboxError> {
        match argv.first() {
            None => {
                return Err(SandboxError::Io(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "empty command line",
                )))
            }
            Some(p) if Path::new(p) != self.opts.backend => {
                return Err(SandboxError::Io(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!(
                        "{p} is not the backend this sandbox was set up for ({})",
                        self.opts.backend.display()
                    ),
                )))
            }
            Some(_) => {}
        }
        self.state.spawn(&self.opts, kind, argv, cwd, stdin)
    }
}

/// The process the server holds for a run.
pub(crate) enum Process {
    /// A helper the server spawned itself.
    Spawned(Child),
    /// An init forked by the sandbox's zygote.
    #[cfg(target_os = "linux")]
    Forked(linux::zygote::Run),
}

impl From<Child> for Process {
    fn from(c: Child) -> Self {
        Process::Spawned(c)
    }
}

/// A running sandboxed backend.
pub struct SandboxedChild {
    child: Process,
    pub stdout: Option<ChildStdout>,
    pub stderr: Option<ChildStderr>,
    /// The run's private temporary folder, removed on drop.
    tmpdir: Option<PathBuf>,
    /// The child was reaped: its pid may belong to someone else now.
    done: bool,
}

impl SandboxedChild {
    pub fn pid(&self) -> u32 {
        match &self.child {
            Process::Spawned(c) => c.id(),
            #[cfg(target_os = "linux")]
            Process::Forked(r) => r.pid(),
        }
    }

    /// Kill the run's whole process tree. On Linux the run's init (or the
    /// helper, which takes init with it) is killed and the kernel then
    /// kills everything in the run's PID namespace; the process group is
    /// signalled too for runs without one.
    pub fn kill_tree(&mut self) {
        if self.done {
            return;
        }
        match &self.child {
            Process::Spawned(c) => {
                let pid = c.id() as libc::pid_t;
                // SAFETY: signalling our own, not yet reaped child and its group.
                unsafe {
                    libc::kill(-pid, libc::SIGKILL);
                    libc::kill(pid, libc::SIGKILL);
                }
            }
            #[cfg(target_os = "linux")]
            Process::Forked(r) => r.kill(),
        }
    }

    pub fn wait(&mut self) -> std::io::Result<ExitStatus> {
        let status = match &mut self.child {
            Process::Spawned(c) => c.wait()?,
            #[cfg(target_os = "linux")]
            Process::Forked(r) => r.wait()?,
        };
        self.done = true;
        Ok(status)
    }

    pub fn try_wait(&mut self) -> std::io::Result<Option<ExitStatus>> {
        let status = match &mut self.child {
            Process::Spawned(c) => c.try_wait()?,
            #[cfg(target_os = "linux")]
            Process::Forked(r) => r.try_wait()?,
        };
        if status.is_some() {
            self.done = true;
        }
        Ok(status)
    }
}

impl Drop for SandboxedChild {
    fn drop(&mut self) {
        if !self.done {
            self.kill_tree();
            let _ = self.wait();
        }
        if let Some(dir) = self.tmpdir.take() {
            remove_tree(&dir);
        }
    }
}

/// Removes a private temp folder unless released to a `SandboxedChild`.
pub(crate) struct TmpGuard(pub(crate) Option<PathBuf>);

impl TmpGuard {
    pub(crate) fn release(mut self) -> Option<PathBuf> {
        self.0.take()
    }
}

impl Drop for TmpGuard {
    fn drop(&mut self) {
        if let Some(dir) = self.0.take() {
            remove_tree(&dir);
        }
    }
}

/// Create the run's private temporary folder (0700) under the system temp
/// folder, with an unpredictable name.
pub(crate) fn make_private_tmpdir() -> std::io::Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let base = tmp_base()?;
    let mut last = None;
    for _ in 0..16 {
        let name = format!(
            "{TMP_PREFIX}{}-{}-{:016x}",
            std::process::id(),
            pid_namespace_id(),
            random_u64()
        );
        let path = base.join(name);
        match std::fs::DirBuilder::new().mode(0o700).create(&path) {
            Ok(()) => return Ok(path),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no free temp folder name")))
}

/// The canonical system temp folder, found once: the server's environment
/// doesn't change while it runs.
fn tmp_base() -> std::io::Result<PathBuf> {
    static BASE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    if let Some(b) = BASE.get() {
        return Ok(b.clone());
    }
    let b = std::fs::canonicalize(std::env::temp_dir())?;
    Ok(BASE.get_or_init(|| b).clone())
}

/// Run folders are named `reachweaver-run-PID-PIDNS-RANDOM`.
const TMP_PREFIX: &str = "reachweaver-run-";

/// The inode of this process's PID namespace: pids are only comparable
/// within one namespace (containers may share a temp folder).
fn pid_namespace_id() -> u64 {
    use std::os::unix::fs::MetadataExt;
    // A process never changes its own PID namespace.
    static ID: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *ID.get_or_init(|| {
        std::fs::metadata("/proc/self/ns/pid")
            .map(|m| m.ino())
            .unwrap_or(0)
    })
}

/// The server pid and PID namespace a run folder name records. Pure.
pub(crate) fn parse_tmp_name(name: &str) -> Option<(u32, u64)> {
    let rest = name.strip_prefix(TMP_PREFIX)?;
    let mut parts = rest.splitn(3, '-');
    let pid = parts.next()?.parse().ok()?;
    let ns = parts.next()?.parse().ok()?;
    let random = parts.next()?;
    (random.len() == 16 && random.bytes().all(|b| b.is_ascii_hexdigit())).then_some((pid, ns))
}

/// Remove run folders whose server died without cleaning up (a server
/// killed with SIGKILL can't): same owner, same PID namespace, and no
/// process with that pid any more.
pub(crate) fn sweep_stale_tmpdirs() {
    use std::os::unix::fs::MetadataExt;
    let Ok(base) = std::fs::canonicalize(std::env::temp_dir()) else {
        return;
    };
    let Ok(entries) = std::fs::read_dir(&base) else {
        return;
    };
    let ns = pid_namespace_id();
    // SAFETY: geteuid can't fail.
    let uid = unsafe { libc::geteuid() };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some((pid, dir_ns)) = name.to_str().and_then(parse_tmp_name) else {
            continue;
        };
        let Ok(meta) = std::fs::symlink_metadata(e.path()) else {
            continue;
        };
        if dir_ns == ns
            && meta.is_dir()
            && meta.uid() == uid
            && !Path::new(&format!("/proc/{pid}")).exists()
        {
            remove_tree(&e.path());
        }
    }
}

fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    // RandomState is seeded from the OS once per process; mixing in a
    // counter and the time gives distinct names for every call.
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    if let Ok(t) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        h.write_u128(t.as_nanos());
    }
    h.finish()
}

/// Remove a folder tree, first making folders the run left unreadable
/// (`mkdir` with mode 0) accessible again, so nothing stays behind.
pub(crate) fn remove_tree(dir: &Path) {
    if std::fs::remove_dir_all(dir).is_ok() || !dir.exists() {
        return;
    }
    fn open_up(dir: &Path) {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
        if let Ok(entries) = std::fs::read_dir(dir) {
            for e in entries.flatten() {
                if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                    open_up(&e.path());
                }
            }
        }
    }
    open_up(dir);
    let _ = std::fs::remove_dir_all(dir);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_folder_names_record_pid_and_namespace() {
        assert_eq!(
            parse_tmp_name("reachweaver-run-123-4026531836-00ff00ff00ff00ff"),
            Some((123, 4026531836))
        );
        assert_eq!(parse_tmp_name("reachweaver-run-123-00ff00ff00ff00ff"), None);
        assert_eq!(parse_tmp_name("reachweaver-run-x-1-00ff00ff00ff00ff"), None);
        assert_eq!(parse_tmp_name("reachweaver-run-1-1-short"), None);
        assert_eq!(parse_tmp_name("other-1-1-00ff00ff00ff00ff"), None);
        let made = make_private_tmpdir().unwrap();
        let name = made.file_name().unwrap().to_str().unwrap().to_string();
        assert_eq!(
            parse_tmp_name(&name),
            Some((std::process::id(), pid_namespace_id()))
        );
        // Ours is alive: a sweep leaves it alone.
        sweep_stale_tmpdirs();
        assert!(made.exists());
        remove_tree(&made);
    }

    #[test]
    fn private_tmpdirs_are_0700_unique_and_removed_even_when_locked() {
        use std::os::unix::fs::PermissionsExt;
        let a = make_private_tmpdir().unwrap();
        let b = make_private_tmpdir().unwrap();
        assert_ne!(a, b);
        let mode = std::fs::metadata(&a).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        let locked = a.join("x/y");
        std::fs::create_dir_all(&locked).unwrap();
        std::fs::write(locked.join("f"), b"data").unwrap();
        std::fs::set_permissions(a.join("x"), std::fs::Permissions::from_mode(0o000)).unwrap();
        remove_tree(&a);
        assert!(!a.exists());
        drop(TmpGuard(Some(b.clone())));
        assert!(!b.exists());
    }
}
