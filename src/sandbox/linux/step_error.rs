//! A layer's step that failed: which step, the kernel's error number when a
//! call failed, and the message the owner has always read. The step decides
//! what the error number means: a machine short of memory or descriptors
//! is `resource_exhausted`, not a layer refusing the run.

use serde::{Deserialize, Serialize};

/// The steps of setting up a run's layers that can fail, named so the
/// server can tell a shortage from a refusal without reading messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LayerStep {
    /// Making the mounts private before building the minimal root.
    MountPropagation,
    /// Mounting a tmpfs (the staging area, the new root, the temp folder).
    MountTmpfs,
    /// Mounting the run's `/proc`.
    MountProc,
    /// Opening a mount source (`openat2(O_PATH)`).
    MountOpen,
    /// `fstat` of an opened mount source.
    MountStat,
    /// Cloning a mount tree (`open_tree`), which returns a descriptor.
    MountClone,
    /// Attaching a cloned tree (`move_mount`).
    MountAttach,
    /// Setting mount attributes (`mount_setattr`).
    MountAttributes,
    /// Creating a mount point, a mask, or the temp folder in the new root.
    MountCreate,
    /// Listing the draft folder.
    MountList,
    /// Reading or recreating a symbolic link of the system.
    MountLink,
    /// `pivot_root`, `chdir`, or detaching the old root.
    MountPivot,
    /// A check of what is there (a pin, a file's kind), no call failed.
    MountCheck,
    /// `unshare` into the run's namespaces.
    Unshare,
    /// Writing the user namespace's id maps.
    IdMap,
    /// Naming the UTS namespace, or reading the names back.
    Hostname,
    /// `vm.memfd_noexec` in the run's PID namespace.
    MemfdNoexec,
    /// The PID namespace's `pid_max`.
    PidMax,
    /// Opening the nested-namespace counters.
    NsLimitsOpen,
    /// Writing the nested-namespace counters.
    NsLimitsWrite,
    /// Declaring what the Landlock ruleset handles (no call is made).
    LandlockAccess,
    /// `landlock_create_ruleset`, which returns a descriptor.
    LandlockRuleset,
    /// Opening a granted path and adding its rule.
    LandlockRule,
    /// `landlock_restrict_self`.
    LandlockRestrict,
    /// Loading the seccomp filter.
    SeccompLoad,
    /// Dropping capabilities, securebits, `no_new_privs`.
    Caps,
    /// Reading or setting a resource limit.
    Rlimit,
    /// Creating a cgroup folder.
    CgroupCreate,
    /// Opening and writing a cgroup file.
    CgroupWrite,
    /// A fork whose child joins a PID namespace: once the namespace's init
    /// has died the kernel refuses every fork into it with `ENOMEM`, which
    /// is no shortage of memory.
    ForkIntoPidns,
    /// The fork of a short-lived child that tries a layer at start.
    ProbeFork,
}

impl LayerStep {
    /// Whether `errno` from this step means the machine ran out rather than
    /// the step being refused. Only steps that open a descriptor can run out
    /// of descriptors, only steps that allocate kernel memory can run out
    /// of memory, only forks can run out of processes.
    pub fn short_of(self, errno: i32) -> bool {
        let descriptors = matches!(errno, libc::EMFILE | libc::ENFILE);
        let memory = errno == libc::ENOMEM;
        let processes = errno == libc::EAGAIN;
        match self {
            LayerStep::MountOpen
            | LayerStep::MountClone
            | LayerStep::MountCreate
            | LayerStep::MountList
            | LayerStep::IdMap
            | LayerStep::MemfdNoexec
            | LayerStep::PidMax
            | LayerStep::NsLimitsOpen
            | LayerStep::LandlockRuleset
            | LayerStep::LandlockRule
            | LayerStep::CgroupWrite => descriptors || memory,
            LayerStep::MountTmpfs
            | LayerStep::MountProc
            | LayerStep::Unshare
            | LayerStep::LandlockRestrict
            | LayerStep::SeccompLoad
            | LayerStep::CgroupCreate => memory,
            LayerStep::ForkIntoPidns => processes,
            LayerStep::ProbeFork => processes || memory,
            LayerStep::MountPropagation
            | LayerStep::MountStat
            | LayerStep::MountAttach
            | LayerStep::MountAttributes
            | LayerStep::MountLink
            | LayerStep::MountPivot
            | LayerStep::MountCheck
            | LayerStep::Hostname
            | LayerStep::NsLimitsWrite
            | LayerStep::LandlockAccess
            | LayerStep::Caps
            | LayerStep::Rlimit => false,
        }
    }
}

/// One failed step of a layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepError {
    pub step: LayerStep,
    pub errno: Option<i32>,
    /// The whole message, the error number's text included when there is one.
    pub detail: String,
}

impl StepError {
    /// A failure no system call reported: a check, a refusal by design.
    pub fn plain(step: LayerStep, detail: impl Into<String>) -> StepError {
        StepError {
            step,
            errno: None,
            detail: detail.into(),
        }
    }

    /// `what: error`, keeping the error's number.
    pub fn io(step: LayerStep, what: impl std::fmt::Display, e: &std::io::Error) -> StepError {
        StepError {
            step,
            errno: e.raw_os_error(),
            detail: format!("{what}: {e}"),
        }
    }

    /// `what: <the last error>`, right after a raw call failed.
    pub fn last(step: LayerStep, what: impl std::fmt::Display) -> StepError {
        StepError::io(step, what, &std::io::Error::last_os_error())
    }

    /// A library's error as `detail`, with the error number of the first
    /// I/O error among its causes.
    pub fn caused(
        step: LayerStep,
        detail: impl Into<String>,
        e: &(dyn std::error::Error + 'static),
    ) -> StepError {
        let mut cause = Some(e);
        let mut errno = None;
        while let Some(c) = cause {
            if let Some(n) = c
                .downcast_ref::<std::io::Error>()
                .and_then(std::io::Error::raw_os_error)
            {
                errno = Some(n);
                break;
            }
            cause = c.source();
        }
        StepError {
            step,
            errno,
            detail: detail.into(),
        }
    }

    /// The same failure with more said around its message.
    pub fn map_detail(mut self, f: impl FnOnce(String) -> String) -> StepError {
        self.detail = f(self.detail);
        self
    }

    /// The same failure, said as part of `what`: `what: detail`.
    pub fn within(self, what: &str) -> StepError {
        self.map_detail(|d| format!("{what}: {d}"))
    }

    /// Whether the machine ran out, rather than the step being refused.
    pub fn is_shortage(&self) -> bool {
        self.errno.is_some_and(|n| self.step.short_of(n))
    }
}

impl std::fmt::Display for StepError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.detail)
    }
}

impl std::error::Error for StepError {}

impl From<StepError> for String {
    fn from(e: StepError) -> String {
        e.detail
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHORT: [i32; 4] = [libc::ENOMEM, libc::EMFILE, libc::ENFILE, libc::EAGAIN];
    const OTHER: [i32; 6] = [
        libc::EPERM,
        libc::EACCES,
        libc::EINVAL,
        libc::ENOENT,
        libc::ENOSPC,
        libc::EBUSY,
    ];

    /// Each step and the shortage errnos it can honestly mean.
    const TABLE: &[(LayerStep, &[i32])] = &[
        (LayerStep::MountPropagation, &[]),
        (LayerStep::MountTmpfs, &[libc::ENOMEM]),
        (LayerStep::MountProc, &[libc::ENOMEM]),
        (
            LayerStep::MountOpen,
            &[libc::ENOMEM, libc::EMFILE, libc::ENFILE],
        ),
        (LayerStep::MountStat, &[]),
        (
            LayerStep::MountClone,
            &[libc::ENOMEM, libc::EMFILE, libc::ENFILE],
        ),
        (LayerStep::MountAttach, &[]),
        (LayerStep::MountAttributes, &[]),
        (
            LayerStep::MountCreate,
            &[libc::ENOMEM, libc::EMFILE, libc::ENFILE],
        ),
        (
            LayerStep::MountList,
            &[libc::ENOMEM, libc::EMFILE, libc::ENFILE],
        ),
        (LayerStep::MountLink, &[]),
        (LayerStep::MountPivot, &[]),
        (LayerStep::MountCheck, &[]),
        (LayerStep::Unshare, &[libc::ENOMEM]),
        (
            LayerStep::IdMap,
            &[libc::ENOMEM, libc::EMFILE, libc::ENFILE],
        ),
        (LayerStep::Hostname, &[]),
        (
            LayerStep::MemfdNoexec,
            &[libc::ENOMEM, libc::EMFILE, libc::ENFILE],
        ),
        (
            LayerStep::PidMax,
            &[libc::ENOMEM, libc::EMFILE, libc::ENFILE],
        ),
        (
            LayerStep::NsLimitsOpen,
            &[libc::ENOMEM, libc::EMFILE, libc::ENFILE],
        ),
        (LayerStep::NsLimitsWrite, &[]),
        (LayerStep::LandlockAccess, &[]),
        (
            LayerStep::LandlockRuleset,
            &[libc::ENOMEM, libc::EMFILE, libc::ENFILE],
        ),
        (
            LayerStep::LandlockRule,
            &[libc::ENOMEM, libc::EMFILE, libc::ENFILE],
        ),
        (LayerStep::LandlockRestrict, &[libc::ENOMEM]),
        (LayerStep::SeccompLoad, &[libc::ENOMEM]),
        (LayerStep::Caps, &[]),
        (LayerStep::Rlimit, &[]),
        (LayerStep::CgroupCreate, &[libc::ENOMEM]),
        (
            LayerStep::CgroupWrite,
            &[libc::ENOMEM, libc::EMFILE, libc::ENFILE],
        ),
        (LayerStep::ForkIntoPidns, &[libc::EAGAIN]),
        (LayerStep::ProbeFork, &[libc::EAGAIN, libc::ENOMEM]),
    ];

    #[test]
    fn each_step_reads_each_errno_as_the_table_says() {
        for (step, short) in TABLE {
            for n in SHORT {
                assert_eq!(step.short_of(n), short.contains(&n), "{step:?} errno {n}");
            }
            for n in OTHER {
                assert!(!step.short_of(n), "{step:?} errno {n}");
            }
        }
    }

    #[test]
    fn a_fork_into_a_pid_namespace_whose_init_died_is_no_shortage() {
        // The kernel's answer once the namespace's init is gone.
        assert!(!LayerStep::ForkIntoPidns.short_of(libc::ENOMEM));
        // RLIMIT_NPROC reached is.
        assert!(LayerStep::ForkIntoPidns.short_of(libc::EAGAIN));
    }

    #[test]
    fn the_message_is_the_one_the_owner_always_read() {
        let e = StepError::io(
            LayerStep::MountOpen,
            "mount namespace: open /etc",
            &std::io::Error::from_raw_os_error(libc::EMFILE),
        );
        assert_eq!(
            e.to_string(),
            "mount namespace: open /etc: Too many open files (os error 24)"
        );
        assert_eq!(e.errno, Some(libc::EMFILE));
        assert!(e.is_shortage());
        let e = e.within("nested namespaces");
        assert!(e.to_string().starts_with("nested namespaces: mount"), "{e}");
        assert!(!StepError::plain(LayerStep::MountOpen, "x").is_shortage());
    }

    #[test]
    fn a_librarys_error_gives_the_errno_of_its_cause() {
        #[derive(Debug)]
        struct Wrapper(std::io::Error);
        impl std::fmt::Display for Wrapper {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "wrapped: {}", self.0)
            }
        }
        impl std::error::Error for Wrapper {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let w = Wrapper(std::io::Error::from_raw_os_error(libc::ENOMEM));
        let e = StepError::caused(LayerStep::SeccompLoad, format!("seccomp: {w}"), &w);
        assert_eq!(e.errno, Some(libc::ENOMEM));
        assert_eq!(
            e.to_string(),
            "seccomp: wrapped: Cannot allocate memory (os error 12)"
        );
    }
}
