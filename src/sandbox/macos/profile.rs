//! The profile text and the argv for one run: pure functions of the run's
//! policy and the exec chain found at start, each grant a `-D` parameter.

use std::path::{Path, PathBuf};

use super::paths::canonical;
use super::{push_unique, ExecChain, BASE_PROFILE, SANDBOX_EXEC};
use crate::sandbox::policy::Policy;

/// One run's profile input.
#[derive(Debug, Clone, Copy)]
pub struct RunProfile<'a> {
    pub policy: &'a Policy,
    pub chain: &'a ExecChain,
    /// The backend the chain was found for: its launcher (an `env` line's
    /// interpreter) is put in front of the backend only, never in front of
    /// another program run in the same sandbox (the trial run's
    /// `/usr/bin/true`).
    pub backend: &'a Path,
    /// The database, whose companions (`-journal`, `-wal`, `-shm`) every
    /// run may read, as SQLite checks them on open.
    pub db: Option<&'a Path>,
    /// A `draft` run: it may write the database and its companions, and
    /// nothing else outside its temp folder.
    pub draft: bool,
    /// The token this run's denials carry into the unified log.
    pub tag: RunTag,
}

/// One run's token, `reachweaver-run:` and 16 hex digits, written into the
/// profile's denials as `(with message "...")` so the sandbox's log lines
/// for this run can be told from every other run's (docs/DENIED.md). Made
/// from a number only, so no text from anywhere else reaches the profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunTag(pub u64);

impl std::fmt::Display for RunTag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "reachweaver-run:{:016x}", self.0)
    }
}

/// `text` with every top-level one-line denial (`(deny default)`,
/// `(deny process-info*)`) carrying `tag`; a denial inside another form
/// (the `defined?` guards) is left as it is, as a release that refuses an
/// unknown modifier there would refuse the whole profile.
fn tag_denials(text: &str, tag: RunTag) -> String {
    let mut out = String::with_capacity(text.len() + 256);
    for line in text.lines() {
        match line
            .strip_prefix("(deny ")
            .and_then(|rest| rest.strip_suffix(')'))
            .filter(|ops| !ops.contains(['(', ')', '"', ';']))
        {
            Some(ops) => out.push_str(&format!("(deny {ops} (with message \"{tag}\"))")),
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

/// SQLite's companion files of a database.
pub fn db_files(db: &Path) -> Vec<PathBuf> {
    let mut out = vec![db.to_path_buf()];
    for suffix in ["-journal", "-wal", "-shm"] {
        let mut s = db.as_os_str().to_os_string();
        s.push(suffix);
        out.push(PathBuf::from(s));
    }
    out
}

/// Builds the generated part: each rule a list of `-D` parameters.
struct Generated {
    text: String,
    params: Vec<(String, PathBuf)>,
}

impl Generated {
    fn rule(&mut self, comment: &str, head: &str, filter: &str, prefix: &str, paths: &[PathBuf]) {
        if paths.is_empty() {
            return;
        }
        for line in comment.lines() {
            self.text.push_str(";; ");
            self.text.push_str(line);
            self.text.push('\n');
        }
        self.text.push_str(head);
        self.text.push('\n');
        for (i, p) in paths.iter().enumerate() {
            let name = format!("{prefix}_{i}");
            self.text
                .push_str(&format!("  ({filter} (param \"{name}\"))\n"));
            self.params.push((name, canonical(p)));
        }
        self.text.push_str(")\n");
    }
}

/// Every folder above `path` (not `path` itself), in the sandbox's
/// spelling, outermost first.
pub(super) fn ancestors(path: &Path) -> Vec<PathBuf> {
    let c = canonical(path);
    let mut out: Vec<PathBuf> = c
        .ancestors()
        .skip(1)
        .filter(|a| !a.as_os_str().is_empty())
        .map(Path::to_path_buf)
        .collect();
    out.reverse();
    out
}

/// The full profile text and the `-D` parameters for one run. Pure.
pub fn build_profile(run: &RunProfile<'_>) -> (String, Vec<(String, PathBuf)>) {
    let p = run.policy;
    let chain = run.chain;
    let not_dev = |x: &&PathBuf| !x.starts_with("/dev");

    let mut exec: Vec<PathBuf> = Vec::new();
    for x in p
        .read_exec
        .iter()
        .chain(&chain.exec_trees)
        .chain(&chain.exec_files)
    {
        push_unique(&mut exec, x.clone());
    }
    let mut read: Vec<PathBuf> = Vec::new();
    for x in p.read.iter().filter(not_dev) {
        push_unique(&mut read, x.clone());
    }
    let companions: Vec<PathBuf> = run
        .db
        .map(|db| db_files(db).into_iter().skip(1).collect())
        .unwrap_or_default();
    let tmp = vec![p.tmpdir.clone()];
    let draft_files: Vec<PathBuf> = match (run.draft, run.db) {
        (true, Some(db)) => db_files(db),
        _ => Vec::new(),
    };

    let mut meta: Vec<PathBuf> = Vec::new();
    for granted in exec
        .iter()
        .chain(&chain.hops)
        .chain(&chain.lib_trees)
        .chain(&read)
        .chain(&companions)
        .chain(&tmp)
    {
        for a in ancestors(granted) {
            push_unique(&mut meta, a);
        }
    }

    let mut g = Generated {
        text: String::from("\n;; Generated: owner paths, each a -D parameter.\n"),
        params: Vec::new(),
    };
    g.rule(
        "The folders above every granted path, metadata only. Python's launcher\n\
         calls realpath() on its own folder and SQLite checks each folder of the\n\
         database's path; without this both stop with \"Operation not permitted\".\n\
         Chromium and Apple's own tool profiles allow metadata more widely.",
        "(allow file-read-metadata file-test-existence",
        "literal",
        "META",
        &meta,
    );
    g.rule(
        "The backend, its interpreters and their installations: read, mapped and\n\
         run. dyld maps a Python's framework library and each extension module\n\
         (file-map-executable, which Chromium's and Apple's profiles grant with\n\
         their libraries); the interpreter runs the backend's #! line and may\n\
         start itself again (multiprocessing). Found at start from the exec\n\
         chain, each tree held to the path guard, never a shared prefix.",
        "(allow file-read* file-test-existence file-map-executable process-exec*",
        "subpath",
        "EXEC",
        &exec,
    );
    g.rule(
        "Each symlink on the way to the interpreter in its literal spelling: the\n\
         sandbox checks every link it crosses, so a venv or a Homebrew or uv\n\
         Python failed to start when only the resolved file was granted.",
        "(allow file-read* file-test-existence process-exec*",
        "literal",
        "HOP",
        &chain.hops,
    );
    g.rule(
        "Libraries a Homebrew Python's modules load through opt/* (sqlite,\n\
         OpenSSL, xz, ...) and a site-packages folder its installation links\n\
         to: each keg's lib folder, read and mapped, never its etc or var nor\n\
         the prefix. Without them _sqlite3, _ssl, _hashlib and _lzma can't load.",
        "(allow file-read* file-test-existence file-map-executable",
        "subpath",
        "LIB",
        &chain.lib_trees,
    );
    g.rule(
        "The root folder and the backend's fixed files (its settings, the\n\
         database), read only: what a tool call reads. Every path passed the\n\
         path guard at start.",
        "(allow file-read* file-test-existence",
        "subpath",
        "READ",
        &read,
    );
    g.rule(
        "SQLite looks for a hot journal and a WAL beside the database on open\n\
         (a read-only open too), and stops when it may not even look; each is\n\
         a literal, so nothing else beside the database is readable.",
        "(allow file-read* file-test-existence",
        "literal",
        "DBX",
        &companions,
    );
    g.rule(
        "The run's private temp folder, made fresh for each run inside the\n\
         user's $TMPDIR: read and write (Python's tempfile, SQLite's temp\n\
         files), never run, as no exec rule names it. Anthropic's sandbox-runtime\n\
         grants the whole per-user temp folder; one run's folder is narrower.",
        "(allow file-read* file-test-existence file-write*",
        "subpath",
        "TMP",
        &tmp,
    );
    g.rule(
        "A draft run writes the database and SQLite's companions only (the\n\
         journal or WAL it writes beside the database, as on Linux): a folder\n\
         grant would let it write anything beside the database (up to\n\
         ~/Library/LaunchAgents, run at the next login, when that is the home).",
        "(allow file-read* file-test-existence file-write*",
        "literal",
        "DB",
        &draft_files,
    );
    g.text.push_str(
        ";; Last, so nothing above can reopen them (the last matching rule wins).\n\
         ;; No hard links anywhere: a link made in a writable place to an outside\n\
         ;; file would make that file readable and writable under a granted name\n\
         ;; (for the same reason Anthropic's sandbox-runtime blocks moving files\n\
         ;; out of denied places). No network of any kind, loopback and unix\n\
         ;; sockets included: a backend reads local files and answers on stdout,\n\
         ;; and Codex's policy too leaves the network out unless it is asked for.\n\
         (deny file-link)\n\
         (deny network*)\n",
    );
    let mut text = tag_denials(BASE_PROFILE, run.tag);
    text.push_str(&tag_denials(&g.text, run.tag));
    (text, g.params)
}

/// The argv that starts the run under sandbox-exec. Pure.
pub fn build_argv(run: &RunProfile<'_>) -> Vec<String> {
    let (profile, params) = build_profile(run);
    let mut argv = vec![SANDBOX_EXEC.to_string(), "-p".to_string(), profile];
    for (name, path) in params {
        argv.push("-D".to_string());
        argv.push(format!("{name}={}", path.display()));
    }
    argv.push("--".to_string());
    if run.policy.program == run.backend {
        argv.extend(run.chain.launcher.iter().cloned());
    }
    argv.push(run.policy.program.display().to_string());
    argv.extend(run.policy.argv.iter().skip(1).cloned());
    argv
}
