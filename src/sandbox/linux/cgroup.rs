//! The cgroup layer: what would bound a run's memory (memfds and tmpfs
//! pages included, which `RLIMIT_AS` does not see) and process count as a
//! whole, and why it is not applied on this machine.
//!
//! A per-run cgroup needs a cgroup v2 hierarchy with the `memory` and `pids`
//! controllers that the server's user may manage (root, or a subtree
//! systemd delegates to the user). Many machines have none: cgroup v1, a
//! v2 hierarchy without those controllers, or one the server may not write.
//! This module only looks (it never creates or changes a cgroup) and says
//! which case this machine is; the limits a run would get are built as
//! plain data. This version does not apply per-run cgroups: on every
//! machine the run's memory is bounded by `RLIMIT_AS` per process, its
//! `/tmp` by the tmpfs size, memfds are refused by seccomp and
//! `vm.memfd_noexec`, and its process count by the PID namespace's
//! `pid_max` and `RLIMIT_NPROC`.

use std::path::{Path, PathBuf};

/// `statfs` magic of a cgroup v2 file system.
const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;

/// What a run's cgroup would be set to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CgroupLimits {
    pub memory_max: u64,
    pub pids_max: u64,
}

impl Default for CgroupLimits {
    fn default() -> Self {
        CgroupLimits {
            memory_max: 1 << 30,
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
pub struct Facts {
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
}

/// Why this machine gives no per-run cgroup. Pure.
pub fn assess(f: &Facts) -> Result<PathBuf, String> {
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
    let controllers = f.own_controllers.as_deref().unwrap_or("");
    for c in ["memory", "pids"] {
        if !has(controllers, c) {
            return Err(format!(
                "the {c} controller is not enabled for the server's cgroup {own}"
            ));
        }
    }
    if !f.own_writable {
        return Err(format!(
            "the server's cgroup {own} is not delegated to its user (run as root, or under a systemd unit with Delegate=yes)"
        ));
    }
    Err(format!(
        "a delegated cgroup v2 is available at {own}, but this version does not apply per-run cgroups"
    ))
}

fn is_cgroup2(p: &Path) -> bool {
    let Ok(c) = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    // SAFETY: statfs fills a struct we own from a path string we own.
    let mut s: libc::statfs = unsafe { std::mem::zeroed() };
    unsafe { libc::statfs(c.as_ptr(), &mut s) == 0 && s.f_type as i64 == CGROUP2_SUPER_MAGIC }
}

/// Read the facts. Looks only; never writes.
pub fn facts() -> Facts {
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
    Facts {
        unified_at_root,
        hybrid_controllers,
        own,
        own_controllers,
        own_writable,
    }
}

/// `Ok` with the folder runs' cgroups would go in, or why there is none.
pub fn available() -> Result<PathBuf, String> {
    assess(&facts())
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
        let e = assess(&Facts {
            hybrid_controllers: Some("hugetlb\n".into()),
            ..Facts::default()
        })
        .unwrap_err();
        assert!(e.contains("cgroup v1") && e.contains("'hugetlb'"), "{e}");
        let e = assess(&Facts::default()).unwrap_err();
        assert!(e.contains("no cgroup v2"), "{e}");
    }

    #[test]
    fn v2_needs_both_controllers_and_delegation() {
        let base = Facts {
            unified_at_root: true,
            own: Some("/user.slice/app.scope".into()),
            own_controllers: Some("cpu io memory pids".into()),
            own_writable: false,
            ..Facts::default()
        };
        assert!(assess(&base).unwrap_err().contains("not delegated"));
        let no_pids = Facts {
            own_controllers: Some("cpu memory".into()),
            ..base.clone()
        };
        assert!(assess(&no_pids).unwrap_err().contains("pids controller"));
        let delegated = Facts {
            own_writable: true,
            ..base
        };
        // Found, and said plainly that it is not used.
        assert!(assess(&delegated)
            .unwrap_err()
            .contains("does not apply per-run cgroups"));
    }

    #[test]
    fn a_machine_without_cgroup_v2_at_the_root_says_so() {
        let f = facts();
        if !f.unified_at_root {
            let e = assess(&f).unwrap_err();
            assert!(e.contains("v1") || e.contains("no cgroup v2"), "{e}");
        } else {
            assert!(f.own.is_some(), "{f:?}");
        }
    }
}
