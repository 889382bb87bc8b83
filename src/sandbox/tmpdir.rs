//! The host side of the runs' private temp folders: making them, removing
//! them, and sweeping those a dead server left behind.
//!
//! A run may leave anything in its folder, and the removal (`remove.rs`)
//! must survive all of it.
//!
//! Which folders belong to a live server is decided by a lock, not by a pid:
//! each server holds an exclusive `flock` on its own lock file
//! (`reachweaver-srv-TOKEN.lock`) for its whole life, and names its run
//! folders `reachweaver-run-TOKEN-RANDOM`. A sweeper that can take the lock
//! knows the owner is gone (the kernel drops a process's locks when it
//! dies), on Linux and macOS alike, in any PID namespace. The token is random,
//! so a folder name tells a run nothing about the server.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

mod remove;
pub(crate) use self::remove::remove_tree;
pub(crate) use self::remove::stat_at;
#[cfg(target_os = "linux")]
pub(crate) use self::remove::try_remove_tree;

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

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    /// Taken by the tests that fork (a forked child holds copies of every
    /// descriptor, server locks included) and by those that check a lock is
    /// free, so one can't disturb the other.
    static SERIAL: Mutex<()> = Mutex::new(());

    pub(super) fn serial() -> std::sync::MutexGuard<'static, ()> {
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
