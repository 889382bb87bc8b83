//! The pin file on disk: read it, create it so that of two servers
//! starting together only one writes it, or replace it whole after review.
//! A reader never sees a torn file: the text is complete in a file of its
//! own before it takes the pin file's name.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// Why the pin file could not be read or written.
#[derive(Debug)]
pub(crate) enum FileError {
    Read(PathBuf, std::io::Error),
    Parse(PathBuf, String),
    Write(PathBuf, std::io::Error),
}

impl std::fmt::Display for FileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FileError::Read(p, e) => write!(f, "--pin {}: cannot read it: {e}", p.display()),
            FileError::Parse(p, why) => {
                write!(
                    f,
                    "--pin {}: not a pin file this server reads: {why}",
                    p.display()
                )
            }
            FileError::Write(p, e) => write!(f, "--pin {}: cannot write it: {e}", p.display()),
        }
    }
}

impl std::error::Error for FileError {}

/// The pins on file (`None`: there is no file yet).
pub(crate) fn load(path: &Path) -> Result<Option<Value>, FileError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(FileError::Read(path.to_path_buf(), e)),
    };
    let value: Value = serde_json::from_str(&text)
        .map_err(|e| FileError::Parse(path.to_path_buf(), e.to_string()))?;
    match value.get("format").and_then(Value::as_u64) {
        Some(super::FORMAT) => Ok(Some(value)),
        other => Err(FileError::Parse(
            path.to_path_buf(),
            format!(
                "its \"format\" is {}, this server reads format {}",
                other.map_or("missing".to_string(), |n| n.to_string()),
                super::FORMAT
            ),
        )),
    }
}

/// A complete copy of `text` in a new file beside `path`.
fn staged(path: &Path, text: &str) -> Result<PathBuf, FileError> {
    let err = |e| FileError::Write(path.to_path_buf(), e);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let tmp = path.with_file_name(format!(".{name}.{}.{nanos:x}.tmp", std::process::id()));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .map_err(err)?;
    let written = f.write_all(text.as_bytes()).and_then(|()| f.sync_all());
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(err(e));
    }
    Ok(tmp)
}

/// Create the pin file with `text` unless it exists: `false` when another
/// process got there first (its file is the one that counts). The complete
/// file is linked to the name, which fails if the name is taken.
pub(crate) fn create(path: &Path, text: &str) -> Result<bool, FileError> {
    let tmp = staged(path, text)?;
    let linked = std::fs::hard_link(&tmp, path);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(FileError::Write(path.to_path_buf(), e)),
    }
}

/// Replace the pin file with `text` (after the owner reviewed the change).
pub(crate) fn replace(path: &Path, text: &str) -> Result<(), FileError> {
    let tmp = staged(path, text)?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        FileError::Write(path.to_path_buf(), e)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_writer_wins_and_nothing_is_left_beside() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("pins.json");
        assert!(load(&p).unwrap().is_none());
        assert!(create(&p, "{\"format\":1,\"a\":1}").unwrap());
        assert!(!create(&p, "{\"format\":1,\"a\":2}").unwrap());
        assert_eq!(load(&p).unwrap().unwrap()["a"], 1);
        replace(&p, "{\"format\":1,\"a\":3}").unwrap();
        assert_eq!(load(&p).unwrap().unwrap()["a"], 3);
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1);
    }

    #[test]
    fn other_formats_and_other_text_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("pins.json");
        std::fs::write(&p, "{\"format\":2}").unwrap();
        let e = load(&p).unwrap_err().to_string();
        assert!(
            e.ends_with("its \"format\" is 2, this server reads format 1"),
            "{e}"
        );
        std::fs::write(&p, "{}").unwrap();
        assert!(load(&p).unwrap_err().to_string().contains("is missing"));
        std::fs::write(&p, "{\"format\":1").unwrap();
        assert!(matches!(load(&p), Err(FileError::Parse(..))));
    }
}
