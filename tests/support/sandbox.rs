//! Shared harness for the sandbox scenarios: run the real binary, as the
//! current user and as an unprivileged one, in fresh temp folders.
//!
//! Owners run the server unprivileged while CI runs as root, so every
//! scenario that depends on identity runs both ways. As root the binary is
//! copied into a fresh 0755 folder and started with
//! `setpriv --reuid=nobody`; when the tests themselves run unprivileged,
//! the "unprivileged" run is simply the current user (still a real run, not
//! a skip).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use super::server_bin;

pub fn is_root() -> bool {
    // SAFETY: geteuid can't fail.
    unsafe { libc::geteuid() == 0 }
}

/// Who runs the binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Who {
    /// Whoever runs the tests (root in CI).
    Me,
    /// An unprivileged user: `nobody` when the tests run as root.
    Unprivileged,
}

/// A fresh world-readable folder (so `nobody` can use it too), removed on drop.
pub struct World {
    pub dir: tempfile::TempDir,
    /// The binary to run (a copy inside `dir` that `nobody` can execute).
    pub exe: PathBuf,
}

impl World {
    pub fn new() -> World {
        let dir = tempfile::Builder::new()
            .prefix("rw-sandbox-test-")
            .tempdir()
            .expect("temp folder");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let bindir = dir.path().join("bin-copy");
        std::fs::create_dir(&bindir).unwrap();
        std::fs::set_permissions(&bindir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let exe = bindir.join("reachweaver-mcp");
        // A hard link is never open for writing, so no concurrently forked
        // child can hold it and make exec fail with ETXTBSY; a copy is the
        // fallback across file systems (spawns then retry on ETXTBSY).
        if std::fs::hard_link(server_bin(), &exe).is_err() {
            std::fs::copy(server_bin(), &exe).expect("copy the binary");
            std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        World { dir, exe }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// A world-readable subfolder.
    pub fn folder(&self, name: &str) -> PathBuf {
        let p = self.path().join(name);
        std::fs::create_dir_all(&p).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    /// A command running the binary as `who`, in `cwd`.
    pub fn cmd(&self, who: Who, cwd: &Path) -> Command {
        let mut c = match who {
            Who::Unprivileged if is_root() => {
                let mut c = Command::new("setpriv");
                c.args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
                    .arg(&self.exe);
                c
            }
            _ => Command::new(&self.exe),
        };
        c.current_dir(cwd).stdin(Stdio::null());
        c
    }
}

/// Run to completion with a time limit; panics (loudly) if it hangs.
pub fn output_within(mut cmd: Command, limit: Duration) -> Output {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = spawn(&mut cmd);
    let out = child.stdout.take().unwrap();
    let err = child.stderr.take().unwrap();
    let ro = std::thread::spawn(move || read_all(out));
    let re = std::thread::spawn(move || read_all(err));
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{cmd:?} did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Output {
        status,
        stdout: ro.join().unwrap(),
        stderr: re.join().unwrap(),
    }
}

/// Spawn, retrying while a freshly copied binary is still busy.
pub fn spawn(cmd: &mut Command) -> std::process::Child {
    let mut tries = 0;
    loop {
        match cmd.spawn() {
            Ok(c) => return c,
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && tries < 50 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("could not start {cmd:?}: {e}"),
        }
    }
}

fn read_all(mut r: impl std::io::Read) -> Vec<u8> {
    let mut v = Vec::new();
    let _ = r.read_to_end(&mut v);
    v
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Pids of processes whose command line contains `marker` as one argument.
pub fn pids_with_marker(marker: &str) -> Vec<i32> {
    super::faults::all_pids()
        .into_iter()
        .filter(|&pid| {
            super::faults::cmdline_args(pid)
                .iter()
                .any(|a| a == marker.as_bytes())
        })
        .filter_map(|pid| i32::try_from(pid).ok())
        .collect()
}

pub fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A marker no other process carries.
pub fn marker(tag: &str) -> String {
    static SEQ: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!(
        "rw-test-{tag}-{}-{}-{nanos}",
        std::process::id(),
        SEQ.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
    )
}

/// The private run folders a process with this pid left in the temp folder:
/// those named after a lock file (`reachweaver-srv-TOKEN.lock`, which holds
/// its server's pid) of that pid.
pub fn run_folders_of(pid: u32) -> Vec<PathBuf> {
    let tmp = std::fs::canonicalize(std::env::temp_dir()).unwrap();
    let names: Vec<String> = std::fs::read_dir(&tmp)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let tokens: Vec<&str> = names
        .iter()
        .filter_map(|n| n.strip_prefix("reachweaver-srv-")?.strip_suffix(".lock"))
        .filter(|t| {
            std::fs::read_to_string(tmp.join(format!("reachweaver-srv-{t}.lock")))
                .is_ok_and(|c| c.trim() == pid.to_string())
        })
        .collect();
    names
        .iter()
        .filter(|n| {
            tokens
                .iter()
                .any(|t| n.starts_with(&format!("reachweaver-run-{t}-")))
        })
        .map(|n| tmp.join(n))
        .collect()
}

/// Pids of processes running `program` (their argv[0]) with `marker` as
/// one argument. Forks of the server carry the server's command line, and
/// so the marker, for a moment before they execute; they don't count.
/// `program` counts under its own name and its canonical one (`sandbox run`
/// executes the canonical path).
pub fn pids_running(program: &str, marker: &str) -> Vec<i32> {
    let canonical = std::fs::canonicalize(program)
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|_| program.to_string());
    pids_with_marker(marker)
        .into_iter()
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| {
                    let argv0 = c.split(|&b| b == 0).next().unwrap_or_default();
                    argv0 == program.as_bytes() || argv0 == canonical.as_bytes()
                })
                .unwrap_or(false)
        })
        .collect()
}

/// Kill every process carrying the marker (cleanup after a failed check).
pub fn kill_marker(marker: &str) {
    for pid in pids_with_marker(marker) {
        // SAFETY: signalling processes that carry the test's own marker.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
}

/// Ubuntu's restricted user namespaces (`kernel.apparmor_restrict_unprivileged_userns=1`
/// without a profile), as closely as a machine without AppArmor allows: a
/// seccomp filter on the started program refuses (`EPERM`) every `unshare`
/// and `clone` that asks for a network, IPC, PID, mount or UTS namespace,
/// and lets a user namespace alone be made, which is what such a program
/// sees when it tries. What it cannot show: AppArmor also denies every
/// capability inside that user namespace (mounts, capability changes);
/// the server, seeing it can make nothing inside one, never uses it.
#[cfg(target_os = "linux")]
pub fn restrict_namespaces_like_ubuntu(cmd: &mut Command) {
    use seccompiler::{
        BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
        SeccompRule, TargetArch,
    };
    use std::os::unix::process::CommandExt;
    let flags = [
        libc::CLONE_NEWNET,
        libc::CLONE_NEWIPC,
        libc::CLONE_NEWPID,
        libc::CLONE_NEWNS,
        libc::CLONE_NEWUTS,
    ];
    let rules_for = || -> Vec<SeccompRule> {
        flags
            .iter()
            .map(|f| {
                let c = SeccompCondition::new(
                    0,
                    SeccompCmpArgLen::Qword,
                    SeccompCmpOp::MaskedEq(*f as u64),
                    *f as u64,
                )
                .expect("condition");
                SeccompRule::new(vec![c]).expect("rule")
            })
            .collect()
    };
    let rules = [libc::SYS_unshare, libc::SYS_clone]
        .into_iter()
        .map(|nr| (nr, rules_for()))
        .collect();
    let arch = TargetArch::try_from(std::env::consts::ARCH).expect("a seccomp architecture");
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .expect("filter");
    let program: BpfProgram = filter.try_into().expect("BPF program");
    // clone3 passes its flags in memory a filter can't read: refused as
    // absent, which makes the C library fall back to clone.
    let clone3 = SeccompFilter::new(
        [(libc::SYS_clone3, vec![])].into_iter().collect(),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch,
    )
    .expect("filter");
    let clone3: BpfProgram = clone3.try_into().expect("BPF program");
    // SAFETY: the closure runs between fork and exec and only makes system
    // calls on programs built before the fork.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            for p in [&program, &clone3] {
                let fprog = libc::sock_fprog {
                    len: p.len() as u16,
                    filter: p.as_ptr() as *mut libc::sock_filter,
                };
                if libc::syscall(
                    libc::SYS_seccomp,
                    libc::SECCOMP_SET_MODE_FILTER,
                    0,
                    &fprog as *const libc::sock_fprog,
                ) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
}

/// The compatibility class as docs/DENIED.md lists it: calls clean runs
/// make, counted apart.
const COMPATIBILITY: [&str; 4] = ["clone3", "socket", "pkey_alloc", "fchown"];

/// The report of a clean run: watched, no network attempt, no refused
/// call outside the compatibility class, not killed by the filter.
pub fn assert_clean(meta: &serde_json::Value, what: &str) {
    assert_eq!(meta["status"], "watched", "{what}: {meta:#}");
    assert_eq!(meta["network"], 0, "{what}: {meta:#}");
    assert_eq!(meta["counts"], serde_json::json!({}), "{what}: {meta:#}");
    assert_eq!(meta["entries"], serde_json::json!([]), "{what}: {meta:#}");
    assert_eq!(meta["omitted"], 0, "{what}: {meta:#}");
    let s = &meta["syscalls"];
    assert_eq!(s["refused"], 0, "{what}: {meta:#}");
    assert_eq!(s["entries"], serde_json::json!([]), "{what}: {meta:#}");
    assert_eq!(s["omitted"], 0, "{what}: {meta:#}");
    let compat = s["compatibility"].as_object().expect("compatibility");
    for name in compat.keys() {
        assert!(
            COMPATIBILITY.contains(&name.as_str()),
            "{what}: {name} is not in the compatibility class: {meta:#}"
        );
    }
    assert_eq!(meta["killed_by_filter"], false, "{what}: {meta:#}");
}
