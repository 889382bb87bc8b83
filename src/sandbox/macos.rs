//! macOS: the run is started by `/usr/bin/sandbox-exec` with a profile made
//! of the static deny-by-default base in `sandbox/reachweaver.sb` and one
//! generated rule per kind of grant. The generated rules refer to `-D`
//! parameters only, so no path the owner chose is ever spliced into profile
//! text (a path with a quote or parenthesis can't change the profile).
//!
//! What the profile needs to know about how the backend starts (the
//! interpreter behind a `#!` line, every symlink on the way to it, the
//! libraries a Homebrew Python loads) is found once at start by [`discover`]
//! and kept as plain data ([`ExecChain`]); [`build_profile`] is a pure
//! function of that and the run's policy. So this module is compiled
//! everywhere and its golden tests, which describe real macOS layouts as
//! data, run in every CI job; only `spawn` and `probe` (the parts that start
//! processes) are macOS-only.

#[cfg(target_os = "macos")]
pub mod probe;
#[cfg(target_os = "macos")]
pub mod spawn;

use std::path::{Component, Path, PathBuf};

use super::guard::{self, Platform};
use super::policy::{self, Policy};

/// The static base profile.
pub const BASE_PROFILE: &str = include_str!("../../sandbox/reachweaver.sb");

/// sandbox-exec, by absolute path so `PATH` can't substitute another.
pub const SANDBOX_EXEC: &str = "/usr/bin/sandbox-exec";

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

/// How the backend starts, found at start: plain data, so the profile
/// builder is pure and its golden files can describe any Mac's layout.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecChain {
    /// Trees that are read, mapped and executed: an interpreter's
    /// installation (a framework version folder, a uv Python), a virtual
    /// environment, the backend's install prefix when it is outside the home.
    pub exec_trees: Vec<PathBuf>,
    /// Single executables: the backend itself and each resolved interpreter.
    pub exec_files: Vec<PathBuf>,
    /// Every symlink crossed on the way, in its literal spelling
    /// (`/opt/homebrew/bin/python3`, a venv's `bin/python`, `opt/sqlite`).
    pub hops: Vec<PathBuf>,
    /// Library folders that are read and mapped, not executed: the `lib`
    /// of each Homebrew keg a Homebrew Python's modules link against, and a
    /// site-packages folder its installation links to.
    pub lib_trees: Vec<PathBuf>,
    /// For `#!/usr/bin/env NAME`: the interpreter found on `PATH` at start
    /// (literal, so a venv stays a venv) and the line's arguments, run in
    /// front of the script instead of letting `env` search again inside the
    /// sandbox (where it could reach Apple's `/usr/bin/python3` stub).
    pub launcher: Vec<String>,
}

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

fn push_unique(list: &mut Vec<PathBuf>, p: PathBuf) {
    if !list.contains(&p) {
        list.push(p);
    }
}

/// Every folder above `path` (not `path` itself), in the sandbox's
/// spelling, outermost first.
fn ancestors(path: &Path) -> Vec<PathBuf> {
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
    let mut text = String::from(BASE_PROFILE);
    text.push_str(&g.text);
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

/// sandbox-exec's own failures (a profile it can't compile, a sandbox it
/// can't apply, such as inside another sandbox, a program it may not
/// start) end with a `sandbox-exec: ...` line on stderr and a sysexits
/// code (65 for a bad profile, 71 when applying or executing fails), before
/// the backend ever ran. Those are the sandbox's failures, not the
/// backend's. A backend that prints the same only misreports its own run.
/// Returns the message. Pure.
pub fn sandbox_exec_refusal(code: i32, stderr: &[u8]) -> Option<String> {
    if !(64..=78).contains(&code) {
        return None;
    }
    let text = String::from_utf8_lossy(stderr);
    let line = text.lines().map(str::trim).find(|l| !l.is_empty())?;
    line.starts_with("sandbox-exec: ")
        .then(|| line.chars().take(300).collect())
}

/// How a run under sandbox-exec ended, as far as telling the sandbox's
/// failures from the backend's goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    Code(i32),
    Signal(i32),
}

/// Signals that end a program the sandbox stopped before its `main`: dyld
/// aborts (SIGABRT) when it may not read what it needs, halts with a trap
/// on some releases (SIGTRAP), and the kernel kills (SIGKILL) a process
/// whose exec the sandbox or code signing refused after the point of no
/// return.
const START_SIGNALS: [i32; 3] = [libc::SIGABRT, libc::SIGTRAP, libc::SIGKILL];

/// Whether a run died at start under the profile instead of running: a
/// `sandbox-exec: ...` refusal ([`sandbox_exec_refusal`]), or one of the
/// signals above (or exit 134, the same abort reported through a shell)
/// with nothing on stdout and, on stderr, nothing or only dyld's own lines.
/// A backend that wrote anything of its own had started, and its crash is
/// its own. Returns the reason, for a `sandbox_failed` answer. Pure.
pub fn died_at_start(ended: Ended, stdout: &[u8], stderr: &[u8]) -> Option<String> {
    if let Ended::Code(code) = ended {
        if let Some(why) = sandbox_exec_refusal(code, stderr) {
            return Some(why);
        }
    }
    let how = match ended {
        Ended::Signal(sig) if START_SIGNALS.contains(&sig) => format!("signal {sig}"),
        Ended::Code(134) => "exit 134 (SIGABRT)".to_string(),
        _ => return None,
    };
    if stdout.iter().any(|b| !b.is_ascii_whitespace()) {
        return None;
    }
    let text = String::from_utf8_lossy(stderr);
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.next();
    let dyld_only = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .all(|l| l.starts_with("dyld"));
    if !dyld_only {
        return None;
    }
    let said = first
        .map(|l| format!(": {}", l.chars().take(200).collect::<String>()))
        .unwrap_or_else(|| ", printing nothing".to_string());
    Some(format!(
        "the program was stopped before it started ({how}{said}); the sandbox profile refused \
         something the system loader needs"
    ))
}

// ---------------------------------------------------------------------
// Inherited descriptors (the decisions; spawn does the system calls).
// ---------------------------------------------------------------------

/// The first descriptor number the kernel can never hand out: macOS caps a
/// process's descriptors at the smaller of its soft `RLIMIT_NOFILE` and
/// `kern.maxfilesperproc` (a soft limit of `RLIM_INFINITY` is common for
/// programs that raise it). Sweeping up to this misses nothing. Pure.
pub fn fd_sweep_limit(rlim_cur: u64, maxfilesperproc: u64) -> i32 {
    let cap = rlim_cur.min(maxfilesperproc);
    i32::try_from(cap).unwrap_or(i32::MAX)
}

/// How many entries of the kernel's descriptor list (`PROC_PIDLISTFDS`,
/// which answers with the bytes it filled) can be trusted: `None` when the
/// call failed or filled the whole buffer, as a full buffer may have been
/// cut short; the caller then sweeps every number instead. Pure.
pub fn listed_fd_count(returned_bytes: i32, entry_size: usize, capacity: usize) -> Option<usize> {
    let bytes = usize::try_from(returned_bytes).ok()?;
    if entry_size == 0 {
        return None;
    }
    let n = bytes / entry_size;
    (n < capacity).then_some(n)
}

// ---------------------------------------------------------------------
// Discovery (at start; reads the file system, decides nothing per run).
// ---------------------------------------------------------------------

/// Homebrew kegs whose libraries CPython's extension modules link through
/// `$(brew --prefix)/opt/NAME/lib` (sqlite3, ssl/hashlib, lzma, decimal,
/// readline, dbm, ctypes, zstd in 3.14, tkinter).
pub const HOMEBREW_PYTHON_KEGS: &[&str] = &[
    "openssl@3",
    "sqlite",
    "xz",
    "mpdecimal",
    "readline",
    "gdbm",
    "libffi",
    "zstd",
    "tcl-tk",
];

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

/// Every spelling of the home discovery knows, for the path guard.
fn home_spellings(home: Option<&Path>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(h) = home {
        for p in [h.to_path_buf(), canonical(h)] {
            if !out.contains(&p) {
                out.push(p);
            }
        }
    }
    out
}

/// Whether the path guard, with macOS's rules, lets `p` into a profile.
/// Discovery follows links the backend's installation chose (a venv, a
/// site-packages link, a Homebrew `opt` link), so each grant it finds is
/// held to the same rule as an owner's paths.
fn guard_passes(p: &Path, home: Option<&Path>) -> bool {
    let homes = home_spellings(home);
    guard::refusal_on(Platform::MacOs, &canonical(p), &homes).is_none()
}

/// Paths that must never become a tree grant: whatever the path guard
/// refuses (`/`, the home and anything above it, the shared temp folders,
/// `/Library`, `/Users`, ...) and the shared install prefixes.
fn too_wide(p: &Path, home: Option<&Path>) -> bool {
    if !guard_passes(p, home) {
        return true;
    }
    // Shared prefixes: their etc and var hold other programs' settings and
    // data (Homebrew's, MacPorts'), so a program there is granted alone.
    // A Homebrew or MacPorts installed somewhere else is known by its own
    // bookkeeping folder (looked up as spelled: the sandbox's /private
    // spelling is for matching, not for this system's lookups).
    let c = canonical(p);
    let shared = ["/usr", "/usr/local", "/opt/homebrew", "/opt/local", "/opt"];
    shared.iter().any(|s| c == Path::new(s))
        || p.join("Cellar").is_dir()
        || p.join("var/macports").is_dir()
}

/// Drops every discovered grant the guard refuses: trees (the chain's and
/// each library folder) that are too wide, and files or links it refuses.
/// A run that needed one then fails visibly instead of opening more.
fn keep_guarded(chain: &mut ExecChain, home: Option<&Path>) {
    chain.exec_trees.retain(|t| !too_wide(t, home));
    chain.lib_trees.retain(|t| !too_wide(t, home));
    chain.hops.retain(|h| guard_passes(h, home));
    chain.exec_files.retain(|f| guard_passes(f, home));
}

/// A folder that is a Python installation or a virtual environment (so it
/// is an interpreter's own tree even inside the home).
fn is_python_tree(dir: &Path) -> bool {
    if dir.join("pyvenv.cfg").is_file() {
        return true;
    }
    std::fs::read_dir(dir.join("lib"))
        .map(|d| {
            d.flatten()
                .any(|e| e.file_name().to_string_lossy().starts_with("python3"))
        })
        .unwrap_or(false)
}

/// The install prefix for a tree grant: the parent of the `bin` folder.
/// Inside the home only a Python installation or venv qualifies (a prefix
/// such as `~/.cargo` holds credentials beside `bin`).
pub(crate) fn tree_for(exe: &Path, home: Option<&Path>) -> Option<PathBuf> {
    let prefix = exe
        .parent()
        .filter(|d| d.file_name().is_some_and(|n| n == "bin"))
        .and_then(Path::parent)?;
    if too_wide(prefix, home) {
        return None;
    }
    let inside_home = home.is_some_and(|h| prefix.starts_with(h));
    (!inside_home || is_python_tree(prefix)).then(|| prefix.to_path_buf())
}

/// Why the exec chain can't be known at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DiscoverError {
    /// A `#!/usr/bin/env NAME` line whose NAME is not on `PATH` now. Left
    /// alone, `env` would search again inside the sandbox, where it can
    /// reach a program nobody chose (Apple's `/usr/bin/python3` stub), so
    /// the server refuses to start instead.
    EnvNotFound {
        script: PathBuf,
        line: String,
        name: String,
        /// `PATH` at start (`None`: unset).
        path: Option<String>,
    },
    /// A `#!/usr/bin/env` line that names no program at all.
    EnvWithoutProgram { script: PathBuf, line: String },
    /// The interpreter is a version manager's shim (pyenv's and asdf's are
    /// shell scripts that run the manager, mise's are links to `mise`):
    /// the manager reads its settings and versions from folders no grant
    /// covers, so the run could only fail, and it would fail without
    /// saying why.
    Shim {
        script: PathBuf,
        shim: PathBuf,
        manager: &'static str,
    },
}

impl std::fmt::Display for DiscoverError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DiscoverError::EnvNotFound {
                script,
                line,
                name,
                path,
            } => match path {
                Some(path) => write!(
                    f,
                    "{} starts with `{line}`, and `{name}` is not an executable file on PATH ({path}); \
                     put its folder on the server's PATH, or name the interpreter by absolute path in the #! line",
                    script.display()
                ),
                None => write!(
                    f,
                    "{} starts with `{line}`, and PATH is not set, so `{name}` cannot be found; \
                     set the server's PATH, or name the interpreter by absolute path in the #! line",
                    script.display()
                ),
            },
            DiscoverError::EnvWithoutProgram { script, line } => write!(
                f,
                "{} starts with `{line}`, which names no program for env to run",
                script.display()
            ),
            DiscoverError::Shim {
                script,
                shim,
                manager,
            } => {
                let name = shim
                    .file_name()
                    .map_or_else(|| "python3".into(), |n| n.to_string_lossy());
                write!(
                    f,
                    "{} is started by {}, a {manager} shim, which runs {manager} to pick the \
                     interpreter from settings the sandbox does not grant; name the real \
                     interpreter in the #! line (`{manager} which {name}` prints it), or put \
                     its folder before the shims on the server's PATH",
                    script.display(),
                    shim.display()
                )
            }
        }
    }
}

impl std::error::Error for DiscoverError {}

/// Find the backend's exec chain, as a shell would start it. What it cannot
/// read it leaves out (the run then fails visibly); an `env` line it cannot
/// resolve is an error, as the sandbox would otherwise let `env` choose.
pub fn discover(
    backend: &Path,
    home: Option<&Path>,
    path_env: Option<&str>,
) -> Result<ExecChain, DiscoverError> {
    let mut chain = ExecChain::default();
    let home_canon = home.and_then(|h| std::fs::canonicalize(h).ok());
    let home = home_canon.as_deref().or(home);
    push_unique(&mut chain.exec_files, backend.to_path_buf());
    if let Some(t) = tree_for(backend, home) {
        push_unique(&mut chain.exec_trees, t);
    }
    let mut script = backend.to_path_buf();
    for depth in 0..4 {
        let Some((literal, args)) = interpreter_line(&script, path_env)? else {
            break;
        };
        if depth == 0 && args.env {
            chain.launcher = std::iter::once(literal.display().to_string())
                .chain(args.rest.iter().cloned())
                .collect();
        }
        let Ok((resolved, hops)) = resolve_recording(&literal) else {
            break;
        };
        if let Some(manager) = shim_manager(&literal, &resolved) {
            return Err(DiscoverError::Shim {
                script: script.clone(),
                shim: literal,
                manager,
            });
        }
        for h in hops {
            push_unique(&mut chain.hops, h);
        }
        push_unique(&mut chain.exec_files, resolved.clone());
        // A venv's bin/python: the venv is part of the chain.
        if let Some(t) = tree_for(&literal, home) {
            push_unique(&mut chain.exec_trees, t);
        }
        if let Some(t) = tree_for(&resolved, home) {
            add_python_links(&mut chain, &t);
            push_unique(&mut chain.exec_trees, t);
        }
        add_homebrew_kegs(&mut chain, &resolved);
        script = resolved;
    }
    if let Some(site) = home.and_then(|h| user_site_for(backend, h)) {
        if site.is_dir() {
            push_unique(&mut chain.lib_trees, site);
        }
    }
    add_module_kegs(&mut chain);
    keep_guarded(&mut chain, home);
    Ok(chain)
}

/// Whether `interpreter` is a version manager's shim, and whose: a file in
/// a folder named `shims` (pyenv's `~/.pyenv/shims`, asdf's `~/.asdf/shims`,
/// mise's `~/.local/share/mise/shims`), or a link that resolves to `mise`
/// itself (how mise makes its shims). Pure but for `resolved`, which the
/// caller found.
pub fn shim_manager(interpreter: &Path, resolved: &Path) -> Option<&'static str> {
    let named = |p: &Path, n: &str| p.file_name().is_some_and(|f| f == n);
    if named(resolved, "mise") || named(resolved, "rtx") {
        return Some("mise");
    }
    let dir = interpreter.parent()?;
    if !named(dir, "shims") {
        return None;
    }
    let owner = dir.parent().and_then(Path::file_name);
    Some(match owner.and_then(|o| o.to_str()) {
        Some(".pyenv" | "pyenv") => "pyenv",
        Some(".asdf" | "asdf") => "asdf",
        Some("mise" | ".mise" | "rtx") => "mise",
        _ => "version manager",
    })
}

/// A `pip install --user` of a framework Python puts the backend in
/// `~/Library/Python/3.X/bin` and its packages in
/// `~/Library/Python/3.X/lib/python/site-packages`, which the interpreter
/// adds to its path only because it is the user's own site folder: the
/// folder the backend imports from. Pure.
pub fn user_site_for(backend: &Path, home: &Path) -> Option<PathBuf> {
    let rest = backend.strip_prefix(home.join("Library/Python")).ok()?;
    let mut parts = rest.components();
    let version = parts.next()?.as_os_str().to_str()?;
    let is_version = version
        .split_once('.')
        .is_some_and(|(a, b)| a == "3" && !b.is_empty() && b.bytes().all(|c| c.is_ascii_digit()));
    let in_bin = parts.next().is_some_and(|c| c.as_os_str() == "bin");
    let leaf = parts.next().is_some() && parts.next().is_none();
    (is_version && in_bin && leaf).then(|| {
        home.join("Library/Python")
            .join(version)
            .join("lib/python/site-packages")
    })
}

/// The Homebrew kegs whose libraries a Mach-O file loads through
/// `BREW/opt/NAME/...` (an extension module such as psycopg2's, linking
/// `opt/libpq/lib/libpq.5.dylib`): its load commands hold those paths as
/// plain text near the start of the file. Sorted, without repeats. Pure.
pub fn opt_kegs_named(bytes: &[u8], brew: &Path) -> Vec<String> {
    let mut needle = brew.as_os_str().as_encoded_bytes().to_vec();
    needle.extend_from_slice(b"/opt/");
    let mut out: Vec<String> = Vec::new();
    let mut at = 0;
    while let Some(i) = bytes[at..]
        .windows(needle.len())
        .position(|w| w == needle.as_slice())
    {
        let start = at + i + needle.len();
        let name: Vec<u8> = bytes[start..]
            .iter()
            .take_while(|&&b| b != b'/' && b != 0)
            .copied()
            .collect();
        let ends_in_slash = bytes.get(start + name.len()) == Some(&b'/');
        let keg_like = !name.is_empty()
            && name.len() <= 64
            && name
                .iter()
                .all(|b| b.is_ascii_alphanumeric() || b"@._+-".contains(b));
        if ends_in_slash && keg_like && name != b"." && name != b".." {
            let name = String::from_utf8_lossy(&name).into_owned();
            if !out.contains(&name) {
                out.push(name);
            }
        }
        at = start;
    }
    out.sort();
    out
}

/// How much of each extension module is read for its load commands, and
/// how many modules at most: a start-up cost bounded whatever the venv holds.
const MODULE_HEAD: u64 = 64 * 1024;
const MODULE_LIMIT: usize = 4000;

/// Extension modules (`*.so`, `*.dylib`) under `dir`, at most `limit`.
fn extension_modules(dir: &Path, limit: usize) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![(dir.to_path_buf(), 0usize)];
    while let Some((d, depth)) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let Ok(t) = e.file_type() else { continue };
            let p = e.path();
            if t.is_dir() && depth < 12 {
                todo.push((p, depth + 1));
            } else if t.is_file() && p.extension().is_some_and(|x| x == "so" || x == "dylib") {
                out.push(p);
                if out.len() >= limit {
                    return out;
                }
            }
        }
    }
    out
}

/// The site-packages folders of the chain: each tree's
/// `lib/python3.X/site-packages` and each library folder that is one.
fn site_packages(chain: &ExecChain) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for t in &chain.exec_trees {
        let Ok(entries) = std::fs::read_dir(t.join("lib")) else {
            continue;
        };
        for e in entries.flatten() {
            if e.file_name().to_string_lossy().starts_with("python3") {
                let sp = e.path().join("site-packages");
                if sp.is_dir() {
                    push_unique(&mut out, sp);
                }
            }
        }
    }
    for l in &chain.lib_trees {
        if l.file_name().is_some_and(|n| n == "site-packages") {
            push_unique(&mut out, l.clone());
        }
    }
    out
}

/// Homebrew prefixes the chain came through (a `.../Cellar/...` path's
/// prefix), and the two standard ones where they hold a Homebrew.
fn brew_prefixes(chain: &ExecChain) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for p in chain.exec_files.iter().chain(&chain.exec_trees) {
        let s = p.to_string_lossy();
        if let Some(at) = s.find("/Cellar/") {
            push_unique(&mut out, PathBuf::from(&s[..at]));
        }
    }
    for std_prefix in ["/opt/homebrew", "/usr/local"] {
        let p = PathBuf::from(std_prefix);
        if p.join("Cellar").is_dir() {
            push_unique(&mut out, p);
        }
    }
    out
}

/// Each keg an extension module of the chain links through `opt/NAME`:
/// its link as a hop and its `lib` folder as a library grant, as for the
/// interpreter's own kegs (psycopg2 and libpq, lxml and libxml2, ...).
fn add_module_kegs(chain: &mut ExecChain) {
    use std::io::Read;
    let brews = brew_prefixes(chain);
    if brews.is_empty() {
        return;
    }
    let mut kegs: Vec<(PathBuf, String)> = Vec::new();
    for sp in site_packages(chain) {
        for m in extension_modules(&sp, MODULE_LIMIT) {
            let mut head = Vec::new();
            let Ok(f) = std::fs::File::open(&m) else {
                continue;
            };
            if f.take(MODULE_HEAD).read_to_end(&mut head).is_err() {
                continue;
            }
            for b in &brews {
                for k in opt_kegs_named(&head, b) {
                    let pair = (b.clone(), k);
                    if !kegs.contains(&pair) {
                        kegs.push(pair);
                    }
                }
            }
        }
    }
    for (brew, keg) in kegs {
        let link = brew.join("opt").join(&keg);
        let Ok((target, hops)) = resolve_recording(&link) else {
            continue;
        };
        let lib = target.join("lib");
        if !lib.is_dir() {
            continue;
        }
        for h in hops {
            push_unique(&mut chain.hops, h);
        }
        push_unique(&mut chain.lib_trees, lib);
    }
}

struct ShebangArgs {
    /// The line was `#!/usr/bin/env NAME ...`.
    env: bool,
    /// The words after the interpreter (or after NAME for env).
    rest: Vec<String>,
}

type InterpreterLine = Option<(PathBuf, ShebangArgs)>;

/// The interpreter a script starts, in its literal spelling, resolving
/// `env` lines on `PATH` now. `Ok(None)`: no `#!` line (a compiled
/// program) or a file that can't be read.
fn interpreter_line(
    script: &Path,
    path_env: Option<&str>,
) -> Result<InterpreterLine, DiscoverError> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let Some(n) = std::fs::File::open(script)
        .ok()
        .and_then(|mut f| f.read(&mut head).ok())
    else {
        return Ok(None);
    };
    let head = &head[..n];
    let Some(shebang) = policy::parse_shebang(head) else {
        return Ok(None);
    };
    let line_end = head.iter().position(|&b| b == b'\n').unwrap_or(head.len());
    let line = String::from_utf8_lossy(&head[..line_end])
        .trim()
        .to_string();
    let is_env = shebang.interpreter.file_name().is_some_and(|n| n == "env");
    match policy::env_target(&shebang, head) {
        Some(name) => {
            let rest: Vec<String> = line
                .get(2..)
                .unwrap_or("")
                .split_whitespace()
                .skip_while(|w| *w != name)
                .skip(1)
                .map(str::to_string)
                .collect();
            let found = if name.contains('/') {
                Some(PathBuf::from(&name))
            } else {
                path_env
                    .and_then(|p| policy::find_on_path(Path::new(&name), std::ffi::OsStr::new(p)))
            };
            match found {
                Some(literal) if literal.is_absolute() => {
                    Ok(Some((literal, ShebangArgs { env: true, rest })))
                }
                _ => Err(DiscoverError::EnvNotFound {
                    script: script.to_path_buf(),
                    line,
                    name,
                    path: path_env.map(str::to_string),
                }),
            }
        }
        None if is_env => Err(DiscoverError::EnvWithoutProgram {
            script: script.to_path_buf(),
            line,
        }),
        None => Ok(Some((
            shebang.interpreter,
            ShebangArgs {
                env: false,
                rest: shebang.arg.into_iter().collect(),
            },
        ))),
    }
}

/// A Python installation's `lib/python3.X/site-packages` may be a symlink
/// out of it (Homebrew links it to `$(brew --prefix)/lib/python3.X`).
fn add_python_links(chain: &mut ExecChain, prefix: &Path) {
    let Ok(entries) = std::fs::read_dir(prefix.join("lib")) else {
        return;
    };
    let mut names: Vec<_> = entries
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n.to_string_lossy().starts_with("python3"))
        .collect();
    names.sort();
    for n in names {
        let sp = prefix.join("lib").join(n).join("site-packages");
        let is_link = std::fs::symlink_metadata(&sp)
            .map(|m| m.file_type().is_symlink())
            .unwrap_or(false);
        if !is_link {
            continue;
        }
        if let Ok((target, hops)) = resolve_recording(&sp) {
            for h in hops {
                push_unique(&mut chain.hops, h);
            }
            push_unique(&mut chain.lib_trees, target);
        }
    }
}

/// For an interpreter inside `PREFIX/Cellar/KEG/VERSION/`: its own keg's
/// `PREFIX/opt/KEG` link, and the `lib` folder of each keg CPython links
/// against, through its `PREFIX/opt/NAME` link.
///
/// Homebrew rewrites the install names of what it builds to `opt` paths, so
/// the interpreter loads its own framework library as
/// `PREFIX/opt/python@3.X/Frameworks/...` even when the way it was started
/// (`PREFIX/bin/python3`, a Cellar path) never crossed that link; the link
/// is added as a hop whenever it leads to the interpreter's own keg.
fn add_homebrew_kegs(chain: &mut ExecChain, resolved: &Path) {
    let s = resolved.to_string_lossy();
    let Some(at) = s.find("/Cellar/") else {
        return;
    };
    let brew = PathBuf::from(&s[..at]);
    let own_keg = Path::new(&s[at + "/Cellar/".len()..])
        .components()
        .next()
        .map(|c| c.as_os_str().to_os_string());
    if let Some(name) = own_keg {
        let link = brew.join("opt").join(name);
        if let Ok((target, hops)) = resolve_recording(&link) {
            if resolved.starts_with(&target) {
                for h in hops {
                    push_unique(&mut chain.hops, h);
                }
            }
        }
    }
    for keg in HOMEBREW_PYTHON_KEGS {
        let link = brew.join("opt").join(keg);
        let Ok((target, hops)) = resolve_recording(&link) else {
            continue;
        };
        let lib = target.join("lib");
        if !lib.is_dir() {
            continue;
        }
        for h in hops {
            push_unique(&mut chain.hops, h);
        }
        push_unique(&mut chain.lib_trees, lib);
    }
}

#[cfg(test)]
mod tests;
