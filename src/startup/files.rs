//! Files that come back: the root, the home and the fixed files (database,
//! accounts, profile) as the server serves them now.
//!
//! A server runs for days while its owner restores backups and re-clones
//! folders. Each call first looks at the device and inode of every watched
//! path (a few `lstat`s); when one names another file than the last
//! resolution saw (replaced, gone, or back), the whole resolution is made
//! again by the start-up code itself ([`resolve`]: the same guards, the
//! same refusals, the same protected-file scan, a sandbox with the new
//! grants pinned), one stderr line says what changed, and later calls use
//! the new one. A call takes one resolution at its start and uses it for
//! everything (argv, grants, pins), so no call mixes old and new; the old
//! sandbox's helper goes when its last run ends.
//!
//! A replaced database, accounts file or profile that fails a guard is not
//! granted, and every tool but `version` is refused with that guard's
//! reason: the catalog does not say which command reads which file, and
//! `version` must read none (docs/BACKEND.md). A root or home that fails
//! refuses every tool. Either way the next change is looked at again.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::argv::Invocation;
use crate::catalog::CatalogPaths;
use crate::cli::Globals;
use crate::config::{Config, DataFile, Owner, OwnerInput};
use crate::confine::Root;
use crate::protect::{self, Protected};
use crate::sandbox::guard::Guard;
use crate::sandbox::{Sandbox, SandboxMode};

use super::StartError;

/// The command that runs whatever fixed file was refused.
pub(crate) const RUNS_WITHOUT_FILES: &str = "version";

/// Everything a resolution starts from, as the owner and the catalog gave
/// it at start.
pub(crate) struct Inputs {
    pub globals: Globals,
    pub root: Option<PathBuf>,
    pub allow_read: Vec<PathBuf>,
    pub protect: Vec<String>,
    pub mode: SandboxMode,
    pub pass_env: Vec<String>,
    pub helper: Option<PathBuf>,
    /// The current folder and backend as found at start.
    pub cwd: PathBuf,
    pub backend: PathBuf,
    pub backend_str: String,
    pub paths: CatalogPaths,
    pub format_flag: String,
    pub end_of_options: bool,
}

/// One resolution: what a call takes at its start and uses throughout.
pub(crate) struct Resolved {
    pub config: Config,
    pub root: Root,
    pub protected: Protected,
    pub invocation: Invocation,
    pub sandbox: Sandbox,
    /// What the protected-file scan hid in runs, for the start-up line.
    pub masked: usize,
    pub masked_links: usize,
    pub cut: Vec<PathBuf>,
    /// Fixed files whose replacement was refused, with why: not granted,
    /// and every tool that may read them is refused.
    pub refused: Vec<(DataFile, String)>,
}

impl Resolved {
    /// Why `command` can't run with this resolution (`None`: it can).
    pub fn refusal(&self, command: &str) -> Option<String> {
        if command == RUNS_WITHOUT_FILES {
            return None;
        }
        let (file, why) = self.refused.first()?;
        Some(format!(
            "the {} was replaced by a file the server refuses: {why}; \
             put the right file back and call again",
            file.name()
        ))
    }
}

/// Resolve the root and the fixed files exactly as start-up does, with
/// the files in `without` treated as not given.
pub(crate) fn resolve(
    inputs: &Inputs,
    without: &[DataFile],
    sandbox: Sandbox,
) -> Result<Resolved, StartError> {
    let mut globals = inputs.globals.clone();
    let mut paths = inputs.paths.clone();
    for f in without {
        f.drop_from(&mut globals, &mut paths);
    }
    let owner = Owner::resolve_paths_in(
        &OwnerInput {
            globals: &globals,
            backend_option: "--backend",
            root: inputs.root.as_deref(),
            allow_read: &inputs.allow_read,
        },
        &inputs.cwd,
        inputs.backend.clone(),
        Guard::for_this_user(),
    )?;
    let config = owner.with_catalog(&paths)?;
    let root = Root::new(&config.root)?;
    let mut protected = Protected::new(
        &inputs.protect,
        &[
            config
                .accounts
                .as_ref()
                .map(|f| ("accounts", f.path.as_path())),
            config
                .profile
                .as_ref()
                .map(|f| ("profile", f.path.as_path())),
            config.db.as_ref().map(|f| ("database", f.path.as_path())),
        ]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>(),
    )?;
    config.catalog_not_protected(&protected)?;
    // Files under the root (and the home) that match a protected
    // pattern, and other names (hard links) of protected and fixed
    // files, are hidden in every run's minimal root too, so a backend
    // that walks the folder can't read them either; the protected files
    // seen are also refused as arguments under any other name. Found
    // once per resolution: a file made later is still refused as an
    // argument by its name (and a new name of a file seen here by its
    // inode), but not hidden.
    let home = config.home.as_ref().filter(|h| h.path != config.root);
    let folders: Vec<&Path> = std::iter::once(config.root.as_path())
        .chain(home.map(|h| h.path.as_path()))
        .collect();
    let scan = protect::scan(&folders, &protected);
    protected.remember(&scan);
    for f in DataFile::ALL {
        f.not_protected(&config, &protected)?;
    }
    let options = config.sandbox_options(inputs.mode, &inputs.pass_env, inputs.helper.clone());
    let masked = scan.hidden.len();
    let sandbox = sandbox.regrant(&options, scan.hidden)?;
    let invocation = Invocation::new(
        inputs.backend_str.clone(),
        config.globals_argv()?,
        inputs.format_flag.clone(),
        inputs.end_of_options,
    );
    Ok(Resolved {
        config,
        root,
        protected,
        invocation,
        sandbox,
        masked,
        masked_links: scan.links,
        cut: scan.cut,
        refused: Vec::new(),
    })
}

/// [`resolve`], going on without each fixed file a guard refuses (said in
/// [`Resolved::refused`]); `Err` when the root or the home is refused.
fn resolve_sparing(inputs: &Inputs, sandbox: &Sandbox) -> Result<Resolved, String> {
    let mut refused: Vec<(DataFile, String)> = Vec::new();
    loop {
        let without: Vec<DataFile> = refused.iter().map(|(f, _)| *f).collect();
        match resolve(inputs, &without, sandbox.clone()) {
            Ok(mut r) => {
                r.refused = refused;
                return Ok(r);
            }
            Err(StartError::Config(e)) => match DataFile::named_by(&e) {
                Some(f) if !without.contains(&f) => refused.push((f, e.to_string())),
                _ => return Err(e.to_string()),
            },
            Err(e) => return Err(e.to_string()),
        }
    }
}

/// Which file a path names, not following a final link: device, inode,
/// type, and birth time where the file system keeps one (an inode number
/// freed by a deletion is soon given to the next file made; its birth time
/// and often its type tell the two apart, and neither changes when the
/// file is written).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Id {
    dev: u64,
    ino: u64,
    kind: u8,
    born: Option<std::time::SystemTime>,
}

type FileIdentity = Option<Id>;

fn kind(t: &std::fs::FileType) -> u8 {
    match () {
        _ if t.is_symlink() => 1,
        _ if t.is_file() => 2,
        _ if t.is_dir() => 3,
        _ => 4,
    }
}

fn identity(p: &Path) -> FileIdentity {
    std::fs::symlink_metadata(p).ok().map(|m| Id {
        dev: m.dev(),
        ino: m.ino(),
        kind: kind(&m.file_type()),
        born: m.created().ok(),
    })
}

/// What the server serves now, with the identities it was made from.
struct Serving {
    ids: Vec<FileIdentity>,
    now: Result<Arc<Resolved>, String>,
}

/// The watched paths and the resolution calls take.
pub(crate) struct Files {
    inputs: Inputs,
    /// The sandbox every resolution's grants are set on (detected once).
    detected: Sandbox,
    /// Each watched path with how the line names it.
    watched: Vec<(&'static str, PathBuf)>,
    serving: Mutex<Serving>,
}

impl Files {
    /// Watch what `first` (the start-up resolution) resolved.
    pub fn new(inputs: Inputs, first: Arc<Resolved>) -> Files {
        let detected = first.sandbox.clone();
        let watched = watched(&first.config);
        let ids = watched.iter().map(|(_, p)| identity(p)).collect();
        Files {
            inputs,
            detected,
            watched,
            serving: Mutex::new(Serving {
                ids,
                now: Ok(first),
            }),
        }
    }

    /// The resolution a call uses from start to end: the last one, or a
    /// new one when a watched path names another file than it saw.
    pub fn current(&self) -> Result<Arc<Resolved>, String> {
        let ids = self.identities();
        let mut serving = self.serving.lock().unwrap_or_else(|e| e.into_inner());
        if serving.ids != ids {
            // Under the lock: one resolution and one line per change,
            // however many calls see it at once.
            let now = resolve_sparing(&self.inputs, &self.detected).map(Arc::new);
            crate::log::line(change_line(&self.watched, &serving.ids, &ids, &now));
            *serving = Serving { ids, now };
        }
        serving.now.clone()
    }

    fn identities(&self) -> Vec<FileIdentity> {
        self.watched.iter().map(|(_, p)| identity(p)).collect()
    }
}

/// The root, the backend, the home, the fixed files and the database's
/// folder (which a draft may write in), as named at start. The backend is
/// pinned like the fixed files: once its owner replaces it (an upgrade),
/// runs must be set up on the new file, not refused for naming the old.
fn watched(config: &Config) -> Vec<(&'static str, PathBuf)> {
    let mut out = vec![
        ("the root", config.root.clone()),
        ("the backend", config.backend.clone()),
    ];
    let fixed = [
        ("the home", &config.home),
        ("the database", &config.db),
        ("the accounts file", &config.accounts),
        ("the profile", &config.profile),
    ];
    for (name, f) in fixed {
        if let Some(f) = f {
            if !out.iter().any(|(_, p)| *p == f.path) {
                out.push((name, f.path.clone()));
            }
        }
    }
    if let Some(folder) = config.db.as_ref().and_then(|d| d.path.parent()) {
        if !out.iter().any(|(_, p)| p == folder) {
            out.push(("the database's folder", folder.to_path_buf()));
        }
    }
    out
}

/// The one stderr line that says what changed and what is served now.
fn change_line(
    watched: &[(&'static str, PathBuf)],
    before: &[FileIdentity],
    after: &[FileIdentity],
    now: &Result<Arc<Resolved>, String>,
) -> String {
    let changes: Vec<String> = watched
        .iter()
        .zip(before.iter().zip(after))
        .filter(|(_, (b, a))| b != a)
        .map(|((name, path), (b, a))| {
            let how = match (b, a) {
                (Some(_), None) => "is gone",
                (None, Some(_)) => "is back",
                _ => "was replaced",
            };
            format!("{name} {} {how}", path.display())
        })
        .collect();
    let outcome = match now {
        Err(why) => format!("every tool is refused until it is fixed: {why}"),
        Ok(r) if !r.refused.is_empty() => {
            let refused: Vec<String> = r
                .refused
                .iter()
                .map(|(f, why)| format!("the {} is not granted: {why}", f.name()))
                .collect();
            format!(
                "{}; tools other than `{RUNS_WITHOUT_FILES}` are refused until it is fixed",
                refused.join("; ")
            )
        }
        Ok(_) => "serving from what is there now".to_string(),
    };
    format!(
        "{}: files changed: {}; {outcome}",
        super::SERVER_NAME,
        changes.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_change_line_names_each_change_and_the_outcome() {
        let watched = vec![
            ("the root", PathBuf::from("/srv/r")),
            ("the database", PathBuf::from("/srv/r/rw.db")),
            ("the profile", PathBuf::from("/srv/r/p.yaml")),
        ];
        let id = |ino| {
            Some(Id {
                dev: 1,
                ino,
                kind: 0,
                born: None,
            })
        };
        let before = vec![id(2), id(3), None];
        let after = vec![None, id(4), id(5)];
        let line = change_line(
            &watched,
            &before,
            &after,
            &Err("--root /srv/r: no such folder".into()),
        );
        assert_eq!(
            line,
            "reachweaver-mcp: files changed: the root /srv/r is gone, the database /srv/r/rw.db \
             was replaced, the profile /srv/r/p.yaml is back; every tool is refused until it is \
             fixed: --root /srv/r: no such folder"
        );
        let same = vec![id(2), id(3), None];
        let line = change_line(&watched, &before, &same, &Err("x".into()));
        assert!(line.contains("files changed: ; "), "{line}");
    }

    #[test]
    fn the_watched_paths_are_the_root_the_backend_the_fixed_files_and_the_database_folder() {
        use crate::config::{Fixed, Source};
        let fixed = |p: &str| Fixed {
            path: PathBuf::from(p),
            source: Source::Option("--db"),
            exists: true,
            id: None,
        };
        let config = Config {
            backend: PathBuf::from("/opt/rw/bin/rw"),
            home: Some(fixed("/srv/h")),
            db: Some(fixed("/srv/h/data/rw.db")),
            accounts: None,
            profile: Some(fixed("/srv/h/p.yaml")),
            root: PathBuf::from("/srv/h"),
            root_source: Source::Option("--root"),
            allow_read: Vec::new(),
        };
        let names: Vec<(&str, String)> = watched(&config)
            .into_iter()
            .map(|(n, p)| (n, p.display().to_string()))
            .collect();
        assert_eq!(
            names,
            vec![
                ("the root", "/srv/h".to_string()),
                ("the backend", "/opt/rw/bin/rw".to_string()),
                ("the database", "/srv/h/data/rw.db".to_string()),
                ("the profile", "/srv/h/p.yaml".to_string()),
                ("the database's folder", "/srv/h/data".to_string()),
            ]
        );
    }
}
