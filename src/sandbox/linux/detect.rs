//! What the kernel offers, found once at start in short-lived children (the
//! server itself never changes namespace), and how the layers in force are
//! named in the start-up line.

use super::policy::Layers;
use super::{cgroup, landlock, mounts, seccomp};
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
    pub seccomp: Result<(), String>,
    pub userns: Result<(), String>,
    pub netns: Result<(), String>,
    pub ipcns: Result<(), String>,
    pub utsns: Result<(), String>,
    pub pidns: Result<(), String>,
    pub pid_max: Result<(), String>,
    pub mountns: Result<(), String>,
    pub cgroup: Result<(), String>,
}

impl Detected {
    pub fn probe() -> Detected {
        let kernel = kernel_release();
        // One probe for the usual case where everything is allowed; one per
        // kind only when something is refused, to name it.
        let all =
            libc::CLONE_NEWUSER | libc::CLONE_NEWNET | libc::CLONE_NEWIPC | libc::CLONE_NEWPID;
        let (userns, netns, ipcns, pidns) = if try_unshare(all).is_ok() {
            (Ok(()), Ok(()), Ok(()), Ok(()))
        } else {
            let userns = try_unshare(libc::CLONE_NEWUSER);
            let with_user = |flag: libc::c_int| match &userns {
                Ok(()) => try_unshare(libc::CLONE_NEWUSER | flag),
                Err(e) => Err(format!("needs a user namespace ({e})")),
            };
            let netns = with_user(libc::CLONE_NEWNET);
            let ipcns = with_user(libc::CLONE_NEWIPC);
            let pidns = with_user(libc::CLONE_NEWPID);
            (userns, netns, ipcns, pidns)
        };
        let pid_max = match (&pidns, kernel_at_least(&kernel, 6, 14)) {
            (Ok(()), true) => try_pid_max(),
            (Ok(()), false) => Err("per-namespace pid_max needs Linux 6.14".into()),
            (Err(_), _) => Err("needs a PID namespace".into()),
        };
        let mountns = match (&userns, &pidns) {
            (Ok(()), Ok(())) => mounts::available(&kernel),
            _ => Err("needs user and PID namespaces".into()),
        };
        Detected {
            mountns,
            cgroup: cgroup::available().map(|_| ()),
            landlock_abi: landlock::kernel_abi(),
            seccomp: seccomp_available(),
            utsns: try_unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWUTS),
            userns,
            netns,
            ipcns,
            pidns,
            pid_max,
            kernel,
        }
    }

    /// Every layer, available or not, for `sandbox status`.
    pub fn report(&self) -> Vec<LayerStatus> {
        let r = |name: &'static str, res: &Result<(), String>, ok: &str| LayerStatus {
            name,
            available: res.is_ok(),
            detail: match res {
                Ok(()) => ok.to_string(),
                Err(e) => e.clone(),
            },
        };
        let abi = self.landlock_abi;
        let ll = |name: &'static str, min: i32, what: &str| LayerStatus {
            name,
            available: abi >= min,
            detail: if abi >= min {
                format!("{what} (Landlock ABI {abi})")
            } else if abi == 0 {
                "Landlock is not enabled in this kernel".to_string()
            } else {
                format!("needs Landlock ABI {min}, kernel has {abi}")
            },
        };
        // What a layer holds is said once, in the layer list.
        let held = |name: &'static str, res: &Result<(), String>| {
            let holds = crate::sandbox::layers::info(name).map_or("", |i| i.holds);
            r(name, res, holds)
        };
        let mut out = vec![
            held("userns", &self.userns),
            held("netns", &self.netns),
            held("ipcns", &self.ipcns),
            held("utsns", &self.utsns),
            held("pidns", &self.pidns),
            held("pid_max", &self.pid_max),
            held("mountns", &self.mountns),
            held("cgroup", &self.cgroup),
            ll("landlock", 1, "file system rules"),
            ll("landlock_tcp", 4, "TCP bind and connect denied"),
            ll(
                "landlock_scope",
                6,
                "abstract unix sockets and signals scoped to the run",
            ),
            held("seccomp", &self.seccomp),
            held("caps", &Ok(())),
            held("rlimits", &Ok(())),
        ];
        // The order of the one layer list, which the attestation uses too.
        out.sort_by_key(|l| {
            crate::sandbox::layers::LAYERS
                .iter()
                .position(|i| i.name == l.name)
                .unwrap_or(usize::MAX)
        });
        out
    }

    /// The layers a run would use: everything available, minus what was
    /// switched off.
    pub fn layers(&self, without: &[Layer]) -> Layers {
        let off = |l: Layer| without.contains(&l);
        let userns = self.userns.is_ok();
        let pidns = userns && self.pidns.is_ok() && !off(Layer::Pidns);
        let ll = !off(Layer::Landlock) && self.landlock_abi >= 1;
        Layers {
            userns,
            netns: userns && self.netns.is_ok() && !off(Layer::Netns),
            ipcns: userns && self.ipcns.is_ok(),
            utsns: userns && self.utsns.is_ok() && !off(Layer::Utsns),
            pidns,
            pid_max: (pidns && self.pid_max.is_ok()).then_some(PID_MAX),
            ns_limits: userns,
            landlock_abi: ll.then_some(self.landlock_abi),
            landlock_net: ll && self.landlock_abi >= 4,
            landlock_scope: ll && self.landlock_abi >= 6,
            seccomp: self.seccomp.is_ok() && !off(Layer::Seccomp),
            caps: !off(Layer::Caps),
            rlimits: true,
            mountns: pidns && self.mountns.is_ok() && !off(Layer::Mountns),
            // Entered by the run's init, which only the zygote shape has.
            cgroup: pidns && self.cgroup.is_ok(),
        }
    }

    /// In `require` mode: what is missing of the promised minimum (seccomp,
    /// Landlock file rules, and the network denied by a namespace or by
    /// Landlock TCP). Empty when everything promised is there.
    pub fn missing_for_require(&self) -> Vec<String> {
        let mut missing = Vec::new();
        if let Err(e) = &self.seccomp {
            missing.push(format!("seccomp ({e})"));
        }
        if self.landlock_abi < 1 {
            missing.push("Landlock file system rules (Landlock is not enabled)".to_string());
        }
        if self.netns.is_err() && self.landlock_abi < 4 {
            let why = self.netns.as_ref().err().cloned().unwrap_or_default();
            missing.push(format!(
                "a network denial: neither a network namespace ({why}) nor Landlock TCP rules (ABI {} < 4)",
                self.landlock_abi
            ));
        }
        missing
    }
}

/// The start-up line's description of the layers in force.
pub fn layers_line(d: &Detected, layers: &Layers, mode: SandboxMode, without: &[Layer]) -> String {
    let mut ns: Vec<String> = Vec::new();
    let pidns = match layers.pid_max {
        Some(max) => format!("pidns(pid_max {max})"),
        None => "pidns".to_string(),
    };
    for (on, name) in [
        (layers.userns, "userns"),
        (layers.netns, "netns"),
        (layers.ipcns, "ipcns"),
        (layers.pidns, pidns.as_str()),
        (layers.mountns, "mountns"),
        (layers.cgroup, "cgroup"),
    ] {
        if on {
            ns.push(name.to_string());
        }
    }
    let mut parts: Vec<String> = Vec::new();
    if !ns.is_empty() {
        parts.push(ns.join("+"));
    }
    if let Some(abi) = layers.landlock_abi {
        let mut what = vec!["fs"];
        if layers.landlock_net {
            what.push("tcp");
        }
        if layers.landlock_scope {
            what.push("scope");
        }
        parts.push(format!("landlock(abi{abi}: {})", what.join(" ")));
    }
    if layers.seccomp {
        parts.push("seccomp".into());
    }
    if layers.caps {
        parts.push("caps".into());
    }
    if layers.rlimits {
        parts.push("rlimits".into());
    }
    let mut line = parts.join(" ");
    let mut dropped: Vec<String> = Vec::new();
    if mode == SandboxMode::BestEffort || !without.is_empty() {
        for s in d.report() {
            if !s.available {
                dropped.push(format!("{} ({})", s.name, s.detail));
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

pub(super) fn kernel_release() -> String {
    // SAFETY: uname fills a struct we own.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    if unsafe { libc::uname(&mut u) } != 0 {
        return "unknown".into();
    }
    // SAFETY: uname NUL-terminates the field.
    unsafe { std::ffi::CStr::from_ptr(u.release.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

/// Whether a release string like `6.18.44-foo` is at least `major.minor`. Pure.
pub fn kernel_at_least(release: &str, major: u32, minor: u32) -> bool {
    let mut it = release
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<u32>().unwrap_or(0));
    let ma = it.next().unwrap_or(0);
    let mi = it.next().unwrap_or(0);
    (ma, mi) >= (major, minor)
}

pub(super) fn seccomp_available() -> Result<(), String> {
    // SAFETY: integer-only prctl query.
    if unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) } < 0 {
        return Err(format!("seccomp: {}", std::io::Error::last_os_error()));
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
            return Err(format!(
                "seccomp action {name}: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    seccomp::build_program().map_err(|e| e.to_string())?;
    Ok(())
}

/// Try `unshare(flags)` in a short-lived child, so the server itself never
/// changes namespace. The child does nothing but the system call and
/// `_exit`, which is safe after `fork` in a multi-threaded process.
pub(super) fn try_unshare(flags: libc::c_int) -> Result<(), String> {
    in_child(|| {
        // SAFETY: unshare takes flags only.
        if unsafe { libc::unshare(flags) } == 0 {
            0
        } else {
            errno()
        }
    })
    .map_err(|e| format!("unshare: {e}"))
}

/// Whether a PID namespace's own init may set the namespace's `pid_max`
/// (Linux 6.14 and later), tried for real: a child enters new user and PID
/// namespaces and its child, the namespace's init, writes the value.
pub(super) fn try_pid_max() -> Result<(), String> {
    let path = c"/proc/sys/kernel/pid_max";
    let value = PID_MAX.to_string();
    in_child(|| {
        // SAFETY: only async-signal-safe calls (unshare, fork, open, write,
        // waitpid, _exit) on data prepared before the first fork.
        unsafe {
            if libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWPID) != 0 {
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
    .map_err(|e| format!("pid_max in a PID namespace: {e}"))
}

pub(crate) fn errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
        & 0xff
}

/// Run `f` in a forked child and return its result (0: success, else an
/// errno). `f` must stick to async-signal-safe calls: the server may have
/// other threads.
pub(crate) fn in_child(f: impl FnOnce() -> i32) -> Result<(), std::io::Error> {
    // SAFETY: the child runs `f` (async-signal-safe by contract) and _exits.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(std::io::Error::last_os_error());
    }
    if pid == 0 {
        let code = f();
        // SAFETY: leaving the child without running the parent's destructors.
        unsafe { libc::_exit(code & 0xff) };
    }
    let mut status = 0;
    loop {
        // SAFETY: waiting for the child we forked.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            break;
        }
        if r < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return Err(std::io::Error::last_os_error());
        }
    }
    if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
        Ok(())
    } else if libc::WIFEXITED(status) {
        Err(std::io::Error::from_raw_os_error(libc::WEXITSTATUS(status)))
    } else {
        Err(std::io::Error::other("the probe child died"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_versions_compare() {
        assert!(kernel_at_least("6.18.44-fc-v657", 6, 14));
        assert!(kernel_at_least("6.14.0", 6, 14));
        assert!(!kernel_at_least("6.13.9-arch1", 6, 14));
        assert!(!kernel_at_least("5.15.0-91-generic", 6, 14));
        assert!(kernel_at_least("7.0.1", 6, 14));
        assert!(!kernel_at_least("garbage", 6, 14));
    }

    fn detected(abi: i32, net: bool) -> Detected {
        Detected {
            kernel: "6.18.0".into(),
            landlock_abi: abi,
            seccomp: Ok(()),
            userns: Ok(()),
            netns: if net { Ok(()) } else { Err("EPERM".into()) },
            ipcns: Ok(()),
            utsns: Ok(()),
            pidns: Ok(()),
            pid_max: Ok(()),
            mountns: Ok(()),
            cgroup: Err("cgroup v1".into()),
        }
    }

    #[test]
    fn require_mode_needs_seccomp_landlock_and_a_network_denial() {
        assert!(detected(7, true).missing_for_require().is_empty());
        assert!(detected(4, false).missing_for_require().is_empty());
        assert!(detected(1, true).missing_for_require().is_empty());
        let m = detected(3, false).missing_for_require();
        assert_eq!(m.len(), 1);
        assert!(m[0].contains("network"));
        let m = detected(0, true).missing_for_require();
        assert!(m[0].contains("Landlock"));
        let mut d = detected(7, true);
        d.seccomp = Err("not built in".into());
        assert!(d.missing_for_require()[0].starts_with("seccomp"));
    }

    #[test]
    fn layers_follow_what_is_available_and_switched_off() {
        let d = detected(7, true);
        let all = d.layers(&[]);
        assert!(all.userns && all.netns && all.ipcns && all.pidns && all.seccomp && all.caps);
        assert_eq!(all.landlock_abi, Some(7));
        assert!(all.landlock_net && all.landlock_scope);
        assert_eq!(all.pid_max, Some(PID_MAX));
        let l = d.layers(&[Layer::Landlock]);
        assert_eq!(l.landlock_abi, None);
        assert!(!l.landlock_net && !l.landlock_scope);
        assert!(!d.layers(&[Layer::Seccomp]).seccomp);
        assert!(!d.layers(&[Layer::Netns]).netns);
        assert!(d.layers(&[Layer::Netns]).userns);
        assert!(!d.layers(&[Layer::Caps]).caps);
        let old = detected(5, true).layers(&[]);
        assert!(old.landlock_net && !old.landlock_scope);
    }

    #[test]
    fn the_layers_line_names_what_runs_and_what_is_off() {
        let d = detected(7, true);
        let line = layers_line(&d, &d.layers(&[]), SandboxMode::Require, &[]);
        assert_eq!(
            line,
            format!("userns+netns+ipcns+pidns(pid_max {PID_MAX})+mountns landlock(abi7: fs tcp scope) seccomp caps rlimits")
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
    }
}
