//! The capability layer: the run keeps no capability in any set (effective,
//! permitted, inheritable, ambient, bounding), the securebits that would let
//! a uid-0 process regain them on `execve` are set and locked, and
//! `no_new_privs` stops set-uid files and file capabilities from adding any.
//!
//! Inside its user namespace the helper starts with every capability (that
//! is how user namespaces work); this layer is what takes them away before
//! the backend runs.

use super::step_error::{LayerStep, StepError};

/// Securebits set and locked: root gets no capabilities on exec, uid changes
/// don't touch capabilities, capabilities are not kept across uid changes,
/// and the ambient set can't be raised.
pub const SECUREBITS: u32 = (1 << 0) // SECBIT_NOROOT
    | (1 << 1) // SECBIT_NOROOT_LOCKED
    | (1 << 2) // SECBIT_NO_SETUID_FIXUP
    | (1 << 3) // SECBIT_NO_SETUID_FIXUP_LOCKED
    | (1 << 5) // SECBIT_KEEP_CAPS_LOCKED (KEEP_CAPS itself stays off)
    | (1 << 6) // SECBIT_NO_CAP_AMBIENT_RAISE
    | (1 << 7); // SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED

fn prctl(op: libc::c_int, a: libc::c_ulong, what: &str) -> Result<libc::c_int, StepError> {
    // SAFETY: every prctl used here takes integer arguments only.
    let r = unsafe {
        libc::prctl(
            op,
            a,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        )
    };
    if r < 0 {
        Err(StepError::last(LayerStep::Caps, what))
    } else {
        Ok(r)
    }
}

/// Set `no_new_privs` (also required before seccomp and Landlock).
pub fn set_no_new_privs() -> Result<(), StepError> {
    prctl(libc::PR_SET_NO_NEW_PRIVS, 1, "no_new_privs").map(|_| ())
}

/// Drop every capability up to `last` (read with [`last_cap`] before
/// the minimal root hides `/proc/sys`). The order matters: the bounding set
/// and the securebits need CAP_SETPCAP, so they go before the sets are
/// cleared.
///
/// `bounding` says whether the run holds CAP_SETPCAP in its namespace (a
/// run in a user namespace of its own, or a server run as root): only then
/// can the bounding set be emptied and the securebits locked, and then
/// failing to is an error. Without it (an ordinary user on a machine
/// without user namespaces) the run holds no capability to begin with;
/// the permitted, effective, inheritable and ambient sets are still
/// emptied, and `no_new_privs` keeps `execve` from adding any back (with
/// it set, the kernel caps a new program's permitted set at the old one,
/// which is empty), so the bounding set left in place grants nothing.
pub fn apply(last: u32, bounding: bool) -> Result<(), StepError> {
    use caps::CapSet;
    let e = |what: &'static str| {
        move |err: caps::errors::CapsError| {
            StepError::caused(LayerStep::Caps, format!("{what}: {err}"), &err)
        }
    };
    if bounding {
        caps::clear(None, CapSet::Bounding).map_err(e("bounding set"))?;
        // Capabilities newer than the caps crate's list, up to what the kernel knows.
        for cap in known_caps()..=last {
            // SAFETY: integer-only prctl.
            let r = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) };
            if r < 0 {
                let err = std::io::Error::last_os_error();
                // EINVAL: a capability number this kernel doesn't know.
                if err.raw_os_error() != Some(libc::EINVAL) {
                    return Err(StepError::io(
                        LayerStep::Caps,
                        format_args!("bounding set, capability {cap}"),
                        &err,
                    ));
                }
            }
        }
    }
    caps::clear(None, CapSet::Ambient).map_err(e("ambient set"))?;
    if bounding {
        prctl(
            libc::PR_SET_SECUREBITS,
            SECUREBITS as libc::c_ulong,
            "securebits",
        )?;
    }
    for set in [CapSet::Inheritable, CapSet::Effective, CapSet::Permitted] {
        caps::clear(None, set).map_err(e("capability sets"))?;
    }
    set_no_new_privs()
}

/// Whether the calling process may empty its bounding set and lock its
/// securebits: it holds CAP_SETPCAP in its effective set.
pub fn holds_setpcap() -> bool {
    caps::has_cap(None, caps::CapSet::Effective, caps::Capability::CAP_SETPCAP).unwrap_or(false)
}

/// Whether the calling process holds any capability at all in its
/// effective or permitted set.
pub fn holds_any() -> bool {
    use caps::CapSet;
    [CapSet::Effective, CapSet::Permitted]
        .into_iter()
        .any(|set| caps::read(None, set).map_or(true, |s| !s.is_empty()))
}

/// How many capabilities the caps crate names (numbers 0..this).
fn known_caps() -> u32 {
    caps::all().len() as u32
}

/// A capability set as a bit mask.
fn mask(set: caps::CapSet) -> Option<u64> {
    caps::read(None, set)
        .ok()
        .map(|s| s.iter().fold(0u64, |m, c| m | (1u64 << c.index())))
}

/// The highest capability number the kernel knows.
pub fn last_cap() -> u32 {
    std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(63)
}

/// What the calling process holds: effective, permitted, inheritable as
/// bit sets, plus whether any bounding or ambient capability remains.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Held {
    pub effective: u64,
    pub permitted: u64,
    pub inheritable: u64,
    pub bounding: u64,
    pub ambient: u64,
}

/// Read the capability sets with system calls only (no `/proc` access,
/// which Landlock denies inside the run).
pub fn held(last: u32) -> Held {
    use caps::CapSet;
    // A failed query reports "everything held", so it can never pass for empty.
    let effective = mask(CapSet::Effective).unwrap_or(u64::MAX);
    let permitted = mask(CapSet::Permitted).unwrap_or(u64::MAX);
    let inheritable = mask(CapSet::Inheritable).unwrap_or(u64::MAX);
    let mut bounding = mask(CapSet::Bounding).unwrap_or(u64::MAX);
    let ambient = mask(CapSet::Ambient).unwrap_or(u64::MAX);
    for cap in known_caps()..=last.min(63) {
        // SAFETY: integer-only prctl query.
        if unsafe { libc::prctl(libc::PR_CAPBSET_READ, cap as libc::c_ulong, 0, 0, 0) } == 1 {
            bounding |= 1 << cap;
        }
    }
    Held {
        effective,
        permitted,
        inheritable,
        bounding,
        ambient,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn securebits_lock_what_they_set_and_leave_keep_caps_off() {
        assert_eq!(SECUREBITS & 0x1, 0x1);
        assert_eq!(SECUREBITS & 0x2, 0x2);
        assert_eq!(SECUREBITS & (1 << 4), 0, "KEEP_CAPS must stay off");
        assert_eq!(SECUREBITS & (1 << 5), 1 << 5);
        assert_eq!(SECUREBITS, 0xef);
    }
}
