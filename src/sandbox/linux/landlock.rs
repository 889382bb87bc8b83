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
pub fn apply(policy: &Policy, abi: i32, net: bool, scope: bool) -> Result<(), String> {
    let required = ABI::from(abi);
    if required == ABI::Unsupported {
        return Err("landlock: the kernel offers no Landlock ABI".into());
    }
    let err = |e: landlock::RulesetError| format!("landlock: {e}");
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
        .map_err(err)?;
    for (path, grant) in build_rules(policy) {
        let fd = match PathFd::new(&path) {
            Ok(fd) => fd,
            // A path that doesn't exist grants nothing; leaving it out only
            // narrows the run.
            Err(_) if !path.exists() => continue,
            Err(e) => return Err(format!("landlock: {}: {e}", path.display())),
        };
        let mut access = grant.access();
        if !path.is_dir() {
            access &= AccessFs::from_file(NEWEST);
        }
        created = created
            .add_rule(PathBeneath::new(fd, access))
            .map_err(|e| format!("landlock: {}: {e}", path.display()))?;
    }
    let status = created.restrict_self().map_err(err)?;
    match status.ruleset {
        RulesetStatus::FullyEnforced | RulesetStatus::PartiallyEnforced => Ok(()),
        RulesetStatus::NotEnforced => Err("landlock: the ruleset is not enforced".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::policy::{Layers, Rlimits};

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
}
