//! The escape attempts, as `__probe-attempt NAME ARGS...`: code that runs
//! inside the sandbox, and the same code once outside it as the positive
//! control. Each prints one JSON line, `{"ok":true,"result":"..."}` when
//! the attempt did what it tried, `{"ok":false,"result":"EPERM"}` (the exact
//! errno, or the observed value) when it was stopped. The files group them
//! by what they attack; `Attempt` names each one, and a spec holds that
//! name, never the command-line word.
//!
//! A name prefixed with `userns:` first enters a bare user+network+mount
//! namespace where the attempt's uid is 0 with every capability: the
//! control for attempts that need privilege (raw sockets, mounts,
//! `setuid(0)`), which an unprivileged owner doesn't have on the host.

mod drafts;
mod errno;
mod files;
mod kernel;
mod network;
mod observation;
mod processes;
mod tmpdir;

use self::errno::{arg, check};
pub(super) use self::files::{file_id, FS_IOC_GETFLAGS, FS_IOC_GETVERSION};
pub(super) use self::observation::listmount;
use super::report_line::{print_report, Tried};
use super::table::attempt_table;

attempt_table! {
    run -> Tried;
    // Network.
    TcpConnect = "tcp-connect" => |a| network::tcp_connect(arg(a, 0)?),
    UdpSend = "udp-send" => |a| network::udp_send(arg(a, 0)?),
    DnsLookup = "dns-lookup" => |a| network::dns_lookup(arg(a, 0)?),
    ConnectMany = "connect-many" => |a| network::connect_many(arg(a, 0)?, arg(a, 1)?),
    ConnectSwapped = "connect-swapped" => |a| network::connect_swapped(arg(a, 0)?, arg(a, 1)?),
    Socket = "socket" => |a| network::socket(arg(a, 0)?),
    MptcpConnect = "mptcp-connect" => |a| network::mptcp_connect(arg(a, 0)?),
    UnixConnect = "unix-connect" => |a| network::unix_connect(arg(a, 0)?),
    AbstractConnect = "abstract-connect" => |a| network::abstract_connect(arg(a, 0)?),
    Socketpair = "socketpair" => |a| network::socketpair(arg(a, 0)?),
    // The kernel's objects and entry points.
    IoUringSetup = "io-uring-setup" => |_a| kernel::io_uring_setup(),
    X32Syscall = "x32-syscall" => |_a| kernel::x32_syscall(),
    UnlistedCall = "unlisted-call" => |_a| kernel::unlisted_call(),
    UnshareUserns = "unshare-userns" => |_a| kernel::unshare_userns(),
    CloneNewuser = "clone-newuser" => |_a| kernel::clone_newuser(),
    Clone3 = "clone3" => |_a| kernel::clone3(),
    MountTmpfs = "mount-tmpfs" => |a| kernel::mount_tmpfs(arg(a, 0)?),
    MemfdFill = "memfd-fill" => |a| kernel::memfd_fill(arg(a, 0)?),
    MemfdExec = "memfd-exec" => |a| kernel::memfd_exec(arg(a, 0)?),
    // Files.
    Read = "read" => |a| files::read(arg(a, 0)?),
    List = "list" => |a| files::list(arg(a, 0)?),
    Create = "create" => |a| files::create(arg(a, 0)?),
    Write = "write" => |a| files::write(arg(a, 0)?),
    Truncate = "truncate" => |a| files::truncate(arg(a, 0)?),
    Rename = "rename" => |a| files::rename(arg(a, 0)?, arg(a, 1)?),
    Unlink = "unlink" => |a| files::unlink(arg(a, 0)?),
    Mkdir = "mkdir" => |a| files::mkdir(arg(a, 0)?),
    Link = "link" => |a| files::link(arg(a, 0)?, arg(a, 1)?),
    Symlink = "symlink" => |a| files::symlink(arg(a, 0)?, arg(a, 1)?),
    Mknod = "mknod" => |a| files::mknod(arg(a, 0)?),
    Chmod = "chmod" => |a| files::chmod(arg(a, 0)?),
    Chown = "chown" => |a| files::chown(arg(a, 0)?),
    Utime = "utime" => |a| files::utime(arg(a, 0)?),
    Setxattr = "setxattr" => |a| files::setxattr(arg(a, 0)?),
    Exec = "exec" => |a| files::exec(arg(a, 0)?),
    Stat = "stat" => |a| files::stat(arg(a, 0)?),
    Readlink = "readlink" => |a| files::readlink(arg(a, 0)?),
    Getxattr = "getxattr" => |a| files::getxattr(arg(a, 0)?, arg(a, 1)?),
    FileSetattr = "file-setattr" => |a| files::file_setattr(arg(a, 0)?),
    IoctlFlags = "ioctl-flags" => |a| files::ioctl_flags(arg(a, 0)?, arg(a, 1)?),
    OpenByHandle = "open-by-handle" => |a| files::open_by_handle(arg(a, 0)?, arg(a, 1)?),
    // Processes: the server's, this one's privilege, resources, leftovers.
    Kill = "kill" => |a| processes::kill(arg(a, 0)?),
    Ptrace = "ptrace" => |a| processes::ptrace(arg(a, 0)?),
    Tiocsti = "tiocsti" => |_a| processes::tiocsti(),
    Setuid0 = "setuid-0" => |_a| processes::setuid_0(),
    NoNewPrivsOff = "no-new-privs-off" => |_a| processes::no_new_privs_off(),
    SeccompOff = "seccomp-off" => |_a| processes::seccomp_off(),
    CapsHeld = "caps-held" => |a| processes::caps_held(arg(a, 0)?),
    ForkBomb = "fork-bomb" => |a| processes::fork_bomb(arg(a, 0)?.parse().map_err(|_| "bad count")?),
    MemoryBomb = "memory-bomb" => |a| processes::memory_bomb(arg(a, 0)?.parse().map_err(|_| "bad size")?),
    StdoutFlood = "stdout-flood" => |_a| processes::stdout_flood(),
    Env = "env" => |a| processes::env(a),
    SleepMarker = "sleep-marker" => |_a| processes::sleep_marker(),
    Daemon = "daemon" => |a| processes::daemon(a),
    Fork = "fork" => |_a| processes::fork(),
    LeaveTraces = "leave-traces" => |a| processes::leave_traces(arg(a, 0)?),
    FindTraces = "find-traces" => |a| processes::find_traces(arg(a, 0)?),
    // Observation of the host and of other runs.
    ListPids = "list-pids" => |a| observation::list_pids(arg(a, 0)?),
    InotifyWatch = "inotify-watch" => |a| observation::inotify_watch(arg(a, 0)?, arg(a, 1)?),
    FanotifyWatch = "fanotify-watch" => |a| observation::fanotify_watch(arg(a, 0)?),
    Listmount = "listmount" => |_a| observation::list_mounts(),
    Statmount = "statmount" => |a| observation::statmount(arg(a, 0)?),
    UnameNodename = "uname-nodename" => |a| observation::uname_nodename(arg(a, 0)?, arg(a, 1)?),
    // What a draft run may write.
    ReplaceWithSymlink = "replace-with-symlink" => |a| drafts::replace_with_symlink(arg(a, 0)?, arg(a, 1)?),
    SymlinkRenameOver = "symlink-rename-over" => |a| drafts::symlink_rename_over(arg(a, 0)?, arg(a, 1)?),
    Replace = "replace" => |a| drafts::replace(arg(a, 0)?),
    CreateExec = "create-exec" => |a| drafts::create_exec(arg(a, 0)?),
    MknodExec = "mknod-exec" => |a| drafts::mknod_exec(arg(a, 0)?),
    Fallocate = "fallocate" => |a| drafts::fallocate(arg(a, 0)?, arg(a, 1)?, arg(a, 2)?),
    RenameWhiteout = "rename-whiteout" => |a| drafts::rename_whiteout(arg(a, 0)?, arg(a, 1)?),
    // The run's temp folder.
    WriteTmpdir = "write-tmpdir" => |_a| tmpdir::write_tmpdir(),
    DeepTmpdir = "deep-tmpdir" => |a| tmpdir::deep_tmpdir(arg(a, 0)?, arg(a, 1)?),
    FillSize = "fill-size" => |a| tmpdir::fill_size(arg(a, 0)?),
    FillInodes = "fill-inodes" => |a| tmpdir::fill_inodes(arg(a, 0)?),
    TmpdirPath = "tmpdir-path" => |_a| tmpdir::tmpdir_path(),
    ExecTmpdir = "exec-tmpdir" => |a| tmpdir::exec_tmpdir(arg(a, 0)?),
    ExecLoader = "exec-loader" => |a| tmpdir::exec_loader(arg(a, 0)?),
    MmapExecTmpdir = "mmap-exec-tmpdir" => |_a| tmpdir::mmap_exec_tmpdir(),
}

/// Entry point of `__probe-attempt`.
pub(crate) fn run(name: &str, args: &[String]) -> u8 {
    if name == "serve-one-call" {
        return super::serve_one_call(args);
    }
    let (name, userns) = match name.strip_prefix("userns:") {
        Some(n) => (n, true),
        None => (name, false),
    };
    let attempt = |name: &str| match Attempt::from_word(name) {
        Some(a) => a.run(args),
        None => Err(format!("unknown attempt {name}")),
    };
    let outcome = if userns {
        enter_bare_userns().and_then(|()| attempt(name))
    } else {
        attempt(name)
    };
    print_report(outcome)
}

/// Become uid 0 with every capability in fresh user, network and mount
/// namespaces (the privileged positive control).
fn enter_bare_userns() -> Result<(), String> {
    // SAFETY: plain id getters and unshare.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    check(
        // SAFETY: unshare takes flags only.
        unsafe { libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET | libc::CLONE_NEWNS) } as _,
    )
    .map_err(|e| format!("control: unshare {e}"))?;
    let w = |p: &str, t: String| std::fs::write(p, t).map_err(|e| format!("control: {p}: {e}"));
    w("/proc/self/setgroups", "deny".into())?;
    w("/proc/self/uid_map", format!("0 {uid} 1\n"))?;
    w("/proc/self/gid_map", format!("0 {gid} 1\n"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_attempt_has_one_word_and_is_found_by_it() {
        let mut words = std::collections::BTreeSet::new();
        for a in Attempt::ALL {
            assert!(words.insert(a.word()), "{a:?}: {} twice", a.word());
            assert_eq!(Attempt::from_word(a.word()), Some(*a));
            assert!(!a.word().starts_with("userns:"), "{a:?}");
        }
        assert_eq!(Attempt::from_word("serve-one-call"), None);
        assert_eq!(Attempt::from_word("no-such-attempt"), None);
    }
}
