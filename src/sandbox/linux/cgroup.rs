//! The cgroup layer: a cgroup v2 per run, so a run's memory (memfds and
//! tmpfs pages included, which `RLIMIT_AS` does not see) and process count
//! are bounded as a whole, not per process.
//!
//! A per-run cgroup needs a cgroup v2 hierarchy with the `memory` and `pids`
//! controllers that the server may manage: a cgroup of the server's own
//! that is delegated to its user (a systemd unit or scope with
//! `Delegate=yes`) and holds no other process, or root with both
//! controllers enabled at the hierarchy's root. Many machines have neither
//! (cgroup v1, a v2 hierarchy without those controllers, a cgroup shared
//! with the shell or the MCP client): there the layer is reported as
//! unavailable with the reason, and a run's memory is bounded by
//! `RLIMIT_AS` per process, its `/tmp` by the tmpfs size, memfds are
//! refused by seccomp, and its process count by the PID namespace's
//! `pid_max` and `RLIMIT_NPROC`.
//!
//! What is done to the hierarchy is planned as plain data ([`assess`],
//! [`RunCgroup::plan`]) and carried out by one small function each. The run
//! enters its cgroup itself: the server opens the run cgroup's
//! `cgroup.procs` and passes the descriptor with the request; the run's
//! init writes `0` to it before any other layer, so the backend and all it
//! starts are inside from their first instruction.

use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::cgroup_restore as restore;

/// `statfs` magic of a cgroup v2 file system.
const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;

/// What a run's cgroup would be set to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CgroupLimits {
    pub memory_max: u64,
    pub pids_max: u64,
}

impl Default for CgroupLimits {
    /// The whole run gets what one process may map (`RLIMIT_AS`) and as
    /// many processes as `RLIMIT_NPROC` allows one user: a single process is
    /// never held tighter than before, and many cannot add up past it.
    fn default() -> Self {
        CgroupLimits {
            memory_max: 4 << 30,
            pids_max: 256,
        }
    }
}

impl CgroupLimits {
    /// The control files of the run's cgroup and their values, in the
    /// order they are written: no swap, so `memory.max` is the whole bound.
    pub fn writes(&self) -> Vec<(&'static str, String)> {
        vec![
            ("memory.max", self.memory_max.to_string()),
            ("memory.swap.max", "0".to_string()),
            ("pids.max", self.pids_max.to_string()),
        ]
    }
}

/// The facts detection reads off the machine.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CgroupFacts {
    /// `/sys/fs/cgroup` is a cgroup v2 file system.
    pub unified_at_root: bool,
    /// Controllers of a v2 hierarchy mounted at `/sys/fs/cgroup/unified`
    /// beside v1 ones (`None`: no such hierarchy).
    pub hybrid_controllers: Option<String>,
    /// The server's own v2 cgroup (the `0::` line of `/proc/self/cgroup`).
    pub own: Option<String>,
    /// `cgroup.controllers` of that cgroup.
    pub own_controllers: Option<String>,
    /// Whether the server may create a cgroup beneath its own.
    pub own_writable: bool,
    /// The processes in the server's own cgroup (`cgroup.procs`).
    pub own_procs: Vec<u32>,
    /// The server's pid.
    pub self_pid: u32,
    /// The server runs as root.
    pub root: bool,
    /// `cgroup.subtree_control` of the hierarchy's root.
    pub root_subtree: Option<String>,
    /// `cgroup.controllers` of the hierarchy's root: what it could hand
    /// down.
    pub root_controllers: Option<String>,
    /// The hierarchy's root as mounted here is not the kernel's root
    /// cgroup (it has a `cgroup.type`, which the real root lacks): a
    /// private cgroup namespace, as in a container.
    pub namespaced: bool,
    /// The root's `cgroup.subtree_control` may be written (not a read-only
    /// mount, not another user's).
    pub root_writable: bool,
}

/// The commands that give runs their cgroups as root in a container: every
/// process of the container's cgroup moved into a leaf, then both
/// controllers handed down (a cgroup other than the kernel's root may not
/// do that while it holds a process). The server never moves a process it
/// did not start, so the container's owner runs them, once, before it.
/// The list is read whole by the shell itself before anything moves: a
/// command substitution's own child would be listed and gone by its turn,
/// and a file read while processes leave it can skip one. A process that
/// ends before its turn is no reason to stop.
pub const CONTAINER_RECIPE: &str = "mkdir -p /sys/fs/cgroup/init && set -- && \
     while read p; do set -- \"$@\" $p; done < /sys/fs/cgroup/cgroup.procs && \
     for p in \"$@\"; do echo $p > /sys/fs/cgroup/init/cgroup.procs || true; done && \
     echo '+memory +pids' > /sys/fs/cgroup/cgroup.subtree_control";

/// One change to the cgroup hierarchy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetupStep {
    Mkdir(PathBuf),
    /// Write a value to a control file.
    Write(PathBuf, String),
}

/// Where runs' cgroups go, and how that place is made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParentPlan {
    pub dir: PathBuf,
    pub setup: Vec<SetupStep>,
    /// The folder was made for this server, and goes when it ends.
    pub owned: bool,
    /// The folder is the server's own (delegated) cgroup, which the set-up
    /// turns into an inner node: a keeper is started to undo that should
    /// the server be killed, and the server undoes it as it exits
    /// (`cgroup_restore.rs`).
    pub undo: bool,
}

const MOUNT: &str = "/sys/fs/cgroup";

/// Where this machine's runs get their cgroups, or why they get none.
/// `token` makes a folder of the server's own unique. Pure.
pub fn assess(f: &CgroupFacts, token: &str) -> Result<ParentPlan, String> {
    let has = |list: &str, c: &str| list.split_whitespace().any(|w| w == c);
    if !f.unified_at_root {
        return Err(match &f.hybrid_controllers {
            Some(c) if !(has(c, "memory") && has(c, "pids")) => format!(
                "cgroup v1 hierarchy: the memory and pids controllers are bound to v1, and the v2 hierarchy at /sys/fs/cgroup/unified offers only '{}'",
                c.trim()
            ),
            Some(_) => "hybrid cgroup hierarchy: per-run cgroups need cgroup v2 mounted at /sys/fs/cgroup".into(),
            None => "no cgroup v2 hierarchy at /sys/fs/cgroup (cgroup v1 or none)".into(),
        });
    }
    let Some(own) = &f.own else {
        return Err(
            "the server's own cgroup v2 is unknown (/proc/self/cgroup has no 0:: line)".into(),
        );
    };
    let mount = Path::new(MOUNT);
    let own_dir = mount.join(own.trim().trim_start_matches('/'));
    let controllers = f.own_controllers.as_deref().unwrap_or("");
    let missing = ["memory", "pids"]
        .into_iter()
        .find(|c| !has(controllers, c));
    let alone = f.own_procs == [f.self_pid];
    // A delegated cgroup the server has to itself: the server moves into a
    // leaf of its own (a cgroup with processes can't hand controllers to
    // children), then runs are its siblings.
    if f.own_writable && alone && missing.is_none() && own.trim() != "/" {
        let server = own_dir.join(restore::SERVER_LEAF);
        return Ok(ParentPlan {
            setup: vec![
                SetupStep::Mkdir(server.clone()),
                SetupStep::Write(server.join("cgroup.procs"), f.self_pid.to_string()),
                SetupStep::Write(
                    own_dir.join("cgroup.subtree_control"),
                    "+memory +pids".into(),
                ),
            ],
            dir: own_dir,
            owned: false,
            undo: true,
        });
    }
    // Root, with both controllers at the hierarchy's root: a folder there.
    let root_has_both = f
        .root_subtree
        .as_deref()
        .is_some_and(|t| has(t, "memory") && has(t, "pids"));
    // The kernel's root cgroup may hand controllers down while it holds
    // processes, and root in the host's cgroup namespace may write it: the
    // server hands down what is missing itself, no systemd needed.
    let root_offers = f
        .root_controllers
        .as_deref()
        .map(|c| ["memory", "pids"].into_iter().find(|x| !has(c, x)))
        .unwrap_or(Some("memory"));
    let hand_down =
        f.root && !root_has_both && !f.namespaced && f.root_writable && root_offers.is_none();
    if f.root && (root_has_both || hand_down) {
        let dir = mount.join(format!("reachweaver-mcp.{token}"));
        let mut setup = Vec::new();
        if hand_down {
            setup.push(SetupStep::Write(
                mount.join("cgroup.subtree_control"),
                "+memory +pids".into(),
            ));
        }
        setup.push(SetupStep::Mkdir(dir.clone()));
        setup.push(SetupStep::Write(
            dir.join("cgroup.subtree_control"),
            "+memory +pids".into(),
        ));
        return Ok(ParentPlan {
            setup,
            dir,
            owned: true,
            undo: false,
        });
    }
    if f.root {
        return Err(refusal_for_root(f, own, root_offers));
    }
    if let Some(c) = missing {
        return Err(format!(
            "the {c} controller is not enabled for the server's cgroup {own}"
        ));
    }
    if !f.own_writable {
        return Err(format!(
            "the server's cgroup {own} is not delegated to its user; start it in a cgroup of its own delegated to it: systemd-run --user --scope -p Delegate=yes reachweaver-mcp ... (or run it as root)"
        ));
    }
    Err(format!(
        "the server's cgroup {own} holds other processes ({} in all); start it in a cgroup of its own delegated to it: systemd-run --user --scope -p Delegate=yes reachweaver-mcp ...",
        f.own_procs.len()
    ))
}

/// Why root gets no cgroups here, with the commands that would give them:
/// the hierarchy's root doesn't hand both controllers down, and the server
/// can't make it (a controller not offered, a read-only mount, or a
/// container's root cgroup holding processes). Pure.
fn refusal_for_root(f: &CgroupFacts, own: &str, root_offers: Option<&str>) -> String {
    if let Some(c) = root_offers {
        let place = if f.namespaced {
            "this container's cgroup"
        } else {
            "the hierarchy's root"
        };
        return format!(
            "the {c} controller is not available at {place} (its cgroup.controllers); the {} must offer it",
            if f.namespaced { "host" } else { "kernel" }
        );
    }
    if !f.root_writable && !f.namespaced {
        return "the cgroup file system is read-only here: mount it read-write (mount -o remount,rw /sys/fs/cgroup); the server then hands memory and pids down from the hierarchy's root itself".to_string();
    }
    if !f.root_writable {
        return format!(
            "the cgroup file system is read-only here (a container): mount it read-write (mount -o remount,rw /sys/fs/cgroup, or start the container with a writable cgroup file system, e.g. docker run --privileged), then as root: {CONTAINER_RECIPE}"
        );
    }
    // Only a private cgroup namespace is left: its root holds processes.
    format!(
        "the server's cgroup {own} is in a container (a private cgroup namespace), whose root cgroup hands down no controller while it holds processes ({} in the server's cgroup); as root in the container, before starting the server: {CONTAINER_RECIPE}",
        f.own_procs.len()
    )
}

fn is_cgroup2(p: &Path) -> bool {
    let Ok(c) = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    // SAFETY: statfs fills a struct we own from a path string we own.
    let mut s: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: c is a NUL-terminated path we own and s a struct we own.
    unsafe { libc::statfs(c.as_ptr(), &mut s) == 0 && s.f_type as i64 == CGROUP2_SUPER_MAGIC }
}

/// Read the facts. Looks only; never writes.
pub fn facts() -> CgroupFacts {
    let root = Path::new("/sys/fs/cgroup");
    let unified_at_root = is_cgroup2(root);
    let hybrid = root.join("unified");
    let hybrid_controllers = (!unified_at_root && is_cgroup2(&hybrid))
        .then(|| std::fs::read_to_string(hybrid.join("cgroup.controllers")).unwrap_or_default());
    let own = std::fs::read_to_string("/proc/self/cgroup")
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("0::").map(str::to_string))
        });
    let own_dir = own.as_deref().map(|o| root.join(o.trim_start_matches('/')));
    let own_controllers = own_dir
        .as_ref()
        .filter(|_| unified_at_root)
        .and_then(|d| std::fs::read_to_string(d.join("cgroup.controllers")).ok());
    let own_writable = unified_at_root
        && own_dir.as_ref().is_some_and(|d| {
            std::ffi::CString::new(d.as_os_str().as_encoded_bytes())
                // SAFETY: access() reads a path string we own.
                .is_ok_and(|c| unsafe { libc::access(c.as_ptr(), libc::W_OK) } == 0)
        });
    let own_procs = own_dir
        .as_ref()
        .filter(|_| unified_at_root)
        .and_then(|d| std::fs::read_to_string(d.join("cgroup.procs")).ok())
        .map(|t| t.lines().filter_map(|l| l.trim().parse().ok()).collect())
        .unwrap_or_default();
    let root_subtree = unified_at_root
        .then(|| std::fs::read_to_string(root.join("cgroup.subtree_control")).ok())
        .flatten();
    let root_controllers = unified_at_root
        .then(|| std::fs::read_to_string(root.join("cgroup.controllers")).ok())
        .flatten();
    let namespaced = unified_at_root && root.join("cgroup.type").exists();
    let root_writable = unified_at_root
        && std::ffi::CString::new("/sys/fs/cgroup/cgroup.subtree_control")
            // SAFETY: access() reads a path string we own.
            .is_ok_and(|c| unsafe { libc::access(c.as_ptr(), libc::W_OK) } == 0);
    CgroupFacts {
        unified_at_root,
        hybrid_controllers,
        own,
        own_controllers,
        own_writable,
        own_procs,
        self_pid: std::process::id(),
        // SAFETY: geteuid can't fail.
        root: unsafe { libc::geteuid() } == 0,
        root_subtree,
        root_controllers,
        namespaced,
        root_writable,
    }
}

/// Whether runs can get cgroups here, and why not. Looks only.
pub fn available() -> Result<(), String> {
    assess(&facts(), "check").map(|_| ())
}

use super::step_error::LayerStep as Kind;
pub use super::step_error::StepError;

fn write_file(path: &Path, value: &str) -> Result<(), StepError> {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .and_then(|mut f| f.write_all(value.as_bytes()))
        .map_err(|e| {
            StepError::io(
                Kind::CgroupWrite,
                format_args!("cgroup: writing {value:?} to {}", path.display()),
                &e,
            )
        })
}

fn apply_steps(steps: &[SetupStep]) -> Result<(), StepError> {
    for step in steps {
        match step {
            SetupStep::Mkdir(p) => std::fs::create_dir(p).map_err(|e| {
                StepError::io(
                    Kind::CgroupCreate,
                    format_args!("cgroup: creating {}", p.display()),
                    &e,
                )
            })?,
            SetupStep::Write(p, v) => write_file(p, v)?,
        }
    }
    Ok(())
}

/// The folder runs' cgroups are made in, set up once per server.
#[derive(Debug)]
pub struct Parent {
    dir: PathBuf,
    owned: bool,
    next: AtomicU64,
    limits: CgroupLimits,
}

impl Parent {
    /// Carry out the plan. Fails (and the sandbox with it) if any step does.
    pub fn set_up(plan: &ParentPlan, limits: CgroupLimits) -> Result<Parent, StepError> {
        if plan.owned {
            if let Some(base) = plan.dir.parent() {
                sweep_stale(base);
            }
        }
        if plan.undo {
            set_up_undone(plan)?;
        } else {
            apply_steps(&plan.setup)?;
        }
        if plan.owned {
            restore::remove_on_exit(&plan.dir, remove_owned);
        }
        let parent = Parent {
            dir: plan.dir.clone(),
            owned: plan.owned,
            next: AtomicU64::new(0),
            limits,
        };
        // One run's cgroup made and removed at start: a control file this
        // kernel lacks (`memory.swap.max` without swap accounting) fails
        // here, once, rather than every call.
        drop(parent.run()?);
        Ok(parent)
    }

    /// A fresh cgroup for one run, with its limits written, and its
    /// `cgroup.procs` open for the run's init to enter.
    pub fn run(&self) -> Result<RunCgroup, StepError> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let (dir, steps) = RunCgroup::plan(&self.dir, n, &self.limits);
        // Removed again by its drop should a later step fail.
        let mut made = RunCgroup { dir, procs: None };
        apply_steps(&steps)?;
        let procs = std::fs::OpenOptions::new()
            .write(true)
            .open(made.dir.join("cgroup.procs"))
            .map_err(|e| {
                StepError::io(
                    Kind::CgroupWrite,
                    format_args!("cgroup: opening {}/cgroup.procs", made.dir.display()),
                    &e,
                )
            })?;
        made.procs = Some(procs.into());
        Ok(made)
    }

    /// The memory bound each run's cgroup gets.
    pub fn memory_max(&self) -> u64 {
        self.limits.memory_max
    }
}

/// The set-up of the server's own cgroup, with what undoes it: what an
/// earlier server left is removed first, the keeper started and given a
/// leaf of its own, and on any failure the cgroup is put back at once.
fn set_up_undone(plan: &ParentPlan) -> Result<(), StepError> {
    restore::remove_leftovers(&plan.dir);
    let keeper = restore::Keeper::start(&plan.dir).map_err(|e| {
        StepError::io(
            Kind::CgroupCreate,
            format_args!("cgroup: starting the keeper of {}", plan.dir.display()),
            &e,
        )
    })?;
    let leaf = plan.dir.join(restore::KEEPER_LEAF);
    let mut steps = vec![
        SetupStep::Mkdir(leaf.clone()),
        SetupStep::Write(leaf.join("cgroup.procs"), keeper.pid().to_string()),
    ];
    steps.extend(plan.setup.iter().cloned());
    match apply_steps(&steps) {
        Ok(()) => {
            restore::undo_on_exit(&plan.dir, Some(keeper));
            Ok(())
        }
        Err(e) => {
            restore::undo_now(&plan.dir, Some(keeper));
            Err(e)
        }
    }
}

impl Drop for Parent {
    fn drop(&mut self) {
        if self.owned {
            remove_owned(&self.dir);
        } else {
            remove_runs(&self.dir);
        }
    }
}

/// A folder made for the runs, with whatever runs are left in it.
fn remove_owned(dir: &Path) {
    remove_runs(dir);
    remove_cgroup(dir);
}

/// One run's cgroup; removed when dropped (once the run is over).
#[derive(Debug)]
pub struct RunCgroup {
    dir: PathBuf,
    procs: Option<OwnedFd>,
}

impl RunCgroup {
    /// The folder of run `n` and the steps that make it. Pure.
    pub fn plan(parent: &Path, n: u64, limits: &CgroupLimits) -> (PathBuf, Vec<SetupStep>) {
        let dir = parent.join(format!("run-{n}"));
        let mut steps = vec![SetupStep::Mkdir(dir.clone())];
        for (file, value) in limits.writes() {
            steps.push(SetupStep::Write(dir.join(file), value));
        }
        (dir, steps)
    }

    /// The open `cgroup.procs`, handed to the run's init.
    pub fn take_procs(&mut self) -> Option<OwnedFd> {
        self.procs.take()
    }

    /// Where the kernel counts the run's processes killed for going past
    /// `memory.max` (read before the cgroup is removed).
    pub fn memory_events(&self) -> PathBuf {
        self.dir.join("memory.events")
    }
}

/// How many of a run's processes the kernel killed for going past its
/// memory bound, from `memory.events` (`oom_kill N`); 0 for anything else.
/// Pure.
pub fn oom_kills(events: &str) -> u64 {
    events
        .lines()
        .find_map(|l| l.strip_prefix("oom_kill "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

impl Drop for RunCgroup {
    fn drop(&mut self) {
        remove_cgroup(&self.dir);
    }
}

/// The folders of servers that are gone (killed before they could remove
/// theirs): named `reachweaver-mcp.PID.TOKEN`, with no live PID. Only empty
/// cgroups can be removed at all, so a folder still in use stays.
fn sweep_stale(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = stale_owner(&name.to_string_lossy()) else {
            continue;
        };
        // SAFETY: signal 0 only asks whether the process exists.
        let alive = unsafe { libc::kill(pid, 0) } == 0
            || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
        if alive {
            continue;
        }
        remove_runs(&e.path());
        remove_cgroup(&e.path());
    }
}

/// The server pid a folder of ours names. Pure.
pub fn stale_owner(name: &str) -> Option<libc::pid_t> {
    let rest = name.strip_prefix("reachweaver-mcp.")?;
    let (pid, token) = rest.split_once('.')?;
    if token.is_empty() || !token.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    pid.parse().ok().filter(|&p| p > 0)
}

/// Every run's cgroup left in a parent.
fn remove_runs(parent: &Path) {
    if let Ok(entries) = std::fs::read_dir(parent) {
        for e in entries.flatten() {
            if e.file_name().to_string_lossy().starts_with("run-") {
                remove_cgroup(&e.path());
            }
        }
    }
}

/// `rmdir` of a cgroup, retried briefly: the last process of a run may
/// still be on its way out when the run is reported over.
fn remove_cgroup(dir: &Path) {
    for _ in 0..20 {
        match std::fs::remove_dir(dir) {
            Ok(()) => return,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(5)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_written_memory_first_with_no_swap() {
        let w = CgroupLimits {
            memory_max: 512 << 20,
            pids_max: 128,
        }
        .writes();
        assert_eq!(
            w,
            [
                ("memory.max", "536870912".to_string()),
                ("memory.swap.max", "0".to_string()),
                ("pids.max", "128".to_string())
            ]
        );
    }

    #[test]
    fn a_v1_machine_with_a_bare_unified_hierarchy_is_named_as_such() {
        let e = assess(
            &CgroupFacts {
                hybrid_controllers: Some("hugetlb\n".into()),
                ..CgroupFacts::default()
            },
            "t",
        )
        .unwrap_err();
        assert!(e.contains("cgroup v1") && e.contains("'hugetlb'"), "{e}");
        let e = assess(&CgroupFacts::default(), "t").unwrap_err();
        assert!(e.contains("no cgroup v2"), "{e}");
    }

    fn v2(own: &str) -> CgroupFacts {
        CgroupFacts {
            unified_at_root: true,
            own: Some(own.into()),
            own_controllers: Some("cpu io memory pids".into()),
            own_writable: false,
            own_procs: vec![42, 43],
            self_pid: 42,
            root: false,
            root_subtree: Some("cpu io memory pids".into()),
            ..CgroupFacts::default()
        }
    }

    #[test]
    fn v2_needs_both_controllers_and_delegation() {
        let base = v2("/user.slice/app.scope");
        assert!(assess(&base, "t").unwrap_err().contains("not delegated"));
        let no_pids = CgroupFacts {
            own_controllers: Some("cpu memory".into()),
            ..base.clone()
        };
        assert!(assess(&no_pids, "t")
            .unwrap_err()
            .contains("pids controller"));
        let shared = CgroupFacts {
            own_writable: true,
            ..base
        };
        let e = assess(&shared, "t").unwrap_err();
        assert!(e.contains("holds other processes (2 in all)"), "{e}");
    }

    #[test]
    fn a_delegated_cgroup_of_its_own_moves_the_server_to_a_leaf() {
        let f = CgroupFacts {
            own_writable: true,
            own_procs: vec![42],
            ..v2("/user.slice/user-1000.slice/user@1000.service/app.slice/rw.scope")
        };
        let own = PathBuf::from(
            "/sys/fs/cgroup/user.slice/user-1000.slice/user@1000.service/app.slice/rw.scope",
        );
        let plan = assess(&f, "t").unwrap();
        assert_eq!(plan.dir, own);
        assert!(!plan.owned);
        assert_eq!(
            plan.setup,
            [
                SetupStep::Mkdir(own.join("reachweaver-server")),
                SetupStep::Write(own.join("reachweaver-server/cgroup.procs"), "42".into()),
                SetupStep::Write(own.join("cgroup.subtree_control"), "+memory +pids".into()),
            ]
        );
    }

    #[test]
    fn root_gets_a_folder_of_its_own_at_the_hierarchy_root() {
        let f = CgroupFacts {
            root: true,
            own_writable: true,
            ..v2("/user.slice/session-3.scope")
        };
        let plan = assess(&f, "abc").unwrap();
        let dir = PathBuf::from("/sys/fs/cgroup/reachweaver-mcp.abc");
        assert_eq!(plan.dir, dir);
        assert!(plan.owned);
        assert_eq!(
            plan.setup,
            [
                SetupStep::Mkdir(dir.clone()),
                SetupStep::Write(dir.join("cgroup.subtree_control"), "+memory +pids".into()),
            ]
        );
        // Without both controllers at the root, root is told why too.
        let bare = CgroupFacts {
            root_subtree: Some("cpu".into()),
            own_controllers: Some("cpu".into()),
            ..f
        };
        assert!(assess(&bare, "abc")
            .unwrap_err()
            .contains("memory controller"));
    }

    /// Root in a cgroup shared with a login session's shell, in the host's
    /// cgroup namespace, the hierarchy's root handing down nothing yet.
    fn root_shared_bare() -> CgroupFacts {
        CgroupFacts {
            root: true,
            own_writable: true,
            own_controllers: Some(String::new()),
            root_subtree: Some(String::new()),
            root_controllers: Some("cpuset cpu io memory hugetlb pids rdma misc\n".into()),
            root_writable: true,
            ..v2("/user.slice/user-0.slice/session-1.scope")
        }
    }

    #[test]
    fn root_in_the_hosts_namespace_hands_the_controllers_down_itself() {
        let dir = PathBuf::from("/sys/fs/cgroup/reachweaver-mcp.t");
        let plan = assess(&root_shared_bare(), "t").unwrap();
        assert_eq!(plan.dir, dir);
        assert!(plan.owned && !plan.undo);
        assert_eq!(
            plan.setup,
            [
                SetupStep::Write(
                    PathBuf::from("/sys/fs/cgroup/cgroup.subtree_control"),
                    "+memory +pids".into()
                ),
                SetupStep::Mkdir(dir.clone()),
                SetupStep::Write(dir.join("cgroup.subtree_control"), "+memory +pids".into()),
            ]
        );
        // Whether the root hands them down already only saves a step: the
        // answer is the same either way.
        let handed = CgroupFacts {
            root_subtree: Some("memory pids".into()),
            ..root_shared_bare()
        };
        assert_eq!(assess(&handed, "t").unwrap().setup.len(), 2);
        // A controller the kernel's root does not offer can't be handed down.
        for (offers, missing) in [("cpu memory", "pids"), ("cpu pids", "memory")] {
            let f = CgroupFacts {
                root_controllers: Some(offers.into()),
                ..root_shared_bare()
            };
            let e = assess(&f, "t").unwrap_err();
            assert_eq!(
                e,
                format!(
                    "the {missing} controller is not available at the hierarchy's root \
                     (its cgroup.controllers); the kernel must offer it"
                )
            );
        }
        // An ordinary user in the same cgroup is told how to get one of its own.
        let user = CgroupFacts {
            root: false,
            own_controllers: Some("memory pids".into()),
            ..root_shared_bare()
        };
        let e = assess(&user, "t").unwrap_err();
        assert!(
            e.ends_with("systemd-run --user --scope -p Delegate=yes reachweaver-mcp ..."),
            "{e}"
        );
    }

    /// Root in a container: a private cgroup namespace whose root cgroup is
    /// not the kernel's and holds the container's processes.
    fn container() -> CgroupFacts {
        CgroupFacts {
            namespaced: true,
            own: Some("/".into()),
            own_procs: vec![1, 42],
            root_controllers: Some("memory pids".into()),
            ..root_shared_bare()
        }
    }

    #[test]
    fn root_in_a_container_gets_the_recipe_and_the_recipe_works() {
        let e = assess(&container(), "t").unwrap_err();
        assert_eq!(
            e,
            format!(
                "the server's cgroup / is in a container (a private cgroup namespace), whose root \
                 cgroup hands down no controller while it holds processes (2 in the server's \
                 cgroup); as root in the container, before starting the server: {CONTAINER_RECIPE}"
            )
        );
        assert_eq!(
            CONTAINER_RECIPE,
            "mkdir -p /sys/fs/cgroup/init && set -- && while read p; do set -- \"$@\" $p; \
             done < /sys/fs/cgroup/cgroup.procs && for p in \"$@\"; do \
             echo $p > /sys/fs/cgroup/init/cgroup.procs || true; done && \
             echo '+memory +pids' > /sys/fs/cgroup/cgroup.subtree_control"
        );
        // What the recipe leaves: every process in /init, with the server
        // among the others, and both controllers handed down by the root.
        let after = CgroupFacts {
            own: Some("/init".into()),
            root_subtree: Some("memory pids".into()),
            ..container()
        };
        let plan = assess(&after, "t").unwrap();
        assert_eq!(plan.dir, PathBuf::from("/sys/fs/cgroup/reachweaver-mcp.t"));
        // It never writes the container root's controllers itself, nor
        // moves a process.
        for s in &assess(&after, "t").unwrap().setup {
            match s {
                SetupStep::Write(p, _) => {
                    assert!(!p.ends_with("cgroup.procs"), "{s:?}");
                    assert_ne!(p, Path::new("/sys/fs/cgroup/cgroup.subtree_control"));
                }
                SetupStep::Mkdir(_) => {}
            }
        }
        // Read-only cgroup file system: it says so first.
        let ro = CgroupFacts {
            root_writable: false,
            ..container()
        };
        let e = assess(&ro, "t").unwrap_err();
        assert!(
            e.starts_with(
                "the cgroup file system is read-only here (a container): mount it read-write"
            ),
            "{e}"
        );
        assert!(e.ends_with(CONTAINER_RECIPE), "{e}");
        // And once writable, the recipe is what is left to do.
        let rw = CgroupFacts {
            root_writable: true,
            ..ro
        };
        assert!(assess(&rw, "t").unwrap_err().ends_with(CONTAINER_RECIPE));
        // A container whose cgroup is given no pids controller by the host.
        let bare = CgroupFacts {
            root_controllers: Some("cpu memory".into()),
            ..container()
        };
        assert!(assess(&bare, "t")
            .unwrap_err()
            .starts_with("the pids controller is not available at this container's cgroup"));
    }

    #[test]
    fn every_refusal_for_root_is_lifted_by_what_it_says() {
        // Every combination of what root may find: a refusal names either
        // the recipe (and the recipe's result starts), a controller the
        // kernel or host must offer, or a read-only mount; it never sends
        // root to systemd, whose absence is what it is about.
        for namespaced in [false, true] {
            for root_writable in [false, true] {
                for subtree in ["", "memory pids"] {
                    let f = CgroupFacts {
                        namespaced,
                        root_writable,
                        root_subtree: Some(subtree.into()),
                        ..container()
                    };
                    let Err(e) = assess(&f, "t") else {
                        assert!(subtree == "memory pids" || (!namespaced && root_writable));
                        continue;
                    };
                    assert!(!e.contains("systemd"), "{e}");
                    let after = if namespaced {
                        assert!(e.ends_with(CONTAINER_RECIPE), "{e}");
                        CgroupFacts {
                            own: Some("/init".into()),
                            root_writable: true,
                            root_subtree: Some("memory pids".into()),
                            ..f
                        }
                    } else {
                        assert!(e.contains("(mount -o remount,rw /sys/fs/cgroup)"), "{e}");
                        CgroupFacts {
                            root_writable: true,
                            ..f
                        }
                    };
                    assert!(assess(&after, "t").is_ok(), "{after:?}");
                }
            }
        }
    }

    #[test]
    fn only_folders_named_like_ours_have_an_owner() {
        assert_eq!(stale_owner("reachweaver-mcp.4242.1f3a"), Some(4242));
        assert_eq!(stale_owner("reachweaver-mcp.4242."), None);
        assert_eq!(stale_owner("reachweaver-mcp.x.1f"), None);
        assert_eq!(stale_owner("reachweaver-mcp.0.1f"), None);
        assert_eq!(stale_owner("system.slice"), None);
        assert_eq!(stale_owner("reachweaver-mcp.12.zz"), None);
    }

    #[test]
    fn oom_kills_are_read_from_memory_events() {
        let events = "low 0\nhigh 0\nmax 41\noom 2\noom_kill 1\noom_group_kill 0\n";
        assert_eq!(oom_kills(events), 1);
        // `oom` counts the times the bound was reached, `oom_group_kill`
        // whole-group kills: neither is a process killed.
        assert_eq!(oom_kills("oom 3\noom_kill 0\noom_group_kill 1\n"), 0);
        assert_eq!(oom_kills("max 2\noom 1\noom_kill 12\n"), 12);
        assert_eq!(oom_kills(""), 0);
        assert_eq!(oom_kills("oom_kill x\n"), 0);
    }

    #[test]
    fn a_run_cgroup_is_made_then_limited() {
        let (dir, steps) =
            RunCgroup::plan(Path::new("/sys/fs/cgroup/p"), 7, &CgroupLimits::default());
        assert_eq!(dir, PathBuf::from("/sys/fs/cgroup/p/run-7"));
        assert_eq!(
            steps,
            [
                SetupStep::Mkdir(dir.clone()),
                SetupStep::Write(dir.join("memory.max"), (4u64 << 30).to_string()),
                SetupStep::Write(dir.join("memory.swap.max"), "0".into()),
                SetupStep::Write(dir.join("pids.max"), "256".into()),
            ]
        );
    }

    #[test]
    fn a_machine_without_cgroup_v2_at_the_root_says_so() {
        let f = facts();
        if !f.unified_at_root {
            let e = assess(&f, "t").unwrap_err();
            assert!(e.contains("v1") || e.contains("no cgroup v2"), "{e}");
        } else {
            assert!(f.own.is_some(), "{f:?}");
        }
    }
}
