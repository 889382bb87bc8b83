//! The re-executed helper: for runs that cannot have their own user and PID
//! namespaces from a zygote, the server runs its own binary as
//! `__sandbox-helper`, which takes the same confinement (`steps.rs`;
//! `sandbox/LAYERS.md`, "Order of the layers") as far as the kernel allows:
//! it makes the namespaces, then forks the PID namespace's init or, without
//! one, the backend's process below itself as child subreaper.

use crate::sandbox::Layer;
use std::convert::Infallible;
use std::os::fd::RawFd;

use super::init::{keep_exe, run_as_init, ExecArgs, Prepared, Tell};
use super::steps::{Confinement, Phase, RunShape};
use super::wire::request;
use super::wire::RunStep;
use super::wire::{
    last_error, report, Failure, EXE_FD, POLICY_ENV, POLICY_FROM_ENV, POLICY_FROM_ENV_EXE,
    STATUS_FD, ZYGOTE_ARG,
};
use super::{caps, seccomp, zygote};
use crate::sandbox::policy::Policy;

/// Entry point of `__sandbox-helper`. Returns only on failure.
pub fn helper_main(arg: &str) -> anyhow::Result<u8> {
    if arg == ZYGOTE_ARG {
        return zygote::main();
    }
    if let Some(own) = arg.strip_prefix(super::cgroup_restore::KEEPER_PREFIX) {
        return super::cgroup_restore::keeper_main(std::path::Path::new(own));
    }
    let exe = arg == POLICY_FROM_ENV_EXE;
    let text = if arg == POLICY_FROM_ENV || exe {
        std::env::var_os(POLICY_ENV).unwrap_or_default()
    } else {
        arg.into()
    };
    let failure = match request::decode_policy(text.as_encoded_bytes()) {
        Ok(policy) => match run_helper(&policy, exe) {
            Ok(never) => match never {},
            Err(f) => f,
        },
        Err(f) => f,
    };
    report(&failure);
    match failure {
        Failure::Layer(f) => anyhow::bail!("sandbox layer failed: {f}"),
        Failure::Exec { errno, what } => {
            anyhow::bail!("{what}: {}", std::io::Error::from_raw_os_error(errno))
        }
    }
}

/// `exe`: the server placed the backend's descriptor at `EXE_FD`, and
/// the run executes it.
pub(super) fn run_helper(p: &Policy, exe: bool) -> Result<Infallible, Failure> {
    // Descriptors: only stdio, the status pipe and the backend's survive.
    let (gap_end, rest) = if exe {
        (EXE_FD as u32 - 1, EXE_FD as u32 + 1)
    } else {
        (u32::MAX, u32::MAX)
    };
    // SAFETY: closing descriptors this process doesn't use.
    if unsafe {
        libc::close_range(STATUS_FD as u32 + 1, gap_end, 0) != 0
            || (exe && libc::close_range(rest, u32::MAX, 0) != 0)
    } {
        return Err(last_error("close_range"));
    }
    // SAFETY: marking the status pipe close-on-exec.
    unsafe { libc::fcntl(STATUS_FD, libc::F_SETFD, libc::FD_CLOEXEC) };

    // Own session; end with the server. The parent-death signal is one the
    // helper catches: as the run's subreaper it then kills every process
    // the run left (a daemon in a session of its own included) before it
    // exits, which SIGKILL would not let it do. Until its handler is in
    // place SIGTERM ends it outright, and then it has no descendant yet.
    // SAFETY: integer-only process calls.
    unsafe {
        if libc::setsid() < 0 {
            return Err(last_error("setsid"));
        }
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM, 0, 0, 0) != 0 {
            return Err(last_error("parent-death signal"));
        }
        if libc::getppid() as u32 != p.parent_pid {
            // The server died before the signal was armed.
            libc::_exit(1);
        }
    }
    std::env::set_current_dir(&p.cwd).map_err(|e| {
        Failure::layer(
            RunStep::Request,
            format!("working folder {}: {e}", p.cwd.display()),
        )
    })?;

    // Everything that can fail for lack of memory or bad input is prepared
    // before the first namespace change.
    let mut exec = ExecArgs::new(p)?;
    if exe {
        exec.exe = Some(keep_exe(EXE_FD)?);
    }
    let last_cap = caps::last_cap();
    let program = if p.layers.has(Layer::Seccomp) {
        Some(
            seccomp::build_program(seccomp::Beside::of(&p.layers))
                .map_err(|e| Failure::layer(Layer::Seccomp, format!("seccomp: {e}")))?,
        )
    } else {
        None
    };

    // The ids are read before the namespaces: afterwards they'd be unmapped.
    // SAFETY: getuid/getgid can't fail.
    let ids = unsafe { (libc::getuid(), libc::getgid()) };
    let prepared = Prepared {
        exec,
        program: program.as_ref(),
        last_cap,
    };
    let confinement = confinement(p, &prepared, ids);
    confinement.take(Phase::Start)?;
    if p.layers.has(Layer::Pidns) {
        fork_init(p, &prepared, &confinement)
    } else {
        subreaper(&prepared, &confinement)
    }
}

/// The helper's steps of `steps::STEPS`, all from the run's policy.
fn confinement<'a>(p: &'a Policy, prep: &Prepared<'a>, ids: (u32, u32)) -> Confinement<'a> {
    Confinement {
        shape: RunShape::Reexec {
            pid_ns: p.layers.has(Layer::Pidns),
        },
        layers: &p.layers,
        ids,
        plan: p.mounts.as_ref(),
        policy: Some(p),
        program: prep.program,
        // A re-executed helper's run has no server-side supervisor.
        watched: None,
        last_cap: prep.last_cap,
    }
}

/// Set by the helper's SIGTERM handler: the server wants the run over.
static TERMINATED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn on_term(_: libc::c_int) {
    TERMINATED.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// Without a PID namespace nothing kills a run's leftovers for us: the
/// helper stays outside the confinement as a child subreaper, so every
/// process the backend starts and leaves behind (a double-forked daemon
/// included) becomes the helper's child, and it kills them all when the
/// backend is done or when the server asks it to stop (SIGTERM).
fn subreaper(prep: &Prepared<'_>, confinement: &Confinement<'_>) -> Result<Infallible, Failure> {
    // SAFETY: integer-only prctl; a handler that only stores an atomic,
    // installed without SA_RESTART so that it interrupts waitpid.
    unsafe {
        if libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0 {
            return Err(last_error("child subreaper"));
        }
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_term as *const () as libc::sighandler_t;
        libc::sigemptyset(&mut sa.sa_mask);
        if libc::sigaction(libc::SIGTERM, &sa, std::ptr::null_mut()) != 0 {
            return Err(last_error("SIGTERM handler"));
        }
    }
    // SAFETY: getpid can't fail.
    let helper = unsafe { libc::getpid() };
    // SAFETY: the helper is single-threaded, so the child may do anything.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(last_error("fork"));
    }
    if pid == 0 {
        // SAFETY: integer-only process calls; the handler is the helper's.
        unsafe {
            libc::signal(libc::SIGTERM, libc::SIG_DFL);
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                report(&last_error("parent-death signal"));
                libc::_exit(127);
            }
            if libc::getppid() != helper {
                libc::_exit(1);
            }
        }
        let failure = match confinement.take(Phase::Arm) {
            Ok(()) => prep.exec.exec(),
            Err(f) => f,
        };
        report(&failure);
        // SAFETY: leaving the child without running the parent's destructors.
        unsafe { libc::_exit(127) };
    }
    // SAFETY: the server sees end-of-file on the status pipe exactly when
    // the backend is executed (or reported why not), so the helper keeps no copy.
    unsafe { libc::close(STATUS_FD) };
    let status = wait_for(pid);
    kill_descendants();
    match status {
        Some(st) => exit_like(st),
        None => exit_like(libc::SIGTERM),
    }
}

/// Wait for the backend, reaping whatever else ends meanwhile. `None`
/// when the server asked the run to stop first.
fn wait_for(backend: libc::pid_t) -> Option<libc::c_int> {
    loop {
        if TERMINATED.load(std::sync::atomic::Ordering::SeqCst) {
            return None;
        }
        let mut st = 0;
        // SAFETY: reaping our own children.
        let r = unsafe { libc::waitpid(-1, &mut st, 0) };
        if r == backend {
            return Some(st);
        }
        if r < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            // No child at all: the backend is gone without a status for us.
            return Some(125 << 8);
        }
    }
}

/// Kill every process left below the helper until none is. A process
/// killed takes its children's parent link with it, and they are then the
/// helper's (it is their subreaper), so each round reaches one level further.
pub(super) fn kill_descendants() {
    loop {
        let kids = children();
        for k in &kids {
            // SAFETY: signalling our own, not yet reaped child.
            unsafe { libc::kill(*k, libc::SIGKILL) };
        }
        let mut st = 0;
        // SAFETY: reaping our own children; with none left, ECHILD ends it.
        let r =
            unsafe { libc::waitpid(-1, &mut st, if kids.is_empty() { libc::WNOHANG } else { 0 }) };
        if r < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ECHILD) {
            return;
        }
        if r == 0 && kids.is_empty() {
            // Children exist that the lists did not show yet (forked this
            // instant): wait for one of them rather than spin.
            // SAFETY: as above.
            unsafe { libc::waitpid(-1, &mut st, 0) };
        }
    }
}

/// The helper's children, from the kernel's list of them or, where the
/// kernel doesn't keep one, from every process's parent id.
fn children() -> Vec<libc::pid_t> {
    // SAFETY: getpid can't fail.
    let me = unsafe { libc::getpid() };
    if let Ok(text) = std::fs::read_to_string(format!("/proc/{me}/task/{me}/children")) {
        return parse_pids(&text);
    }
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.parse::<libc::pid_t>().ok()) else {
            continue;
        };
        if let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            if stat_ppid(&stat) == Some(me) {
                out.push(pid);
            }
        }
    }
    out
}

/// The pids in a `children` file ("12 34 "). Pure.
pub(super) fn parse_pids(text: &str) -> Vec<libc::pid_t> {
    text.split_ascii_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// The parent pid in a `/proc/PID/stat` line, whose second field (the
/// command name, in parentheses) may itself hold spaces and parentheses.
/// Pure.
pub(super) fn stat_ppid(stat: &str) -> Option<libc::pid_t> {
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_ascii_whitespace().nth(1)?.parse().ok()
}

/// Fork the PID namespace's init, then wait for it and exit like the backend.
pub(super) fn fork_init(
    p: &Policy,
    prep: &Prepared<'_>,
    confinement: &Confinement<'_>,
) -> Result<Infallible, Failure> {
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
        return Err(super::wire::status::last_error_at(
            super::step_error::LayerStep::ForkIntoPidns,
            "fork",
        ));
    }
    if pid == 0 {
        // SAFETY: closing the outer helper's end in the child.
        unsafe { libc::close(outer_end) };
        let failure = match init_main(p, prep, confinement, init_end) {
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
pub(super) fn outer_wait(init: libc::pid_t, sock: RawFd) -> ! {
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
pub(super) fn exit_like(status: libc::c_int) -> ! {
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
pub(super) fn init_main(
    p: &Policy,
    prep: &Prepared<'_>,
    confinement: &Confinement<'_>,
    sock: RawFd,
) -> Result<Infallible, Failure> {
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
    // The root before any layer that resolves paths (Landlock), so those
    // resolve inside it.
    confinement.take(Phase::Setup)?;
    std::env::set_current_dir(&p.cwd).map_err(|e| {
        Failure::layer(
            RunStep::Request,
            format!("working folder {}: {e}", p.cwd.display()),
        )
    })?;
    confinement.take(Phase::Arm)?;
    run_as_init(prep, sock, Tell::Helper)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn children_lists_and_stat_lines_parse() {
        assert_eq!(parse_pids("12 34 \n"), vec![12, 34]);
        assert!(parse_pids("").is_empty());
        assert_eq!(stat_ppid("77 (a) b) S 42 77 77 0"), Some(42));
        assert_eq!(stat_ppid("5 (sh) R 1 5 5"), Some(1));
        assert_eq!(stat_ppid("no parenthesis"), None);
        assert_eq!(stat_ppid("5 (sh) R"), None);
    }
}
