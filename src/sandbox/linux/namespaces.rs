//! The namespace layer: a user namespace (so the helper can build the rest
//! without privilege), an empty network namespace (no interface is up, so
//! nothing routes anywhere, and abstract unix sockets are per namespace),
//! a private IPC namespace, a UTS namespace with a fixed host and domain
//! name (so `uname()` doesn't name the machine), and a PID namespace whose
//! init process is ours: when it exits the kernel kills everything left in
//! the namespace, so no daemon outlives its call.
//!
//! Identity: the owner's uid and gid are mapped to themselves inside, except
//! root, which is mapped to 65534 ("nobody"). Either way uid 0 does not exist
//! inside the run's namespace, so `setuid(0)` fails with `EINVAL`, and file
//! access still happens as the owner's real uid (the kernel checks the
//! mapped id). Nested namespaces are refused by seccomp and, as a second
//! layer, by setting the namespace's own `max_*_namespaces` counters to 0.

use crate::sandbox::Layer;
use std::io::Write;

use super::step_error::{LayerStep, StepError};
use crate::sandbox::policy::Layers;

/// The host name every run sees: the same for every run on every machine.
pub const RUN_HOSTNAME: &str = "reachweaver-run";
/// The NIS domain name every run sees: the kernel's own spelling of "unset".
pub const RUN_DOMAINNAME: &str = "(none)";

/// The id the owner's id becomes inside the run. Pure.
pub fn inside_id(outside: u32) -> u32 {
    if outside == 0 {
        65534
    } else {
        outside
    }
}

/// The `uid_map`/`gid_map` line for one id. Pure.
pub fn id_map_line(outside: u32) -> String {
    format!("{} {} 1\n", inside_id(outside), outside)
}

/// The map line of a nested user namespace, whose parent already maps the
/// owner: the id stays what it is in the parent. Pure.
pub fn same_id_map_line(id: u32) -> String {
    format!("{id} {id} 1\n")
}

/// The `unshare` flags for the switched-on namespace layers. Pure.
pub fn unshare_flags(layers: &Layers) -> libc::c_int {
    let mut flags = 0;
    if layers.has(Layer::Userns) {
        flags |= libc::CLONE_NEWUSER;
    }
    if layers.has(Layer::Netns) {
        flags |= libc::CLONE_NEWNET;
    }
    if layers.has(Layer::Ipcns) {
        flags |= libc::CLONE_NEWIPC;
    }
    if layers.has(Layer::Utsns) {
        flags |= libc::CLONE_NEWUTS;
    }
    if layers.has(Layer::Pidns) {
        flags |= libc::CLONE_NEWPID;
    }
    if layers.has(Layer::Mountns) {
        flags |= libc::CLONE_NEWNS;
    }
    flags
}

/// Refuse executable memfds in the run's PID namespace (`vm.memfd_noexec`
/// = 2 is per PID namespace since Linux 6.3, and can only be tightened by
/// namespaces below). Seccomp refuses `memfd_create` as well; this holds
/// when seccomp is switched off. Written before the minimal root hides
/// `/proc`. A kernel without the setting has no file, and the file belongs
/// to the host's root, so only a server run as root can set it: neither is
/// an error (seccomp's refusal of `memfd_create` stands either way), and
/// the probe shows which held.
pub fn set_memfd_noexec() -> Result<(), StepError> {
    const PATH: &str = "/proc/sys/vm/memfd_noexec";
    let failed = |e: std::io::Error| StepError::io(LayerStep::MemfdNoexec, PATH, &e);
    match std::fs::OpenOptions::new().write(true).open(PATH) {
        Ok(mut f) => f.write_all(b"2").map_err(failed),
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied
            ) =>
        {
            Ok(())
        }
        Err(e) => Err(failed(e)),
    }
}

/// The per-namespace counters set to 0 so the run can create no namespace.
pub const NS_LIMITS: &[&str] = &[
    "/proc/sys/user/max_user_namespaces",
    "/proc/sys/user/max_net_namespaces",
    "/proc/sys/user/max_ipc_namespaces",
    "/proc/sys/user/max_pid_namespaces",
    "/proc/sys/user/max_mnt_namespaces",
    "/proc/sys/user/max_uts_namespaces",
    "/proc/sys/user/max_cgroup_namespaces",
    "/proc/sys/user/max_time_namespaces",
];

pub const PID_MAX: &str = "/proc/sys/kernel/pid_max";

fn write_file(step: LayerStep, path: &str, text: &str) -> Result<(), StepError> {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .map_err(|e| StepError::io(step, path, &e))
}

/// Enter the new namespaces and map the owner's ids. Must run in a
/// single-threaded process (the kernel refuses a new user namespace
/// otherwise).
pub fn unshare_and_map(layers: &Layers, uid: u32, gid: u32) -> Result<(), StepError> {
    let flags = unshare_flags(layers);
    if flags == 0 {
        return Ok(());
    }
    // SAFETY: unshare takes flags only.
    if unsafe { libc::unshare(flags) } != 0 {
        return Err(StepError::last(LayerStep::Unshare, "unshare"));
    }
    if layers.has(Layer::Userns) {
        // setgroups must be denied before an unprivileged process may write gid_map.
        write_file(LayerStep::IdMap, "/proc/self/setgroups", "deny")?;
        write_file(LayerStep::IdMap, "/proc/self/uid_map", &id_map_line(uid))?;
        write_file(LayerStep::IdMap, "/proc/self/gid_map", &id_map_line(gid))?;
    }
    if layers.has(Layer::Utsns) {
        name_uts()?;
    }
    Ok(())
}

/// Give the UTS namespace just entered its fixed names. Needs
/// `CAP_SYS_ADMIN` in the user namespace that owns it, which the process
/// that created both holds until the caps layer drops it; the names are
/// read back, so a run never starts under the machine's.
pub fn name_uts() -> Result<(), StepError> {
    // SAFETY: both calls read the given number of bytes from our strings.
    unsafe {
        if libc::sethostname(RUN_HOSTNAME.as_ptr().cast(), RUN_HOSTNAME.len()) != 0 {
            return Err(StepError::last(LayerStep::Hostname, "sethostname"));
        }
        if libc::setdomainname(RUN_DOMAINNAME.as_ptr().cast(), RUN_DOMAINNAME.len()) != 0 {
            return Err(StepError::last(LayerStep::Hostname, "setdomainname"));
        }
    }
    let (node, domain) = uts_names()?;
    if node != RUN_HOSTNAME || domain != RUN_DOMAINNAME {
        return Err(StepError::plain(
            LayerStep::Hostname,
            format!("utsns: uname says {node:?}/{domain:?} after naming the namespace"),
        ));
    }
    Ok(())
}

/// The host and NIS domain name `uname()` gives this process.
pub fn uts_names() -> Result<(String, String), StepError> {
    // SAFETY: uname fills a struct we own.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: uname writes into u, which we own.
    if unsafe { libc::uname(&mut u) } != 0 {
        return Err(StepError::last(LayerStep::Hostname, "uname"));
    }
    let field = |f: &[libc::c_char]| {
        let bytes: Vec<u8> = f
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    Ok((field(&u.nodename), field(&u.domainname)))
}

/// In a user namespace nested in one that maps the owner (a run forked by
/// the zygote), map the ids to themselves. A process may write its own maps
/// once, for its own ids only, and only while it is dumpable.
pub fn map_to_themselves(uid: u32, gid: u32) -> Result<(), StepError> {
    write_file(LayerStep::IdMap, "/proc/self/setgroups", "deny")?;
    write_file(
        LayerStep::IdMap,
        "/proc/self/uid_map",
        &same_id_map_line(uid),
    )?;
    write_file(
        LayerStep::IdMap,
        "/proc/self/gid_map",
        &same_id_map_line(gid),
    )
}

/// Bound the PID namespace's ids (so its process count) from inside it.
/// Needs the calling process to be the namespace's init.
pub fn set_pid_max(max: u32) -> Result<(), StepError> {
    write_file(LayerStep::PidMax, PID_MAX, &max.to_string())?;
    let back = std::fs::read_to_string(PID_MAX)
        .map_err(|e| StepError::io(LayerStep::PidMax, PID_MAX, &e))?;
    if back.trim() != max.to_string() {
        return Err(StepError::plain(
            LayerStep::PidMax,
            format!("{PID_MAX}: reads {} after writing {max}", back.trim()),
        ));
    }
    Ok(())
}

/// Forbid every kind of nested namespace. A counter the kernel doesn't have
/// (an older kernel without time namespaces) is skipped; any other failure
/// fails the layer.
pub fn limit_nested_namespaces() -> Result<(), StepError> {
    write_ns_limits(open_ns_limits()?)
}

/// The namespace counters, opened while `/proc/sys` is still in view (the
/// minimal root shows processes only) and written once the minimal root is
/// built (building it clones mount trees, which a zero counter refuses).
pub fn open_ns_limits() -> Result<Vec<(&'static str, std::fs::File)>, StepError> {
    let mut out = Vec::new();
    for path in NS_LIMITS {
        if !std::path::Path::new(path).exists() {
            continue;
        }
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(|e| StepError::io(LayerStep::NsLimitsOpen, path, &e))?;
        out.push((*path, f));
    }
    if out.is_empty() {
        return Err(StepError::plain(
            LayerStep::NsLimitsOpen,
            "no namespace counter in /proc/sys/user",
        ));
    }
    Ok(out)
}

pub fn write_ns_limits(files: Vec<(&'static str, std::fs::File)>) -> Result<(), StepError> {
    for (path, mut f) in files {
        f.write_all(b"0")
            .map_err(|e| StepError::io(LayerStep::NsLimitsWrite, path, &e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_ids_map_to_themselves_and_root_to_nobody() {
        assert_eq!(id_map_line(1000), "1000 1000 1\n");
        assert_eq!(id_map_line(65534), "65534 65534 1\n");
        assert_eq!(id_map_line(0), "65534 0 1\n");
        assert_ne!(inside_id(0), 0);
        // A run nested in the zygote's namespace keeps the zygote's ids,
        // so root stays unmapped there too.
        assert_eq!(same_id_map_line(inside_id(0)), "65534 65534 1\n");
        assert_eq!(same_id_map_line(1000), "1000 1000 1\n");
    }

    #[test]
    fn uts_names_are_the_ones_the_kernel_shows_in_proc() {
        let (node, domain) = uts_names().unwrap();
        let read = |p: &str| std::fs::read_to_string(p).unwrap().trim_end().to_string();
        assert_eq!(node, read("/proc/sys/kernel/hostname"));
        assert_eq!(domain, read("/proc/sys/kernel/domainname"));
        assert!(!node.is_empty());
    }

    #[test]
    fn flags_follow_the_layers() {
        let all = Layers::of(&[
            Layer::Userns,
            Layer::Netns,
            Layer::Ipcns,
            Layer::Utsns,
            Layer::Pidns,
        ]);
        assert_eq!(
            unshare_flags(&all),
            libc::CLONE_NEWUSER
                | libc::CLONE_NEWNET
                | libc::CLONE_NEWIPC
                | libc::CLONE_NEWUTS
                | libc::CLONE_NEWPID
        );
        let no_uts = all.without(Layer::Utsns);
        assert_eq!(unshare_flags(&no_uts) & libc::CLONE_NEWUTS, 0);
        let no_net = all.without(Layer::Netns);
        assert_eq!(unshare_flags(&no_net) & libc::CLONE_NEWNET, 0);
        assert_eq!(unshare_flags(&Layers::default()), 0);
    }
}
