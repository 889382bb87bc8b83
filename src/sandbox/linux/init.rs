//! The run's init: pid 1 of the run's PID namespace, forked ahead by the
//! zygote as a spare. It takes its steps of the one confinement
//! (`steps.rs`; the order and why it is so: `sandbox/LAYERS.md`, "Order
//! of the layers"), takes the request, checks that it asks for exactly
//! what is already in force, forks the backend, reaps everything, and
//! reports the backend's status.

use crate::sandbox::Layer;
use std::convert::Infallible;
use std::ffi::CString;
use std::os::fd::{AsRawFd, IntoRawFd, OwnedFd, RawFd};

use super::steps::{Confinement, Phase, RunShape};
use super::wire::RunStep;
use super::wire::{channel, ready, request};
use super::wire::{
    last_error, report, report_to, Failure, RunFds, ZygoteConfig, CGROUP_FD, EXE_FD,
    RUN_CHANNEL_FD, SPARE_SOCKET, STATUS_FD, ZYGOTE_PIDFD,
};
use crate::sandbox::policy::{Layers, Policy};
use crate::sandbox::RunKind;

/// What every init a zygote forks starts from: fixed for the zygote's
/// life, built once when it starts.
pub(super) struct Init {
    /// The ids the zygote has inside its user namespace; each run maps
    /// them to themselves in its own.
    pub(super) uid: u32,
    pub(super) gid: u32,
    pub(super) config: ZygoteConfig,
    /// The seccomp program, built once per zygote.
    pub(super) program: Option<seccompiler::BpfProgram>,
    /// The watched program and its seal, built with it.
    pub(super) watched: Option<super::seccomp::Watched>,
    pub(super) last_cap: u32,
}

impl Init {
    /// The spare: set up what doesn't depend on the call, say so, wait for
    /// the request, then become the run's init. `zygote` is the zygote's
    /// own pidfd.
    pub(super) fn spare(&self, socket: OwnedFd, zygote: RawFd, kind: RunKind) -> ! {
        // Only the spare's socket and the zygote's pidfd stay, at fixed
        // numbers; the control socket and other runs' descriptors go.
        let kept = [socket.as_raw_fd(), zygote];
        // SAFETY: closing what the run must never inherit.
        if place_fds(&kept, SPARE_SOCKET).is_err()
            // SAFETY: close_range takes integers; what it closes no Rust object owns here.
            || unsafe { libc::close_range(ZYGOTE_PIDFD as u32 + 1, u32::MAX, 0) } != 0
        {
            // SAFETY: leaving without the zygote's destructors.
            unsafe { libc::_exit(1) };
        }
        if let Err(f) = self.spare_setup(kind) {
            // Telling the zygote why, then leaving.
            ready::refuse(SPARE_SOCKET, &f);
            // SAFETY: leaving without the zygote's destructors.
            unsafe { libc::_exit(1) };
        }
        // A spare armed ahead hands its seccomp listener over with its
        // word, and seals the hole that took, before its request exists.
        let announced = match &self.watched {
            Some(w) => super::supervise::announce(SPARE_SOCKET, &w.seal),
            None => ready::announce(SPARE_SOCKET),
        };
        if !announced {
            // SAFETY: leaving without the zygote's destructors.
            unsafe { libc::_exit(1) };
        }
        let Some(request::Request { policy, fds, exe }) = request::read(SPARE_SOCKET) else {
            // The zygote is done with this spare.
            // SAFETY: leaving without the zygote's destructors.
            unsafe { libc::_exit(0) }
        };
        // From here on descriptors are moved around by number: none may be
        // closed again by a destructor.
        let Some(fds) = fds else {
            // SAFETY: nothing to report on; leave.
            unsafe { libc::_exit(1) }
        };
        let fds = RunFds::from_array(fds.into_array().map(IntoRawFd::into_raw_fd));
        let exe = exe.map(IntoRawFd::into_raw_fd);
        let failure = match self.become_init(&policy, &fds, exe, kind) {
            Ok(never) => match never {},
            Err(f) => f,
        };
        // A failure after the run's descriptors are in place: the status
        // pipe is at its number.
        report(&failure);
        // SAFETY: leaving the child without running the zygote's destructors.
        unsafe { libc::_exit(127) }
    }

    /// What a spare sets up before its call is known: own session, die
    /// with the zygote, then its setup steps of the confinement and, for a
    /// read-only run, the run's own layers too.
    pub(super) fn spare_setup(&self, kind: RunKind) -> Result<(), Failure> {
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
        self.confinement(kind, None).take(Phase::Setup)?;
        let Some(armed) = self.config.armed(kind) else {
            return Ok(());
        };
        if armed.layers != self.config.layers || armed.mounts.as_ref() != self.config.plan(kind) {
            return Err(Failure::layer(
                RunStep::Request,
                "the policy to arm with is not the one its zygote was started for",
            ));
        }
        self.confinement(kind, Some(armed)).take(Phase::Arm)
    }

    /// A spare's steps of `steps::STEPS`: the zygote's layers and the
    /// kind's root, and `policy`'s when the run's own layers go on.
    fn confinement<'a>(&'a self, kind: RunKind, policy: Option<&'a Policy>) -> Confinement<'a> {
        let layers = policy.map_or(&self.config.layers, |p| &p.layers);
        Confinement {
            shape: RunShape::Spare {
                armed_ahead: self.config.armed(kind).is_some(),
            },
            layers,
            ids: (self.uid, self.gid),
            plan: self.config.plan(kind),
            policy,
            program: self.program_for(layers),
            watched: self.program_for(layers).and(self.watched.as_ref()),
            last_cap: self.last_cap,
        }
    }

    /// The seccomp program, when these layers have seccomp.
    fn program_for(&self, layers: &Layers) -> Option<&seccompiler::BpfProgram> {
        self.program.as_ref().filter(|_| layers.has(Layer::Seccomp))
    }

    /// The request is here: descriptors in place, the run's cgroup, the
    /// checks that the request asks for what this init was set up for,
    /// then (unless armed ahead) the run's own layers, and the backend:
    /// from `exe` when the server sent the descriptor it hashed.
    pub(super) fn become_init(
        &self,
        policy: &[u8],
        fds: &RunFds<RawFd>,
        exe: Option<RawFd>,
        kind: RunKind,
    ) -> Result<Infallible, Failure> {
        // A listener still held here (none when its word carried it) goes
        // to the server before its number is taken by the run's below.
        let handed = match &self.watched {
            Some(w) => super::supervise::hand_over(fds.channel, &w.seal),
            None => Ok(()),
        };
        // Each at its index, which `RunFds` holds to be its number in the
        // run, and the backend's right after them, at `EXE_FD`.
        let mut wanted = fds.into_array().to_vec();
        wanted.extend(exe);
        if let Err(f) = handed.and_then(|()| place_fds(&wanted, 0)) {
            // The status pipe is not at its number yet.
            report_to(fds.status, &f);
            // SAFETY: leaving without the zygote's destructors.
            unsafe { libc::_exit(127) };
        }
        // SAFETY: closing everything else (the spare's socket, the zygote's
        // pidfd, the copies just placed); the status pipe and the run
        // channel must not reach the backend.
        unsafe {
            if libc::close_range(wanted.len() as u32, u32::MAX, 0) != 0 {
                return Err(last_error("close_range"));
            }
            for fd in [STATUS_FD, RUN_CHANNEL_FD] {
                libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
            }
        }
        let p = request::decode_policy(policy)?;
        // Into the run's cgroup before anything else, so all the run starts
        // is counted there; then the descriptor goes.
        let entered = if p.layers.has(Layer::Cgroup) {
            enter_cgroup(CGROUP_FD)
        } else {
            Ok(())
        };
        // SAFETY: closing a descriptor this process owns.
        unsafe { libc::close(CGROUP_FD) };
        entered?;
        if p.layers != self.config.layers {
            return Err(Failure::layer(
                RunStep::Request,
                "the run's layers are not the ones its zygote was started for",
            ));
        }
        if p.kind != kind || p.mounts.as_ref() != self.config.plan(kind) {
            return Err(Failure::layer(
                Layer::Mountns,
                "the run's file system view is not the one its spare built",
            ));
        }
        let armed = self.config.armed(kind);
        if armed.is_some_and(|a| a.armed_part() != p.armed_part()) {
            return Err(Failure::layer(
                RunStep::Request,
                "the run's confinement is not the one its spare applied",
            ));
        }
        let mut exec = ExecArgs::new(&p)?;
        if exe.is_some() {
            exec.exe = Some(keep_exe(EXE_FD)?);
        }
        let prepared = Prepared {
            exec,
            program: self.program_for(&p.layers),
            last_cap: self.last_cap,
        };
        std::env::set_current_dir(&p.cwd).map_err(|e| {
            Failure::layer(
                RunStep::Request,
                format!("working folder {}: {e}", p.cwd.display()),
            )
        })?;
        let confinement = self.confinement(kind, Some(&p));
        if !confinement.shape.arms_before_request() {
            confinement.take(Phase::Arm)?;
            if let Some(w) = &self.watched {
                super::supervise::hand_over(RUN_CHANNEL_FD, &w.seal)?;
            }
        }
        run_as_init(&prepared, RUN_CHANNEL_FD, Tell::Channel)
    }
}

/// How init reports the backend's status: on the run channel to the
/// server, or as the bare status to the re-executed helper above it.
pub(super) enum Tell {
    Channel,
    Helper,
}

/// Write `0` (this process) to the run cgroup's `cgroup.procs`.
fn enter_cgroup(fd: RawFd) -> Result<(), Failure> {
    // SAFETY: writing a buffer we own to a descriptor we hold.
    let n = unsafe { libc::write(fd, b"0".as_ptr().cast(), 1) };
    if n == 1 {
        Ok(())
    } else {
        Err(super::wire::status::last_error_in(
            Layer::Cgroup,
            "entering the run's cgroup",
        ))
    }
}

/// What the helper computes before it changes anything.
pub(super) struct Prepared<'a> {
    pub(super) exec: ExecArgs,
    pub(super) program: Option<&'a seccompiler::BpfProgram>,
    pub(super) last_cap: u32,
}

/// The backend's `execve` arguments, built before any layer is applied.
pub(super) struct ExecArgs {
    pub(super) program: CString,
    pub(super) argv: Vec<CString>,
    pub(super) env: Vec<CString>,
    /// The backend's descriptor, executed instead of `program` (`--pin`:
    /// the file the server hashed, whatever the path names by now).
    pub(super) exe: Option<RawFd>,
}

/// Make the backend's descriptor at `fd` ready to be executed. A `#!`
/// script executed from a descriptor is handed to its interpreter as
/// `/dev/fd/N`, which the interpreter opens, so that descriptor stays open
/// across the exec (the interpreter then reads the very file hashed); a
/// binary's is closed by the exec like every other.
pub(super) fn keep_exe(fd: RawFd) -> Result<RawFd, Failure> {
    let mut head = [0u8; 2];
    // SAFETY: reading into a buffer we own from a descriptor we hold, at
    // an explicit offset (the server's copy shares the file position).
    let n = unsafe { libc::pread(fd, head.as_mut_ptr().cast(), head.len(), 0) };
    if n < 0 {
        return Err(last_error("reading the backend's descriptor"));
    }
    let flags = if head[..n as usize] == *b"#!" {
        0
    } else {
        libc::FD_CLOEXEC
    };
    // SAFETY: setting the descriptor flags of a descriptor we hold.
    if unsafe { libc::fcntl(fd, libc::F_SETFD, flags) } != 0 {
        return Err(last_error("the backend's descriptor"));
    }
    Ok(fd)
}

impl ExecArgs {
    pub(super) fn new(p: &Policy) -> Result<ExecArgs, Failure> {
        let c = |s: &str| {
            CString::new(s)
                .map_err(|_| Failure::layer(RunStep::Request, "a NUL byte in the command line"))
        };
        let program = c(&p.program.to_string_lossy())?;
        let argv = p.argv.iter().map(|a| c(a)).collect::<Result<Vec<_>, _>>()?;
        let env = p
            .env
            .iter()
            .map(|(k, v)| c(&format!("{k}={v}")))
            .collect::<Result<Vec<_>, _>>()?;
        if argv.is_empty() {
            return Err(Failure::layer(RunStep::Request, "empty command line"));
        }
        Ok(ExecArgs {
            program,
            argv,
            env,
            exe: None,
        })
    }

    /// Reset what our runtime changed, then execute. Returns only on failure.
    pub(super) fn exec(&self) -> Failure {
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
        let what = match self.exe {
            Some(fd) => {
                // SAFETY: NUL-terminated arrays of C strings and an empty C
                // string that outlive the call; `fd` is held by this process.
                unsafe {
                    libc::syscall(
                        libc::SYS_execveat,
                        fd,
                        c"".as_ptr(),
                        argv.as_ptr(),
                        envp.as_ptr(),
                        libc::AT_EMPTY_PATH,
                    )
                };
                format!(
                    "execute {} from the descriptor its pin was checked on",
                    self.program.to_string_lossy()
                )
            }
            None => {
                // SAFETY: NUL-terminated arrays of C strings that outlive the call.
                unsafe { libc::execve(self.program.as_ptr(), argv.as_ptr(), envp.as_ptr()) };
                format!("execute {}", self.program.to_string_lossy())
            }
        };
        let errno = std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO);
        Failure::Exec { errno, what }
    }
}

/// Init of the PID namespace, once every layer is in force: start the
/// backend, reap everything, report the backend's raw wait status on
/// `sock` as `tell` says, exit.
pub(super) fn run_as_init(
    prep: &Prepared<'_>,
    sock: RawFd,
    tell: Tell,
) -> Result<Infallible, Failure> {
    // SAFETY: single-threaded process; the child only executes.
    let child = unsafe { libc::fork() };
    if child < 0 {
        return Err(super::wire::status::last_error_at(
            super::step_error::LayerStep::ForkIntoPidns,
            "fork",
        ));
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
    let msg = match tell {
        Tell::Channel => channel::backend_bytes(status).to_vec(),
        Tell::Helper => status.to_le_bytes().to_vec(),
    };
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
pub(super) fn empty_namespace() {
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

/// Put `wanted[i]` at descriptor `first + i`, whatever numbers they have
/// now. The copies left at higher numbers are close-on-exec.
pub(super) fn place_fds(wanted: &[RawFd], first: RawFd) -> Result<(), Failure> {
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
