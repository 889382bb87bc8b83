//! Attempts on processes: the server's (signals, tracing, its terminal),
//! this one's own privilege, resources, and what a run leaves running or
//! lying around for the next.

use std::ffi::CString;
use std::io::Write;
use std::path::Path;

use super::errno::{arg, check, cstr, io, os_err};
use super::tmpdir::tmpdir;
use super::Tried;
use crate::sandbox::probe::report_line::LEGACY_TIOCSTI_OFF;

pub(super) fn kill(pid: &str) -> Tried {
    let pid: i32 = pid.parse().map_err(|_| "bad pid")?;
    // SAFETY: signal 0 only checks whether the signal could be sent.
    check(unsafe { libc::kill(pid, 0) } as _).map(|_| "signal deliverable".into())
}

pub(super) fn ptrace(pid: &str) -> Tried {
    let pid: i32 = pid.parse().map_err(|_| "bad pid")?;
    // SAFETY: PTRACE_SEIZE doesn't stop the tracee; exiting detaches.
    check(unsafe {
        libc::ptrace(
            libc::PTRACE_SEIZE,
            pid,
            std::ptr::null_mut::<libc::c_void>(),
            std::ptr::null_mut::<libc::c_void>(),
        )
    })
    .map(|_| "attached".into())
}

pub(super) fn setuid_0() -> Tried {
    // SAFETY: setuid takes an integer.
    check(unsafe { libc::setuid(0) } as _).map(|_| "uid 0".into())
}

pub(super) fn no_new_privs_off() -> Tried {
    // SAFETY: integer-only prctl query.
    let v = unsafe { libc::prctl(libc::PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) };
    if v == 0 {
        Ok("NoNewPrivs=0".into())
    } else {
        Err(format!("NoNewPrivs={v}"))
    }
}

pub(super) fn seccomp_off() -> Tried {
    // SAFETY: integer-only prctl query.
    let v = unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) };
    if v == 0 {
        Ok("Seccomp=0".into())
    } else {
        Err(format!("Seccomp={v}"))
    }
}

pub(super) fn caps_held(which: &str) -> Tried {
    let h = crate::sandbox::linux::caps::held(63);
    let text = format!(
        "CapEff={:x} CapPrm={:x} CapInh={:x} CapBnd={:x} CapAmb={:x}",
        h.effective, h.permitted, h.inheritable, h.bounding, h.ambient
    );
    // "sets": the bounding set is not part of the promise here.
    let bounding = if which == "sets" { 0 } else { h.bounding };
    if h.effective | h.permitted | h.inheritable | bounding | h.ambient == 0 {
        if bounding == 0 && h.bounding != 0 {
            return Err(format!(
                "CapEff=0 CapPrm=0 CapInh=0 (bounding set {:x} kept, not promised) CapAmb=0",
                h.bounding
            ));
        }
        Err(text)
    } else {
        Ok(text)
    }
}

pub(super) fn env(names: &[String]) -> Tried {
    let present: Vec<&String> = names
        .iter()
        .filter(|n| std::env::var_os(n).is_some())
        .collect();
    if present.is_empty() {
        Err("absent".into())
    } else {
        Ok(format!(
            "present: {}",
            present
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(",")
        ))
    }
}

pub(super) fn sleep_marker() -> Tried {
    std::thread::sleep(std::time::Duration::from_secs(60));
    Ok("slept".into())
}

pub(super) fn fork() -> Tried {
    let out = std::process::Command::new(std::env::current_exe().map_err(io)?)
        .args(["__probe-attempt", "env", "TMPDIR"])
        .output()
        .map_err(io)?;
    if out.status.success() {
        Ok("started a child".into())
    } else {
        Err(format!("child: {}", out.status))
    }
}

pub(super) fn reap(pid: i32) {
    let mut st = 0;
    // SAFETY: waiting for our own child.
    unsafe { libc::waitpid(pid, &mut st, 0) };
}

/// Make the terminal on stdin ours, then push a byte into its input.
pub(super) fn tiocsti() -> Tried {
    // SAFETY: session and terminal ioctls on stdin; failures are reported.
    unsafe {
        libc::setsid();
        libc::ioctl(0, libc::TIOCSCTTY, 0);
        let c: u8 = b'#';
        check(libc::ioctl(0, libc::TIOCSTI, &c as *const u8) as _).map_err(|e| {
            // Kernels built without legacy TIOCSTI (Debian's 6.12) refuse it
            // to every caller without CAP_SYS_ADMIN, sandboxed or not.
            if e == "EIO" && legacy_tiocsti_off() {
                format!("EIO ({LEGACY_TIOCSTI_OFF})")
            } else {
                e
            }
        })?;
        // Stay in the session a moment: ending it hangs the terminal up and
        // flushes the queue before the probe can see the byte.
        std::thread::sleep(std::time::Duration::from_millis(300));
        Ok("byte injected".into())
    }
}

fn legacy_tiocsti_off() -> bool {
    std::fs::read_to_string("/proc/sys/dev/tty/legacy_tiocsti").is_ok_and(|v| v.trim() == "0")
}

pub(super) fn fork_bomb(n: usize) -> Tried {
    let mut kids = Vec::new();
    let mut stopped = None;
    for _ in 0..n {
        // SAFETY: the child only sleeps until it is killed.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            stopped = Some(os_err());
            break;
        }
        if pid == 0 {
            loop {
                // SAFETY: pause takes nothing; the child waits here to be killed.
                unsafe { libc::pause() };
            }
        }
        kids.push(pid);
    }
    let count = kids.len();
    for pid in kids {
        // SAFETY: killing and reaping our own children.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        reap(pid);
    }
    match stopped {
        None => Ok(format!("{count} processes")),
        Some(e) => Err(format!("{e} after {count} processes")),
    }
}

pub(super) fn memory_bomb(gib: usize) -> Tried {
    let chunk = 1usize << 30;
    let mut maps = Vec::new();
    let mut stopped = None;
    for _ in 0..gib {
        // SAFETY: anonymous mapping, never touched, unmapped below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                chunk,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            stopped = Some(os_err());
            break;
        }
        maps.push(p);
    }
    let count = maps.len();
    for p in maps {
        // SAFETY: unmapping what we mapped.
        unsafe { libc::munmap(p, chunk) };
    }
    match stopped {
        None => Ok(format!("{count} GiB mapped")),
        Some(e) => Err(format!("{e} after {count} GiB")),
    }
}

pub(super) fn stdout_flood() -> Tried {
    let block = vec![b'x'; 1 << 20];
    let mut out = std::io::stdout().lock();
    loop {
        if let Err(e) = out.write_all(&block) {
            return Err(io(e));
        }
    }
}

/// Leave a detached grandchild (new session, parent gone) that carries the
/// marker in its command line, then return.
pub(super) fn daemon(args: &[String]) -> Tried {
    let marker = arg(args, 0)?;
    let exe = std::env::current_exe().map_err(io)?;
    let exe_c = cstr(&exe.to_string_lossy())?;
    let argv_c: Vec<CString> = [
        exe.to_string_lossy().as_ref(),
        "__probe-attempt",
        "sleep-marker",
        marker,
    ]
    .iter()
    .map(|s| cstr(s))
    .collect::<Result<_, _>>()?;
    // SAFETY: single-threaded; the children only call setsid/fork/execv/_exit.
    unsafe {
        let pid = check(libc::fork() as _)? as i32;
        if pid == 0 {
            libc::setsid();
            if libc::fork() == 0 {
                let mut argv: Vec<*const libc::c_char> =
                    argv_c.iter().map(|a| a.as_ptr()).collect();
                argv.push(std::ptr::null());
                let null = cstr("/dev/null").unwrap_or_default();
                let fd = libc::open(null.as_ptr(), libc::O_RDWR);
                libc::dup2(fd, 1);
                libc::dup2(fd, 2);
                libc::execv(exe_c.as_ptr(), argv.as_ptr());
            }
            libc::_exit(0);
        }
        reap(pid);
    }
    Ok("daemon started".into())
}

/// The SysV key a marker's shared memory segment is made under (never
/// `IPC_PRIVATE`, which is 0).
pub(super) fn marker_key(marker: &str) -> libc::key_t {
    let h = marker.bytes().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    (h & 0x7fff_fffe) as libc::key_t + 1
}

/// What one call leaves for the next: a file in its TMPDIR, a file in
/// `/dev/shm` (POSIX shared memory), a SysV shared memory segment and a
/// detached process, each named by `marker`. Reports what it could leave.
pub(super) fn leave_traces(marker: &str) -> Tried {
    let mut left = Vec::new();
    if let Ok(dir) = tmpdir() {
        if std::fs::write(dir.join(marker), b"trace").is_ok() {
            left.push("tmp file");
        }
    }
    if std::fs::write(Path::new("/dev/shm").join(marker), b"trace").is_ok() {
        left.push("/dev/shm file");
    }
    // SAFETY: creating a segment under a key of our own; no memory is mapped.
    if unsafe { libc::shmget(marker_key(marker), 4096, libc::IPC_CREAT | 0o600) } >= 0 {
        left.push("SysV segment");
    }
    // The `daemon` attempt leaves the process (a detached grandchild) and
    // returns.
    let daemon = std::env::current_exe().and_then(|exe| {
        std::process::Command::new(exe)
            .args(["__probe-attempt", "daemon", marker])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
    });
    if daemon.is_ok_and(|s| s.success()) {
        left.push("process");
    }
    Ok(format!("left: {}", left.join(", ")))
}

/// Look for what `leave-traces` left under `marker` and remove it: `Ok`
/// names what was seen (the earlier call got through to this one), `Err`
/// says `none`.
pub(super) fn find_traces(marker: &str) -> Tried {
    let mut seen = Vec::new();
    if let Ok(dir) = tmpdir() {
        if std::fs::remove_file(dir.join(marker)).is_ok() {
            seen.push("tmp file".to_string());
        }
    }
    if std::fs::remove_file(Path::new("/dev/shm").join(marker)).is_ok() {
        seen.push("/dev/shm file".to_string());
    }
    // SAFETY: looking up a segment by key and removing it; nothing is mapped.
    unsafe {
        let id = libc::shmget(marker_key(marker), 0, 0);
        if id >= 0 {
            libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut());
            seen.push("SysV segment".to_string());
        }
    }
    // A process from the earlier call, found by the marker in its command
    // line (this process's own carries it too, and is skipped).
    let me = std::process::id().to_string();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Ok(pid) = name.parse::<i32>() else {
            continue;
        };
        if name == me {
            continue;
        }
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        if cmd.split(|&b| b == 0).any(|a| a == marker.as_bytes()) {
            // SAFETY: killing a process that carries our own marker.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            seen.push(format!("process {pid}"));
        }
    }
    if seen.is_empty() {
        Err("none".into())
    } else {
        Ok(format!("seen: {}", seen.join(", ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_markers_sysv_key_is_never_ipc_private_and_stays_the_same() {
        // FNV-1a of nothing, its top and bottom bits cleared, plus one.
        assert_eq!(
            marker_key(""),
            ((0x811c_9dc5_u32 & 0x7fff_fffe) + 1) as libc::key_t
        );
        for m in ["", "rwprobe-1-0-0", "rwprobe-4242-17-ffff"] {
            let k = marker_key(m);
            assert!(k > 0, "{m}: {k}");
            assert_eq!(k, marker_key(m));
        }
        assert_ne!(marker_key("rwprobe-1-0-0"), marker_key("rwprobe-1-1-0"));
    }
}
