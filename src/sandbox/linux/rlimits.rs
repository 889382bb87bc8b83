//! The resource-limit layer: no core files (a crash must not leave the
//! run's memory on disk), and bounds on address space, written file size,
//! open descriptors and processes, so a runaway backend fails on its own
//! instead of taking the machine with it.
//!
//! `RLIMIT_NPROC` is counted per user namespace since Linux 5.14, so inside
//! the run's own namespace it bounds only the run's processes. The kernel
//! never applies it to real root, which is why the PID namespace's own
//! `pid_max` (see `namespaces.rs`) bounds the process count as well.

use super::step_error::{LayerStep, StepError};
use crate::sandbox::policy::Rlimits;

/// The `(resource, limit)` pairs to set, soft and hard alike. Pure.
pub fn build(limits: &Rlimits) -> Vec<(libc::__rlimit_resource_t, u64, &'static str)> {
    vec![
        (libc::RLIMIT_CORE, limits.core, "RLIMIT_CORE"),
        (libc::RLIMIT_AS, limits.address_space, "RLIMIT_AS"),
        (libc::RLIMIT_FSIZE, limits.file_size, "RLIMIT_FSIZE"),
        (libc::RLIMIT_NOFILE, limits.open_files, "RLIMIT_NOFILE"),
        (libc::RLIMIT_NPROC, limits.processes, "RLIMIT_NPROC"),
    ]
}

/// Set every limit. A limit already lower than ours is kept (never raised).
pub fn apply(limits: &Rlimits) -> Result<(), StepError> {
    for (resource, value, name) in build(limits) {
        let mut cur = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes into the struct we own.
        if unsafe { libc::getrlimit(resource, &mut cur) } != 0 {
            return Err(StepError::last(LayerStep::Rlimit, name));
        }
        let v = value.min(cur.rlim_max);
        let new = libc::rlimit {
            rlim_cur: v,
            rlim_max: v,
        };
        // SAFETY: setrlimit reads the struct we own.
        if unsafe { libc::setrlimit(resource, &new) } != 0 {
            return Err(StepError::last(LayerStep::Rlimit, name));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_limits_are_the_documented_ones() {
        let got = build(&Rlimits::default());
        let by_name = |n: &str| got.iter().find(|(_, _, name)| *name == n).unwrap().1;
        assert_eq!(by_name("RLIMIT_CORE"), 0);
        assert_eq!(by_name("RLIMIT_AS"), 4 << 30);
        assert_eq!(by_name("RLIMIT_FSIZE"), 64 << 20);
        assert_eq!(by_name("RLIMIT_NOFILE"), 256);
        assert_eq!(by_name("RLIMIT_NPROC"), 256);
        assert_eq!(got.len(), 5);
    }
}
