//! What a `draft` run leaves in the database's folder. The run may write
//! the database and SQLite's companions there. On macOS the profile names
//! each of those files as a literal, so nothing under another name can
//! appear, but a run could still make a link, folder or pipe under a
//! companion's name or set an execute bit on one: the same sweep runs
//! after a draft there. On Linux, Landlock lets it create and
//! remove regular files in that folder (SQLite makes and deletes its
//! journal as it goes, under names Landlock cannot tell apart) but no
//! links, folders, pipes or devices; the mount layer makes every entry that
//! was there before immovable; seccomp refuses execute bits. What is left
//! is a new regular file under another name: this module notes the folder
//! before the run and, once the run is over, removes exactly the entries
//! the run made that are not the database's companions. It removes links
//! and pipes the run made too, and folders when they are empty, so those
//! are held twice (Landlock refuses making them; this removes them should
//! Landlock be off).
//!
//! Only entries that did not exist before the run, belong to the server's
//! user, (for regular files) have one link, and changed no earlier than the
//! run started are removed, so a file the owner makes in that folder while
//! a draft runs is left alone unless it matches all of that.
//!
//! The server may run as root in a folder others can write, and whoever
//! can write the folder's parent can swap the folder for a link to any
//! other folder while a run goes on. So the folder is opened once, before
//! the run, without following a link, and checked against the device and
//! inode pinned at start (the pin the mount layer checks too); every look
//! and every removal afterwards is relative to that descriptor, never by
//! path. Nothing is removed beneath a folder: no run can make one (Landlock
//! allows regular files only, the macOS profile names literal files), so a
//! folder found there goes only when it is empty, and a full one stays as
//! it is.

use std::collections::HashSet;
use std::ffi::{CStr, CString};
use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::sandbox::policy::{DraftDb, Pin};
use crate::sandbox::tmpdir::stat_at;

/// Why a draft's folder can't be swept: the run is refused rather than
/// sweeping something else.
#[derive(Debug)]
pub enum SweepError {
    /// The folder's path ends in a symbolic link.
    Link(PathBuf),
    /// The folder is not the one pinned at start.
    Changed(PathBuf),
    /// The folder could not be opened or listed.
    Io(PathBuf, io::Error),
}

impl fmt::Display for SweepError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SweepError::Link(p) => write!(
                f,
                "{} is a symbolic link; a draft writes only in the folder it named at start",
                p.display()
            ),
            SweepError::Changed(p) => write!(
                f,
                "{} changed after this call checked it; the next call looks again and uses what is there then",
                p.display()
            ),
            SweepError::Io(p, e) => write!(f, "{}: {e}", p.display()),
        }
    }
}

impl std::error::Error for SweepError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SweepError::Io(_, e) => Some(e),
            _ => None,
        }
    }
}

impl From<SweepError> for crate::sandbox::SandboxError {
    fn from(e: SweepError) -> Self {
        match e {
            // The server's own descriptors may have run out: kept as an
            // I/O error so that shows as a shortage, not as a layer.
            SweepError::Io(_, e) => crate::sandbox::SandboxError::Io(e),
            e => crate::sandbox::SandboxError::LayerFailed(e.to_string()),
        }
    }
}

/// The folder as it was when the run started, held open.
#[derive(Debug)]
pub struct DraftSweep {
    dir: OwnedFd,
    keep: Vec<String>,
    before: HashSet<(Vec<u8>, u64)>,
    started: SystemTime,
}

/// Whether an entry the run left is one to remove. Pure.
pub fn is_leftover(
    name: &[u8],
    ino: u64,
    before: &HashSet<(Vec<u8>, u64)>,
    keep: &[String],
    ours: bool,
    changed_since_start: bool,
) -> bool {
    ours && changed_since_start
        && !before.contains(&(name.to_vec(), ino))
        && !keep.iter().any(|k| k.as_bytes() == name)
}

/// Whether a file changed no earlier than a second before the run started
/// (file times have the file system's resolution). Times are seconds and
/// nanoseconds since the epoch, as `stat` gives them. Pure.
pub fn changed_since(mtime: (i64, i64), ctime: (i64, i64), started: SystemTime) -> bool {
    let since = started
        .checked_sub(Duration::from_secs(1))
        .unwrap_or(started);
    [mtime, ctime].into_iter().any(|(s, ns)| {
        let (Ok(s), Ok(ns)) = (u64::try_from(s), u32::try_from(ns)) else {
            return false;
        };
        UNIX_EPOCH
            .checked_add(Duration::new(s, 0))
            .and_then(|t| t.checked_add(Duration::from_nanos(u64::from(ns))))
            .is_some_and(|t| t >= since)
    })
}

/// Whether the folder open at `fd` is the one pinned (no pin: nothing to
/// compare, as for a folder that didn't exist at start).
fn matches_pin(fd: &OwnedFd, pin: Option<Pin>) -> io::Result<bool> {
    let Some(pin) = pin else {
        return Ok(true);
    };
    // Through a duplicate, so the File's drop closes only that one.
    let file = std::fs::File::from(fd.try_clone()?);
    let meta = file.metadata()?;
    Ok(meta.dev() == pin.dev && meta.ino() == pin.ino)
}

/// Open the folder itself, refusing a link at its path.
fn open_folder(folder: &Path) -> Result<OwnedFd, SweepError> {
    let c = CString::new(folder.as_os_str().as_bytes()).map_err(|_| {
        SweepError::Io(
            folder.to_path_buf(),
            io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in the path"),
        )
    })?;
    // SAFETY: a valid C string; the descriptor returned is checked and owned.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        let e = io::Error::last_os_error();
        let link = e.raw_os_error() == Some(libc::ELOOP)
            || std::fs::symlink_metadata(folder).is_ok_and(|m| m.file_type().is_symlink());
        return Err(if link {
            SweepError::Link(folder.to_path_buf())
        } else {
            SweepError::Io(folder.to_path_buf(), e)
        });
    }
    // SAFETY: a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn clear_errno() {
    // SAFETY: the calling thread's errno, always valid.
    #[cfg(target_os = "linux")]
    unsafe {
        *libc::__errno_location() = 0;
    }
    // SAFETY: the calling thread's errno, always valid.
    #[cfg(target_os = "macos")]
    unsafe {
        *libc::__error() = 0;
    }
}

/// The names and inodes in the folder open at `dir`, read from a duplicate
/// of that descriptor (from the start, whatever an earlier listing read).
fn list(dir: &OwnedFd) -> io::Result<Vec<(CString, u64)>> {
    // SAFETY: fcntl on a descriptor we own; the result is checked.
    let dup = unsafe { libc::fcntl(dir.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 0) };
    if dup < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `dup` is ours; on success the stream owns it.
    let stream = unsafe { libc::fdopendir(dup) };
    if stream.is_null() {
        let e = io::Error::last_os_error();
        // SAFETY: fdopendir failed, so `dup` is still ours to close.
        unsafe { libc::close(dup) };
        return Err(e);
    }
    let mut out = Vec::new();
    let mut failed = None;
    // SAFETY: `stream` is a valid stream until closedir below; each entry
    // is copied out before the next readdir.
    unsafe {
        // The duplicate shares the offset an earlier listing moved.
        libc::rewinddir(stream);
        loop {
            clear_errno();
            let ent = libc::readdir(stream);
            if ent.is_null() {
                let e = io::Error::last_os_error();
                if e.raw_os_error().is_some_and(|n| n != 0) {
                    failed = Some(e);
                }
                break;
            }
            let name = CStr::from_ptr((*ent).d_name.as_ptr());
            if name.to_bytes() == b"." || name.to_bytes() == b".." {
                continue;
            }
            out.push((name.to_owned(), (*ent).d_ino));
        }
        libc::closedir(stream);
    }
    match failed {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

fn is_kind(st: &libc::stat, kind: libc::mode_t) -> bool {
    st.st_mode & libc::S_IFMT == kind
}

/// Remove one entry of the folder: a folder only when empty (never
/// anything beneath it); whether it went.
fn remove_at(dir: &OwnedFd, name: &CStr, is_dir: bool) -> bool {
    let flags = if is_dir { libc::AT_REMOVEDIR } else { 0 };
    // SAFETY: a valid descriptor and C string.
    unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), flags) == 0 }
}

/// Open the entry `name` of the folder with `access` (`O_RDONLY`,
/// `O_WRONLY`), never following a link, never blocking on a pipe and never
/// taking a terminal.
fn open_at(dir: &OwnedFd, name: &CStr, access: libc::c_int) -> io::Result<std::fs::File> {
    // SAFETY: a valid descriptor and C string; the result is checked and owned.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            name.as_ptr(),
            access | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor that nothing else owns.
    Ok(std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
}

/// Clear the execute bits of the regular file `name` of the folder, `ino`
/// as it was looked at and still the server's user's with one link: through
/// a descriptor of the file itself, so a link or another file put under
/// the name meanwhile is never changed.
fn clear_exec_at(dir: &OwnedFd, name: &CStr, ino: u64, uid: libc::uid_t) {
    let file = match open_at(dir, name, libc::O_RDONLY) {
        Ok(f) => f,
        Err(e) => {
            // A file of the server's without read permission: the server (not
            // root, which opens anything) can only change its own files, and
            // the flag never follows a link.
            if e.raw_os_error() == Some(libc::EACCES) && uid != 0 {
                if let Some(st) = stat_at(dir, name) {
                    if is_kind(&st, libc::S_IFREG) && st.st_ino == ino && st.st_uid == uid {
                        // SAFETY: a valid descriptor and C string.
                        unsafe {
                            libc::fchmodat(
                                dir.as_raw_fd(),
                                name.as_ptr(),
                                st.st_mode & 0o7666,
                                libc::AT_SYMLINK_NOFOLLOW,
                            )
                        };
                    }
                }
            }
            return;
        }
    };
    let Ok(meta) = file.metadata() else {
        return;
    };
    if meta.is_file() && meta.ino() == ino && meta.uid() == uid && meta.nlink() == 1 {
        use std::os::unix::fs::PermissionsExt;
        let _ = file.set_permissions(std::fs::Permissions::from_mode(meta.mode() & 0o7666));
    }
}

/// Where SQLite's locks of a database file lie on Unix: the pending byte
/// (at 1 GiB), the reserved byte after it, then 510 shared bytes. A lock on
/// all 512 can be had only while no connection, in any process, has the
/// database open for reading or writing.
#[cfg(target_os = "linux")]
const SQLITE_LOCKS: (libc::off_t, libc::off_t) = (0x4000_0000, 512);

/// Open the regular file `name` of the folder for writing, without
/// following a link, when it is the server's user's with one name.
#[cfg(target_os = "linux")]
fn open_own_file_at(dir: &OwnedFd, name: &CStr, uid: libc::uid_t) -> Option<std::fs::File> {
    let file = open_at(dir, name, libc::O_WRONLY).ok()?;
    let meta = file.metadata().ok()?;
    (meta.is_file() && meta.uid() == uid && meta.nlink() == 1).then_some(file)
}

/// Whether a file holds blocks past its end: those `fallocate` with
/// `FALLOC_FL_KEEP_SIZE` reserves, which the file-size limit does not
/// count. Pure.
pub fn holds_blocks_past_its_end(size: u64, blocks_512: u64) -> bool {
    // The last block of the data may be partly used: round the size up.
    blocks_512.saturating_mul(512) > size.div_ceil(4096).saturating_mul(4096)
}

/// Give back the blocks a draft reserved past the end of the database and
/// its companions (seccomp refuses such a reservation; this is the second
/// layer). Cutting a file to its own size frees them, but would cut what
/// another writer appended meanwhile, so it is done only while holding
/// every SQLite lock byte of the database, which no connection anywhere
/// then holds; else nothing is done. Returns how many files gave blocks.
#[cfg(target_os = "linux")]
fn give_back_reserved(dir: &OwnedFd, keep: &[String], uid: libc::uid_t) -> usize {
    let Some(db) = keep.first().and_then(|n| CString::new(n.as_bytes()).ok()) else {
        return 0;
    };
    let Some(db_file) = open_own_file_at(dir, &db, uid) else {
        return 0;
    };
    let lock = libc::flock {
        l_type: libc::F_WRLCK as libc::c_short,
        l_whence: libc::SEEK_SET as libc::c_short,
        l_start: SQLITE_LOCKS.0,
        l_len: SQLITE_LOCKS.1,
        l_pid: 0,
    };
    // An open-file-description lock: it conflicts with every other
    // process's locks and with this process's other descriptions, and
    // goes when `db_file` is closed.
    // SAFETY: a valid descriptor and a lock description we own.
    if unsafe { libc::fcntl(db_file.as_raw_fd(), libc::F_OFD_SETLK, &lock) } != 0 {
        return 0;
    }
    let mut gave = 0;
    for name in keep {
        let Ok(c) = CString::new(name.as_bytes()) else {
            continue;
        };
        let file = match open_own_file_at(dir, &c, uid) {
            Some(f) => f,
            None => continue,
        };
        let Ok(meta) = file.metadata() else {
            continue;
        };
        if holds_blocks_past_its_end(meta.len(), meta.blocks()) && file.set_len(meta.len()).is_ok()
        {
            gave += 1;
        }
    }
    drop(db_file);
    gave
}

/// macOS has no `FALLOC_FL_KEEP_SIZE`, and its profile names each file a
/// draft may write: nothing is reserved past an end there.
#[cfg(not(target_os = "linux"))]
fn give_back_reserved(_dir: &OwnedFd, _keep: &[String], _uid: libc::uid_t) -> usize {
    0
}

impl DraftSweep {
    /// Open the folder (refusing a link, or another folder than the one
    /// pinned at start) and note its entries (names and inodes) before the
    /// run.
    pub fn before(draft: &DraftDb) -> Result<DraftSweep, SweepError> {
        let started = SystemTime::now();
        let dir = open_folder(&draft.folder)?;
        let io_err = |e| SweepError::Io(draft.folder.clone(), e);
        if !matches_pin(&dir, draft.folder_pin).map_err(io_err)? {
            return Err(SweepError::Changed(draft.folder.clone()));
        }
        let mut before = HashSet::new();
        for (name, d_ino) in list(&dir).map_err(io_err)? {
            // The inode `after` compares with is the one fstatat gives.
            let ino = stat_at(&dir, &name).map_or(d_ino, |st| st.st_ino);
            before.insert((name.into_bytes(), ino));
        }
        Ok(DraftSweep {
            dir,
            keep: draft.writable_names(),
            before,
            started,
        })
    }

    /// Remove what the run made besides the database's companions; returns
    /// how many entries went. Never fails: an entry that can't be looked at
    /// or removed stays.
    pub fn after(&self) -> usize {
        // SAFETY: geteuid can't fail.
        let uid = unsafe { libc::geteuid() };
        let Ok(entries) = list(&self.dir) else {
            return 0;
        };
        let mut removed = 0;
        for (name, _) in entries {
            let Some(st) = stat_at(&self.dir, &name) else {
                continue;
            };
            let regular = is_kind(&st, libc::S_IFREG);
            let is_dir = is_kind(&st, libc::S_IFDIR);
            let ours = st.st_uid == uid && (!regular || st.st_nlink == 1);
            let changed = changed_since(
                (st.st_mtime, st.st_mtime_nsec),
                (st.st_ctime, st.st_ctime_nsec),
                self.started,
            );
            let bytes = name.to_bytes();
            let companion = self.keep.iter().any(|k| k.as_bytes() == bytes);
            if is_leftover(bytes, st.st_ino, &self.before, &self.keep, ours, changed) {
                if remove_at(&self.dir, &name, is_dir) {
                    removed += 1;
                }
            } else if companion {
                if companion_needs_removal(regular, ours, changed) {
                    // A companion must be a plain file; a link, folder or
                    // pipe under its name is the run's doing.
                    if remove_at(&self.dir, &name, is_dir) {
                        removed += 1;
                    }
                } else if regular && ours && st.st_mode & 0o111 != 0 {
                    // The database and its companions are data: whatever
                    // asked for an execute bit, none is left on the host.
                    clear_exec_at(&self.dir, &name, st.st_ino, uid);
                }
            }
        }
        give_back_reserved(&self.dir, &self.keep, uid);
        removed
    }
}

/// Whether an entry under a companion's (or the database's) name is to be
/// removed: only something the run made that is not a regular file. Pure.
pub fn companion_needs_removal(is_regular: bool, ours: bool, changed_since_start: bool) -> bool {
    !is_regular && ours && changed_since_start
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db(folder: &Path) -> DraftDb {
        DraftDb {
            folder: folder.to_path_buf(),
            db: folder.join("rw.db"),
            pin: None,
            folder_pin: None,
        }
    }

    fn pin(p: &Path) -> Pin {
        let m = std::fs::symlink_metadata(p).unwrap();
        Pin {
            dev: m.dev(),
            ino: m.ino(),
        }
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut left: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        left
    }

    #[test]
    fn only_new_files_of_the_run_that_are_not_companions_go() {
        let before: HashSet<(Vec<u8>, u64)> =
            [(b"accounts.yaml".to_vec(), 7), (b"rw.db".to_vec(), 8)].into();
        let keep = db(Path::new("/h")).writable_names();
        let left = |n: &str, ino, ours, changed| {
            is_leftover(n.as_bytes(), ino, &before, &keep, ours, changed)
        };
        assert!(left("other.txt", 9, true, true));
        assert!(!left("rw.db-journal", 10, true, true), "a companion");
        assert!(!left("rw.db", 11, true, true), "the database itself");
        assert!(!left("accounts.yaml", 7, true, true), "there before");
        // A file replaced under an old name (a new inode) was the run's.
        assert!(left("accounts.yaml", 12, true, true));
        assert!(
            !left("other.txt", 9, false, true),
            "someone else's, or linked"
        );
        assert!(!left("other.txt", 9, true, false), "older than the run");
    }

    #[test]
    fn a_change_counts_from_one_second_before_the_run_started() {
        let started = UNIX_EPOCH + Duration::new(1_000, 500);
        let old = (0, 0);
        assert!(changed_since((999, 500), old, started), "the slack's edge");
        assert!(
            !changed_since((999, 499), old, started),
            "a nanosecond older"
        );
        assert!(changed_since(old, (999, 500), started), "the status change");
        assert!(!changed_since(old, (999, 499), started));
        assert!(changed_since((2_000, 0), old, started), "later");
        assert!(!changed_since((-1, 0), (0, -1), started), "nonsense times");
    }

    #[test]
    fn the_sweep_removes_what_a_run_added_and_keeps_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let d = db(dir.path());
        std::fs::write(&d.db, b"db").unwrap();
        std::fs::write(dir.path().join("accounts.yaml"), b"a").unwrap();
        let sweep = DraftSweep::before(&d).unwrap();
        std::fs::write(dir.path().join("rw.db-journal"), b"j").unwrap();
        std::fs::write(dir.path().join("other.txt"), b"x").unwrap();
        std::fs::write(dir.path().join("payload.sh"), b"x").unwrap();
        std::os::unix::fs::symlink("/", dir.path().join("escape")).unwrap();
        std::fs::create_dir(dir.path().join("empty")).unwrap();
        std::fs::create_dir_all(dir.path().join("newdir/deeper")).unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("kept"), b"k").unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("newdir/out")).unwrap();
        assert_eq!(sweep.after(), 4, "three files and the empty folder");
        // A full folder stays as it is: nothing beneath it is looked at.
        assert!(outside.path().join("kept").exists());
        assert_eq!(names(&dir.path().join("newdir")), ["deeper", "out"]);
        assert_eq!(
            names(dir.path()),
            ["accounts.yaml", "newdir", "rw.db", "rw.db-journal"]
        );
    }

    #[test]
    fn companions_are_plain_files_without_execute_bits_afterwards() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let d = db(dir.path());
        std::fs::write(&d.db, b"db").unwrap();
        let sweep = DraftSweep::before(&d).unwrap();
        let wal = dir.path().join("rw.db-wal");
        std::fs::write(&wal, b"w").unwrap();
        std::fs::set_permissions(&wal, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(&d.db, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::os::unix::fs::symlink("/", dir.path().join("rw.db-shm")).unwrap();
        std::fs::create_dir(dir.path().join("rw.db-journal")).unwrap();
        assert_eq!(sweep.after(), 2, "the link and the folder");
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&wal), 0o644);
        assert_eq!(mode(&d.db), 0o600);
        assert!(std::fs::symlink_metadata(dir.path().join("rw.db-shm")).is_err());
        assert!(!dir.path().join("rw.db-journal").exists());
    }

    #[test]
    fn a_link_under_a_companion_name_goes_and_what_it_names_keeps_its_bits() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let d = db(dir.path());
        std::fs::write(&d.db, b"db").unwrap();
        let outside = tempfile::tempdir().unwrap();
        let target = outside.path().join("tool");
        std::fs::write(&target, b"t").unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o755)).unwrap();
        let sweep = DraftSweep::before(&d).unwrap();
        std::os::unix::fs::symlink(&target, dir.path().join("rw.db-wal")).unwrap();
        assert_eq!(sweep.after(), 1);
        let mode = std::fs::metadata(&target).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o755);
        assert_eq!(names(dir.path()), ["rw.db"]);
    }

    #[test]
    fn a_deep_folder_chain_left_in_the_database_folder_is_left_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let d = db(dir.path());
        std::fs::write(&d.db, b"db").unwrap();
        let sweep = DraftSweep::before(&d).unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("kept"), b"k").unwrap();
        let p = dir.path().join("chain");
        std::fs::create_dir(&p).unwrap();
        // Deeper than PATH_MAX allows in one path: built step by step, with
        // a fresh file and a link out at the bottom.
        let mut fd = std::fs::File::open(&p).unwrap();
        let step = CString::new("d").unwrap();
        for _ in 0..1500 {
            // SAFETY: mkdirat/openat on a descriptor and C string we own.
            unsafe {
                assert_eq!(libc::mkdirat(fd.as_raw_fd(), step.as_ptr(), 0o700), 0);
                let next = libc::openat(
                    fd.as_raw_fd(),
                    step.as_ptr(),
                    libc::O_RDONLY | libc::O_DIRECTORY,
                );
                assert!(next >= 0);
                fd = std::fs::File::from_raw_fd(next);
            }
        }
        let leaf = CString::new("fresh").unwrap();
        let out = CString::new(outside.path().as_os_str().as_bytes()).unwrap();
        let link = CString::new("out").unwrap();
        // SAFETY: openat/symlinkat on a descriptor and C strings we own.
        unsafe {
            let f = libc::openat(
                fd.as_raw_fd(),
                leaf.as_ptr(),
                libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC,
                0o600,
            );
            assert!(f >= 0);
            drop(OwnedFd::from_raw_fd(f));
            assert_eq!(
                libc::symlinkat(out.as_ptr(), fd.as_raw_fd(), link.as_ptr()),
                0
            );
        }
        assert_eq!(sweep.after(), 0, "a full folder is never emptied");
        // The bottom of the chain is as it was: the sweep never descended.
        assert!(stat_at(&OwnedFd::from(fd.try_clone().unwrap()), &leaf).is_some());
        assert!(stat_at(&OwnedFd::from(fd.try_clone().unwrap()), &link).is_some());
        assert!(outside.path().join("kept").exists());
        assert!(p.join("d").is_dir());
        assert_eq!(names(dir.path()), ["chain", "rw.db"]);
        drop(fd);
        crate::sandbox::remove_tree(&p);
    }

    #[test]
    fn a_folder_swapped_for_a_link_during_the_run_is_not_followed() {
        let base = tempfile::tempdir().unwrap();
        let a = base.path().join("data");
        std::fs::create_dir(&a).unwrap();
        let d = DraftDb {
            folder_pin: Some(pin(&a)),
            ..db(&a)
        };
        std::fs::write(&d.db, b"db").unwrap();
        let sweep = DraftSweep::before(&d).unwrap();
        // The run's leftover, then the folder swapped for a link elsewhere.
        std::fs::write(a.join("leftover"), b"x").unwrap();
        let real = base.path().join("data.real");
        std::fs::rename(&a, &real).unwrap();
        let victim = tempfile::tempdir().unwrap();
        std::fs::write(victim.path().join("fresh"), b"v").unwrap();
        std::fs::create_dir(victim.path().join("sub")).unwrap();
        std::fs::write(victim.path().join("sub/inner"), b"v").unwrap();
        std::os::unix::fs::symlink(victim.path(), &a).unwrap();
        assert_eq!(sweep.after(), 1);
        assert_eq!(names(victim.path()), ["fresh", "sub"]);
        assert!(victim.path().join("sub/inner").exists());
        // The folder the run wrote in is swept wherever it went.
        assert_eq!(names(&real), ["rw.db"]);
    }

    #[test]
    fn a_folder_other_than_the_pinned_one_is_refused() {
        let base = tempfile::tempdir().unwrap();
        let a = base.path().join("data");
        let other = base.path().join("other");
        std::fs::create_dir(&a).unwrap();
        std::fs::create_dir(&other).unwrap();
        let d = DraftDb {
            folder_pin: Some(pin(&other)),
            ..db(&a)
        };
        let e = DraftSweep::before(&d).unwrap_err();
        assert!(matches!(&e, SweepError::Changed(p) if p == &a), "{e:?}");
        assert!(e.to_string().contains("changed after this call checked it"));
        let same = DraftDb {
            folder_pin: Some(pin(&a)),
            ..db(&a)
        };
        assert!(DraftSweep::before(&same).is_ok());
    }

    #[test]
    fn a_link_at_the_folder_path_is_refused() {
        let base = tempfile::tempdir().unwrap();
        let real = base.path().join("real");
        std::fs::create_dir(&real).unwrap();
        let a = base.path().join("data");
        std::os::unix::fs::symlink(&real, &a).unwrap();
        // Refused even with the pin of the folder the link names.
        let d = DraftDb {
            folder_pin: Some(pin(&real)),
            ..db(&a)
        };
        let e = DraftSweep::before(&d).unwrap_err();
        assert!(matches!(&e, SweepError::Link(p) if p == &a), "{e:?}");
        let e = DraftSweep::before(&db(&a)).unwrap_err();
        assert!(matches!(e, SweepError::Link(_)), "{e:?}");
        let missing = DraftSweep::before(&db(&base.path().join("gone"))).unwrap_err();
        assert!(matches!(missing, SweepError::Io(..)), "{missing:?}");
    }

    #[test]
    fn blocks_past_the_end_are_those_past_the_last_4_kib_of_data() {
        assert!(!holds_blocks_past_its_end(0, 0));
        assert!(!holds_blocks_past_its_end(1, 8), "one block holds 1 byte");
        assert!(holds_blocks_past_its_end(1, 9));
        assert!(!holds_blocks_past_its_end(4096, 8));
        assert!(holds_blocks_past_its_end(4096, 9));
        assert!(!holds_blocks_past_its_end(4097, 16));
        assert!(holds_blocks_past_its_end(4097, 17));
    }

    /// Reserve `bytes` past the end of `path` as a draft could, keeping its
    /// size; the blocks it holds then.
    #[cfg(target_os = "linux")]
    fn reserve_past_end(path: &Path, bytes: i64) -> u64 {
        let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
        // SAFETY: a valid descriptor; integers only.
        let r = unsafe { libc::fallocate(f.as_raw_fd(), libc::FALLOC_FL_KEEP_SIZE, 0, bytes) };
        assert_eq!(r, 0, "fallocate: {}", io::Error::last_os_error());
        std::fs::metadata(path).unwrap().blocks()
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn blocks_a_draft_reserved_past_the_ends_are_given_back() {
        let dir = tempfile::tempdir().unwrap();
        let d = db(dir.path());
        std::fs::write(&d.db, b"SQLite format 3\0 and its pages").unwrap();
        let journal = dir.path().join("rw.db-journal");
        std::fs::write(&journal, b"j").unwrap();
        let sweep = DraftSweep::before(&d).unwrap();
        assert!(
            reserve_past_end(&d.db, 1 << 20) >= 2048,
            "the reservation took"
        );
        assert!(reserve_past_end(&journal, 1 << 20) >= 2048);
        sweep.after();
        for (p, content) in [
            (&d.db, &b"SQLite format 3\0 and its pages"[..]),
            (&journal, b"j"),
        ] {
            let m = std::fs::metadata(p).unwrap();
            assert!(
                m.blocks() <= 8,
                "{}: {} blocks left",
                p.display(),
                m.blocks()
            );
            assert_eq!(std::fs::read(p).unwrap(), content, "the data is as it was");
        }
    }

    /// While a connection holds one of SQLite's lock bytes, nothing is cut:
    /// it may be writing.
    #[cfg(target_os = "linux")]
    #[test]
    fn nothing_is_given_back_while_a_connection_holds_a_sqlite_lock() {
        let dir = tempfile::tempdir().unwrap();
        let d = db(dir.path());
        std::fs::write(&d.db, b"data").unwrap();
        let sweep = DraftSweep::before(&d).unwrap();
        let reserved = reserve_past_end(&d.db, 1 << 20);
        // A reader's shared lock on the first shared byte, from another
        // open file description (as another process's would be).
        let reader = std::fs::File::open(&d.db).unwrap();
        let lock = libc::flock {
            l_type: libc::F_RDLCK as libc::c_short,
            l_whence: libc::SEEK_SET as libc::c_short,
            l_start: SQLITE_LOCKS.0 + 2,
            l_len: 1,
            l_pid: 0,
        };
        assert_eq!(
            // SAFETY: a valid descriptor and a lock description we own.
            unsafe { libc::fcntl(reader.as_raw_fd(), libc::F_OFD_SETLK, &lock) },
            0
        );
        sweep.after();
        assert_eq!(std::fs::metadata(&d.db).unwrap().blocks(), reserved);
        drop(reader);
        let again = DraftSweep::before(&d).unwrap();
        again.after();
        assert!(std::fs::metadata(&d.db).unwrap().blocks() <= 8);
    }

    #[test]
    fn only_what_the_run_made_under_a_companion_name_goes() {
        assert!(companion_needs_removal(false, true, true));
        assert!(
            !companion_needs_removal(true, true, true),
            "a plain file stays"
        );
        assert!(!companion_needs_removal(false, false, true), "not ours");
        assert!(
            !companion_needs_removal(false, true, false),
            "older than the run"
        );
    }
}
