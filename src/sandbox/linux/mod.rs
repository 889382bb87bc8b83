//! The Linux sandbox: what the kernel offers (detected once at start), the
//! parent side of a run (policy, private temp folder, status pipe), and the
//! code that applies the layers in a fixed order and then executes the
//! backend.
//!
//! Two process shapes apply the same layers with the same code. When runs
//! can have their own user and PID namespaces (the usual case), the
//! sandbox's zygote forks them (`zygote.rs`): one long-lived helper per
//! sandbox, and one init per run forked ahead of its request:
//!
//! ```text
//! server ──once──▶ zygote (`__sandbox-helper @zygote`): shared user + empty network namespace
//!                   └─clone(user, PID, IPC)─▶ init (pid 1): id maps, pid_max, no nested namespaces
//!                                              … request arrives …
//!                                              rlimits, Landlock, capabilities, seccomp
//!                                              └─fork─▶ execve(backend)
//! ```
//!
//! Otherwise every run re-executes this program as its helper:
//!
//! ```text
//! server ──spawn──▶ helper (our own binary, `__sandbox-helper`)
//!                    │ close fds, setsid, parent-death signal
//!                    │ unshare(user, net, ipc, pid), id maps, not dumpable
//!                    └─fork─▶ init (pid 1 of the new PID namespace)
//!                              │ pid_max, no nested namespaces,
//!                              │ rlimits, Landlock, capabilities, seccomp
//!                              └─fork─▶ execve(backend)
//! ```
//!
//! Either way init waits for the backend, kills and reaps whatever it left
//! in the namespace, and reports the backend's status (the re-exec helper
//! then exits the way the backend did). Killing init (or the helper, which
//! takes init with it through the parent-death signal) makes the kernel
//! kill everything left in the namespace. The status pipe (fd 3,
//! close-on-exec) stays silent when the backend was executed, and carries a
//! message when anything before that failed: the server then reports a
//! failed layer and never sees an unconfined run.
//!
//! Caveat for callers of the re-exec shape: the parent-death signal follows
//! the *thread* that spawned the helper, so `spawn` must be called from a
//! thread that outlives the run (as a thread that spawns, reads and waits
//! does). The zygote is spawned from a thread of its own for that reason.

pub mod caps;
pub mod landlock;
pub mod namespaces;
pub mod platform;
pub mod rlimits;
pub mod seccomp;
pub mod zygote;

use std::convert::Infallible;
use std::ffi::CString;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use super::policy::{self, Layers, Policy};
use super::{Layer, LayerStatus, RunKind, SandboxError, SandboxOptions, SandboxedChild};
use crate::cli::SandboxMode;

/// The helper's status pipe is always this descriptor.
const STATUS_FD: RawFd = 3;
/// The environment variable that carries the policy to the helper (argv
/// would show it to every user through `/proc/*/cmdline`).
pub const POLICY_ENV: &str = "REACHWEAVER_SANDBOX_POLICY";
/// The helper argument meaning "read the policy from `POLICY_ENV`".
pub const POLICY_FROM_ENV: &str = "@env";
/// The PID namespace's highest pid: bounds the run's processes whatever
/// its uid (real root is exempt from `RLIMIT_NPROC`).
pub const PID_MAX: u32 = 512;
/// How long the server waits for the helper to confirm the layers.
const STATUS_TIMEOUT: Duration = Duration::from_secs(20);

/// What the kernel offers, found once at start.
#[derive(Debug, Clone)]
pub struct Detected {
    pub kernel: String,
    pub landlock_abi: i32,
    pub seccomp: Result<(), String>,
    pub userns: Result<(), String>,
    pub netns: Result<(), String>,
    pub ipcns: Result<(), String>,
    pub pidns: Result<(), String>,
    pub pid_max: Result<(), String>,
}

impl Detected {
    pub fn probe() -> Detected {
        let kernel = kernel_release();
        // One probe for the usual case where everything is allowed; one per
        // kind only when something is refused, to name it.
        let all =
            libc::CLONE_NEWUSER | libc::CLONE_NEWNET | libc::CLONE_NEWIPC | libc::CLONE_NEWPID;
        let (userns, netns, ipcns, pidns) = if try_unshare(all).is_ok() {
            (Ok(()), Ok(()), Ok(()), Ok(()))
        } else {
            let userns = try_unshare(libc::CLONE_NEWUSER);
            let with_user = |flag: libc::c_int| match &userns {
                Ok(()) => try_unshare(libc::CLONE_NEWUSER | flag),
                Err(e) => Err(format!("needs a user namespace ({e})")),
            };
            let netns = with_user(libc::CLONE_NEWNET);
            let ipcns = with_user(libc::CLONE_NEWIPC);
            let pidns = with_user(libc::CLONE_NEWPID);
            (userns, netns, ipcns, pidns)
        };
        let pid_max = match (&pidns, kernel_at_least(&kernel, 6, 14)) {
            (Ok(()), true) => try_pid_max(),
            (Ok(()), false) => Err("per-namespace pid_max needs Linux 6.14".into()),
            (Err(_), _) => Err("needs a PID namespace".into()),
        };
        Detected {
            landlock_abi: landlock::kernel_abi(),
            seccomp: seccomp_available(),
            userns,
            netns,
            ipcns,
            pidns,
            pid_max,
            kernel,
        }
    }

    /// Every layer, available or not, for `sandbox status`.
    pub fn report(&self) -> Vec<LayerStatus> {
        let r = |name: &'static str, res: &Result<(), String>, ok: &str| LayerStatus {
            name,
            available: res.is_ok(),
            detail: match res {
                Ok(()) => ok.to_string(),
                Err(e) => e.clone(),
            },
        };
        let abi = self.landlock_abi;
        let ll = |name: &'static str, min: i32, what: &str| LayerStatus {
            name,
            available: abi >= min,
            detail: if abi >= min {
                format!("{what} (Landlock ABI {abi})")
            } else if abi == 0 {
                "Landlock is not enabled in this kernel".to_string()
            } else {
                format!("needs Landlock ABI {min}, kernel has {abi}")
            },
        };
        vec![
            r("userns", &self.userns, "user namespace"),
            r("netns", &self.netns, "empty network namespace"),
            r("ipcns", &self.ipcns, "private IPC namespace"),
            r(
                "pidns",
                &self.pidns,
                "PID namespace; the run's tree dies with it",
            ),
            r(
                "pid_max",
                &self.pid_max,
                "process count bounded in the PID namespace",
            ),
            ll("landlock", 1, "file system rules"),
            ll("landlock_tcp", 4, "TCP bind/connect denied"),
            ll("landlock_scope", 6, "abstract sockets and signals scoped"),
            r("seccomp", &self.seccomp, "system call filter"),
            r(
                "caps",
                &Ok(()),
                "every capability dropped, securebits locked, no_new_privs",
            ),
            r(
                "rlimits",
                &Ok(()),
                "core 0, address space, file size, files, processes",
            ),
        ]
    }

    /// The layers a run would use: everything available, minus what was
    /// switched off.
    pub fn layers(&self, without: &[Layer]) -> Layers {
        let off = |l: Layer| without.contains(&l);
        let userns = self.userns.is_ok();
        let pidns = userns && self.pidns.is_ok();
        let ll = !off(Layer::Landlock) && self.landlock_abi >= 1;
        Layers {
            userns,
            netns: userns && self.netns.is_ok() && !off(Layer::Netns),
            ipcns: userns && self.ipcns.is_ok(),
            pidns,
            pid_max: (pidns && self.pid_max.is_ok()).then_some(PID_MAX),
            ns_limits: userns,
            landlock_abi: ll.then_some(self.landlock_abi),
            landlock_net: ll && self.landlock_abi >= 4,
            landlock_scope: ll && self.landlock_abi >= 6,
            seccomp: self.seccomp.is_ok() && !off(Layer::Seccomp),
            caps: !off(Layer::Caps),
            rlimits: true,
        }
    }

    /// In `require` mode: what is missing of the promised minimum (seccomp,
    /// Landlock file rules, and the network denied by a namespace or by
    /// Landlock TCP). Empty when everything promised is there.
    pub fn missing_for_require(&self) -> Vec<String> {
        let mut missing = Vec::new();
        if let Err(e) = &self.seccomp {
            missing.push(format!("seccomp ({e})"));
        }
        if self.landlock_abi < 1 {
            missing.push("Landlock file system rules (Landlock is not enabled)".to_string());
        }
        if self.netns.is_err() && self.landlock_abi < 4 {
            let why = self.netns.as_ref().err().cloned().unwrap_or_default();
            missing.push(format!(
                "a network denial: neither a network namespace ({why}) nor Landlock TCP rules (ABI {} < 4)",
                self.landlock_abi
            ));
        }
        missing
    }
}

/// The start-up line's description of the layers in force.
pub fn layers_line(d: &Detected, layers: &Layers, mode: SandboxMode, without: &[Layer]) -> String {
    let mut ns: Vec<String> = Vec::new();
    for (on, name) in [
        (layers.userns, "userns"),
        (layers.netns, "netns"),
        (layers.ipcns, "ipcns"),
        (layers.pidns, "pidns"),
    ] {
        if on {
            ns.push(name.to_string());
        }
    }
    if let Some(max) = layers.pid_max {
        if let Some(last) = ns.last_mut() {
            last.push_str(&format!("(pid_max {max})"));
        }
    }
    let mut parts: Vec<String> = Vec::new();
    if !ns.is_empty() {
        parts.push(ns.join("+"));
    }
    if let Some(abi) = layers.landlock_abi {
        let mut what = vec!["fs"];
        if layers.landlock_net {
            what.push("tcp");
        }
        if layers.landlock_scope {
            what.push("scope");
        }
        parts.push(format!("landlock(abi{abi}: {})", what.join(" ")));
    }
    if layers.seccomp {
        parts.push("seccomp".into());
    }
    if layers.caps {
        parts.push("caps".into());
    }
    if layers.rlimits {
        parts.push("rlimits".into());
    }
    let mut line = parts.join(" ");
    let mut dropped: Vec<String> = Vec::new();
    if mode == SandboxMode::BestEffort || !without.is_empty() {
        for s in d.report() {
            if !s.available {
                dropped.push(format!("{} ({})", s.name, s.detail));
            }
        }
    }
    if !dropped.is_empty() {
        line.push_str(&format!("; missing: {}", dropped.join(", ")));
    }
    if !without.is_empty() {
        let names: Vec<&str> = without.iter().map(|l| l.name()).collect();
        line.push_str(&format!("; SWITCHED OFF: {}", names.join(", ")));
    }
    line
}

fn kernel_release() -> String {
    // SAFETY: uname fills a struct we own.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    if unsafe { libc::uname(&mut u) } != 0 {
        return "unknown".into();
    }
    // SAFETY: uname NUL-terminates the field.
    unsafe { std::ffi::CStr::from_ptr(u.release.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

/// Whether a release string like `6.18.44-foo` is at least `major.minor`. Pure.
pub fn kernel_at_least(release: &str, major: u32, minor: u32) -> bool {
    let mut it = release
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<u32>().unwrap_or(0));
    let ma = it.next().unwrap_or(0);
    let mi = it.next().unwrap_or(0);
    (ma, mi) >= (major, minor)
}

fn seccomp_available() -> Result<(), String> {
    // SAFETY: integer-only prctl query.
    if unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) } < 0 {
        return Err(format!("seccomp: {}", std::io::Error::last_os_error()));
    }
    for (action, name) in [
        (libc::SECCOMP_RET_ERRNO, "errno"),
        (libc::SECCOMP_RET_KILL_PROCESS, "kill_process"),
    ] {
        // SAFETY: SECCOMP_GET_ACTION_AVAIL reads one u32 we own.
        let r = unsafe {
            libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_GET_ACTION_AVAIL,
                0,
                &action as *const u32,
            )
        };
        if r != 0 {
            return Err(format!(
                "seccomp action {name}: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    seccomp::build_program().map_err(|e| e.to_string())?;
    Ok(())
}

/// Try `unshare(flags)` in a short-lived child, so the server itself never
/// changes namespace. The child does nothing but the system call and
/// `_exit`, which is safe after `fork` in a multi-threaded process.
fn try_unshare(flags: libc::c_int) -> Result<(), String> {
    in_child(|| {
        // SAFETY: unshare takes flags only.
        if unsafe { libc::unshare(flags) } == 0 {
            0
        } else {
            errno()
        }
    })
    .map_err(|e| format!("unshare: {e}"))
}

/// Whether a PID namespace's own init may set the namespace's `pid_max`
/// (Linux 6.14 and later), tried for real: a child enters new user and PID
/// namespaces and its child, the namespace's init, writes the value.
fn try_pid_max() -> Result<(), String> {
    let path = c"/proc/sys/kernel/pid_max";
    let value = PID_MAX.to_string();
    in_child(|| {
        // SAFETY: only async-signal-safe calls (unshare, fork, open, write,
        // waitpid, _exit) on data prepared before the first fork.
        unsafe {
            if libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWPID) != 0 {
                return errno();
            }
            let init = libc::fork();
            if init < 0 {
                return errno();
            }
            if init == 0 {
                let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd < 0 {
                    libc::_exit(errno());
                }
                let n = libc::write(fd, value.as_ptr().cast(), value.len());
                libc::_exit(if n == value.len() as isize {
                    0
                } else {
                    errno()
                });
            }
            let mut st = 0;
            if libc::waitpid(init, &mut st, 0) != init || !libc::WIFEXITED(st) {
                return libc::EIO;
            }
            libc::WEXITSTATUS(st)
        }
    })
    .map_err(|e| format!("pid_max in a PID namespace: {e}"))
}

fn errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
        & 0xff
}

/// Run `f` in a forked child and return its result (0: success, else an
/// errno). `f` must stick to async-signal-safe calls: the server may have
/// other threads.
fn in_child(f: impl FnOnce() -> i32) -> Result<(), std::io::Error> {
    // SAFETY: the child runs `f` (async-signal-safe by contract) and _exits.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(std::io::Error::last_os_error());
    }
    if pid == 0 {
        let code = f();
        // SAFETY: leaving the child without running the parent's destructors.
        unsafe { libc::_exit(code & 0xff) };
    }
    let mut status = 0;
    loop {
        // SAFETY: waiting for the child we forked.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            break;
        }
        if r < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return Err(std::io::Error::last_os_error());
        }
    }
    if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
        Ok(())
    } else if libc::WIFEXITED(status) {
        Err(std::io::Error::from_raw_os_error(libc::WEXITSTATUS(status)))
    } else {
        Err(std::io::Error::other("the probe child died"))
    }
}

// ---------------------------------------------------------------------------
// Parent side.

/// Spawn one run. `stdin` replaces `/dev/null` only for the probe's
/// terminal attempt. Runs with their own user and PID namespaces are forked
/// by the sandbox's zygote; others by a re-executed helper.
#[allow(clippy::too_many_arguments)]
pub fn spawn(
    opts: &SandboxOptions,
    runtime: &[PathBuf],
    layers: Layers,
    zygotes: Option<&zygote::Slot>,
    kind: RunKind,
    argv: &[String],
    cwd: &Path,
    stdin: Option<OwnedFd>,
) -> Result<SandboxedChild, SandboxError> {
    let tmpdir = super::make_private_tmpdir().map_err(SandboxError::Io)?;
    let guard = super::TmpGuard(Some(tmpdir.clone()));
    let server_env: Vec<(String, String)> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect();
    let policy = policy::build(&policy::BuildInput {
        opts,
        kind,
        runtime,
        env: &server_env,
        layers,
        tmpdir: &tmpdir,
        argv,
        cwd,
        parent_pid: std::process::id(),
    });
    let helper = opts
        .helper
        .as_deref()
        .unwrap_or(Path::new("/proc/self/exe"));
    match zygotes {
        Some(slot) if zygote::usable(&layers) => zygote::spawn(slot, helper, &policy, guard, stdin),
        _ => spawn_reexec(helper, &policy, guard, stdin),
    }
}

/// One run through a freshly executed helper.
fn spawn_reexec(
    helper: &Path,
    policy: &Policy,
    guard: super::TmpGuard,
    stdin: Option<OwnedFd>,
) -> Result<SandboxedChild, SandboxError> {
    let json = serde_json::to_string(policy)
        .map_err(|e| SandboxError::LayerFailed(format!("policy: {e}")))?;

    let (status_r, status_w) = pipe_cloexec().map_err(SandboxError::Io)?;
    let w = status_w.as_raw_fd();
    let mut cmd = Command::new(helper);
    cmd.arg0("reachweaver-mcp-sandbox")
        .arg("__sandbox-helper")
        .arg(POLICY_FROM_ENV)
        .env_clear()
        .env(POLICY_ENV, json)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    match stdin {
        Some(fd) => cmd.stdin(Stdio::from(fd)),
        None => cmd.stdin(Stdio::null()),
    };
    // SAFETY: the closure only calls dup2/fcntl, which are async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            if w == STATUS_FD {
                if libc::fcntl(w, libc::F_SETFD, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            } else if libc::dup2(w, STATUS_FD) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().map_err(SandboxError::Io)?;
    drop(status_w);
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let mut sc = SandboxedChild {
        child: child.into(),
        stdout,
        stderr,
        tmpdir: None,
        done: false,
    };
    // From here on the child owns the folder: its Drop removes it.
    sc.tmpdir = guard.release();
    match read_status(status_r, STATUS_TIMEOUT) {
        Ok(None) => Ok(sc),
        Ok(Some(msg)) => {
            sc.kill_tree();
            let _ = sc.wait();
            Err(decode_status(&msg))
        }
        Err(e) => {
            sc.kill_tree();
            let _ = sc.wait();
            Err(SandboxError::LayerFailed(format!(
                "no word from the sandbox helper: {e}"
            )))
        }
    }
}

fn pipe_cloexec() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: pipe2 fills the array we own.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned here alone.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Read the status pipe to end of file: `None` when nothing was written
/// (the backend was executed), else the message.
fn read_status(fd: OwnedFd, timeout: Duration) -> std::io::Result<Option<String>> {
    let deadline = std::time::Instant::now() + timeout;
    let mut file = std::fs::File::from(fd);
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "timed out",
            ));
        }
        let mut pfd = libc::pollfd {
            fd: file.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: poll on one descriptor we own.
        let r = unsafe { libc::poll(&mut pfd, 1, left.as_millis().min(i32::MAX as u128) as i32) };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if r == 0 {
            continue;
        }
        match file.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => {
                if buf.len() < 64 * 1024 {
                    buf.extend_from_slice(&chunk[..n]);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    if buf.is_empty() {
        Ok(None)
    } else {
        Ok(Some(String::from_utf8_lossy(&buf).into_owned()))
    }
}

/// `L<message>`: a layer failed. `E<errno> <message>`: the program could
/// not be executed (inside the sandbox, so after every layer applied).
fn decode_status(msg: &str) -> SandboxError {
    if let Some(rest) = msg.strip_prefix('E') {
        let (num, text) = rest.split_once(' ').unwrap_or((rest, ""));
        let errno = num.parse::<i32>().unwrap_or(libc::EIO);
        let os = std::io::Error::from_raw_os_error(errno);
        return SandboxError::Io(std::io::Error::new(os.kind(), format!("{text}: {os}")));
    }
    SandboxError::LayerFailed(msg.strip_prefix('L').unwrap_or(msg).to_string())
}

// ---------------------------------------------------------------------------
// Helper side. Everything below runs in the helper process and its forks,
// which are single-threaded, so allocating between fork and exec is safe.

/// A failure before the backend runs: reported on the status pipe.
enum Failure {
    Layer(String),
    Exec(i32, String),
}

fn report(f: &Failure) {
    let text = match f {
        Failure::Layer(m) => format!("L{m}"),
        Failure::Exec(errno, m) => format!("E{errno} {m}"),
    };
    // SAFETY: writing our own buffer to the status descriptor (if any).
    unsafe {
        libc::write(STATUS_FD, text.as_ptr().cast(), text.len());
    }
}

/// Entry point of `__sandbox-helper`. Returns only on failure.
pub fn helper_main(arg: &str) -> anyhow::Result<u8> {
    if arg == zygote::ZYGOTE_ARG {
        return zygote::main();
    }
    let text = if arg == POLICY_FROM_ENV {
        std::env::var(POLICY_ENV).unwrap_or_default()
    } else {
        arg.to_string()
    };
    let failure = match serde_json::from_str::<Policy>(&text) {
        Ok(policy) => match run_helper(&policy) {
            Ok(never) => match never {},
            Err(f) => f,
        },
        Err(e) => Failure::Layer(format!("policy: {e}")),
    };
    report(&failure);
    match failure {
        Failure::Layer(m) => anyhow::bail!("sandbox layer failed: {m}"),
        Failure::Exec(e, m) => anyhow::bail!("{m}: {}", std::io::Error::from_raw_os_error(e)),
    }
}

fn last_error(what: &str) -> Failure {
    Failure::Layer(format!("{what}: {}", std::io::Error::last_os_error()))
}

fn run_helper(p: &Policy) -> Result<Infallible, Failure> {
    // 1. Descriptors: only stdio and the status pipe survive.
    // SAFETY: closing descriptors this process doesn't use.
    if unsafe { libc::close_range(STATUS_FD as u32 + 1, u32::MAX, 0) } != 0 {
        return Err(last_error("close_range"));
    }
    // SAFETY: marking the status pipe close-on-exec.
    unsafe { libc::fcntl(STATUS_FD, libc::F_SETFD, libc::FD_CLOEXEC) };

    // 2. Own session; die with the server.
    // SAFETY: integer-only process calls.
    unsafe {
        if libc::setsid() < 0 {
            return Err(last_error("setsid"));
        }
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
            return Err(last_error("parent-death signal"));
        }
        if libc::getppid() as u32 != p.parent_pid {
            // The server died before the signal was armed.
            libc::_exit(1);
        }
    }
    std::env::set_current_dir(&p.cwd)
        .map_err(|e| Failure::Layer(format!("working folder {}: {e}", p.cwd.display())))?;

    // Everything that can fail for lack of memory or bad input is prepared
    // before the first namespace change.
    let exec = ExecArgs::new(p)?;
    let last_cap = caps::last_cap();
    let program = if p.layers.seccomp {
        Some(seccomp::build_program().map_err(|e| Failure::Layer(format!("seccomp: {e}")))?)
    } else {
        None
    };

    // 3. Namespaces. The ids are read before: afterwards they'd be unmapped.
    // SAFETY: getuid/getgid can't fail.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    namespaces::unshare_and_map(&p.layers, uid, gid).map_err(Failure::Layer)?;
    // No core, no ptrace or /proc peeking by the owner's other processes.
    // Only now: a non-dumpable process can't write its own id maps.
    // SAFETY: integer-only prctl.
    if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) } != 0 {
        return Err(last_error("not dumpable"));
    }

    let prepared = Prepared {
        exec,
        program: program.as_ref(),
        last_cap,
    };
    if p.layers.pidns {
        fork_init(p, &prepared)
    } else {
        confine(p, &prepared)?;
        Err(prepared.exec.exec())
    }
}

/// What the helper computes before it changes anything.
struct Prepared<'a> {
    exec: ExecArgs,
    program: Option<&'a seccompiler::BpfProgram>,
    last_cap: u32,
}

/// Steps 4 to 7: rlimits, Landlock, capabilities, seccomp.
fn confine(p: &Policy, prep: &Prepared<'_>) -> Result<(), Failure> {
    if p.layers.rlimits {
        rlimits::apply(&p.rlimits).map_err(Failure::Layer)?;
    }
    if let Some(abi) = p.layers.landlock_abi {
        landlock::apply(p, abi, p.layers.landlock_net, p.layers.landlock_scope)
            .map_err(Failure::Layer)?;
    }
    if p.layers.caps {
        caps::apply(prep.last_cap).map_err(Failure::Layer)?;
    }
    caps::set_no_new_privs().map_err(Failure::Layer)?;
    if let Some(program) = prep.program {
        seccomp::apply(program).map_err(Failure::Layer)?;
    }
    Ok(())
}

/// Step 8's arguments, built before any layer is applied.
struct ExecArgs {
    program: CString,
    argv: Vec<CString>,
    env: Vec<CString>,
}

impl ExecArgs {
    fn new(p: &Policy) -> Result<ExecArgs, Failure> {
        let c = |s: &str| {
            CString::new(s).map_err(|_| Failure::Layer("a NUL byte in the command line".into()))
        };
        let program = c(&p.program.to_string_lossy())?;
        let argv = p.argv.iter().map(|a| c(a)).collect::<Result<Vec<_>, _>>()?;
        let env = p
            .env
            .iter()
            .map(|(k, v)| c(&format!("{k}={v}")))
            .collect::<Result<Vec<_>, _>>()?;
        if argv.is_empty() {
            return Err(Failure::Layer("empty command line".into()));
        }
        Ok(ExecArgs { program, argv, env })
    }

    /// Reset what our runtime changed, then execute. Returns only on failure.
    fn exec(&self) -> Failure {
        // SAFETY: restoring default signal handling for the new program.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
        }
        let mut argv: Vec<*const libc::c_char> = self.argv.iter().map(|a| a.as_ptr()).collect();
        argv.push(std::ptr::null());
        let mut envp: Vec<*const libc::c_char> = self.env.iter().map(|a| a.as_ptr()).collect();
        envp.push(std::ptr::null());
        // SAFETY: NUL-terminated arrays of C strings that outlive the call.
        unsafe { libc::execve(self.program.as_ptr(), argv.as_ptr(), envp.as_ptr()) };
        let errno = std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO);
        Failure::Exec(errno, format!("execute {}", self.program.to_string_lossy()))
    }
}

/// Fork the PID namespace's init, then wait for it and exit like the backend.
fn fork_init(p: &Policy, prep: &Prepared<'_>) -> Result<Infallible, Failure> {
    let mut pair = [0 as RawFd; 2];
    // SAFETY: socketpair fills the array we own.
    if unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
            pair.as_mut_ptr(),
        )
    } != 0
    {
        return Err(last_error("socketpair"));
    }
    let (outer_end, init_end) = (pair[0], pair[1]);
    // SAFETY: the helper is single-threaded, so the child may do anything.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(last_error("fork"));
    }
    if pid == 0 {
        // SAFETY: closing the outer helper's end in the child.
        unsafe { libc::close(outer_end) };
        let failure = match init_main(p, prep, init_end) {
            Ok(never) => match never {},
            Err(f) => f,
        };
        report(&failure);
        // SAFETY: leaving the child without running the parent's destructors.
        unsafe { libc::_exit(127) };
    }
    // SAFETY: the outer helper keeps neither the init's end nor the status pipe,
    // so the server sees end-of-file exactly when the backend is executed.
    unsafe {
        libc::close(init_end);
        libc::close(STATUS_FD);
    }
    outer_wait(pid, outer_end)
}

/// Wait for init; exit with the backend's status (which init sends as the
/// raw wait status), or init's own if it sent none.
fn outer_wait(init: libc::pid_t, sock: RawFd) -> ! {
    let mut status = 0;
    loop {
        // SAFETY: waiting for our own child.
        let r = unsafe { libc::waitpid(init, &mut status, 0) };
        if r == init {
            break;
        }
        if r < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            // SAFETY: nothing left to wait for.
            unsafe { libc::_exit(125) };
        }
    }
    let mut buf = [0u8; 4];
    // SAFETY: reading into a buffer we own.
    let n = unsafe { libc::read(sock, buf.as_mut_ptr().cast(), buf.len()) };
    if n == 4 {
        status = i32::from_le_bytes(buf);
    }
    exit_like(status)
}

/// Exit with the same code, or die by the same signal.
fn exit_like(status: libc::c_int) -> ! {
    // SAFETY: process-exit paths with integer arguments.
    unsafe {
        if libc::WIFSIGNALED(status) {
            let sig = libc::WTERMSIG(status);
            libc::signal(sig, libc::SIG_DFL);
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, sig);
            libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            libc::kill(libc::getpid(), sig);
            libc::_exit(128 + sig);
        }
        libc::_exit(if libc::WIFEXITED(status) {
            libc::WEXITSTATUS(status)
        } else {
            125
        })
    }
}

/// Init of the PID namespace under the re-exec helper: die with the outer
/// helper, then the steps every init takes.
fn init_main(p: &Policy, prep: &Prepared<'_>, sock: RawFd) -> Result<Infallible, Failure> {
    // SAFETY: integer-only process calls.
    unsafe {
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
            return Err(last_error("parent-death signal"));
        }
        // The outer helper may have died before the signal was armed; its
        // end of the socket closes when it does.
        let mut byte = 0u8;
        let r = libc::recv(
            sock,
            (&mut byte as *mut u8).cast(),
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        );
        if r == 0 {
            libc::_exit(1);
        }
    }
    init_namespace(&p.layers)?;
    run_as_init(p, prep, sock, None)
}

/// What a PID namespace's init sets before anything else: the namespace's
/// `pid_max` and, in its user namespace, no nested namespaces.
fn init_namespace(layers: &Layers) -> Result<(), Failure> {
    // SAFETY: getpid can't fail.
    if unsafe { libc::getpid() } != 1 {
        return Err(Failure::Layer("pidns: not the namespace's init".into()));
    }
    if let Some(max) = layers.pid_max {
        namespaces::set_pid_max(max).map_err(|e| Failure::Layer(format!("pid_max: {e}")))?;
    }
    if layers.ns_limits {
        namespaces::limit_nested_namespaces()
            .map_err(|e| Failure::Layer(format!("nested namespaces: {e}")))?;
    }
    Ok(())
}

/// Init of the PID namespace, once `init_namespace` is done: finish
/// confinement, start the backend, reap everything, report the backend's
/// raw wait status on `sock` (prefixed with `tag` when there is one), exit.
fn run_as_init(
    p: &Policy,
    prep: &Prepared<'_>,
    sock: RawFd,
    tag: Option<u8>,
) -> Result<Infallible, Failure> {
    confine(p, prep)?;

    // SAFETY: single-threaded process; the child only executes.
    let child = unsafe { libc::fork() };
    if child < 0 {
        return Err(last_error("fork"));
    }
    if child == 0 {
        let failure = prep.exec.exec();
        report(&failure);
        // SAFETY: leaving the child after a failed execve.
        unsafe { libc::_exit(127) };
    }
    // SAFETY: init keeps no copy of the status pipe, nor of the run's
    // stdio: end of file on the output means the run's processes are done
    // with it.
    unsafe {
        for fd in [STATUS_FD, 0, 1, 2] {
            libc::close(fd);
        }
    }
    let mut status = 0;
    loop {
        let mut st = 0;
        // SAFETY: reaping any child of init (orphans land here too).
        let r = unsafe { libc::waitpid(-1, &mut st, 0) };
        if r == child {
            status = st;
            break;
        }
        if r < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            break;
        }
    }
    // The backend is done: whatever it left behind goes now, and is reaped,
    // so the status below also means the namespace is empty.
    empty_namespace();
    let mut msg = Vec::with_capacity(5);
    msg.extend(tag);
    msg.extend_from_slice(&status.to_le_bytes());
    // SAFETY: writing our own buffer, then exiting without destructors.
    unsafe {
        libc::write(sock, msg.as_ptr().cast(), msg.len());
        libc::_exit(if libc::WIFEXITED(status) {
            libc::WEXITSTATUS(status)
        } else {
            128 + libc::WTERMSIG(status)
        });
    }
}

/// As a PID namespace's init: kill every other process in the namespace
/// and reap them all.
fn empty_namespace() {
    loop {
        // SAFETY: from init, -1 means every other process of the namespace.
        unsafe { libc::kill(-1, libc::SIGKILL) };
        loop {
            let mut st = 0;
            // SAFETY: reaping init's children.
            let r = unsafe { libc::waitpid(-1, &mut st, 0) };
            if r < 0 {
                if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                    continue;
                }
                break;
            }
        }
        // A process forked while the signal went out would be the only
        // one left; none answering means none is.
        // SAFETY: signal 0 only checks that some process would receive it.
        if unsafe { libc::kill(-1, 0) } != 0 {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_versions_compare() {
        assert!(kernel_at_least("6.18.44-fc-v657", 6, 14));
        assert!(kernel_at_least("6.14.0", 6, 14));
        assert!(!kernel_at_least("6.13.9-arch1", 6, 14));
        assert!(!kernel_at_least("5.15.0-91-generic", 6, 14));
        assert!(kernel_at_least("7.0.1", 6, 14));
        assert!(!kernel_at_least("garbage", 6, 14));
    }

    #[test]
    fn status_messages_decode_to_typed_errors() {
        match decode_status("Llandlock: the ruleset is not enforced") {
            SandboxError::LayerFailed(m) => assert_eq!(m, "landlock: the ruleset is not enforced"),
            other => panic!("{other:?}"),
        }
        match decode_status("E2 execute /nope") {
            SandboxError::Io(e) => {
                assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
                assert!(e.to_string().contains("/nope"));
            }
            other => panic!("{other:?}"),
        }
    }

    fn detected(abi: i32, net: bool) -> Detected {
        Detected {
            kernel: "6.18.0".into(),
            landlock_abi: abi,
            seccomp: Ok(()),
            userns: Ok(()),
            netns: if net { Ok(()) } else { Err("EPERM".into()) },
            ipcns: Ok(()),
            pidns: Ok(()),
            pid_max: Ok(()),
        }
    }

    #[test]
    fn require_mode_needs_seccomp_landlock_and_a_network_denial() {
        assert!(detected(7, true).missing_for_require().is_empty());
        assert!(detected(4, false).missing_for_require().is_empty());
        assert!(detected(1, true).missing_for_require().is_empty());
        let m = detected(3, false).missing_for_require();
        assert_eq!(m.len(), 1);
        assert!(m[0].contains("network"));
        let m = detected(0, true).missing_for_require();
        assert!(m[0].contains("Landlock"));
        let mut d = detected(7, true);
        d.seccomp = Err("not built in".into());
        assert!(d.missing_for_require()[0].starts_with("seccomp"));
    }

    #[test]
    fn layers_follow_what_is_available_and_switched_off() {
        let d = detected(7, true);
        let all = d.layers(&[]);
        assert!(all.userns && all.netns && all.ipcns && all.pidns && all.seccomp && all.caps);
        assert_eq!(all.landlock_abi, Some(7));
        assert!(all.landlock_net && all.landlock_scope);
        assert_eq!(all.pid_max, Some(PID_MAX));
        let l = d.layers(&[Layer::Landlock]);
        assert_eq!(l.landlock_abi, None);
        assert!(!l.landlock_net && !l.landlock_scope);
        assert!(!d.layers(&[Layer::Seccomp]).seccomp);
        assert!(!d.layers(&[Layer::Netns]).netns);
        assert!(d.layers(&[Layer::Netns]).userns);
        assert!(!d.layers(&[Layer::Caps]).caps);
        let old = detected(5, true).layers(&[]);
        assert!(old.landlock_net && !old.landlock_scope);
    }

    #[test]
    fn the_layers_line_names_what_runs_and_what_is_off() {
        let d = detected(7, true);
        let line = layers_line(&d, &d.layers(&[]), SandboxMode::Require, &[]);
        assert_eq!(
            line,
            format!("userns+netns+ipcns+pidns(pid_max {PID_MAX}) landlock(abi7: fs tcp scope) seccomp caps rlimits")
        );
        let line = layers_line(
            &d,
            &d.layers(&[Layer::Seccomp]),
            SandboxMode::Require,
            &[Layer::Seccomp],
        );
        assert!(line.ends_with("; SWITCHED OFF: seccomp"), "{line}");
        assert!(!line.contains(" seccomp "));
        let d = detected(5, false);
        let line = layers_line(&d, &d.layers(&[]), SandboxMode::BestEffort, &[]);
        assert!(line.contains("missing: netns (EPERM)"), "{line}");
        assert!(line.contains("landlock_scope"), "{line}");
    }
}
