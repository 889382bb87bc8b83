//! Discovery, at start: how the backend starts (its `#!` interpreters, the
//! links on the way, the trees they live in), read from the file system and
//! kept as plain data; nothing here decides a run's grants.

use std::path::{Path, PathBuf};

use super::layouts::{add_homebrew_kegs, add_module_kegs, add_python_links};
use super::paths::{canonical, resolve_recording};
use super::{push_unique, ExecChain};
use crate::sandbox::guard::{self, System};
use crate::sandbox::policy;

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
    guard::refusal_on(System::MacOs, &canonical(p), &homes).is_none()
}

/// Paths that must never become a tree grant: whatever the path guard
/// refuses (`/`, the home and anything above it, the shared temp folders,
/// `/Library`, `/Users`, ...) and the shared install prefixes.
pub(super) fn too_wide(p: &Path, home: Option<&Path>) -> bool {
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
