//! Files no tool may be pointed at, whatever the root: the backend's fixed
//! accounts, profile and database files, and files whose names say they
//! hold credentials (`.env`, keys, `.ssh/`, ...).
//!
//! A path argument is checked twice: by its spelling before the filesystem
//! is touched (so whether a protected file exists is never revealed), and
//! by the canonical path it resolves to, so a symlink or a `..` detour
//! cannot reach one either. By spelling, a folder-only pattern (`.ssh/`)
//! also refuses the bare folder name, since telling a folder from a file
//! would need the file system. [`protected_under`] lists the matching files
//! beneath a root so that a run can also be kept from reading them when it
//! walks the folder itself; that list is taken once, at start.

use std::fmt;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use regex::Regex;

use crate::error::{ErrorCode, ToolError};

/// Names that usually hold credentials. A trailing `/` means a folder and
/// everything under it; a pattern without `/` matches a file or folder of
/// that name at any depth (as in `.gitignore`).
pub const DEFAULT_PATTERNS: &[&str] = &[
    ".env",
    ".env.*",
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "id_rsa*",
    "id_ecdsa*",
    "id_ed25519*",
    ".netrc",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    "credentials*",
    "*.kdbx",
    ".ssh/",
    ".gnupg/",
    ".aws/",
    ".docker/",
    ".kube/",
];

/// Longest pattern accepted from the command line.
const MAX_PATTERN_CHARS: usize = 256;
/// [`protected_under`] stops after this many directory entries ...
pub const WALK_MAX_ENTRIES: usize = 200_000;
/// ... or this many folders deep.
pub const WALK_MAX_DEPTH: usize = 32;

/// One pattern, as written and compiled.
#[derive(Debug, Clone)]
pub struct Pattern {
    text: String,
    /// Matched against one path component, or (anchored) a leading run of them.
    re: Regex,
    anchored: bool,
    folder_only: bool,
}

impl Pattern {
    pub fn parse(text: &str) -> Result<Pattern, PatternError> {
        let bad = |why: &str| PatternError {
            pattern: text.to_string(),
            why: why.to_string(),
        };
        if text.chars().count() > MAX_PATTERN_CHARS {
            return Err(bad("it is longer than 256 characters"));
        }
        if text.chars().any(char::is_control) {
            return Err(bad("it contains a control character"));
        }
        let folder_only = text.ends_with('/');
        let body = text.trim_end_matches('/');
        let anchored = body.contains('/');
        let body = body.trim_start_matches('/');
        if body.is_empty() {
            return Err(bad("it names no file"));
        }
        if body
            .split('/')
            .any(|c| c.is_empty() || c == "." || c == "..")
        {
            return Err(bad("it has an empty, `.` or `..` component"));
        }
        let re = Regex::new(&glob_regex(body)).map_err(|e| bad(&e.to_string()))?;
        Ok(Pattern {
            text: text.to_string(),
            re,
            anchored,
            folder_only,
        })
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Does `components` (relative to the root) fall under this pattern?
    /// `last_is_dir` says whether the final component is a folder.
    fn matches(&self, components: &[&str], last_is_dir: bool) -> bool {
        let n = components.len();
        // A match on a folder that is not the last component covers what is under it.
        let kind_ok = |i: usize| !self.folder_only || i + 1 < n || last_is_dir;
        if self.anchored {
            (1..=n).any(|i| kind_ok(i - 1) && self.re.is_match(&components[..i].join("/")))
        } else {
            components
                .iter()
                .enumerate()
                .any(|(i, c)| kind_ok(i) && self.re.is_match(c))
        }
    }
}

/// `*` any run within a component, `?` one character, `**` any run across
/// components; everything else literal. Case is ignored, because macOS
/// file systems ignore it too.
fn glob_regex(glob: &str) -> String {
    let mut re = String::from("(?i)^");
    let mut chars = glob.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '*' if chars.peek() == Some(&'*') => {
                chars.next();
                if chars.peek() == Some(&'/') {
                    chars.next();
                    re.push_str("(?:.*/)?");
                } else {
                    re.push_str(".*");
                }
            }
            '*' => re.push_str("[^/]*"),
            '?' => re.push_str("[^/]"),
            other => re.push_str(&regex::escape(&other.to_string())),
        }
    }
    re.push('$');
    re
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatternError {
    pub pattern: String,
    pub why: String,
}

impl fmt::Display for PatternError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "--protect `{}` cannot be used: {}",
            self.pattern.escape_debug(),
            self.why
        )
    }
}

impl std::error::Error for PatternError {}

/// A file the backend is pointed at by a global option.
#[derive(Debug, Clone)]
pub struct FixedFile {
    pub path: PathBuf,
    /// "accounts", "profile" or "database".
    pub what: &'static str,
    /// The spelling the backend is given, as opposed to its canonical
    /// target or a database's journal file (for showing the list).
    pub primary: bool,
    /// Device and inode when it exists, so a hard link to it is known too.
    id: Option<(u64, u64)>,
}

/// Everything protected, built once at start.
#[derive(Debug, Clone)]
pub struct Protected {
    pub patterns: Vec<Pattern>,
    pub fixed_files: Vec<FixedFile>,
}

/// Why a path is protected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    Fixed(&'static str),
    Pattern(String),
}

impl Protected {
    /// The default patterns, then `extra`; and the fixed files, each under
    /// the name given and its canonical one (a database with its journal
    /// files, which hold its content too).
    pub fn new(extra: &[String], fixed: &[(&'static str, &Path)]) -> Result<Self, PatternError> {
        let patterns = DEFAULT_PATTERNS
            .iter()
            .map(|p| (*p).to_string())
            .chain(extra.iter().cloned())
            .map(|p| Pattern::parse(&p))
            .collect::<Result<Vec<_>, _>>()?;
        let mut fixed_files: Vec<FixedFile> = Vec::new();
        let mut add = |what: &'static str, path: PathBuf, primary: bool| {
            if let Some(f) = fixed_files.iter_mut().find(|f| f.path == path) {
                f.primary |= primary;
                return;
            }
            let id = std::fs::metadata(&path).ok().map(|m| (m.dev(), m.ino()));
            fixed_files.push(FixedFile {
                path,
                what,
                primary,
                id,
            });
        };
        for (what, path) in fixed {
            let mut spellings = vec![path.to_path_buf()];
            if let Ok(c) = path.canonicalize() {
                spellings.push(c);
            }
            for (i, p) in spellings.into_iter().enumerate() {
                add(what, p.clone(), i == 0);
                if *what == "database" {
                    for suffix in ["-wal", "-shm", "-journal"] {
                        let mut side = p.clone().into_os_string();
                        side.push(suffix);
                        add(what, PathBuf::from(side), false);
                    }
                }
            }
        }
        Ok(Protected {
            patterns,
            fixed_files,
        })
    }

    /// The fixed files (all spellings), e.g. to keep them readable by the backend.
    pub fn fixed_paths(&self) -> impl Iterator<Item = &Path> {
        self.fixed_files.iter().map(|f| f.path.as_path())
    }

    /// Why `path` (absolute, beneath `root`) is protected, if it is.
    /// `path` need not exist; when it does, a hard link to a fixed file is
    /// recognised and a folder-only pattern applies to it.
    pub fn reason(&self, root: &Path, path: &Path) -> Option<Reason> {
        self.reason_with(root, path, std::fs::metadata(path).ok())
    }

    fn reason_with(
        &self,
        root: &Path,
        path: &Path,
        meta: Option<std::fs::Metadata>,
    ) -> Option<Reason> {
        if let Some(f) = self.fixed_files.iter().find(|f| {
            f.path == path || (f.id.is_some() && f.id == meta.as_ref().map(|m| (m.dev(), m.ino())))
        }) {
            return Some(Reason::Fixed(f.what));
        }
        let rel = path.strip_prefix(root).ok()?;
        let components: Vec<&str> = rel
            .components()
            .filter_map(|c| match c {
                Component::Normal(s) => s.to_str(),
                _ => None,
            })
            .collect();
        // Unknown kind (by spelling, or nothing there): it may be a folder,
        // so a folder-only pattern applies; refusing more never reveals more.
        let is_dir = meta.is_none_or(|m| m.is_dir());
        self.patterns
            .iter()
            .find(|p| p.matches(&components, is_dir))
            .map(|p| Reason::Pattern(p.text.clone()))
    }

    /// `Err(path_protected)` when `path` (canonical) is protected; the
    /// message names the file (relative to the root) and why.
    pub fn check(&self, root: &Path, property: &str, path: &Path) -> Result<(), ToolError> {
        match self.reason(root, path) {
            Some(reason) => Err(refusal(root, property, path, reason)),
            None => Ok(()),
        }
    }

    /// [`Protected::check`] by the spelling alone, without touching the
    /// file system (so it reveals nothing about what exists).
    pub fn check_spelling(
        &self,
        root: &Path,
        property: &str,
        path: &Path,
    ) -> Result<(), ToolError> {
        match self.reason_with(root, path, None) {
            Some(reason) => Err(refusal(root, property, path, reason)),
            None => Ok(()),
        }
    }
}

fn refusal(root: &Path, property: &str, path: &Path, reason: Reason) -> ToolError {
    {
        let shown = match path.strip_prefix(root) {
            Ok(rel) if !rel.as_os_str().is_empty() => rel.display().to_string(),
            _ => path.display().to_string(),
        };
        let why = match reason {
            Reason::Fixed(what) => format!(
                "it is the fixed {what} file, which can hold credentials; the commands that need it read it themselves"
            ),
            Reason::Pattern(p) => format!(
                "it matches the protected pattern `{p}` (files that usually hold credentials)"
            ),
        };
        ToolError::new(
            ErrorCode::PathProtected,
            format!(
                "`{property}` names `{shown}`, which no tool may read: {why}. Choose another file."
            ),
        )
    }
}

/// The files and folders beneath `root` that match a protected pattern
/// (not the fixed files, which the backend itself must still read), for a
/// run to hide. Symlinks are neither followed nor listed: what they point
/// at is listed where it lies, if it lies beneath the root. A protected
/// folder that holds a fixed file is not listed itself; its other entries
/// are. The walk stops at [`WALK_MAX_ENTRIES`] entries or
/// [`WALK_MAX_DEPTH`] levels, and [`Walk::truncated`] says so.
pub fn protected_under(root: &Path, list: &Protected) -> Walk {
    walk_protected(root, list, WALK_MAX_ENTRIES, WALK_MAX_DEPTH)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Walk {
    pub found: Vec<PathBuf>,
    /// The walk hit a bound, so `found` may be missing some.
    pub truncated: bool,
}

/// [`protected_under`] with its bounds given; iterative, so depth costs no stack.
pub fn walk_protected(root: &Path, list: &Protected, max_entries: usize, max_depth: usize) -> Walk {
    let mut found = Vec::new();
    let mut truncated = false;
    let mut seen = 0usize;
    let mut stack: Vec<(PathBuf, Vec<String>)> = vec![(root.to_path_buf(), Vec::new())];
    while let Some((dir, rel)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            seen += 1;
            if seen > max_entries {
                truncated = true;
                stack.clear();
                break;
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
            let hit = list
                .patterns
                .iter()
                .any(|p| p.matches(&components, ft.is_dir()));
            let deep_enough = rel.len() + 1 >= max_depth;
            if hit {
                if list.fixed_paths().any(|f| f == path) {
                    continue;
                }
                // Everything under a protected folder is hidden with it,
                // unless a fixed file lies inside: then the walk goes in and
                // hides the folder's other entries, so the backend can still
                // read that file. Too deep to go in, the folder goes whole.
                let holds_fixed = ft.is_dir() && list.fixed_paths().any(|f| f.starts_with(&path));
                if !holds_fixed || deep_enough {
                    truncated |= holds_fixed;
                    found.push(path);
                    continue;
                }
            }
            if ft.is_dir() {
                if deep_enough {
                    truncated = true;
                    continue;
                }
                let mut child = rel.clone();
                child.push(name);
                stack.push((path, child));
            }
        }
    }
    found.sort();
    Walk { found, truncated }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn defaults() -> Protected {
        Protected::new(&[], &[]).unwrap()
    }

    fn hit(p: &Protected, rel: &str) -> Option<String> {
        match p.reason(Path::new("/r"), &Path::new("/r").join(rel)) {
            Some(Reason::Pattern(s)) => Some(s),
            Some(Reason::Fixed(w)) => Some(format!("fixed {w}")),
            None => None,
        }
    }

    #[test]
    fn every_default_pattern_parses() {
        assert_eq!(defaults().patterns.len(), DEFAULT_PATTERNS.len());
    }

    #[test]
    fn default_patterns_match_credentials_at_any_depth() {
        let p = defaults();
        for (rel, pattern) in [
            (".env", ".env"),
            ("app/.env", ".env"),
            ("app/.env.production", ".env.*"),
            ("certs/server.pem", "*.pem"),
            ("tls/site.KEY", "*.key"),
            ("me.p12", "*.p12"),
            ("x/me.pfx", "*.pfx"),
            ("backup/id_rsa", "id_rsa*"),
            ("backup/id_rsa.pub", "id_rsa*"),
            ("id_ecdsa", "id_ecdsa*"),
            ("id_ed25519_sk", "id_ed25519*"),
            (".netrc", ".netrc"),
            (".git-credentials", ".git-credentials"),
            ("web/.npmrc", ".npmrc"),
            (".pypirc", ".pypirc"),
            ("credentials.json", "credentials*"),
            ("gcloud/credentials.db", "credentials*"),
            ("vault.kdbx", "*.kdbx"),
            (".ssh/config", ".ssh/"),
            ("u/.ssh/known_hosts", ".ssh/"),
            (".gnupg/pubring.kbx", ".gnupg/"),
            (".aws/config", ".aws/"),
            (".docker/config.json", ".docker/"),
            (".kube/config", ".kube/"),
            (".env/inside", ".env"),
        ] {
            assert_eq!(hit(&p, rel).as_deref(), Some(pattern), "{rel}");
        }
    }

    #[test]
    fn ordinary_files_are_not_protected() {
        let p = defaults();
        for rel in [
            "accounts.yaml",
            "profile.yaml",
            "campaigns/spring-launch.yaml",
            ".envrc.example/x.txt",
            "environment.md",
            "keys.txt",
            "monkey.txt",
            "docs/credential-rotation.md",
            "my.ssh.notes",
            "ssh/config",
            "notes/.sshrc",
            "pem/readme.txt",
        ] {
            assert_eq!(hit(&p, rel), None, "{rel}");
        }
    }

    #[test]
    fn a_folder_pattern_needs_a_folder_or_something_under_it() {
        let p = defaults();
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        fs::write(root.join(".ssh"), "a plain file").unwrap();
        // An existing plain file named `.ssh` is not the folder `.ssh/` ...
        assert_eq!(p.reason(&root, &root.join(".ssh")), None);
        // ... but a name whose kind is unknown (nothing there) may be one.
        assert_eq!(hit(&p, ".ssh").as_deref(), Some(".ssh/"));
        assert_eq!(hit(&p, ".ssh/x").as_deref(), Some(".ssh/"));
    }

    #[test]
    fn a_bare_protected_folder_name_is_refused_by_its_spelling() {
        let p = defaults();
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        fs::create_dir(root.join(".ssh")).unwrap();
        fs::create_dir_all(root.join("u")).unwrap();
        // Whether the folder exists (`.ssh`) or not (`u/.aws`, `.kube`),
        // the answer is the same, and it comes before any look at the disk.
        for rel in [".ssh", "u/.aws", ".kube", "x/.gnupg", ".docker"] {
            let e = p
                .check_spelling(&root, "file", &root.join(rel))
                .unwrap_err();
            assert_eq!(e.code(), "path_protected", "{rel}");
            assert!(e.message().contains(&format!("`{rel}`")), "{}", e.message());
        }
        assert!(p.check_spelling(&root, "file", &root.join("ssh")).is_ok());
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
        let w = protected_under(&root, &p);
        let rel: Vec<String> = w
            .found
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
        assert!(!w.truncated);
        // Too shallow to go into `.aws/sso`: hidden whole, and the walk says it stopped.
        let w = walk_protected(&root, &p, 10_000, 2);
        assert!(w.found.contains(&root.join(".aws/sso")), "{:?}", w.found);
        assert!(w.truncated);
    }

    #[test]
    fn extra_patterns_plain_anchored_and_double_star() {
        let extra: Vec<String> = ["secrets/", "/private/*.yaml", "**/vault/*.txt", "*.sqlite"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let p = Protected::new(&extra, &[]).unwrap();
        assert_eq!(hit(&p, "a/secrets/b.txt").as_deref(), Some("secrets/"));
        assert_eq!(
            hit(&p, "private/x.yaml").as_deref(),
            Some("/private/*.yaml")
        );
        assert_eq!(hit(&p, "sub/private/x.yaml"), None, "anchored at the root");
        assert_eq!(
            hit(&p, "private/deeper/x.yaml"),
            None,
            "* stays in one folder"
        );
        assert_eq!(hit(&p, "vault/a.txt").as_deref(), Some("**/vault/*.txt"));
        assert_eq!(
            hit(&p, "x/y/vault/a.txt").as_deref(),
            Some("**/vault/*.txt")
        );
        assert_eq!(hit(&p, "data.SQLITE").as_deref(), Some("*.sqlite"));
        assert_eq!(hit(&p, "secretsanta.txt"), None);
    }

    #[test]
    fn bad_patterns_are_refused_with_the_reason() {
        for bad in ["", "/", "//", "a/../b", "./x", "a\nb", &"x".repeat(300)] {
            let e = Pattern::parse(bad).unwrap_err();
            assert!(e.to_string().starts_with("--protect"), "{e}");
        }
    }

    #[test]
    fn fixed_files_by_name_canonical_name_journal_and_hard_link() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        fs::write(root.join("accounts.yaml"), "token: x").unwrap();
        fs::write(root.join("app.db"), "").unwrap();
        fs::create_dir(root.join("sub")).unwrap();
        std::os::unix::fs::symlink(root.join("accounts.yaml"), root.join("sub/alias")).unwrap();
        fs::hard_link(root.join("accounts.yaml"), root.join("sub/hard")).unwrap();
        let p = Protected::new(
            &[],
            &[
                ("accounts", &root.join("sub/alias")),
                ("database", &root.join("app.db")),
                ("profile", &root.join("missing.yaml")),
            ],
        )
        .unwrap();
        let why = |rel: &str| p.reason(&root, &root.join(rel));
        assert_eq!(why("accounts.yaml"), Some(Reason::Fixed("accounts")));
        assert_eq!(why("sub/hard"), Some(Reason::Fixed("accounts")));
        assert_eq!(why("app.db"), Some(Reason::Fixed("database")));
        assert_eq!(why("app.db-wal"), Some(Reason::Fixed("database")));
        assert_eq!(why("missing.yaml"), Some(Reason::Fixed("profile")));
        assert_eq!(why("other.yaml"), None);

        let e = p
            .check(&root, "template", &root.join("accounts.yaml"))
            .unwrap_err();
        assert_eq!(e.code(), "path_protected");
        assert!(
            e.message().contains("`template` names `accounts.yaml`"),
            "{}",
            e.message()
        );
        assert!(
            e.message().contains("fixed accounts file"),
            "{}",
            e.message()
        );
        let e = p.check(&root, "file", &root.join("x/.env")).unwrap_err();
        assert!(
            e.message().contains("`x/.env`") && e.message().contains("`.env`"),
            "{}",
            e.message()
        );
        assert!(p.check(&root, "file", &root.join("notes.txt")).is_ok());
    }

    #[test]
    fn protected_under_lists_matches_without_following_symlinks() {
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
            rel(protected_under(&root, &p).found),
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
        assert!(!rel(protected_under(&root, &p).found).contains(&"plain/.env".to_string()));

        // Bounds: too shallow to reach `deep/a/b/c`, too few entries to see everything.
        let w = walk_protected(&root, &p, 10_000, 3);
        assert!(w.truncated);
        assert!(!rel(w.found).contains(&"deep/a/b/c/credentials.json".to_string()));
        let w = walk_protected(&root, &p, 2, 32);
        assert!(w.truncated);
        assert!(w.found.len() <= 2);
    }

    #[test]
    fn an_anchored_folder_pattern_covers_a_real_file_directly_inside() {
        let extra = vec!["conf/keys/".to_string()];
        let p = Protected::new(&extra, &[]).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        fs::create_dir_all(root.join("conf/keys/old")).unwrap();
        fs::write(root.join("conf/keys/signing.txt"), "x").unwrap();
        fs::write(root.join("conf/keys/old/a.txt"), "x").unwrap();
        let why = |root: &Path, rel: &str| p.reason(root, &root.join(rel));
        let pattern = Some(Reason::Pattern("conf/keys/".into()));
        assert_eq!(why(&root, "conf/keys/signing.txt"), pattern);
        assert_eq!(why(&root, "conf/keys/old/a.txt"), pattern);
        assert_eq!(why(&root, "conf/keys"), pattern);
        assert_eq!(why(&root, "conf"), None);
        assert_eq!(why(&root, "other/conf/keys/signing.txt"), None);
        // A plain file spelled like the folder is not the folder.
        let dir2 = tempfile::tempdir().unwrap();
        let root2 = dir2.path().canonicalize().unwrap();
        fs::create_dir(root2.join("conf")).unwrap();
        fs::write(root2.join("conf/keys"), "x").unwrap();
        assert_eq!(why(&root2, "conf/keys"), None);
        // The walk hides the folder whole.
        assert_eq!(
            protected_under(&root, &p).found,
            vec![root.join("conf/keys")]
        );
        assert!(protected_under(&root2, &p).found.is_empty());
    }

    #[test]
    fn the_default_list_in_order() {
        // The list `tools` shows and every run hides; one assertion, so a
        // change to the list is a change to this line too.
        let p = defaults();
        let shown: Vec<&str> = p.patterns.iter().map(Pattern::as_str).collect();
        assert_eq!(
            shown,
            [
                ".env",
                ".env.*",
                "*.pem",
                "*.key",
                "*.p12",
                "*.pfx",
                "id_rsa*",
                "id_ecdsa*",
                "id_ed25519*",
                ".netrc",
                ".git-credentials",
                ".npmrc",
                ".pypirc",
                "credentials*",
                "*.kdbx",
                ".ssh/",
                ".gnupg/",
                ".aws/",
                ".docker/",
                ".kube/",
            ]
        );
    }

    #[test]
    fn a_pattern_of_exactly_256_characters_is_accepted() {
        let longest = "x".repeat(256);
        assert_eq!(Pattern::parse(&longest).unwrap().as_str(), longest);
        let e = Pattern::parse(&"x".repeat(257)).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "--protect `{}` cannot be used: it is longer than 256 characters",
                "x".repeat(257)
            )
        );
        // Characters, not bytes.
        assert!(Pattern::parse(&"é".repeat(256)).is_ok());
        assert!(Pattern::parse(&"é".repeat(257)).is_err());
    }

    #[test]
    fn the_walk_stops_at_exactly_its_bounds() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        fs::create_dir_all(root.join("a/b")).unwrap();
        fs::write(root.join("a/b/.env"), "x").unwrap();
        let p = defaults();
        // Three entries in all (`a`, `a/b`, `a/b/.env`), three levels deep.
        let w = walk_protected(&root, &p, 3, 3);
        assert_eq!(w.found, vec![root.join("a/b/.env")]);
        assert!(!w.truncated);
        let w = walk_protected(&root, &p, 2, 3);
        assert!(w.found.is_empty(), "{:?}", w.found);
        assert!(w.truncated);
        let w = walk_protected(&root, &p, 3, 2);
        assert!(w.found.is_empty(), "{:?}", w.found);
        assert!(w.truncated);
    }

    #[test]
    fn a_refusal_names_a_path_that_is_not_below_the_root_in_full() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let p = Protected::new(&[], &[("accounts", &root)]).unwrap();
        let e = p.check(&root, "file", &root).unwrap_err();
        assert!(
            e.message().starts_with(&format!(
                "`file` names `{}`, which no tool may read",
                root.display()
            )),
            "{}",
            e.message()
        );
        let e = p
            .check_spelling(Path::new("/elsewhere"), "file", &root)
            .unwrap_err();
        assert!(
            e.message().contains(&format!("`{}`", root.display())),
            "{}",
            e.message()
        );
    }
}
