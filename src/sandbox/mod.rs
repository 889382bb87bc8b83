//! The sandbox: every backend run happens in a child confined by the kernel,
//! with one policy per run built as plain data and applied in a helper
//! process (on Linux, a long-lived zygote per sandbox that forks each run).
//! The server process itself is never restricted.
//!
//! INTERFACE (used by config.rs, startup.rs, startup/files.rs, run.rs and
//! sandbox_cli.rs; keep these names):
//! - `SandboxOptions`: what the server knows at start (plain data).
//! - `Sandbox::detect(&SandboxOptions) -> Result<Sandbox, SandboxError>`:
//!   probes the kernel once and finds the backend's runtime paths; in
//!   `require` mode refuses when a promised layer is missing.
//! - `Sandbox::regrant(self, &SandboxOptions, masks)`: the same detection
//!   with other grants (the catalog's, or files replaced while serving).
//! - `Sandbox::layers_line()`, `Sandbox::promises_line(drafts)`: the layers
//!   in force and what holds each promise, for the start-up line;
//!   `Sandbox::drafts_refused()`: why `--allow-drafts` can't be honoured.
//! - `Sandbox::spawn(&self, RunKind, &[String] argv, cwd) -> Result<SandboxedChild, SandboxError>`:
//!   argv[0] is the absolute backend path; stdin is /dev/null; stdout and
//!   stderr are pipes the caller reads. Call it from a thread that lives as
//!   long as the run: where Linux runs use a re-executed helper (no user or
//!   PID namespace for runs), the run's parent-death signal follows the
//!   spawning thread.
//! - `SandboxedChild { stdout, stderr, attestation }`, `.pid()`,
//!   `.kill_tree()`, `.wait()`, `.try_wait()`; dropping it kills what is
//!   left and removes the run's private temp folder.
//!
//! The layers, their order and what each one holds are described in
//! `sandbox/LAYERS.md`; `policy.rs` decides what a run may touch; the
//! platform modules enforce it.

// The sweep after a draft run: shared by Linux and macOS, whose sandboxes
// both let a draft write the database's companions under their names.
pub mod denied;
pub mod draft;
mod exec_chain;
pub mod guard;
// Built on every platform so its golden tests run everywhere; only macOS
// starts processes with it.
pub mod layers;
pub use layers::Layer;
#[cfg_attr(not(target_os = "macos"), allow(dead_code))]
pub mod macos;
pub mod policy;
pub mod promises;
pub mod sockpath;
pub(crate) mod tmpdir;

#[cfg(target_os = "linux")]
pub mod linux;
#[cfg(any(target_os = "linux", target_os = "macos"))]
mod probe;
#[cfg(not(any(target_os = "linux", target_os = "macos")))]
mod unsupported;

use std::os::fd::{BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, ChildStdout, ExitStatus};
use std::time::Duration;

/// What a platform's sandbox gives the server: set up once per sandbox
/// (`detect`), then one `spawn` per run; and the hidden helper, `sandbox
/// status` and `sandbox probe` entry points. Linux, macOS and the
/// platforms without a sandbox each implement it; [`Current`] is this
/// build's.
pub(crate) trait Platform: Sized {
    /// Probe the kernel and set up what every run shares.
    fn detect(opts: &SandboxOptions) -> Result<Self, SandboxError>;
    /// [`Platform::detect`], leaving its trial run to [`Platform::tried`]
    /// where the platform can: the caller's first run stands for it.
    fn detect_untried(opts: &SandboxOptions) -> Result<Self, SandboxError> {
        Self::detect(opts)
    }
    /// After `detect_untried`: whether the first run started (`ran`);
    /// `Ok(true)` when the layers in force changed for it not starting.
    fn tried(&mut self, _opts: &SandboxOptions, _ran: bool) -> Result<bool, SandboxError> {
        Ok(false)
    }
    /// The layers in force, for the start-up line.
    fn layers_line(&self) -> String;
    /// What holds each promise here for a sandbox with these grants, for
    /// the start-up line.
    fn promises_line(&self, opts: &SandboxOptions, drafts: bool) -> String;
    /// Why `--allow-drafts` can't be honoured here with these grants
    /// (`None`: it can).
    fn drafts_refused(&self, opts: &SandboxOptions) -> Option<String>;
    /// Bound the wait for a run's start by the call timeout (`None`: no
    /// call timeout), so a run the sandbox can't start fails within it.
    fn bound_waits(&self, call_timeout: Option<Duration>);
    /// Start one run; `argv[0]` was checked to be the backend. `exe`, when
    /// given, is an open descriptor of the backend's file that the run
    /// executes instead of the path.
    fn spawn(
        &self,
        opts: &SandboxOptions,
        kind: RunKind,
        argv: &[String],
        cwd: &Path,
        stdin: Option<OwnedFd>,
        exe: Option<BorrowedFd<'_>>,
    ) -> Result<SandboxedChild, SandboxError>;
    /// The hidden helper: confine this process, then execve the backend.
    /// Returns only on failure.
    fn helper_main(arg: &str) -> anyhow::Result<u8>;
    /// What this machine gives, for `sandbox status`.
    fn status() -> StatusReport;
    /// Every escape attempt in the sandbox, for `sandbox probe`; the exit code.
    fn probe(json: bool, without: Option<Layer>, junit: Option<&Path>) -> anyhow::Result<u8>;
    /// One escape attempt, run inside the sandbox.
    fn probe_attempt(name: &str, args: &[String]) -> u8;
}

/// This build's platform.
#[cfg(target_os = "linux")]
pub(crate) type Current = linux::server::State;
#[cfg(target_os = "macos")]
pub(crate) type Current = macos::spawn::State;
#[cfg(not(any(target_os = "linux", target_os = "macos")))]
pub(crate) type Current = unsupported::State;

/// The folder a backend's runs may read and execute beside the backend
/// itself (its install prefix), or `None` when only its own file is
/// granted: the backend is not in a `bin` folder, or that folder's parent
/// is guarded, a shared prefix, or inside the home without being an
/// interpreter's tree. Said at start, since a backend that reads a file
/// next to itself fails in the sandbox only.
pub fn backend_folder(backend: &Path) -> Option<PathBuf> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    #[cfg(target_os = "macos")]
    {
        let canon = home.as_deref().and_then(|h| std::fs::canonicalize(h).ok());
        macos::tree_for(backend, canon.as_deref().or(home.as_deref()))
    }
    #[cfg(not(target_os = "macos"))]
    {
        let mut homes: Vec<PathBuf> = home.into_iter().collect();
        homes.extend(guard::Guard::for_this_user().homes().iter().cloned());
        let granted = policy::install_prefix_guarded(backend, &homes);
        (granted != backend).then_some(granted)
    }
}

/// How strict the sandbox is: a setting of the sandbox, which the command
/// line only names (so the sandbox never depends on the command line).
#[derive(Debug, Copy, Clone, PartialEq, Eq, clap::ValueEnum, Default)]
pub enum SandboxMode {
    /// Refuse to start, and fail every call, unless every promised layer applies.
    #[default]
    Require,
    /// Run with whatever layers the kernel offers and say at start what is missing.
    BestEffort,
}

pub(crate) use tmpdir::{
    make_private_tmpdir, random_u64, remove_tree, sweep_stale_tmpdirs, TmpGuard,
};

/// What a tool may change, and so what its run is granted: one type for the
/// tool's annotations and the sandbox's grants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum RunKind {
    /// Changes nothing the owner keeps: every read-only tool, and the catalog.
    ReadOnly,
    /// The `draft` tool: may write inside the database's folder only.
    Draft,
}

/// Everything the sandbox needs to know, fixed at start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SandboxOptions {
    pub mode: SandboxMode,
    /// The canonical backend executable.
    pub backend: PathBuf,
    /// The root folder (read-only for tools).
    pub root: PathBuf,
    /// Extra read-only paths: home, accounts, profile, database.
    pub read: Vec<PathBuf>,
    /// Which of `read` is the ReachWeaver home folder (the others are files).
    pub home: Option<PathBuf>,
    /// The database, whose folder `draft` may write.
    pub db: Option<PathBuf>,
    /// `--allow-read` paths (read + execute).
    pub allow_read: Vec<PathBuf>,
    /// `--pass-env` names.
    pub pass_env: Vec<String>,
    /// The program re-run as the sandbox helper; `None` is this program
    /// itself. Only code sets it: tests whose process is not the server.
    pub helper: Option<PathBuf>,
    /// Device and inode of every fixed path, taken when the sandbox is set
    /// up: a run whose path no longer names the same file is refused, so a
    /// run that swaps a granted file for a link cannot widen the next run's
    /// grant. Set by [`Sandbox::detect`] and [`Sandbox::regrant`] on their
    /// copy: a pin the caller gives for a path (taken in the same lookup as
    /// its checks) is kept, every other path is pinned there.
    pub pins: Vec<(PathBuf, policy::Pin)>,
    /// Protected files and folders beneath the root, hidden in the run's
    /// minimal root (an empty read-only file or folder in their place).
    /// The sandbox's own too: given to [`Sandbox::regrant`].
    pub masks: Vec<PathBuf>,
}

impl SandboxOptions {
    /// Whether `p` is the home folder rather than one of the fixed files.
    pub fn home_like(&self, p: &Path) -> bool {
        self.home.as_deref() == Some(p)
    }
}

#[derive(Debug)]
pub enum SandboxError {
    /// The kernel lacks a layer that `require` mode promises.
    Unavailable(String),
    /// A layer that start-up found available did not apply in this run.
    LayerFailed(String),
    /// Setting up the run inside the sandbox failed because the machine
    /// ran out (a fork or clone refused for processes, memory or
    /// descriptors): what failed and the error number.
    Exhausted(String, i32),
    /// The machine ran out while start-up checked or tried the layers:
    /// what was being done and the error number. Nothing is concluded of
    /// the kernel from it, and no layer is given up for it.
    ShortAtStart(String, i32),
    /// Spawning or piping failed on the server's side, before the backend
    /// could be executed (out of descriptors or processes, among others).
    Io(std::io::Error),
    /// Every layer applied, but the backend could not be executed (no such
    /// file, not executable, ...): the program's failure.
    Exec(std::io::Error),
}

impl std::fmt::Display for SandboxError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SandboxError::Unavailable(m) => write!(f, "sandbox unavailable: {m}"),
            SandboxError::LayerFailed(m) => write!(f, "sandbox layer failed: {m}"),
            SandboxError::Exhausted(m, _) => write!(f, "could not start the sandboxed run: {m}"),
            SandboxError::ShortAtStart(m, errno) => write!(
                f,
                "the machine ran out of {} while {m}; no layer was given up for it: \
                 start again once there are some to spare",
                shortage(*errno).unwrap_or("resources")
            ),
            SandboxError::Io(e) | SandboxError::Exec(e) => {
                write!(f, "could not start the sandboxed run: {e}")
            }
        }
    }
}

impl std::error::Error for SandboxError {}

/// What ran out, when an error number of the server's own call means a
/// shortage (descriptors, processes or threads, memory) rather than a refusal.
pub(crate) fn shortage(errno: i32) -> Option<&'static str> {
    match errno {
        libc::EMFILE | libc::ENFILE => Some("open files"),
        libc::EAGAIN => Some("processes or threads"),
        libc::ENOMEM | libc::ENOBUFS => Some("memory"),
        _ => None,
    }
}

impl SandboxError {
    /// What ran out, when that is why the run could not start: `Io` errors
    /// carry the error number of the server's own call, `Exhausted` that of
    /// a fork or clone inside the sandbox (an exec inside the run is
    /// `Exec`, whatever its number).
    pub(crate) fn exhausted(&self) -> Option<&'static str> {
        match self {
            SandboxError::Io(e) => shortage(e.raw_os_error()?),
            SandboxError::Exhausted(_, errno) | SandboxError::ShortAtStart(_, errno) => {
                shortage(*errno)
            }
            _ => None,
        }
    }
}

/// One layer as `sandbox status` reports it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LayerStatus {
    #[serde(rename = "name", serialize_with = "status_name")]
    pub layer: Layer,
    pub available: bool,
    pub detail: String,
}

impl LayerStatus {
    /// The layer's name as `sandbox status` writes it: its own name, but
    /// for macOS's, which status has always spelled after the program
    /// (`sandbox-exec`) and scripts reading it may match.
    pub fn name(&self) -> &'static str {
        status_spelling(self.layer)
    }
}

fn status_spelling(layer: Layer) -> &'static str {
    if layer == Layer::SandboxExec {
        "sandbox-exec"
    } else {
        layer.name()
    }
}

fn status_name<S: serde::Serializer>(layer: &Layer, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(status_spelling(*layer))
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
    /// How a trial run with every available layer ended (`None`: no trial
    /// on this platform).
    pub trial: Option<String>,
    /// Each promise and what holds it here (empty where not assessed).
    pub promises: Vec<promises::PromiseStatus>,
    /// AppArmor's restriction on unprivileged user namespaces (Linux only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub apparmor: Option<AppArmorStatus>,
}

/// AppArmor's restriction on unprivileged user namespaces, as `sandbox
/// status` reports it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct AppArmorStatus {
    /// AppArmor is enabled in the running kernel.
    pub enabled: bool,
    /// `kernel.apparmor_restrict_unprivileged_userns`: `not_present`, `off`,
    /// `on` or `unrecognised`.
    pub userns_restriction: &'static str,
    /// On, with AppArmor enabled: unprivileged programs that no profile
    /// allows `userns` get no capabilities in their user namespaces.
    pub restricted: bool,
    /// The AppArmor profile this binary runs under, if any.
    pub profile: Option<String>,
    /// The one line `sandbox status` prints after `apparmor: `.
    pub detail: String,
}

/// The hidden helper: confine this process, then execve the backend. Returns only on failure.
pub fn helper_main(policy: &str) -> anyhow::Result<u8> {
    Current::helper_main(policy)
}

/// What this machine's kernel gives, for `sandbox status`.
pub fn status() -> StatusReport {
    Current::status()
}

/// Every escape attempt in the sandbox, for `sandbox probe`; the exit code.
pub fn probe(
    json: bool,
    without: Option<Layer>,
    junit: Option<&std::path::Path>,
) -> anyhow::Result<u8> {
    Current::probe(json, without, junit)
}

/// One escape attempt of the probe suite, run inside the sandbox.
pub fn probe_attempt(name: &str, args: &[String]) -> u8 {
    Current::probe_attempt(name, args)
}

/// The sandbox set up for one backend, with what the kernel offers.
///
/// Cloning is cheap: a clone shares what was detected (and the helper
/// that forks runs) and owns its grants.
#[derive(Clone)]
pub struct Sandbox {
    opts: SandboxOptions,
    state: Detection,
}

/// What detection found, shared by every sandbox regranted from it.
#[derive(Clone)]
struct Detection(std::sync::Arc<Current>);

impl std::ops::Deref for Detection {
    type Target = Current;
    fn deref(&self) -> &Current {
        &self.0
    }
}

/// Layers are switched off (the probe's matrix) on a sandbox of its own,
/// before anything shares its detection.
impl std::ops::DerefMut for Detection {
    fn deref_mut(&mut self) -> &mut Current {
        #[allow(clippy::expect_used)]
        std::sync::Arc::get_mut(&mut self.0)
            .expect("a sandbox's detection is changed only before it is shared")
    }
}

impl Sandbox {
    /// Probe the kernel and find the backend's runtime paths: once per
    /// server (a trial run and a few short-lived forks). Other grants for
    /// the same backend come from [`Sandbox::regrant`].
    pub fn detect(opts: &SandboxOptions) -> Result<Sandbox, SandboxError> {
        Self::detect_with(opts, <Current as Platform>::detect)
    }

    /// [`Sandbox::detect`] without the trial run, which start-up saves: its
    /// first run (the catalog read) stands for it, and [`Sandbox::tried`]
    /// must be told how that run went before anything else runs.
    pub fn detect_untried(opts: &SandboxOptions) -> Result<Sandbox, SandboxError> {
        Self::detect_with(opts, <Current as Platform>::detect_untried)
    }

    fn detect_with(
        opts: &SandboxOptions,
        detect: fn(&SandboxOptions) -> Result<Current, SandboxError>,
    ) -> Result<Sandbox, SandboxError> {
        sweep_stale_tmpdirs();
        let mut opts = opts.clone();
        opts.masks = Vec::new();
        opts.pins = policy::pin_fixed_paths(&opts).map_err(SandboxError::Unavailable)?;
        Ok(Sandbox {
            state: Detection(std::sync::Arc::new(detect(&opts)?)),
            opts,
        })
    }

    /// After [`Sandbox::detect_untried`]: `ran` says whether its first run
    /// started (every layer applied). When it did not, the trial run tells
    /// whether the sandbox is to blame: in `require` mode that refuses, in
    /// `best-effort` layers may be given up, and then `Ok(true)` says the
    /// run is worth one more try.
    pub fn tried(&mut self, ran: bool) -> Result<bool, SandboxError> {
        Platform::tried(&mut *self.state, &self.opts, ran)
    }

    /// Bound the wait for each run's start by the call timeout (`None`: no
    /// call timeout): a run whose sandbox stays silent fails well within
    /// it, and the next run gets a fresh helper.
    pub fn bound_waits(&self, call_timeout: Option<Duration>) {
        Platform::bound_waits(&*self.state, call_timeout);
    }

    /// This sandbox with other grants for the same backend path (another
    /// root, database, accounts or profile, or the backend's file replaced)
    /// and `masks` (protected entries every run covers), pinned afresh; the kernel is not probed again. A run's
    /// helper is set up for its grants, so a run of the old grants and one
    /// of the new never share one. When no other sandbox shares the
    /// detection (at start), the facts that depend on the grants are taken
    /// again too.
    pub fn regrant(
        mut self,
        opts: &SandboxOptions,
        masks: Vec<PathBuf>,
    ) -> Result<Sandbox, SandboxError> {
        let mut opts = opts.clone();
        opts.backend = self.opts.backend.clone();
        opts.masks = masks;
        // The backend is pinned afresh like the other paths: one its owner
        // replaced (an upgrade) is the file runs get from this resolution
        // on. Whether its bytes may run is the pins' to say (`--pin`
        // refuses one that differs from them; without, the change is
        // logged), not a stale pin that would refuse every run after.
        opts.pins = policy::pin_fixed_paths(&opts).map_err(SandboxError::Unavailable)?;
        self.opts = opts;
        Ok(self)
    }

    pub fn layers_line(&self) -> String {
        Platform::layers_line(&*self.state)
    }

    /// What holds each promise here, for the start-up line.
    pub fn promises_line(&self, drafts: bool) -> String {
        Platform::promises_line(&*self.state, &self.opts, drafts)
    }

    /// Why `--allow-drafts` can't be honoured here (`None`: it can).
    pub fn drafts_refused(&self) -> Option<String> {
        Platform::drafts_refused(&*self.state, &self.opts)
    }

    pub fn spawn(
        &self,
        kind: RunKind,
        argv: &[String],
        cwd: &Path,
    ) -> Result<SandboxedChild, SandboxError> {
        self.spawn_with_stdin(kind, argv, cwd, None, None)
    }

    /// Like `spawn`, executing `exe` (an open descriptor of the backend's
    /// file, the one `--pin` hashed) rather than the path, when given.
    pub(crate) fn spawn_from(
        &self,
        kind: RunKind,
        argv: &[String],
        cwd: &Path,
        exe: Option<BorrowedFd<'_>>,
    ) -> Result<SandboxedChild, SandboxError> {
        self.spawn_with_stdin(kind, argv, cwd, None, exe)
    }

    /// Like `spawn`, with a chosen stdin (only the probe's terminal attempt
    /// uses this; tool runs always get /dev/null).
    pub(crate) fn spawn_with_stdin(
        &self,
        kind: RunKind,
        argv: &[String],
        cwd: &Path,
        stdin: Option<OwnedFd>,
        exe: Option<BorrowedFd<'_>>,
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
        Platform::spawn(&*self.state, &self.opts, kind, argv, cwd, stdin, exe)
    }
}

/// The process the server holds for a run.
pub(crate) enum Process {
    /// A helper the server spawned itself.
    Spawned(Child),
    /// An init forked by the sandbox's zygote.
    #[cfg(target_os = "linux")]
    Forked(linux::Run),
}

impl From<Child> for Process {
    fn from(c: Child) -> Self {
        Process::Spawned(c)
    }
}

/// A running sandboxed backend.
///
/// A run's network calls wait for its supervisor's answer, which is given
/// only while the caller polls [`SandboxedChild::supervisor_fd`] or is in
/// `wait` or `try_wait`: read its output on other threads (or in the same
/// `poll`), never to the end before waiting, or a run that tries to
/// connect waits for ever.
pub struct SandboxedChild {
    child: Process,
    pub stdout: Option<ChildStdout>,
    pub stderr: Option<ChildStderr>,
    /// The layers the run was confined by and its policy's digest.
    pub attestation: Option<layers::Attestation>,
    /// Work for when the run is over (a `draft` run's leftovers).
    pub(crate) after: Option<Box<dyn FnOnce() + Send>>,
    /// The run's memory bound (bytes) and the file where the kernel counts
    /// the processes it killed for going past it: a run in a cgroup.
    #[cfg(target_os = "linux")]
    pub(crate) memory_bound: Option<(u64, PathBuf)>,
    /// The `log stream` reading this run's denials, when asked for.
    #[cfg(target_os = "macos")]
    pub(crate) log: Option<macos::unified_log::LogWatch>,
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

    /// Kill the run's whole process tree. On Linux the run's init is killed
    /// and the kernel then kills everything in the run's PID namespace; a
    /// re-executed helper is asked to end the run (it kills every process
    /// below it, being their subreaper, then exits). On macOS the process
    /// group is killed.
    pub fn kill_tree(&mut self) {
        if self.done {
            return;
        }
        match &self.child {
            #[cfg(target_os = "linux")]
            Process::Spawned(c) => {
                // The re-executed helper: without a PID namespace it is the
                // run's subreaper, and on SIGTERM it kills every process the
                // run left (a daemon in a session of its own included) before
                // it exits; killing it outright would orphan them. With a PID
                // namespace, SIGTERM ends it and its init's parent-death
                // signal ends the namespace. SIGCONT wakes a stopped helper.
                let pid = c.id() as libc::pid_t;
                // SAFETY: signalling our own, not yet reaped child.
                unsafe {
                    libc::kill(pid, libc::SIGTERM);
                    libc::kill(pid, libc::SIGCONT);
                }
            }
            #[cfg(not(target_os = "linux"))]
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

    /// A descriptor that turns readable when the run's exit can be taken
    /// with `try_wait`, where the platform has one: a run forked by the
    /// zygote reports its end on its channel. `None` means the caller must
    /// look again later.
    pub(crate) fn exit_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        match &self.child {
            Process::Spawned(_) => None,
            #[cfg(target_os = "linux")]
            Process::Forked(r) if !self.done => Some(r.exit_fd()),
            #[cfg(target_os = "linux")]
            Process::Forked(_) => None,
        }
    }

    /// The run's seccomp listener, to poll beside its pipes while it runs.
    pub(crate) fn supervisor_fd(&self) -> Option<std::os::fd::RawFd> {
        match &self.child {
            #[cfg(target_os = "linux")]
            Process::Forked(r) if !self.done => r.supervisor.fd(),
            _ => None,
        }
    }

    /// `poll` set `revents` on [`Self::supervisor_fd`]: answer the run.
    pub(crate) fn supervise(&mut self, revents: i16) {
        #[cfg(target_os = "linux")]
        if let Process::Forked(r) = &mut self.child {
            r.supervisor.ready(revents);
        }
        #[cfg(not(target_os = "linux"))]
        let _ = revents;
    }

    /// The run's memory bound in bytes, if the kernel killed any of its
    /// processes for going past it. Read before the run's cgroup goes
    /// (when this value is dropped).
    pub(crate) fn memory_exceeded(&self) -> Option<u64> {
        #[cfg(target_os = "linux")]
        if let Some((bound, events)) = &self.memory_bound {
            let text = std::fs::read_to_string(events).unwrap_or_default();
            return (linux::cgroup::oom_kills(&text) > 0).then_some(*bound);
        }
        // macOS has no bound on a run's memory as a whole.
        None
    }

    /// What the run tried and was refused, as far as anyone watched. On
    /// macOS, read from the unified log: call it once the run has ended, as
    /// it waits the log's grace and then stops reading.
    pub(crate) fn denied(&self) -> denied::Denied {
        #[cfg(target_os = "macos")]
        if let Some(log) = &self.log {
            return log.finish();
        }
        match &self.child {
            #[cfg(target_os = "linux")]
            Process::Forked(r) => r.denied(),
            _ => denied::Denied::new(denied::Watch::Unavailable),
        }
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
        if let Some(after) = self.after.take() {
            after();
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod backend_folder_tests {
    use super::backend_folder;

    #[test]
    fn a_bin_layout_grants_its_prefix_and_anything_else_its_own_file() {
        let dir = tempfile::tempdir().unwrap();
        let prefix = dir.path().join("rw");
        std::fs::create_dir_all(prefix.join("bin")).unwrap();
        let in_bin = prefix.join("bin/backend");
        let beside = prefix.join("backend.sh");
        for f in [&in_bin, &beside] {
            std::fs::write(f, "#!/bin/sh\n").unwrap();
        }
        assert_eq!(backend_folder(&in_bin), Some(prefix.clone()));
        assert_eq!(backend_folder(&beside), None);
        // A `bin` folder whose parent is guarded gives the file alone.
        assert_eq!(backend_folder(std::path::Path::new("/tmp/bin/x")), None);
    }
}
