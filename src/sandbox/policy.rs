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

use super::exec_chain::push_unique;
pub use super::exec_chain::{
    env_target, find_on_path, install_prefix, install_prefix_guarded, is_interpreter_tree,
    parse_shebang, runtime_paths, Shebang, SYSTEM_PATHS,
};
use super::layers::LayerSet;
use super::{Layer, RunKind, SandboxOptions};

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

/// The Landlock ABI that brought the truncate right.
pub const LANDLOCK_TRUNCATE_ABI: i32 = 3;

/// Which layers the helper applies. Each is decided at start (what the
/// kernel offers, minus what the owner switched off); the helper treats a
/// layer that is on and does not apply as a failure of the run.
///
/// Which layers are on is a [`LayerSet`] keyed by the one layer list, so
/// no field can drift from a layer's name. Two layers carry a value, and
/// are on exactly when their value is set: [`Layer::PidMax`]
/// ([`Layers::set_pid_max`]) and [`Layer::Landlock`]
/// ([`Layers::set_landlock_abi`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Layers {
    on: LayerSet,
    /// Highest process id inside the PID namespace (per-namespace `pid_max`),
    /// which bounds the run's process count whatever its uid.
    pid_max: Option<u32>,
    /// The Landlock ABI every handled right must be enforced at.
    landlock_abi: Option<i32>,
    /// Forbid nested namespaces through the user namespace's own counters.
    /// Not a layer of its own: part of `userns`, and only where the
    /// counters are the run's own.
    pub ns_limits: bool,
    /// With `caps`: the bounding set is emptied and the securebits locked,
    /// which needs CAP_SETPCAP in the run's namespace (a user namespace of
    /// its own, or a server run as root). Without it the run holds no
    /// capability to begin with, and `no_new_privs` keeps it so.
    pub caps_bounding: bool,
}

impl Layers {
    /// These layers on, nothing else (a layer that carries a value stays
    /// off until it is given one).
    pub fn of(layers: &[Layer]) -> Layers {
        Layers {
            on: layers.iter().copied().collect(),
            ..Layers::default()
        }
    }

    /// Whether a run applies this layer.
    pub fn has(&self, layer: Layer) -> bool {
        // A layer that carries a value is on only with it, so `has` and the
        // value can't disagree.
        self.on.has(layer)
            && (layer != Layer::PidMax || self.pid_max.is_some())
            && (layer != Layer::Landlock || self.landlock_abi.is_some())
    }

    /// Switches `layer` on (see [`Layers`] for the two that need a value).
    pub fn insert(&mut self, layer: Layer) {
        self.on.insert(layer);
    }

    /// Switches `layer` off.
    pub fn remove(&mut self, layer: Layer) {
        self.on.remove(layer);
    }

    /// Switches `layer` on or off.
    pub fn set(&mut self, layer: Layer, on: bool) {
        self.on.set(layer, on);
    }

    /// This set with `layer` on.
    #[must_use]
    pub fn with(mut self, layer: Layer) -> Layers {
        self.insert(layer);
        self
    }

    /// This set with `layer` off.
    #[must_use]
    pub fn without(mut self, layer: Layer) -> Layers {
        self.remove(layer);
        self
    }

    /// The PID namespace's `pid_max`, when that layer is on.
    pub fn pid_max(&self) -> Option<u32> {
        self.pid_max.filter(|_| self.on.has(Layer::PidMax))
    }

    /// Sets the PID namespace's `pid_max` (`None`: the layer off).
    pub fn set_pid_max(&mut self, max: Option<u32>) {
        self.pid_max = max;
        self.on.set(Layer::PidMax, max.is_some());
    }

    /// The Landlock ABI, when Landlock is on.
    pub fn landlock_abi(&self) -> Option<i32> {
        self.landlock_abi.filter(|_| self.on.has(Layer::Landlock))
    }

    /// Whether Landlock judges `truncate(2)` by path (its truncate right,
    /// ABI 3). Where it doesn't, seccomp refuses that call, so the two
    /// keep writes confined together (`promises::assess`).
    pub fn landlock_truncates(&self) -> bool {
        self.landlock_abi()
            .is_some_and(|abi| abi >= LANDLOCK_TRUNCATE_ABI)
    }

    /// Sets the Landlock ABI (`None`: Landlock off).
    pub fn set_landlock_abi(&mut self, abi: Option<i32>) {
        self.landlock_abi = abi;
        self.on.set(Layer::Landlock, abi.is_some());
    }

    /// The layers on.
    pub fn set_of(&self) -> LayerSet {
        self.on.iter().filter(|l| self.has(*l)).collect()
    }

    /// The names of the layers switched on, in the layer list's order.
    pub fn names(&self) -> Vec<&'static str> {
        self.set_of().names()
    }
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
    /// Folders where the run may read, write, create and remove regular
    /// files only (the database's folder for `draft`): no links, folders,
    /// devices, and (by the mount plan) nothing else in it replaced.
    #[serde(default)]
    pub write_files: Vec<PathBuf>,
    /// The run's file system view when it gets a mount namespace.
    #[serde(default)]
    pub mounts: Option<MountPlan>,
    pub kind: RunKind,
    pub layers: Layers,
    pub rlimits: Rlimits,
    /// The server's pid: the helper checks it is still its parent after
    /// arming the parent-death signal, which closes the race where the
    /// server dies first.
    pub parent_pid: u32,
}

/// Device and inode of a path, taken once when the server starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pin {
    pub dev: u64,
    pub ino: u64,
}

/// One path of the host made visible in the run's minimal root, at the
/// same place, read-only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bind {
    pub path: PathBuf,
    /// Programs beneath it may run (the runtime); everything else is `noexec`.
    pub exec: bool,
    /// What the path named at start; a mismatch refuses the run.
    pub pin: Option<Pin>,
    /// A fixed file (database, accounts, profile): it must be a regular
    /// file, and one that is missing is left out rather than failing the run.
    pub fixed_file: bool,
}

/// The database whose folder a `draft` run may write in: the folder is
/// bound writable, the database over itself (so it cannot be replaced), and
/// every other entry read-only over itself, so only the database and
/// SQLite's companions (`-journal`, `-wal`, `-shm`) can change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DraftDb {
    pub folder: PathBuf,
    pub db: PathBuf,
    pub pin: Option<Pin>,
    /// The folder as it was at start: a draft writes in no other.
    #[serde(default)]
    pub folder_pin: Option<Pin>,
}

impl DraftDb {
    /// The names a draft run may create, write and remove in the folder.
    pub fn writable_names(&self) -> Vec<String> {
        let Some(name) = self.db.file_name().and_then(|n| n.to_str()) else {
            return Vec::new();
        };
        vec![
            name.to_string(),
            format!("{name}-journal"),
            format!("{name}-wal"),
            format!("{name}-shm"),
        ]
    }
}

/// The run's own `TMPDIR`: a folder in a tmpfs mounted at `/tmp` of its
/// mount namespace, gone with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TmpFs {
    /// Where the tmpfs is mounted (`/tmp`, unless a grant is `/tmp` itself).
    pub mount: PathBuf,
    /// `TMPDIR` (Landlock grants writes beneath it, and nowhere else in
    /// `/tmp`: a grant that lives below the host's `/tmp` appears in the
    /// run's `/tmp` too, and must not end up beneath a writable rule).
    pub dir: PathBuf,
    pub size_bytes: u64,
    pub inodes: u64,
}

/// The run's tmpfs mount and its `TMPDIR`: `/tmp` and `/tmp/run`, or
/// `/tmp/run-N` when a grant lives at or beneath that name; when a grant
/// is `/tmp` itself (only code and tests do that: the guard refuses it),
/// a mount of its own at `/.reachweaver-tmp`. Pure.
pub fn run_tmpdir(grants: &[&Path]) -> (PathBuf, PathBuf) {
    let clear = |c: &Path| !grants.iter().any(|g| g.starts_with(c) || c.starts_with(g));
    if clear(Path::new("/tmp/run")) || grants.iter().all(|g| !Path::new("/tmp").starts_with(g)) {
        for n in 0..64 {
            let c = match n {
                0 => PathBuf::from("/tmp/run"),
                n => PathBuf::from(format!("/tmp/run-{n}")),
            };
            if clear(&c) {
                return (PathBuf::from("/tmp"), c);
            }
        }
    }
    (
        PathBuf::from("/.reachweaver-tmp"),
        PathBuf::from("/.reachweaver-tmp/run"),
    )
}

/// The run's whole file system view, in the order it is built: binds
/// (parents before children), devices, the temp tmpfs, the draft folder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MountPlan {
    pub binds: Vec<Bind>,
    /// Device files bound from the host (`/dev/null` writable, the rest read-only).
    pub devices: Vec<PathBuf>,
    pub tmp: TmpFs,
    pub draft: Option<DraftDb>,
    /// A `proc` of the run's own PID namespace (so `/proc/self/exe` works),
    /// showing processes only.
    pub proc: bool,
    /// Protected paths beneath a bind, covered by an empty read-only file
    /// or folder.
    #[serde(default)]
    pub masks: Vec<PathBuf>,
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
    let mountns = input.layers.has(Layer::Mountns);
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

    let mounts = mountns.then(|| mount_plan(opts, input.runtime, input.kind));
    let tmpdir = match &mounts {
        Some(plan) => plan.tmp.dir.clone(),
        None => input.tmpdir.to_path_buf(),
    };
    let mut read_write: Vec<PathBuf> = vec![tmpdir.clone()];
    for d in WRITE_DEVICES {
        push_unique(&mut read_write, Path::new(d));
    }
    let mut write_files: Vec<PathBuf> = Vec::new();
    if input.kind == RunKind::Draft {
        if let Some(folder) = opts.db.as_deref().and_then(Path::parent) {
            push_unique(&mut write_files, folder);
        }
    }

    Policy {
        program: input
            .argv
            .first()
            .map(PathBuf::from)
            .unwrap_or_else(|| opts.backend.clone()),
        argv: input.argv.to_vec(),
        env: build_env(input.env, &opts.pass_env, &tmpdir),
        cwd: input.cwd.to_path_buf(),
        read_exec,
        read,
        read_write,
        tmpdir,
        write_files,
        mounts,
        kind: input.kind,
        layers: input.layers,
        rlimits: Rlimits::default(),
        parent_pid: input.parent_pid,
    }
}

/// The minimal root of a run of this kind. Pure: the same grants always
/// give the same plan, so the sandbox's helper can build it ahead of the
/// request and check the request asks for exactly what it built.
pub fn mount_plan(opts: &SandboxOptions, runtime: &[PathBuf], kind: RunKind) -> MountPlan {
    let pin_of = |p: &Path| opts.pins.iter().find(|(q, _)| q == p).map(|(_, pin)| *pin);
    let fixed: Vec<&Path> = opts
        .read
        .iter()
        .map(PathBuf::as_path)
        .filter(|p| opts.db.as_deref() == Some(*p) || !opts.home_like(p))
        .collect();
    let mut wanted: Vec<Bind> = Vec::new();
    let mut add = |path: &Path, exec: bool, fixed_file: bool| {
        if let Some(b) = wanted.iter_mut().find(|b| b.path == path) {
            b.exec |= exec;
            return;
        }
        wanted.push(Bind {
            path: path.to_path_buf(),
            exec,
            pin: pin_of(path),
            fixed_file,
        });
    };
    for p in runtime {
        add(p, true, false);
    }
    add(&opts.backend, true, false);
    add(&opts.root, false, false);
    for p in &opts.read {
        add(p, false, fixed.contains(&p.as_path()));
    }
    if let Some(db) = &opts.db {
        add(db, false, true);
    }
    // Parents before children, so a child's mount point exists when it is
    // bound; a child that adds nothing to its parent's view is left out.
    wanted.sort_by_key(|b| b.path.components().count());
    let mut binds: Vec<Bind> = Vec::new();
    for b in wanted {
        let covered = binds
            .iter()
            .rev()
            .find(|a| b.path.starts_with(&a.path))
            .is_some_and(|a| a.exec == b.exec);
        if !covered || b.pin.is_some() || b.fixed_file {
            binds.push(b);
        }
    }
    let draft = match (kind, opts.db.as_deref()) {
        (RunKind::Draft, Some(db)) => db.parent().map(|folder| DraftDb {
            folder: folder.to_path_buf(),
            db: db.to_path_buf(),
            pin: pin_of(db),
            folder_pin: pin_of(folder),
        }),
        _ => None,
    };
    let mut grants: Vec<&Path> = binds.iter().map(|b| b.path.as_path()).collect();
    grants.extend(opts.read.iter().map(PathBuf::as_path));
    grants.extend(draft.as_ref().map(|d| d.folder.as_path()));
    let (tmp_mount, tmp_dir) = run_tmpdir(&grants);
    let mut devices: Vec<PathBuf> = Vec::new();
    for d in WRITE_DEVICES.iter().chain(READ_DEVICES) {
        devices.push(PathBuf::from(d));
    }
    let mut masks: Vec<PathBuf> = opts
        .masks
        .iter()
        .filter(|p| binds.iter().any(|b| p.starts_with(&b.path)))
        .cloned()
        .collect();
    masks.sort();
    MountPlan {
        binds,
        devices,
        tmp: TmpFs {
            mount: tmp_mount,
            dir: tmp_dir,
            size_bytes: 64 << 20,
            inodes: 4096,
        },
        draft,
        proc: true,
        masks,
    }
}

/// Device and inode of the root, the fixed files and the backend, taken
/// once at start (without following a final link). A fixed file that is a
/// link or not a regular file is refused: a run could otherwise point the
/// next run's grant anywhere.
pub fn pin_fixed_paths(opts: &SandboxOptions) -> Result<Vec<(PathBuf, Pin)>, String> {
    use std::os::unix::fs::MetadataExt;
    let mut out: Vec<(PathBuf, Pin)> = Vec::new();
    let mut paths: Vec<(&Path, bool)> = vec![(&opts.root, false)];
    // The backend is named by the path argv[0] gives; pinned when it is the
    // file itself (a link, as `/bin/sh` often is, is bound as a link).
    if std::fs::symlink_metadata(&opts.backend).is_ok_and(|m| m.is_file()) {
        paths.push((&opts.backend, true));
    }
    for p in &opts.read {
        paths.push((p, !opts.home_like(p)));
    }
    if let Some(db) = &opts.db {
        paths.push((db, true));
        // The folder a draft may write in, so it can't be swapped for another.
        if let Some(folder) = db.parent() {
            paths.push((folder, false));
        }
    }
    for (p, must_be_file) in paths {
        // A pin the caller took in the same lookup as its own checks (a
        // fixed file's type and number of names) stands: looking again
        // could pin a file swapped in since.
        if let Some(given) = opts.pins.iter().find(|(q, _)| q == p) {
            if !out.iter().any(|(q, _)| q == p) {
                out.push(given.clone());
            }
            continue;
        }
        let meta = match std::fs::symlink_metadata(p) {
            Ok(m) => m,
            // A database that doesn't exist yet (draft creates it) has nothing to pin.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(format!("{}: {e}", p.display())),
        };
        if meta.file_type().is_symlink() {
            return Err(format!(
                "{} is a symbolic link; give the file it points to",
                p.display()
            ));
        }
        if must_be_file && !meta.is_file() {
            return Err(format!("{} is not a regular file", p.display()));
        }
        if !out.iter().any(|(q, _)| q == p) {
            out.push((
                p.to_path_buf(),
                Pin {
                    dev: meta.dev(),
                    ino: meta.ino(),
                },
            ));
        }
    }
    Ok(out)
}

/// Whether every pinned path still names the file it named at start.
pub fn check_pins(pins: &[(PathBuf, Pin)]) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    for (p, pin) in pins {
        let now = std::fs::symlink_metadata(p).map(|m| (m.dev(), m.ino()));
        if now.ok() != Some((pin.dev, pin.ino)) {
            return Err(format!(
                "{} changed after this call checked it; the next call looks again and uses what is there then",
                p.display()
            ));
        }
    }
    Ok(())
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

/// The part of a [`Policy`] a spare arms itself with, as opposed to what
/// the run executes: every field but the program, its argv and
/// environment, the working folder and the server's pid. A read-only run's
/// init applies all of it before its request arrives, then runs only a
/// request whose policy has the same armed part.
#[derive(Debug, PartialEq, Eq)]
pub struct ArmedPart<'a> {
    read_exec: &'a [PathBuf],
    read: &'a [PathBuf],
    read_write: &'a [PathBuf],
    tmpdir: &'a Path,
    write_files: &'a [PathBuf],
    mounts: Option<&'a MountPlan>,
    kind: RunKind,
    layers: Layers,
    rlimits: Rlimits,
}

impl Policy {
    pub fn armed_part(&self) -> ArmedPart<'_> {
        // Named field by field, so a field added to the policy must be
        // placed on one side or the other here before this compiles.
        let Policy {
            program: _,
            argv: _,
            env: _,
            cwd: _,
            parent_pid: _,
            read_exec,
            read,
            read_write,
            tmpdir,
            write_files,
            mounts,
            kind,
            layers,
            rlimits,
        } = self;
        ArmedPart {
            read_exec,
            read,
            read_write,
            tmpdir,
            write_files,
            mounts: mounts.as_ref(),
            kind: *kind,
            layers: *layers,
            rlimits: *rlimits,
        }
    }
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
    fn draft_policy_adds_the_database_folder_for_regular_files_only() {
        let p = build_for(RunKind::Draft);
        assert_eq!(
            p.read_write,
            vec![PathBuf::from("/tmp/rw-run-1"), PathBuf::from("/dev/null")]
        );
        assert_eq!(p.write_files, vec![PathBuf::from("/srv/rw-home/db")]);
        assert!(build_for(RunKind::ReadOnly).write_files.is_empty());
    }

    fn plan_opts() -> SandboxOptions {
        let mut o = opts();
        o.home = Some(PathBuf::from("/srv/rw-home"));
        o.pins = vec![
            (PathBuf::from("/srv/work"), Pin { dev: 1, ino: 2 }),
            (
                PathBuf::from("/srv/rw-home/db/reachweaver.db"),
                Pin { dev: 1, ino: 3 },
            ),
        ];
        o
    }

    #[test]
    fn with_a_mount_namespace_tmpdir_is_the_runs_own_tmp_and_nothing_on_the_host() {
        let o = plan_opts();
        let runtime = vec![PathBuf::from("/usr")];
        let argv = vec!["/opt/rw/bin/reachweaver".to_string()];
        let p = build(&BuildInput {
            opts: &o,
            kind: RunKind::ReadOnly,
            runtime: &runtime,
            env: &[],
            layers: Layers::of(&[Layer::Mountns]),
            tmpdir: Path::new("/tmp/ignored"),
            argv: &argv,
            cwd: Path::new("/srv/work"),
            parent_pid: 1,
        });
        assert_eq!(p.tmpdir, PathBuf::from("/tmp/run"));
        assert_eq!(p.read_write[0], PathBuf::from("/tmp/run"));
        assert_eq!(
            p.env.last().unwrap(),
            &("TMPDIR".to_string(), "/tmp/run".to_string())
        );
        assert_eq!(p.mounts, Some(mount_plan(&o, &runtime, RunKind::ReadOnly)));
    }

    #[test]
    fn the_mount_plan_binds_parents_first_pins_fixed_paths_and_skips_covered_ones() {
        let o = plan_opts();
        let runtime = vec![
            PathBuf::from("/usr"),
            PathBuf::from("/usr/lib/python3"),
            PathBuf::from("/opt/rw"),
        ];
        let plan = mount_plan(&o, &runtime, RunKind::ReadOnly);
        let paths: Vec<&str> = plan
            .binds
            .iter()
            .map(|b| b.path.to_str().unwrap())
            .collect();
        // /usr/lib/python3 and the backend add nothing to /usr and /opt/rw.
        assert_eq!(
            paths,
            [
                "/usr",
                "/opt/rw",
                "/srv/work",
                "/srv/rw-home",
                "/srv/rw-home/accounts.yaml",
                "/srv/rw-home/db/reachweaver.db"
            ]
        );
        let by = |p: &str| plan.binds.iter().find(|b| b.path == Path::new(p)).unwrap();
        assert!(by("/usr").exec && by("/opt/rw").exec);
        assert!(!by("/srv/work").exec && !by("/srv/rw-home").exec);
        assert_eq!(by("/srv/work").pin, Some(Pin { dev: 1, ino: 2 }));
        assert!(by("/srv/rw-home/db/reachweaver.db").fixed_file);
        assert!(by("/srv/rw-home/accounts.yaml").fixed_file);
        assert!(!by("/srv/rw-home").fixed_file);
        assert_eq!(plan.devices[0], PathBuf::from("/dev/null"));
        assert!(plan.proc);
        assert_eq!(plan.draft, None);
    }

    #[test]
    fn the_runs_tmpdir_never_holds_or_sits_in_a_grant() {
        let tmp = |d: &str| (PathBuf::from("/tmp"), PathBuf::from(d));
        assert_eq!(run_tmpdir(&[Path::new("/usr")]), tmp("/tmp/run"));
        // A root below the host's /tmp (as in tests) stays beside TMPDIR,
        // never beneath its writable rule.
        assert_eq!(
            run_tmpdir(&[Path::new("/tmp/rw-test/root")]),
            tmp("/tmp/run")
        );
        assert_eq!(
            run_tmpdir(&[Path::new("/tmp/run/x"), Path::new("/tmp/run-1")]),
            tmp("/tmp/run-2")
        );
        // A grant of /tmp itself (refused by the guard; tests do it) gets
        // the tmpfs somewhere else, and the search always ends.
        assert_eq!(
            run_tmpdir(&[Path::new("/tmp")]),
            (
                PathBuf::from("/.reachweaver-tmp"),
                PathBuf::from("/.reachweaver-tmp/run")
            )
        );
    }

    #[test]
    fn only_the_draft_plan_opens_the_database_folder() {
        let o = plan_opts();
        let plan = mount_plan(&o, &[], RunKind::Draft);
        let d = plan.draft.expect("draft folder");
        assert_eq!(d.folder, PathBuf::from("/srv/rw-home/db"));
        assert_eq!(d.db, PathBuf::from("/srv/rw-home/db/reachweaver.db"));
        assert_eq!(d.pin, Some(Pin { dev: 1, ino: 3 }));
        assert_eq!(
            d.writable_names(),
            [
                "reachweaver.db",
                "reachweaver.db-journal",
                "reachweaver.db-wal",
                "reachweaver.db-shm"
            ]
        );
    }

    #[test]
    fn pins_refuse_links_and_notice_a_replaced_file() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir(&root).unwrap();
        let db = dir.path().join("rw.db");
        std::fs::write(&db, b"x").unwrap();
        let mut o = SandboxOptions {
            root: root.clone(),
            db: Some(db.clone()),
            backend: PathBuf::from("/nonexistent/backend"),
            ..SandboxOptions::default()
        };
        let pins = pin_fixed_paths(&o).unwrap();
        // The root, the database and the folder a draft writes in.
        assert_eq!(pins.len(), 3);
        assert!(pins.iter().any(|(p, _)| p == dir.path()), "{pins:?}");
        check_pins(&pins).unwrap();
        // Replaced by another file (what a run swapping it for a link does
        // first); the old one is kept, so its inode can't be reused.
        std::fs::rename(&db, dir.path().join("old.db")).unwrap();
        std::fs::write(&db, b"x").unwrap();
        let e = check_pins(&pins).unwrap_err();
        assert!(e.contains("changed after this call checked it"), "{e}");
        // A fixed file that is a link is refused at start.
        std::fs::remove_file(&db).unwrap();
        std::os::unix::fs::symlink("/", &db).unwrap();
        let e = pin_fixed_paths(&o).unwrap_err();
        assert!(e.contains("symbolic link"), "{e}");
        // A database that doesn't exist yet has nothing to pin.
        std::fs::remove_file(&db).unwrap();
        o.db = Some(db);
        assert_eq!(pin_fixed_paths(&o).unwrap().len(), 2);
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
    fn env_withholds_auth_pwd_and_key_lists_unless_passed_by_name() {
        let server = env(&[
            ("REACHWEAVER_SMTP_AUTH", "smtp-auth-value"),
            ("REACHWEAVER_DB_PWD", "db-pwd-value"),
            ("REACHWEAVER_API_KEYS", "k1,k2"),
            ("REACHWEAVER_APP_KEY", "base64:abc"),
            ("REACHWEAVER_SORT_KEYS", "name,date"),
            ("REACHWEAVER_AUTHOR", "Dana"),
            ("PWD", "/home/u"),
        ]);
        let out = build_env(&server, &[], Path::new("/t"));
        assert_eq!(
            names(&out),
            vec!["REACHWEAVER_SORT_KEYS", "REACHWEAVER_AUTHOR", "TMPDIR"]
        );
        let out = build_env(
            &server,
            &["REACHWEAVER_DB_PWD".to_string()],
            Path::new("/t"),
        );
        assert_eq!(
            names(&out),
            vec![
                "REACHWEAVER_DB_PWD",
                "REACHWEAVER_SORT_KEYS",
                "REACHWEAVER_AUTHOR",
                "TMPDIR"
            ]
        );
    }

    #[test]
    fn env_drops_secret_names_unless_passed_by_name() {
        let server = env(&[
            ("REACHWEAVER_API_TOKEN", "abcdefgh12345"),
            ("REACHWEAVER_DB_PASSWORD", "hunter2hunter2"),
            ("REACHWEAVER_SMTP_PASS", "smtp-pass-123"),
            ("REACHWEAVER_SIGNING_KEY", "signing-key-123"),
            ("REACHWEAVER_PASSPHRASE", "a long passphrase"),
            ("REACHWEAVER_SENTRY_DSN", "https://k@sentry.example/1"),
            ("REACHWEAVER_SESSION", "session-123456"),
            ("REACHWEAVER_PROFILE", "default"),
            ("REACHWEAVER_HOME", "/home/u/rw"),
            ("OPENAI_API_KEY", "sk-xxxxxxxx"),
            ("GITHUB_TOKEN", "ghp_xxxxxxxx"),
        ]);
        let out = build_env(&server, &["OPENAI_API_KEY".to_string()], Path::new("/t"));
        assert_eq!(
            names(&out),
            vec![
                "REACHWEAVER_PROFILE",
                "REACHWEAVER_HOME",
                "OPENAI_API_KEY",
                "TMPDIR"
            ]
        );
        // The owner may still pass one by name (its value is then redacted from results).
        let out = build_env(
            &server,
            &["REACHWEAVER_SMTP_PASS".to_string()],
            Path::new("/t"),
        );
        assert_eq!(
            names(&out),
            vec![
                "REACHWEAVER_SMTP_PASS",
                "REACHWEAVER_PROFILE",
                "REACHWEAVER_HOME",
                "TMPDIR"
            ]
        );
    }

    #[test]
    fn secret_names_follow_the_word_rule() {
        for s in [
            "GITHUB_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "DB_PASSWORD",
            "MY_PASSWD",
            "SMTP_PASS",
            "GPG_PASSPHRASE",
            "RELEASE_SIGNING_KEY",
            "APP_PRIVATE",
            "STRIPE_KEY",
            "SENTRY_DSN",
            "GITHUB_PAT",
            "X_APIKEY",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "AZURE_CREDENTIAL",
            "SESSION_COOKIE",
            "OPENAI_API_KEY",
            "AWS_ACCESS_KEY_ID",
            "MY_AUTH_TOKEN",
            // SESSION is a secret word: the desktop's session name is withheld too.
            "DESKTOP_SESSION",
            "token",
        ] {
            assert!(is_secret_name(s), "{s} should be secret");
        }
        for s in [
            "GIT_AUTHOR_NAME",
            "TOKENIZER_PATH",
            "PATH",
            "PWD",
            "REACHWEAVER_HOME",
            "KEYBOARD",
            "PASSWORDLESS",
            // A path to a key is not the key: the secret word must end the
            // name, or be followed only by how it is stored (`_BASE`, `_DATA`).
            "SSH_PRIVATE_KEY_FILE",
            "REACHWEAVER_TOKEN_PATH",
        ] {
            assert!(!is_secret_name(s), "{s} should not be secret");
        }
    }

    #[test]
    fn the_armed_part_is_every_field_but_what_the_run_executes() {
        let base = build_for(RunKind::ReadOnly);
        // What a request brings may differ: the armed part is the same.
        let mut other = base.clone();
        other.program = PathBuf::from("/usr/bin/true");
        other.argv = vec!["/usr/bin/true".into(), "x".into()];
        other.env.push(("EDITOR".into(), "vi".into()));
        other.cwd = PathBuf::from("/elsewhere");
        other.parent_pid += 1;
        assert_eq!(other.armed_part(), base.armed_part());
        // Each field that confines tells two policies apart on its own.
        type Change = fn(&mut Policy);
        let changes: Vec<(&str, Change)> = vec![
            ("read_exec", (|p| p.read_exec.push("/x".into()))),
            ("read", (|p| p.read.push("/x".into()))),
            ("read_write", (|p| p.read_write.push("/x".into()))),
            ("tmpdir", (|p| p.tmpdir = "/x".into())),
            ("write_files", (|p| p.write_files.push("/x".into()))),
            (
                "mounts",
                (|p| {
                    p.mounts = match p.mounts.take() {
                        Some(_) => None,
                        None => Some(mount_plan(&opts(), &[], RunKind::ReadOnly)),
                    }
                }),
            ),
            ("kind", (|p| p.kind = RunKind::Draft)),
            (
                "layers",
                (|p| p.layers.set(Layer::Seccomp, !p.layers.has(Layer::Seccomp))),
            ),
            ("rlimits", (|p| p.rlimits.open_files += 1)),
        ];
        for (field, change) in changes {
            let mut changed = base.clone();
            change(&mut changed);
            assert_ne!(changed.armed_part(), base.armed_part(), "{field}");
        }
    }
}
