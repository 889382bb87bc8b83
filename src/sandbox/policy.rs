//! The policy of one sandboxed run, as plain data.
//!
//! The server builds it once per run with [`build`], a pure function of the
//! options fixed at start, the run kind, the paths found at start and the
//! server's environment; the helper child receives it serialized and applies
//! it without further decisions. Keeping every choice here (which paths, which
//! rights, which variables) makes the whole grant readable and testable in one
//! place, apart from the system calls that enforce it.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{RunKind, SandboxOptions};

/// Limits applied with `setrlimit` before the program starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rlimits {
    /// Largest core file (0: none, so a crash leaves nothing readable behind).
    pub core: u64,
    /// Address space in bytes.
    pub address_space: u64,
    /// Largest file the run may write, in bytes.
    pub file_size: u64,
    /// Open descriptors.
    pub open_files: u64,
    /// Processes and threads of the run's user (counted per user namespace).
    pub processes: u64,
}

impl Default for Rlimits {
    fn default() -> Self {
        Rlimits {
            core: 0,
            address_space: 4 << 30,
            file_size: 64 << 20,
            open_files: 256,
            processes: 256,
        }
    }
}

/// Which layers the helper applies. Each switch is decided at start (what
/// the kernel offers, minus what the owner switched off); the helper treats
/// a switched-on layer that does not apply as a failure of the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Layers {
    pub userns: bool,
    pub netns: bool,
    pub ipcns: bool,
    pub pidns: bool,
    /// Highest process id inside the PID namespace (per-namespace `pid_max`),
    /// which bounds the run's process count whatever its uid.
    pub pid_max: Option<u32>,
    /// Forbid nested namespaces through the user namespace's own counters.
    pub ns_limits: bool,
    /// The Landlock ABI every handled right must be enforced at (`None`: no Landlock).
    pub landlock_abi: Option<i32>,
    /// Landlock TCP bind/connect denial (ABI 4).
    pub landlock_net: bool,
    /// Landlock abstract-socket and signal scoping (ABI 6).
    pub landlock_scope: bool,
    pub seccomp: bool,
    pub caps: bool,
    pub rlimits: bool,
}

/// The complete, serializable policy of one run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Policy {
    /// The canonical program to execute.
    pub program: PathBuf,
    /// Its argv, `argv[0]` included.
    pub argv: Vec<String>,
    /// The environment the program starts with, and nothing else.
    pub env: Vec<(String, String)>,
    pub cwd: PathBuf,
    /// Read and execute beneath these.
    pub read_exec: Vec<PathBuf>,
    /// Read (no execute) beneath these.
    pub read: Vec<PathBuf>,
    /// Read and write (no execute) beneath these.
    pub read_write: Vec<PathBuf>,
    /// The run's private temporary folder (also in `read_write`).
    pub tmpdir: PathBuf,
    pub layers: Layers,
    pub rlimits: Rlimits,
    /// The server's pid: the helper checks it is still its parent after
    /// arming the parent-death signal, which closes the race where the
    /// server dies first.
    pub parent_pid: u32,
}

/// Everything [`build`] needs besides the options: found once at start or
/// made per run by the caller.
#[derive(Debug, Clone)]
pub struct BuildInput<'a> {
    pub opts: &'a SandboxOptions,
    pub kind: RunKind,
    /// Runtime paths (read+execute), found at start by `runtime_paths`.
    pub runtime: &'a [PathBuf],
    /// The server's own environment.
    pub env: &'a [(String, String)],
    pub layers: Layers,
    pub tmpdir: &'a Path,
    pub argv: &'a [String],
    pub cwd: &'a Path,
    pub parent_pid: u32,
}

/// Device files every run may use: `/dev/null` for discarding output, the
/// random sources for seeding.
const READ_DEVICES: &[&str] = &["/dev/zero", "/dev/random", "/dev/urandom"];
const WRITE_DEVICES: &[&str] = &["/dev/null"];

/// Build the policy of one run. Pure: the same input always gives the same
/// policy, and no file is touched.
pub fn build(input: &BuildInput<'_>) -> Policy {
    let opts = input.opts;
    let mut read_exec: Vec<PathBuf> = input.runtime.to_vec();
    push_unique(&mut read_exec, &opts.backend);

    let mut read: Vec<PathBuf> = Vec::new();
    push_unique(&mut read, &opts.root);
    for p in &opts.read {
        push_unique(&mut read, p);
    }
    if let Some(db) = &opts.db {
        push_unique(&mut read, db);
    }
    for d in READ_DEVICES {
        push_unique(&mut read, Path::new(d));
    }

    let mut read_write: Vec<PathBuf> = vec![input.tmpdir.to_path_buf()];
    for d in WRITE_DEVICES {
        push_unique(&mut read_write, Path::new(d));
    }
    if input.kind == RunKind::Draft {
        if let Some(folder) = opts.db.as_deref().and_then(Path::parent) {
            push_unique(&mut read_write, folder);
        }
    }

    Policy {
        program: input
            .argv
            .first()
            .map(PathBuf::from)
            .unwrap_or_else(|| opts.backend.clone()),
        argv: input.argv.to_vec(),
        env: build_env(input.env, &opts.pass_env, input.tmpdir),
        cwd: input.cwd.to_path_buf(),
        read_exec,
        read,
        read_write,
        tmpdir: input.tmpdir.to_path_buf(),
        layers: input.layers,
        rlimits: Rlimits::default(),
        parent_pid: input.parent_pid,
    }
}

fn push_unique(list: &mut Vec<PathBuf>, p: &Path) {
    if !list.iter().any(|q| q == p) {
        list.push(p.to_path_buf());
    }
}

/// The run's environment: a few locale and path variables, non-secret
/// `REACHWEAVER_*` ones, the owner's `--pass-env` names, and `TMPDIR`
/// pointing at the private folder. Variables that change how a loader or
/// interpreter behaves are never passed, not even by name.
pub fn build_env(
    server_env: &[(String, String)],
    pass: &[String],
    tmpdir: &Path,
) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for (name, value) in server_env {
        if name == "TMPDIR" || is_loader_or_interpreter_hook(name) {
            continue;
        }
        let passed_by_name = pass.iter().any(|p| p == name);
        let keep = passed_by_name || (is_default_kept(name) && !is_secret_name(name));
        if keep && !out.iter().any(|(n, _)| n == name) {
            out.push((name.clone(), value.clone()));
        }
    }
    out.push(("TMPDIR".to_string(), tmpdir.to_string_lossy().into_owned()));
    out
}

fn is_default_kept(name: &str) -> bool {
    matches!(name, "PATH" | "HOME" | "LANG" | "TZ")
        || name.starts_with("LC_")
        || name.starts_with("REACHWEAVER_")
}

/// Variables that make a dynamic loader or an interpreter run code or load
/// files the backend did not choose.
pub fn is_loader_or_interpreter_hook(name: &str) -> bool {
    const EXACT: &[&str] = &[
        "NODE_OPTIONS",
        "NODE_PATH",
        "BASH_ENV",
        "ENV",
        "GLIBC_TUNABLES",
        "GCONV_PATH",
        "HOSTALIASES",
        "LOCPATH",
        "NLSPATH",
        "RUBYOPT",
        "RUBYLIB",
        "PERL5OPT",
        "PERL5LIB",
        "PERLLIB",
        "JAVA_TOOL_OPTIONS",
        "_JAVA_OPTIONS",
        "MALLOC_CHECK_",
        "MALLOC_PERTURB_",
    ];
    const PREFIXES: &[&str] = &["LD_", "PYTHON", "DYLD_"];
    EXACT.contains(&name) || PREFIXES.iter().any(|p| name.starts_with(p))
}

/// One rule for "secret-named" everywhere: the environment filter here and
/// redaction of results must never disagree.
pub use crate::redact::is_secret_name;

/// Folders that must never become a read+execute prefix: granting one of
/// them (or an ancestor of one) would open the user's files, other runs'
/// temporary files, or process information.
fn forbidden_prefix(candidate: &Path, home: Option<&Path>) -> bool {
    let mut guarded: Vec<&Path> = vec![Path::new("/proc"), Path::new("/tmp"), Path::new("/run")];
    if let Some(h) = home {
        guarded.push(h);
    }
    candidate == Path::new("/") || guarded.iter().any(|g| g.starts_with(candidate))
}

/// The install prefix of a canonical executable: the parent of the `bin`
/// folder holding it (`/opt/rw/bin/rw` gives `/opt/rw`). When the executable
/// is not in a `bin` folder, or the prefix would expose a guarded folder,
/// the executable file alone is granted.
pub fn install_prefix(exe: &Path, home: Option<&Path>) -> PathBuf {
    let prefix = exe
        .parent()
        .filter(|dir| dir.file_name().is_some_and(|n| n == "bin"))
        .and_then(Path::parent);
    match prefix {
        Some(p) if !forbidden_prefix(p, home) => p.to_path_buf(),
        _ => exe.to_path_buf(),
    }
}

/// The interpreter named by a `#!` line, and its first argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shebang {
    pub interpreter: PathBuf,
    pub arg: Option<String>,
}

/// Parse the first line of a script. Returns `None` for anything that is
/// not a `#!` line naming an absolute interpreter.
pub fn parse_shebang(head: &[u8]) -> Option<Shebang> {
    let rest = head.strip_prefix(b"#!")?;
    let line_end = rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
    let line = std::str::from_utf8(&rest[..line_end]).ok()?;
    let mut words = line.split_whitespace();
    let interpreter = words.next()?;
    if !interpreter.starts_with('/') {
        return None;
    }
    let arg = words.next().map(str::to_string);
    Some(Shebang {
        interpreter: PathBuf::from(interpreter),
        arg,
    })
}

/// For `#!/usr/bin/env NAME`, the program name `env` looks up (skipping
/// `env` options such as `-S`).
pub fn env_target(shebang: &Shebang, head: &[u8]) -> Option<String> {
    if shebang.interpreter.file_name()? != "env" {
        return None;
    }
    let rest = head.strip_prefix(b"#!")?;
    let line_end = rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
    let line = std::str::from_utf8(&rest[..line_end]).ok()?;
    line.split_whitespace()
        .skip(1)
        .find(|w| !w.starts_with('-') && !w.contains('='))
        .map(str::to_string)
}

/// System folders and files every dynamically linked program needs.
pub const SYSTEM_PATHS: &[&str] = &[
    "/usr",
    "/lib",
    "/lib32",
    "/lib64",
    "/bin",
    "/sbin",
    "/etc/ld.so.cache",
    "/etc/localtime",
];

/// The read+execute runtime paths for a backend: its install prefix, its
/// script interpreter's prefix, the system folders and `--allow-read`.
/// Reads the backend's first line (for `#!`) and resolves names on `PATH`,
/// so this runs once at start, not per call.
pub fn runtime_paths(
    backend: &Path,
    home: Option<&Path>,
    path_env: Option<&str>,
    allow_read: &[PathBuf],
) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    push_unique(&mut out, &install_prefix(backend, home));
    if let Some(interp) = interpreter_of(backend, path_env) {
        push_unique(&mut out, &install_prefix(&interp, home));
        push_unique(&mut out, &interp);
    }
    for p in SYSTEM_PATHS {
        let p = Path::new(p);
        if p.exists() {
            push_unique(&mut out, p);
        }
    }
    for p in allow_read {
        push_unique(&mut out, p);
    }
    out
}

fn interpreter_of(script: &Path, path_env: Option<&str>) -> Option<PathBuf> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(script).ok()?.read(&mut head).ok()?;
    let head = &head[..n];
    let shebang = parse_shebang(head)?;
    let target = match env_target(&shebang, head) {
        Some(name) if name.contains('/') => PathBuf::from(name),
        Some(name) => find_on_path(&name, path_env?)?,
        None => shebang.interpreter,
    };
    std::fs::canonicalize(target).ok()
}

/// Look a program name up on a `PATH` value, like a shell would.
pub fn find_on_path(name: &str, path_env: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    path_env
        .split(':')
        .filter(|d| !d.is_empty())
        .map(|d| Path::new(d).join(name))
        .find(|p| {
            std::fs::metadata(p)
                .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                .unwrap_or(false)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    fn names(v: &[(String, String)]) -> Vec<&str> {
        v.iter().map(|(n, _)| n.as_str()).collect()
    }

    fn opts() -> SandboxOptions {
        SandboxOptions {
            backend: PathBuf::from("/opt/rw/bin/reachweaver"),
            root: PathBuf::from("/srv/work"),
            read: vec![
                PathBuf::from("/srv/rw-home"),
                PathBuf::from("/srv/rw-home/accounts.yaml"),
            ],
            db: Some(PathBuf::from("/srv/rw-home/db/reachweaver.db")),
            allow_read: vec![],
            pass_env: vec![
                "OPENAI_API_KEY".into(),
                "LD_PRELOAD".into(),
                "EDITOR".into(),
            ],
            ..SandboxOptions::default()
        }
    }

    fn build_for(kind: RunKind) -> Policy {
        let o = opts();
        let runtime = vec![PathBuf::from("/opt/rw"), PathBuf::from("/usr")];
        let server_env = env(&[("PATH", "/usr/bin"), ("HOME", "/home/u")]);
        let argv = vec!["/opt/rw/bin/reachweaver".to_string(), "doctor".to_string()];
        build(&BuildInput {
            opts: &o,
            kind,
            runtime: &runtime,
            env: &server_env,
            layers: Layers::default(),
            tmpdir: Path::new("/tmp/rw-run-1"),
            argv: &argv,
            cwd: Path::new("/srv/work"),
            parent_pid: 42,
        })
    }

    #[test]
    fn read_only_policy_grants_reads_and_only_the_temp_folder_for_writing() {
        let p = build_for(RunKind::ReadOnly);
        assert_eq!(p.program, PathBuf::from("/opt/rw/bin/reachweaver"));
        assert_eq!(p.argv, vec!["/opt/rw/bin/reachweaver", "doctor"]);
        assert_eq!(p.cwd, PathBuf::from("/srv/work"));
        assert_eq!(
            p.read_exec,
            vec![
                PathBuf::from("/opt/rw"),
                PathBuf::from("/usr"),
                PathBuf::from("/opt/rw/bin/reachweaver")
            ]
        );
        assert_eq!(
            p.read,
            [
                "/srv/work",
                "/srv/rw-home",
                "/srv/rw-home/accounts.yaml",
                "/srv/rw-home/db/reachweaver.db",
                "/dev/zero",
                "/dev/random",
                "/dev/urandom"
            ]
            .iter()
            .map(PathBuf::from)
            .collect::<Vec<_>>()
        );
        assert_eq!(
            p.read_write,
            vec![PathBuf::from("/tmp/rw-run-1"), PathBuf::from("/dev/null")]
        );
        assert_eq!(p.tmpdir, PathBuf::from("/tmp/rw-run-1"));
        assert_eq!(p.parent_pid, 42);
        assert_eq!(p.rlimits, Rlimits::default());
    }

    #[test]
    fn draft_policy_adds_the_database_folder_for_writing() {
        let p = build_for(RunKind::Draft);
        assert_eq!(
            p.read_write,
            vec![
                PathBuf::from("/tmp/rw-run-1"),
                PathBuf::from("/dev/null"),
                PathBuf::from("/srv/rw-home/db")
            ]
        );
    }

    #[test]
    fn policy_survives_a_json_round_trip() {
        let p = build_for(RunKind::Draft);
        let text = serde_json::to_string(&p).unwrap();
        let back: Policy = serde_json::from_str(&text).unwrap();
        assert_eq!(p, back);
    }

    #[test]
    fn env_keeps_locale_paths_and_reachweaver_settings() {
        let server = env(&[
            ("PATH", "/usr/bin:/bin"),
            ("HOME", "/home/u"),
            ("LANG", "C.UTF-8"),
            ("LC_ALL", "C"),
            ("TZ", "UTC"),
            ("TMPDIR", "/var/tmp"),
            ("REACHWEAVER_MODE", "quiet"),
            ("USER", "u"),
            ("SSH_AUTH_SOCK", "/run/user/1000/ssh"),
            ("DISPLAY", ":0"),
        ]);
        let out = build_env(&server, &[], Path::new("/tmp/rw-run-9"));
        assert_eq!(
            names(&out),
            vec![
                "PATH",
                "HOME",
                "LANG",
                "LC_ALL",
                "TZ",
                "REACHWEAVER_MODE",
                "TMPDIR"
            ]
        );
        assert_eq!(out.last().unwrap().1, "/tmp/rw-run-9");
    }

    #[test]
    fn env_drops_loader_and_interpreter_hooks_even_when_passed_by_name() {
        let server = env(&[
            ("LD_PRELOAD", "/tmp/evil.so"),
            ("LD_LIBRARY_PATH", "/tmp"),
            ("PYTHONPATH", "/tmp"),
            ("PYTHONSTARTUP", "/tmp/x.py"),
            ("NODE_OPTIONS", "--require /tmp/x.js"),
            ("BASH_ENV", "/tmp/x.sh"),
            ("GLIBC_TUNABLES", "x"),
            ("EDITOR", "vi"),
        ]);
        let pass: Vec<String> = [
            "LD_PRELOAD",
            "PYTHONPATH",
            "NODE_OPTIONS",
            "BASH_ENV",
            "EDITOR",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let out = build_env(&server, &pass, Path::new("/t"));
        assert_eq!(names(&out), vec!["EDITOR", "TMPDIR"]);
    }

    #[test]
    fn env_drops_secret_names_unless_passed_by_name() {
        let server = env(&[
            ("REACHWEAVER_API_TOKEN", "abcdefgh12345"),
            ("REACHWEAVER_DB_PASSWORD", "hunter2hunter2"),
            ("REACHWEAVER_PROFILE", "default"),
            ("OPENAI_API_KEY", "sk-xxxxxxxx"),
            ("GITHUB_TOKEN", "ghp_xxxxxxxx"),
        ]);
        let out = build_env(&server, &["OPENAI_API_KEY".to_string()], Path::new("/t"));
        assert_eq!(
            names(&out),
            vec!["REACHWEAVER_PROFILE", "OPENAI_API_KEY", "TMPDIR"]
        );
        let out = build_env(
            &server,
            &["REACHWEAVER_API_TOKEN".to_string()],
            Path::new("/t"),
        );
        assert_eq!(
            names(&out),
            vec!["REACHWEAVER_API_TOKEN", "REACHWEAVER_PROFILE", "TMPDIR"]
        );
    }

    #[test]
    fn secret_names_follow_the_word_rule() {
        for s in [
            "GITHUB_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "DB_PASSWORD",
            "MY_PASSWD",
            "X_APIKEY",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "SESSION_COOKIE",
            "OPENAI_API_KEY",
            "SSH_PRIVATE_KEY_FILE",
            "AWS_ACCESS_KEY_ID",
            "MY_AUTH_TOKEN",
            "token",
        ] {
            assert!(is_secret_name(s), "{s} should be secret");
        }
        for s in [
            "GIT_AUTHOR_NAME",
            "DESKTOP_SESSION",
            "TOKENIZER_PATH",
            "PATH",
            "REACHWEAVER_HOME",
            "KEYBOARD",
        ] {
            assert!(!is_secret_name(s), "{s} should not be secret");
        }
    }

    #[test]
    fn install_prefix_is_the_parent_of_bin() {
        let home = Some(Path::new("/home/u"));
        assert_eq!(
            install_prefix(Path::new("/opt/rw/bin/reachweaver"), home),
            PathBuf::from("/opt/rw")
        );
        assert_eq!(
            install_prefix(Path::new("/home/u/venvs/rw/bin/reachweaver"), home),
            PathBuf::from("/home/u/venvs/rw")
        );
        assert_eq!(
            install_prefix(Path::new("/usr/bin/python3.11"), home),
            PathBuf::from("/usr")
        );
    }

    #[test]
    fn install_prefix_never_exposes_root_home_tmp_proc_or_run() {
        let home = Some(Path::new("/home/u"));
        for exe in [
            "/bin/reachweaver",
            "/home/u/bin/reachweaver",
            "/home/bin/reachweaver",
            "/tmp/bin/reachweaver",
            "/run/bin/reachweaver",
            "/proc/bin/reachweaver",
            "/opt/rw/reachweaver",
        ] {
            assert_eq!(
                install_prefix(Path::new(exe), home),
                PathBuf::from(exe),
                "{exe}"
            );
        }
        // A folder below /tmp (not /tmp itself) is a fine prefix.
        assert_eq!(
            install_prefix(Path::new("/tmp/x/bin/rw"), home),
            PathBuf::from("/tmp/x")
        );
    }

    #[test]
    fn shebang_lines_are_parsed() {
        assert_eq!(
            parse_shebang(b"#!/usr/bin/python3 -I\nprint(1)\n"),
            Some(Shebang {
                interpreter: PathBuf::from("/usr/bin/python3"),
                arg: Some("-I".into())
            })
        );
        assert_eq!(
            parse_shebang(b"#! /bin/sh\n"),
            Some(Shebang {
                interpreter: PathBuf::from("/bin/sh"),
                arg: None
            })
        );
        assert_eq!(parse_shebang(b"\x7fELF\x02\x01"), None);
        assert_eq!(parse_shebang(b"#!python3\n"), None);
        assert_eq!(parse_shebang(b""), None);
    }

    #[test]
    fn env_shebang_names_the_program_to_look_up() {
        let head = b"#!/usr/bin/env python3\n";
        let sb = parse_shebang(head).unwrap();
        assert_eq!(env_target(&sb, head), Some("python3".into()));
        let head = b"#!/usr/bin/env -S PYTHONSAFEPATH=1 python3 -I\n";
        let sb = parse_shebang(head).unwrap();
        assert_eq!(env_target(&sb, head), Some("python3".into()));
        let head = b"#!/bin/sh\n";
        let sb = parse_shebang(head).unwrap();
        assert_eq!(env_target(&sb, head), None);
    }

    #[test]
    fn runtime_paths_follow_an_env_shebang_on_path() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("prefix/bin");
        std::fs::create_dir_all(&bin).unwrap();
        let interp_bin = dir.path().join("py/bin");
        std::fs::create_dir_all(&interp_bin).unwrap();
        let interp = interp_bin.join("fakepython");
        std::fs::write(&interp, b"\x7fELF").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&interp, std::fs::Permissions::from_mode(0o755)).unwrap();
        let script = bin.join("rw");
        std::fs::write(&script, b"#!/usr/bin/env fakepython\n").unwrap();
        let path_env = format!("/nonexistent:{}", interp_bin.display());
        let got = runtime_paths(
            &script,
            None,
            Some(&path_env),
            &[PathBuf::from("/opt/extra")],
        );
        let canon_interp = std::fs::canonicalize(&interp).unwrap();
        let canon_prefix = canon_interp
            .parent()
            .unwrap()
            .parent()
            .unwrap()
            .to_path_buf();
        assert_eq!(got[0], dir.path().join("prefix"));
        assert_eq!(got[1], canon_prefix);
        assert_eq!(got[2], canon_interp);
        assert!(got.contains(&PathBuf::from("/usr")));
        assert_eq!(got.last().unwrap(), &PathBuf::from("/opt/extra"));
        assert!(!got.iter().any(|p| p == Path::new("/")));
    }
}
