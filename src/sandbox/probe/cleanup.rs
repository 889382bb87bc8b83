//! Removing a folder tree a run may have built to hurt whoever cleans up:
//! thousands of levels deep, folders without permissions. Iterative, with
//! at most two descriptors open and no recursion, so neither the stack nor
//! the descriptor table grows with the depth.

use std::ffi::{CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Remove `dir` and everything below it; `Ok` also when it is already gone.
/// Only for trees nobody else changes meanwhile (the probe's own, or a
/// finished run's).
pub(super) fn remove_deep(dir: &Path) -> std::io::Result<()> {
    let top = CString::new(dir.as_os_str().as_bytes())?;
    // SAFETY: every descriptor opened here is closed on every path out.
    unsafe {
        let mut fd = libc::open(
            top.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        );
        if fd < 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::ENOENT) {
                return Ok(());
            }
            // Not a folder (or a symlink to one): remove the name itself.
            if matches!(e.raw_os_error(), Some(libc::ENOTDIR) | Some(libc::ELOOP)) {
                return std::fs::remove_file(dir);
            }
            return Err(e);
        }
        let mut depth = 0usize;
        // Each pass either removes an entry, goes down one level or goes up
        // one; a bound guards against a tree that keeps refusing.
        let mut budget: u64 = 50_000_000;
        loop {
            budget = budget.saturating_sub(1);
            if budget == 0 {
                libc::close(fd);
                return Err(std::io::Error::other("tree too large to remove"));
            }
            match step(fd) {
                Err(e) => {
                    libc::close(fd);
                    return Err(e);
                }
                Ok(Step::Down(child)) => {
                    libc::close(fd);
                    fd = child;
                    depth += 1;
                }
                Ok(Step::Empty) if depth == 0 => {
                    libc::close(fd);
                    return std::fs::remove_dir(dir);
                }
                Ok(Step::Empty) => {
                    let dotdot = c"..";
                    let parent = libc::openat(
                        fd,
                        dotdot.as_ptr(),
                        libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
                    );
                    let e = std::io::Error::last_os_error();
                    libc::close(fd);
                    if parent < 0 {
                        return Err(e);
                    }
                    fd = parent;
                    depth -= 1;
                }
            }
        }
    }
}

enum Step {
    /// A folder that could not be removed yet: go into it.
    Down(libc::c_int),
    /// Everything in this folder is gone.
    Empty,
}

/// Remove what can be removed in the folder `fd`; return the first
/// non-empty subfolder to go into.
unsafe fn step(fd: libc::c_int) -> std::io::Result<Step> {
    let dup = libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0);
    if dup < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let d = libc::fdopendir(dup);
    if d.is_null() {
        let e = std::io::Error::last_os_error();
        libc::close(dup);
        return Err(e);
    }
    libc::rewinddir(d);
    let mut result = Ok(Step::Empty);
    loop {
        let ent = libc::readdir(d);
        if ent.is_null() {
            break;
        }
        let name = CStr::from_ptr((*ent).d_name.as_ptr());
        let b = name.to_bytes();
        if b == b"." || b == b".." {
            continue;
        }
        if libc::unlinkat(fd, name.as_ptr(), 0) == 0 {
            continue;
        }
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EISDIR) && e.raw_os_error() != Some(libc::EPERM) {
            result = Err(e);
            break;
        }
        if libc::unlinkat(fd, name.as_ptr(), libc::AT_REMOVEDIR) == 0 {
            continue;
        }
        // Not empty (or unreadable): open it up and go in.
        libc::fchmodat(fd, name.as_ptr(), 0o700, 0);
        let child = libc::openat(
            fd,
            name.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        );
        if child < 0 {
            result = Err(std::io::Error::last_os_error());
        } else {
            result = Ok(Step::Down(child));
        }
        break;
    }
    libc::closedir(d);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chain_deeper_than_the_stack_and_descriptor_limits_is_removed() {
        let base = std::env::temp_dir().join(format!(
            "reachweaver-cleanup-test-{}-{:x}",
            std::process::id(),
            crate::sandbox::random_u64()
        ));
        std::fs::create_dir(&base).unwrap();
        let f = std::fs::File::open(&base).unwrap();
        use std::os::fd::AsRawFd;
        let d = c"d";
        // 1,500 levels built with relative calls: deeper than PATH_MAX allows
        // by name, and more than the usual 1,024 descriptors.
        let mut fd = f.as_raw_fd();
        for _ in 0..1500 {
            // SAFETY: mkdirat/openat relative to a descriptor we own.
            unsafe {
                assert_eq!(libc::mkdirat(fd, d.as_ptr(), 0o700), 0);
                let c = libc::openat(fd, d.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY);
                assert!(c >= 0);
                if fd != f.as_raw_fd() {
                    libc::close(fd);
                }
                fd = c;
            }
        }
        // SAFETY: a file and an inaccessible folder at the bottom.
        unsafe {
            let x = c"x";
            let ff = libc::openat(fd, x.as_ptr(), libc::O_CREAT | libc::O_WRONLY, 0o600);
            assert!(ff >= 0);
            libc::close(ff);
            let locked = c"locked";
            assert_eq!(libc::mkdirat(fd, locked.as_ptr(), 0o700), 0);
            let inner = c"locked/inner";
            assert_eq!(libc::mkdirat(fd, inner.as_ptr(), 0o700), 0);
            assert_eq!(libc::fchmodat(fd, locked.as_ptr(), 0, 0), 0);
            libc::close(fd);
        }
        // On a thread with a small stack, like a server's call thread.
        let b = base.clone();
        let r = std::thread::Builder::new()
            .stack_size(64 * 1024)
            .spawn(move || remove_deep(&b))
            .unwrap()
            .join()
            .unwrap();
        r.unwrap();
        assert!(!base.exists());
        // Gone already: fine.
        remove_deep(&base).unwrap();
    }
}
