//! The tree remover: a run's temp folder goes whatever the run left in it
//! (a chain of thousands of nested folders, folders with mode 0, symlinks to
//! the owner's files). The walk is iterative with at most two open
//! descriptors, never follows a symlink, reopens mode-0 folders, and never
//! panics.

use std::ffi::{CStr, CString, OsStr};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Remove a folder tree whatever a run left in it. Errors are swallowed: a
/// leftover is swept at the next start, a crash would take every call.
pub(crate) fn remove_tree(dir: &Path) {
    let _ = try_remove_tree(dir);
}

/// Upper bound on the steps of one removal, so a process still writing into
/// the tree can't keep the caller busy forever.
const MAX_STEPS: u64 = 50_000_000;

/// One folder on the way down: its name in its parent, its identity (to
/// check the way back up), and the subfolders still to visit.
struct Descent {
    name: CString,
    dev: u64,
    ino: u64,
    pending: Vec<CString>,
}

/// Iterative removal: only the current folder's descriptor is kept (plus one
/// more while stepping down, up, or listing), names wait on the heap.
pub(crate) fn try_remove_tree(dir: &Path) -> io::Result<()> {
    let (Some(parent), Some(name)) = (dir.parent(), dir.file_name()) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "no folder to remove",
        ));
    };
    let parent_path = if parent.as_os_str().is_empty() {
        Path::new(".")
    } else {
        parent
    };
    let parent_fd = open_path_dir(parent_path)?;
    let (base_dev, base_ino) = fd_identity(&parent_fd)?;
    let name = cstring(name)?;
    let (mut cur, dev, ino) = match open_subdir(&parent_fd, &name) {
        Ok(x) => x,
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(()),
        Err(e) if not_a_dir(&e) => return unlink_at(&parent_fd, &name, 0),
        Err(e) => return Err(e),
    };
    drop(parent_fd);
    let mut stack = vec![Descent {
        name,
        dev,
        ino,
        pending: Vec::new(),
    }];
    let mut steps: u64 = 0;
    loop {
        steps += 1;
        if steps > MAX_STEPS {
            return Err(io::Error::other(
                "the folder kept changing while being removed",
            ));
        }
        let Some(top) = stack.last_mut() else {
            return Ok(());
        };
        if let Some(child) = top.pending.pop() {
            match open_subdir(&cur, &child) {
                Ok((fd, dev, ino)) => {
                    stack.push(Descent {
                        name: child,
                        dev,
                        ino,
                        pending: Vec::new(),
                    });
                    cur = fd;
                }
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
                Err(e) if not_a_dir(&e) => unlink_at(&cur, &child, 0)?,
                Err(e) => return Err(e),
            }
            continue;
        }
        let (subdirs, removed) = scan(&cur)?;
        steps += removed;
        if !subdirs.is_empty() {
            top.pending = subdirs;
            continue;
        }
        if removed > 0 {
            // Something may have been skipped while entries were removed
            // (some file systems don't promise a stable listing): look again.
            continue;
        }
        // Empty: go up (checking we arrive where we came from) and remove it.
        let Some(done) = stack.pop() else {
            return Ok(());
        };
        let up = open_at(
            &cur,
            c"..",
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )?;
        let want = stack
            .last()
            .map_or((base_dev, base_ino), |f| (f.dev, f.ino));
        if fd_identity(&up)? != want {
            return Err(io::Error::other(
                "a folder was moved while being removed; stopped",
            ));
        }
        let (dev, ino) = fd_identity(&cur)?;
        if (dev, ino) != (done.dev, done.ino) {
            return Err(io::Error::other("a folder changed while being removed"));
        }
        drop(cur);
        cur = up;
        match unlink_at(&cur, &done.name, libc::AT_REMOVEDIR) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
            Err(e) => return Err(e),
        }
        if stack.is_empty() {
            return Ok(());
        }
    }
}

fn cstring(name: &OsStr) -> io::Result<CString> {
    CString::new(name.as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

fn not_a_dir(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOTDIR) | Some(libc::ELOOP))
}

fn open_path_dir(path: &Path) -> io::Result<OwnedFd> {
    let c = cstring(path.as_os_str())?;
    // SAFETY: a valid C string; the result is checked.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    owned(fd)
}

fn open_at(dir: &OwnedFd, name: &CStr, flags: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: a valid descriptor and C string; the result is checked.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags) };
    owned(fd)
}

fn owned(fd: RawFd) -> io::Result<OwnedFd> {
    if fd < 0 {
        Err(io::Error::last_os_error())
    } else {
        // SAFETY: a fresh descriptor nobody else owns.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }
}

fn fstat(fd: &OwnedFd) -> io::Result<libc::stat> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: a valid descriptor and buffer.
    if unsafe { libc::fstat(fd.as_raw_fd(), st.as_mut_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fstat filled it.
    Ok(unsafe { st.assume_init() })
}

fn fd_identity(fd: &OwnedFd) -> io::Result<(u64, u64)> {
    let st = fstat(fd)?;
    #[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
    Ok((st.st_dev as u64, st.st_ino as u64))
}

fn unlink_at(dir: &OwnedFd, name: &CStr, flags: libc::c_int) -> io::Result<()> {
    // SAFETY: a valid descriptor and C string.
    if unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), flags) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Open a subfolder without following a symlink, making it searchable and
/// writable for its owner first if the run took those rights away.
fn open_subdir(dir: &OwnedFd, name: &CStr) -> io::Result<(OwnedFd, u64, u64)> {
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    let fd = match open_at(dir, name, flags) {
        Ok(fd) => fd,
        Err(e) if e.raw_os_error() == Some(libc::EACCES) => {
            make_accessible(dir, name)?;
            open_at(dir, name, flags)?
        }
        Err(e) => return Err(e),
    };
    let st = fstat(&fd)?;
    #[allow(clippy::unnecessary_cast)]
    let mode = st.st_mode as u32;
    if mode & 0o700 != 0o700 {
        // SAFETY: a valid descriptor of a folder we opened.
        unsafe { libc::fchmod(fd.as_raw_fd(), 0o700) };
    }
    let (dev, ino) = fd_identity(&fd)?;
    Ok((fd, dev, ino))
}

/// Give a folder its owner's rights back without ever following a symlink
/// (the name might be swapped for one by a process still running).
#[cfg(target_os = "linux")]
fn make_accessible(dir: &OwnedFd, name: &CStr) -> io::Result<()> {
    // An O_PATH descriptor needs no permission on the folder itself, and
    // chmod through its /proc/self/fd link changes exactly that inode.
    let fd = open_at(
        dir,
        name,
        libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
    )?;
    let link = CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd()))
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: a valid C string.
    if unsafe { libc::chmod(link.as_ptr(), 0o700) } == 0 {
        return Ok(());
    }
    // Without /proc, glibc's own no-follow chmod.
    // SAFETY: a valid descriptor and C string.
    if unsafe {
        libc::fchmodat(
            dir.as_raw_fd(),
            name.as_ptr(),
            0o700,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    } == 0
    {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(not(target_os = "linux"))]
fn make_accessible(dir: &OwnedFd, name: &CStr) -> io::Result<()> {
    // macOS and the BSDs change a symlink's own mode with this flag, never
    // its target's.
    // SAFETY: a valid descriptor and C string.
    if unsafe {
        libc::fchmodat(
            dir.as_raw_fd(),
            name.as_ptr(),
            0o700,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    } == 0
    {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// List a folder once: remove every entry that is not a folder, return the
/// subfolders' names and how many entries were removed.
fn scan(dir: &OwnedFd) -> io::Result<(Vec<CString>, u64)> {
    let names = list(dir)?;
    let mut subdirs = Vec::new();
    let mut removed = 0u64;
    for (name, d_type) in names {
        let is_dir = match d_type {
            libc::DT_DIR => true,
            libc::DT_UNKNOWN => is_dir_at(dir, &name),
            _ => false,
        };
        if is_dir {
            subdirs.push(name);
            continue;
        }
        match unlink_at(dir, &name, 0) {
            Ok(()) => removed += 1,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
            // Became a folder meanwhile: visit it.
            Err(e) if matches!(e.raw_os_error(), Some(libc::EISDIR) | Some(libc::EPERM)) => {
                subdirs.push(name)
            }
            Err(e) => return Err(e),
        }
    }
    Ok((subdirs, removed))
}

/// An entry's own status, relative to the folder `dir`, never following a
/// link (the draft sweep reads its folder the same way).
pub(crate) fn stat_at(dir: &OwnedFd, name: &CStr) -> Option<libc::stat> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: a valid descriptor, C string and out-parameter.
    let r = unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            name.as_ptr(),
            st.as_mut_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    // SAFETY: fstatat filled it in when it returned 0.
    (r == 0).then(|| unsafe { st.assume_init() })
}

fn is_dir_at(dir: &OwnedFd, name: &CStr) -> bool {
    let Some(st) = stat_at(dir, name) else {
        return false;
    };
    #[allow(clippy::unnecessary_cast)]
    let fmt = st.st_mode as u32 & libc::S_IFMT as u32;
    #[allow(clippy::unnecessary_cast)]
    let dir_fmt = libc::S_IFDIR as u32;
    fmt == dir_fmt
}

/// Every name in a folder with its type, read through a duplicate of the
/// descriptor (closed again before returning).
fn list(dir: &OwnedFd) -> io::Result<Vec<(CString, u8)>> {
    // SAFETY: a valid descriptor; the result is checked.
    let dup = unsafe { libc::fcntl(dir.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 0) };
    let dup = owned(dup)?;
    // SAFETY: fdopendir takes over the descriptor on success.
    let dirp = unsafe { libc::fdopendir(dup.as_raw_fd()) };
    if dirp.is_null() {
        return Err(io::Error::last_os_error());
    }
    std::mem::forget(dup);
    // The duplicate shares the file offset with `dir`, which an earlier
    // listing left at the end.
    // SAFETY: a valid stream.
    unsafe { libc::rewinddir(dirp) };
    let mut out = Vec::new();
    loop {
        // SAFETY: a valid stream; the entry is copied before the next call.
        let ent = unsafe { libc::readdir(dirp) };
        if ent.is_null() {
            break;
        }
        // SAFETY: readdir returns a valid entry with a NUL-terminated name.
        let (name, d_type) = unsafe { (CStr::from_ptr((*ent).d_name.as_ptr()), (*ent).d_type) };
        let bytes = name.to_bytes();
        if bytes == b"." || bytes == b".." {
            continue;
        }
        out.push((name.to_owned(), d_type));
    }
    // SAFETY: closes the stream and the duplicate descriptor.
    unsafe { libc::closedir(dirp) };
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    use crate::sandbox::tmpdir::tests::serial;

    fn mkdirat(dir: &OwnedFd, name: &CStr) {
        // SAFETY: a valid descriptor and C string.
        let r = unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), 0o700) };
        assert_eq!(r, 0, "mkdirat: {}", io::Error::last_os_error());
    }

    fn open_fds() -> usize {
        // Linux and macOS both list the process's descriptors here.
        std::fs::read_dir("/dev/fd").map(|d| d.count()).unwrap_or(0)
    }

    /// Set in a copy of this test binary to the folder that copy removes
    /// while it counts its own descriptors (see the test below).
    const DEEP_CHAIN_CHILD: &str = "REACHWEAVER_TEST_DEEP_CHAIN";
    /// Descriptors the removal may open beyond those open before it: its
    /// two, the listing's duplicate, and room to spare; far below one per
    /// level of the chain.
    const DEEP_CHAIN_FD_ROOM: usize = 8;

    #[test]
    fn a_5000_deep_chain_is_removed_with_few_descriptors() {
        if let Some(root) = std::env::var_os(DEEP_CHAIN_CHILD) {
            remove_counting_descriptors(Path::new(&root));
            return;
        }
        let top = tempfile::tempdir().unwrap();
        let root = top.path().join("run");
        std::fs::create_dir(&root).unwrap();
        let mut fd = open_path_dir(&root).unwrap();
        for _ in 0..5000 {
            mkdirat(&fd, c"d");
            fd = open_at(&fd, c"d", libc::O_RDONLY | libc::O_DIRECTORY).unwrap();
        }
        // SAFETY: a valid descriptor and C string.
        let f = unsafe {
            libc::openat(
                fd.as_raw_fd(),
                c"bottom".as_ptr(),
                libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC,
                0o600,
            )
        };
        assert!(f >= 0);
        // SAFETY: closing the descriptor just opened.
        unsafe { libc::close(f) };
        drop(fd);
        // Other tests open and close descriptors in this process at any
        // moment, so the count is taken in a process of its own: this test
        // binary again, running only this test.
        let module = module_path!()
            .split_once("::")
            .map_or(module_path!(), |(_, m)| m);
        let name = format!("{module}::a_5000_deep_chain_is_removed_with_few_descriptors");
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([name.as_str(), "--exact", "--test-threads=1", "--nocapture"])
            .env(DEEP_CHAIN_CHILD, &root)
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "{text}");
        assert!(text.contains(" 1 passed;"), "the copy ran no test: {text}");
        assert!(!root.exists());
    }

    /// The measured half of the test above, alone in its process: the
    /// descriptor limit leaves room for only a few more than are open, and
    /// the removal runs on a stack a recursion over 5,000 levels would
    /// overflow (std's recursive removal is what crashed).
    fn remove_counting_descriptors(root: &Path) {
        let open: Vec<usize> = std::fs::read_dir("/dev/fd")
            .unwrap()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse().ok())
            .collect();
        let highest = open.iter().copied().max().unwrap_or(0);
        let limit = (highest + 1 + DEEP_CHAIN_FD_ROOM) as libc::rlim_t;
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: a valid out-pointer.
        assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
        lim.rlim_cur = limit.min(lim.rlim_max);
        // SAFETY: a valid pointer; lowering the soft limit is always allowed.
        assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) }, 0);
        let before = open_fds();
        let r = std::thread::Builder::new()
            .stack_size(64 * 1024)
            .spawn({
                let root = root.to_path_buf();
                move || try_remove_tree(&root).map_err(|e| e.to_string())
            })
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(r, Ok(()));
        assert!(!root.exists());
        assert_eq!(open_fds(), before, "descriptors leaked");
    }

    #[test]
    fn ten_thousand_files_and_symlinks_out_are_removed_without_following() {
        let top = tempfile::tempdir().unwrap();
        let outside = top.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("keep"), b"precious").unwrap();
        std::fs::create_dir(outside.join("sub")).unwrap();
        std::fs::write(outside.join("sub/keep2"), b"precious").unwrap();
        let root = top.path().join("run");
        std::fs::create_dir(&root).unwrap();
        let many = root.join("many");
        std::fs::create_dir(&many).unwrap();
        for i in 0..10_000 {
            std::fs::write(many.join(format!("f{i}")), b"").unwrap();
        }
        std::os::unix::fs::symlink(&outside, root.join("dirlink")).unwrap();
        std::os::unix::fs::symlink(outside.join("keep"), root.join("filelink")).unwrap();
        std::os::unix::fs::symlink(&outside, many.join("deeplink")).unwrap();
        std::fs::create_dir_all(root.join("a/b/c")).unwrap();
        std::os::unix::fs::symlink("../../../../outside", root.join("a/b/c/rel")).unwrap();
        let locked = root.join("locked");
        std::fs::create_dir_all(locked.join("inner")).unwrap();
        std::fs::write(locked.join("inner/f"), b"x").unwrap();
        std::fs::set_permissions(locked.join("inner"), std::fs::Permissions::from_mode(0o000))
            .unwrap();
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
        try_remove_tree(&root).unwrap();
        assert!(!root.exists());
        assert_eq!(std::fs::read(outside.join("keep")).unwrap(), b"precious");
        assert_eq!(
            std::fs::read(outside.join("sub/keep2")).unwrap(),
            b"precious"
        );
        assert_eq!(
            std::fs::metadata(&outside).unwrap().permissions().mode() & 0o777,
            0o755 & !umask()
        );
        // A symlink as the tree itself is removed, its target kept.
        let link = top.path().join("link-as-root");
        std::os::unix::fs::symlink(&outside, &link).unwrap();
        try_remove_tree(&link).unwrap();
        assert!(std::fs::symlink_metadata(&link).is_err());
        assert!(outside.join("keep").exists());
        // A missing tree is not an error.
        try_remove_tree(&top.path().join("absent")).unwrap();
    }

    fn umask() -> u32 {
        // SAFETY: reading the mask by setting and restoring it.
        unsafe {
            let m = libc::umask(0o022);
            libc::umask(m);
            #[allow(clippy::unnecessary_cast)]
            let m = m as u32;
            m
        }
    }

    /// Mode-0 folders as their (unprivileged) owner sees them: root ignores
    /// permissions, so as root the removal runs in a child with uid 65534.
    #[test]
    fn mode_zero_folders_are_opened_up_and_removed_by_their_owner() {
        let _serial = serial();
        let top = tempfile::tempdir().unwrap();
        let root = top.path().join("run");
        // SAFETY: geteuid can't fail.
        let euid = unsafe { libc::geteuid() };
        let build_and_remove = |root: &Path| -> Result<(), String> {
            std::fs::create_dir_all(root.join("x/y/z")).map_err(|e| e.to_string())?;
            std::fs::write(root.join("x/y/z/f"), b"data").map_err(|e| e.to_string())?;
            for (p, m) in [("x/y/z", 0o000), ("x/y", 0o100), ("x", 0o000)] {
                std::fs::set_permissions(root.join(p), std::fs::Permissions::from_mode(m))
                    .map_err(|e| e.to_string())?;
            }
            // The owner itself can't list it now.
            if std::fs::read_dir(root.join("x")).is_ok() {
                return Err("mode 0 did not lock the owner out".into());
            }
            try_remove_tree(root).map_err(|e| e.to_string())?;
            if root.exists() {
                return Err("still there".into());
            }
            Ok(())
        };
        if euid != 0 {
            build_and_remove(&root).unwrap();
            return;
        }
        let c = CString::new(top.path().as_os_str().as_bytes()).unwrap();
        // SAFETY: a valid C string.
        assert_eq!(unsafe { libc::chown(c.as_ptr(), 65534, 65534) }, 0);
        // SAFETY: the child only calls setgid/setuid, our own code (glibc's
        // and libSystem's malloc stay usable after fork) and _exit.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            // SAFETY: the forked child only drops privileges and calls into the remover before _exit.
            let code = unsafe {
                if libc::setgroups(0, std::ptr::null()) != 0
                    || libc::setgid(65534) != 0
                    || libc::setuid(65534) != 0
                {
                    3
                } else {
                    match build_and_remove(&root) {
                        Ok(()) => 0,
                        Err(_) => 1,
                    }
                }
            };
            // SAFETY: leaving the forked child without running destructors.
            unsafe { libc::_exit(code) };
        }
        let mut status = 0;
        // SAFETY: reaping our own child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert!(libc::WIFEXITED(status), "child died: {status}");
        assert_eq!(libc::WEXITSTATUS(status), 0, "removal as uid 65534 failed");
        assert!(!root.exists());
    }
}
