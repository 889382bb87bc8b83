//! Small facts about the running kernel and a way to try a call in a
//! throwaway child: shared by detection (`detect.rs`) and the layers' own
//! availability checks, so neither has to import the other.

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

/// The last error number, as a child's exit code carries it.
pub(crate) fn errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
        & 0xff
}

/// Run `f` in a forked child and return its result (0: success, else an
/// errno). `f` must stick to async-signal-safe calls: the server may have
/// other threads.
pub(crate) fn in_child(f: impl FnOnce() -> i32) -> Result<(), std::io::Error> {
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
