//! Installation layouts discovery knows: the Homebrew kegs a Python links
//! against through `opt/`, a site-packages folder linked out of its
//! installation, and the kegs an extension module's load commands name.

use std::path::{Path, PathBuf};

use super::paths::resolve_recording;
use super::{push_unique, ExecChain};

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
pub(super) fn add_module_kegs(chain: &mut ExecChain) {
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

/// A Python installation's `lib/python3.X/site-packages` may be a symlink
/// out of it (Homebrew links it to `$(brew --prefix)/lib/python3.X`).
pub(super) fn add_python_links(chain: &mut ExecChain, prefix: &Path) {
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
pub(super) fn add_homebrew_kegs(chain: &mut ExecChain, resolved: &Path) {
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
