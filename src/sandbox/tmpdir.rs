//! The host side of the runs' private temp folders: making them, removing
//! them, and sweeping those a dead server left behind.
//!
//! A run may leave anything in its folder (a chain of thousands of nested
//! folders, folders with mode 0, symlinks to the owner's files), and the
//! removal must survive all of it: it walks the tree iteratively with at most
//! two open descriptors, never follows a symlink, reopens mode-0 folders, and
//! never panics.
//!
//! Which folders belong to a live server is decided by a lock, not by a pid:
//! each server holds an exclusive `flock` on its own lock file
//! (`reachweaver-srv-TOKEN.lock`) for its whole life, and names its run
//! folders `reachweaver-run-TOKEN-RANDOM`. A sweeper that can take the lock
//! knows the owner is gone (the kernel drops a process's locks when it
//! dies), on Linux and macOS alike, in any PID namespace. The token is random,
//! so a folder name tells a run nothing about the server.

use std::ffi::{CStr, CString, OsStr};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Run folders: `reachweaver-run-TOKEN-RANDOM` (both 16 hex digits), or an
/// older version's `reachweaver-run-PID-PIDNS-RANDOM`.
const TMP_PREFIX: &str = "reachweaver-run-";
/// Server locks: `reachweaver-srv-TOKEN.lock`.
const LOCK_PREFIX: &str = "reachweaver-srv-";
const LOCK_SUFFIX: &str = ".lock";

/// Removes a private temp folder unless released to a `SandboxedChild`.
pub(crate) struct TmpGuard(pub(crate) Option<PathBuf>);

impl TmpGuard {
    pub(crate) fn release(mut self) -> Option<PathBuf> {
        self.0.take()
    }
}

impl Drop for TmpGuard {
    fn drop(&mut self) {
        if let Some(dir) = self.0.take() {
            remove_tree(&dir);
        }
    }
}

/// What a name in the temp folder says about its owner. Pure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TmpName {
    /// A run folder of the server holding lock `token`.
    Run { token: String },
    /// A server's lock file.
    Lock { token: String },
    /// A run folder of an older version, named by its server's pid and PID namespace.
    Legacy { pid: u32, ns: u64 },
}

fn is_hex16(s: &str) -> bool {
    s.len() == 16 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Parse a name in the temp folder; anything else is `None` and never touched.
pub(crate) fn parse_tmp_name(name: &str) -> Option<TmpName> {
    if let Some(rest) = name.strip_prefix(LOCK_PREFIX) {
        let token = rest.strip_suffix(LOCK_SUFFIX)?;
        return is_hex16(token).then(|| TmpName::Lock {
            token: token.to_string(),
        });
    }
    let rest = name.strip_prefix(TMP_PREFIX)?;
    let parts: Vec<&str> = rest.split('-').collect();
    match parts.as_slice() {
        [token, random] if is_hex16(token) && is_hex16(random) => Some(TmpName::Run {
            token: token.to_string(),
        }),
        [pid, ns, random] if is_hex16(random) => {
            let pid: u32 = pid.parse().ok()?;
            let ns: u64 = ns.parse().ok()?;
            Some(TmpName::Legacy { pid, ns })
        }
        _ => None,
    }
}

/// The canonical system temp folder, found once: the server's environment
/// doesn't change while it runs.
fn tmp_base() -> io::Result<PathBuf> {
    static BASE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    if let Some(b) = BASE.get() {
        return Ok(b.clone());
    }
    let b = std::fs::canonicalize(std::env::temp_dir())?;
    Ok(BASE.get_or_init(|| b).clone())
}

/// This server's lock, taken on first use and held until the process ends.
static SERVER_LOCK: Mutex<Option<ServerLock>> = Mutex::new(None);

/// An exclusive `flock` on `reachweaver-srv-TOKEN.lock`, held as long as
/// this value lives (the descriptor is close-on-exec, so no run inherits it).
#[derive(Debug)]
pub(crate) struct ServerLock {
    token: String,
    path: PathBuf,
    file: std::fs::File,
}

impl ServerLock {
    /// Create and lock a fresh lock file in `base`.
    pub(crate) fn acquire(base: &Path) -> io::Result<ServerLock> {
        use std::os::unix::fs::OpenOptionsExt;
        let mut last = None;
        for _ in 0..16 {
            let token = format!("{:016x}", random_u64());
            let path = base.join(format!("{LOCK_PREFIX}{token}{LOCK_SUFFIX}"));
            let file = match std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&path)
            {
                Ok(f) => f,
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    last = Some(e);
                    continue;
                }
                Err(e) => return Err(e),
            };
            flock(file.as_raw_fd(), libc::LOCK_EX)?;
            // The owner's pid, for the owner's tools and tests only: the
            // file is 0600 and outside every run's grants, and no run folder
            // name carries it.
            {
                use std::io::Write;
                let _ = (&file).write_all(format!("{}\n", std::process::id()).as_bytes());
            }
            let lock = ServerLock { token, path, file };
            // A sweeper may have taken the lock between our create and our
            // flock, believed the owner dead and unlinked the file: then
            // this lock guards nothing and we start over with a new name.
            if lock.still_linked() {
                return Ok(lock);
            }
        }
        Err(last.unwrap_or_else(|| io::Error::other("could not take a server lock")))
    }

    /// The lock file's path still names the inode we hold locked.
    fn still_linked(&self) -> bool {
        use std::os::unix::fs::MetadataExt;
        match (self.file.metadata(), std::fs::symlink_metadata(&self.path)) {
            (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        }
    }

    /// Refresh the lock file's times, so a periodic cleaner of the temp
    /// folder (macOS removes untouched files there after a few days)
    /// doesn't take it while the server is in use.
    fn touch(&self) {
        // SAFETY: a valid descriptor; a null times pointer means "now".
        unsafe { libc::futimens(self.file.as_raw_fd(), std::ptr::null()) };
    }
}

fn flock(fd: RawFd, op: libc::c_int) -> io::Result<()> {
    loop {
        // SAFETY: flock on a descriptor we own.
        if unsafe { libc::flock(fd, op) } == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Create a run folder (0700) named after `lock` in `base`.
pub(crate) fn make_run_dir(base: &Path, lock: &ServerLock) -> io::Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let mut last = None;
    for _ in 0..16 {
        let path = base.join(format!("{TMP_PREFIX}{}-{:016x}", lock.token, random_u64()));
        match std::fs::DirBuilder::new().mode(0o700).create(&path) {
            Ok(()) => return Ok(path),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("no free temp folder name")))
}

/// Run the closure with this server's lock, taking a new one when there is
/// none yet or its file was removed behind our back.
fn with_server_lock<T>(base: &Path, f: impl FnOnce(&ServerLock) -> T) -> io::Result<T> {
    let mut held = SERVER_LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let fresh = held.as_ref().is_some_and(ServerLock::still_linked);
    if !fresh {
        *held = Some(ServerLock::acquire(base)?);
    }
    match held.as_ref() {
        Some(lock) => {
            lock.touch();
            Ok(f(lock))
        }
        None => Err(io::Error::other("no server lock")),
    }
}

/// Create the run's private temporary folder (0700) under the system temp
/// folder, with an unpredictable name.
pub(crate) fn make_private_tmpdir() -> io::Result<PathBuf> {
    let base = tmp_base()?;
    with_server_lock(&base, |lock| make_run_dir(&base, lock))?
}

/// The name prefix of this server's run folders (the probe looks for
/// leftovers of its own runs with it).
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(crate) fn own_run_prefix() -> io::Result<String> {
    let base = tmp_base()?;
    with_server_lock(&base, |lock| format!("{TMP_PREFIX}{}-", lock.token))
}

/// The inode of this process's PID namespace (0 where there is none to
/// read, as on macOS): an older version's names carry it, because pids are
/// only comparable within one namespace.
fn pid_namespace_id() -> u64 {
    use std::os::unix::fs::MetadataExt;
    static ID: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *ID.get_or_init(|| {
        std::fs::metadata("/proc/self/ns/pid")
            .map(|m| m.ino())
            .unwrap_or(0)
    })
}

/// Whether the server that holds lock `token` in `base` is gone. Takes the
/// lock to find out and hands it to `then` (which runs while it is held).
/// `None`: alive, not ours, or not a lock file.
fn with_dead_lock(base: &Path, token: &str, uid: u32, then: impl FnOnce(&Path)) -> bool {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let path = base.join(format!("{LOCK_PREFIX}{token}{LOCK_SUFFIX}"));
    let Ok(file) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&path)
    else {
        return false;
    };
    let Ok(meta) = file.metadata() else {
        return false;
    };
    if !meta.is_file() || meta.uid() != uid {
        return false;
    }
    if flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB).is_err() {
        return false;
    }
    then(&path);
    // Unlink only the inode we hold locked.
    if let Ok(now) = std::fs::symlink_metadata(&path) {
        if now.dev() == meta.dev() && now.ino() == meta.ino() {
            let _ = std::fs::remove_file(&path);
        }
    }
    true
}

fn pid_exists(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return true;
    };
    if pid <= 0 {
        return true;
    }
    // SAFETY: signal 0 only checks; it sends nothing.
    if unsafe { libc::kill(pid, 0) } == 0 {
        return true;
    }
    io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// Remove run folders whose server died without cleaning up (a server
/// killed with SIGKILL can't), and the dead servers' lock files.
pub(crate) fn sweep_stale_tmpdirs() {
    let Ok(base) = tmp_base() else {
        return;
    };
    // SAFETY: geteuid can't fail.
    let uid = unsafe { libc::geteuid() };
    sweep(&base, uid);
}

/// The sweep over one folder, for the owner `uid`: a run folder is removed
/// when its server's lock can be taken (or is gone); an older version's
/// folder when its pid no longer exists in our PID namespace; anything owned
/// by someone else, or not named like ours, is left alone.
pub(crate) fn sweep(base: &Path, uid: u32) {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    let mut runs: Vec<(String, PathBuf)> = Vec::new();
    let mut locks: Vec<String> = Vec::new();
    let ns = pid_namespace_id();
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(parsed) = name.to_str().and_then(parse_tmp_name) else {
            continue;
        };
        let Ok(meta) = std::fs::symlink_metadata(e.path()) else {
            continue;
        };
        if meta.uid() != uid {
            continue;
        }
        match parsed {
            TmpName::Lock { token } if meta.is_file() => locks.push(token),
            TmpName::Run { token } if meta.is_dir() => runs.push((token, e.path())),
            TmpName::Legacy { pid, ns: dir_ns }
                if meta.is_dir() && dir_ns == ns && !pid_exists(pid) =>
            {
                remove_tree(&e.path());
            }
            _ => {}
        }
    }
    for token in &locks {
        with_dead_lock(base, token, uid, |_| {
            for (t, dir) in &runs {
                if t == token {
                    remove_tree(dir);
                }
            }
        });
    }
    // Run folders without a lock file: their server is gone (a live server
    // created and locked its file before its first run folder, and a
    // sweeper unlinks a lock file only while holding it).
    for (token, dir) in &runs {
        let lock = base.join(format!("{LOCK_PREFIX}{token}{LOCK_SUFFIX}"));
        if std::fs::symlink_metadata(&lock).is_err() && dir.exists() {
            remove_tree(dir);
        }
    }
}

pub(crate) fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    // RandomState is seeded from the OS once per process; mixing in a
    // counter and the time gives distinct names for every call.
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    if let Ok(t) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        h.write_u128(t.as_nanos());
    }
    h.write_u32(std::process::id());
    h.finish()
}

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
struct Frame {
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
    let mut stack = vec![Frame {
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
                    stack.push(Frame {
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

fn is_dir_at(dir: &OwnedFd, name: &CStr) -> bool {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: a valid descriptor, C string and buffer.
    let r = unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            name.as_ptr(),
            st.as_mut_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    if r != 0 {
        return false;
    }
    // SAFETY: fstatat filled it.
    let st = unsafe { st.assume_init() };
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
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    /// Taken by the tests that fork (a forked child holds copies of every
    /// descriptor, server locks included) and by those that check a lock is
    /// free, so one can't disturb the other.
    static SERIAL: Mutex<()> = Mutex::new(());

    fn serial() -> std::sync::MutexGuard<'static, ()> {
        SERIAL.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sweep until `gone` disappears or a few tries passed: a process that
    /// some other test spawns at that moment holds copies of our descriptors
    /// (locks included) for the instant between its fork and its exec.
    fn sweep_until_gone(base: &Path, uid: u32, gone: &Path) {
        for _ in 0..20 {
            sweep(base, uid);
            if !gone.exists() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }

    fn mkdirat(dir: &OwnedFd, name: &CStr) {
        // SAFETY: a valid descriptor and C string.
        let r = unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), 0o700) };
        assert_eq!(r, 0, "mkdirat: {}", io::Error::last_os_error());
    }

    fn open_fds() -> usize {
        // Linux and macOS both list the process's descriptors here.
        std::fs::read_dir("/dev/fd").map(|d| d.count()).unwrap_or(0)
    }

    #[test]
    fn names_are_parsed_and_carry_no_pid() {
        assert_eq!(
            parse_tmp_name("reachweaver-run-00ff00ff00ff00ff-0123456789abcdef"),
            Some(TmpName::Run {
                token: "00ff00ff00ff00ff".into()
            })
        );
        assert_eq!(
            parse_tmp_name("reachweaver-srv-00ff00ff00ff00ff.lock"),
            Some(TmpName::Lock {
                token: "00ff00ff00ff00ff".into()
            })
        );
        assert_eq!(
            parse_tmp_name("reachweaver-run-123-4026531836-00ff00ff00ff00ff"),
            Some(TmpName::Legacy {
                pid: 123,
                ns: 4026531836
            })
        );
        for bad in [
            "reachweaver-run-123-00ff00ff00ff00ff",
            "reachweaver-run-x-1-00ff00ff00ff00ff",
            "reachweaver-run-1-1-short",
            "reachweaver-srv-00ff00ff00ff00ff",
            "reachweaver-srv-short.lock",
            "other-1-1-00ff00ff00ff00ff",
            "reachweaver-run-00ff00ff00ff00ff-00ff00ff00ff00ff-x",
        ] {
            assert_eq!(parse_tmp_name(bad), None, "{bad}");
        }
        let made = make_private_tmpdir().unwrap();
        let name = made.file_name().unwrap().to_str().unwrap().to_string();
        assert!(matches!(parse_tmp_name(&name), Some(TmpName::Run { .. })));
        assert!(
            !name.contains(&std::process::id().to_string()) || std::process::id() < 1000,
            "{name} carries the pid"
        );
        assert!(name.starts_with(&own_run_prefix().unwrap()));
        // Ours is alive: a sweep of the real temp folder leaves it alone.
        sweep_stale_tmpdirs();
        assert!(made.exists());
        remove_tree(&made);
        assert!(!made.exists());
    }

    #[test]
    fn private_tmpdirs_are_0700_unique_and_removed() {
        let a = make_private_tmpdir().unwrap();
        let b = make_private_tmpdir().unwrap();
        assert_ne!(a, b);
        let mode = std::fs::metadata(&a).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        std::fs::create_dir_all(a.join("x/y")).unwrap();
        std::fs::write(a.join("x/y/f"), b"data").unwrap();
        remove_tree(&a);
        assert!(!a.exists());
        drop(TmpGuard(Some(b.clone())));
        assert!(!b.exists());
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

    /// A child process keeps `lock` alive after this test drops its copy.
    fn hand_lock_to_child(lock: ServerLock) -> std::process::Child {
        use std::os::unix::process::CommandExt;
        let fd = lock.file.as_raw_fd();
        let mut cmd = std::process::Command::new("sleep");
        cmd.arg("60");
        // SAFETY: dup2 is async-signal-safe; it puts the locked file on fd 9
        // (without close-on-exec) in the child.
        unsafe {
            cmd.pre_exec(move || {
                if libc::dup2(fd, 9) < 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().unwrap();
        drop(lock);
        child
    }

    #[test]
    fn the_sweep_keeps_live_servers_folders_and_removes_dead_ones() {
        let _serial = serial();
        let top = tempfile::tempdir().unwrap();
        let base = top.path();
        // SAFETY: geteuid can't fail.
        let uid = unsafe { libc::geteuid() };

        // A live server: its lock is held by another process.
        let live = ServerLock::acquire(base).unwrap();
        let live_run = make_run_dir(base, &live).unwrap();
        std::fs::create_dir_all(live_run.join("deep/er")).unwrap();
        let mut holder = hand_lock_to_child(live);

        // A dead server: its lock file remains, nobody holds it.
        let dead = ServerLock::acquire(base).unwrap();
        let dead_run = make_run_dir(base, &dead).unwrap();
        let dead_lock_path = dead.path.clone();
        std::fs::write(dead_run.join("f"), b"x").unwrap();
        drop(dead);

        // A run folder whose lock file is gone altogether.
        let orphan = base.join(format!("{TMP_PREFIX}{:016x}-{:016x}", 1u64, 2u64));
        std::fs::create_dir(&orphan).unwrap();

        // A folder of this process (alive) held in-process.
        let mine = ServerLock::acquire(base).unwrap();
        let mine_run = make_run_dir(base, &mine).unwrap();

        // Older versions: a dead pid in our namespace, and a live one (us).
        let ns = pid_namespace_id();
        let legacy_dead = base.join(format!("{TMP_PREFIX}{}-{ns}-{:016x}", i32::MAX - 7, 3u64));
        let legacy_live = base.join(format!(
            "{TMP_PREFIX}{}-{ns}-{:016x}",
            std::process::id(),
            4u64
        ));
        std::fs::create_dir_all(legacy_dead.join("a/b")).unwrap();
        std::fs::create_dir(&legacy_live).unwrap();
        // Not ours by name: never touched.
        let other = base.join("someone-elses-folder");
        std::fs::create_dir(&other).unwrap();

        sweep_until_gone(base, uid, &dead_run);
        assert!(live_run.exists(), "a live server's folder was swept");
        assert!(mine_run.exists());
        assert!(!dead_run.exists(), "a dead server's folder was kept");
        assert!(
            !dead_lock_path.exists(),
            "a dead server's lock file was kept"
        );
        assert!(!orphan.exists());
        assert!(!legacy_dead.exists());
        assert!(legacy_live.exists());
        assert!(other.exists());

        // Someone else's folders are left alone, whatever their state: seen
        // from another uid, nothing here is ours.
        holder.kill().unwrap();
        holder.wait().unwrap();
        sweep(base, uid.wrapping_add(1));
        assert!(live_run.exists());
        // Now that its holder died, the live server's folder goes too.
        sweep_until_gone(base, uid, &live_run);
        assert!(
            !live_run.exists(),
            "the folder of a server that died was kept"
        );
        assert!(mine_run.exists());
        drop(mine);
        sweep_until_gone(base, uid, &mine_run);
        assert!(!mine_run.exists());
    }

    #[test]
    fn another_users_folder_is_kept() {
        let _serial = serial();
        // SAFETY: geteuid can't fail.
        let uid = unsafe { libc::geteuid() };
        let top = tempfile::tempdir().unwrap();
        let base = top.path();
        let dir = base.join(format!("{TMP_PREFIX}{:016x}-{:016x}", 5u64, 6u64));
        std::fs::create_dir(&dir).unwrap();
        if uid == 0 {
            // A real folder of uid 65534, with no lock file (which would
            // make it stale if it were ours).
            let c = CString::new(dir.as_os_str().as_bytes()).unwrap();
            // SAFETY: a valid C string.
            assert_eq!(unsafe { libc::chown(c.as_ptr(), 65534, 65534) }, 0);
            assert_eq!(std::fs::metadata(&dir).unwrap().uid(), 65534);
            sweep(base, 0);
        } else {
            // Without root no folder can belong to someone else: sweep as
            // another uid instead, the same check from the other side.
            sweep(base, uid + 1);
        }
        assert!(dir.exists(), "another user's folder was swept");
        // The control: as its owner, the same folder is stale and swept.
        let owner = std::fs::metadata(&dir).unwrap().uid();
        sweep(base, owner);
        assert!(!dir.exists());
    }

    #[test]
    fn a_lock_file_swept_before_it_was_locked_is_replaced() {
        let top = tempfile::tempdir().unwrap();
        let lock = ServerLock::acquire(top.path()).unwrap();
        assert!(lock.still_linked());
        std::fs::remove_file(&lock.path).unwrap();
        assert!(!lock.still_linked());
    }
}
