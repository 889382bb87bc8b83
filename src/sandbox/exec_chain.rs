//! The exec chain of a backend: what a run must be able to read and execute
//! for the backend to start at all. Its install prefix, the interpreter a
//! `#!` line names (through `/usr/bin/env` and `PATH` too), and the system
//! folders every dynamically linked program needs, each prefix checked by
//! the one path guard so no grant exposes a home or a system folder.
//! Worked out once at start; the policy of each run only lists the result.

use std::path::{Path, PathBuf};

/// Whether a folder must never become a read+execute prefix: the one path
/// guard decides (`/`, the home and its parents, the system folders).
fn forbidden_prefix(candidate: &Path, homes: &[PathBuf]) -> bool {
    super::guard::refusal(candidate, homes).is_some()
}

/// The install prefix of a canonical executable: the parent of the `bin`
/// folder holding it (`/opt/rw/bin/rw` gives `/opt/rw`). When the executable
/// is not in a `bin` folder, or the prefix would expose a guarded folder,
/// the executable file alone is granted.
pub fn install_prefix(exe: &Path, home: Option<&Path>) -> PathBuf {
    let homes: Vec<PathBuf> = home.map(Path::to_path_buf).into_iter().collect();
    install_prefix_guarded(exe, &homes)
}

/// [`install_prefix`] against every spelling of the home folder.
///
/// Inside the home a `bin` folder's parent is granted only when it is an
/// interpreter's own tree (a Python virtual environment or installation):
/// `~/.cargo/bin/rw` must not expose `~/.cargo/credentials.toml`, nor
/// `~/.local/bin/rw` the rest of `~/.local`.
pub fn install_prefix_guarded(exe: &Path, homes: &[PathBuf]) -> PathBuf {
    let prefix = exe
        .parent()
        .filter(|dir| dir.file_name().is_some_and(|n| n == "bin"))
        .and_then(Path::parent);
    match prefix {
        Some(p)
            if !forbidden_prefix(p, homes)
                && (!inside_a_home(p, homes) || is_interpreter_tree(p)) =>
        {
            p.to_path_buf()
        }
        _ => exe.to_path_buf(),
    }
}

fn inside_a_home(p: &Path, homes: &[PathBuf]) -> bool {
    let canonical = std::fs::canonicalize(p).ok();
    homes
        .iter()
        .any(|h| p.starts_with(h) || canonical.as_deref().is_some_and(|c| c.starts_with(h)))
}

/// A Python virtual environment (`pyvenv.cfg`) or installation
/// (`lib/python3.X/os.py`): what the interpreter reads to start, and
/// nothing an owner keeps secrets in.
pub fn is_interpreter_tree(prefix: &Path) -> bool {
    if prefix.join("pyvenv.cfg").is_file() {
        return true;
    }
    std::fs::read_dir(prefix.join("lib"))
        .map(|entries| {
            entries.flatten().any(|e| {
                e.file_name().to_string_lossy().starts_with("python3")
                    && e.path().join("os.py").is_file()
            })
        })
        .unwrap_or(false)
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
    // The caller's HOME and every spelling the guard knows (canonical, and
    // the password database's), so a symlinked or unset HOME cannot hide it.
    let mut homes: Vec<PathBuf> = home.map(Path::to_path_buf).into_iter().collect();
    homes.extend(super::guard::Guard::for_this_user().homes().iter().cloned());
    let mut out: Vec<PathBuf> = Vec::new();
    push_unique(&mut out, &install_prefix_guarded(backend, &homes));
    if let Some((literal, interp)) = interpreter_of(backend, path_env) {
        // The path the `#!` line names is what the kernel opens inside the
        // run: a virtual environment's `bin/python` link, say, whose tree
        // (`pyvenv.cfg`, site-packages) the interpreter reads next.
        if let Some(literal) = literal.filter(|l| *l != interp) {
            push_unique(&mut out, &install_prefix_guarded(&literal, &homes));
        }
        push_unique(&mut out, &install_prefix_guarded(&interp, &homes));
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

/// A script's interpreter: the path its `#!` line names (with the folder
/// spelled canonically, the last component as written, so a link stays a
/// link) and the canonical program behind it.
fn interpreter_of(script: &Path, path_env: Option<&str>) -> Option<(Option<PathBuf>, PathBuf)> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(script).ok()?.read(&mut head).ok()?;
    let head = &head[..n];
    let shebang = parse_shebang(head)?;
    let target = match env_target(&shebang, head) {
        Some(name) if name.contains('/') => PathBuf::from(name),
        Some(name) => find_on_path(Path::new(&name), std::ffi::OsStr::new(path_env?))?,
        None => shebang.interpreter,
    };
    let literal = target
        .parent()
        .and_then(|d| std::fs::canonicalize(d).ok())
        .zip(target.file_name())
        .map(|(d, n)| d.join(n));
    Some((literal, std::fs::canonicalize(&target).ok()?))
}

/// Look a program name up on a `PATH` value, like a shell would, in its
/// absolute folders only: a relative entry names a folder relative to
/// wherever the server happened to start. The one lookup for the backend,
/// `#!/usr/bin/env` targets and every platform.
pub fn find_on_path(name: &Path, path_env: &std::ffi::OsStr) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::env::split_paths(path_env)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(name))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

pub(super) fn push_unique(list: &mut Vec<PathBuf>, p: &Path) {
    if !list.iter().any(|q| q == p) {
        list.push(p.to_path_buf());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn install_prefix_is_the_parent_of_bin() {
        let home = Some(Path::new("/home/u"));
        assert_eq!(
            install_prefix(Path::new("/opt/rw/bin/reachweaver"), home),
            PathBuf::from("/opt/rw")
        );
        assert_eq!(
            install_prefix(Path::new("/usr/bin/python3.11"), home),
            PathBuf::from("/usr")
        );
    }

    #[test]
    fn inside_the_home_only_an_interpreter_tree_is_a_prefix() {
        let home = tempfile::tempdir().unwrap();
        let h = std::fs::canonicalize(home.path()).unwrap();
        let mk = |rel: &str| {
            let p = h.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, b"x").unwrap();
            p
        };
        // cargo install: the executable alone, never ~/.cargo.
        mk(".cargo/credentials.toml");
        let cargo_bin = mk(".cargo/bin/reachweaver");
        assert_eq!(install_prefix(&cargo_bin, Some(&h)), cargo_bin);
        // ~/.local/bin: the executable alone.
        let local = mk(".local/bin/reachweaver");
        assert_eq!(install_prefix(&local, Some(&h)), local);
        // A virtual environment: the whole environment.
        mk("venvs/rw/pyvenv.cfg");
        let venv = mk("venvs/rw/bin/reachweaver");
        assert_eq!(install_prefix(&venv, Some(&h)), h.join("venvs/rw"));
        // A Python installation (pyenv, uv): its tree.
        mk(".pyenv/versions/3.11.7/lib/python3.11/os.py");
        let py = mk(".pyenv/versions/3.11.7/bin/python3.11");
        assert_eq!(
            install_prefix(&py, Some(&h)),
            h.join(".pyenv/versions/3.11.7")
        );
        // A folder named like one but without os.py is not.
        mk("fake/lib/python3.11/README");
        let fake = mk("fake/bin/python3");
        assert_eq!(install_prefix(&fake, Some(&h)), fake);
        // Outside the home the bin folder's parent is the prefix as before.
        let elsewhere = tempfile::tempdir().unwrap();
        let opt = std::fs::canonicalize(elsewhere.path())
            .unwrap()
            .join("bin/rw");
        assert_eq!(
            install_prefix(&opt, Some(&h)),
            opt.parent().unwrap().parent().unwrap()
        );
    }

    #[test]
    fn install_prefix_never_exposes_root_home_tmp_proc_or_run() {
        let home = Some(Path::new("/home/u"));
        let mut exes = vec![
            "/bin/reachweaver",
            "/home/u/bin/reachweaver",
            "/home/bin/reachweaver",
            "/tmp/bin/reachweaver",
            "/opt/rw/reachweaver",
        ];
        // /run and /proc are guarded by the Linux rules only: on macOS
        // they are folders like any other.
        if cfg!(target_os = "linux") {
            exes.extend(["/run/bin/reachweaver", "/proc/bin/reachweaver"]);
        }
        for exe in exes {
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
    fn runtime_paths_keep_the_virtual_environment_a_shebang_names() {
        use std::os::unix::fs::PermissionsExt;
        let home = tempfile::tempdir().unwrap();
        let h = std::fs::canonicalize(home.path()).unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let py_bin = std::fs::canonicalize(elsewhere.path())
            .unwrap()
            .join("py/bin");
        std::fs::create_dir_all(&py_bin).unwrap();
        let real = py_bin.join("python3.11");
        std::fs::write(&real, b"\x7fELF").unwrap();
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::create_dir_all(h.join("venv/bin")).unwrap();
        std::fs::write(h.join("venv/pyvenv.cfg"), b"home = x\n").unwrap();
        std::os::unix::fs::symlink(&real, h.join("venv/bin/python")).unwrap();
        std::fs::create_dir_all(h.join("bin")).unwrap();
        let script = h.join("bin/rw");
        std::fs::write(
            &script,
            format!("#!{}\n", h.join("venv/bin/python").display()),
        )
        .unwrap();
        let got = runtime_paths(&script, Some(&h), None, &[]);
        assert_eq!(got[0], script, "inside the home: the script alone");
        assert!(got.contains(&h.join("venv")), "{got:?}");
        assert!(got.contains(&real), "{got:?}");
        assert!(!got.iter().any(|p| p == &h), "{got:?}");
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
