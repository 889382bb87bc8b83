//! Appending a line to the shared log file: opened by path with
//! `O_APPEND`, reopened when the path names another file than the one held
//! (rotation), never truncated. Under an exclusive `flock`, the hash of the
//! file's last line is read and the new line written with one write call,
//! so servers sharing a file keep one chain in file order.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::chain::{sha256_hex, GENESIS_PREV};

/// What the line before the one being appended is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Before {
    /// The file is empty: a genesis record comes first, naming the last
    /// line of the file before (this server's last line there), if known.
    Empty { follows: Option<String> },
    /// The hash of the file's last line.
    Line(String),
    /// The file ends in a line without its line feed (a writer died
    /// mid-line): the new line starts on a line of its own and chains to
    /// the torn one.
    Torn(String),
}

pub(crate) struct AuditFile {
    path: PathBuf,
    file: Option<(File, u64, u64)>,
    sync: bool,
    /// The hash of the last line this server wrote or read in the file it
    /// holds: what a new file after rotation follows.
    last: Option<String>,
}

/// Holds an exclusive `flock` until dropped.
struct Locked<'a>(&'a File);

impl<'a> Locked<'a> {
    fn new(file: &'a File) -> io::Result<Self> {
        loop {
            // SAFETY: flock on a descriptor this File owns; no memory is shared.
            let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
            if rc == 0 {
                return Ok(Locked(file));
            }
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::Interrupted {
                return Err(err);
            }
        }
    }
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        // SAFETY: as above; unlocking a held lock on an owned descriptor.
        unsafe { libc::flock(self.0.as_raw_fd(), libc::LOCK_UN) };
    }
}

impl AuditFile {
    /// Open (creating, mode 0600) the log at `path`.
    pub(crate) fn open(path: &Path, sync: bool) -> io::Result<AuditFile> {
        let mut f = AuditFile {
            path: path.to_path_buf(),
            file: None,
            sync,
            last: None,
        };
        f.reopen()?;
        Ok(f)
    }

    fn reopen(&mut self) -> io::Result<()> {
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .mode(0o600)
            .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
            .open(&self.path)?;
        let m = file.metadata()?;
        if !m.is_file() {
            return Err(io::Error::other("the audit log is not a regular file"));
        }
        self.file = Some((file, m.dev(), m.ino()));
        Ok(())
    }

    /// Is the file held still the one the path names?
    fn current(&self) -> bool {
        match (&self.file, std::fs::symlink_metadata(&self.path)) {
            (Some((_, dev, ino)), Ok(m)) => m.dev() == *dev && m.ino() == *ino,
            _ => false,
        }
    }

    /// Append the lines `make` builds from what comes before, as one
    /// write under the lock. Returns the bytes written.
    pub(crate) fn append(
        &mut self,
        make: impl FnOnce(&Before) -> Vec<String>,
    ) -> io::Result<usize> {
        // A rename between the check and the lock is caught after locking.
        for _ in 0..8 {
            if !self.current() {
                if let Some((old, _, _)) = &self.file {
                    // Rotated: the new file follows the old one's last
                    // line, read under its lock (a write another server
                    // began before the rename is in it by then).
                    let _lock = Locked::new(old)?;
                    if let Some((line, _)) = last_line(old)? {
                        self.last = Some(sha256_hex(&line));
                    }
                }
                self.reopen()?;
            }
            let Some((file, _, _)) = &self.file else {
                continue;
            };
            let _lock = Locked::new(file)?;
            if !self.current() {
                continue;
            }
            let before = match last_line(file)? {
                None => Before::Empty {
                    follows: self.last.clone(),
                },
                Some((line, true)) => Before::Line(sha256_hex(&line)),
                Some((line, false)) => Before::Torn(sha256_hex(&line)),
            };
            let lines = make(&before);
            let mut buf = Vec::new();
            if matches!(before, Before::Torn(_)) {
                buf.push(b'\n');
            }
            for l in &lines {
                buf.extend_from_slice(l.as_bytes());
                buf.push(b'\n');
            }
            let mut out: &File = file;
            out.write_all(&buf)?;
            if self.sync {
                file.sync_data()?;
            }
            self.last = lines.last().map(|l| sha256_hex(l.as_bytes()));
            return Ok(buf.len());
        }
        Err(io::Error::other(
            "the audit log kept being replaced while written",
        ))
    }
}

/// The file's last line (without its line feed) and whether it ended with
/// one; `None` for an empty file. Reads backwards from the end only as far
/// as the last line goes, so the cost does not grow with the file.
fn last_line(file: &File) -> io::Result<Option<(Vec<u8>, bool)>> {
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(None);
    }
    const CHUNK: u64 = 8192;
    let mut end = len;
    let mut tail: Vec<u8> = Vec::new();
    let mut complete = None;
    loop {
        let start = end.saturating_sub(CHUNK);
        let mut chunk = vec![0u8; (end - start) as usize];
        file.read_exact_at(&mut chunk, start)?;
        chunk.extend_from_slice(&tail);
        tail = chunk;
        let ends_lf = *complete.get_or_insert(tail.last() == Some(&b'\n'));
        let body_end = if ends_lf { tail.len() - 1 } else { tail.len() };
        if let Some(pos) = memchr::memrchr(b'\n', &tail[..body_end]) {
            return Ok(Some((tail[pos + 1..body_end].to_vec(), ends_lf)));
        }
        if start == 0 {
            return Ok(Some((tail[..body_end].to_vec(), ends_lf)));
        }
        end = start;
    }
}

/// `prev` for a file's first record when nothing before it is known.
pub(crate) fn genesis_prev(follows: Option<&String>) -> String {
    follows.cloned().unwrap_or_else(|| GENESIS_PREV.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(path: &Path) -> Vec<String> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(String::from)
            .collect()
    }

    #[test]
    fn the_last_line_is_found_across_chunk_boundaries() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a");
        let long = "x".repeat(20_000);
        std::fs::write(&p, format!("first\n{long}\n")).unwrap();
        let f = File::open(&p).unwrap();
        assert_eq!(
            last_line(&f).unwrap(),
            Some((long.clone().into_bytes(), true))
        );
        std::fs::write(&p, format!("first\n{long}")).unwrap();
        let f = File::open(&p).unwrap();
        assert_eq!(last_line(&f).unwrap(), Some((long.into_bytes(), false)));
        std::fs::write(&p, "only\n").unwrap();
        let f = File::open(&p).unwrap();
        assert_eq!(last_line(&f).unwrap(), Some((b"only".to_vec(), true)));
        std::fs::write(&p, "").unwrap();
        let f = File::open(&p).unwrap();
        assert_eq!(last_line(&f).unwrap(), None);
    }

    #[test]
    fn appends_chain_and_a_rotated_file_follows_the_old_one() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("audit.log");
        let mut f = AuditFile::open(&p, false).unwrap();
        let mut seen = Vec::new();
        for n in 0..2 {
            f.append(|b| {
                seen.push(b.clone());
                vec![format!("line{n}")]
            })
            .unwrap();
        }
        assert_eq!(seen[0], Before::Empty { follows: None });
        assert_eq!(seen[1], Before::Line(sha256_hex(b"line0")));
        std::fs::rename(&p, dir.path().join("audit.log.1")).unwrap();
        f.append(|b| {
            seen.push(b.clone());
            vec!["line2".into()]
        })
        .unwrap();
        assert_eq!(
            seen[2],
            Before::Empty {
                follows: Some(sha256_hex(b"line1"))
            }
        );
        assert_eq!(lines(&p), ["line2"]);
        assert_eq!(lines(&dir.path().join("audit.log.1")), ["line0", "line1"]);
    }

    #[test]
    fn a_torn_last_line_is_chained_to_and_never_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("audit.log");
        std::fs::write(&p, "whole\n{\"torn").unwrap();
        let mut f = AuditFile::open(&p, true).unwrap();
        let mut seen = None;
        f.append(|b| {
            seen = Some(b.clone());
            vec!["next".into()]
        })
        .unwrap();
        assert_eq!(seen, Some(Before::Torn(sha256_hex(b"{\"torn"))));
        assert_eq!(lines(&p), ["whole", "{\"torn", "next"]);
    }
}
