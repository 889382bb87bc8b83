//! The server's side of the sandbox helper: the zygote it starts once per
//! sandbox and talks to over a control socket, the run it gets back (a
//! pidfd and a run channel), and the re-executed helper for runs without
//! user and PID namespaces.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::socket::{socketpair, AddressFamily, SockFlag, SockType};

use super::super::wire::config;
use super::super::wire::ready::{self, NotReady};
use super::super::wire::request::EncodedPolicy;
use super::super::wire::status::read_status;
use super::super::wire::{channel, request};
use super::super::wire::{
    pipe_cloexec, wait_readable, RunFds, ZygoteConfig, CHANNEL_TIMEOUT, CONTROL_FD, EXE_FD,
    POLICY_ENV, POLICY_FROM_ENV, POLICY_FROM_ENV_EXE, STATUS_FD, ZYGOTE_ARG,
};
use crate::sandbox::{SandboxError, SandboxedChild, TmpGuard};

/// How long a run waits for its zygote: its silence (no word on the
/// run's layers) and its being stopped.
#[derive(Debug, Clone, Copy)]
pub(super) struct Waits {
    pub(super) silence: Duration,
    pub(super) stopped: Duration,
}

// ---------------------------------------------------------------------------
// Server side.

/// Holds the zygote of one sandbox: empty until the first run, and
/// replaced when its zygote died or was started for other grants or
/// layers (a file that came back). Each run holds its zygote until it
/// ends, so a replaced zygote is retired, not killed: the runs it started
/// finish on it, and it goes with the last of them.
#[derive(Default)]
pub struct ZygoteCell {
    current: Mutex<Option<Arc<Zygote>>>,
    retired: Arc<Retired>,
}

/// At most this many retired zygotes (each with its runs still going) may
/// live at once; a call that would retire one more waits for one to go.
pub(super) const MAX_RETIRED: usize = 4;

/// How many retired zygotes still live, and a signal when one goes.
#[derive(Debug, Default)]
pub(super) struct Retired {
    count: Mutex<usize>,
    gone: std::sync::Condvar,
}

impl Retired {
    /// One more zygote retired with runs still on it.
    pub(super) fn add(&self) {
        *self.count.lock().unwrap_or_else(|e| e.into_inner()) += 1;
    }

    /// A retired zygote went.
    pub(super) fn went(&self) {
        let mut n = self.count.lock().unwrap_or_else(|e| e.into_inner());
        *n = n.saturating_sub(1);
        self.gone.notify_all();
    }

    #[cfg(test)]
    fn live(&self) -> usize {
        *self.count.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wait until fewer than `max` live, for at most `limit`; whether they do.
    pub(super) fn wait_below(&self, max: usize, limit: Duration) -> bool {
        let n = self.count.lock().unwrap_or_else(|e| e.into_inner());
        let (n, _) = self
            .gone
            .wait_timeout_while(n, limit, |n| *n >= max)
            .unwrap_or_else(|e| e.into_inner());
        *n < max
    }
}

impl ZygoteCell {
    /// The running zygote for these layers, started if there is none, it
    /// died, or it was started for another configuration.
    fn get(
        &self,
        helper: &Path,
        config: &ZygoteConfig,
        masks_at: u64,
        silence: Duration,
    ) -> Result<Arc<Zygote>, SandboxError> {
        let mut cell = self.current.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(z) = cell.as_ref() {
            // A zygote whose spares hide a masked path as it was before the
            // owner replaced it would show the new file: replaced too.
            if z.config == *config && z.masks_at == masks_at && z.alive() {
                return Ok(Arc::clone(z));
            }
        }
        if let Some(old) = cell.take() {
            // Runs still hold it: it lives on, retired, until they end.
            if Arc::strong_count(&old) > 1 && old.alive() {
                old.retire(&self.retired);
            }
        }
        // Calls wait here (the cell stays locked) while too many retired
        // zygotes live; each goes when its last run ends, and every run
        // ends within its call's timeout.
        if !self.retired.wait_below(MAX_RETIRED, silence) {
            return Err(SandboxError::Exhausted(
                format!(
                    "{MAX_RETIRED} replaced sandbox helpers still have calls running on them; \
                     call again once one of those calls has finished"
                ),
                libc::EAGAIN,
            ));
        }
        let mut z = Zygote::start(helper, config.clone(), silence)?;
        z.masks_at = masks_at;
        let z = Arc::new(z);
        *cell = Some(Arc::clone(&z));
        Ok(z)
    }

    /// Stop using this zygote: the next run starts a fresh one. It is
    /// killed (with any run it still holds) once the last holder lets go.
    fn forget(&self, dead: &Arc<Zygote>) {
        let mut cell = self.current.lock().unwrap_or_else(|e| e.into_inner());
        if cell.as_ref().is_some_and(|z| Arc::ptr_eq(z, dead)) {
            *cell = None;
        }
    }
}

/// How often a run waiting for the zygote looks at its state.
const ZYGOTE_CHECK: Duration = Duration::from_millis(100);

/// What `/proc` says of a zygote, as far as serving runs goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ProcState {
    /// Running or sleeping: it can answer.
    Serving,
    /// Stopped or traced: it answers nothing until continued.
    Stopped,
    /// Exited (a zombie) or gone.
    Gone,
}

/// The state letter of `/proc/PID/stat`, after the command name in
/// parentheses (which may itself hold spaces and parentheses). Pure.
fn parse_state(stat: &str) -> ProcState {
    let state = stat
        .rfind(')')
        .and_then(|i| stat[i + 1..].split_whitespace().next());
    match state {
        Some("T" | "t") => ProcState::Stopped,
        Some("Z" | "X" | "x") | None => ProcState::Gone,
        Some(_) => ProcState::Serving,
    }
}

fn zygote_state(pid: u32) -> ProcState {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => parse_state(&stat),
        Err(_) => ProcState::Gone,
    }
}

/// Wait until the run's status pipe speaks (or ends), watching the zygote
/// meanwhile: one that stays stopped for `waits.stopped`, is gone, or
/// gives no word within `waits.silence` is given up (the caller replaces it).
fn wait_for_zygote(status: &OwnedFd, pid: u32, waits: Waits) -> Result<(), String> {
    let limit = waits.silence;
    let deadline = Instant::now() + limit;
    let mut stopped_since: Option<Instant> = None;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!(
                "the sandbox zygote gave no word within {:.1} s",
                limit.as_secs_f64()
            ));
        }
        if wait_readable(status, left.min(ZYGOTE_CHECK)).map_err(|e| e.to_string())? {
            return Ok(());
        }
        match zygote_state(pid) {
            ProcState::Serving => stopped_since = None,
            ProcState::Gone => return Err("the sandbox zygote is gone".into()),
            ProcState::Stopped => {
                let since = *stopped_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= waits.stopped {
                    return Err("the sandbox zygote is stopped".into());
                }
            }
        }
    }
}

/// A running zygote: the server's end of the control socket, and the
/// thread that spawned it (and reaps it).
pub(super) struct Zygote {
    pub(super) control: Mutex<OwnedFd>,
    /// The zygote's pid; it is the keeper thread's child until dropped.
    pub(super) pid: u32,
    pub(super) config: ZygoteConfig,
    pub(super) stop: Option<mpsc::Sender<()>>,
    pub(super) keeper: Option<std::thread::JoinHandle<()>>,
    /// Set once it is replaced while runs still hold it: told when it goes.
    retired: Mutex<Option<Arc<Retired>>>,
    /// Where the masked paths stood when it was started.
    masks_at: u64,
}

impl Zygote {
    fn start(
        helper: &Path,
        config: ZygoteConfig,
        silence: Duration,
    ) -> Result<Zygote, SandboxError> {
        let (ours, theirs) = socketpair(
            AddressFamily::Unix,
            SockType::Stream,
            None,
            SockFlag::SOCK_CLOEXEC,
        )
        .map_err(|e| SandboxError::Io(e.into()))?;
        let json = config::encode(&config)?;
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
                // The server takes SIGTERM and SIGINT on a thread of its own
                // (serve.rs); a sandbox thread started before it blocked them
                // (the trial run at start) must never be the one they hit.
                // std gives the spawned child an empty mask again.
                // SAFETY: plain libc signal-set calls on a local set.
                unsafe {
                    let mut set: libc::sigset_t = std::mem::zeroed();
                    libc::sigemptyset(&mut set);
                    libc::sigaddset(&mut set, libc::SIGTERM);
                    libc::sigaddset(&mut set, libc::SIGINT);
                    libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
                }
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
            retired: Mutex::new(None),
            masks_at: 0,
        };
        let ready = {
            let control = z.control.get_mut().unwrap_or_else(|e| e.into_inner());
            ready::read(control, silence)
        };
        match ready {
            Ok(()) => Ok(z),
            Err(NotReady::Failed(f)) => Err(f.into_error()),
            Err(NotReady::Gone) => Err(SandboxError::LayerFailed(
                "the sandbox zygote exited while starting".into(),
            )),
            Err(NotReady::Silent) => Err(SandboxError::LayerFailed(format!(
                "no word from the sandbox zygote within {:.1} s",
                silence.as_secs_f64()
            ))),
        }
    }

    /// Count this zygote among the retired ones until it goes.
    fn retire(&self, retired: &Arc<Retired>) {
        let mut slot = self.retired.lock().unwrap_or_else(|e| e.into_inner());
        if slot.is_none() {
            retired.add();
            *slot = Some(Arc::clone(retired));
        }
    }

    /// Whether the zygote can serve a run: its end of the control socket
    /// is still open, and it is not stopped.
    fn alive(&self) -> bool {
        if zygote_state(self.pid) != ProcState::Serving {
            return false;
        }
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

    /// Send one request: the policy, with the run's descriptors (and the
    /// backend's, when the run executes it).
    fn request(
        &self,
        policy: &EncodedPolicy,
        fds: &RunFds<RawFd>,
        exe: Option<RawFd>,
    ) -> std::io::Result<()> {
        let control = self.control.lock().unwrap_or_else(|e| e.into_inner());
        request::send(&control, policy.as_bytes(), fds, exe)
    }
}

impl Drop for Zygote {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(k) = self.keeper.take() {
            let _ = k.join();
        }
        let retired = self.retired.get_mut().unwrap_or_else(|e| e.into_inner());
        if let Some(r) = retired.take() {
            r.went();
        }
    }
}

/// Spawn one run through the zygote. `policy` is complete, encoded once
/// by the caller (who hashed those bytes); the caller made its temp folder,
/// which `guard` removes unless the run takes it over. `exe`: the backend's
/// descriptor, which the run executes instead of the path.
#[allow(clippy::too_many_arguments)]
pub(super) fn spawn(
    cell: &ZygoteCell,
    helper: &Path,
    config: &ZygoteConfig,
    masks_at: u64,
    waits: Waits,
    policy: &EncodedPolicy,
    guard: TmpGuard,
    stdin: Option<OwnedFd>,
    cgroup_procs: Option<OwnedFd>,
    exe: Option<BorrowedFd<'_>>,
) -> Result<SandboxedChild, SandboxError> {
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
    let cgroup_procs = match cgroup_procs {
        Some(fd) => fd,
        None => OwnedFd::from(std::fs::File::open("/dev/null").map_err(SandboxError::Io)?),
    };
    let fds = RunFds {
        stdin: stdin.as_raw_fd(),
        stdout: out_w.as_raw_fd(),
        stderr: err_w.as_raw_fd(),
        status: status_w.as_raw_fd(),
        channel: chan_run.as_raw_fd(),
        cgroup_procs: cgroup_procs.as_raw_fd(),
    };
    // A zygote that died since its last run is replaced once.
    let mut tries = 0;
    let zygote = loop {
        let z = cell.get(helper, config, masks_at, waits.silence)?;
        match z.request(policy, &fds, exe.map(|e| e.as_raw_fd())) {
            Ok(()) => break z,
            Err(e) if tries == 0 && is_gone(&e) => {
                cell.forget(&z);
                tries += 1;
            }
            Err(e) => return Err(SandboxError::Io(e)),
        }
    };
    // The zygote and the run hold their own copies now; the server keeps
    // only the reading ends, so end of file means what it should.
    drop((stdin, out_w, err_w, status_w, chan_run, cgroup_procs));

    // A healthy zygote always speaks within its own bounds; one that is
    // stopped or silent would fail every later run the same way, so it is
    // replaced: this run fails, the next one gets a fresh zygote.
    if let Err(why) = wait_for_zygote(&status_r, zygote.pid, waits) {
        cell.forget(&zygote);
        return Err(SandboxError::LayerFailed(format!(
            "{why}; it was replaced for the next run"
        )));
    }
    let status = match read_status(status_r, waits.silence) {
        Ok(s) => s,
        // Dropping the channel makes the zygote kill a run it may still
        // start or has started.
        Err(e) => {
            return Err(SandboxError::LayerFailed(format!(
                "no word from the sandbox zygote: {e}"
            )))
        }
    };
    let mut child = match Run::from_channel(chan, zygote) {
        Ok(run) => SandboxedChild {
            attestation: None,
            after: None,
            memory_bound: None,
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
                Some(f) => f.into_error(),
                // The run's pidfd could not be received: our own shortage.
                None if e
                    .raw_os_error()
                    .and_then(crate::sandbox::shortage)
                    .is_some() =>
                {
                    SandboxError::Io(e)
                }
                None => SandboxError::LayerFailed(format!(
                    "the sandbox zygote did not start the run: {e}"
                )),
            });
        }
    };
    child.tmpdir = guard.release();
    match status {
        None => Ok(child),
        Some(f) => {
            child.kill_tree();
            let _ = child.wait();
            Err(f.into_error())
        }
    }
}

pub(super) fn is_gone(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EPIPE | libc::ECONNRESET | libc::ENOTCONN)
    )
}

/// The server's handle on one forked run.
pub(crate) struct Run {
    pub(super) channel: OwnedFd,
    pub(super) pidfd: OwnedFd,
    pub(super) pid: u32,
    /// The backend's wait status, as init reported it once the namespace
    /// was empty.
    pub(super) backend: Option<i32>,
    /// Init's own wait status, as the zygote reported it: what the run
    /// ended with when init was killed before it could report.
    pub(super) init: Option<i32>,
    /// The run's supervisor: its seccomp listener once init passed it.
    pub(crate) supervisor: crate::sandbox::linux::supervise::Supervisor,
    /// The zygote that forked the run, held until the run is dropped: a
    /// zygote replaced meanwhile must not take this run down with it.
    _zygote: Arc<Zygote>,
}

impl Run {
    /// Read the `P` message: the run's init exists. The zygote sends it
    /// before the run can write to the status pipe, and closes the channel
    /// right after the status pipe when it made no run, so once the status
    /// pipe has spoken this never waits long.
    fn from_channel(channel: OwnedFd, zygote: Arc<Zygote>) -> std::io::Result<Run> {
        if !wait_readable(&channel, CHANNEL_TIMEOUT)? {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "no word on the run channel",
            ));
        }
        let message = channel::recv(&channel, true)?.ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "no run was started")
        })?;
        match message {
            channel::Message::Started {
                pid,
                pidfd: Some(pidfd),
                listener,
            } if pid > 0 => {
                let mut run = Run {
                    channel,
                    pidfd,
                    pid: pid as u32,
                    backend: None,
                    init: None,
                    supervisor: crate::sandbox::linux::supervise::Supervisor::unwatched(
                        crate::sandbox::linux::seccomp::Beside::of(&zygote.config.layers),
                    ),
                    _zygote: zygote,
                };
                match listener {
                    // A spare armed ahead: its listener came with this message.
                    Some(l) => run.supervisor.watch(l),
                    // An init armed after its request passed its listener
                    // before the status pipe closed, so it is queued here
                    // already: taken without waiting.
                    None => {
                        run.take(false)?;
                    }
                }
                Ok(run)
            }
            _ => Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "unexpected message from the sandbox zygote",
            )),
        }
    }

    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// Kill the run's init, which makes the kernel kill everything in its
    /// PID namespace. The pidfd can't name another process.
    pub(crate) fn kill(&self) {
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

    /// What the run tried and was refused, and whether its command died
    /// of `SIGSYS`: the filter's kill (a call of a foreign architecture or
    /// an x32 number), which no supervisor sees.
    pub(crate) fn denied(&self) -> crate::sandbox::denied::Denied {
        let mut d = self.supervisor.report();
        d.killed_by_filter = self
            .backend
            .is_some_and(|s| libc::WIFSIGNALED(s) && libc::WTERMSIG(s) == libc::SIGSYS);
        d
    }

    /// The run is over when init reported the backend's status (it sends
    /// it only once nothing else is left in the namespace) or when init
    /// itself is gone.
    fn status(&self) -> Option<i32> {
        self.backend.or(self.init)
    }

    fn take(&mut self, block: bool) -> std::io::Result<Option<ExitStatus>> {
        while self.status().is_none() {
            // A watched run may be waiting for an answer before it can
            // end: whoever waits for it answers meanwhile.
            if !self.answer_until_channel(block) {
                return Ok(None);
            }
            match channel::recv(&self.channel, block) {
                Ok(Some(channel::Message::Backend(v))) => self.backend = Some(v),
                Ok(Some(channel::Message::Init(v))) => self.init = Some(v),
                Ok(Some(channel::Message::Listener(Some(fd)))) => self.supervisor.watch(fd),
                Ok(Some(_)) => {}
                // The zygote is gone, and with it the run.
                Ok(None) => self.init = Some(libc::SIGKILL),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(None),
                Err(e) => return Err(e),
            }
        }
        Ok(self.status().map(ExitStatus::from_raw))
    }

    /// With a supervisor: answer the run until the channel is readable
    /// (`block`), or what is pending now; whether the channel is readable.
    /// Without one: true, the channel's own read waits.
    fn answer_until_channel(&mut self, block: bool) -> bool {
        loop {
            let Some(listener) = self.supervisor.fd() else {
                return true;
            };
            let mut fds = [
                libc::pollfd {
                    fd: self.channel.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: listener,
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            // SAFETY: poll over two descriptors we own, in an array we own.
            let r = unsafe { libc::poll(fds.as_mut_ptr(), 2, if block { -1 } else { 0 }) };
            if r > 0 && fds[1].revents != 0 {
                self.supervisor.ready(fds[1].revents);
            }
            if fds[0].revents != 0 {
                return true;
            }
            if !block {
                return false;
            }
        }
    }

    pub(crate) fn try_wait(&mut self) -> std::io::Result<Option<ExitStatus>> {
        self.take(false)
    }

    /// Readable when the run's status (or the zygote's end) has arrived, so
    /// a caller can wait for the exit in the same `poll` as the run's pipes.
    pub(crate) fn exit_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.channel.as_fd()
    }

    pub(crate) fn wait(&mut self) -> std::io::Result<ExitStatus> {
        match self.take(true)? {
            Some(s) => Ok(s),
            None => Err(std::io::Error::other("the run's status went missing")),
        }
    }
}

/// One run through a freshly executed helper.
pub(super) fn spawn_reexec(
    helper: &Path,
    policy: &EncodedPolicy,
    guard: TmpGuard,
    stdin: Option<OwnedFd>,
    exe: Option<BorrowedFd<'_>>,
    silence: Duration,
    cgroup_procs: Option<OwnedFd>,
) -> Result<SandboxedChild, SandboxError> {
    let json = policy.to_env();
    // The run's cgroup, entered by the helper between fork and exec: all
    // it starts is in the cgroup from its first instruction on. Held open
    // until the spawn is over.
    let procs = cgroup_procs.as_ref().map(AsRawFd::as_raw_fd);

    let (status_r, status_w) = pipe_cloexec().map_err(SandboxError::Io)?;
    let w = status_w.as_raw_fd();
    let e = exe.map(|e| e.as_raw_fd());
    let mut cmd = Command::new(helper);
    cmd.arg0("reachweaver-mcp-sandbox")
        .arg("__sandbox-helper")
        .arg(if e.is_some() {
            POLICY_FROM_ENV_EXE
        } else {
            POLICY_FROM_ENV
        })
        .env_clear()
        .env(POLICY_ENV, json)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    match stdin {
        Some(fd) => cmd.stdin(Stdio::from(fd)),
        None => cmd.stdin(Stdio::null()),
    };
    // SAFETY: the closure only calls write/dup2/fcntl, which are
    // async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            // "0" is the writer: this child, the helper to be.
            if let Some(fd) = procs {
                if libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            match e {
                None => {
                    if w == STATUS_FD {
                        if libc::fcntl(w, libc::F_SETFD, 0) != 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                    } else if libc::dup2(w, STATUS_FD) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                }
                // Both above their numbers first, so neither lands on the other.
                Some(e) => {
                    let above = EXE_FD + 1;
                    let (hw, he) = (
                        libc::fcntl(w, libc::F_DUPFD_CLOEXEC, above),
                        libc::fcntl(e, libc::F_DUPFD_CLOEXEC, above),
                    );
                    if hw < 0
                        || he < 0
                        || libc::dup2(hw, STATUS_FD) < 0
                        || libc::dup2(he, EXE_FD) < 0
                    {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                }
            }
        });
    }
    let spawned = cmd.spawn();
    drop(cgroup_procs);
    let mut child = spawned.map_err(|e| {
        let e = SandboxError::Io(e);
        match procs {
            // The cgroup refused the helper (a gone folder, say): a layer
            // failed, so nothing ran. A shortage stays the server's.
            Some(_) if e.exhausted().is_none() => SandboxError::LayerFailed(format!(
                "cgroup: starting the sandbox helper in the run's cgroup: {e}"
            )),
            _ => e,
        }
    })?;
    drop(status_w);
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let mut sc = SandboxedChild {
        attestation: None,
        after: None,
        memory_bound: None,
        child: child.into(),
        stdout,
        stderr,
        tmpdir: None,
        done: false,
    };
    // From here on the child owns the folder: its Drop removes it.
    sc.tmpdir = guard.release();
    match read_status(status_r, silence) {
        Ok(None) => Ok(sc),
        Ok(Some(f)) => {
            sc.kill_tree();
            let _ = sc.wait();
            Err(f.into_error())
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

#[cfg(test)]
mod tests {
    use super::super::super::init::place_fds;
    use super::*;

    #[test]
    fn calls_wait_only_while_the_retired_zygotes_are_at_their_bound() {
        let r = Arc::new(Retired::default());
        for _ in 0..MAX_RETIRED - 1 {
            r.add();
        }
        assert!(
            r.wait_below(MAX_RETIRED, Duration::ZERO),
            "one under the bound"
        );
        r.add();
        assert_eq!(r.live(), MAX_RETIRED);
        assert!(!r.wait_below(MAX_RETIRED, Duration::ZERO), "at the bound");
        // A waiter is let through when one goes, whenever that is.
        let waiter = {
            let r = Arc::clone(&r);
            std::thread::spawn(move || r.wait_below(MAX_RETIRED, Duration::from_secs(600)))
        };
        r.went();
        assert!(waiter.join().unwrap());
        assert_eq!(r.live(), MAX_RETIRED - 1);
        // Never below zero.
        for _ in 0..MAX_RETIRED + 2 {
            r.went();
        }
        assert_eq!(r.live(), 0);
    }

    fn waits(silence: u64) -> Waits {
        Waits {
            silence: Duration::from_secs(silence),
            stopped: Duration::from_secs(1),
        }
    }

    #[test]
    fn the_zygotes_state_is_read_past_its_name() {
        let stat = |name: &str, state: &str| format!("4242 ({name}) {state} 1 4242 4242 0 -1");
        assert_eq!(parse_state(&stat("exe", "S")), ProcState::Serving);
        assert_eq!(parse_state(&stat("exe", "R")), ProcState::Serving);
        assert_eq!(parse_state(&stat("exe", "D")), ProcState::Serving);
        assert_eq!(parse_state(&stat("exe", "T")), ProcState::Stopped);
        assert_eq!(parse_state(&stat("exe", "t")), ProcState::Stopped);
        assert_eq!(parse_state(&stat("exe", "Z")), ProcState::Gone);
        assert_eq!(parse_state(&stat("exe", "X")), ProcState::Gone);
        // A name with spaces and a parenthesis cannot pass for the state.
        assert_eq!(parse_state(&stat("a) T (b", "S")), ProcState::Serving);
        assert_eq!(parse_state(""), ProcState::Gone);
    }

    #[test]
    fn this_process_is_serving_and_a_stopped_child_is_not() {
        assert_eq!(zygote_state(std::process::id()), ProcState::Serving);
        let mut child = Command::new("sleep").arg("30").spawn().unwrap();
        let pid = child.id();
        // SAFETY: stopping and killing our own child.
        unsafe { libc::kill(pid as i32, libc::SIGSTOP) };
        let until = Instant::now() + Duration::from_secs(10);
        while zygote_state(pid) != ProcState::Stopped && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
        let stopped = zygote_state(pid);
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(stopped, ProcState::Stopped);
        assert_eq!(zygote_state(pid), ProcState::Gone);
    }

    /// A stand-in zygote: a `sleep` child, stopped when asked.
    fn child(stopped: bool) -> std::process::Child {
        let c = Command::new("sleep").arg("30").spawn().unwrap();
        if stopped {
            // SAFETY: stopping our own child.
            unsafe { libc::kill(c.id() as i32, libc::SIGSTOP) };
            let until = Instant::now() + Duration::from_secs(10);
            while zygote_state(c.id()) != ProcState::Stopped && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        c
    }

    #[test]
    fn a_run_waits_for_a_zygote_that_speaks() {
        let mut z = child(false);
        let (r, w) = pipe_cloexec().unwrap();
        drop(w);
        // End of file is an answer (the backend was executed).
        assert_eq!(wait_for_zygote(&r, z.id(), waits(20)), Ok(()));
        let _ = z.kill();
        let _ = z.wait();
    }

    #[test]
    fn a_stopped_zygote_is_given_up_well_before_the_limit() {
        let mut z = child(true);
        let (r, _w) = pipe_cloexec().unwrap();
        let t = Instant::now();
        let got = wait_for_zygote(&r, z.id(), waits(600));
        let waited = t.elapsed();
        let _ = z.kill();
        let _ = z.wait();
        assert_eq!(got, Err("the sandbox zygote is stopped".to_string()));
        // Not a timing check: the only other way out is the 600 s limit.
        assert!(waited < Duration::from_secs(300), "{waited:?}");
    }

    #[test]
    fn a_silent_or_gone_zygote_is_given_up() {
        let mut z = child(false);
        let (r, _w) = pipe_cloexec().unwrap();
        assert_eq!(
            wait_for_zygote(&r, z.id(), waits(1)),
            Err("the sandbox zygote gave no word within 1.0 s".to_string())
        );
        let pid = z.id();
        let _ = z.kill();
        let _ = z.wait();
        assert_eq!(
            wait_for_zygote(&r, pid, waits(600)),
            Err("the sandbox zygote is gone".to_string())
        );
    }

    #[test]
    fn descriptors_are_placed_even_when_their_numbers_cross() {
        // A pipe's ends moved to 0 and 1, whatever their numbers, in a
        // child so this process keeps its own table.
        let r = super::super::super::kernel::start_child(|| {
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
        })
        .and_then(|c| c.result());
        assert!(r.is_ok(), "{r:?}");
    }
}
