//! Path confinement against a fixed root that holds symlinks pointing out
//! (to a folder and to a file, absolute and relative), a symlink loop, a
//! dangling link and links that stay inside.
//!
//! Invariants: every accepted path is absolute, canonical, exists and lies
//! inside the canonical root; a value whose real target lies inside the
//! root (and that is not refused by spelling) is accepted; every refusal has
//! one of the three documented codes.

#![no_main]

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use reachweaver_mcp::confine::{confine, Root};
use reachweaver_mcp::protect::Protected;

struct Fixture {
    _dir: tempfile::TempDir,
    root: Root,
    protected: Protected,
    base: PathBuf,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir");
        let base = dir.path().canonicalize().expect("canonical");
        let root = base.join("root");
        let outside = base.join("outside");
        fs::create_dir_all(root.join("sub/deeper")).expect("folders");
        fs::create_dir_all(&outside).expect("folder");
        fs::write(root.join("a.txt"), "a").expect("file");
        fs::write(root.join("sub/b.txt"), "b").expect("file");
        fs::write(outside.join("secret"), "s").expect("file");
        fs::write(base.join("a.txt"), "beside the root").expect("file");
        symlink(&outside, root.join("out")).expect("link");
        symlink(outside.join("secret"), root.join("secret-link")).expect("link");
        symlink("../../outside", root.join("sub/up")).expect("link");
        symlink("../root2", root.join("sibling")).expect("link");
        fs::create_dir_all(base.join("root2")).expect("folder");
        symlink("loop", root.join("loop")).expect("link");
        symlink(base.join("nowhere"), root.join("dangle")).expect("link");
        symlink("sub", root.join("in")).expect("link");
        symlink("/", root.join("slash")).expect("link");
        let root = Root::new(&root).expect("root");
        let protected = Protected::new(&[], &[]).expect("default patterns");
        Fixture {
            _dir: dir,
            root,
            protected,
            base,
        }
    })
}

const TOKENS: [&str; 18] = [
    "..",
    ".",
    "sub",
    "out",
    "secret-link",
    "up",
    "loop",
    "dangle",
    "in",
    "a.txt",
    "b.txt",
    "deeper",
    "sibling",
    "slash",
    "secret",
    "",
    "~",
    "-",
];

/// Build a path from tokens (first byte < 0x80) or take the bytes as text.
fn spelling(data: &[u8], f: &Fixture) -> Option<String> {
    let (&mode, rest) = data.split_first()?;
    if mode >= 0x80 {
        return std::str::from_utf8(rest).ok().map(str::to_string);
    }
    let mut parts: Vec<String> = rest
        .iter()
        .take(24)
        .map(|b| TOKENS[usize::from(*b) % TOKENS.len()].to_string())
        .collect();
    match mode % 4 {
        0 => {}
        1 => parts.insert(0, f.root.path().display().to_string()),
        2 => parts.insert(0, f.base.display().to_string()),
        _ => parts.insert(0, String::new()), // leading "/"
    }
    Some(parts.join("/"))
}

fuzz_target!(|data: &[u8]| {
    let f = fixture();
    let Some(raw) = spelling(data, f) else {
        return;
    };
    let root = f.root.path();
    match confine(&f.root, &f.protected, "file", &raw) {
        Ok(p) => {
            let p = Path::new(p.as_str());
            assert!(p.is_absolute(), "{raw:?} -> {p:?}");
            assert!(p.starts_with(root), "{raw:?} escaped to {p:?}");
            let again = p.canonicalize().expect("an accepted path exists");
            assert_eq!(again, p, "{raw:?}: accepted path is not canonical");
            assert!(!raw.is_empty() && !raw.starts_with('~') && raw != "-");
        }
        Err(e) if e.code() == "path_protected" => {
            // Only a protected spelling or target is refused as protected.
            let target = root.join(&raw).canonicalize().ok();
            assert!(
                f.protected.reason(root, &root.join(&raw)).is_some()
                    || target.is_some_and(|t| f.protected.reason(root, &t).is_some()),
                "{raw:?} refused as protected without a reason"
            );
        }
        Err(e) => {
            assert!(
                ["invalid_argument", "path_outside_root", "path_not_found"].contains(&e.code()),
                "{raw:?}: code {}",
                e.code()
            );
            // A spelling that stays inside and whose real target is inside
            // must not be refused.
            let refused_by_spelling =
                raw.is_empty() || raw.starts_with('~') || raw == "-" || raw.contains('\0');
            let lexical_inside = lexically_inside(&root.join(&raw), root);
            if let Ok(real) = root.join(&raw).canonicalize() {
                if real.starts_with(root) && lexical_inside && !refused_by_spelling {
                    panic!("{raw:?} resolves inside ({real:?}) but was refused: {e}");
                }
            }
        }
    }
});

/// `.`/`..` applied to the spelling only, as a reader of the path would.
fn lexically_inside(p: &Path, root: &Path) -> bool {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out.starts_with(root)
}
