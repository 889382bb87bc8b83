//! The Landlock layer: the file system boundary (read+execute on runtime
//! paths, read on the root and the backend's files, read+write only in the
//! private temporary folder), TCP bind/connect denied with no port allowed,
//! and abstract-socket and signal scoping.
//!
//! Landlock is the layer that holds the file promises in the kernel, so the
//! rights the kernel reported at start are a hard requirement: a run where
//! they are not all enforced fails. Rights newer than the kernel (known to
//! the crate) are requested best-effort, so a newer kernel tightens the
//! sandbox without a code change.

use std::path::PathBuf;

use landlock::{
    Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope, ABI,
};

use super::step_error::{LayerStep, StepError};
use crate::sandbox::policy::Policy;

/// What a rule grants beneath its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grant {
    ReadExec,
    Read,
    ReadWrite,
    /// Regular files only: read, write, truncate, create and remove them,
    /// but no links, folders, devices, pipes or sockets, and no renames
    /// across folders (the `draft` run's database folder).
    Files,
}

/// The newest ABI this build knows; every file right it defines is handled.
const NEWEST: ABI = ABI::V10;

impl Grant {
    fn access(self) -> BitFlags<AccessFs> {
        let read = AccessFs::ReadFile | AccessFs::ReadDir;
        match self {
            Grant::ReadExec => read | AccessFs::Execute,
            Grant::Read => read,
            // Everything but executing what was written, and device nodes
            // (which need a capability the run doesn't have anyway).
            Grant::ReadWrite => {
                AccessFs::from_all(NEWEST)
                    & !(AccessFs::Execute | AccessFs::MakeChar | AccessFs::MakeBlock)
            }
            Grant::Files => {
                read | AccessFs::WriteFile
                    | AccessFs::Truncate
                    | AccessFs::MakeReg
                    | AccessFs::RemoveFile
            }
        }
    }
}

/// The rule list, in policy order. Pure.
pub fn build_rules(policy: &Policy) -> Vec<(PathBuf, Grant)> {
    let mut out = Vec::new();
    out.extend(
        policy
            .read_exec
            .iter()
            .map(|p| (p.clone(), Grant::ReadExec)),
    );
    out.extend(policy.read.iter().map(|p| (p.clone(), Grant::Read)));
    out.extend(
        policy
            .read_write
            .iter()
            .map(|p| (p.clone(), Grant::ReadWrite)),
    );
    out.extend(policy.write_files.iter().map(|p| (p.clone(), Grant::Files)));
    out
}

/// The ABI the running kernel offers (0: none).
pub fn kernel_abi() -> i32 {
    // SAFETY: the version query takes no pointer and only returns a number.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            1u32, // LANDLOCK_CREATE_RULESET_VERSION
        )
    };
    if v < 0 {
        0
    } else {
        v as i32
    }
}

/// Enforce the policy on the calling thread (and so on everything it
/// executes). `abi` is what start-up found; rights up to it are required.
pub fn apply(policy: &Policy, abi: i32, net: bool, scope: bool) -> Result<(), StepError> {
    let required = ABI::from(abi);
    if required == ABI::Unsupported {
        return Err(StepError::plain(
            LayerStep::LandlockAccess,
            "landlock: the kernel offers no Landlock ABI",
        ));
    }
    let failed = |step: LayerStep| {
        move |e: landlock::RulesetError| StepError::caused(step, format!("landlock: {e}"), &e)
    };
    let err = failed(LayerStep::LandlockAccess);
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(required))
        .map_err(err)?
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(NEWEST))
        .map_err(err)?;
    if net {
        ruleset = ruleset
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessNet::from_all(ABI::V4))
            .map_err(err)?
            .set_compatibility(CompatLevel::BestEffort)
            .handle_access(AccessNet::from_all(NEWEST))
            .map_err(err)?;
    }
    if scope {
        ruleset = ruleset
            .set_compatibility(CompatLevel::HardRequirement)
            .scope(Scope::from_all(ABI::V6))
            .map_err(err)?
            .set_compatibility(CompatLevel::BestEffort)
            .scope(Scope::from_all(NEWEST))
            .map_err(err)?;
    }
    let mut created = ruleset
        .set_compatibility(CompatLevel::BestEffort)
        .create()
        .map_err(failed(LayerStep::LandlockRuleset))?;
    for (path, grant) in build_rules(policy) {
        let fd = match PathFd::new(&path) {
            Ok(fd) => fd,
            // A path that doesn't exist grants nothing; leaving it out only
            // narrows the run.
            Err(_) if !path.exists() => continue,
            Err(e) => {
                return Err(StepError::caused(
                    LayerStep::LandlockRule,
                    format!("landlock: {}: {e}", path.display()),
                    &e,
                ))
            }
        };
        let mut access = grant.access();
        if !path.is_dir() {
            access &= AccessFs::from_file(NEWEST);
        }
        created = created
            .add_rule(PathBeneath::new(fd, access))
            .map_err(|e| {
                StepError::caused(
                    LayerStep::LandlockRule,
                    format!("landlock: {}: {e}", path.display()),
                    &e,
                )
            })?;
    }
    let status = created
        .restrict_self()
        .map_err(failed(LayerStep::LandlockRestrict))?;
    match status.ruleset {
        RulesetStatus::FullyEnforced | RulesetStatus::PartiallyEnforced => Ok(()),
        RulesetStatus::NotEnforced => Err(StepError::plain(
            LayerStep::LandlockRestrict,
            "landlock: the ruleset is not enforced",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::linux::seccomp::in_child::{self, outcome, raw, report};
    use crate::sandbox::policy::{Layers, Rlimits};
    use std::fs;
    use std::path::Path;

    fn policy() -> Policy {
        Policy {
            program: "/usr/bin/true".into(),
            argv: vec!["/usr/bin/true".into()],
            env: vec![],
            cwd: "/srv/root".into(),
            read_exec: vec!["/usr".into(), "/opt/rw".into()],
            read: vec!["/srv/root".into(), "/srv/home".into()],
            read_write: vec!["/tmp/run-1".into(), "/dev/null".into()],
            tmpdir: "/tmp/run-1".into(),
            write_files: vec!["/srv/home/db".into()],
            mounts: None,
            kind: crate::sandbox::RunKind::Draft,
            layers: Layers::default(),
            rlimits: Rlimits::default(),
            parent_pid: 1,
        }
    }

    #[test]
    fn rules_follow_the_policy_lists() {
        let rules = build_rules(&policy());
        assert_eq!(
            rules,
            vec![
                (PathBuf::from("/usr"), Grant::ReadExec),
                (PathBuf::from("/opt/rw"), Grant::ReadExec),
                (PathBuf::from("/srv/root"), Grant::Read),
                (PathBuf::from("/srv/home"), Grant::Read),
                (PathBuf::from("/tmp/run-1"), Grant::ReadWrite),
                (PathBuf::from("/dev/null"), Grant::ReadWrite),
                (PathBuf::from("/srv/home/db"), Grant::Files),
            ]
        );
    }

    #[test]
    fn no_rule_covers_a_guarded_folder() {
        for (path, _) in build_rules(&policy()) {
            for guarded in ["/", "/proc", "/tmp", "/run", "/home"] {
                assert_ne!(path, PathBuf::from(guarded));
            }
        }
    }

    #[test]
    fn grants_are_what_they_say() {
        let r = Grant::Read.access();
        assert!(r.contains(AccessFs::ReadFile | AccessFs::ReadDir));
        assert!(!r.contains(AccessFs::Execute));
        assert!(!r.intersects(AccessFs::from_write(NEWEST)));
        let rx = Grant::ReadExec.access();
        assert!(rx.contains(AccessFs::Execute));
        assert!(!rx.intersects(AccessFs::from_write(NEWEST)));
        let rw = Grant::ReadWrite.access();
        assert!(rw.contains(
            AccessFs::WriteFile | AccessFs::MakeReg | AccessFs::RemoveFile | AccessFs::Truncate
        ));
        assert!(!rw.contains(AccessFs::Execute));
        assert!(!rw.contains(AccessFs::MakeChar));
        // The draft folder: regular files only, never a link or a folder
        // (a link there once pointed the next run's grant at `/`).
        let files = Grant::Files.access();
        assert!(files.contains(
            AccessFs::WriteFile | AccessFs::MakeReg | AccessFs::RemoveFile | AccessFs::Truncate
        ));
        for never in [
            AccessFs::MakeSym,
            AccessFs::MakeDir,
            AccessFs::MakeFifo,
            AccessFs::MakeSock,
            AccessFs::MakeChar,
            AccessFs::MakeBlock,
            AccessFs::Refer,
            AccessFs::Execute,
            AccessFs::RemoveDir,
        ] {
            assert!(!files.contains(never), "{never:?}");
        }
    }

    /// The version query made here, so `kernel_abi` is checked against it.
    fn abi_from_the_kernel() -> i64 {
        // SAFETY: the version query takes no pointer.
        unsafe {
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                std::ptr::null::<libc::c_void>(),
                0usize,
                1u32,
            )
        }
    }

    #[test]
    fn kernel_abi_is_the_version_the_kernel_reports() {
        let abi = abi_from_the_kernel();
        assert!(
            abi >= 1,
            "these tests need a kernel with Landlock (the version query answered {abi})"
        );
        assert_eq!(i64::from(kernel_abi()), abi);
    }

    /// A kernel without Landlock answers the query with an error, made here
    /// with a seccomp filter that answers it `ENOSYS` (what a kernel built
    /// without Landlock says) and allows everything else.
    #[test]
    fn kernel_abi_is_0_when_the_kernel_has_no_landlock() {
        if in_child::arg().is_some() {
            let nr = libc::SYS_landlock_create_ruleset as u32;
            let enosys = libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32;
            let filter = |code, jt, jf, k| seccompiler::sock_filter { code, jt, jf, k };
            let program = vec![
                filter(0x20, 0, 0, 0), // load the number
                filter(0x15, 0, 1, nr),
                filter(0x06, 0, 0, enosys),
                filter(0x06, 0, 0, libc::SECCOMP_RET_ALLOW),
            ];
            let applied = crate::sandbox::linux::seccomp::apply(&program);
            report(format!(
                "filter {}",
                outcome(applied.map_err(std::io::Error::other))
            ));
            report(format!("query {}", raw(abi_from_the_kernel())));
            report(format!("kernel_abi {}", kernel_abi()));
            return;
        }
        let reports = in_child::run(
            module_path!(),
            "kernel_abi_is_0_when_the_kernel_has_no_landlock",
            "no-landlock",
        );
        assert_eq!(reports, ["filter ok", "query ENOSYS", "kernel_abi 0"]);
    }

    /// A tree under `top` with one folder per kind of grant, a file granted
    /// on its own, and a folder granted nothing. Every folder but `files`
    /// holds a copy of `true` and a file `f`.
    fn make_tree(top: &Path) {
        let t = |p: &str| top.join(p);
        for dir in ["ro", "rx", "rw", "files", "out"] {
            fs::create_dir(t(dir)).unwrap();
            if dir != "files" {
                fs::write(t(dir).join("f"), "data").unwrap();
                fs::copy("/usr/bin/true", t(dir).join("true")).unwrap();
            }
        }
        fs::write(t("files/db"), "data").unwrap();
        fs::write(t("one"), "data").unwrap();
    }

    /// The grants over that tree. The runtime folders are there so `true`
    /// can be run (its loader and C library); `missing` does not exist.
    fn tree_policy(top: &Path) -> Policy {
        let t = |p: &str| top.join(p);
        Policy {
            read_exec: vec![t("rx"), "/usr".into(), "/lib".into(), "/lib64".into()],
            read: vec!["/etc".into(), t("ro"), t("one"), t("missing")],
            read_write: vec![t("rw")],
            write_files: vec![t("files")],
            ..policy()
        }
    }

    /// Every access the tree test checks, in order, each as `what outcome`.
    fn tree_report(top: &Path, listener: &std::net::TcpListener) {
        use std::fs::OpenOptions;
        let t = |p: &str| top.join(p);
        let read = |p: &str| outcome(fs::read(t(p)));
        let write = |p: &str| outcome(OpenOptions::new().write(true).open(t(p)));
        let create = |p: &str| outcome(OpenOptions::new().write(true).create_new(true).open(t(p)));
        let list = |p: &str| outcome(fs::read_dir(t(p)));
        let exec = |p: &str| {
            outcome(
                std::process::Command::new(t(p))
                    .status()
                    .and_then(|s| match s.success() {
                        true => Ok(()),
                        false => Err(std::io::Error::other(format!("{s}"))),
                    }),
            )
        };
        for (what, result) in [
            ("read ro/f", read("ro/f")),
            ("list ro", list("ro")),
            ("write ro/f", write("ro/f")),
            ("create ro/new", create("ro/new")),
            ("read one", read("one")),
            ("write one", write("one")),
            ("read out/f", read("out/f")),
            ("list out", list("out")),
            ("write out/f", write("out/f")),
            ("create new", create("new")),
            ("create rw/new", create("rw/new")),
            ("mkdir rw/d", outcome(fs::create_dir(t("rw/d")))),
            (
                "symlink rw/l",
                outcome(std::os::unix::fs::symlink("f", t("rw/l"))),
            ),
            ("write files/db", write("files/db")),
            ("create files/new", create("files/new")),
            ("mkdir files/d", outcome(fs::create_dir(t("files/d")))),
            (
                "symlink files/l",
                outcome(std::os::unix::fs::symlink("db", t("files/l"))),
            ),
            ("run rx/true", exec("rx/true")),
            ("run ro/true", exec("ro/true")),
            ("run rw/true", exec("rw/true")),
            (
                "bind tcp",
                outcome(std::net::TcpListener::bind("127.0.0.1:0")),
            ),
            (
                "connect tcp",
                outcome(std::net::TcpStream::connect(listener.local_addr().unwrap())),
            ),
            // SAFETY: signal 0 only asks whether the signal may be sent.
            (
                "signal parent",
                // SAFETY: kill with signal 0 and getppid take integers only.
                raw(unsafe { libc::kill(libc::getppid(), 0) }.into()),
            ),
        ] {
            report(format!("{what} {result}"));
        }
    }

    /// `apply` in a process of its own: each grant allows what it says
    /// and nothing more, a file granted alone gets only file rights, a
    /// path that does not exist is left out, and with `net` and `scope`
    /// TCP and signals to processes outside are refused. The same accesses
    /// without the ruleset all succeed, so each refusal is the ruleset's.
    #[test]
    fn apply_enforces_the_grants_and_nothing_more() {
        if let Some(arg) = in_child::arg() {
            let (mode, top) = arg.split_once(' ').unwrap();
            let top = Path::new(top);
            // Listening before the ruleset, so the connection is one the
            // ruleset alone decides.
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            if mode == "enforce" {
                let abi = abi_from_the_kernel() as i32;
                let applied =
                    apply(&tree_policy(top), abi, abi >= 4, abi >= 6).map_err(String::from);
                report(format!(
                    "apply {}",
                    applied.err().unwrap_or_else(|| "ok".into())
                ));
            }
            tree_report(top, &listener);
            return;
        }
        let name = "apply_enforces_the_grants_and_nothing_more";
        let abi = abi_from_the_kernel();
        assert!(abi >= 1, "these tests need a kernel with Landlock");
        let control_top = tempfile::tempdir().unwrap();
        make_tree(control_top.path());
        let control = in_child::run(
            module_path!(),
            name,
            &format!("control {}", control_top.path().display()),
        );
        let expect = |net: &str, signal: &str| {
            let mut lines: Vec<String> = [
                "read ro/f ok",
                "list ro ok",
                "write ro/f EACCES",
                "create ro/new EACCES",
                "read one ok",
                "write one EACCES",
                "read out/f EACCES",
                "list out EACCES",
                "write out/f EACCES",
                "create new EACCES",
                "create rw/new ok",
                "mkdir rw/d ok",
                "symlink rw/l ok",
                "write files/db ok",
                "create files/new ok",
                "mkdir files/d EACCES",
                "symlink files/l EACCES",
                "run rx/true ok",
                "run ro/true EACCES",
                "run rw/true EACCES",
            ]
            .map(String::from)
            .to_vec();
            lines.push(format!("bind tcp {net}"));
            lines.push(format!("connect tcp {net}"));
            lines.push(format!("signal parent {signal}"));
            lines
        };
        let all_ok: Vec<String> = expect("ok", "ok")
            .iter()
            .map(|l| format!("{} ok", l.rsplit_once(' ').unwrap().0))
            .collect();
        assert_eq!(control, all_ok);

        let top = tempfile::tempdir().unwrap();
        make_tree(top.path());
        let enforced = in_child::run(
            module_path!(),
            name,
            &format!("enforce {}", top.path().display()),
        );
        let mut want = vec!["apply ok".to_string()];
        want.extend(expect(
            if abi >= 4 { "EACCES" } else { "ok" },
            if abi >= 6 { "EPERM" } else { "ok" },
        ));
        assert_eq!(enforced, want);
    }

    /// A run whose rules can't all be applied fails: with no Landlock ABI,
    /// and with a granted path that exists but can't be opened (here: no
    /// descriptor left for it once the ruleset has one).
    #[test]
    fn apply_fails_when_it_cannot_enforce_every_rule() {
        if let Some(top) = in_child::arg() {
            let top = Path::new(&top);
            let shown = |r: Result<(), StepError>| {
                r.err()
                    .map_or_else(|| "ok".into(), String::from)
                    .replace(&top.display().to_string(), "TOP")
            };
            report(format!(
                "abi 0: {}",
                shown(apply(&tree_policy(top), 0, false, false))
            ));
            report(format!(
                "read out/f {}",
                outcome(fs::read(top.join("out/f")))
            ));
            let mut lim = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            // SAFETY: a valid out-pointer.
            assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
            lim.rlim_cur = lim.rlim_cur.min(256);
            // SAFETY: a valid pointer; lowering the soft limit is allowed.
            assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) }, 0);
            let mut held = Vec::new();
            loop {
                // SAFETY: a valid C string; the descriptors are closed below.
                let fd =
                    unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
                if fd < 0 {
                    assert_eq!(
                        std::io::Error::last_os_error().raw_os_error(),
                        Some(libc::EMFILE)
                    );
                    break;
                }
                held.push(fd);
            }
            // One descriptor free: the ruleset's.
            let spare = held.pop().unwrap();
            // SAFETY: a descriptor opened above.
            unsafe { libc::close(spare) };
            let policy = Policy {
                read_exec: vec![],
                read: vec![top.join("ro")],
                read_write: vec![],
                write_files: vec![],
                ..policy()
            };
            let abi = abi_from_the_kernel() as i32;
            let r = apply(&policy, abi, false, false);
            for fd in held {
                // SAFETY: descriptors opened above.
                unsafe { libc::close(fd) };
            }
            let short = r.as_ref().err().map(|e| (e.step, e.is_shortage()));
            report(format!("no descriptor: {}", shown(r)));
            report(format!("a shortage: {short:?}"));
            return;
        }
        let top = tempfile::tempdir().unwrap();
        make_tree(top.path());
        let reports = in_child::run(
            module_path!(),
            "apply_fails_when_it_cannot_enforce_every_rule",
            &top.path().display().to_string(),
        );
        assert_eq!(
            reports,
            [
                "abi 0: landlock: the kernel offers no Landlock ABI",
                "read out/f ok",
                "no descriptor: landlock: TOP/ro: failed to open \"TOP/ro\": Too many open files (os error 24)",
                "a shortage: Some((LandlockRule, true))",
            ]
        );
    }
}
