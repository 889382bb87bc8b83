//! Path spellings as the sandbox matches them: the long `/private` and
//! data-volume spellings brought to one, the case a folder stores, and a
//! path resolved one component at a time with every symlink it crosses.

use std::path::{Component, Path, PathBuf};

/// macOS spells several system folders through `/private`, and every
/// folder of the data volume also through `/System/Volumes/Data` (the
/// firmlinks that join the read-only system volume to it); the sandbox
/// matches the spelling a path resolves to, the `/private` one and the
/// short one under `/`, so both long spellings are brought to it. (Case is
/// not folded here: APFS compares names without case by default, but the
/// sandbox matches the case stored on disk, which only the file system can
/// say; discovery keeps the stored spelling, see [`stored_spelling`].)
pub fn canonical(path: &Path) -> PathBuf {
    if let Ok(rest) = path.strip_prefix("/System/Volumes/Data") {
        return canonical(&Path::new("/").join(rest));
    }
    for short in ["/tmp", "/var", "/etc"] {
        if let Ok(rest) = path.strip_prefix(short) {
            return Path::new("/private")
                .join(short.trim_start_matches('/'))
                .join(rest);
        }
    }
    path.to_path_buf()
}

/// The name a folder stores for `part` when it was looked up in another
/// case: `None` when `part` is stored as given, or when no single stored
/// name matches it without regard to ASCII case. Pure.
pub fn stored_spelling(
    names: &[std::ffi::OsString],
    part: &std::ffi::OsStr,
) -> Option<std::ffi::OsString> {
    if names.iter().any(|n| n == part) {
        return None;
    }
    let want = part.as_encoded_bytes();
    let mut matches = names
        .iter()
        .filter(|n| n.as_encoded_bytes().eq_ignore_ascii_case(want));
    let first = matches.next()?;
    matches.next().is_none().then(|| first.clone())
}

/// Resolve `path` like the kernel does, one component at a time, and record
/// the literal path of every symlink crossed. At most 40 links.
pub fn resolve_recording(path: &Path) -> std::io::Result<(PathBuf, Vec<PathBuf>)> {
    let mut hops = Vec::new();
    let mut todo: std::collections::VecDeque<std::ffi::OsString> =
        std::collections::VecDeque::new();
    let push_front = |todo: &mut std::collections::VecDeque<std::ffi::OsString>, p: &Path| {
        let parts: Vec<std::ffi::OsString> = p
            .components()
            .filter_map(|c| match c {
                Component::Normal(n) => Some(n.to_os_string()),
                Component::ParentDir => Some("..".into()),
                _ => None,
            })
            .collect();
        for part in parts.into_iter().rev() {
            todo.push_front(part);
        }
    };
    if !path.is_absolute() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not an absolute path",
        ));
    }
    push_front(&mut todo, path);
    let mut cur = PathBuf::from("/");
    let mut links = 0;
    while let Some(part) = todo.pop_front() {
        if part == ".." {
            cur.pop();
            continue;
        }
        let mut next = cur.join(&part);
        let meta = std::fs::symlink_metadata(&next)?;
        // APFS finds `/Users/Ann` for `/Users/ann` by default, but the
        // sandbox matches the name as stored: keep the stored spelling.
        if cfg!(target_os = "macos") {
            if let Ok(entries) = std::fs::read_dir(&cur) {
                let names: Vec<std::ffi::OsString> =
                    entries.flatten().map(|e| e.file_name()).collect();
                if let Some(stored) = stored_spelling(&names, &part) {
                    next = cur.join(stored);
                }
            }
        }
        if meta.file_type().is_symlink() {
            links += 1;
            if links > 40 {
                return Err(std::io::Error::other("too many symlinks"));
            }
            let target = std::fs::read_link(&next)?;
            if !hops.contains(&next) {
                hops.push(next.clone());
            }
            if target.is_absolute() {
                cur = PathBuf::from("/");
            }
            push_front(&mut todo, &target);
        } else {
            cur = next;
        }
    }
    Ok((cur, hops))
}
