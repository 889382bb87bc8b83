//! One configuration: the backend, the home, the fixed files (database,
//! accounts, profile) and the root, resolved once, here, for `mcp-serve`,
//! `tools`, `call`, `--print-config` and `sandbox run`, with one set of
//! messages that name the option the owner gave.
//!
//! Two stages, because the backend's catalog can propose the fixed files:
//! [`Owner::resolve`] checks what the owner gave (enough for
//! `--print-config` and for reading the catalog), then [`Owner::with_catalog`]
//! adds the catalog's proposals and gives the final [`Config`]. Every path
//! that will be granted passes the one guard ([`crate::sandbox::guard`]), and
//! every granted file and folder is pinned by device and inode so a run can
//! be refused when one of them was replaced.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::catalog::CatalogPaths;
use crate::cli::{Globals, SandboxMode};
use crate::sandbox::guard::{canonical_or_parent, Guard};
use crate::sandbox::SandboxOptions;

/// The command served when `--backend` is not given.
pub(crate) const DEFAULT_BACKEND: &str = "reachweaver";

/// Who proposed a path: an option of the owner, the backend's catalog, or
/// the current folder (the root's default).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Source {
    Option(&'static str),
    Catalog(&'static str),
    CurrentFolder,
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Option(o) => write!(f, "{o}"),
            Source::Catalog(field) => write!(f, "the backend's catalog field paths.{field}"),
            Source::CurrentFolder => write!(f, "the root (the current folder)"),
        }
    }
}

/// A configuration that cannot be used: who gave the path, the path, and
/// what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub source: String,
    pub path: Option<PathBuf>,
    pub problem: String,
}

impl ConfigError {
    fn new(source: impl ToString, path: Option<&Path>, problem: impl Into<String>) -> Self {
        ConfigError {
            source: source.to_string(),
            path: path.map(Path::to_path_buf),
            problem: problem.into(),
        }
    }
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.path {
            Some(p) => write!(f, "{} {}: {}", self.source, p.display(), self.problem),
            None => write!(f, "{}: {}", self.source, self.problem),
        }
    }
}

impl std::error::Error for ConfigError {}

/// A fixed path (home, database, accounts, profile) and who proposed it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Fixed {
    /// Canonical when it exists; else canonical through its folder.
    pub path: PathBuf,
    pub source: Source,
    pub exists: bool,
    /// Device and inode of a fixed file that exists, from the same lookup
    /// that checked its type and its number of names: the link check and
    /// the sandbox's pin use this, never a second look at the path, so a
    /// file swapped between two lookups can't pass one and be pinned by
    /// the other.
    #[serde(skip)]
    pub id: Option<crate::protect::FileId>,
}

impl Fixed {
    /// Named by one of the owner's own options (not proposed by the catalog).
    pub fn owner_given(&self) -> bool {
        matches!(self.source, Source::Option(_))
    }
}

/// What the owner gave, checked: enough to print a client entry and to read
/// the catalog.
#[derive(Debug, Clone)]
pub(crate) struct Owner {
    pub cwd: PathBuf,
    /// The canonical backend executable.
    pub backend: PathBuf,
    pub home: Option<Fixed>,
    pub db: Option<Fixed>,
    pub accounts: Option<Fixed>,
    pub profile: Option<Fixed>,
    /// `--root`, canonical.
    pub root: Option<PathBuf>,
    /// `--allow-read`, canonical.
    pub allow_read: Vec<PathBuf>,
    guard: Guard,
}

/// The whole configuration of a server: the owner's options and the
/// catalog's proposals, checked and pinned.
#[derive(Debug, Clone)]
pub struct Config {
    pub backend: PathBuf,
    pub home: Option<Fixed>,
    pub db: Option<Fixed>,
    pub accounts: Option<Fixed>,
    pub profile: Option<Fixed>,
    pub root: PathBuf,
    pub root_source: Source,
    pub allow_read: Vec<PathBuf>,
}

/// The options `Owner::resolve` reads, named by how the owner gave them.
pub(crate) struct OwnerInput<'a> {
    pub globals: &'a Globals,
    /// The option that names the program (`--backend`, or `sandbox run`'s command).
    pub backend_option: &'static str,
    pub root: Option<&'a Path>,
    pub allow_read: &'a [PathBuf],
}

impl Owner {
    /// Resolve against this process's current folder, `PATH` and user.
    pub(crate) fn resolve(input: &OwnerInput<'_>) -> Result<Owner, ConfigError> {
        let cwd = std::env::current_dir().map_err(|e| {
            ConfigError::new("the current folder", None, format!("cannot be read: {e}"))
        })?;
        let path_env = std::env::var_os("PATH");
        Owner::resolve_in(input, &cwd, path_env.as_deref(), Guard::for_this_user())
    }

    /// [`Owner::resolve`] with the current folder, `PATH` and guard given.
    pub(crate) fn resolve_in(
        input: &OwnerInput<'_>,
        cwd: &Path,
        path_env: Option<&OsStr>,
        guard: Guard,
    ) -> Result<Owner, ConfigError> {
        let backend = resolve_backend(
            input.backend_option,
            input.globals.backend.as_deref(),
            cwd,
            path_env,
            &guard,
        )?;
        Owner::resolve_paths_in(input, cwd, backend, guard)
    }

    /// [`Owner::resolve_in`] for a backend already resolved: every path
    /// but the backend's, through the same checks. A server that sees one
    /// of its files replaced resolves them again with this.
    pub(crate) fn resolve_paths_in(
        input: &OwnerInput<'_>,
        cwd: &Path,
        backend: PathBuf,
        guard: Guard,
    ) -> Result<Owner, ConfigError> {
        let g = input.globals;
        let home = match &g.home {
            Some(h) => Some(folder(Source::Option("--home"), &cwd.join(h), &guard)?),
            None => None,
        };
        let file =
            |flag: &'static str, p: &Option<PathBuf>| -> Result<Option<Fixed>, ConfigError> {
                p.as_ref()
                    .map(|p| fixed_file(Source::Option(flag), &cwd.join(p), &guard))
                    .transpose()
            };
        let db = file("--db", &g.db)?;
        if let Some(db) = &db {
            db_folder(db, &guard)?;
        }
        let accounts = file("--accounts", &g.accounts)?;
        let profile = file("--profile", &g.profile)?;
        let root = match input.root {
            Some(r) => Some(folder(Source::Option("--root"), &cwd.join(r), &guard)?.path),
            None => None,
        };
        let allow_read = input
            .allow_read
            .iter()
            .map(|p| existing(Source::Option("--allow-read"), &cwd.join(p), &guard))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Owner {
            cwd: cwd.to_path_buf(),
            backend,
            home,
            db,
            accounts,
            profile,
            root,
            allow_read,
            guard,
        })
    }

    /// The owner's four globals in contract order, for the catalog run.
    pub(crate) fn globals_argv(&self) -> Result<Vec<String>, ConfigError> {
        globals_argv([&self.home, &self.db, &self.accounts, &self.profile])
    }

    /// The root before the catalog is known: `--root`, else `--home`, else
    /// the current folder (which must pass the guard like any root).
    pub(crate) fn provisional_root(&self) -> Result<(PathBuf, Source), ConfigError> {
        if let Some(r) = &self.root {
            return Ok((r.clone(), Source::Option("--root")));
        }
        if let Some(h) = &self.home {
            return Ok((h.path.clone(), h.source));
        }
        let cwd =
            folder(Source::CurrentFolder, &self.cwd, &self.guard).map_err(|e| ConfigError {
                problem: format!("{}; pass --root or --home", e.problem),
                ..e
            })?;
        Ok((cwd.path, Source::CurrentFolder))
    }

    /// The folders the owner chose as a root: `--root`, and the current
    /// folder when the guard lets it be one (the root's default).
    fn owner_roots(&self) -> Vec<(&'static str, PathBuf)> {
        self.root
            .iter()
            .map(|r| ("--root", r.clone()))
            .chain(
                self.current_folder_root()
                    .ok()
                    .map(|c| ("the current folder", c)),
            )
            .collect()
    }

    /// The current folder as the root (`sandbox run`'s default), guarded.
    pub(crate) fn current_folder_root(&self) -> Result<PathBuf, ConfigError> {
        Ok(folder(Source::CurrentFolder, &self.cwd, &self.guard)?.path)
    }

    /// Sandbox options with only the owner's paths granted (the catalog run).
    pub(crate) fn sandbox_options(
        &self,
        mode: SandboxMode,
        pass_env: &[String],
        helper: Option<PathBuf>,
    ) -> Result<SandboxOptions, ConfigError> {
        let (root, _) = self.provisional_root()?;
        let fixed = [&self.home, &self.db, &self.accounts, &self.profile];
        let grants = Grants {
            backend: &self.backend,
            root,
            fixed,
            allow_read: &self.allow_read,
        };
        // Nothing may write before the catalog is read: a database not made
        // yet gives no folder to anyone.
        Ok(grants.options(false, mode, pass_env, helper))
    }

    /// Add the catalog's proposals for what the owner did not give. A
    /// proposed home must be a folder the guard accepts; proposed files
    /// must be regular files beneath the home.
    pub(crate) fn with_catalog(self, paths: &CatalogPaths) -> Result<Config, ConfigError> {
        let guard = &self.guard;
        let home = match (&self.home, &paths.home) {
            (Some(h), _) => Some(h.clone()),
            (None, Some(p)) => Some(catalog_home(p, guard, &self.owner_roots())?),
            (None, None) => None,
        };
        let proposed = |field: &'static str,
                        owner: &Option<Fixed>,
                        proposal: &Option<PathBuf>|
         -> Result<Option<Fixed>, ConfigError> {
            if owner.is_some() {
                return Ok(owner.clone());
            }
            let Some(p) = proposal else {
                return Ok(None);
            };
            let source = Source::Catalog(field);
            let f = fixed_file(source, p, guard)?;
            match &home {
                Some(h) if f.path.starts_with(&h.path) && f.path != h.path => Ok(Some(f)),
                Some(h) => Err(ConfigError::new(
                    source,
                    Some(p),
                    format!(
                        "refused: a path the backend proposes must be a file inside its home {}",
                        h.path.display()
                    ),
                )),
                None => Err(ConfigError::new(
                    source,
                    Some(p),
                    "refused: the backend names no home, so a path it proposes cannot be checked; pass --home",
                )),
            }
        };
        let db = proposed("db", &self.db, &paths.db)?;
        if let (Some(d), None) = (&db, &self.db) {
            db_folder(d, guard)?;
        }
        let accounts = proposed("accounts", &self.accounts, &paths.accounts)?;
        let profile = proposed("profile", &self.profile, &paths.profile)?;

        let (root, root_source) = match (&self.root, &home) {
            (Some(r), _) => (r.clone(), Source::Option("--root")),
            (None, Some(h)) => (h.path.clone(), h.source),
            (None, None) => self.provisional_root()?,
        };

        // Every grant must be there to look at now; the sandbox pins each
        // (device and inode) when it is set up and refuses runs once one
        // names another file.
        let look = |source: Source, p: &Path| -> Result<(), ConfigError> {
            std::fs::symlink_metadata(p)
                .map(drop)
                .map_err(|e| ConfigError::new(source, Some(p), format!("cannot be read: {e}")))
        };
        look(root_source, &root)?;
        for f in [&home, &db, &accounts, &profile].into_iter().flatten() {
            if f.exists {
                look(f.source, &f.path)?;
            }
        }
        Ok(Config {
            backend: self.backend,
            home,
            db,
            accounts,
            profile,
            root,
            root_source,
            allow_read: self.allow_read,
        })
    }
}

impl Config {
    /// `Err` when the backend's catalog proposed a protected path: a home
    /// at or inside a protected folder (`.ssh/`), or a database, accounts
    /// file or profile a protected pattern covers (`.env`). A fixed file
    /// is exempt from the masks and read in full by every run, so a catalog
    /// that could name one would unmask it. The owner's own options keep
    /// that exemption: the owner chose those files.
    pub(crate) fn catalog_not_protected(
        &self,
        protected: &crate::protect::Protected,
    ) -> Result<(), ConfigError> {
        let bases: Vec<&Path> = [Path::new("/"), self.root.as_path()]
            .into_iter()
            .chain(self.home.as_ref().map(|h| h.path.as_path()))
            .collect();
        for (f, is_dir) in [
            (&self.home, true),
            (&self.db, false),
            (&self.accounts, false),
            (&self.profile, false),
        ] {
            let Some(f) = f.as_ref().filter(|f| !f.owner_given()) else {
                continue;
            };
            let Some(pattern) = protected.pattern_covering(&bases, &f.path, is_dir) else {
                continue;
            };
            let option = match f.source {
                Source::Catalog(field) => format!("--{field}"),
                _ => "the option".to_string(),
            };
            return Err(ConfigError::new(
                f.source,
                Some(&f.path),
                format!(
                    "refused: the backend's catalog may not propose a protected path \
                     (the pattern `{pattern}` covers it); if it is really the one, name it with {option}"
                ),
            ));
        }
        Ok(())
    }

    /// The four globals every run gets, in contract order.
    pub fn globals_argv(&self) -> Result<Vec<String>, ConfigError> {
        globals_argv([&self.home, &self.db, &self.accounts, &self.profile])
    }

    /// The sandbox options of this configuration's runs (pins and masks
    /// are the sandbox's own, taken when it is set up).
    pub fn sandbox_options(
        &self,
        mode: SandboxMode,
        pass_env: &[String],
        helper: Option<PathBuf>,
    ) -> SandboxOptions {
        let grants = Grants {
            backend: &self.backend,
            root: self.root.clone(),
            fixed: [&self.home, &self.db, &self.accounts, &self.profile],
            allow_read: &self.allow_read,
        };
        // A database that does not exist yet still gives `draft` its
        // folder (checked by the guard), so `draft` can create it.
        grants.options(true, mode, pass_env, helper)
    }

    /// What the start-up line says is granted. `backend_folder` is the
    /// backend's install prefix when its runs may read it, `None` when
    /// they may read only the backend's own file.
    pub fn granted_line(&self, drafts: bool, backend_folder: Option<&Path>) -> String {
        let mut parts = vec![format!("root {}", self.root.display())];
        parts.push(match backend_folder {
            Some(folder) => format!("backend folder {}", folder.display()),
            None => "backend: its own file only (not laid out as PREFIX/bin/NAME; \
                     give a folder it reads with --allow-read)"
                .to_string(),
        });
        for (name, f) in [
            ("home", &self.home),
            ("db", &self.db),
            ("accounts", &self.accounts),
            ("profile", &self.profile),
        ] {
            if let Some(f) = f {
                let note = if !f.exists {
                    " (missing, not granted)"
                } else if matches!(f.source, Source::Catalog(_)) {
                    " (from the catalog)"
                } else {
                    ""
                };
                parts.push(format!("{name} {}{note}", f.path.display()));
            }
        }
        if drafts {
            if let Some(folder) = self.db.as_ref().and_then(|d| d.path.parent()) {
                parts.push(format!("draft may write in {}", folder.display()));
            }
        }
        for p in &self.allow_read {
            parts.push(format!("allow-read {}", p.display()));
        }
        format!("granted: {}", parts.join(", "))
    }
}

/// What a run may read, before it becomes [`SandboxOptions`]: the one
/// place both stages build them.
struct Grants<'a> {
    backend: &'a Path,
    root: PathBuf,
    /// Home, database, accounts, profile.
    fixed: [&'a Option<Fixed>; 4],
    allow_read: &'a [PathBuf],
}

impl Grants<'_> {
    fn options(
        self,
        missing_db_folder: bool,
        mode: SandboxMode,
        pass_env: &[String],
        helper: Option<PathBuf>,
    ) -> SandboxOptions {
        let [home, db, accounts, profile] = self.fixed;
        // Each fixed file's pin is the identity its checks saw.
        let pins = [home, db, accounts, profile]
            .into_iter()
            .flatten()
            .filter_map(|f| {
                let (dev, ino) = f.id?;
                Some((f.path.clone(), crate::sandbox::policy::Pin { dev, ino }))
            })
            .collect();
        SandboxOptions {
            mode,
            backend: self.backend.to_path_buf(),
            root: self.root,
            read: read_grants([home, accounts, profile, db]),
            // The database a draft may write in is only ever the owner's
            // own `--db`: a catalog's proposal (read like any fixed file
            // through `read`) could name `.git/config` or a `Makefile`.
            db: db
                .as_ref()
                .filter(|d| d.owner_given() && (d.exists || missing_db_folder))
                .map(|d| d.path.clone()),
            allow_read: self.allow_read.to_vec(),
            pass_env: pass_env.to_vec(),
            helper,
            home: home.as_ref().map(|h| h.path.clone()),
            pins,
            ..SandboxOptions::default()
        }
    }
}

/// One of the fixed files, which a server whose file was replaced by one
/// it refuses can go on without (the home and the root it cannot).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DataFile {
    Db,
    Accounts,
    Profile,
}

impl DataFile {
    pub(crate) const ALL: [DataFile; 3] = [DataFile::Db, DataFile::Accounts, DataFile::Profile];

    /// The catalog's field and, with `--`, the owner's option.
    fn field(self) -> &'static str {
        match self {
            DataFile::Db => "db",
            DataFile::Accounts => "accounts",
            DataFile::Profile => "profile",
        }
    }

    /// How messages name it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            DataFile::Db => "database",
            DataFile::Accounts => "accounts file",
            DataFile::Profile => "profile",
        }
    }

    /// The file whose option or catalog field `e` names, if any.
    pub(crate) fn named_by(e: &ConfigError) -> Option<DataFile> {
        DataFile::ALL.into_iter().find(|f| {
            e.source == format!("--{}", f.field())
                || e.source == Source::Catalog(f.field()).to_string()
        })
    }

    /// This file of a configuration.
    pub(crate) fn of(self, config: &Config) -> Option<&Fixed> {
        match self {
            DataFile::Db => config.db.as_ref(),
            DataFile::Accounts => config.accounts.as_ref(),
            DataFile::Profile => config.profile.as_ref(),
        }
        .filter(|f| f.exists)
    }

    /// Forget this file in the owner's options and the catalog's proposals.
    pub(crate) fn drop_from(self, globals: &mut Globals, paths: &mut CatalogPaths) {
        match self {
            DataFile::Db => (globals.db, paths.db) = (None, None),
            DataFile::Accounts => (globals.accounts, paths.accounts) = (None, None),
            DataFile::Profile => (globals.profile, paths.profile) = (None, None),
        }
    }

    /// `Err` when the file is another name (a hard link) of a file a
    /// protected pattern covers: granting it would hand that file's content
    /// to every run under a name nothing refuses.
    pub(crate) fn not_protected(
        self,
        config: &Config,
        protected: &crate::protect::Protected,
    ) -> Result<(), ConfigError> {
        let Some(f) = self.of(config) else {
            return Ok(());
        };
        match f.id.and_then(|id| protected.link_of_id(id)) {
            None => Ok(()),
            Some(pattern) => Err(ConfigError::new(
                f.source,
                Some(&f.path),
                format!(
                    "refused: it is another name (a hard link) of a file protected by the pattern `{pattern}`"
                ),
            )),
        }
    }
}

fn globals_argv(fixed: [&Option<Fixed>; 4]) -> Result<Vec<String>, ConfigError> {
    let flags = ["--home", "--db", "--accounts", "--profile"];
    let mut out = Vec::new();
    for (flag, f) in flags.into_iter().zip(fixed) {
        if let Some(f) = f {
            let text = f
                .path
                .to_str()
                .ok_or_else(|| ConfigError::new(f.source, Some(&f.path), "is not valid UTF-8"))?;
            out.push(format!("{flag}={text}"));
        }
    }
    Ok(out)
}

/// The fixed paths a run may read: the home folder and the files that exist.
fn read_grants(fixed: [&Option<Fixed>; 4]) -> Vec<PathBuf> {
    fixed
        .into_iter()
        .flatten()
        .filter(|f| f.exists)
        .map(|f| f.path.clone())
        .collect()
}

/// `--backend` (or `sandbox run`'s command): a path with a `/` is taken
/// against the current folder; a bare name is looked up on `PATH` (absolute
/// entries only, so a `reachweaver` in the current folder is never picked
/// by accident); none means `reachweaver` on `PATH`.
pub(crate) fn resolve_backend(
    option: &'static str,
    given: Option<&Path>,
    cwd: &Path,
    path_env: Option<&OsStr>,
    guard: &Guard,
) -> Result<PathBuf, ConfigError> {
    let candidate = match given {
        Some(p) if p.as_os_str().as_bytes().contains(&b'/') => cwd.join(p),
        other => {
            let name = other.unwrap_or(Path::new(DEFAULT_BACKEND));
            path_env
                .and_then(|p| crate::sandbox::policy::find_on_path(name, p))
                .ok_or_else(|| {
                    let hint = if option.starts_with("--") {
                        format!("install it or pass {option} /absolute/path")
                    } else {
                        "give its absolute path".to_string()
                    };
                    ConfigError::new(
                        option,
                        None,
                        format!("'{}' was not found on PATH; {hint}", name.display()),
                    )
                })?
        }
    };
    let shown = given.unwrap_or(&candidate);
    let canonical = candidate.canonicalize().map_err(|e| {
        let problem = if e.kind() == std::io::ErrorKind::NotFound {
            "no such file".to_string()
        } else {
            format!("cannot be used: {e}")
        };
        ConfigError::new(option, Some(shown), problem)
    })?;
    if !is_executable_file(&canonical) {
        return Err(ConfigError::new(
            option,
            Some(shown),
            "not an executable file",
        ));
    }
    if let Some(why) = guard.refusal(&canonical) {
        return Err(ConfigError::new(
            option,
            Some(shown),
            format!("refused: {why}"),
        ));
    }
    Ok(canonical)
}

fn is_executable_file(p: &Path) -> bool {
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// An existing folder the guard accepts, canonical.
fn folder(source: Source, p: &Path, guard: &Guard) -> Result<Fixed, ConfigError> {
    match std::fs::metadata(p) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ConfigError::new(source, Some(p), "no such folder"))
        }
        Err(e) => {
            return Err(ConfigError::new(
                source,
                Some(p),
                format!("cannot be used: {e}"),
            ))
        }
        Ok(m) if !m.is_dir() => return Err(ConfigError::new(source, Some(p), "not a folder")),
        Ok(_) => {}
    }
    let path = guard
        .check(p)
        .map_err(|why| ConfigError::new(source, Some(p), format!("refused: {why}")))?;
    Ok(Fixed {
        path,
        source,
        exists: true,
        id: None,
    })
}

/// A fixed file: when it exists, a regular file and never a symlink; in
/// every case a path the guard accepts.
fn fixed_file(source: Source, p: &Path, guard: &Guard) -> Result<Fixed, ConfigError> {
    if !p.is_absolute() {
        return Err(ConfigError::new(source, Some(p), "not an absolute path"));
    }
    // The guard first, so `/` or `/proc/...` is named as what it is.
    if let Err(why) = guard.check(p) {
        return Err(ConfigError::new(source, Some(p), format!("refused: {why}")));
    }
    // One lookup decides: its type, its number of names and its identity
    // (which the link check and the pin use) all come from this `lstat`.
    let id = match std::fs::symlink_metadata(p) {
        Ok(m) if m.file_type().is_symlink() => {
            return Err(ConfigError::new(
                source,
                Some(p),
                "is a symbolic link; name the file it points to",
            ))
        }
        Ok(m) if !m.is_file() => {
            return Err(ConfigError::new(source, Some(p), "not a regular file"))
        }
        Ok(m) if m.nlink() > 1 => {
            return Err(ConfigError::new(
                source,
                Some(p),
                format!(
                    "refused: it has {} names (hard links); another name could be a credential \
                     file's, or change it behind the server's back: give the server a file of its \
                     own (a copy)",
                    m.nlink()
                ),
            ))
        }
        Ok(m) => Some((m.dev(), m.ino())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            return Err(ConfigError::new(
                source,
                Some(p),
                format!("cannot be used: {e}"),
            ))
        }
    };
    // Not a symlink itself, so only its folders are resolved here.
    let path = canonical_or_parent(p);
    if let Err(why) = guard.check(&path) {
        return Err(ConfigError::new(source, Some(p), format!("refused: {why}")));
    }
    Ok(Fixed {
        path,
        source,
        exists: id.is_some(),
        id,
    })
}

/// The database's folder, which `draft` may write in: it passes the guard
/// like any grant (a folder that does not exist yet is checked by name).
fn db_folder(db: &Fixed, guard: &Guard) -> Result<PathBuf, ConfigError> {
    let folder = db.path.parent().unwrap_or(Path::new("/"));
    guard.check(folder).map_err(|why| {
        ConfigError::new(
            db.source,
            Some(&db.path),
            format!(
                "refused: its folder {} would be writable by `draft`, and {why}",
                folder.display()
            ),
        )
    })
}

/// A home the backend proposes. The catalog is the backend's own word,
/// and the backend is not trusted: a home becomes every run's root when
/// the owner names none, so a system folder (`/var`, `/opt`, `/etc/ssh`)
/// would hand the runs whatever lies there. Only a folder the guard
/// accepts is taken, and only strictly inside the user's own home folder,
/// or inside a folder the owner chose as a root (`--root`, or the current
/// folder when it may be one); anything else the owner names with `--home`.
fn catalog_home(
    p: &Path,
    guard: &Guard,
    owner_roots: &[(&'static str, PathBuf)],
) -> Result<Fixed, ConfigError> {
    let source = Source::Catalog("home");
    let f = folder(source, p, guard)?;
    let in_user_home = guard
        .homes()
        .iter()
        .any(|h| f.path.starts_with(h) && f.path != *h);
    if in_user_home || owner_roots.iter().any(|(_, r)| f.path.starts_with(r)) {
        return Ok(f);
    }
    let mut places: Vec<String> = guard
        .home()
        .map(|h| format!("your home folder {}", h.display()))
        .into_iter()
        .collect();
    places.extend(
        owner_roots
            .iter()
            .map(|(what, r)| format!("{what} {}", r.display())),
    );
    let places = match places.len() {
        0 => "inside your home folder (this user has none)".to_string(),
        _ => format!("inside {}", places.join(" or ")),
    };
    Err(ConfigError::new(
        source,
        Some(p),
        format!(
            "refused: a home the backend proposes must be a folder {places}; \
             pass --home to name this one yourself"
        ),
    ))
}

/// Any existing path the guard accepts (`--allow-read`), canonical.
fn existing(source: Source, p: &Path, guard: &Guard) -> Result<PathBuf, ConfigError> {
    if !p.exists() {
        return Err(ConfigError::new(source, Some(p), "no such file or folder"));
    }
    guard
        .check(p)
        .map_err(|why| ConfigError::new(source, Some(p), format!("refused: {why}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn exe(path: &Path) {
        fs::write(path, "#!/bin/sh\n").unwrap();
        fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
    }

    fn guard() -> Guard {
        Guard::with_homes(vec![PathBuf::from("/home/nobody-here")])
    }

    fn owner(globals: &Globals, cwd: &Path, path_env: &OsStr) -> Result<Owner, ConfigError> {
        Owner::resolve_in(
            &OwnerInput {
                globals,
                backend_option: "--backend",
                root: None,
                allow_read: &[],
            },
            cwd,
            Some(path_env),
            guard(),
        )
    }

    #[test]
    fn a_bare_name_is_looked_up_on_path_never_in_the_current_folder() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path().join("cwd");
        let bin = dir.path().join("bin");
        fs::create_dir_all(&cwd).unwrap();
        fs::create_dir_all(&bin).unwrap();
        exe(&cwd.join("reachweaver"));
        exe(&bin.join("reachweaver"));
        let path_env = std::env::join_paths([Path::new("."), &bin]).unwrap();
        let on_path = bin.join("reachweaver").canonicalize().unwrap();
        for given in [None, Some(PathBuf::from("reachweaver"))] {
            let g = Globals {
                backend: given,
                ..Globals::default()
            };
            assert_eq!(owner(&g, &cwd, &path_env).unwrap().backend, on_path);
        }
        let g = Globals {
            backend: Some("./reachweaver".into()),
            ..Globals::default()
        };
        assert_eq!(
            owner(&g, &cwd, &path_env).unwrap().backend,
            cwd.join("reachweaver").canonicalize().unwrap()
        );
    }

    #[test]
    fn backend_messages_name_the_option() {
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("plain");
        fs::write(&plain, "").unwrap();
        let empty = OsStr::new("/nonexistent-bin");
        let e = owner(&Globals::default(), dir.path(), empty).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--backend: 'reachweaver' was not found on PATH; install it or pass --backend /absolute/path"
        );
        let g = Globals {
            backend: Some("./plain".into()),
            ..Globals::default()
        };
        let e = owner(&g, dir.path(), empty).unwrap_err();
        assert!(
            e.to_string().ends_with("plain: not an executable file"),
            "{e}"
        );
        let g = Globals {
            backend: Some("./missing".into()),
            ..Globals::default()
        };
        let e = owner(&g, dir.path(), empty).unwrap_err();
        assert_eq!(e.to_string(), "--backend ./missing: no such file");
    }

    fn with_backend(dir: &Path) -> Globals {
        let b = dir.join("rw");
        exe(&b);
        Globals {
            backend: Some(b),
            ..Globals::default()
        }
    }

    #[test]
    fn a_missing_home_is_reported_as_missing() {
        let dir = tempfile::tempdir().unwrap();
        let g = Globals {
            home: Some("/no/such/home".into()),
            ..with_backend(dir.path())
        };
        let e = owner(&g, dir.path(), OsStr::new("")).unwrap_err();
        assert_eq!(e.to_string(), "--home /no/such/home: no such folder");
    }

    #[test]
    fn fixed_files_must_be_regular_files_not_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.db");
        fs::write(&real, "").unwrap();
        let link = dir.path().join("link.db");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let g = Globals {
            db: Some(link.clone()),
            ..with_backend(dir.path())
        };
        let e = owner(&g, dir.path(), OsStr::new("")).unwrap_err();
        assert!(e.to_string().starts_with("--db "), "{e}");
        assert!(e.to_string().contains("symbolic link"), "{e}");
        let g = Globals {
            accounts: Some(dir.path().to_path_buf()),
            ..with_backend(dir.path())
        };
        let e = owner(&g, dir.path(), OsStr::new("")).unwrap_err();
        assert!(e.to_string().contains("--accounts"), "{e}");
        assert!(e.to_string().contains("not a regular file"), "{e}");
    }

    #[test]
    fn a_database_in_a_guarded_folder_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let g = Globals {
            db: Some("/tmp/x.db".into()),
            ..with_backend(dir.path())
        };
        let e = owner(&g, dir.path(), OsStr::new("")).unwrap_err();
        assert!(e.to_string().starts_with("--db /tmp/x.db: refused"), "{e}");
    }

    fn home_owner(dir: &Path) -> (PathBuf, Owner) {
        let home = dir.join("home");
        fs::create_dir_all(home.join("data")).unwrap();
        let g = Globals {
            home: Some(home.clone()),
            ..with_backend(dir)
        };
        (
            home.canonicalize().unwrap(),
            owner(&g, dir, OsStr::new("")).unwrap(),
        )
    }

    #[test]
    fn catalog_paths_must_be_files_inside_the_home() {
        let dir = tempfile::tempdir().unwrap();
        let (home, o) = home_owner(dir.path());
        fs::write(home.join("data/rw.db"), "").unwrap();
        fs::write(home.join("accounts.yaml"), "").unwrap();
        let outside = dir.path().join("elsewhere.yaml");
        fs::write(&outside, "").unwrap();

        let ok = o
            .clone()
            .with_catalog(&CatalogPaths {
                db: Some(home.join("data/rw.db")),
                accounts: Some(home.join("accounts.yaml")),
                ..CatalogPaths::default()
            })
            .unwrap();
        assert_eq!(ok.db.as_ref().unwrap().source, Source::Catalog("db"));
        assert_eq!(ok.root, home);

        for (paths, field) in [
            (
                CatalogPaths {
                    db: Some("/".into()),
                    ..CatalogPaths::default()
                },
                "paths.db /",
            ),
            (
                CatalogPaths {
                    db: Some("/tmp/x.db".into()),
                    ..CatalogPaths::default()
                },
                "paths.db /tmp/x.db",
            ),
            (
                CatalogPaths {
                    profile: Some("/etc/passwd".into()),
                    ..CatalogPaths::default()
                },
                "paths.profile /etc/passwd",
            ),
            (
                CatalogPaths {
                    accounts: Some(outside.clone()),
                    ..CatalogPaths::default()
                },
                "paths.accounts",
            ),
            (
                CatalogPaths {
                    db: Some(home.join("data")),
                    ..CatalogPaths::default()
                },
                "paths.db",
            ),
        ] {
            let e = o.clone().with_catalog(&paths).unwrap_err();
            assert!(e.to_string().contains(field), "{field}: {e}");
            assert!(
                e.to_string().contains("refused") || e.to_string().contains("not a regular file"),
                "{e}"
            );
        }
    }

    #[test]
    fn the_granted_line_names_what_the_backend_may_read() {
        let dir = tempfile::tempdir().unwrap();
        let (_, o) = home_owner(dir.path());
        let c = o.with_catalog(&CatalogPaths::default()).unwrap();
        let own = c.granted_line(false, None);
        assert!(
            own.contains(", backend: its own file only (not laid out as PREFIX/bin/NAME;"),
            "{own}"
        );
        let tree = c.granted_line(false, Some(Path::new("/opt/rw")));
        assert!(tree.contains(", backend folder /opt/rw"), "{tree}");
        assert!(!tree.contains("own file"), "{tree}");
    }

    #[test]
    fn a_database_not_created_yet_is_passed_but_not_granted_or_pinned() {
        let dir = tempfile::tempdir().unwrap();
        let (home, o) = home_owner(dir.path());
        let c = o
            .with_catalog(&CatalogPaths {
                db: Some(home.join("new/rw.db")),
                ..CatalogPaths::default()
            })
            .unwrap();
        let db = c.db.as_ref().unwrap();
        assert!(!db.exists);
        assert_eq!(
            c.globals_argv().unwrap()[1],
            format!("--db={}", home.join("new/rw.db").display())
        );
        let opts = c.sandbox_options(SandboxMode::Require, &[], None);
        assert_eq!(opts.read, vec![home.clone()]);
        assert!(c
            .granted_line(false, None)
            .contains("(missing, not granted)"));
    }

    #[test]
    fn a_catalog_home_lies_strictly_inside_the_users_home_or_inside_a_root_of_the_owner() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let (user, root) = (base.join("user"), base.join("root"));
        let (in_user, in_root) = (user.join("rw"), root.join("rw"));
        let (sibling, other) = (base.join("user2"), base.join("other"));
        for d in [&in_user, &in_root, &sibling, &other] {
            fs::create_dir_all(d).unwrap();
        }
        let g = Guard::with_homes(vec![user.clone()]);
        let roots = vec![("--root", root.clone())];
        assert_eq!(catalog_home(&in_user, &g, &roots).unwrap().path, in_user);
        assert_eq!(catalog_home(&in_root, &g, &roots).unwrap().path, in_root);
        // A root the owner chose may be the home itself; the user's home may not.
        assert_eq!(catalog_home(&root, &g, &roots).unwrap().path, root);
        assert!(catalog_home(&user, &g, &roots).is_err());
        // Beside the user's home, not inside it (a shared prefix is no parent).
        let e = catalog_home(&sibling, &g, &roots).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "the backend's catalog field paths.home {}: refused: a home the backend proposes \
                 must be a folder inside your home folder {} or --root {}; pass --home to name \
                 this one yourself",
                sibling.display(),
                user.display(),
                root.display()
            )
        );
        assert!(catalog_home(&other, &g, &roots).is_err());
        // Without the root, only the user's home is left.
        let e = catalog_home(&in_root, &g, &[]).unwrap_err();
        assert!(
            e.problem.ends_with(&format!(
                "inside your home folder {}; pass --home to name this one yourself",
                user.display()
            )),
            "{e}"
        );
        let e = catalog_home(&in_root, &Guard::with_homes(vec![]), &[]).unwrap_err();
        assert!(e.problem.contains("(this user has none)"), "{e}");
    }

    #[test]
    fn only_a_database_the_owner_names_is_one_a_draft_may_write() {
        let dir = tempfile::tempdir().unwrap();
        let (home, o) = home_owner(dir.path());
        let db = home.join("data/rw.db");
        fs::write(&db, "").unwrap();
        let proposed = o
            .clone()
            .with_catalog(&CatalogPaths {
                db: Some(db.clone()),
                ..CatalogPaths::default()
            })
            .unwrap();
        assert!(!proposed.db.as_ref().unwrap().owner_given());
        let opts = proposed.sandbox_options(SandboxMode::Require, &[], None);
        assert_eq!(opts.db, None, "a proposal is never writable");
        assert!(opts.read.contains(&db), "but it is read: {:?}", opts.read);

        let g = Globals {
            home: Some(home.clone()),
            db: Some(db.clone()),
            ..with_backend(dir.path())
        };
        let own = owner(&g, dir.path(), OsStr::new(""))
            .unwrap()
            .with_catalog(&CatalogPaths::default())
            .unwrap();
        assert!(own.db.as_ref().unwrap().owner_given());
        let opts = own.sandbox_options(SandboxMode::Require, &[], None);
        assert_eq!(opts.db, Some(db.clone()));
    }

    #[test]
    fn a_catalog_may_propose_no_protected_path_and_the_owner_may() {
        let dir = tempfile::tempdir().unwrap();
        let (home, o) = home_owner(dir.path());
        fs::write(home.join(".env"), "K=v").unwrap();
        fs::create_dir_all(home.join("keys")).unwrap();
        fs::write(home.join("keys/site.pem"), "k").unwrap();
        fs::write(home.join("accounts.yaml"), "a").unwrap();
        let protected = crate::protect::Protected::new(&["keys/".to_string()], &[]).unwrap();
        for (paths, field, pattern) in [
            (
                CatalogPaths {
                    accounts: Some(home.join(".env")),
                    ..CatalogPaths::default()
                },
                "paths.accounts",
                ".env",
            ),
            (
                CatalogPaths {
                    profile: Some(home.join("keys/site.pem")),
                    ..CatalogPaths::default()
                },
                "paths.profile",
                "*.pem",
            ),
        ] {
            let c = o.clone().with_catalog(&paths).unwrap();
            let e = c.catalog_not_protected(&protected).unwrap_err();
            assert!(e.to_string().contains(field), "{e}");
            assert!(
                e.problem
                    .contains(&format!("the pattern `{pattern}` covers it")),
                "{e}"
            );
        }
        // An owner's anchored pattern counts from the root too.
        let only_extra = crate::protect::Protected::new(&["data/rw.db".to_string()], &[]).unwrap();
        fs::write(home.join("data/rw.db"), "").unwrap();
        let c = o
            .clone()
            .with_catalog(&CatalogPaths {
                db: Some(home.join("data/rw.db")),
                ..CatalogPaths::default()
            })
            .unwrap();
        let e = c.catalog_not_protected(&only_extra).unwrap_err();
        assert!(e.problem.contains("`data/rw.db`"), "{e}");
        // Something no pattern covers, and the owner's own choice, pass.
        let c = o
            .clone()
            .with_catalog(&CatalogPaths {
                accounts: Some(home.join("accounts.yaml")),
                ..CatalogPaths::default()
            })
            .unwrap();
        assert_eq!(c.catalog_not_protected(&protected), Ok(()));
        let g = Globals {
            home: Some(home.clone()),
            accounts: Some(home.join(".env")),
            ..with_backend(dir.path())
        };
        let own = owner(&g, dir.path(), OsStr::new(""))
            .unwrap()
            .with_catalog(&CatalogPaths::default())
            .unwrap();
        assert_eq!(own.catalog_not_protected(&protected), Ok(()));
    }

    #[test]
    fn a_catalog_home_passes_the_guard() {
        let dir = tempfile::tempdir().unwrap();
        let g = with_backend(dir.path());
        let o = owner(&g, dir.path(), OsStr::new("")).unwrap();
        let mut bad_homes = vec!["/", "/home/nobody-here", "/home"];
        // Guarded by the Linux rules only (macOS has no /proc).
        if cfg!(target_os = "linux") {
            bad_homes.push("/proc/self");
        }
        for bad in bad_homes {
            let e = o
                .clone()
                .with_catalog(&CatalogPaths {
                    home: Some(bad.into()),
                    ..CatalogPaths::default()
                })
                .unwrap_err();
            assert!(e.to_string().contains("paths.home"), "{e}");
        }
    }

    #[test]
    fn a_refusal_names_the_fixed_file_by_its_option_or_catalog_field() {
        let e = |source: Source| ConfigError::new(source, Some(Path::new("/h/x")), "refused");
        assert_eq!(
            DataFile::named_by(&e(Source::Option("--db"))),
            Some(DataFile::Db)
        );
        assert_eq!(
            DataFile::named_by(&e(Source::Catalog("accounts"))),
            Some(DataFile::Accounts)
        );
        assert_eq!(
            DataFile::named_by(&e(Source::Option("--profile"))),
            Some(DataFile::Profile)
        );
        // The home and the root are no file a server can go on without.
        for source in [
            Source::Option("--home"),
            Source::Catalog("home"),
            Source::Option("--root"),
            Source::CurrentFolder,
        ] {
            assert_eq!(DataFile::named_by(&e(source)), None, "{source}");
        }
    }

    #[test]
    fn a_fixed_file_dropped_is_forgotten_in_both_the_options_and_the_catalog() {
        let mut g = Globals {
            db: Some("/h/db".into()),
            accounts: Some("/h/a".into()),
            ..Globals::default()
        };
        let mut paths = CatalogPaths {
            db: Some("/h/db".into()),
            profile: Some("/h/p".into()),
            ..CatalogPaths::default()
        };
        DataFile::Db.drop_from(&mut g, &mut paths);
        assert_eq!((g.db, paths.db), (None, None));
        assert_eq!(g.accounts, Some("/h/a".into()));
        assert_eq!(paths.profile, Some("/h/p".into()));
    }

    #[test]
    fn a_fixed_file_with_more_than_one_name_is_refused_by_the_lookup_that_pins_it() {
        let dir = tempfile::tempdir().unwrap();
        let (home, o) = home_owner(dir.path());
        fs::write(home.join(".env"), "K=v\n").unwrap();
        fs::hard_link(home.join(".env"), home.join("data/rw.db")).unwrap();
        // A credential outside the root and the home is caught the same way.
        let netrc = dir.path().join("netrc");
        fs::write(&netrc, "machine h login u password p\n").unwrap();
        fs::hard_link(&netrc, home.join("accounts.yaml")).unwrap();
        fs::write(home.join("profile.yaml"), "").unwrap();
        for (paths, field, shown) in [
            (
                CatalogPaths {
                    db: Some(home.join("data/rw.db")),
                    ..CatalogPaths::default()
                },
                "paths.db",
                home.join("data/rw.db"),
            ),
            (
                CatalogPaths {
                    accounts: Some(home.join("accounts.yaml")),
                    ..CatalogPaths::default()
                },
                "paths.accounts",
                home.join("accounts.yaml"),
            ),
        ] {
            let e = o.clone().with_catalog(&paths).unwrap_err();
            assert_eq!(
                e.to_string(),
                format!(
                    "the backend's catalog field {field} {}: refused: it has 2 names (hard \
                     links); another name could be a credential file's, or change it behind the \
                     server's back: give the server a file of its own (a copy)",
                    shown.display()
                )
            );
        }
        // One name: taken, with the identity its checks saw.
        let c = o
            .clone()
            .with_catalog(&CatalogPaths {
                profile: Some(home.join("profile.yaml")),
                ..CatalogPaths::default()
            })
            .unwrap();
        let m = fs::metadata(home.join("profile.yaml")).unwrap();
        assert_eq!(c.profile.as_ref().unwrap().id, Some((m.dev(), m.ino())));
        // That identity is the pin, even when the path names another file now.
        fs::rename(home.join("data/rw.db"), home.join("profile.yaml")).unwrap();
        let opts = c.sandbox_options(SandboxMode::Require, &[], None);
        let pins = crate::sandbox::policy::pin_fixed_paths(&opts).unwrap();
        let pin = pins
            .iter()
            .find(|(p, _)| *p == home.join("profile.yaml"))
            .map(|(_, pin)| (pin.dev, pin.ino));
        assert_eq!(pin, Some((m.dev(), m.ino())));
        assert!(crate::sandbox::policy::check_pins(&pins).is_err());
    }

    #[test]
    fn a_fixed_file_the_scan_protects_is_refused_by_the_identity_its_checks_saw() {
        let dir = tempfile::tempdir().unwrap();
        let (home, _) = home_owner(dir.path());
        fs::create_dir_all(home.join(".ssh")).unwrap();
        fs::write(home.join(".ssh/state.db"), "").unwrap();
        fs::write(home.join("accounts.yaml"), "").unwrap();
        let g = Globals {
            home: Some(home.clone()),
            db: Some(home.join(".ssh/state.db")),
            accounts: Some(home.join("accounts.yaml")),
            ..with_backend(dir.path())
        };
        let c = owner(&g, dir.path(), OsStr::new(""))
            .unwrap()
            .with_catalog(&CatalogPaths::default())
            .unwrap();
        let mut protected = crate::protect::Protected::new(&[], &[]).unwrap();
        protected.remember(&crate::protect::scan(&[home.as_path()], &protected));
        let e = DataFile::Db.not_protected(&c, &protected).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "--db {}: refused: it is another name (a hard link) of a file protected by the \
                 pattern `.ssh/`",
                home.join(".ssh/state.db").display()
            )
        );
        assert!(DataFile::Accounts.not_protected(&c, &protected).is_ok());
        assert!(DataFile::Profile.not_protected(&c, &protected).is_ok());
    }

    #[test]
    fn the_root_defaults_to_the_home_then_the_current_folder() {
        let dir = tempfile::tempdir().unwrap();
        let (home, o) = home_owner(dir.path());
        assert_eq!(o.provisional_root().unwrap().0, home);
        let g = with_backend(dir.path());
        let cwd = dir.path().canonicalize().unwrap();
        let o = owner(&g, &cwd, OsStr::new("")).unwrap();
        assert_eq!(
            o.provisional_root().unwrap(),
            (cwd.clone(), Source::CurrentFolder)
        );
        let c = o.with_catalog(&CatalogPaths::default()).unwrap();
        assert_eq!(c.root, cwd);
        let o = owner(&with_backend(dir.path()), Path::new("/"), OsStr::new("")).unwrap();
        let e = o.provisional_root().unwrap_err();
        assert!(e.to_string().contains("pass --root"), "{e}");
    }
}
