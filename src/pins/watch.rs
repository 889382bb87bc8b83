//! The backend's file, re-identified before each call: one `stat` of the
//! path, compared with the identity of the file last hashed (device,
//! inode, size, mtime and ctime); only when that changed is the file
//! opened, its identity taken from the open descriptor, and its bytes
//! hashed, so the digest belongs to the very file whose identity is kept.
//! That descriptor is kept: with `--pin` each run executes it, not the
//! path, so the file run is the very one whose bytes were checked.

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::audit::chain::sha256_hex;
use crate::error::{ErrorCode, ToolError};

/// What names one version of a file: a change of content, or another
/// file put in its place, changes at least one of these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Identity {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Identity {
    fn of(m: &std::fs::Metadata) -> Identity {
        Identity {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        }
    }
}

/// The identity and digest of the file at `path`, both read through one
/// open descriptor (read-only, close-on-exec), which is returned with them.
fn identify(path: &Path) -> std::io::Result<(Identity, String, File)> {
    use std::io::Read;
    let mut f = File::open(path)?;
    let identity = Identity::of(&f.metadata()?);
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes)?;
    Ok((identity, sha256_hex(&bytes), f))
}

struct State {
    identity: Identity,
    sha256: String,
    /// The descriptor `identity` and `sha256` were read through.
    file: Arc<File>,
    /// The digest last reported as changed, so each change is said once.
    reported: Option<String>,
}

/// The backend as checked at start, and what each call must find.
pub(crate) struct Watch {
    path: PathBuf,
    /// The digest the backend must have: the pinned one, or without
    /// `--pin` the one it had at start.
    expected: String,
    /// Refuse calls when the backend differs (`--pin`, refuse mode).
    refuse: bool,
    /// `--pin` was given: runs execute the descriptor that was hashed.
    pinned: bool,
    state: Mutex<State>,
}

impl Watch {
    /// The backend at `path` as it is now.
    pub(crate) fn start(path: &Path) -> std::io::Result<Watch> {
        let (identity, sha256, file) = identify(path)?;
        Ok(Watch {
            path: path.to_path_buf(),
            expected: sha256.clone(),
            refuse: false,
            pinned: false,
            state: Mutex::new(State {
                identity,
                sha256,
                file: Arc::new(file),
                reported: None,
            }),
        })
    }

    /// The descriptor the current digest was read through.
    pub(crate) fn file(&self) -> Arc<File> {
        Arc::clone(&self.lock().file)
    }

    /// The backend's digest at start.
    pub(crate) fn start_sha256(&self) -> String {
        self.lock().sha256.clone()
    }

    /// From now on the backend must have the digest `pinned`; calls are
    /// refused when it does not, if `refuse`.
    pub(crate) fn pin(&mut self, pinned: &str, refuse: bool) {
        self.expected = pinned.to_string();
        self.refuse = refuse;
        self.pinned = true;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Before a call: the backend is the pinned one (or may be served
    /// anyway), else the error to answer with. A change is logged once.
    /// With `--pin`, the descriptor the digest was read through, for the
    /// run to execute (`None`: without `--pin`, the run executes the path).
    pub(crate) fn check(&self) -> Result<Option<Arc<File>>, ToolError> {
        let now = std::fs::metadata(&self.path).map(|m| Identity::of(&m));
        let mut state = self.lock();
        if now.as_ref().ok() != Some(&state.identity) {
            match identify(&self.path) {
                Ok((identity, sha256, file)) => {
                    state.identity = identity;
                    state.sha256 = sha256;
                    state.file = Arc::new(file);
                }
                Err(e) => return self.unreadable(&e),
            }
        }
        let exe = self.pinned.then(|| Arc::clone(&state.file));
        if state.sha256 == self.expected {
            return Ok(exe);
        }
        if state.reported.as_deref() != Some(state.sha256.as_str()) {
            crate::log::line(format!(
                "pins: backend changed: {}: sha256: \"{}\" -> \"{}\"; {}",
                self.path.display(),
                self.expected,
                state.sha256,
                if self.refuse {
                    "its calls are refused (backend_changed) until it matches the pins again or they are updated"
                } else {
                    "serving goes on (said once per change)"
                }
            ));
            state.reported = Some(state.sha256.clone());
        }
        if self.refuse {
            return Err(refusal());
        }
        Ok(exe)
    }

    /// The backend could not be opened or read: refused with `--pin` in
    /// refuse mode; otherwise it runs by its path, as nothing was hashed.
    fn unreadable(&self, e: &std::io::Error) -> Result<Option<Arc<File>>, ToolError> {
        crate::log::line(format!(
            "pins: the backend {} cannot be read to check it: {e}",
            self.path.display()
        ));
        if self.refuse {
            return Err(refusal());
        }
        Ok(None)
    }
}

fn refusal() -> ToolError {
    ToolError::new(
        ErrorCode::BackendChanged,
        "The server's backend program was changed since its owner approved it, so nothing ran; \
         report it to the server's owner.",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Seek;

    #[test]
    fn a_changed_file_is_refused_only_when_pinned_to_refuse() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("backend");
        std::fs::write(&p, "one").unwrap();
        let mut w = Watch::start(&p).unwrap();
        assert_eq!(w.start_sha256(), sha256_hex(b"one"));
        assert!(w.check().is_ok());
        std::fs::write(&p, "two").unwrap();
        assert!(w.check().is_ok(), "without pins a change is only logged");
        w.pin(&sha256_hex(b"one"), true);
        let e = w.check().unwrap_err();
        assert_eq!(e.code(), "backend_changed");
        // Another file with the pinned bytes, put in its place: served.
        let q = dir.path().join("new");
        std::fs::write(&q, "one").unwrap();
        std::fs::rename(&q, &p).unwrap();
        assert!(w.check().is_ok());
        std::fs::remove_file(&p).unwrap();
        assert_eq!(w.check().unwrap_err().code(), "backend_changed");
    }

    fn inode(f: &File) -> u64 {
        f.metadata().unwrap().ino()
    }

    #[test]
    fn only_pins_hand_out_the_descriptor_that_was_hashed() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("backend");
        std::fs::write(&p, "one").unwrap();
        let first = std::fs::metadata(&p).unwrap().ino();
        let mut w = Watch::start(&p).unwrap();
        assert!(w.check().unwrap().is_none(), "without --pin the path runs");
        w.pin(&sha256_hex(b"one"), true);
        let exe = w.check().unwrap().unwrap();
        assert_eq!(inode(&exe), first);
        // Read to its end to hash it: the very open file, not a new one.
        assert_eq!((&*exe).stream_position().unwrap(), 3);
        // Another file with the pinned bytes: its own descriptor from now on.
        let q = dir.path().join("new");
        std::fs::write(&q, "one").unwrap();
        let second = std::fs::metadata(&q).unwrap().ino();
        std::fs::rename(&q, &p).unwrap();
        assert_eq!(inode(&w.check().unwrap().unwrap()), second);
        // Warn mode runs a changed backend: the one just hashed.
        w.pin(&sha256_hex(b"one"), false);
        std::fs::write(dir.path().join("third"), "three").unwrap();
        std::fs::rename(dir.path().join("third"), &p).unwrap();
        let third = std::fs::metadata(&p).unwrap().ino();
        assert_eq!(inode(&w.check().unwrap().unwrap()), third);
    }
}
