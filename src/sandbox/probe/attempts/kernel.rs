//! Attempts on the kernel's own objects and entry points: rings, foreign
//! system call tables, namespaces, mounts, memory files.

use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use super::errno::{check, cstr, errno_name, io};
use super::processes::reap;
use super::Tried;

pub(super) fn unshare_userns() -> Tried {
    // SAFETY: unshare takes flags only.
    check(unsafe { libc::unshare(libc::CLONE_NEWUSER) } as _).map(|_| "new user namespace".into())
}

pub(super) fn clone_newuser() -> Tried {
    raw_clone((libc::CLONE_NEWUSER | libc::SIGCHLD) as u64)
}

pub(super) fn io_uring_setup() -> Tried {
    let mut params = [0u8; 120];
    // SAFETY: io_uring_setup writes into a zeroed params block we own.
    let fd = check(unsafe { libc::syscall(libc::SYS_io_uring_setup, 4u32, params.as_mut_ptr()) })?;
    // SAFETY: closing the ring descriptor just made, which nothing else owns.
    unsafe { libc::close(fd as i32) };
    Ok("ring created".into())
}

pub(super) fn x32_syscall() -> Tried {
    // getpid through the x32 entry point.
    // SAFETY: getpid takes no arguments.
    check(unsafe { libc::syscall(0x4000_0000 | libc::SYS_getpid) })
        .map(|pid| format!("x32 getpid = {pid}"))
}

/// A raw clone (like fork) with extra flags; the child exits at once.
pub(super) fn raw_clone(flags: u64) -> Tried {
    // SAFETY: without CLONE_VM the child has its own copy of memory and
    // only calls _exit.
    let pid =
        check(unsafe { libc::syscall(libc::SYS_clone, flags, 0usize, 0usize, 0usize, 0usize) })?;
    if pid == 0 {
        // SAFETY: _exit in the child, which shares no state it could corrupt.
        unsafe { libc::_exit(0) };
    }
    reap(pid as i32);
    Ok("child in a new namespace".into())
}

pub(super) fn clone3() -> Tried {
    #[repr(C)]
    #[derive(Default)]
    struct CloneArgs {
        flags: u64,
        pidfd: u64,
        child_tid: u64,
        parent_tid: u64,
        exit_signal: u64,
        stack: u64,
        stack_size: u64,
        tls: u64,
    }
    let args = CloneArgs {
        exit_signal: libc::SIGCHLD as u64,
        ..CloneArgs::default()
    };
    // SAFETY: clone3 without CLONE_VM behaves like fork; the child exits.
    let pid = check(unsafe {
        libc::syscall(
            libc::SYS_clone3,
            &args as *const CloneArgs,
            std::mem::size_of::<CloneArgs>(),
        )
    })?;
    if pid == 0 {
        // SAFETY: _exit in the child, which shares no state it could corrupt.
        unsafe { libc::_exit(0) };
    }
    reap(pid as i32);
    Ok("clone3 child".into())
}

pub(super) fn mount_tmpfs(dir: &str) -> Tried {
    let target = cstr(dir)?;
    let fstype = cstr("tmpfs")?;
    // SAFETY: mount with C strings we own; unmounted right away.
    check(unsafe {
        libc::mount(
            fstype.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            0,
            std::ptr::null(),
        )
    } as _)?;
    // SAFETY: target is a NUL-terminated path we own.
    unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
    Ok("mounted".into())
}

pub(super) fn memfd(name: &str) -> Result<OwnedFd, String> {
    let n = cstr(name)?;
    // SAFETY: memfd_create with a C string we own; the descriptor is wrapped.
    let fd = check(unsafe { libc::memfd_create(n.as_ptr(), libc::MFD_CLOEXEC) } as _)?;
    // SAFETY: a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Hold `mib` MiB in memfds that are never mapped: memory RLIMIT_AS
/// doesn't count. Each stays below the file-size limit, which applies to
/// memfds too; there is no limit on how many there are.
pub(super) fn memfd_fill(mib: &str) -> Tried {
    const EACH_MIB: usize = 32;
    let mib: usize = mib.parse().map_err(|_| "bad size")?;
    let block = vec![0x5au8; 1 << 20];
    let mut held = Vec::new();
    let mut done = 0;
    while done < mib {
        let mut f = std::fs::File::from(memfd("reachweaver-probe")?);
        f.set_len((EACH_MIB as u64) << 20)
            .map_err(|e| format!("{} (ftruncate)", io(e)))?;
        for _ in 0..EACH_MIB {
            f.write_all(&block)
                .map_err(|e| format!("{} after {done} MiB", io(e)))?;
            done += 1;
        }
        held.push(f);
    }
    Ok(format!("{done} MiB held in {} memfds", held.len()))
}

/// Copy a program into a memfd and run it from there.
pub(super) fn memfd_exec(prog: &str) -> Tried {
    let mut src = std::fs::File::open(prog).map_err(|e| format!("{} (open)", io(e)))?;
    // Not close-on-exec: fexecve of a script would need it open; an ELF doesn't care.
    let n = cstr("reachweaver-probe-exec")?;
    // SAFETY: memfd_create with a C string we own.
    let fd = check(unsafe { libc::memfd_create(n.as_ptr(), 0) } as _)? as i32;
    // SAFETY: a fresh descriptor nobody else owns.
    let mut mf = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    std::io::copy(&mut src, &mut mf).map_err(io)?;
    let argv0 = cstr("true")?;
    let argv = [argv0.as_ptr(), std::ptr::null()];
    let envp: [*const libc::c_char; 1] = [std::ptr::null()];
    // SAFETY: the child only calls fexecve and _exit.
    let pid = check(unsafe { libc::fork() } as _)? as i32;
    if pid == 0 {
        // SAFETY: the forked child calls only fexecve and _exit, with arrays that live until then.
        unsafe {
            libc::fexecve(mf.as_raw_fd(), argv.as_ptr(), envp.as_ptr());
            let e = *libc::__errno_location();
            libc::_exit(100 + e.min(100));
        }
    }
    let mut st = 0;
    // SAFETY: waiting for our own child.
    unsafe { libc::waitpid(pid, &mut st, 0) };
    if libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0 {
        Ok("ran a program from a memfd".into())
    } else if libc::WIFEXITED(st) && libc::WEXITSTATUS(st) >= 100 {
        Err(format!(
            "{} (fexecve)",
            errno_name(libc::WEXITSTATUS(st) - 100)
        ))
    } else {
        Err(format!("the program failed: status {st:#x}"))
    }
}

/// A call the filter doesn't list: `personality` asked only for the
/// current persona (changes nothing). Answered outside; inside refused,
/// and the run's report must name it.
pub(super) fn unlisted_call() -> Tried {
    // SAFETY: personality with 0xffffffff only reads the persona.
    let p = check(unsafe { libc::syscall(libc::SYS_personality, 0xffff_ffff_u64) })?;
    Ok(format!("persona {p:#x}"))
}
