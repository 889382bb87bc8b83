//! The start-up scan of the root and the home for what a run must not read
//! when it walks the folder itself: entries that match a protected pattern,
//! and every other name (hard link) of a protected or fixed file.
//!
//! Two passes, so that the order of folders never hides a link: the first
//! walks everything once, noting each protected regular file's device and
//! inode (inside protected folders too); only then, and only when one of
//! those files (or a fixed file) has more than one name, the second walks
//! again and looks up every other regular file by device and inode. Names
//! made after the scan are not in its list.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::DirEntry;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::{FileId, Protected};

/// Each walk stops after this many directory entries ...
pub const WALK_MAX_ENTRIES: usize = 200_000;
/// ... or this many folders deep.
pub const WALK_MAX_DEPTH: usize = 32;

/// What the start-up scan found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scan {
    /// What a run covers with an empty file or folder: entries matching a
    /// protected pattern (not the fixed files, which the backend must still
    /// read; a protected folder holding one is not listed itself, its other
    /// entries are), and other names of protected or fixed files. Sorted,
    /// each once.
    pub hidden: Vec<PathBuf>,
    /// How many entries of `hidden` are there only as another name of a
    /// protected or fixed file.
    pub links: usize,
    /// The folders whose walk stopped at a bound: protected files beyond it
    /// are not hidden, and other names of them are not known.
    pub cut: Vec<PathBuf>,
    /// Device and inode of every protected regular file seen, with the
    /// pattern that protects it.
    pub(super) files: BTreeMap<FileId, String>,
}

/// [`scan_bounded`] with [`WALK_MAX_ENTRIES`] and [`WALK_MAX_DEPTH`].
pub fn scan(folders: &[&Path], list: &Protected) -> Scan {
    scan_bounded(folders, list, WALK_MAX_ENTRIES, WALK_MAX_DEPTH)
}

/// Walk each folder (symlinks neither followed nor listed: what they point
/// at is listed where it lies, if it lies beneath a folder walked).
pub fn scan_bounded(
    folders: &[&Path],
    list: &Protected,
    max_entries: usize,
    max_depth: usize,
) -> Scan {
    let is_fixed = |p: &Path| list.fixed_paths().any(|f| f == p);
    let mut hidden: BTreeSet<PathBuf> = BTreeSet::new();
    let mut files: BTreeMap<FileId, String> = BTreeMap::new();
    let mut cut: Vec<PathBuf> = Vec::new();
    let mut shared = false;

    for folder in folders {
        let stopped = walk(folder, Within::Plain, max_entries, max_depth, |v| {
            let mut note = |pattern: &str| {
                if let Ok(m) = v.entry.metadata() {
                    shared |= m.nlink() > 1;
                    files
                        .entry((m.dev(), m.ino()))
                        .or_insert_with(|| pattern.to_string());
                }
            };
            let pattern = match v.tag {
                Within::Hidden(pattern) => {
                    // Hidden with its folder; noted so its other names are known.
                    if v.is_file {
                        note(pattern);
                    }
                    return match v.is_dir {
                        true => Next::Later(v.tag.clone()),
                        false => Next::Skip,
                    };
                }
                // Beneath a protected folder, everything is protected by it.
                Within::Holder(pattern) => pattern.as_str(),
                // No folder above matched: only the entry's own name can.
                Within::Plain => match list
                    .patterns
                    .iter()
                    .find(|p| p.matches_last(v.components, v.is_dir))
                {
                    Some(p) => p.as_str(),
                    None if v.is_dir => return Next::Enter(Within::Plain),
                    None => return Next::Skip,
                },
            };
            if is_fixed(v.path) {
                return Next::Skip;
            }
            if v.is_file {
                note(pattern);
            }
            // A protected folder holding a fixed file is gone into, and its
            // other entries hidden one by one, so the backend can still read
            // that file. Too deep to go in, the folder goes whole (and the
            // walk says it stopped).
            let holds_fixed = v.is_dir && list.fixed_paths().any(|f| f.starts_with(v.path));
            if holds_fixed && v.can_enter {
                return Next::Enter(Within::Holder(pattern.to_string()));
            }
            hidden.insert(v.path.to_path_buf());
            match v.is_dir {
                true => Next::Later(Within::Hidden(pattern.to_string())),
                false => Next::Skip,
            }
        });
        if stopped {
            cut.push(folder.to_path_buf());
        }
    }

    let mut targets: BTreeSet<FileId> = files.keys().copied().collect();
    for f in &list.fixed_files {
        if let Ok(m) = std::fs::metadata(&f.path) {
            if m.is_file() {
                shared |= m.nlink() > 1;
                targets.insert((m.dev(), m.ino()));
            }
        }
    }

    // Only a file with more than one name can have another name here. What
    // the first pass hid (or left to the backend) is passed over with all
    // beneath it, so no name is matched against the patterns twice.
    let mut links = 0usize;
    if shared {
        for folder in folders {
            let stopped = walk(folder, (), max_entries, max_depth, |v| {
                if hidden.contains(v.path) || is_fixed(v.path) {
                    return Next::Skip;
                }
                if v.is_dir {
                    return Next::Enter(());
                }
                let other_name = v.is_file
                    && v.entry
                        .metadata()
                        .is_ok_and(|m| m.nlink() > 1 && targets.contains(&(m.dev(), m.ino())));
                if other_name && hidden.insert(v.path.to_path_buf()) {
                    links += 1;
                }
                Next::Skip
            });
            if stopped && !cut.iter().any(|c| c == folder) {
                cut.push(folder.to_path_buf());
            }
        }
    }

    Scan {
        hidden: hidden.into_iter().collect(),
        links,
        cut,
        files,
    }
}

/// Where an entry lies, for the first pass.
#[derive(Debug, Clone)]
enum Within {
    /// No folder above it matches a pattern.
    Plain,
    /// In a protected folder that holds a fixed file: listed one by one.
    Holder(String),
    /// In a protected folder hidden whole: only its files' inodes are noted.
    Hidden(String),
}

/// One entry as the walk meets it.
struct Visit<'a, T> {
    entry: &'a DirEntry,
    path: &'a Path,
    /// Its path relative to the folder walked, one name each.
    components: &'a [&'a str],
    is_dir: bool,
    is_file: bool,
    /// What the visitor said when it went into the entry's folder.
    tag: &'a T,
    /// Whether the walk may go into it (it is not at the depth bound).
    can_enter: bool,
}

enum Next<T> {
    Skip,
    /// Go into this folder.
    Enter(T),
    /// Go into this folder once every folder entered with [`Next::Enter`]
    /// has been walked, so that what decides the list gets the entry
    /// budget first.
    Later(T),
}

/// Walk `root` without following symlinks, depth-first and iteratively (so
/// depth costs no stack); `true` when a bound stopped it. Names that are not
/// UTF-8 are passed over, and so is what lies beneath them.
fn walk<T: Clone>(
    root: &Path,
    top: T,
    max_entries: usize,
    max_depth: usize,
    mut visit: impl FnMut(&Visit<'_, T>) -> Next<T>,
) -> bool {
    let mut stopped = false;
    let mut seen = 0usize;
    let mut now: Vec<(PathBuf, Vec<String>, T)> = vec![(root.to_path_buf(), Vec::new(), top)];
    let mut later: Vec<(PathBuf, Vec<String>, T)> = Vec::new();
    while let Some((dir, rel, tag)) = now.pop().or_else(|| later.pop()) {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            seen += 1;
            if seen > max_entries {
                return true;
            }
            let Ok(ft) = entry.file_type() else {
                continue;
            };
            if ft.is_symlink() {
                continue;
            }
            let Some(name) = entry.file_name().to_str().map(str::to_string) else {
                continue;
            };
            let path = entry.path();
            let mut components: Vec<&str> = rel.iter().map(String::as_str).collect();
            components.push(&name);
            let v = Visit {
                entry: &entry,
                path: &path,
                components: &components,
                is_dir: ft.is_dir(),
                is_file: ft.is_file(),
                tag: &tag,
                can_enter: rel.len() + 1 < max_depth,
            };
            let (next, first) = match visit(&v) {
                Next::Skip => continue,
                Next::Enter(t) => (t, true),
                Next::Later(t) => (t, false),
            };
            if !ft.is_dir() {
                continue;
            }
            if !v.can_enter {
                stopped = true;
                continue;
            }
            let mut child = rel.clone();
            child.push(name);
            if first {
                now.push((path, child, next));
            } else {
                later.push((path, child, next));
            }
        }
    }
    stopped
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn rel(root: &Path, v: &[PathBuf]) -> Vec<String> {
        v.iter()
            .map(|x| x.strip_prefix(root).unwrap_or(x).display().to_string())
            .collect()
    }

    fn tree(root: &Path, dirs: &[&str], files: &[&str]) {
        for d in dirs {
            fs::create_dir_all(root.join(d)).unwrap();
        }
        for f in files {
            fs::write(root.join(f), "secret-or-not").unwrap();
        }
    }

    #[test]
    fn a_fixed_file_inside_a_protected_folder_stays_readable() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for d in [".aws/sso/cache", ".aws/cli", ".ssh"] {
            fs::create_dir_all(root.join(d)).unwrap();
        }
        for f in [
            ".aws/accounts.yaml",
            ".aws/credentials",
            ".aws/config",
            ".aws/sso/cache/token.json",
            ".aws/sso/profile.yaml",
            ".ssh/id_ed25519",
        ] {
            fs::write(root.join(f), "x").unwrap();
        }
        let p = Protected::new(
            &[],
            &[
                ("accounts", &root.join(".aws/accounts.yaml")),
                ("profile", &root.join(".aws/sso/profile.yaml")),
            ],
        )
        .unwrap();
        let w = scan(&[&root], &p);
        let rel: Vec<String> = w
            .hidden
            .iter()
            .map(|x| x.strip_prefix(&root).unwrap().display().to_string())
            .collect();
        assert_eq!(
            rel,
            vec![
                ".aws/cli",
                ".aws/config",
                ".aws/credentials",
                ".aws/sso/cache",
                ".ssh"
            ]
        );
        assert!(w.cut.is_empty());
        // Too shallow to go into `.aws/sso`: hidden whole, and the walk says it stopped.
        let w = scan_bounded(&[&root], &p, 10_000, 2);
        assert!(w.hidden.contains(&root.join(".aws/sso")), "{:?}", w.hidden);
        assert_eq!(w.cut, vec![root.clone()]);
    }

    #[test]
    fn the_scan_lists_matches_without_following_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join(".env"), "X=1").unwrap();
        for d in ["app/config", ".ssh", "deep/a/b/c", "plain"] {
            fs::create_dir_all(root.join(d)).unwrap();
        }
        for f in [
            "app/.env",
            "app/config/server.pem",
            ".ssh/id_ed25519",
            "deep/a/b/c/credentials.json",
            "plain/notes.txt",
            "accounts.yaml",
        ] {
            fs::write(root.join(f), "x").unwrap();
        }
        // A link to a folder outside: not followed, its `.env` never listed.
        std::os::unix::fs::symlink(outside.path(), root.join("linked")).unwrap();
        // A link named like a protected file: nothing to hide behind it.
        std::os::unix::fs::symlink(root.join("plain/notes.txt"), root.join("id_rsa")).unwrap();
        let p = Protected::new(&[], &[("accounts", &root.join("accounts.yaml"))]).unwrap();
        let rel = |v: Vec<PathBuf>| -> Vec<String> {
            v.iter()
                .map(|x| x.strip_prefix(&root).unwrap().display().to_string())
                .collect()
        };
        assert_eq!(
            rel(scan(&[&root], &p).hidden),
            vec![
                ".ssh",
                "app/.env",
                "app/config/server.pem",
                "deep/a/b/c/credentials.json"
            ]
        );

        // A fixed file that matches a pattern stays readable: it is not listed.
        fs::write(root.join("plain/.env"), "x").unwrap();
        let p = Protected::new(&[], &[("profile", &root.join("plain/.env"))]).unwrap();
        assert!(!rel(scan(&[&root], &p).hidden).contains(&"plain/.env".to_string()));

        // Bounds: too shallow to reach `deep/a/b/c`, too few entries to see everything.
        let w = scan_bounded(&[&root], &p, 10_000, 3);
        assert_eq!(w.cut, vec![root.clone()]);
        assert!(!rel(w.hidden).contains(&"deep/a/b/c/credentials.json".to_string()));
        let w = scan_bounded(&[&root], &p, 2, 32);
        assert_eq!(w.cut, vec![root.clone()]);
        assert!(w.hidden.len() <= 2);
    }

    /// Other names of protected files are hidden wherever they sort: before
    /// or after the protected name, in another folder, or in the other
    /// folder scanned; a file inside a protected folder counts too.
    #[test]
    fn other_names_of_protected_files_are_hidden_whatever_the_order() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let (root, home) = (base.join("root"), base.join("home"));
        tree(
            &root,
            &["m/.aws", "a", "z"],
            &["m/.env", "m/.aws/credentials", "m/notes.txt"],
        );
        tree(&home, &[".ssh"], &[".ssh/id_ed25519"]);
        for (from, to) in [
            ("m/.env", "a/0-first.txt"),
            ("m/.env", "z/zz-last.txt"),
            ("m/.aws/credentials", "a/aws-copy"),
            (".ssh/id_ed25519", "z/key-from-home"),
        ] {
            let src = if from.starts_with(".ssh") {
                &home
            } else {
                &root
            };
            fs::hard_link(src.join(from), root.join(to)).unwrap();
        }
        // From the root into the home, too.
        fs::hard_link(root.join("m/.env"), home.join("env-in-home")).unwrap();
        // Two names of an ordinary file stay readable.
        fs::hard_link(root.join("m/notes.txt"), root.join("z/notes-again.txt")).unwrap();
        let p = Protected::new(&[], &[]).unwrap();
        let s = scan(&[&root, &home], &p);
        assert_eq!(
            rel(&base, &s.hidden),
            vec![
                "home/.ssh",
                "home/env-in-home",
                "root/a/0-first.txt",
                "root/a/aws-copy",
                "root/m/.aws",
                "root/m/.env",
                "root/z/key-from-home",
                "root/z/zz-last.txt",
            ]
        );
        assert_eq!(s.links, 5);
        assert!(s.cut.is_empty());
        // Each protected file once, by the pattern that protects it.
        let id = |p: &Path| {
            let m = fs::metadata(p).unwrap();
            (m.dev(), m.ino())
        };
        let mut want = BTreeMap::new();
        want.insert(id(&root.join("m/.env")), ".env".to_string());
        want.insert(id(&root.join("m/.aws/credentials")), ".aws/".to_string());
        want.insert(id(&home.join(".ssh/id_ed25519")), ".ssh/".to_string());
        assert_eq!(s.files, want);
    }

    /// A fixed file stays readable under its own names, but another name of
    /// it is hidden; without a second name nothing extra is hidden.
    #[test]
    fn another_name_of_a_fixed_file_is_hidden_the_file_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        tree(&root, &["sub"], &["accounts.yaml", "plain.txt"]);
        let p = Protected::new(&[], &[("accounts", &root.join("accounts.yaml"))]).unwrap();
        let s = scan(&[&root], &p);
        assert_eq!(s, Scan::default());
        fs::hard_link(root.join("accounts.yaml"), root.join("sub/acc.txt")).unwrap();
        let s = scan(&[&root], &p);
        assert_eq!(rel(&root, &s.hidden), vec!["sub/acc.txt"]);
        assert_eq!(s.links, 1);
        assert!(s.files.is_empty(), "fixed files are not pattern files");
    }

    /// The budget goes to the list first: entries inside protected folders
    /// (looked at only for their inodes) are walked after everything else,
    /// whatever order the folder lists its entries in.
    #[test]
    fn inside_protected_folders_is_walked_last() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let mut files: Vec<String> = vec!["z/.env".to_string()];
        for v in 0..20 {
            files.extend((0..5).map(|k| format!("vault{v}/k{k}")));
        }
        let dirs: Vec<String> = (0..20).map(|v| format!("vault{v}")).collect();
        let mut dirs: Vec<&str> = dirs.iter().map(String::as_str).collect();
        dirs.push("z");
        let files: Vec<&str> = files.iter().map(String::as_str).collect();
        tree(&root, &dirs, &files);
        let p = Protected::new(&["vault*/".to_string()], &[]).unwrap();
        // 21 entries in the root and `z/.env` decide the list; the 100
        // inside the vaults only what is known of their files.
        let s = scan_bounded(&[&root], &p, 22, 32);
        let mut want: Vec<String> = (0..20).map(|v| format!("vault{v}")).collect();
        want.push("z/.env".to_string());
        want.sort();
        assert_eq!(rel(&root, &s.hidden), want);
        assert_eq!(s.cut, vec![root.clone()]);
        assert_eq!(s.files.len(), 1, "{:?}", s.files);
        let s = scan_bounded(&[&root], &p, 122, 32);
        assert!(s.cut.is_empty());
        assert_eq!(s.files.len(), 101);
        let s = scan_bounded(&[&root], &p, 121, 32);
        assert_eq!(s.cut, vec![root.clone()]);
        assert_eq!(s.files.len(), 100);
    }

    /// The depth bound, at its exact value, for other names too.
    #[test]
    fn other_names_beyond_the_depth_bound_are_not_found_and_the_scan_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        tree(&root, &["a/b/c"], &[".env"]);
        fs::hard_link(root.join(".env"), root.join("a/b/at-depth-3")).unwrap();
        fs::hard_link(root.join(".env"), root.join("a/b/c/at-depth-4")).unwrap();
        let p = Protected::new(&[], &[]).unwrap();
        let s = scan_bounded(&[&root], &p, 10_000, 3);
        assert_eq!(rel(&root, &s.hidden), vec![".env", "a/b/at-depth-3"]);
        assert_eq!(s.cut, vec![root.clone()]);
        let s = scan_bounded(&[&root], &p, 10_000, 4);
        assert_eq!(
            rel(&root, &s.hidden),
            vec![".env", "a/b/at-depth-3", "a/b/c/at-depth-4"]
        );
        assert!(s.cut.is_empty());
    }

    /// A protected folder at the depth bound is hidden whole, but what is
    /// inside is not known, so the scan says it stopped.
    #[test]
    fn a_protected_folder_at_the_depth_bound_is_hidden_and_reported() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        tree(&root, &["a/.ssh"], &["a/.ssh/id_rsa"]);
        let p = Protected::new(&[], &[]).unwrap();
        let s = scan_bounded(&[&root], &p, 10_000, 2);
        assert_eq!(rel(&root, &s.hidden), vec!["a/.ssh"]);
        assert_eq!(s.cut, vec![root.clone()]);
        assert!(s.files.is_empty());
        let s = scan_bounded(&[&root], &p, 10_000, 3);
        assert_eq!(rel(&root, &s.hidden), vec!["a/.ssh"]);
        assert!(s.cut.is_empty());
        assert_eq!(s.files.len(), 1);
    }

    /// The entry bound at its exact value: one protected file and one other
    /// name are two entries.
    #[test]
    fn the_entry_bound_at_its_exact_value() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        tree(&root, &[], &[".env"]);
        fs::hard_link(root.join(".env"), root.join("copy")).unwrap();
        let p = Protected::new(&[], &[]).unwrap();
        let s = scan_bounded(&[&root], &p, 2, 32);
        assert_eq!(rel(&root, &s.hidden), vec![".env", "copy"]);
        assert!(s.cut.is_empty());
        let s = scan_bounded(&[&root], &p, 1, 32);
        assert_eq!(s.cut, vec![root.clone()]);
    }
}
