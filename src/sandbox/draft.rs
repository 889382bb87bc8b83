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
//! the run made that are not the database's companions. It removes links,
//! folders and pipes the run made too, so those are held twice (Landlock
//! refuses making them; this removes them should Landlock be off).
//!
//! Only entries that did not exist before the run, belong to the server's
//! user, (for regular files) have one link, and changed no earlier than the
//! run started are removed, so a file the owner makes in that folder while
//! a draft runs is left alone unless it matches all of that.

use std::collections::HashSet;
use std::os::unix::fs::{DirEntryExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::sandbox::policy::DraftDb;

/// The folder as it was when the run started.
#[derive(Debug)]
pub struct DraftSweep {
    folder: PathBuf,
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

impl DraftSweep {
    /// Note the folder's entries (names and inodes) before the run.
    pub fn before(draft: &DraftDb) -> std::io::Result<DraftSweep> {
        use std::os::unix::ffi::OsStrExt;
        let started = SystemTime::now();
        let mut before = HashSet::new();
        for e in std::fs::read_dir(&draft.folder)? {
            let e = e?;
            before.insert((e.file_name().as_bytes().to_vec(), e.ino()));
        }
        Ok(DraftSweep {
            folder: draft.folder.clone(),
            keep: draft.writable_names(),
            before,
            started,
        })
    }

    /// Remove what the run made besides the database's companions; returns
    /// how many files went. Never fails: a file that can't be looked at or
    /// removed stays.
    pub fn after(&self) -> usize {
        use std::os::unix::ffi::OsStrExt;
        // SAFETY: geteuid can't fail.
        let uid = unsafe { libc::geteuid() };
        // A second of slack: file times have the file system's resolution.
        let since = self
            .started
            .checked_sub(std::time::Duration::from_secs(1))
            .unwrap_or(self.started);
        let Ok(entries) = std::fs::read_dir(&self.folder) else {
            return 0;
        };
        let mut removed = 0;
        for e in entries.flatten() {
            let name = e.file_name();
            let Ok(meta) = std::fs::symlink_metadata(e.path()) else {
                continue;
            };
            let ours = meta.uid() == uid && (!meta.is_file() || meta.nlink() == 1);
            let changed = meta
                .modified()
                .into_iter()
                .chain(
                    std::time::UNIX_EPOCH.checked_add(std::time::Duration::from_secs(
                        u64::try_from(meta.ctime()).unwrap_or(0),
                    )),
                )
                .any(|t| t >= since);
            if is_leftover(
                name.as_bytes(),
                meta.ino(),
                &self.before,
                &self.keep,
                ours,
                changed,
            ) {
                if remove_entry(&self.folder.join(Path::new(&name)), meta.is_dir()) {
                    removed += 1;
                }
            } else if self.keep.iter().any(|k| k.as_bytes() == name.as_bytes()) {
                let path = self.folder.join(Path::new(&name));
                if companion_needs_removal(meta.file_type().is_file(), ours, changed) {
                    // A companion must be a plain file; a link, folder or
                    // pipe under its name is the run's doing.
                    if remove_entry(&path, meta.is_dir()) {
                        removed += 1;
                    }
                } else if meta.is_file() && ours && meta.mode() & 0o111 != 0 {
                    // The database and its companions are data: whatever
                    // asked for an execute bit, none is left on the host.
                    use std::os::unix::fs::PermissionsExt;
                    let _ = std::fs::set_permissions(
                        &path,
                        std::fs::Permissions::from_mode(meta.mode() & 0o7666),
                    );
                }
            }
        }
        removed
    }
}

/// Remove one entry the run left; whether it went. The iterative remover
/// never follows a link inside what it removes and keeps two descriptors
/// however deep a chain is.
fn remove_entry(path: &Path, is_dir: bool) -> bool {
    if is_dir {
        crate::sandbox::tmpdir::try_remove_tree(path).is_ok()
    } else {
        std::fs::remove_file(path).is_ok()
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
        std::fs::create_dir_all(dir.path().join("newdir/deeper")).unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("kept"), b"k").unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("newdir/out")).unwrap();
        assert_eq!(sweep.after(), 4);
        // A link inside a removed folder was removed, not followed.
        assert!(outside.path().join("kept").exists());
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["accounts.yaml", "rw.db", "rw.db-journal"]);
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
    fn a_deep_folder_chain_left_in_the_database_folder_is_removed_safely() {
        let dir = tempfile::tempdir().unwrap();
        let d = db(dir.path());
        std::fs::write(&d.db, b"db").unwrap();
        let sweep = DraftSweep::before(&d).unwrap();
        let p = dir.path().join("chain");
        std::fs::create_dir(&p).unwrap();
        // Deeper than PATH_MAX allows in one path: built step by step.
        let mut fd = std::fs::File::open(&p).unwrap();
        for _ in 0..1500 {
            use std::os::fd::AsRawFd;
            let name = std::ffi::CString::new("d").unwrap();
            // SAFETY: mkdirat/openat on a descriptor and C string we own.
            unsafe {
                assert_eq!(libc::mkdirat(fd.as_raw_fd(), name.as_ptr(), 0o700), 0);
                let next = libc::openat(
                    fd.as_raw_fd(),
                    name.as_ptr(),
                    libc::O_RDONLY | libc::O_DIRECTORY,
                );
                assert!(next >= 0);
                use std::os::fd::FromRawFd;
                fd = std::fs::File::from_raw_fd(next);
            }
        }
        drop(fd);
        assert_eq!(sweep.after(), 1);
        assert!(!dir.path().join("chain").exists());
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
