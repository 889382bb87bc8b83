//! File arguments -> [`ConfinedPath`] inside the root folder (docs/BACKEND.md, Arguments).
//!
//! A `ConfinedPath` can only be built here, so a value that reaches the
//! backend as a path has been resolved (symlinks followed) and checked to lie
//! beneath the canonical root. The kernel sandbox enforces the same boundary
//! again; this check exists so that a model gets a clear error it can act on
//! instead of a denied read, and so that no path the owner didn't share is
//! ever named to the backend. Protected files (see `protect.rs`) are refused
//! here too, by spelling and by what the path resolves to.

use std::io;
use std::path::{Path, PathBuf};

use crate::error::{ErrorCode, ToolError};
use crate::protect::Protected;

/// The canonical root folder that file arguments must stay inside.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Root {
    canonical: PathBuf,
}

impl Root {
    /// Canonicalize `path`; it must be an existing folder other than `/`.
    pub fn new(path: &Path) -> Result<Root, RootError> {
        let canonical = path
            .canonicalize()
            .map_err(|e| RootError::Unusable(path.to_path_buf(), e))?;
        if !canonical.is_dir() {
            return Err(RootError::NotAFolder(canonical));
        }
        if canonical == Path::new("/") {
            return Err(RootError::IsSlash);
        }
        Ok(Root { canonical })
    }

    pub fn path(&self) -> &Path {
        &self.canonical
    }
}

#[derive(Debug)]
pub enum RootError {
    Unusable(PathBuf, io::Error),
    NotAFolder(PathBuf),
    IsSlash,
}

impl std::fmt::Display for RootError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RootError::Unusable(p, e) => write!(f, "the root folder {} cannot be used: {e}", p.display()),
            RootError::NotAFolder(p) => write!(f, "the root {} is not a folder", p.display()),
            RootError::IsSlash => write!(
                f,
                "a root of / would share every file on this machine; pass --root with a smaller folder"
            ),
        }
    }
}

impl std::error::Error for RootError {}

/// A canonical absolute path beneath the root, as UTF-8 for the backend's argv.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfinedPath(String);

impl ConfinedPath {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Tests of later steps need a path without a filesystem behind it.
    #[cfg(test)]
    pub(crate) fn for_test(path: &str) -> Self {
        ConfinedPath(path.to_string())
    }
}

/// Resolve the value given for `property` to a path inside `root` that is
/// not protected.
pub fn confine(
    root: &Root,
    protected: &Protected,
    property: &str,
    raw: &str,
) -> Result<ConfinedPath, ToolError> {
    if raw.is_empty() {
        return Err(ToolError::new(
            ErrorCode::InvalidArgument,
            format!("`{property}` is empty; give a file path inside the root folder."),
        ));
    }
    if raw.starts_with('~') {
        return Err(ToolError::new(
            ErrorCode::InvalidArgument,
            format!("`{property}` starts with `~`, which is not expanded; give a path relative to the root folder instead."),
        ));
    }
    if raw == "-" {
        return Err(ToolError::new(
            ErrorCode::InvalidArgument,
            format!("`{property}` is `-` (standard input), which no tool can read; give a file path inside the root folder."),
        ));
    }
    if raw.contains('\0') {
        return Err(ToolError::new(
            ErrorCode::InvalidArgument,
            format!("`{property}` contains a NUL byte; remove it."),
        ));
    }

    let outside = || {
        ToolError::new(
            ErrorCode::PathOutsideRoot,
            format!(
                "`{property}` points outside the root folder {}; give a path inside it, for example relative to it.",
                root.path().display()
            ),
        )
    };

    let joined = root.path().join(raw);
    // Refuse what is outside by its spelling before touching the filesystem,
    // so whether a file outside the root exists is never revealed.
    let spelled = crate::sandbox::guard::normalize(&joined);
    if !spelled.starts_with(root.path()) {
        return Err(outside());
    }
    // Likewise a protected name is refused before its existence is checked.
    protected.check_spelling(root.path(), property, &spelled)?;
    let canonical = joined.canonicalize().map_err(|e| match e.kind() {
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory => ToolError::new(
            ErrorCode::PathNotFound,
            format!("`{property}`: there is no file `{raw}` inside the root folder; check the name (relative paths are taken from the root)."),
        ),
        _ => ToolError::new(
            ErrorCode::InvalidArgument,
            format!("`{property}`: `{raw}` cannot be resolved ({e})."),
        ),
    })?;
    if !canonical.starts_with(root.path()) {
        return Err(outside());
    }
    protected.check(root.path(), property, &canonical)?;
    canonical
        .into_os_string()
        .into_string()
        .map(ConfinedPath)
        .map_err(|_| {
            ToolError::new(
                ErrorCode::InvalidArgument,
                format!(
                    "`{property}` resolves to a path that is not valid UTF-8; rename the file."
                ),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::symlink;

    struct Fixture {
        _dir: tempfile::TempDir,
        root: Root,
        protected: Protected,
        outside: PathBuf,
    }

    fn fixture() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let root_dir = base.join("root");
        fs::create_dir_all(root_dir.join("sub")).unwrap();
        fs::write(root_dir.join("sub/plan.yaml"), "x").unwrap();
        fs::write(root_dir.join("top.txt"), "x").unwrap();
        let outside = base.join("secret.txt");
        fs::write(&outside, "s").unwrap();
        symlink(&outside, root_dir.join("sub/escape")).unwrap();
        symlink(root_dir.join("top.txt"), root_dir.join("sub/inner-link")).unwrap();
        fs::create_dir_all(root_dir.join(".ssh")).unwrap();
        fs::write(root_dir.join(".ssh/id_ed25519"), "k").unwrap();
        fs::write(root_dir.join("accounts.yaml"), "token: t").unwrap();
        symlink(
            root_dir.join(".ssh/id_ed25519"),
            root_dir.join("sub/key-link"),
        )
        .unwrap();
        symlink(
            root_dir.join("accounts.yaml"),
            root_dir.join("sub/accounts-link"),
        )
        .unwrap();
        let protected =
            Protected::new(&[], &[("accounts", &root_dir.join("accounts.yaml"))]).unwrap();
        Fixture {
            root: Root::new(&root_dir).unwrap(),
            protected,
            outside,
            _dir: dir,
        }
    }

    fn code(r: Result<ConfinedPath, ToolError>) -> String {
        r.unwrap_err().code().to_string()
    }

    #[test]
    fn relative_path_becomes_canonical_absolute() {
        let f = fixture();
        let p = confine(&f.root, &f.protected, "campaign", "sub/./plan.yaml").unwrap();
        assert_eq!(
            p.as_str(),
            f.root.path().join("sub/plan.yaml").to_str().unwrap()
        );
    }

    #[test]
    fn absolute_path_inside_is_accepted() {
        let f = fixture();
        let abs = f.root.path().join("top.txt");
        let p = confine(&f.root, &f.protected, "file", abs.to_str().unwrap()).unwrap();
        assert_eq!(p.as_str(), abs.to_str().unwrap());
    }

    #[test]
    fn symlink_inside_pointing_inside_resolves_to_its_target() {
        let f = fixture();
        let p = confine(&f.root, &f.protected, "file", "sub/inner-link").unwrap();
        assert_eq!(p.as_str(), f.root.path().join("top.txt").to_str().unwrap());
    }

    #[test]
    fn dotdot_out_of_the_root_is_refused() {
        let f = fixture();
        assert_eq!(
            code(confine(&f.root, &f.protected, "file", "../secret.txt")),
            "path_outside_root"
        );
        assert_eq!(
            code(confine(
                &f.root,
                &f.protected,
                "file",
                "sub/../../secret.txt"
            )),
            "path_outside_root"
        );
    }

    #[test]
    fn absolute_outside_is_refused_even_when_missing() {
        let f = fixture();
        assert_eq!(
            code(confine(
                &f.root,
                &f.protected,
                "file",
                f.outside.to_str().unwrap()
            )),
            "path_outside_root"
        );
        assert_eq!(
            code(confine(&f.root, &f.protected, "file", "/etc/passwd")),
            "path_outside_root"
        );
        assert_eq!(
            code(confine(&f.root, &f.protected, "file", "/no/such/file")),
            "path_outside_root"
        );
    }

    #[test]
    fn symlink_inside_pointing_out_is_refused() {
        let f = fixture();
        let e = confine(&f.root, &f.protected, "file", "sub/escape").unwrap_err();
        assert_eq!(e.code(), "path_outside_root");
        assert!(e.message().contains("`file`"));
    }

    #[test]
    fn tilde_dash_empty_and_nul_are_refused() {
        let f = fixture();
        for raw in ["~/x", "~", "-", "", "a\0b"] {
            assert_eq!(
                code(confine(&f.root, &f.protected, "file", raw)),
                "invalid_argument",
                "{raw:?}"
            );
        }
    }

    #[test]
    fn a_dash_prefixed_name_is_just_a_file() {
        let f = fixture();
        fs::write(f.root.path().join("-n"), "x").unwrap();
        let p = confine(&f.root, &f.protected, "file", "-n").unwrap();
        assert!(p.as_str().starts_with('/'));
    }

    #[test]
    fn missing_file_inside_is_path_not_found() {
        let f = fixture();
        let e = confine(&f.root, &f.protected, "file", "sub/nope.yaml").unwrap_err();
        assert_eq!(e.code(), "path_not_found");
        assert!(e.message().contains("sub/nope.yaml"));
        assert_eq!(
            code(confine(&f.root, &f.protected, "file", "top.txt/below")),
            "path_not_found"
        );
    }

    #[test]
    fn protected_files_are_refused_by_spelling_and_by_target() {
        let f = fixture();
        for raw in [
            "accounts.yaml",
            "./sub/../accounts.yaml",
            "sub/accounts-link",
            ".ssh/id_ed25519",
            "sub/key-link",
            ".ssh",
            "sub/.env",
            "nothing-here/.env.local",
        ] {
            let e = confine(&f.root, &f.protected, "file", raw).unwrap_err();
            assert_eq!(e.code(), "path_protected", "{raw}: {e}");
            assert!(e.message().starts_with("`file` names `"), "{}", e.message());
        }
        let e = confine(&f.root, &f.protected, "file", "sub/accounts-link").unwrap_err();
        assert!(
            e.message().contains("`accounts.yaml`") && e.message().contains("fixed accounts file"),
            "{}",
            e.message()
        );
        // Outside the root stays `path_outside_root`, protected name or not.
        assert_eq!(
            code(confine(&f.root, &f.protected, "file", "../.env")),
            "path_outside_root"
        );
        assert!(confine(&f.root, &f.protected, "file", "sub/plan.yaml").is_ok());
    }

    #[test]
    fn root_of_slash_is_refused() {
        assert!(matches!(Root::new(Path::new("/")), Err(RootError::IsSlash)));
        assert!(matches!(
            Root::new(Path::new("/no/such/root")),
            Err(RootError::Unusable(..))
        ));
    }

    #[test]
    fn each_root_error_says_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let file = base.join("plain.txt");
        fs::write(&file, "x").unwrap();
        let e = Root::new(&file).unwrap_err();
        assert!(
            matches!(&e, RootError::NotAFolder(p) if *p == file),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            format!("the root {} is not a folder", file.display())
        );
        let missing = base.join("missing");
        let e = Root::new(&missing).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "the root folder {} cannot be used: {}",
                missing.display(),
                io::Error::from_raw_os_error(libc::ENOENT)
            )
        );
        assert_eq!(
            RootError::IsSlash.to_string(),
            "a root of / would share every file on this machine; pass --root with a smaller folder"
        );
        // A link to `/` is `/`.
        symlink("/", base.join("slash")).unwrap();
        assert!(matches!(
            Root::new(&base.join("slash")),
            Err(RootError::IsSlash)
        ));
        // And a fine folder comes back canonical.
        fs::create_dir(base.join("ok")).unwrap();
        symlink(base.join("ok"), base.join("ok-link")).unwrap();
        assert_eq!(
            Root::new(&base.join("ok-link")).unwrap().path(),
            base.join("ok")
        );
    }
}
