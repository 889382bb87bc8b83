//! Masks that survive the owner's own saves. A protected file is hidden in
//! a run by a bind mount over its dentry, made when a spare builds its
//! minimal root, which may be hours before the call it serves. When the
//! owner replaces that file (an editor's atomic save renames a new file
//! over it; a delete and re-create; `.aws/` moved aside and made again),
//! the kernel detaches the mount in every namespace, and the spare would
//! show the new file through the root's read-only bind.
//!
//! So the server watches, with inotify, the folder of every masked path
//! for a change to a masked name (and for the folder itself going away),
//! and counts those changes: a zygote remembers the count it was started
//! at, and one started before the latest change is replaced before it
//! serves another run (its runs in flight finish on it). A call costs one
//! non-blocking read of the inotify descriptor. Where a watch cannot be
//! set (the user's inotify watches ran out), the count is instead the
//! device and inode of every masked path, looked at on each call.
//!
//! What remains: a run already going when the owner saves a protected
//! file has lost that file's mask, and can read the new content until it
//! ends (within the call's timeout).

use std::collections::HashMap;
use std::ffi::OsString;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};

/// What names a change to a masked path: a name made, moved in or out,
/// or removed in its folder, or the folder itself removed or moved.
fn watch_flags() -> AddWatchFlags {
    AddWatchFlags::IN_CREATE
        | AddWatchFlags::IN_MOVED_TO
        | AddWatchFlags::IN_MOVED_FROM
        | AddWatchFlags::IN_DELETE
        | AddWatchFlags::IN_DELETE_SELF
        | AddWatchFlags::IN_MOVE_SELF
        | AddWatchFlags::IN_ONLYDIR
        | AddWatchFlags::IN_DONT_FOLLOW
}

/// The masked names of each watched folder.
type Folders = HashMap<PathBuf, Vec<OsString>>;

/// The masked paths grouped by their folder. Pure.
pub(super) fn folders_of(masks: &[PathBuf]) -> Folders {
    let mut out: Folders = HashMap::new();
    for m in masks {
        if let (Some(parent), Some(name)) = (m.parent(), m.file_name()) {
            let names = out.entry(parent.to_path_buf()).or_default();
            if !names.iter().any(|n| n == name) {
                names.push(name.to_os_string());
            }
        }
    }
    out
}

/// Whether one inotify event is a change to a masked path. Pure.
pub(super) fn is_change(mask: AddWatchFlags, name: Option<&OsString>, masked: &[OsString]) -> bool {
    let folder_gone = AddWatchFlags::IN_DELETE_SELF
        | AddWatchFlags::IN_MOVE_SELF
        | AddWatchFlags::IN_IGNORED
        | AddWatchFlags::IN_Q_OVERFLOW;
    if mask.intersects(folder_gone) {
        return true;
    }
    name.is_some_and(|n| masked.iter().any(|m| m == n))
}

enum Watching {
    /// Every folder watched: the count of changes seen.
    Inotify {
        fd: Inotify,
        names: HashMap<WatchDescriptor, Vec<OsString>>,
        changes: u64,
    },
    /// No watch (or not all of them): each masked path's identity.
    Looking { masks: Vec<PathBuf> },
    /// Nothing is masked.
    Nothing,
}

/// The watch over one sandbox's masked paths.
pub(super) struct MaskWatch(Mutex<Watching>);

impl MaskWatch {
    pub(super) fn new(masks: &[PathBuf]) -> MaskWatch {
        if masks.is_empty() {
            return MaskWatch(Mutex::new(Watching::Nothing));
        }
        let watching = match Self::inotify(masks) {
            Some((fd, names)) => Watching::Inotify {
                fd,
                names,
                changes: 0,
            },
            None => Watching::Looking {
                masks: masks.to_vec(),
            },
        };
        MaskWatch(Mutex::new(watching))
    }

    fn inotify(masks: &[PathBuf]) -> Option<(Inotify, HashMap<WatchDescriptor, Vec<OsString>>)> {
        let fd = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC).ok()?;
        let mut names = HashMap::new();
        for (folder, masked) in folders_of(masks) {
            let wd = fd.add_watch(folder.as_path(), watch_flags()).ok()?;
            names.insert(wd, masked);
        }
        Some((fd, names))
    }

    /// Where the masked paths stand now: a number that changes whenever a
    /// masked path may have been replaced since the last look.
    pub(super) fn state(&self) -> u64 {
        let mut w = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match &mut *w {
            Watching::Nothing => 0,
            Watching::Inotify { fd, names, changes } => {
                loop {
                    match fd.read_events() {
                        Ok(events) if !events.is_empty() => {
                            for e in events {
                                let masked = names.get(&e.wd).map(Vec::as_slice).unwrap_or(&[]);
                                if is_change(e.mask, e.name.as_ref(), masked) {
                                    *changes += 1;
                                }
                            }
                        }
                        Ok(_) => break,
                        Err(nix::errno::Errno::EAGAIN) => break,
                        Err(nix::errno::Errno::EINTR) => continue,
                        // A descriptor that can't be read can't vouch for
                        // anything: count a change on every look.
                        Err(_) => {
                            *changes += 1;
                            break;
                        }
                    }
                }
                *changes
            }
            Watching::Looking { masks } => identities(masks),
        }
    }
}

/// A digest of every masked path's device, inode, type and change time,
/// not following a final link (a path that is gone counts as such).
fn identities(masks: &[PathBuf]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for m in masks {
        match std::fs::symlink_metadata(Path::new(m)) {
            // The change time too: a file deleted and made again may be
            // given the same inode number.
            Ok(meta) => (
                meta.dev(),
                meta.ino(),
                meta.mode() & libc::S_IFMT,
                meta.ctime(),
                meta.ctime_nsec(),
            )
                .hash(&mut h),
            Err(_) => 0u8.hash(&mut h),
        }
    }
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn masks_are_grouped_by_folder_once_each() {
        let f = folders_of(&[
            PathBuf::from("/r/.env"),
            PathBuf::from("/r/.aws"),
            PathBuf::from("/r/sub/.env.local"),
            PathBuf::from("/r/.env"),
        ]);
        assert_eq!(f.len(), 2);
        assert_eq!(
            f[Path::new("/r")],
            [OsString::from(".env"), OsString::from(".aws")]
        );
        assert_eq!(f[Path::new("/r/sub")], [OsString::from(".env.local")]);
    }

    #[test]
    fn only_masked_names_and_the_folder_itself_count() {
        let masked = [OsString::from(".env")];
        let name = |s: &str| Some(OsString::from(s));
        assert!(is_change(
            AddWatchFlags::IN_MOVED_TO,
            name(".env").as_ref(),
            &masked
        ));
        assert!(is_change(
            AddWatchFlags::IN_DELETE,
            name(".env").as_ref(),
            &masked
        ));
        assert!(!is_change(
            AddWatchFlags::IN_CREATE,
            name(".env.swp").as_ref(),
            &masked
        ));
        assert!(!is_change(AddWatchFlags::IN_CREATE, None, &masked));
        for gone in [
            AddWatchFlags::IN_DELETE_SELF,
            AddWatchFlags::IN_MOVE_SELF,
            AddWatchFlags::IN_IGNORED,
            AddWatchFlags::IN_Q_OVERFLOW,
        ] {
            assert!(is_change(gone, None, &masked), "{gone:?}");
        }
    }

    /// Each way an owner replaces a protected file moves the count, and a
    /// change beside it does not; the same by identities.
    #[test]
    fn an_atomic_save_a_re_creation_and_a_folder_moved_aside_are_seen() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        fs::write(root.join(".env"), "A=1\n").unwrap();
        fs::create_dir(root.join(".aws")).unwrap();
        let masks = vec![root.join(".env"), root.join(".aws")];
        for watch in [
            MaskWatch::new(&masks),
            MaskWatch(Mutex::new(Watching::Looking {
                masks: masks.clone(),
            })),
        ] {
            let mut last = watch.state();
            assert_eq!(watch.state(), last, "nothing happened");
            fs::write(root.join("notes.txt"), "beside\n").unwrap();
            assert_eq!(watch.state(), last, "a file beside the masks");
            let mut changed = |what: &str, act: &dyn Fn()| {
                act();
                let now = watch.state();
                assert_ne!(now, last, "{what}");
                last = now;
            };
            changed("an editor's save", &|| {
                fs::write(root.join(".env.new"), "A=2\n").unwrap();
                fs::rename(root.join(".env.new"), root.join(".env")).unwrap();
            });
            changed("deleted and made again", &|| {
                fs::remove_file(root.join(".env")).unwrap();
                fs::write(root.join(".env"), "A=3\n").unwrap();
            });
            changed("a folder moved aside and made again", &|| {
                fs::rename(root.join(".aws"), root.join(".aws-old")).unwrap();
                fs::create_dir(root.join(".aws")).unwrap();
            });
            fs::remove_dir(root.join(".aws-old")).unwrap();
            let _ = watch.state();
        }
        assert!(matches!(
            *MaskWatch::new(&masks).0.lock().unwrap(),
            Watching::Inotify { .. }
        ));
        assert_eq!(MaskWatch::new(&[]).state(), 0);
    }
}
