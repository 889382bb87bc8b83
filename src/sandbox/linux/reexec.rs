//! The re-executed helper: for runs that cannot have their own user and PID
//! namespaces from a zygote, the server runs its own binary as
//! `__sandbox-helper`, which confines itself and forks the run's init.

use std::convert::Infallible;
use std::os::fd::RawFd;

use super::init::{
    confine, init_namespace, minimal_root_and_limits, run_as_init, ExecArgs, Prepared,
};
use super::wire::*;
use super::{caps, namespaces, seccomp, zygote};
use crate::sandbox::policy::Policy;

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

pub(super) fn run_helper(p: &Policy) -> Result<Infallible, Failure> {
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

/// Fork the PID namespace's init, then wait for it and exit like the backend.
pub(super) fn fork_init(p: &Policy, prep: &Prepared<'_>) -> Result<Infallible, Failure> {
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
    init_namespace(&p.layers)?;
    // Before any layer that resolves paths (Landlock), so those resolve
    // inside the new root.
    minimal_root_and_limits(&p.layers, p.mounts.as_ref())?;
    std::env::set_current_dir(&p.cwd)
        .map_err(|e| Failure::Layer(format!("working folder {}: {e}", p.cwd.display())))?;
    run_as_init(p, prep, sock, None)
}
