//! Files no tool may be pointed at, whatever the root: the backend's fixed
//! accounts, profile and database files, files whose names say they hold
//! credentials (`.env`, keys, `.ssh/`, ...), and any other name (hard link)
//! of one of those.
//!
//! A path argument is checked twice: by its spelling before the filesystem
//! is touched (so whether a protected file exists is never revealed), and
//! by the canonical path it resolves to and the file (device and inode) that
//! path leads to, so a symlink, a `..` detour or a hard link by another name
//! cannot reach one either. By spelling, a folder-only pattern (`.ssh/`)
//! also refuses the bare folder name, since telling a folder from a file
//! would need the file system. [`scan`] lists the entries beneath the root
//! and the home that a run hides, when it walks the folder itself: the
//! matching ones, and the other names of protected and fixed files. That
//! scan is taken once, at start, and it also tells [`Protected::remember`]
//! which files (by inode) are protected, for the argument check.

use std::collections::BTreeMap;
use std::fmt;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;

use regex::Regex;

use crate::error::{ErrorCode, ToolError};

mod scan;
pub use scan::{scan, scan_bounded, Scan, WALK_MAX_DEPTH, WALK_MAX_ENTRIES};

/// Names that usually hold credentials, each with what it holds (README.md,
/// "Protected files and redaction", lists the same, in the same order). A
/// trailing `/` means a folder and everything under it; a pattern without
/// `/` matches a file or folder of that name at any depth (as in
/// `.gitignore`); `**/` lets an anchored pattern start at any depth.
pub const DEFAULT_PATTERNS: &[&str] = &[
    // Environment files (dotenv) and direnv's `.envrc`: exported API keys,
    // database URLs and passwords.
    ".env",
    ".env.*",
    ".envrc",
    // Private keys and the certificate bundles that carry them.
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    // SSH private keys (the `.pub` halves beside them are covered too).
    "id_rsa*",
    "id_ecdsa*",
    "id_ed25519*",
    // Logins for hosts and package registries: `.netrc` (user and password
    // per host, read by curl, ftp and git), git's credential store (HTTPS
    // tokens in clear), npm's and PyPI's upload tokens, PostgreSQL's
    // password file, HashiCorp Vault's login token.
    ".netrc",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    ".pgpass",
    ".vault-token",
    // Cloud and app credential files: `credentials`, `credentials.json`,
    // gcloud's `credentials.db`; app secret stores; Google Cloud
    // service-account keys (a private key in JSON).
    "credentials*",
    "secrets.json",
    "service-account*.json",
    // Terraform state: every managed resource's attributes in plain text,
    // generated passwords and keys included.
    "*.tfstate",
    "*.tfstate.backup",
    // Password databases (KeePass).
    "*.kdbx",
    // Shell, REPL and database client histories: every command or query
    // typed, passwords given on a command line or in SQL included.
    ".bash_history",
    ".zsh_history",
    ".sh_history",
    ".python_history",
    ".psql_history",
    ".mysql_history",
    "fish_history",
    // The GitHub CLI's OAuth tokens, per host.
    "**/.config/gh/hosts.yml",
    // A repository's config: its remote URLs, which often carry a token as
    // `https://user:TOKEN@host/…` (a CI checkout, a clone by a bot).
    // Anchored to `.git/` so that any other file named `config` stays
    // readable.
    "**/.git/config",
    // Files named for the token they hold: `token.txt`, Google's OAuth
    // quickstarts' `token.json` (access and refresh token), and `*.token`
    // (`.token` included). Not `token` alone, nor `*_token` and the like,
    // which name source folders and files (`go/token`, `next_token.rs`) as
    // often as secrets.
    "token.txt",
    "token.json",
    "*.token",
    // Whole folders of keys and logins: SSH keys and configs, GnuPG's
    // private keyring, AWS keys and SSO tokens, Docker registry logins
    // (`config.json`), Kubernetes cluster credentials (`config`).
    ".ssh/",
    ".gnupg/",
    ".aws/",
    ".docker/",
    ".kube/",
];

/// The default patterns, compiled once per process: each is a regex, and
/// the set costs milliseconds, which every resolution of the files would
/// otherwise pay again. [`warm_defaults`] compiles them off the start-up path.
fn default_patterns() -> &'static [Pattern] {
    static DEFAULTS: OnceLock<Vec<Pattern>> = OnceLock::new();
    DEFAULTS.get_or_init(|| {
        DEFAULT_PATTERNS
            .iter()
            .filter_map(|p| Pattern::parse(p).ok())
            .collect()
    })
}

/// Compile the default patterns now (on a thread that has time to spare).
pub fn warm_defaults() {
    default_patterns();
}

/// Longest pattern accepted from the command line.
const MAX_PATTERN_CHARS: usize = 256;

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

    /// [`Pattern::matches`] for the last component alone, for a walk that
    /// has already found that no folder above it matches.
    fn matches_last(&self, components: &[&str], is_dir: bool) -> bool {
        let Some(last) = components.last() else {
            return false;
        };
        (!self.folder_only || is_dir)
            && match self.anchored {
                true => self.re.is_match(&components.join("/")),
                false => self.re.is_match(last),
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

/// Device and inode: which file a name leads to, whatever the name.
pub type FileId = (u64, u64);

/// Everything protected, built once at start.
#[derive(Debug, Clone)]
pub struct Protected {
    pub patterns: Vec<Pattern>,
    pub fixed_files: Vec<FixedFile>,
    /// Every protected regular file the start-up scan saw (by name, or
    /// inside a protected folder), with the pattern that protects it: any
    /// other name (hard link) of one is protected too.
    files: BTreeMap<FileId, String>,
}

/// Why a path is protected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    Fixed(&'static str),
    Pattern(String),
    /// Another name (a hard link) of a file protected by this pattern.
    Link(String),
}

impl Protected {
    /// The default patterns, then `extra`; and the fixed files, each under
    /// the name given and its canonical one (a database with its journal
    /// files, which hold its content too).
    pub fn new(extra: &[String], fixed: &[(&'static str, &Path)]) -> Result<Self, PatternError> {
        let patterns = default_patterns()
            .iter()
            .cloned()
            .map(Ok)
            .chain(extra.iter().map(|p| Pattern::parse(p)))
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
            files: BTreeMap::new(),
        })
    }

    /// Take in the protected files a start-up [`Scan`] found, so that a
    /// path argument leading to one of them by another name is refused.
    pub fn remember(&mut self, scan: &Scan) {
        self.files
            .extend(scan.files.iter().map(|(k, v)| (*k, v.clone())));
    }

    /// How many protected files (by device and inode) are known from the scan.
    pub fn remembered(&self) -> usize {
        self.files.len()
    }

    /// The pattern protecting the file `path` names (not following a final
    /// link) when it is another name (a hard link) of a protected file the
    /// start-up scan saw.
    pub fn link_of(&self, path: &Path) -> Option<&str> {
        let m = std::fs::symlink_metadata(path)
            .ok()
            .filter(|m| m.is_file())?;
        self.link_of_id((m.dev(), m.ino()))
    }

    /// The pattern protecting the file with this device and inode when it
    /// is a protected file the start-up scan saw (under any name).
    pub fn link_of_id(&self, id: FileId) -> Option<&str> {
        self.files.get(&id).map(String::as_str)
    }

    /// The patterns as `tools` shows them, in order, one space apart.
    pub fn patterns_line(&self) -> String {
        self.patterns
            .iter()
            .map(Pattern::as_str)
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The fixed files (all spellings), e.g. to keep them readable by the backend.
    pub fn fixed_paths(&self) -> impl Iterator<Item = &Path> {
        self.fixed_files.iter().map(|f| f.path.as_path())
    }

    /// Why `path` (absolute, beneath `root`) is protected, if it is.
    /// `path` need not exist; when it does, the file it leads to (symlinks
    /// followed: what opening it would open) is looked up by device and
    /// inode, so a hard link to a fixed file or to a protected file the
    /// start-up scan saw is recognised, and a folder-only pattern applies.
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
        let components = components_below(root, path)?;
        // Unknown kind (by spelling, or nothing there): it may be a folder,
        // so a folder-only pattern applies; refusing more never reveals more.
        let is_dir = meta.as_ref().is_none_or(|m| m.is_dir());
        if let Some(p) = self
            .patterns
            .iter()
            .find(|p| p.matches(&components, is_dir))
        {
            return Some(Reason::Pattern(p.text.clone()));
        }
        meta.filter(|m| m.is_file())
            .and_then(|m| self.files.get(&(m.dev(), m.ino())))
            .map(|pattern| Reason::Link(pattern.clone()))
    }

    /// The pattern that covers `path` by its spelling alone, looked at from
    /// each of `bases` in turn (a pattern anchored to a folder is tried
    /// from each), fixed files aside. For paths the backend's catalog
    /// proposes: it may name none that a pattern covers, whatever the
    /// fixed files' exemption would let through.
    pub fn pattern_covering(&self, bases: &[&Path], path: &Path, is_dir: bool) -> Option<&str> {
        bases.iter().find_map(|base| {
            let components = components_below(base, path)?;
            self.patterns
                .iter()
                .find(|p| p.matches(&components, is_dir))
                .map(Pattern::as_str)
        })
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

/// `path`'s components below `root` (`None`: not beneath it); a name that
/// is not UTF-8 is passed over, as no pattern can name it.
fn components_below<'a>(root: &Path, path: &'a Path) -> Option<Vec<&'a str>> {
    let rel = path.strip_prefix(root).ok()?;
    Some(
        rel.components()
            .filter_map(|c| match c {
                Component::Normal(s) => s.to_str(),
                _ => None,
            })
            .collect(),
    )
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
            Reason::Link(p) => format!(
                "it is another name (a hard link) of a file protected by the pattern `{p}` (files that usually hold credentials)"
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
            Some(Reason::Link(p)) => Some(format!("link {p}")),
            None => None,
        }
    }

    #[test]
    fn pattern_covering_looks_from_each_base_and_passes_fixed_files_over() {
        let fixed = Path::new("/w/home/.env");
        let p = Protected::new(&["conf/prod.yaml".to_string()], &[("accounts", fixed)]).unwrap();
        let bases = [Path::new("/"), Path::new("/w/home")];
        // A fixed file is no exemption here: the pattern is named.
        assert_eq!(p.pattern_covering(&bases, fixed, false), Some(".env"));
        assert_eq!(
            p.pattern_covering(&bases, Path::new("/w/home/.ssh/rw"), true),
            Some(".ssh/")
        );
        // A folder-only pattern covers a folder by its last name, not a file.
        assert_eq!(
            p.pattern_covering(&bases, Path::new("/w/home/.ssh"), true),
            Some(".ssh/")
        );
        assert_eq!(
            p.pattern_covering(&bases, Path::new("/w/home/.ssh"), false),
            None
        );
        // An anchored pattern counts from a base it is beneath, from no other.
        assert_eq!(
            p.pattern_covering(&bases, Path::new("/w/home/conf/prod.yaml"), false),
            Some("conf/prod.yaml")
        );
        assert_eq!(
            p.pattern_covering(&bases[..1], Path::new("/w/home/conf/prod.yaml"), false),
            None
        );
        assert_eq!(p.pattern_covering(&[Path::new("/x")], fixed, false), None);
        assert_eq!(
            p.pattern_covering(&bases, Path::new("/w/home/rw.db"), false),
            None
        );
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

    /// The full default list, in the order `tools` shows it (a change here
    /// is a change to what the README documents).
    #[test]
    fn the_default_list_tools_shows_is_pinned() {
        assert_eq!(
            defaults().patterns_line(),
            ".env .env.* .envrc *.pem *.key *.p12 *.pfx id_rsa* id_ecdsa* id_ed25519* \
             .netrc .git-credentials .npmrc .pypirc .pgpass .vault-token credentials* \
             secrets.json service-account*.json *.tfstate *.tfstate.backup *.kdbx \
             .bash_history .zsh_history .sh_history .python_history .psql_history \
             .mysql_history fish_history **/.config/gh/hosts.yml **/.git/config \
             token.txt token.json *.token .ssh/ .gnupg/ .aws/ .docker/ .kube/"
        );
        let extra = vec!["*.sqlite".to_string()];
        let line = Protected::new(&extra, &[]).unwrap().patterns_line();
        assert!(line.ends_with(" .kube/ *.sqlite"), "{line}");
    }

    /// README.md, "Protected files and redaction", lists the same patterns
    /// in the same order, one group per bullet, each saying what it holds:
    /// the backticked names before a bullet's first `: ` are its patterns.
    #[test]
    fn the_readme_lists_every_default_pattern_with_what_it_holds() {
        let readme = include_str!("../README.md");
        let start = readme
            .find("The default patterns, and what each holds:")
            .expect("README has the list of default patterns");
        let mut listed: Vec<String> = Vec::new();
        let mut bullets = 0;
        for bullet in readme[start..]
            .lines()
            .skip(2)
            .take_while(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join("\n")
            .split("\n- ")
        {
            let bullet = bullet.trim_start_matches("- ");
            let (head, why) = bullet
                .split_once(": ")
                .unwrap_or_else(|| panic!("no `: ` in {bullet:?}"));
            assert!(why.trim().len() > 10, "say what it holds: {bullet:?}");
            listed.extend(head.split('`').skip(1).step_by(2).map(str::to_string));
            bullets += 1;
        }
        assert!(bullets > 5, "{bullets} bullets");
        assert_eq!(listed, DEFAULT_PATTERNS);
    }

    /// Each pattern added for credential files by other names, with a near
    /// miss that stays readable.
    #[test]
    fn credential_files_by_other_names_and_their_near_misses() {
        let p = defaults();
        for (rel, pattern, near_miss) in [
            (".envrc", ".envrc", "envrc.md"),
            ("app/.envrc", ".envrc", "app/.envrc.example"),
            ("secrets.json", "secrets.json", "secrets.jsonl"),
            ("cfg/Secrets.JSON", "secrets.json", "cfg/my-secrets.json"),
            (".pgpass", ".pgpass", "pgpass.txt"),
            ("u/.pgpass", ".pgpass", "u/.pgpass.sample"),
            (
                "service-account.json",
                "service-account*.json",
                "service-account.md",
            ),
            (
                "keys/service-account-prod.json",
                "service-account*.json",
                "keys/service-account-prod.json.md",
            ),
            ("terraform.tfstate", "*.tfstate", "main.tf"),
            (
                "env/prod.tfstate",
                "*.tfstate",
                "env/.terraform.tfstate.lock.info",
            ),
            (
                "terraform.tfstate.backup",
                "*.tfstate.backup",
                "terraform.tfstate.bak",
            ),
            (".bash_history", ".bash_history", "bash_history.md"),
            (".zsh_history", ".zsh_history", ".zsh_history_notes"),
            (".sh_history", ".sh_history", "sh_history"),
            (".python_history", ".python_history", "python_history.py"),
            (".psql_history", ".psql_history", "psql_history.sql"),
            (".mysql_history", ".mysql_history", ".mysql_historyx"),
            (
                ".local/share/fish/fish_history",
                "fish_history",
                ".local/share/fish/fish_variables",
            ),
            ("fish_history", "fish_history", "fish_history.md"),
            (
                ".config/gh/hosts.yml",
                "**/.config/gh/hosts.yml",
                ".config/gh/config.yml",
            ),
            (
                "home/u/.config/gh/hosts.yml",
                "**/.config/gh/hosts.yml",
                "gh/hosts.yml",
            ),
            (".git-credentials", ".git-credentials", "git-credentials.md"),
            (".vault-token", ".vault-token", "vault-token.md"),
            (".netrc", ".netrc", "netrc.md"),
            (".npmrc", ".npmrc", "npmrc.md"),
            (".pypirc", ".pypirc", "pypirc.txt"),
            (".docker/config.json", ".docker/", "docker/config.json"),
            (".kube/config", ".kube/", "kube/config"),
            (".aws/credentials", "credentials*", "aws/config"),
            (".git/config", "**/.git/config", ".git/HEAD"),
            ("apps/web/.git/config", "**/.git/config", "apps/web/config"),
            (".GIT/Config", "**/.git/config", ".git/config.worktree"),
            ("token.txt", "token.txt", "tokens.txt"),
            ("deploy/Token.TXT", "token.txt", "deploy/token.txt.md"),
            ("token.json", "token.json", "tokens.json"),
            ("gcloud/token.json", "token.json", "web/token.js"),
            (".token", "*.token", "token"),
            ("u/.token", "*.token", "u/.tokenizer"),
            ("gh.token", "*.token", "token.rs"),
            ("keys/registry.TOKEN", "*.token", "lexer/token/mod.rs"),
        ] {
            assert_eq!(hit(&p, rel).as_deref(), Some(pattern), "{rel}");
            assert_eq!(hit(&p, near_miss), None, "{near_miss}");
        }
        assert_eq!(hit(&p, ".aws/config").as_deref(), Some(".aws/"));
    }

    /// The same with real files, where what is there decides: a plain file
    /// named like a protected folder is not one, a folder named like a
    /// protected file is protected with all beneath it.
    #[test]
    fn credential_files_by_other_names_on_disk() {
        let p = defaults();
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for d in [
            ".kube",
            ".docker",
            "a",
            ".config/gh",
            ".local/share/fish",
            "secrets.json",
        ] {
            fs::create_dir_all(root.join(d)).unwrap();
        }
        for f in [
            ".kube/config",
            ".docker/config.json",
            "a/.docker",
            "a/.kube",
            ".config/gh/hosts.yml",
            ".local/share/fish/fish_history",
            "secrets.json/inner.txt",
            ".envrc",
            "secrets.jsonl",
            "npmrc.md",
            "prod.tfstate",
            "prod.tfstate.backup",
        ] {
            fs::write(root.join(f), "x").unwrap();
        }
        let why = |rel: &str| match p.reason(&root, &root.join(rel)) {
            Some(Reason::Pattern(s)) => Some(s),
            other => other.map(|r| format!("{r:?}")),
        };
        assert_eq!(why(".kube/config").as_deref(), Some(".kube/"));
        assert_eq!(why(".kube").as_deref(), Some(".kube/"));
        assert_eq!(why(".docker/config.json").as_deref(), Some(".docker/"));
        // Plain files named like the folders: nothing to protect.
        assert_eq!(why("a/.docker"), None);
        assert_eq!(why("a/.kube"), None);
        assert_eq!(
            why(".config/gh/hosts.yml").as_deref(),
            Some("**/.config/gh/hosts.yml")
        );
        assert_eq!(
            why(".local/share/fish/fish_history").as_deref(),
            Some("fish_history")
        );
        assert_eq!(why("secrets.json").as_deref(), Some("secrets.json"));
        assert_eq!(
            why("secrets.json/inner.txt").as_deref(),
            Some("secrets.json")
        );
        assert_eq!(why(".envrc").as_deref(), Some(".envrc"));
        assert_eq!(why("prod.tfstate").as_deref(), Some("*.tfstate"));
        assert_eq!(
            why("prod.tfstate.backup").as_deref(),
            Some("*.tfstate.backup")
        );
        assert_eq!(why("secrets.jsonl"), None);
        assert_eq!(why("npmrc.md"), None);
        // The scan hides the same, and not the near misses.
        let hidden: Vec<String> = scan(&[&root], &p)
            .hidden
            .iter()
            .map(|x| x.strip_prefix(&root).unwrap().display().to_string())
            .collect();
        assert_eq!(
            hidden,
            vec![
                ".config/gh/hosts.yml",
                ".docker",
                ".envrc",
                ".kube",
                ".local/share/fish/fish_history",
                "prod.tfstate",
                "prod.tfstate.backup",
                "secrets.json",
            ]
        );
    }

    /// `link_of` names the pattern of the protected file a path is another
    /// name of; it does not follow a final symbolic link, and knows nothing
    /// before the scan is taken in.
    #[test]
    fn link_of_names_the_pattern_of_the_file_a_hard_link_shares() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        fs::create_dir_all(root.join("notes")).unwrap();
        fs::write(root.join(".env"), "K=1").unwrap();
        fs::write(root.join("notes/plain.txt"), "ok").unwrap();
        fs::hard_link(root.join(".env"), root.join("notes/env-copy.txt")).unwrap();
        std::os::unix::fs::symlink(root.join(".env"), root.join("notes/to-env")).unwrap();
        let mut p = defaults();
        assert_eq!(p.link_of(&root.join("notes/env-copy.txt")), None);
        p.remember(&scan(&[&root], &p));
        assert_eq!(p.link_of(&root.join("notes/env-copy.txt")), Some(".env"));
        assert_eq!(p.link_of(&root.join(".env")), Some(".env"));
        assert_eq!(p.link_of(&root.join("notes/plain.txt")), None);
        assert_eq!(p.link_of(&root.join("notes/to-env")), None);
        assert_eq!(p.link_of(&root.join("notes/missing")), None);
        assert_eq!(p.link_of(&root.join("notes")), None);
    }

    /// A file the scan saw as protected is refused under any other name:
    /// by the file the name leads to, not by the name.
    #[test]
    fn another_name_of_a_protected_file_is_refused_by_its_inode() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        fs::create_dir_all(root.join(".aws")).unwrap();
        fs::create_dir_all(root.join("notes")).unwrap();
        fs::write(root.join(".env"), "K=1").unwrap();
        fs::write(root.join(".aws/credentials"), "k").unwrap();
        fs::write(root.join("notes/plain.txt"), "ok").unwrap();
        fs::hard_link(root.join(".env"), root.join("notes/env-copy.txt")).unwrap();
        fs::hard_link(root.join(".aws/credentials"), root.join("notes/aws.txt")).unwrap();
        std::os::unix::fs::symlink(root.join("notes/env-copy.txt"), root.join("notes/via-link"))
            .unwrap();
        let mut p = defaults();
        // Before the scan is taken in, only names count.
        assert_eq!(p.reason(&root, &root.join("notes/env-copy.txt")), None);
        p.remember(&scan(&[&root], &p));
        assert_eq!(p.remembered(), 2);
        let why = |rel: &str| p.reason(&root, &root.join(rel));
        assert_eq!(why("notes/env-copy.txt"), Some(Reason::Link(".env".into())));
        assert_eq!(why("notes/via-link"), Some(Reason::Link(".env".into())));
        assert_eq!(why("notes/aws.txt"), Some(Reason::Link(".aws/".into())));
        // A name made after the scan, of a file it saw, is refused too.
        fs::hard_link(root.join(".env"), root.join("notes/later.txt")).unwrap();
        assert_eq!(why("notes/later.txt"), Some(Reason::Link(".env".into())));
        // An ordinary file (one name) is not; by spelling alone nothing is known.
        assert_eq!(
            fs::metadata(root.join("notes/plain.txt")).unwrap().nlink(),
            1
        );
        assert_eq!(why("notes/plain.txt"), None);
        assert!(p
            .check_spelling(&root, "file", &root.join("notes/env-copy.txt"))
            .is_ok());
        let e = p
            .check(&root, "file", &root.join("notes/env-copy.txt"))
            .unwrap_err();
        assert_eq!(e.code(), "path_protected");
        assert_eq!(
            e.message(),
            "`file` names `notes/env-copy.txt`, which no tool may read: it is another name (a hard link) of a file protected by the pattern `.env` (files that usually hold credentials). Choose another file."
        );
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
