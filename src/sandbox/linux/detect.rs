//! What the kernel offers, found once at start in short-lived children (the
//! server itself never changes namespace), and how the layers in force are
//! named in the start-up line.

use super::kernel::{errno, kernel_at_least, Pending};
use super::step_error::{LayerStep, StepError};
use super::{cgroup, landlock, mounts, seccomp};
use crate::sandbox::policy::Layers;
use crate::sandbox::SandboxMode;
use crate::sandbox::{Layer, LayerStatus};

/// The PID namespace's highest pid: bounds the run's processes whatever
/// its uid (real root is exempt from `RLIMIT_NPROC`).
pub const PID_MAX: u32 = 512;

/// What the kernel offers, found once at start.
#[derive(Debug, Clone)]
pub struct Detected {
    pub kernel: String,
    pub landlock_abi: i32,
    /// What a probe found of each layer the kernel is asked about (the
    /// namespaces, `pid_max`, the minimal root, the cgroup, seccomp): why
    /// not, when it is not there. See [`Detected::probed`].
    probed: Vec<(Layer, Result<(), StepError>)>,
    /// The server holds CAP_SETPCAP (root): a run without a user namespace
    /// of its own can still empty its bounding set and lock its securebits.
    pub setpcap: bool,
    /// The server runs as uid 0, which `RLIMIT_NPROC` does not bind.
    pub root: bool,
}

/// Said of a layer no probe asked about.
const NOT_PROBED: &str = "not probed";

impl Detected {
    pub fn probe() -> Detected {
        let kernel = kernel_release();
        // One probe for the usual case where everything is allowed; one per
        // kind only when something is refused, to name it.
        let all = libc::CLONE_NEWUSER
            | libc::CLONE_NEWNET
            | libc::CLONE_NEWIPC
            | libc::CLONE_NEWPID
            | libc::CLONE_NEWUTS;
        let pid_max_possible = kernel_at_least(&kernel, 6, 14);
        // The usual case is guessed at: the pid_max and mount namespace
        // checks start beside the one for every namespace, as if it will
        // pass (the three children then run at once), and their answers
        // are kept only if it does.
        let every = start_unshare(all);
        let pid_max_guess = pid_max_possible.then(|| start_pid_max(true));
        let mount_guess = mounts::start_available(&kernel, true);
        let every = every.finish();
        let pid_max_guess = pid_max_guess.map(Pending::finish);
        let mount_guess = mount_guess.and_then(Pending::finish);
        if every.is_ok() {
            let pid_max = pid_max_guess.unwrap_or_else(|| Err(needs("Linux 6.14")));
            return Self::found(
                kernel,
                [Ok(()), Ok(()), Ok(()), Ok(()), Ok(())],
                pid_max,
                mount_guess,
            );
        }
        let (userns, netns, ipcns, pidns, utsns) = {
            let userns = usable_userns(
                try_unshare(libc::CLONE_NEWUSER),
                try_unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET),
                restricted_userns(),
            );
            // Without a user namespace, a server that holds CAP_SYS_ADMIN
            // (root on a kernel with user namespaces switched off) may still
            // make every other namespace for its runs.
            let kind = |flag: libc::c_int| match &userns {
                Ok(()) => try_unshare(libc::CLONE_NEWUSER | flag),
                Err(e) => try_unshare(flag).map_err(|own| {
                    own.map_detail(|own| {
                        format!("needs a user namespace ({e}) or CAP_SYS_ADMIN ({own})")
                    })
                }),
            };
            let netns = kind(libc::CLONE_NEWNET);
            let ipcns = kind(libc::CLONE_NEWIPC);
            let pidns = kind(libc::CLONE_NEWPID);
            let utsns = kind(libc::CLONE_NEWUTS);
            (userns, netns, ipcns, pidns, utsns)
        };
        let pid_max = match (&pidns, pid_max_possible) {
            (Ok(()), true) => try_pid_max(userns.is_ok()),
            (Ok(()), false) => Err(needs("Linux 6.14")),
            (Err(_), _) => Err(needs("a PID namespace")),
        };
        let mountns = match &pidns {
            Ok(()) => mounts::available(&kernel, userns.is_ok()),
            Err(_) => Err(needs("a PID namespace")),
        };
        Self::found(
            kernel,
            [userns, netns, ipcns, pidns, utsns],
            pid_max,
            mountns,
        )
    }

    /// What the probe found: the namespaces (user, network, IPC, PID, UTS),
    /// `pid_max` and the mount namespace as tried; the rest read here.
    fn found(
        kernel: String,
        namespaces: [Result<(), StepError>; 5],
        pid_max: Result<(), StepError>,
        mountns: Result<(), StepError>,
    ) -> Detected {
        let [userns, netns, ipcns, pidns, utsns] = namespaces;
        Detected {
            landlock_abi: landlock::kernel_abi(),
            probed: vec![
                (Layer::Userns, userns),
                (Layer::Netns, netns),
                (Layer::Ipcns, ipcns),
                (Layer::Utsns, utsns),
                (Layer::Pidns, pidns),
                (Layer::PidMax, pid_max),
                (Layer::Mountns, mountns),
                (
                    Layer::Cgroup,
                    cgroup::available().map_err(|e| StepError::plain(LayerStep::CgroupCreate, e)),
                ),
                (Layer::Seccomp, seccomp_available()),
            ],
            setpcap: super::caps::holds_setpcap(),
            // SAFETY: geteuid can't fail.
            root: unsafe { libc::geteuid() } == 0,
            kernel,
        }
    }

    /// What the probe found of `layer`: `Err` with why it is not there. A
    /// layer no probe asks about (Landlock's, which go by the ABI; caps and
    /// rlimits, always there) reads as not there.
    pub fn probed(&self, layer: Layer) -> Result<(), &str> {
        self.probed
            .iter()
            .find(|(l, _)| *l == layer)
            .map_or(Err(NOT_PROBED), |(_, r)| {
                r.as_ref().map_err(|e| e.detail.as_str()).copied()
            })
    }

    /// The first probe that failed because the machine ran out (of
    /// processes, memory or descriptors) rather than because the kernel
    /// lacks the layer: what it found then says nothing of the kernel.
    pub fn shortage(&self) -> Option<&StepError> {
        self.probed
            .iter()
            .filter_map(|(_, r)| r.as_ref().err())
            .find(|e| e.is_shortage())
    }

    /// Records what a probe found of `layer`.
    #[cfg(test)]
    pub fn set_probed(&mut self, layer: Layer, found: Result<(), StepError>) {
        match self.probed.iter_mut().find(|(l, _)| *l == layer) {
            Some((_, r)) => *r = found,
            None => self.probed.push((layer, found)),
        }
    }

    /// Whether a run can empty its bounding set: in a user namespace of its
    /// own it holds every capability there; without one, only if the
    /// server holds CAP_SETPCAP.
    pub fn caps_bounding(&self) -> bool {
        self.probed(Layer::Userns).is_ok() || self.setpcap
    }

    /// What the capability layer does here, for `sandbox status`.
    pub fn caps_detail(&self) -> String {
        if self.caps_bounding() {
            "every capability dropped (bounding set included), securebits locked, no_new_privs"
                .to_string()
        } else {
            "no capability held: the effective, permitted, inheritable and ambient sets emptied \
             and no_new_privs set, so no program the run starts gains one; the bounding set is \
             kept (emptying it needs CAP_SETPCAP, which this user holds only in a user namespace)"
                .to_string()
        }
    }

    /// What `sandbox status` says of `layer` here: `Ok` with what it
    /// holds when a run can have it, `Err` with why not; `None` for a layer
    /// of another platform.
    pub fn availability(&self, layer: Layer) -> Option<Result<String, String>> {
        let probed = |what: String| match self.probed(layer) {
            Ok(()) => Ok(what),
            Err(why) => Err(why.to_string()),
        };
        let abi = self.landlock_abi;
        let landlock = |min: i32| {
            if abi >= min {
                Ok(format!("{} (Landlock ABI {abi})", layer.holds()))
            } else if abi == 0 {
                Err("Landlock is not enabled in this kernel".to_string())
            } else {
                Err(format!("needs Landlock ABI {min}, kernel has {abi}"))
            }
        };
        // What a layer holds is said once, in the layer list.
        Some(match layer {
            Layer::Userns
            | Layer::Netns
            | Layer::Ipcns
            | Layer::Utsns
            | Layer::Pidns
            | Layer::PidMax
            | Layer::Mountns
            | Layer::Cgroup
            | Layer::Seccomp => probed(layer.holds().to_string()),
            Layer::Rlimits => Ok(layer.holds().to_string()),
            Layer::Landlock => landlock(1),
            Layer::LandlockTcp => landlock(4),
            Layer::LandlockScope => landlock(6),
            Layer::Caps => Ok(self.caps_detail()),
            // macOS only.
            Layer::SandboxExec => return None,
        })
    }

    /// Every layer, available or not, for `sandbox status`, in the order of
    /// the one layer list (which the attestation uses too).
    pub fn report(&self) -> Vec<LayerStatus> {
        Layer::ALL
            .iter()
            .filter_map(|&layer| {
                let found = self.availability(layer)?;
                Some(LayerStatus {
                    layer,
                    available: found.is_ok(),
                    detail: found.unwrap_or_else(|why| why),
                })
            })
            .collect()
    }

    /// The layers a run would use: everything available, minus what was
    /// switched off.
    pub fn layers(&self, without: &[Layer]) -> Layers {
        let off = |l: Layer| without.contains(&l);
        let ok = |l: Layer| self.probed(l).is_ok();
        let pidns = ok(Layer::Pidns) && !off(Layer::Pidns);
        let landlock = !off(Layer::Landlock) && self.landlock_abi >= 1;
        let pid_max = pidns && ok(Layer::PidMax);
        let mut layers = Layers::default();
        for &layer in Layer::ALL {
            let on = match layer {
                Layer::Userns | Layer::Ipcns => ok(layer),
                Layer::Netns | Layer::Utsns | Layer::Seccomp => ok(layer) && !off(layer),
                Layer::Pidns => pidns,
                Layer::PidMax => pid_max,
                Layer::Mountns => pidns && ok(layer) && !off(layer),
                // Entered by the run's init in the zygote shape, and by the
                // re-executed helper (before its exec) without one.
                Layer::Cgroup => ok(layer),
                Layer::Rlimits => true,
                Layer::Landlock => landlock,
                Layer::LandlockTcp => landlock && self.landlock_abi >= 4 && !off(layer),
                Layer::LandlockScope => landlock && self.landlock_abi >= 6 && !off(layer),
                Layer::Caps => !off(layer),
                Layer::SandboxExec => false,
            };
            layers.set(layer, on);
        }
        layers.set_pid_max(pid_max.then_some(PID_MAX));
        layers.set_landlock_abi(landlock.then_some(self.landlock_abi));
        // The counters are the run's own only in a user namespace of its
        // own; without one they are the host's, never to be written.
        layers.ns_limits = ok(Layer::Userns);
        layers.caps_bounding = self.caps_bounding();
        layers
    }
}

/// Where the start-up line writes a layer in force.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Word {
    /// Its name, joined by `+` to the other namespaces', in list order.
    Namespace,
    /// Inside the PID namespace's word: `pidns(pid_max 512)`.
    InPidns,
    /// Inside `landlock(abiN: ...)`, as this word, in list order.
    Landlock(&'static str),
    /// Its name on its own after those, at this place.
    Alone(u8),
    /// Not a layer of this platform.
    Elsewhere,
}

fn word(layer: Layer) -> Word {
    match layer {
        Layer::Userns
        | Layer::Netns
        | Layer::Ipcns
        | Layer::Utsns
        | Layer::Pidns
        | Layer::Mountns
        | Layer::Cgroup => Word::Namespace,
        Layer::PidMax => Word::InPidns,
        Layer::Landlock => Word::Landlock("fs"),
        Layer::LandlockTcp => Word::Landlock("tcp"),
        Layer::LandlockScope => Word::Landlock("scope"),
        Layer::Seccomp => Word::Alone(0),
        Layer::Caps => Word::Alone(1),
        Layer::Rlimits => Word::Alone(2),
        Layer::SandboxExec => Word::Elsewhere,
    }
}

/// The layers in force as the start-up line writes them
/// (`userns+netns+pidns(pid_max 512) landlock(abi6: fs tcp scope) seccomp`).
fn in_force(layers: &Layers) -> String {
    let on: Vec<Layer> = Layer::ALL
        .iter()
        .copied()
        .filter(|l| layers.has(*l))
        .collect();
    let mut parts: Vec<String> = Vec::new();
    let ns: Vec<String> = on
        .iter()
        .filter(|l| word(**l) == Word::Namespace)
        .map(|l| match (l, layers.pid_max()) {
            (Layer::Pidns, Some(max)) => format!("pidns(pid_max {max})"),
            _ => l.name().to_string(),
        })
        .collect();
    if !ns.is_empty() {
        parts.push(ns.join("+"));
    }
    if let Some(abi) = layers.landlock_abi() {
        let what: Vec<&str> = on
            .iter()
            .filter_map(|l| match word(*l) {
                Word::Landlock(w) => Some(w),
                _ => None,
            })
            .collect();
        parts.push(format!("landlock(abi{abi}: {})", what.join(" ")));
    }
    let mut alone: Vec<(u8, &str)> = on
        .iter()
        .filter_map(|l| match word(*l) {
            Word::Alone(place) => Some((place, l.name())),
            _ => None,
        })
        .collect();
    alone.sort_unstable();
    parts.extend(alone.into_iter().map(|(_, name)| name.to_string()));
    parts.join(" ")
}

/// The start-up line's description of the layers in force.
pub fn layers_line(d: &Detected, layers: &Layers, mode: SandboxMode, without: &[Layer]) -> String {
    let mut line = in_force(layers);
    let mut dropped: Vec<String> = Vec::new();
    if mode == SandboxMode::BestEffort || !without.is_empty() {
        for s in d.report() {
            if !s.available {
                dropped.push(format!("{} ({})", s.name(), s.detail));
            }
        }
    }
    if !dropped.is_empty() {
        line.push_str(&format!("; missing: {}", dropped.join(", ")));
    }
    if !without.is_empty() {
        let names: Vec<&str> = without.iter().map(|l| l.name()).collect();
        line.push_str(&format!("; SWITCHED OFF: {}", names.join(", ")));
    }
    line
}

/// A user namespace is of use to a run only if the run holds capabilities
/// in it: Ubuntu's AppArmor restriction lets an unprivileged program create
/// one but denies every capability inside (so not even a network namespace
/// can be made in it). Such a machine is treated as one without user
/// namespaces, naming why. Pure.
pub fn usable_userns(
    userns: Result<(), StepError>,
    with_netns: Result<(), StepError>,
    restricted: Option<bool>,
) -> Result<(), StepError> {
    match (userns, with_netns) {
        (Err(e), _) => Err(e),
        (Ok(()), Ok(())) => Ok(()),
        (Ok(()), Err(e)) if e.is_shortage() => Err(e),
        (Ok(()), Err(e)) => Err(e.map_detail(|e| format!(
            "a user namespace can be made but gives no capability in it ({e}){}",
            if restricted == Some(true) {
                ": kernel.apparmor_restrict_unprivileged_userns=1 and no AppArmor profile allows \
                 this program user namespaces (see `reachweaver-mcp sandbox apparmor-profile`)"
            } else {
                ""
            }
        ))),
    }
}

/// A layer that needs another one (or a newer kernel) first: no call failed.
fn needs(what: &str) -> StepError {
    StepError::plain(LayerStep::Unshare, format!("needs {what}"))
}

/// Ubuntu's switch (23.10 and later): `None` where the kernel has none.
fn restricted_userns() -> Option<bool> {
    std::fs::read_to_string("/proc/sys/kernel/apparmor_restrict_unprivileged_userns")
        .ok()
        .map(|v| v.trim() == "1")
}

pub(super) fn kernel_release() -> String {
    // SAFETY: uname fills a struct we own.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: uname writes into u, which we own.
    if unsafe { libc::uname(&mut u) } != 0 {
        return "unknown".into();
    }
    // SAFETY: uname NUL-terminates the field.
    unsafe { std::ffi::CStr::from_ptr(u.release.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

pub(super) fn seccomp_available() -> Result<(), StepError> {
    // SAFETY: integer-only prctl query.
    if unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) } < 0 {
        return Err(StepError::last(LayerStep::SeccompLoad, "seccomp"));
    }
    for (action, name) in [
        (libc::SECCOMP_RET_ERRNO, "errno"),
        (libc::SECCOMP_RET_KILL_PROCESS, "kill_process"),
    ] {
        // SAFETY: SECCOMP_GET_ACTION_AVAIL reads one u32 we own.
        let r = unsafe {
            libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_GET_ACTION_AVAIL,
                0,
                &action as *const u32,
            )
        };
        if r != 0 {
            return Err(StepError::last(
                LayerStep::SeccompLoad,
                format!("seccomp action {name}"),
            ));
        }
    }
    // Both forms the runs may get, whatever Landlock turns out to judge.
    for landlock_truncates in [true, false] {
        seccomp::build_program(seccomp::Beside { landlock_truncates })
            .map_err(|e| StepError::plain(LayerStep::SeccompLoad, e.to_string()))?;
    }
    Ok(())
}

/// Try `unshare(flags)` in a short-lived child, so the server itself never
/// changes namespace. The child does nothing but the system call and
/// `_exit`, which is safe after `fork` in a multi-threaded process.
pub(super) fn try_unshare(flags: libc::c_int) -> Result<(), StepError> {
    start_unshare(flags).finish()
}

fn start_unshare(flags: libc::c_int) -> Pending {
    Pending::start("unshare", LayerStep::Unshare, move || {
        // SAFETY: unshare takes flags only.
        if unsafe { libc::unshare(flags) } == 0 {
            0
        } else {
            errno()
        }
    })
}

/// Whether a PID namespace's own init may set the namespace's `pid_max`
/// (Linux 6.14 and later), tried for real: a child enters new user and PID
/// namespaces and its child, the namespace's init, writes the value.
pub(super) fn try_pid_max(userns: bool) -> Result<(), StepError> {
    start_pid_max(userns).finish()
}

fn start_pid_max(userns: bool) -> Pending {
    let path = c"/proc/sys/kernel/pid_max";
    let value = PID_MAX.to_string();
    let flags = if userns {
        libc::CLONE_NEWUSER | libc::CLONE_NEWPID
    } else {
        libc::CLONE_NEWPID
    };
    Pending::start("pid_max in a PID namespace", LayerStep::PidMax, move || {
        // SAFETY: only async-signal-safe calls (unshare, fork, open, write,
        // waitpid, _exit) on data prepared before the first fork.
        unsafe {
            if libc::unshare(flags) != 0 {
                return errno();
            }
            let init = libc::fork();
            if init < 0 {
                return errno();
            }
            if init == 0 {
                let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd < 0 {
                    libc::_exit(errno());
                }
                let n = libc::write(fd, value.as_ptr().cast(), value.len());
                libc::_exit(if n == value.len() as isize {
                    0
                } else {
                    errno()
                });
            }
            let mut st = 0;
            if libc::waitpid(init, &mut st, 0) != init || !libc::WIFEXITED(st) {
                return libc::EIO;
            }
            libc::WEXITSTATUS(st)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A probe's refusal, as the tests name it.
    fn no(why: &str) -> StepError {
        StepError::plain(LayerStep::Unshare, why)
    }

    #[test]
    fn kernel_versions_compare() {
        assert!(kernel_at_least("6.18.44-fc-v657", 6, 14));
        assert!(kernel_at_least("6.14.0", 6, 14));
        assert!(!kernel_at_least("6.13.9-arch1", 6, 14));
        assert!(!kernel_at_least("5.15.0-91-generic", 6, 14));
        assert!(kernel_at_least("7.0.1", 6, 14));
        assert!(!kernel_at_least("garbage", 6, 14));
    }

    impl Detected {
        fn with_cgroup(mut self) -> Detected {
            self.set_probed(Layer::Cgroup, Ok(()));
            self
        }
    }

    fn detected(abi: i32, net: bool) -> Detected {
        Detected {
            kernel: "6.18.0".into(),
            landlock_abi: abi,
            probed: vec![
                (Layer::Seccomp, Ok(())),
                (Layer::Userns, Ok(())),
                (Layer::Netns, if net { Ok(()) } else { Err(no("EPERM")) }),
                (Layer::Ipcns, Ok(())),
                (Layer::Utsns, Ok(())),
                (Layer::Pidns, Ok(())),
                (Layer::PidMax, Ok(())),
                (Layer::Mountns, Ok(())),
                (Layer::Cgroup, Err(no("cgroup v1"))),
            ],
            setpcap: true,
            root: true,
        }
    }

    #[test]
    fn without_a_user_namespace_root_keeps_the_other_namespaces_and_the_bounding_set() {
        let mut d = detected(7, true);
        d.set_probed(Layer::Userns, Err(no("ENOSPC")));
        let l = d.layers(&[]);
        assert!(
            !l.has(Layer::Userns)
                && l.has(Layer::Netns)
                && l.has(Layer::Pidns)
                && l.has(Layer::Mountns)
                && l.caps_bounding
        );
        // The host's namespace counters are never the run's to write.
        assert!(!l.ns_limits);
        // The cgroup is entered by the re-executed helper there, as it is
        // by the zygote's init elsewhere: a root server's one bound on a
        // run's processes before per-namespace pid_max.
        d.set_probed(Layer::Cgroup, Ok(()));
        assert!(d.layers(&[]).has(Layer::Cgroup));
        d.set_probed(Layer::Cgroup, Err(no("cgroup v1")));
        assert!(!d.layers(&[]).has(Layer::Cgroup));
        assert!(detected(7, true)
            .with_cgroup()
            .layers(&[])
            .has(Layer::Cgroup));
        // An ordinary user there: no namespace, no CAP_SETPCAP.
        let mut u = detected(7, true);
        u.set_probed(Layer::Userns, Err(no("ENOSPC")));
        u.set_probed(Layer::Netns, Err(no("EPERM")));
        u.set_probed(Layer::Ipcns, Err(no("EPERM")));
        u.set_probed(Layer::Pidns, Err(no("EPERM")));
        u.setpcap = false;
        u.root = false;
        let l = u.layers(&[]);
        assert!(
            !l.has(Layer::Netns)
                && !l.has(Layer::Pidns)
                && !l.has(Layer::Mountns)
                && l.pid_max().is_none()
        );
        assert!(l.has(Layer::Caps) && !l.caps_bounding);
        assert!(u.caps_detail().contains("the bounding set is kept"));
        assert!(detected(7, true)
            .caps_detail()
            .contains("bounding set included"));
    }

    #[test]
    fn a_user_namespace_without_capabilities_counts_as_none() {
        assert_eq!(usable_userns(Ok(()), Ok(()), Some(true)), Ok(()));
        let e = usable_userns(Ok(()), Err(no("unshare: EPERM")), Some(true))
            .unwrap_err()
            .detail;
        assert!(e.starts_with("a user namespace can be made but gives no capability in it (unshare: EPERM): kernel.apparmor_restrict_unprivileged_userns=1"), "{e}");
        let e = usable_userns(Ok(()), Err(no("unshare: EPERM")), None)
            .unwrap_err()
            .detail;
        assert!(e.ends_with("(unshare: EPERM)"), "{e}");
        let e = usable_userns(Ok(()), Err(no("unshare: EPERM")), Some(false))
            .unwrap_err()
            .detail;
        assert!(!e.contains("apparmor"), "{e}");
        assert_eq!(
            usable_userns(Err(no("ENOSPC")), Ok(()), Some(true)),
            Err(no("ENOSPC"))
        );
    }

    fn short_of_processes() -> StepError {
        StepError::io(
            LayerStep::ProbeFork,
            "unshare: fork",
            &std::io::Error::from_raw_os_error(libc::EAGAIN),
        )
    }

    #[test]
    fn a_probe_that_ran_out_is_kept_as_it_is_not_read_as_a_missing_capability() {
        let e = usable_userns(Ok(()), Err(short_of_processes()), Some(true)).unwrap_err();
        assert_eq!(e, short_of_processes());
        assert!(e.is_shortage());
    }

    #[test]
    fn a_shortage_is_told_apart_from_a_kernel_without_the_layer() {
        let mut d = detected(7, true);
        assert_eq!(d.shortage(), None);
        d.set_probed(Layer::Netns, Err(no("EPERM")));
        assert_eq!(d.shortage(), None);
        let refused = StepError::io(
            LayerStep::Unshare,
            "unshare",
            &std::io::Error::from_raw_os_error(libc::EPERM),
        );
        d.set_probed(Layer::Ipcns, Err(refused));
        assert_eq!(d.shortage(), None);
        d.set_probed(Layer::Mountns, Err(short_of_processes()));
        assert_eq!(d.shortage(), Some(&short_of_processes()));
    }

    #[test]
    fn landlock_tcp_and_scope_can_be_switched_off_alone() {
        let d = detected(7, true);
        let l = d.layers(&[Layer::LandlockTcp]);
        assert!(
            !l.has(Layer::LandlockTcp)
                && l.has(Layer::LandlockScope)
                && l.landlock_abi() == Some(7)
        );
        let l = d.layers(&[Layer::LandlockScope]);
        assert!(l.has(Layer::LandlockTcp) && !l.has(Layer::LandlockScope));
        // ABI 3 has neither; ABI 4 and 5 have TCP rules only.
        let l = detected(3, true).layers(&[]);
        assert!(!l.has(Layer::LandlockTcp) && !l.has(Layer::LandlockScope));
        let l = detected(4, true).layers(&[]);
        assert!(l.has(Layer::LandlockTcp) && !l.has(Layer::LandlockScope));
        let l = detected(5, true).layers(&[]);
        assert!(l.has(Layer::LandlockTcp) && !l.has(Layer::LandlockScope));
        let l = detected(6, true).layers(&[]);
        assert!(l.has(Layer::LandlockTcp) && l.has(Layer::LandlockScope));
    }

    #[test]
    fn layers_follow_what_is_available_and_switched_off() {
        let d = detected(7, true);
        let all = d.layers(&[]);
        assert!(
            all.has(Layer::Userns)
                && all.has(Layer::Netns)
                && all.has(Layer::Ipcns)
                && all.has(Layer::Pidns)
                && all.has(Layer::Seccomp)
                && all.has(Layer::Caps)
        );
        assert_eq!(all.landlock_abi(), Some(7));
        assert!(all.has(Layer::LandlockTcp) && all.has(Layer::LandlockScope));
        assert_eq!(all.pid_max(), Some(PID_MAX));
        let l = d.layers(&[Layer::Landlock]);
        assert_eq!(l.landlock_abi(), None);
        assert!(!l.has(Layer::LandlockTcp) && !l.has(Layer::LandlockScope));
        assert!(!d.layers(&[Layer::Seccomp]).has(Layer::Seccomp));
        assert!(!d.layers(&[Layer::Netns]).has(Layer::Netns));
        assert!(d.layers(&[Layer::Netns]).has(Layer::Userns));
        assert!(!d.layers(&[Layer::Caps]).has(Layer::Caps));
        let old = detected(5, true).layers(&[]);
        assert!(old.has(Layer::LandlockTcp) && !old.has(Layer::LandlockScope));
    }

    #[test]
    fn the_layers_line_names_what_runs_and_what_is_off() {
        let d = detected(7, true);
        let line = layers_line(&d, &d.layers(&[]), SandboxMode::Require, &[]);
        assert_eq!(
            line,
            format!("userns+netns+ipcns+utsns+pidns(pid_max {PID_MAX})+mountns landlock(abi7: fs tcp scope) seccomp caps rlimits")
        );
        let line = layers_line(
            &d,
            &d.layers(&[Layer::Seccomp]),
            SandboxMode::Require,
            &[Layer::Seccomp],
        );
        assert!(line.ends_with("; SWITCHED OFF: seccomp"), "{line}");
        assert!(!line.contains(" seccomp "));
        let d = detected(5, false);
        let line = layers_line(&d, &d.layers(&[]), SandboxMode::BestEffort, &[]);
        assert!(line.contains("missing: netns (EPERM)"), "{line}");
        assert!(line.contains("landlock_scope"), "{line}");
        // Without a PID namespace its limit is not written; Landlock's
        // words follow what it holds.
        let sparse = {
            let mut l = Layers::of(&[Layer::Netns, Layer::LandlockTcp, Layer::Rlimits]);
            l.set_pid_max(Some(PID_MAX));
            l.set_landlock_abi(Some(4));
            l
        };
        assert_eq!(in_force(&sparse), "netns landlock(abi4: fs tcp) rlimits");
        assert_eq!(in_force(&Layers::default()), "");
    }
}
