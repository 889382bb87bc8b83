//! The long-lived spawner: one helper process per sandbox, started once,
//! that forks each run instead of the server re-executing itself per run.
//!
//! Why: re-executing the server binary for every run costs an `execve`, a
//! dynamic load, a runtime start and a new network namespace, which was
//! most of what a sandboxed run cost beyond the backend itself. The zygote
//! pays for those once. It also forks each run's init before the run is
//! asked for, so the init's namespaces, id maps, `pid_max` and namespace
//! counters are ready when the request comes; only the layers that depend
//! on the run (resource limits, Landlock, capabilities, seccomp, in that
//! order) are applied once the policy is known.
//!
//! ```text
//! server ──spawn once──▶ zygote (`__sandbox-helper @zygote`, single-threaded)
//!   │  control socket      │ close fds, setsid, parent-death signal
//!   │  (policy + 5 fds)    │ unshare(user, net): one empty network namespace
//!   │                      └─clone(user, PID, IPC)─▶ spare init (pid 1), forked ahead
//!   │                            │ own id maps, not dumpable, pid_max, no nested namespaces
//!   │                            │ … request forwarded by the zygote …
//!   │                            │ rlimits, Landlock, capabilities, seccomp
//!   │                            └─fork─▶ execve(backend)
//!   └── run channel (one per run): 'P' pid + pidfd, 'S' backend status, 'Z' init status
//! ```
//!
//! Every run still gets its own user, PID and IPC namespaces, its own
//! Landlock domain, seccomp filter, capability drop and resource limits,
//! applied by the same code as in the re-exec helper; runs share only the
//! zygote's empty network namespace, in which none of them holds any
//! capability. The stdout, stderr, stdin and status descriptors are made by
//! the server and passed on (`SCM_RIGHTS`), so the status pipe still reaches
//! end of file exactly when the backend was executed and carries a message
//! when anything before that failed.
//!
//! Lifetime: the zygote is spawned from a thread that lives as long as the
//! sandbox (the parent-death signal follows the spawning thread), dies when
//! the server does, and every init dies with the zygote; an init's death
//! makes the kernel kill everything left in its PID namespace. The zygote
//! keeps an exited init as a zombie until the server has read its status,
//! so the run's pid stays the run's for as long as the server holds it, as
//! with a child of its own.

use std::collections::HashMap;
use std::convert::Infallible;
use std::io::{IoSlice, IoSliceMut, Read};
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::socket::{
    recvmsg, sendmsg, socketpair, AddressFamily, ControlMessage, ControlMessageOwned, MsgFlags,
    SockFlag, SockType,
};
use serde::{Deserialize, Serialize};

use super::{
    caps, decode_status, init_namespace, last_error, namespaces, pipe_cloexec, read_status, report,
    run_as_init, seccomp, ExecArgs, Failure, Prepared, POLICY_ENV, STATUS_FD, STATUS_TIMEOUT,
};
use crate::sandbox::policy::{Layers, Policy};
use crate::sandbox::{SandboxError, SandboxedChild, TmpGuard};

/// The helper argument that starts a zygote instead of one run.
pub const ZYGOTE_ARG: &str = "@zygote";
/// The zygote's end of the control socket.
const CONTROL_FD: RawFd = 3;
/// Descriptors passed with every request, in this order.
const PASSED: usize = 5;
/// How long the server waits on a run channel once the status pipe has
/// spoken, and the zygote on a spare that is setting itself up.
const CHANNEL_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest request the zygote accepts (a policy is a few KiB).
const MAX_REQUEST: usize = 16 << 20;
/// Run channel messages: the init's pid (with a pidfd), the backend's wait
/// status (from init), the init's own wait status (from the zygote).
const MSG_PID: u8 = b'P';
const MSG_BACKEND: u8 = b'S';
const MSG_INIT: u8 = b'Z';

/// Whether runs with these layers can be forked by a zygote: each run needs
/// its own user and PID namespaces (the PID namespace is what kills a run's
/// whole tree); without them the re-exec helper serves.
pub fn usable(layers: &Layers) -> bool {
    layers.userns && layers.pidns
}

/// What the zygote is started with: the layers of every run it forks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct Config {
    parent_pid: u32,
    layers: Layers,
}

impl Config {
    fn for_layers(layers: &Layers) -> Config {
        Config {
            parent_pid: std::process::id(),
            layers: *layers,
        }
    }
}

// ---------------------------------------------------------------------------
// Server side.

/// The zygote of one sandbox, started on first use.
#[derive(Default)]
pub struct Slot(Mutex<Option<Arc<Zygote>>>);

impl Slot {
    /// The running zygote for these layers, started if there is none, it
    /// died, or it was started for other layers.
    fn get(&self, helper: &Path, layers: &Layers) -> Result<Arc<Zygote>, SandboxError> {
        let mut slot = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(z) = slot.as_ref() {
            if z.config.layers == *layers && z.alive() {
                return Ok(Arc::clone(z));
            }
        }
        *slot = None;
        let z = Arc::new(Zygote::start(helper, Config::for_layers(layers))?);
        *slot = Some(Arc::clone(&z));
        Ok(z)
    }

    /// The running zygote's pid, if one runs.
    pub fn pid(&self) -> Option<u32> {
        let slot = self.0.lock().unwrap_or_else(|e| e.into_inner());
        slot.as_ref().map(|z| z.pid)
    }

    fn forget(&self, dead: &Arc<Zygote>) {
        let mut slot = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if slot.as_ref().is_some_and(|z| Arc::ptr_eq(z, dead)) {
            *slot = None;
        }
    }
}

/// A running zygote: the server's end of the control socket, and the
/// thread that spawned it (and reaps it).
pub struct Zygote {
    control: Mutex<OwnedFd>,
    /// The zygote's pid; it is the keeper thread's child until dropped.
    pid: u32,
    config: Config,
    stop: Option<mpsc::Sender<()>>,
    keeper: Option<std::thread::JoinHandle<()>>,
}

impl Zygote {
    fn start(helper: &Path, config: Config) -> Result<Zygote, SandboxError> {
        let (ours, theirs) = socketpair(
            AddressFamily::Unix,
            SockType::Stream,
            None,
            SockFlag::SOCK_CLOEXEC,
        )
        .map_err(|e| SandboxError::Io(e.into()))?;
        let json = serde_json::to_string(&config)
            .map_err(|e| SandboxError::LayerFailed(format!("zygote config: {e}")))?;
        let mut cmd = Command::new(helper);
        cmd.arg0("reachweaver-mcp-sandbox")
            .arg("__sandbox-helper")
            .arg(ZYGOTE_ARG)
            .env_clear()
            .env(POLICY_ENV, json)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let fd = theirs.as_raw_fd();
        // SAFETY: the closure only calls dup2/fcntl, which are async-signal-safe.
        unsafe {
            cmd.pre_exec(move || {
                if fd == CONTROL_FD {
                    if libc::fcntl(fd, libc::F_SETFD, 0) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                } else if libc::dup2(fd, CONTROL_FD) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        // The parent-death signal follows the thread that spawns, so a
        // thread that lives as long as this zygote spawns it, then waits
        // to be told to stop, kills it and reaps it.
        let (started_tx, started_rx) = mpsc::channel();
        let (stop_tx, stop_rx) = mpsc::channel::<()>();
        let keeper = std::thread::Builder::new()
            .name("sandbox-zygote".into())
            .stack_size(128 * 1024)
            .spawn(move || {
                let mut child = match cmd.spawn() {
                    Ok(c) => c,
                    Err(e) => {
                        let _ = started_tx.send(Err(e));
                        return;
                    }
                };
                drop(theirs);
                let _ = started_tx.send(Ok(child.id()));
                let _ = stop_rx.recv();
                let _ = child.kill();
                let _ = child.wait();
            })
            .map_err(SandboxError::Io)?;
        let pid = match started_rx.recv() {
            Ok(Ok(pid)) => pid,
            Ok(Err(e)) => return Err(SandboxError::Io(e)),
            Err(_) => {
                return Err(SandboxError::LayerFailed(
                    "the sandbox zygote's thread ended".into(),
                ))
            }
        };
        let mut z = Zygote {
            control: Mutex::new(ours),
            pid,
            config,
            stop: Some(stop_tx),
            keeper: Some(keeper),
        };
        // The zygote answers `R` once its namespaces are set up, or a
        // status message when they could not be.
        let ready = {
            let control = z.control.get_mut().unwrap_or_else(|e| e.into_inner());
            read_ready(control, STATUS_TIMEOUT)
        };
        match ready {
            Ok(None) => Ok(z),
            Ok(Some(msg)) => Err(decode_status(&msg)),
            Err(e) => Err(SandboxError::LayerFailed(format!(
                "no word from the sandbox zygote: {e}"
            ))),
        }
    }

    /// Whether the zygote's end of the control socket is still open.
    fn alive(&self) -> bool {
        let control = self.control.lock().unwrap_or_else(|e| e.into_inner());
        let mut pfd = libc::pollfd {
            fd: control.as_raw_fd(),
            events: 0,
            revents: 0,
        };
        // SAFETY: poll on one descriptor we own, without waiting.
        let r = unsafe { libc::poll(&mut pfd, 1, 0) };
        r == 0 || (r > 0 && pfd.revents & (libc::POLLHUP | libc::POLLERR) == 0)
    }

    /// Send one request: the policy, with the run's descriptors.
    fn request(&self, policy: &[u8], fds: &[RawFd; PASSED]) -> std::io::Result<()> {
        let control = self.control.lock().unwrap_or_else(|e| e.into_inner());
        send_request(&control, policy, fds)
    }
}

impl Drop for Zygote {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(k) = self.keeper.take() {
            let _ = k.join();
        }
    }
}

/// Wait for the zygote's first byte: `R` (ready), else a status message.
fn read_ready(fd: &OwnedFd, timeout: Duration) -> std::io::Result<Option<String>> {
    if !wait_readable(fd, timeout)? {
        return Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "timed out",
        ));
    }
    let mut byte = [0u8; 1];
    // SAFETY: reading one byte into a buffer we own.
    let n = unsafe { libc::read(fd.as_raw_fd(), byte.as_mut_ptr().cast(), 1) };
    match n {
        1 if byte[0] == b'R' => Ok(None),
        1 => {
            // A failure message follows; the zygote exits after writing it.
            let mut rest = Vec::new();
            let mut f = std::fs::File::from(fd.try_clone()?);
            let _ = (&mut f).take(64 * 1024).read_to_end(&mut rest);
            let mut msg = vec![byte[0]];
            msg.extend_from_slice(&rest);
            Ok(Some(String::from_utf8_lossy(&msg).into_owned()))
        }
        _ => Ok(Some("Lthe sandbox zygote exited while starting".into())),
    }
}

/// Spawn one run through the zygote. `policy` is complete; the caller made
/// its temp folder, which `guard` removes unless the run takes it over.
pub(crate) fn spawn(
    slot: &Slot,
    helper: &Path,
    policy: &Policy,
    guard: TmpGuard,
    stdin: Option<OwnedFd>,
) -> Result<SandboxedChild, SandboxError> {
    let json = serde_json::to_vec(policy)
        .map_err(|e| SandboxError::LayerFailed(format!("policy: {e}")))?;
    let stdin = match stdin {
        Some(fd) => fd,
        None => OwnedFd::from(std::fs::File::open("/dev/null").map_err(SandboxError::Io)?),
    };
    let (out_r, out_w) = pipe_cloexec().map_err(SandboxError::Io)?;
    let (err_r, err_w) = pipe_cloexec().map_err(SandboxError::Io)?;
    let (status_r, status_w) = pipe_cloexec().map_err(SandboxError::Io)?;
    let (chan, chan_run) = socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    )
    .map_err(|e| SandboxError::Io(e.into()))?;
    let fds = [
        stdin.as_raw_fd(),
        out_w.as_raw_fd(),
        err_w.as_raw_fd(),
        status_w.as_raw_fd(),
        chan_run.as_raw_fd(),
    ];
    // A zygote that died since its last run is replaced once.
    let mut tries = 0;
    loop {
        let z = slot.get(helper, &policy.layers)?;
        match z.request(&json, &fds) {
            Ok(()) => break,
            Err(e) if tries == 0 && is_gone(&e) => {
                slot.forget(&z);
                tries += 1;
            }
            Err(e) => return Err(SandboxError::Io(e)),
        }
    }
    // The zygote and the run hold their own copies now; the server keeps
    // only the reading ends, so end of file means what it should.
    drop((stdin, out_w, err_w, status_w, chan_run));

    let status = match read_status(status_r, STATUS_TIMEOUT) {
        Ok(s) => s,
        // Dropping the channel makes the zygote kill a run it may still
        // start or has started.
        Err(e) => {
            return Err(SandboxError::LayerFailed(format!(
                "no word from the sandbox zygote: {e}"
            )))
        }
    };
    let mut child = match Run::from_channel(chan) {
        Ok(run) => SandboxedChild {
            child: crate::sandbox::Process::Forked(run),
            stdout: Some(out_r.into()),
            stderr: Some(err_r.into()),
            tmpdir: None,
            done: false,
        },
        Err(e) => {
            // No run was made (or the zygote went away): the status pipe
            // says why if anything does.
            return Err(match status {
                Some(msg) => decode_status(&msg),
                None => SandboxError::LayerFailed(format!(
                    "the sandbox zygote did not start the run: {e}"
                )),
            });
        }
    };
    child.tmpdir = guard.release();
    match status {
        None => Ok(child),
        Some(msg) => {
            child.kill_tree();
            let _ = child.wait();
            Err(decode_status(&msg))
        }
    }
}

/// Whether `fd` became readable (or hung up) within `timeout`.
fn wait_readable(fd: &OwnedFd, timeout: Duration) -> std::io::Result<bool> {
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let mut pfd = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: poll on one descriptor we own.
        let r = unsafe { libc::poll(&mut pfd, 1, left.as_millis().min(i32::MAX as u128) as i32) };
        if r > 0 {
            return Ok(true);
        }
        if r == 0 {
            return Ok(false);
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

fn is_gone(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EPIPE | libc::ECONNRESET | libc::ENOTCONN)
    )
}

/// The server's handle on one forked run.
pub struct Run {
    channel: OwnedFd,
    pidfd: OwnedFd,
    pid: u32,
    /// The backend's wait status, as init reported it once the namespace
    /// was empty.
    backend: Option<i32>,
    /// Init's own wait status, as the zygote reported it: what the run
    /// ended with when init was killed before it could report.
    init: Option<i32>,
}

impl Run {
    /// Read the `P` message: the run's init exists. The zygote sends it
    /// before the run can write to the status pipe, and closes the channel
    /// right after the status pipe when it made no run, so once the status
    /// pipe has spoken this never waits long.
    fn from_channel(channel: OwnedFd) -> std::io::Result<Run> {
        if !wait_readable(&channel, CHANNEL_TIMEOUT)? {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "no word on the run channel",
            ));
        }
        let (kind, value, fd) = recv_message(&channel, true)?.ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "no run was started")
        })?;
        match (kind, fd) {
            (MSG_PID, Some(pidfd)) if value > 0 => Ok(Run {
                channel,
                pidfd,
                pid: value as u32,
                backend: None,
                init: None,
            }),
            _ => Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "unexpected message from the sandbox zygote",
            )),
        }
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Kill the run's init, which makes the kernel kill everything in its
    /// PID namespace. The pidfd can't name another process.
    pub fn kill(&self) {
        // SAFETY: pidfd_send_signal on a descriptor we own, no siginfo.
        unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                self.pidfd.as_raw_fd(),
                libc::SIGKILL,
                std::ptr::null::<libc::siginfo_t>(),
                0u32,
            );
        }
    }

    /// The run is over when init reported the backend's status (it sends
    /// it only once nothing else is left in the namespace) or when init
    /// itself is gone.
    fn status(&self) -> Option<i32> {
        self.backend.or(self.init)
    }

    fn take(&mut self, block: bool) -> std::io::Result<Option<ExitStatus>> {
        while self.status().is_none() {
            match recv_message(&self.channel, block) {
                Ok(Some((MSG_BACKEND, v, _))) => self.backend = Some(v),
                Ok(Some((MSG_INIT, v, _))) => self.init = Some(v),
                Ok(Some(_)) => {}
                // The zygote is gone, and with it the run.
                Ok(None) => self.init = Some(libc::SIGKILL),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(None),
                Err(e) => return Err(e),
            }
        }
        Ok(self.status().map(ExitStatus::from_raw))
    }

    pub fn try_wait(&mut self) -> std::io::Result<Option<ExitStatus>> {
        self.take(false)
    }

    pub fn wait(&mut self) -> std::io::Result<ExitStatus> {
        match self.take(true)? {
            Some(s) => Ok(s),
            None => Err(std::io::Error::other("the run's status went missing")),
        }
    }
}

/// One run-channel message: kind, value, and a descriptor if one came.
/// `None` at end of file.
fn recv_message(fd: &OwnedFd, block: bool) -> std::io::Result<Option<(u8, i32, Option<OwnedFd>)>> {
    let mut buf = [0u8; 5];
    let mut cmsg = nix::cmsg_space!([RawFd; 1]);
    let mut flags = MsgFlags::MSG_CMSG_CLOEXEC;
    if !block {
        flags |= MsgFlags::MSG_DONTWAIT;
    }
    let (n, passed) = loop {
        let mut iov = [IoSliceMut::new(&mut buf)];
        match recvmsg::<()>(fd.as_raw_fd(), &mut iov, Some(&mut cmsg), flags) {
            Ok(msg) => {
                let mut passed: Option<OwnedFd> = None;
                if let Ok(cmsgs) = msg.cmsgs() {
                    for c in cmsgs {
                        if let ControlMessageOwned::ScmRights(fds) = c {
                            for f in fds {
                                // SAFETY: the kernel just gave us this descriptor.
                                let owned = unsafe { OwnedFd::from_raw_fd(f) };
                                if passed.is_none() {
                                    passed = Some(owned);
                                }
                            }
                        }
                    }
                }
                break (msg.bytes, passed);
            }
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        }
    };
    if n == 0 {
        return Ok(None);
    }
    if n != buf.len() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "short message from the sandbox zygote",
        ));
    }
    let value = i32::from_le_bytes([buf[1], buf[2], buf[3], buf[4]]);
    Ok(Some((buf[0], value, passed)))
}

// ---------------------------------------------------------------------------
// Zygote side. Everything below runs in the zygote and the inits it forks,
// which are single-threaded.

/// Send one run-channel message (never blocks, never raises SIGPIPE: a
/// server that stopped listening loses nothing it still needs).
fn send_message(fd: RawFd, kind: u8, value: i32, pass: Option<RawFd>) -> bool {
    let mut buf = [0u8; 5];
    buf[0] = kind;
    buf[1..].copy_from_slice(&value.to_le_bytes());
    let iov = [IoSlice::new(&buf)];
    let fds: Vec<RawFd> = pass.into_iter().collect();
    let cmsg: Vec<ControlMessage> = if fds.is_empty() {
        Vec::new()
    } else {
        vec![ControlMessage::ScmRights(&fds)]
    };
    loop {
        match sendmsg::<()>(
            fd,
            &iov,
            &cmsg,
            MsgFlags::MSG_NOSIGNAL | MsgFlags::MSG_DONTWAIT,
            None,
        ) {
            Ok(n) => return n == buf.len(),
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return false,
        }
    }
}

/// A run the zygote has handed a request to and not yet reaped.
struct Forked {
    pidfd: OwnedFd,
    channel: OwnedFd,
    /// Init's wait status, once it exited (it stays a zombie until the
    /// server has closed its end of the channel).
    exited: Option<i32>,
    /// The server closed its end before the run was over: the run was
    /// killed and is reaped as soon as it is gone.
    released: bool,
}

/// The next run's init, forked ahead of its request: its namespaces, id
/// maps, `pid_max` and namespace counters are set while the server is
/// busy elsewhere. It applies every other layer only once it has the run's
/// policy, in the same order as ever.
struct Spare {
    pid: libc::pid_t,
    pidfd: OwnedFd,
    /// The zygote's end of the socket the request is forwarded on.
    socket: OwnedFd,
}

struct ZygoteState {
    /// The ids the zygote has inside its user namespace; each run maps
    /// them to themselves in its own.
    uid: u32,
    gid: u32,
    config: Config,
    program: Option<seccompiler::BpfProgram>,
    last_cap: u32,
    /// The zygote's own pidfd, inherited by each init to check, after
    /// arming its parent-death signal, that the zygote is still there.
    self_pidfd: OwnedFd,
    runs: HashMap<libc::pid_t, Forked>,
    spare: Option<Spare>,
}

/// Entry point of `__sandbox-helper @zygote`. Returns when the server
/// closes the control socket.
pub fn main() -> anyhow::Result<u8> {
    let text = std::env::var(POLICY_ENV).unwrap_or_default();
    let state = match serde_json::from_str::<Config>(&text) {
        Ok(config) => setup(config),
        Err(e) => Err(Failure::Layer(format!("zygote config: {e}"))),
    };
    let mut state = match state {
        Ok(s) => s,
        Err(f) => {
            let text = failure_text(&f);
            // SAFETY: writing our own buffer to the control socket.
            unsafe { libc::write(CONTROL_FD, text.as_ptr().cast(), text.len()) };
            anyhow::bail!("sandbox zygote: {text}");
        }
    };
    // SAFETY: writing one byte to the control socket.
    if unsafe { libc::write(CONTROL_FD, b"R".as_ptr().cast(), 1) } != 1 {
        return Ok(1);
    }
    state.spare = state.fork_spare().ok();
    state.serve();
    Ok(0)
}

fn failure_text(f: &Failure) -> String {
    match f {
        Failure::Layer(m) => format!("L{m}"),
        Failure::Exec(errno, m) => format!("E{errno} {m}"),
    }
}

/// Steps 1 to 3 of the helper, once: descriptors, session, parent-death
/// signal, the shared user and network namespaces.
fn setup(config: Config) -> Result<ZygoteState, Failure> {
    // SAFETY: closing descriptors this process doesn't use; integer-only calls.
    unsafe {
        if libc::close_range(CONTROL_FD as u32 + 1, u32::MAX, 0) != 0 {
            return Err(last_error("close_range"));
        }
        libc::fcntl(CONTROL_FD, libc::F_SETFD, libc::FD_CLOEXEC);
        if libc::setsid() < 0 {
            return Err(last_error("setsid"));
        }
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
            return Err(last_error("parent-death signal"));
        }
        if libc::getppid() as u32 != config.parent_pid {
            libc::_exit(1);
        }
    }
    if !usable(&config.layers) {
        return Err(Failure::Layer(
            "a zygote needs user and PID namespaces".into(),
        ));
    }
    let last_cap = caps::last_cap();
    let program = if config.layers.seccomp {
        Some(seccomp::build_program().map_err(|e| Failure::Layer(format!("seccomp: {e}")))?)
    } else {
        None
    };
    // SAFETY: getuid/getgid can't fail.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    // The runs' own user, PID and IPC namespaces come with each run.
    let shared = Layers {
        userns: true,
        netns: config.layers.netns,
        ..Layers::default()
    };
    namespaces::unshare_and_map(&shared, uid, gid).map_err(Failure::Layer)?;
    // SAFETY: integer-only prctl.
    if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) } != 0 {
        return Err(last_error("not dumpable"));
    }
    // SAFETY: pidfd_open on our own pid.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, libc::getpid(), 0) };
    if fd < 0 {
        return Err(last_error("pidfd_open"));
    }
    // SAFETY: the descriptor was just created and is owned here alone.
    let self_pidfd = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
    // SAFETY: marking our own descriptor close-on-exec.
    unsafe { libc::fcntl(self_pidfd.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) };
    Ok(ZygoteState {
        uid: namespaces::inside_id(uid),
        gid: namespaces::inside_id(gid),
        config,
        program,
        last_cap,
        self_pidfd,
        runs: HashMap::new(),
        spare: None,
    })
}

/// Read one request: a length, the policy, and the descriptors that came
/// with the length. `None` at end of file or on anything malformed.
fn read_request(fd: RawFd) -> Option<(Vec<u8>, Vec<OwnedFd>)> {
    let mut len = [0u8; 4];
    let mut cmsg = nix::cmsg_space!([RawFd; PASSED]);
    let (n, fds) = loop {
        let mut iov = [IoSliceMut::new(&mut len)];
        match recvmsg::<()>(
            fd,
            &mut iov,
            Some(&mut cmsg),
            MsgFlags::MSG_CMSG_CLOEXEC | MsgFlags::MSG_WAITALL,
        ) {
            Ok(msg) => {
                let mut fds: Vec<OwnedFd> = Vec::new();
                if let Ok(cmsgs) = msg.cmsgs() {
                    for c in cmsgs {
                        if let ControlMessageOwned::ScmRights(list) = c {
                            // SAFETY: the kernel just gave us these descriptors.
                            fds.extend(
                                list.into_iter().map(|f| unsafe { OwnedFd::from_raw_fd(f) }),
                            );
                        }
                    }
                }
                break (msg.bytes, fds);
            }
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return None,
        }
    };
    if n != len.len() {
        return None;
    }
    let size = u32::from_le_bytes(len) as usize;
    if size > MAX_REQUEST {
        return None;
    }
    let mut body = vec![0u8; size];
    let mut got = 0;
    while got < size {
        // SAFETY: reading into a buffer we own.
        let r = unsafe { libc::read(fd, body[got..].as_mut_ptr().cast(), size - got) };
        if r < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        if r <= 0 {
            return None;
        }
        got += r as usize;
    }
    Some((body, fds))
}

impl ZygoteState {
    /// Wait for requests and for runs that end; return when the server is gone.
    fn serve(&mut self) {
        loop {
            let mut pfds = vec![libc::pollfd {
                fd: CONTROL_FD,
                events: libc::POLLIN,
                revents: 0,
            }];
            let mut order: Vec<(libc::pid_t, bool)> = Vec::with_capacity(self.runs.len() * 2);
            for (pid, r) in &self.runs {
                if r.exited.is_none() {
                    pfds.push(libc::pollfd {
                        fd: r.pidfd.as_raw_fd(),
                        events: libc::POLLIN,
                        revents: 0,
                    });
                    order.push((*pid, true));
                }
                // The server closing its end releases the run.
                if !r.released {
                    pfds.push(libc::pollfd {
                        fd: r.channel.as_raw_fd(),
                        events: 0,
                        revents: 0,
                    });
                    order.push((*pid, false));
                }
            }
            // SAFETY: poll on descriptors we own.
            let n = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, -1) };
            if n < 0 {
                if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return;
            }
            for (pfd, (pid, is_pidfd)) in pfds[1..].iter().zip(order) {
                if pfd.revents == 0 {
                    continue;
                }
                if is_pidfd {
                    self.exited(pid);
                } else {
                    self.released(pid);
                }
            }
            let control = pfds[0].revents;
            if control & libc::POLLIN != 0 {
                let Some((policy, fds)) = read_request(CONTROL_FD) else {
                    return;
                };
                // Anything but our own five descriptors has nothing to answer on.
                if let Ok(fds) = <[OwnedFd; PASSED]>::try_from(fds) {
                    self.dispatch(&policy, fds);
                }
            } else if control & (libc::POLLHUP | libc::POLLERR) != 0 {
                return;
            }
        }
    }

    /// Init exited: read its status without reaping, tell the server.
    fn exited(&mut self, pid: libc::pid_t) {
        let Some(run) = self.runs.get_mut(&pid) else {
            return;
        };
        // SAFETY: siginfo_t is plain data the kernel fills.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waitid on our own child, leaving it waitable.
        let r = unsafe {
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            )
        };
        // SAFETY: reading the fields waitid filled.
        let (got, code, status) = unsafe { (info.si_pid(), info.si_code, info.si_status()) };
        if r != 0 || got != pid {
            return;
        }
        let raw = match code {
            libc::CLD_EXITED => (status & 0xff) << 8,
            _ => status & 0x7f,
        };
        run.exited = Some(raw);
        if run.released {
            reap(pid);
            self.runs.remove(&pid);
        } else {
            send_message(run.channel.as_raw_fd(), MSG_INIT, raw, None);
        }
    }

    /// The server closed its end: reap the run if it is over, else kill it
    /// (nobody wants it any more) and reap it once it is gone, without
    /// waiting here for a namespace to empty.
    fn released(&mut self, pid: libc::pid_t) {
        let Some(run) = self.runs.get_mut(&pid) else {
            return;
        };
        if run.exited.is_some() {
            reap(pid);
            self.runs.remove(&pid);
        } else if !run.released {
            run.released = true;
            pidfd_kill(&run.pidfd);
        }
    }

    /// Hand one request to a ready spare, tell the server its pid, and
    /// fork the next spare while the run goes on.
    fn dispatch(&mut self, policy: &[u8], fds: [OwnedFd; PASSED]) {
        let spare = match self.ready_spare() {
            Ok(s) => s,
            Err(f) => {
                report_to(fds[3].as_raw_fd(), &f);
                return;
            }
        };
        let Spare { pid, pidfd, socket } = spare;
        // The pid goes to the server before the run can report anything on
        // the same channel.
        if !send_message(fds[4].as_raw_fd(), MSG_PID, pid, Some(pidfd.as_raw_fd())) {
            // The server can't hear about this run: it must not go on.
            pidfd_kill(&pidfd);
            reap(pid);
            return;
        }
        let raw: [RawFd; PASSED] = std::array::from_fn(|i| fds[i].as_raw_fd());
        if let Err(e) = send_request(&socket, policy, &raw) {
            pidfd_kill(&pidfd);
            reap(pid);
            report_to(
                fds[3].as_raw_fd(),
                &Failure::Layer(format!("handing the run over: {e}")),
            );
            return;
        }
        // The zygote's copies go before the next spare is forked, which
        // would otherwise hold the run's pipes open until it closes them.
        let [stdin, stdout, stderr, status, channel] = fds;
        drop((stdin, stdout, stderr, status, socket));
        self.runs.insert(
            pid,
            Forked {
                pidfd,
                channel,
                exited: None,
                released: false,
            },
        );
        self.spare = self.fork_spare().ok();
    }

    /// The spare, once it says it is ready; a dead one is replaced once,
    /// one that failed a step makes this run fail.
    fn ready_spare(&mut self) -> Result<Spare, Failure> {
        for _ in 0..2 {
            let spare = match self.spare.take() {
                Some(s) => s,
                None => self.fork_spare()?,
            };
            if !wait_readable(&spare.socket, CHANNEL_TIMEOUT).unwrap_or(false) {
                pidfd_kill(&spare.pidfd);
                reap(spare.pid);
                return Err(Failure::Layer(
                    "the run's init did not get ready in time".into(),
                ));
            }
            let mut first = [0u8; 1];
            // SAFETY: reading one byte into a buffer we own.
            let n = loop {
                let n =
                    unsafe { libc::read(spare.socket.as_raw_fd(), first.as_mut_ptr().cast(), 1) };
                if n < 0
                    && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
                {
                    continue;
                }
                break n;
            };
            match (n, first[0]) {
                (1, b'R') => return Ok(spare),
                (1, _) => {
                    let mut rest = Vec::new();
                    let mut f = std::fs::File::from(spare.socket);
                    let _ = (&mut f).take(64 * 1024).read_to_end(&mut rest);
                    reap(spare.pid);
                    let mut msg = vec![first[0]];
                    msg.extend_from_slice(&rest);
                    let text = String::from_utf8_lossy(&msg);
                    return Err(Failure::Layer(
                        text.strip_prefix('L').unwrap_or(&text).to_string(),
                    ));
                }
                // Gone without a word (killed): try a fresh one.
                _ => {
                    pidfd_kill(&spare.pidfd);
                    reap(spare.pid);
                }
            }
        }
        Err(Failure::Layer("no run could be forked".into()))
    }

    /// Fork the next run's init into its own user, PID and IPC namespaces.
    fn fork_spare(&self) -> Result<Spare, Failure> {
        let (ours, theirs) = socketpair(
            AddressFamily::Unix,
            SockType::Stream,
            None,
            SockFlag::SOCK_CLOEXEC,
        )
        .map_err(|e| Failure::Layer(format!("socketpair: {e}")))?;
        let mut flags = libc::CLONE_NEWUSER | libc::CLONE_NEWPID | libc::CLONE_PIDFD;
        if self.config.layers.ipcns {
            flags |= libc::CLONE_NEWIPC;
        }
        let mut pidfd: libc::c_int = -1;
        // SAFETY: a fork-like clone (no CLONE_VM, no new stack) of a
        // single-threaded process; the child never returns from `spare`.
        let pid = unsafe {
            libc::syscall(
                libc::SYS_clone,
                (flags | libc::SIGCHLD) as libc::c_ulong,
                0usize,
                &mut pidfd as *mut libc::c_int,
                0usize,
                0usize,
            )
        } as libc::pid_t;
        if pid == 0 {
            drop(ours);
            // A panic must never unwind out of the child into the zygote's
            // own loop.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.spare(theirs)));
            // SAFETY: leaving the child without the zygote's destructors.
            unsafe { libc::_exit(127) }
        }
        if pid < 0 {
            return Err(last_error("clone"));
        }
        Ok(Spare {
            pid,
            // SAFETY: CLONE_PIDFD gave us this descriptor.
            pidfd: unsafe { OwnedFd::from_raw_fd(pidfd) },
            socket: ours,
        })
    }

    /// The spare: set up what doesn't depend on the run, say so, wait for
    /// the request, then become the run's init.
    fn spare(&self, socket: OwnedFd) -> ! {
        // Only the spare's socket and the zygote's pidfd stay, at fixed
        // numbers; the control socket and other runs' descriptors go.
        let kept = [socket.as_raw_fd(), self.self_pidfd.as_raw_fd()];
        // SAFETY: closing what the run must never inherit.
        if place_fds(&kept, SPARE_SOCKET).is_err()
            || unsafe { libc::close_range(ZYGOTE_PIDFD as u32 + 1, u32::MAX, 0) } != 0
        {
            // SAFETY: leaving without the zygote's destructors.
            unsafe { libc::_exit(1) };
        }
        if let Err(f) = self.spare_setup() {
            let text = failure_text(&f);
            // SAFETY: telling the zygote why, then leaving.
            unsafe {
                libc::write(SPARE_SOCKET, text.as_ptr().cast(), text.len());
                libc::_exit(1);
            }
        }
        // SAFETY: writing one byte to our socket.
        if unsafe { libc::write(SPARE_SOCKET, b"R".as_ptr().cast(), 1) } != 1 {
            // SAFETY: leaving without the zygote's destructors.
            unsafe { libc::_exit(1) };
        }
        let Some((policy, fds)) = read_request(SPARE_SOCKET) else {
            // The zygote is done with this spare.
            // SAFETY: leaving without the zygote's destructors.
            unsafe { libc::_exit(0) }
        };
        // From here on descriptors are moved around by number: none may be
        // closed again by a destructor.
        let fds: Vec<RawFd> = fds.into_iter().map(IntoRawFd::into_raw_fd).collect();
        let Ok(fds) = <[RawFd; PASSED]>::try_from(fds) else {
            // SAFETY: nothing to report on; leave.
            unsafe { libc::_exit(1) }
        };
        let failure = match self.become_init(&policy, &fds) {
            Ok(never) => match never {},
            Err(f) => f,
        };
        // A failure after the run's descriptors are in place: the status
        // pipe is at its number.
        report(&failure);
        // SAFETY: leaving the child without running the zygote's destructors.
        unsafe { libc::_exit(127) }
    }

    /// What a spare sets up before its run is known: own session, die with
    /// the zygote, own id maps, and as the namespace's init its `pid_max`
    /// and namespace counters.
    fn spare_setup(&self) -> Result<(), Failure> {
        // SAFETY: integer-only process calls and a poll on our own descriptor.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
            if libc::setsid() < 0 {
                return Err(last_error("setsid"));
            }
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                return Err(last_error("parent-death signal"));
            }
            // The zygote may have died before the signal was armed.
            let mut pfd = libc::pollfd {
                fd: ZYGOTE_PIDFD,
                events: libc::POLLIN,
                revents: 0,
            };
            if libc::poll(&mut pfd, 1, 0) != 0 {
                libc::_exit(1);
            }
            libc::close(ZYGOTE_PIDFD);
        }
        // A non-dumpable process can't write its own id maps, so the
        // zygote's setting is lifted for exactly that, then restored.
        // SAFETY: integer-only prctl.
        if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0) } != 0 {
            return Err(last_error("dumpable for the id maps"));
        }
        namespaces::map_to_themselves(self.uid, self.gid).map_err(Failure::Layer)?;
        // SAFETY: integer-only prctl.
        if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) } != 0 {
            return Err(last_error("not dumpable"));
        }
        init_namespace(&self.config.layers)
    }

    /// The request is here: descriptors in place, then the run's own
    /// layers (rlimits, Landlock, capabilities, seccomp) and the backend.
    fn become_init(&self, policy: &[u8], fds: &[RawFd; PASSED]) -> Result<Infallible, Failure> {
        if let Err(f) = place_fds(fds, 0) {
            // The status pipe is not at its number yet.
            report_to(fds[3], &f);
            // SAFETY: leaving without the zygote's destructors.
            unsafe { libc::_exit(127) };
        }
        // SAFETY: closing everything else (the spare's socket, the zygote's
        // pidfd, the copies just placed); the status pipe and the run
        // channel must not reach the backend.
        unsafe {
            if libc::close_range(PASSED as u32, u32::MAX, 0) != 0 {
                return Err(last_error("close_range"));
            }
            for fd in [STATUS_FD, RUN_CHANNEL_FD] {
                libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
            }
        }
        let p: Policy =
            serde_json::from_slice(policy).map_err(|e| Failure::Layer(format!("policy: {e}")))?;
        if p.layers != self.config.layers {
            return Err(Failure::Layer(
                "the run's layers are not the ones its zygote was started for".into(),
            ));
        }
        let prepared = Prepared {
            exec: ExecArgs::new(&p)?,
            program: self.program.as_ref().filter(|_| p.layers.seccomp),
            last_cap: self.last_cap,
        };
        std::env::set_current_dir(&p.cwd)
            .map_err(|e| Failure::Layer(format!("working folder {}: {e}", p.cwd.display())))?;
        run_as_init(&p, &prepared, RUN_CHANNEL_FD, Some(MSG_BACKEND))
    }
}

/// Send a request (length, policy, descriptors) on a stream socket.
fn send_request(fd: &OwnedFd, policy: &[u8], fds: &[RawFd; PASSED]) -> std::io::Result<()> {
    let len = (policy.len() as u32).to_le_bytes();
    let iov = [IoSlice::new(&len), IoSlice::new(policy)];
    let cmsg = [ControlMessage::ScmRights(fds)];
    let mut sent = loop {
        match sendmsg::<()>(fd.as_raw_fd(), &iov, &cmsg, MsgFlags::MSG_NOSIGNAL, None) {
            Ok(n) => break n,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        }
    };
    // A stream socket may take a long message in parts; the descriptors
    // went with the first one.
    let total = len.len() + policy.len();
    while sent < total {
        let rest = if sent < len.len() {
            &len[sent..]
        } else {
            &policy[sent - len.len()..]
        };
        // SAFETY: sending from a buffer we own.
        let n = unsafe {
            libc::send(
                fd.as_raw_fd(),
                rest.as_ptr().cast(),
                rest.len(),
                libc::MSG_NOSIGNAL,
            )
        };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        sent += n as usize;
    }
    Ok(())
}

fn pidfd_kill(pidfd: &OwnedFd) {
    // SAFETY: signalling a process through a pidfd we own.
    unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            libc::SIGKILL,
            std::ptr::null::<libc::siginfo_t>(),
            0u32,
        );
    }
}

/// Reap an exited child of the zygote.
fn reap(pid: libc::pid_t) {
    let mut st = 0;
    // SAFETY: reaping our own child, which has exited.
    unsafe { libc::waitpid(pid, &mut st, 0) };
}

/// Where init keeps its end of the run channel.
const RUN_CHANNEL_FD: RawFd = 4;
/// Where a spare keeps its socket to the zygote, and the zygote's pidfd
/// until it has checked the zygote is alive.
const SPARE_SOCKET: RawFd = 3;
const ZYGOTE_PIDFD: RawFd = 4;

/// Put `wanted[i]` at descriptor `first + i`, whatever numbers they have
/// now. The copies left at higher numbers are close-on-exec.
fn place_fds(wanted: &[RawFd], first: RawFd) -> Result<(), Failure> {
    // First out of the way (above every target), then down into place.
    let above = first + wanted.len() as RawFd;
    let mut high = Vec::with_capacity(wanted.len());
    for &fd in wanted {
        // SAFETY: duplicating a descriptor we hold.
        let h = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, above) };
        if h < 0 {
            return Err(last_error("dup"));
        }
        high.push(h);
    }
    for (i, &h) in high.iter().enumerate() {
        // SAFETY: dup2 onto a low descriptor number; dup2 clears close-on-exec.
        if unsafe { libc::dup2(h, first + i as RawFd) } < 0 {
            return Err(last_error("dup2"));
        }
    }
    Ok(())
}

/// Write a failure to a run's status pipe before the run's init has it at
/// its number.
fn report_to(status: RawFd, f: &Failure) {
    let text = failure_text(f);
    // SAFETY: writing our own buffer to a descriptor we hold.
    unsafe { libc::write(status, text.as_ptr().cast(), text.len()) };
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::cli::SandboxMode;
    use crate::sandbox::{Process, RunKind, Sandbox, SandboxOptions};
    use std::path::PathBuf;

    fn sandbox(backend: &str, root: &Path) -> Sandbox {
        Sandbox::detect(&SandboxOptions {
            mode: SandboxMode::Require,
            backend: backend.into(),
            root: root.to_path_buf(),
            helper: Some(crate::sandbox::helper_next_to_test_binary()),
            ..SandboxOptions::default()
        })
        .unwrap()
    }

    fn zygote_pid(sb: &Sandbox) -> Option<u32> {
        sb.state.zygotes.pid()
    }

    fn output(child: &mut SandboxedChild) -> (String, ExitStatus) {
        let mut out = String::new();
        child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        let status = child.wait().unwrap();
        (out, status)
    }

    fn wait_until(mut cond: impl FnMut() -> bool) -> bool {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if cond() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }

    fn alive(pid: u32) -> bool {
        Path::new(&format!("/proc/{pid}")).exists()
    }

    fn state(pid: u32) -> Option<char> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        stat.rsplit(") ").next()?.chars().next()
    }

    fn py(code: &str) -> Vec<String> {
        vec!["/usr/bin/python3".into(), "-c".into(), code.into()]
    }

    #[test]
    fn a_forked_run_holds_no_descriptor_beyond_stdio() {
        let root = tempfile::tempdir().unwrap();
        let sb = sandbox("/usr/bin/python3", root.path());
        let mut child = sb
            .spawn(
                RunKind::ReadOnly,
                &py("import os\n\
                     fds = []\n\
                     for fd in range(3, 1024):\n    \
                         try:\n        os.fstat(fd)\n        fds.append(fd)\n    \
                         except OSError:\n        pass\n\
                     print(os.getpid(), os.getppid(), fds)"),
                root.path(),
            )
            .unwrap();
        assert!(matches!(child.child, Process::Forked(_)));
        let (out, status) = output(&mut child);
        assert!(status.success(), "{status:?}");
        // The backend is pid 2 under its own init, and holds nothing of the
        // zygote's (its control socket, other runs' channels) nor its own
        // status pipe or run channel.
        assert_eq!(out.trim(), "2 1 []");
    }

    #[test]
    fn concurrent_runs_have_their_own_pid_and_ipc_namespaces() {
        let root = tempfile::tempdir().unwrap();
        let sb = sandbox("/usr/bin/python3", root.path());
        let shm = "import ctypes, os, sys, time\n\
                   libc = ctypes.CDLL(None, use_errno=True)\n\
                   key = 0x52570001\n";
        let mut first = sb
            .spawn(
                RunKind::ReadOnly,
                &py(&format!(
                    "{shm}id = libc.shmget(key, 4096, 0o1600)\n\
                     print('made' if id >= 0 else 'failed', os.getpid(), flush=True)\n\
                     time.sleep(3)"
                )),
                root.path(),
            )
            .unwrap();
        let mut line = [0u8; 7];
        first
            .stdout
            .as_mut()
            .unwrap()
            .read_exact(&mut line)
            .unwrap();
        assert_eq!(&line, b"made 2\n");
        let mut second = sb
            .spawn(
                RunKind::ReadOnly,
                &py(&format!(
                    "{shm}id = libc.shmget(key, 0, 0)\n\
                     print(id, ctypes.get_errno(), os.getpid())"
                )),
                root.path(),
            )
            .unwrap();
        assert_ne!(first.pid(), second.pid());
        let (out, status) = output(&mut second);
        assert!(status.success());
        // The first run's segment is not there: ENOENT, in a PID namespace
        // of its own as well.
        assert_eq!(out.trim(), format!("-1 {} 2", libc::ENOENT));
        first.kill_tree();
        first.wait().unwrap();
    }

    #[test]
    fn many_runs_from_many_threads_each_get_their_own_output_and_status() {
        let root = tempfile::tempdir().unwrap();
        let sb = sandbox("/bin/sh", root.path());
        std::thread::scope(|scope| {
            for t in 0..8 {
                let sb = &sb;
                let root = root.path();
                scope.spawn(move || {
                    for i in 0..6 {
                        let code = (t * 6 + i) % 7;
                        let mut child = sb
                            .spawn(
                                RunKind::ReadOnly,
                                &[
                                    "/bin/sh".into(),
                                    "-c".into(),
                                    format!("echo run-{t}-{i}; exit {code}"),
                                ],
                                root,
                            )
                            .unwrap();
                        let (out, status) = output(&mut child);
                        assert_eq!(out, format!("run-{t}-{i}\n"));
                        assert_eq!(status.code(), Some(code));
                    }
                });
            }
        });
    }

    #[test]
    fn a_killed_run_stays_the_servers_until_waited_and_then_goes() {
        let root = tempfile::tempdir().unwrap();
        let sb = sandbox("/bin/sh", root.path());
        let mut child = sb
            .spawn(
                RunKind::ReadOnly,
                &[
                    "/bin/sh".into(),
                    "-c".into(),
                    "sleep 300 & sleep 300".into(),
                ],
                root.path(),
            )
            .unwrap();
        let pid = child.pid();
        assert_eq!(child.try_wait().unwrap(), None);
        child.kill_tree();
        // Dead, but not reaped: the pid can't be given to anyone else
        // while the server may still signal it.
        assert!(wait_until(|| state(pid) == Some('Z')), "{:?}", state(pid));
        let status = child.wait().unwrap();
        assert_eq!(status.signal(), Some(libc::SIGKILL));
        drop(child);
        assert!(wait_until(|| !alive(pid)), "run {pid} was never reaped");
    }

    #[test]
    fn runs_die_with_the_zygote_and_the_next_run_gets_a_new_one() {
        let root = tempfile::tempdir().unwrap();
        let sb = sandbox("/bin/sh", root.path());
        let mut child = sb
            .spawn(
                RunKind::ReadOnly,
                &["/bin/sh".into(), "-c".into(), "sleep 300".into()],
                root.path(),
            )
            .unwrap();
        let run = child.pid();
        let zygote = zygote_pid(&sb).unwrap();
        // SAFETY: killing the zygote this test's sandbox started.
        unsafe { libc::kill(zygote as libc::pid_t, libc::SIGKILL) };
        let status = child.wait().unwrap();
        assert_eq!(status.signal(), Some(libc::SIGKILL));
        assert!(wait_until(|| !alive(run)), "run {run} outlived its zygote");

        let mut next = sb
            .spawn(
                RunKind::ReadOnly,
                &["/bin/sh".into(), "-c".into(), "echo again".into()],
                root.path(),
            )
            .unwrap();
        let (out, status) = output(&mut next);
        assert!(status.success());
        assert_eq!(out, "again\n");
        assert_ne!(zygote_pid(&sb), Some(zygote));
    }

    #[test]
    fn dropping_the_sandbox_stops_its_zygote() {
        let root = tempfile::tempdir().unwrap();
        let sb = sandbox("/bin/sh", root.path());
        let mut child = sb
            .spawn(
                RunKind::ReadOnly,
                &["/bin/sh".into(), "-c".into(), "exit 7".into()],
                root.path(),
            )
            .unwrap();
        assert_eq!(child.wait().unwrap().code(), Some(7));
        let zygote = zygote_pid(&sb).unwrap();
        drop(child);
        drop(sb);
        // The keeper thread reaped it before the drop returned.
        assert!(!alive(zygote));
    }

    #[test]
    fn a_step_that_fails_before_the_backend_fails_the_spawn() {
        let root = tempfile::tempdir().unwrap();
        let sb = sandbox("/bin/sh", root.path());
        let missing = root.path().join("missing");
        match sb.spawn(
            RunKind::ReadOnly,
            &["/bin/sh".into(), "-c".into(), "true".into()],
            &missing,
        ) {
            Err(SandboxError::LayerFailed(m)) => assert!(m.contains("working folder"), "{m}"),
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("a run started without its working folder"),
        }
        match sb.spawn(RunKind::ReadOnly, &["/bin/sh".into()], root.path()) {
            Ok(mut c) => {
                // stdin is /dev/null: the shell reads nothing and exits.
                assert!(c.wait().unwrap().success());
            }
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn runs_without_a_pid_namespace_use_the_reexec_helper() {
        let root = tempfile::tempdir().unwrap();
        let opts = SandboxOptions {
            mode: SandboxMode::Require,
            backend: "/bin/sh".into(),
            root: root.path().to_path_buf(),
            helper: Some(crate::sandbox::helper_next_to_test_binary()),
            ..SandboxOptions::default()
        };
        let mut layers = super::super::Detected::probe().layers(&[]);
        layers.pidns = false;
        layers.pid_max = None;
        let slot = Slot::default();
        let mut child = super::super::spawn(
            &opts,
            &[
                PathBuf::from("/usr"),
                PathBuf::from("/bin"),
                PathBuf::from("/lib"),
            ],
            layers,
            Some(&slot),
            RunKind::ReadOnly,
            &["/bin/sh".into(), "-c".into(), "echo $$".into()],
            root.path(),
            None,
        )
        .unwrap();
        assert!(matches!(child.child, Process::Spawned(_)));
        assert_eq!(slot.pid(), None);
        let (out, status) = output(&mut child);
        assert!(status.success());
        assert_ne!(out.trim(), "2", "no PID namespace was asked for");
    }

    #[test]
    fn zygotes_serve_only_runs_with_user_and_pid_namespaces() {
        let all = Layers {
            userns: true,
            pidns: true,
            ..Layers::default()
        };
        assert!(usable(&all));
        assert!(!usable(&Layers {
            pidns: false,
            ..all
        }));
        assert!(!usable(&Layers {
            userns: false,
            ..all
        }));
    }

    #[test]
    fn descriptors_are_placed_even_when_their_numbers_cross() {
        // A pipe's ends moved to 0 and 1, whatever their numbers, in a
        // child so this process keeps its own table.
        let r = super::super::in_child(|| {
            let mut a = [0; 2];
            // SAFETY: test child; plain descriptor calls.
            unsafe {
                libc::pipe(a.as_mut_ptr());
                let (rd, wr) = (a[0], a[1]);
                // Place the write end at 0 and the read end at 1.
                if place_fds(&[wr, rd], 0).is_err() {
                    return 1;
                }
                if libc::write(0, b"x".as_ptr().cast(), 1) != 1 {
                    return 2;
                }
                let mut b = [0u8; 1];
                if libc::read(1, b.as_mut_ptr().cast(), 1) != 1 || b[0] != b'x' {
                    return 3;
                }
            }
            0
        });
        assert!(r.is_ok(), "{r:?}");
    }

    #[test]
    fn run_channel_messages_round_trip_with_a_descriptor() {
        let (a, b) = socketpair(
            AddressFamily::Unix,
            SockType::SeqPacket,
            None,
            SockFlag::SOCK_CLOEXEC,
        )
        .unwrap();
        let f = std::fs::File::open("/dev/null").unwrap();
        assert!(send_message(
            b.as_raw_fd(),
            MSG_PID,
            4242,
            Some(f.as_raw_fd())
        ));
        assert!(send_message(b.as_raw_fd(), MSG_BACKEND, 1 << 8, None));
        let (k, v, fd) = recv_message(&a, true).unwrap().unwrap();
        assert_eq!((k, v), (MSG_PID, 4242));
        assert!(fd.is_some());
        let (k, v, fd) = recv_message(&a, false).unwrap().unwrap();
        assert_eq!((k, v), (MSG_BACKEND, 256));
        assert!(fd.is_none());
        let e = recv_message(&a, false).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock);
        drop(b);
        assert!(recv_message(&a, true).unwrap().is_none());
    }
}
