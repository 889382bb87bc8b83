//! The long-lived spawner: one helper process per sandbox, started once,
//! that forks each run instead of the server re-executing itself per run.
//!
//! Why: re-executing the server binary for every run costs an `execve`, a
//! dynamic load, a runtime start and a new network namespace, which was
//! most of what a sandboxed run cost beyond the backend itself. The zygote
//! pays for those once, and keeps read-only runs' inits forked and
//! confined ahead of their calls (a `draft` run's is forked when asked
//! for): what each step is and when a spare takes it is
//! `sandbox/LAYERS.md`, "Order of the layers", as `steps.rs` lists it.
//! A spare serves one run and no other. The server's side is `server/`,
//! the spare's and init's code `init.rs` (its own type, [`Init`], built
//! once per zygote).
//!
//! Lifetime: the zygote is spawned from a thread that lives as long as the
//! sandbox (the parent-death signal follows the spawning thread), dies when
//! the server does, and every init dies with the zygote; an init's death
//! makes the kernel kill everything left in its PID namespace. The zygote
//! keeps an exited init as a zombie until the server has read its status,
//! so the run's pid stays the run's for as long as the server holds it, as
//! with a child of its own.

use crate::sandbox::Layer;
use std::collections::{HashMap, VecDeque};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use nix::sys::socket::{socketpair, AddressFamily, SockFlag, SockType};

use super::init::Init;
use super::wire::ready::{self, NotReady};
use super::wire::{channel, config, request};
use super::wire::{
    last_error, report_to, usable, Failure, RunFds, RunStep, ZygoteConfig, CHANNEL_TIMEOUT,
    CONTROL_FD, POLICY_ENV,
};
use super::{caps, namespaces, seccomp};
use crate::sandbox::policy::Layers;
use crate::sandbox::RunKind;

/// A run the zygote has handed a request to and not yet reaped.
pub(super) struct Forked {
    pub(super) pidfd: OwnedFd,
    pub(super) channel: OwnedFd,
    /// Init's wait status, once it exited (it stays a zombie until the
    /// server has closed its end of the channel).
    pub(super) exited: Option<i32>,
    /// The server closed its end before the run was over: the run was
    /// killed and is reaped as soon as it is gone.
    pub(super) released: bool,
}

/// The next run's init, forked ahead of its request: for a read-only run
/// every layer is in force while the server is busy elsewhere.
pub(super) struct Spare {
    pub(super) pid: libc::pid_t,
    pub(super) pidfd: OwnedFd,
    /// The zygote's end of the socket the request is forwarded on.
    pub(super) socket: OwnedFd,
    /// The seccomp listener it handed over when it said it was ready.
    pub(super) listener: Option<OwnedFd>,
}

pub(super) struct ZygoteState {
    /// What every init it forks starts from.
    pub(super) init: Init,
    /// The zygote's own pidfd, inherited by each init to check, after
    /// arming its parent-death signal, that the zygote is still there.
    pub(super) self_pidfd: OwnedFd,
    pub(super) runs: HashMap<libc::pid_t, Forked>,
    /// Read-only spares, oldest first.
    pub(super) spares: VecDeque<Spare>,
}

/// How many read-only spares the zygote keeps: one arming while another
/// waits, so two calls in flight never wait for a spare to arm itself.
pub(super) const SPARES: usize = 2;

/// Entry point of `__sandbox-helper @zygote`. Returns when the server
/// closes the control socket.
pub fn main() -> anyhow::Result<u8> {
    let text = std::env::var_os(POLICY_ENV).unwrap_or_default();
    let state = config::decode(text.as_encoded_bytes()).and_then(setup);
    let mut state = match state {
        Ok(s) => s,
        Err(f) => {
            ready::refuse(CONTROL_FD, &f);
            anyhow::bail!("sandbox zygote: {f:?}");
        }
    };
    if !ready::announce(CONTROL_FD) {
        return Ok(1);
    }
    state.refill();
    state.serve();
    Ok(0)
}

/// What the zygote does once before any run (`sandbox/LAYERS.md`, "Order
/// of the layers"): descriptors, session,
/// parent-death signal, the shared user and network namespaces.
pub(super) fn setup(config: ZygoteConfig) -> Result<ZygoteState, Failure> {
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
        return Err(Failure::layer(
            Layer::Pidns,
            "a zygote needs user and PID namespaces",
        ));
    }
    let last_cap = caps::last_cap();
    let program = if config.layers.has(Layer::Seccomp) {
        Some(
            seccomp::build_program(seccomp::Beside::of(&config.layers))
                .map_err(|e| Failure::layer(Layer::Seccomp, format!("seccomp: {e}")))?,
        )
    } else {
        None
    };
    // The watched filter lets internet sockets be made: only where the
    // runs' network namespace is empty.
    let watched = if program.is_some() && config.layers.has(Layer::Netns) {
        Some(
            seccomp::build_watched(seccomp::Beside::of(&config.layers))
                .map_err(|e| Failure::layer(Layer::Seccomp, format!("seccomp: {e}")))?,
        )
    } else {
        None
    };
    // SAFETY: getuid/getgid can't fail.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    // The runs' own user, PID and IPC namespaces come with each run.
    let shared = {
        let mut l = Layers::of(&[Layer::Userns]);
        l.set(Layer::Netns, config.layers.has(Layer::Netns));
        l
    };
    namespaces::unshare_and_map(&shared, uid, gid).map_err(Failure::of(Layer::Userns))?;
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
        init: Init {
            uid: namespaces::inside_id(uid),
            gid: namespaces::inside_id(gid),
            config,
            program,
            watched,
            last_cap,
        },
        self_pidfd,
        runs: HashMap::new(),
        spares: VecDeque::with_capacity(SPARES),
    })
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
                let Some(req) = request::read(CONTROL_FD) else {
                    return;
                };
                let kind = req.kind();
                // Anything but one descriptor per field has nothing to answer on.
                if let Some(fds) = req.fds {
                    self.hand_over(kind, &req.policy, fds, req.exe);
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
            channel::send_init(run.channel.as_raw_fd(), raw);
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

    /// Hand one request to a ready spare (with the backend's descriptor
    /// when the server sent one), tell the server its pid, and fork the
    /// next spare while the run goes on.
    fn hand_over(
        &mut self,
        kind: Result<RunKind, String>,
        policy: &[u8],
        fds: RunFds<OwnedFd>,
        exe: Option<OwnedFd>,
    ) {
        let status = fds.status.as_raw_fd();
        let kind = match kind {
            Ok(k) => k,
            Err(e) => {
                report_to(status, &Failure::layer(RunStep::Request, e));
                return;
            }
        };
        let spare = match self.ready_spare(kind) {
            Ok(s) => s,
            Err(f) => {
                report_to(status, &f);
                return;
            }
        };
        let Spare {
            pid,
            pidfd,
            socket,
            listener,
        } = spare;
        // The pid goes to the server before the run can report anything on
        // the same channel.
        let listener_fd = listener.as_ref().map(AsRawFd::as_raw_fd);
        if !channel::send_started(fds.channel.as_raw_fd(), pid, pidfd.as_raw_fd(), listener_fd) {
            // The server can't hear about this run: it must not go on.
            pidfd_kill(&pidfd);
            reap(pid);
            return;
        }
        let exe_fd = exe.as_ref().map(AsRawFd::as_raw_fd);
        if let Err(e) = request::send(&socket, policy, &fds.raw(), exe_fd) {
            pidfd_kill(&pidfd);
            reap(pid);
            report_to(
                status,
                &Failure::layer(RunStep::Process, format!("handing the run over: {e}")),
            );
            return;
        }
        // The zygote's copies go before the next spare is forked, which
        // would otherwise hold the run's pipes open until it closes them.
        let RunFds {
            stdin,
            stdout,
            stderr,
            status,
            channel,
            cgroup_procs,
        } = fds;
        drop((stdin, stdout, stderr, status, cgroup_procs, socket, exe));
        self.runs.insert(
            pid,
            Forked {
                pidfd,
                channel,
                exited: None,
                released: false,
            },
        );
        if kind == RunKind::ReadOnly {
            self.refill();
        }
    }

    /// Fork read-only spares until there are [`SPARES`]; one that can't be
    /// forked now is forked when a run asks for it.
    fn refill(&mut self) {
        while self.spares.len() < SPARES {
            match self.fork_spare(RunKind::ReadOnly) {
                Ok(s) => self.spares.push_back(s),
                Err(_) => return,
            }
        }
    }

    /// The spare, once it says it is ready; a dead one is replaced.
    /// One armed ahead that failed a step is replaced once by one armed
    /// now, with every other spare armed ahead: it set up the run's root
    /// from the files as they were then (a database its owner replaced
    /// since, a file an editor was saving), and the world as it is when
    /// the run is asked for decides. A spare armed now that fails a step
    /// makes this run fail. Draft runs are rare and see another root: their
    /// spare is forked when asked for.
    fn ready_spare(&mut self, kind: RunKind) -> Result<Spare, Failure> {
        for _ in 0..3 {
            let ready = match kind {
                RunKind::ReadOnly => self.spares.pop_front(),
                RunKind::Draft => None,
            };
            let ahead = ready.is_some();
            let mut spare = match ready {
                Some(s) => s,
                None => self.fork_spare(kind)?,
            };
            match ready::read_with(&spare.socket, CHANNEL_TIMEOUT) {
                Ok(listener) => {
                    spare.listener = listener;
                    return Ok(spare);
                }
                Err(NotReady::Failed(_)) if ahead => {
                    reap(spare.pid);
                    for stale in self.spares.drain(..) {
                        pidfd_kill(&stale.pidfd);
                        reap(stale.pid);
                    }
                }
                Err(NotReady::Failed(f)) => {
                    reap(spare.pid);
                    return Err(f);
                }
                Err(NotReady::Silent) => {
                    pidfd_kill(&spare.pidfd);
                    reap(spare.pid);
                    return Err(Failure::layer(
                        RunStep::Process,
                        "the run's init did not get ready in time",
                    ));
                }
                // Gone without a word (killed): try a fresh one.
                Err(NotReady::Gone) => {
                    pidfd_kill(&spare.pidfd);
                    reap(spare.pid);
                }
            }
        }
        Err(Failure::layer(RunStep::Process, "no run could be forked"))
    }

    /// Fork the next run's init into its own user, PID, IPC, UTS and mount
    /// namespaces: the first step of a spare's confinement
    /// (`steps::Step::Namespaces`), taken by this clone.
    fn fork_spare(&self, kind: RunKind) -> Result<Spare, Failure> {
        let (ours, theirs) = socketpair(
            AddressFamily::Unix,
            SockType::Stream,
            None,
            SockFlag::SOCK_CLOEXEC,
        )
        .map_err(|e| Failure::layer(RunStep::Process, format!("socketpair: {e}")))?;
        let mut flags = libc::CLONE_NEWUSER | libc::CLONE_NEWPID | libc::CLONE_PIDFD;
        if self.init.config.layers.has(Layer::Ipcns) {
            flags |= libc::CLONE_NEWIPC;
        }
        if self.init.config.layers.has(Layer::Utsns) {
            flags |= libc::CLONE_NEWUTS;
        }
        if self.init.config.layers.has(Layer::Mountns) {
            flags |= libc::CLONE_NEWNS;
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
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                self.init.spare(theirs, self.self_pidfd.as_raw_fd(), kind)
            }));
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
            listener: None,
        })
    }
}

pub(super) fn pidfd_kill(pidfd: &OwnedFd) {
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
pub(super) fn reap(pid: libc::pid_t) {
    let mut st = 0;
    // SAFETY: reaping our own child, which has exited.
    unsafe { libc::waitpid(pid, &mut st, 0) };
}
