//! The suite: every attempt the probe makes, with its arguments, what the
//! inside run must answer, the layers that hold it and how its truth is
//! established, in report order.

use std::path::PathBuf;

use super::attempts::{self, Attempt as A};
use super::fixture::{Fixture, PLANTED_ENV};
use super::model::{spec, Reported, Stopper, Trigger, Truth, Which};
use super::Spec;

/// Where the report's checks connect: TEST-NET-1 (RFC 5737), never routed.
const REPORT_DESTINATION: &str = "192.0.2.1:443";
/// What they look up: under `.invalid` (RFC 2606), never resolvable.
const REPORT_NAME: &str = "reachweaver-probe.invalid";
/// How many connects race the thread that swaps their address.
const SWAP_CONNECTS: u32 = 200;
/// How many distinct connects the flood makes: past the report's bound.
const REPORT_FLOOD: u64 = crate::sandbox::denied::MAX_ENTRIES as u64 + 8;

impl Fixture {
    /// The suite, in report order.
    pub(super) fn specs(&self, server_pid: u32, caps_bounding: bool) -> Vec<Spec> {
        use crate::sandbox::Layer::*;
        use Stopper::*;
        let s = Self::s;
        let mut v = vec![
            // Sanity: what a backend legitimately needs still works.
            spec(
                "allowed-read-root",
                A::Read,
                vec![s(&self.root.join("sub/inside.txt"))],
                "",
                &[],
            )
            .allowed(),
            spec("allowed-list-root", A::List, vec![s(&self.root)], "", &[]).allowed(),
            spec("allowed-read-db", A::Read, vec![s(&self.db)], "", &[]).allowed(),
            spec("allowed-write-tmpdir", A::WriteTmpdir, vec![], "", &[]).allowed(),
            spec(
                "allowed-socketpair-stream",
                A::Socketpair,
                vec!["stream".into()],
                "",
                &[],
            )
            .allowed(),
            spec("allowed-start-child", A::Fork, vec![], "", &[]).allowed(),
            // The draft kind may write the database's folder, and nothing more.
            spec(
                "allowed-draft-writes-db-journal",
                A::Create,
                vec![format!("{}-journal", s(&self.db))],
                "",
                &[],
            )
            .allowed()
            .draft(),
            // Network. A watched run's supervisor answers a connect as the
            // empty network namespace would (ENETUNREACH) and records it;
            // an unwatched run's seccomp refuses the socket (EPERM).
            spec(
                "tcp-connect-127.0.0.1",
                A::TcpConnect,
                vec![self.net.tcp4.to_string()],
                "ENETUNREACH|EPERM",
                &[Layer(Seccomp), Layer(LandlockTcp), Layer(Netns)],
            )
            .truth(Truth::Listener(Which::Tcp4)),
            spec(
                "tcp-connect-::1",
                A::TcpConnect,
                vec![self.net.tcp6.to_string()],
                "ENETUNREACH|EPERM",
                &[Layer(Seccomp), Layer(LandlockTcp), Layer(Netns)],
            )
            .truth(Truth::Listener(Which::Tcp6)),
            spec(
                "udp-send-127.0.0.1",
                A::UdpSend,
                vec![self.net.udp.to_string()],
                "EPERM",
                &[Layer(Seccomp), Layer(Netns)],
            )
            .truth(Truth::Listener(Which::Udp)),
            spec(
                "mptcp-connect-127.0.0.1",
                A::MptcpConnect,
                vec![self.net.tcp4.to_string()],
                "ENETUNREACH|EPERM",
                &[Layer(Seccomp), Layer(Netns)],
            )
            .truth(Truth::Listener(Which::Tcp4)),
            spec(
                "dns-lookup-localhost",
                A::DnsLookup,
                vec!["localhost".into()],
                "EAI_",
                &[Layer(Landlock), Layer(Mountns)],
            ),
            // The run's report names what it tried (TEST-NET-1 and a name
            // under a reserved domain: nothing real is ever asked for).
            spec(
                "report-names-a-connect",
                A::TcpConnect,
                vec![REPORT_DESTINATION.into()],
                "",
                &[],
            )
            .allowed()
            .truth(Truth::Denied(Reported::Destination(
                REPORT_DESTINATION.into(),
            ))),
            spec(
                "report-names-a-lookup",
                A::DnsLookup,
                vec![REPORT_NAME.into()],
                "",
                &[],
            )
            .allowed()
            .truth(Truth::Denied(Reported::Lookup(REPORT_NAME.into()))),
            spec(
                "report-bounds-a-flood",
                A::ConnectMany,
                vec!["192.0.2.1".into(), REPORT_FLOOD.to_string()],
                "",
                &[],
            )
            .allowed()
            .truth(Truth::Denied(Reported::Flood(REPORT_FLOOD))),
            spec(
                "report-names-an-unlisted-call",
                A::UnlistedCall,
                vec![],
                "",
                &[],
            )
            .allowed()
            .truth(Truth::Denied(Reported::Syscall {
                call: "personality".into(),
                answer: "ENOSYS".into(),
            })),
            // What the supervisor reads of a connect's address may be
            // rewritten by another thread before the kernel would read it:
            // the swap changes nothing the other layers hold (the empty
            // network namespace; no connect is let through to go on).
            spec(
                "connect-with-swapped-address",
                A::ConnectSwapped,
                vec![self.net.tcp4.to_string(), SWAP_CONNECTS.to_string()],
                "ENETUNREACH|EPERM",
                &[Layer(Seccomp), Layer(LandlockTcp), Layer(Netns)],
            )
            .truth(Truth::Listener(Which::Tcp4)),
            spec(
                "socket-raw-icmp",
                A::Socket,
                vec!["raw".into()],
                "EPERM",
                &[Layer(Seccomp), Layer(Caps), Layer(Userns)],
            )
            .in_userns(),
            spec(
                "socket-packet",
                A::Socket,
                vec!["packet".into()],
                "EPERM",
                &[Layer(Seccomp), Layer(Caps), Layer(Userns)],
            )
            .in_userns(),
            spec(
                "socket-netlink",
                A::Socket,
                vec!["netlink".into()],
                "EPERM",
                &[Layer(Seccomp)],
            ),
            spec(
                "socket-vsock",
                A::Socket,
                vec!["vsock".into()],
                "EPERM",
                &[Layer(Seccomp)],
            ),
            spec(
                "abstract-unix-connect",
                A::AbstractConnect,
                vec![self.net.abstract_name.clone()],
                "EPERM",
                &[Layer(Seccomp), Layer(LandlockScope), Layer(Netns)],
            )
            .truth(Truth::Listener(Which::Abstract)),
            spec(
                "host-unix-connect",
                A::UnixConnect,
                vec![s(&self.net.host_sock)],
                "EPERM",
                &[Layer(Seccomp), LandlockUnix, Layer(Mountns)],
            )
            .truth(Truth::Listener(Which::Unix)),
            spec(
                "socketpair-dgram",
                A::Socketpair,
                vec!["dgram".into()],
                "EPERM",
                &[Layer(Seccomp)],
            ),
            spec(
                "socketpair-seqpacket",
                A::Socketpair,
                vec!["seqpacket".into()],
                "EPERM",
                &[Layer(Seccomp)],
            ),
            // Kernel surface.
            spec(
                "io-uring-setup",
                A::IoUringSetup,
                vec![],
                "EPERM",
                &[Layer(Seccomp)],
            ),
            spec(
                "x32-syscall",
                A::X32Syscall,
                vec![],
                "SIGSYS",
                &[Layer(Seccomp)],
            ),
            spec(
                "unshare-userns",
                A::UnshareUserns,
                vec![],
                "EPERM",
                &[Layer(Seccomp), NsLimits],
            ),
            spec(
                "clone-newuser",
                A::CloneNewuser,
                vec![],
                "EPERM",
                &[Layer(Seccomp), NsLimits],
            ),
            spec("clone3", A::Clone3, vec![], "ENOSYS", &[Layer(Seccomp)]),
            spec(
                "mount-tmpfs",
                A::MountTmpfs,
                vec![s(&self.root.join("mnt"))],
                "EPERM",
                &[Layer(Seccomp), Layer(Userns)],
            )
            .in_userns(),
            // Reading outside the root.
            spec(
                "read-outside-root",
                A::Read,
                vec![s(&self.outside.join("secret.txt"))],
                "ENOENT|EACCES",
                &[Layer(Landlock), Layer(Mountns)],
            ),
            spec(
                "list-outside-root",
                A::List,
                vec![s(&self.outside)],
                "ENOENT|EACCES",
                &[Layer(Landlock), Layer(Mountns)],
            ),
            spec(
                "read-symlink-out-of-root",
                A::Read,
                vec![s(&self.root.join("link-out"))],
                "ENOENT|EACCES",
                &[Layer(Landlock), Layer(Mountns)],
            ),
            spec(
                "read-dotdot-out-of-root",
                A::Read,
                vec![s(&self.root.join("../outside/secret.txt"))],
                "ENOENT|EACCES",
                &[Layer(Landlock), Layer(Mountns)],
            ),
            spec(
                "exec-outside-runtime",
                A::Exec,
                vec![s(&self.outside.join("true"))],
                "ENOENT|EACCES",
                &[Layer(Landlock), Layer(Mountns)],
            ),
            spec(
                "write-database",
                A::Write,
                vec![s(&self.db)],
                "EROFS|EACCES",
                &[Layer(Landlock), Layer(Mountns)],
            )
            .truth(Truth::Files),
            spec(
                "draft-create-in-root",
                A::Create,
                vec![s(&self.root.join("new.txt"))],
                "EROFS|EACCES",
                &[Layer(Landlock), Layer(Mountns)],
            )
            .truth(Truth::Files)
            .draft(),
            spec(
                "draft-create-in-home",
                A::Create,
                vec![s(&self.home.join("new.txt"))],
                "EROFS|EACCES",
                &[Layer(Landlock), Layer(Mountns)],
            )
            .truth(Truth::Files)
            .draft(),
        ];
        for (place, dir) in [
            ("root", &self.root),
            ("home", &self.home),
            ("outside", &self.outside),
        ] {
            let victim = s(&dir.join("victim.txt"));
            let ops: [(&str, A, Vec<String>); 8] = [
                ("create", A::Create, vec![s(&dir.join("new.txt"))]),
                ("write", A::Write, vec![victim.clone()]),
                ("truncate", A::Truncate, vec![victim.clone()]),
                (
                    "rename",
                    A::Rename,
                    vec![victim.clone(), s(&dir.join("renamed.txt"))],
                ),
                ("unlink", A::Unlink, vec![victim.clone()]),
                ("mkdir", A::Mkdir, vec![s(&dir.join("newdir"))]),
                (
                    "link",
                    A::Link,
                    vec![victim.clone(), s(&dir.join("hardlink.txt"))],
                ),
                ("mknod", A::Mknod, vec![s(&dir.join("fifo"))]),
            ];
            for (op, attempt, args) in ops {
                v.push(
                    spec(
                        format!("{op}-in-{place}"),
                        attempt,
                        args,
                        // The read-only bind answers first (or, outside
                        // every grant, there is nothing there); Landlock
                        // behind it.
                        match (place == "outside", op == "mknod") {
                            (true, false) => "ENOENT|EACCES",
                            (false, false) => "EROFS|EACCES",
                            // Seccomp refuses mknod before any path is looked at.
                            (true, true) => "EPERM|ENOENT|EACCES",
                            (false, true) => "EPERM|EROFS|EACCES",
                        },
                        match op {
                            "mknod" => &[Layer(Seccomp), Layer(Landlock), Layer(Mountns)],
                            // Landlock judges truncate(2) from ABI 3;
                            // seccomp refuses it below.
                            "truncate" => &[LandlockTruncate, SeccompTruncate, Layer(Mountns)],
                            _ => &[Layer(Landlock), Layer(Mountns)],
                        },
                    )
                    .truth(Truth::Files),
                );
            }
        }
        // Metadata changes Landlock does not cover: seccomp refuses them, and
        // a host file outside the grant isn't there to change.
        let host_file = s(&self.outside.join("victim.txt"));
        for attempt in [A::Chmod, A::Chown, A::Utime, A::Setxattr] {
            v.push(
                spec(
                    format!("{attempt}-host-file"),
                    attempt,
                    vec![host_file.clone()],
                    "EPERM|ENOENT",
                    &[Layer(Seccomp), Layer(Mountns)],
                )
                .truth(Truth::Files),
            );
        }
        v.extend([
            // The server process. Its environ also needs ptrace-read access,
            // which a process in another user namespace, without
            // capabilities there, doesn't have.
            spec(
                "read-server-environ",
                A::Read,
                vec![format!("/proc/{server_pid}/environ")],
                "ENOENT|EACCES",
                &[Layer(Landlock), Layer(Userns), Layer(Mountns)],
            ),
            spec(
                "read-server-cmdline",
                A::Read,
                vec![format!("/proc/{server_pid}/cmdline")],
                "ENOENT|EACCES",
                &[Layer(Landlock), Layer(Userns), Layer(Mountns)],
            ),
            spec(
                "kill-server",
                A::Kill,
                vec![server_pid.to_string()],
                "ESRCH",
                &[Layer(Pidns), Layer(LandlockScope)],
            ),
            spec(
                "ptrace-server",
                A::Ptrace,
                vec![server_pid.to_string()],
                "EPERM",
                &[Layer(Seccomp), Layer(Pidns), Layer(Landlock)],
            ),
            spec(
                "tiocsti-terminal",
                A::Tiocsti,
                vec![],
                "EPERM",
                &[Layer(Seccomp)],
            )
            .truth(Truth::Tty),
            // Privilege.
            spec(
                "setuid-0",
                A::Setuid0,
                vec![],
                "EINVAL|EPERM",
                &[Layer(Userns), CapsUnprivileged],
            )
            .in_userns(),
            spec(
                "no-new-privs-off",
                A::NoNewPrivsOff,
                vec![],
                "NoNewPrivs=1",
                &[Helper],
            ),
            spec(
                "seccomp-off",
                A::SeccompOff,
                vec![],
                "Seccomp=2",
                &[Layer(Seccomp)],
            ),
            // Where the run can't hold CAP_SETPCAP (an ordinary user without
            // user namespaces) the bounding set stays and is not checked:
            // with every other set empty and no_new_privs, it grants nothing.
            spec(
                "caps-held",
                A::CapsHeld,
                vec![if caps_bounding { "all" } else { "sets" }.into()],
                "CapEff=0 CapPrm=0 CapInh=0 CapBnd=0 CapAmb=0|CapEff=0 CapPrm=0 CapInh=0",
                &[Layer(Caps)],
            ),
            // Resources and lifetime.
            spec(
                "fork-bomb",
                A::ForkBomb,
                vec!["600".into()],
                "EAGAIN",
                FORK_BOMB_HOLDERS,
            ),
            spec(
                "memory-bomb",
                A::MemoryBomb,
                vec!["8".into()],
                "ENOMEM",
                &[Layer(Rlimits)],
            ),
            spec(
                "stdout-flood",
                A::StdoutFlood,
                vec![],
                "contained",
                &[Helper],
            )
            .truth(Truth::Flood),
            spec(
                "daemon-outlives-call",
                A::Daemon,
                vec![],
                "gone",
                &[Layer(Pidns), Subreaper],
            )
            .truth(Truth::Daemon),
            spec(
                "next-call-sees-nothing",
                A::FindTraces,
                vec![],
                "none",
                // Each run's own TMPDIR (a tmpfs, or a host folder removed
                // with it), IPC and PID namespaces and minimal root.
                &[Layer(Mountns), Layer(Pidns), Helper],
            )
            .truth(Truth::NextCall),
            spec(
                "run-outlives-killed-server",
                A::SleepMarker,
                vec![],
                "gone",
                // The run's init dies with its parent (the parent-death
                // signal every helper arms) and takes the namespace along.
                &[Layer(Pidns), Helper],
            )
            .truth(Truth::OutliveParent),
            spec(
                "loader-and-secret-env",
                A::Env,
                PLANTED_ENV.iter().map(|(n, _)| n.to_string()).collect(),
                "absent",
                &[Helper],
            ),
        ]);
        v.extend(self.second_generation(server_pid));
        v
    }

    /// The classes an independent review got through: grants a draft run
    /// can replace, the run's temp folder, host metadata, memory outside
    /// RLIMIT_AS, observation of the host, execution outside the runtime.
    pub(super) fn second_generation(&self, server_pid: u32) -> Vec<Spec> {
        use crate::sandbox::Layer::*;
        use Stopper::*;
        let s = Self::s;
        let db = s(&self.db);
        let db_dir = self.db.parent().unwrap_or(&self.home).to_path_buf();
        let beside = s(&db_dir.join("accounts.yaml"));
        let planted = s(&db_dir.join("planted-link"));
        let prog = s(&self.root.join("tools/true"));
        let tmp = s(&self.tmp_base);
        let tmp_marker = self.marker();
        let server_home = std::env::var_os("HOME")
            .map(PathBuf::from)
            .filter(|h| h.is_absolute() && h.is_dir())
            .unwrap_or_else(|| PathBuf::from("/root"));
        let host_mount = attempts::listmount()
            .ok()
            .and_then(|ids| ids.first().copied())
            .unwrap_or(0);
        let (host_node, host_domain) =
            crate::sandbox::linux::namespaces::uts_names().unwrap_or_default();
        let run_names = format!(
            "nodename {} domainname {}",
            crate::sandbox::linux::namespaces::RUN_HOSTNAME,
            crate::sandbox::linux::namespaces::RUN_DOMAINNAME
        );
        // Twice the file-size limit.
        let reserve_mib = (crate::sandbox::policy::Rlimits::default().file_size >> 20) * 2;
        vec![
            // Grants: the draft run may write the database (and SQLite's
            // companions), nothing else in its folder.
            spec(
                "draft-db-replaced-by-symlink",
                A::ReplaceWithSymlink,
                vec![db.clone(), "/".into()],
                "EBUSY",
                &[Layer(Mountns)],
            )
            .truth(Truth::Files)
            .draft(),
            spec(
                "draft-db-symlink-renamed-over",
                A::SymlinkRenameOver,
                vec![db.clone(), "/".into()],
                "EACCES",
                &[Layer(Landlock), Layer(Mountns)],
            )
            .truth(Truth::Files)
            .draft(),
            spec(
                "draft-symlink-in-db-folder",
                A::Symlink,
                vec!["/".into(), s(&db_dir.join("escape"))],
                "EACCES|nothing left",
                &[Layer(Landlock), Helper],
            )
            .truth(Truth::FilesAfter)
            .draft(),
            spec(
                "draft-mkdir-in-db-folder",
                A::Mkdir,
                vec![s(&db_dir.join("newdir"))],
                "EACCES|nothing left",
                &[Layer(Landlock), Helper],
            )
            .truth(Truth::FilesAfter)
            .draft(),
            spec(
                "draft-fifo-in-db-folder",
                A::Mknod,
                vec![s(&db_dir.join("fifo"))],
                "EPERM|EACCES|nothing left",
                &[Layer(Seccomp), Layer(Landlock), Helper],
            )
            .truth(Truth::FilesAfter)
            .draft(),
            spec(
                "draft-other-file-in-db-folder",
                A::Create,
                vec![s(&db_dir.join("other.txt"))],
                "nothing left",
                &[Helper],
            )
            .truth(Truth::FilesAfter)
            .draft(),
            spec(
                "draft-rename-beside-db",
                A::Rename,
                vec![beside.clone(), format!("{beside}.bak")],
                "EBUSY",
                &[Layer(Mountns)],
            )
            .truth(Truth::Files)
            .draft(),
            spec(
                "draft-replace-beside-db",
                A::Replace,
                vec![beside.clone()],
                "EBUSY",
                &[Layer(Mountns)],
            )
            .truth(Truth::Files)
            .draft(),
            spec(
                "draft-write-beside-db",
                A::Write,
                vec![beside.clone()],
                "EROFS",
                &[Layer(Mountns)],
            )
            .truth(Truth::Files)
            .draft(),
            spec(
                "draft-executable-in-db-folder",
                A::CreateExec,
                vec![s(&db_dir.join("tool"))],
                "EPERM|no executable left",
                &[Layer(Seccomp), Helper],
            )
            .truth(Truth::ExecBits(db_dir.join("tool")))
            .draft(),
            spec(
                "draft-mknod-exec-companion",
                A::MknodExec,
                vec![format!("{db}-wal")],
                "EPERM|no executable left",
                &[Layer(Seccomp), Helper],
            )
            .truth(Truth::ExecBits(PathBuf::from(format!("{db}-wal"))))
            .draft(),
            // Disk and devices: a draft run's database grows within the
            // file-size limit, and no device appears in its folder.
            spec(
                "allowed-draft-fallocate-db",
                A::Fallocate,
                vec![db.clone(), "plain".into(), "1".into()],
                "",
                &[],
            )
            .allowed()
            .draft(),
            spec(
                "draft-fallocate-keep-size",
                A::Fallocate,
                vec![db.clone(), "keep-size".into(), reserve_mib.to_string()],
                "EOPNOTSUPP",
                &[Layer(Seccomp)],
            )
            .truth(Truth::Reserved(self.db.clone()))
            .draft(),
            spec(
                "draft-rename-whiteout",
                A::RenameWhiteout,
                vec![format!("{db}-journal"), format!("{db}-wal")],
                "EPERM|nothing left",
                // The clean-up removes anything under a companion's name
                // that is not a plain file.
                &[Layer(Seccomp), Helper],
            )
            .truth(Truth::FilesAfter)
            .draft(),
            // A later read-only run must not follow what was planted.
            spec("allowed-read-beside-db", A::Read, vec![beside], "", &[]).allowed(),
            spec(
                "read-through-planted-symlink",
                A::Read,
                vec![planted.clone()],
                "ENOENT|EACCES",
                &[Layer(Landlock), Layer(Mountns)],
            ),
            spec(
                "stat-through-planted-symlink",
                A::Stat,
                vec![planted],
                "ENOENT",
                &[Layer(Mountns)],
            ),
            // The run's temp folder.
            spec(
                "tmpdir-deep-chain",
                A::DeepTmpdir,
                vec!["1100".into(), self.marker()],
                "cleaned up",
                &[Tmpfs, Helper],
            )
            .truth(Truth::DeepTmp),
            spec(
                "tmpdir-size-cap",
                A::FillSize,
                vec!["1024".into()],
                "ENOSPC",
                &[Tmpfs],
            ),
            // Twice the run's tmpfs inode cap (4,096): enough to meet it,
            // few enough that the control on the host, which creates them
            // all, is done well within its time on a busy machine.
            spec(
                "tmpdir-inode-cap",
                A::FillInodes,
                vec!["8192".into()],
                "ENOSPC",
                &[Tmpfs],
            ),
            spec(
                "tmpdir-name-carries-server-pid",
                A::TmpdirPath,
                vec![],
                "no server pid",
                &[Layer(Mountns), Helper],
            )
            .truth(Truth::NoServerPid(server_pid)),
            // Metadata of host files.
            spec(
                "file-setattr-host-file",
                A::FileSetattr,
                vec![s(&self.outside.join("victim.txt"))],
                "ENOSYS",
                &[Layer(Seccomp), Layer(Mountns)],
            )
            .truth(Truth::Files),
            spec(
                "ioctl-setflags-read-only-fd",
                A::IoctlFlags,
                vec!["setflags".into(), s(&self.root.join("victim.txt"))],
                "ENOTTY",
                &[Layer(Seccomp), Layer(Mountns)],
            )
            .truth(Truth::Files),
            spec(
                "ioctl-fssetxattr-read-only-fd",
                A::IoctlFlags,
                vec!["fssetxattr".into(), s(&self.root.join("victim.txt"))],
                "ENOTTY",
                &[Layer(Seccomp), Layer(Mountns)],
            )
            .truth(Truth::Files),
            spec(
                "ioctl-ext4-setversion-read-only-fd",
                A::IoctlFlags,
                vec!["setversion".into(), s(&self.root.join("victim.txt"))],
                "ENOTTY",
                &[Layer(Seccomp), Layer(Mountns)],
            )
            .truth(Truth::Files),
            // Memory and code outside RLIMIT_AS and the runtime.
            spec(
                "memfd-outside-rlimit-as",
                A::MemfdFill,
                vec!["1024".into()],
                "ENOSYS",
                &[Layer(Seccomp)],
            ),
            spec(
                "memfd-exec",
                A::MemfdExec,
                vec![prog.clone()],
                "ENOSYS|EACCES",
                // Landlock's execute right is about files beneath a folder;
                // a memfd is beneath none.
                &[Layer(Seccomp), MemfdNoexec],
            ),
            // Observation outside the grant.
            spec(
                "inotify-system-tmp",
                A::InotifyWatch,
                vec![tmp.clone(), tmp_marker.clone()],
                "ENOSYS|no event",
                &[Layer(Seccomp), Layer(Mountns)],
            )
            .truth(Truth::Watch(Trigger::Create(
                self.tmp_base.join(&tmp_marker),
            ))),
            spec(
                "inotify-etc",
                A::InotifyWatch,
                vec!["/etc".into(), "passwd".into()],
                "ENOSYS|no event",
                &[Layer(Seccomp), Layer(Mountns)],
            )
            .truth(Truth::Watch(Trigger::Open("/etc/passwd".into()))),
            // Other runs: the root is the same inodes in every run, so a
            // watch there would see what a concurrent run (here, the probe)
            // opens.
            spec(
                "inotify-shared-root",
                A::InotifyWatch,
                vec![s(&self.root), "victim.txt".into()],
                "ENOSYS",
                &[Layer(Seccomp)],
            )
            .truth(Truth::Watch(Trigger::Open(self.root.join("victim.txt")))),
            spec(
                "fanotify-outside",
                A::FanotifyWatch,
                vec![s(&self.outside)],
                "ENOSYS|ENOENT",
                &[Layer(Seccomp), Layer(Mountns)],
            ),
            spec(
                "getxattr-outside-file",
                A::Getxattr,
                vec![
                    s(&self.outside.join("secret.txt")),
                    "user.reachweaver-probe".into(),
                ],
                "ENOENT",
                &[Layer(Mountns)],
            ),
            spec(
                "stat-etc-hostname",
                A::Stat,
                vec!["/etc/hostname".into()],
                "ENOENT",
                &[Layer(Mountns)],
            ),
            spec(
                "uname-nodename",
                A::UnameNodename,
                vec![host_node, host_domain],
                &run_names,
                &[Layer(Utsns)],
            ),
            spec(
                "stat-outside-file",
                A::Stat,
                vec![s(&self.outside.join("secret.txt"))],
                "ENOENT",
                &[Layer(Mountns)],
            ),
            spec(
                "stat-server-home",
                A::Stat,
                vec![s(&server_home)],
                "ENOENT|only the run's own file",
                &[Layer(Mountns)],
            )
            .truth(Truth::HostFile(server_home.clone())),
            spec(
                "readlink-outside",
                A::Readlink,
                vec![s(&self.outside.join("alias"))],
                "ENOENT",
                &[Layer(Mountns)],
            ),
            spec(
                "listmount-host-mounts",
                A::Listmount,
                vec![],
                "ENOSYS",
                &[Layer(Seccomp), Layer(Mountns)],
            )
            .truth(Truth::HostMounts),
            spec(
                "statmount-host-mount",
                A::Statmount,
                vec![host_mount.to_string()],
                "ENOSYS",
                &[Layer(Seccomp), Layer(Mountns)],
            ),
            spec(
                "stat-proc-server",
                A::Stat,
                vec![format!("/proc/{server_pid}")],
                "ENOENT",
                &[Layer(Mountns)],
            ),
            spec(
                "list-proc",
                A::ListPids,
                vec!["/proc".into()],
                "EACCES|ENOENT|only the run's own",
                &[Layer(Landlock), Layer(Mountns)],
            )
            .truth(Truth::ProcHidesServer(server_pid)),
            // Execution outside the runtime.
            spec(
                "exec-from-tmpdir",
                A::ExecTmpdir,
                vec![prog.clone()],
                "EPERM|EACCES",
                &[Layer(Seccomp), Layer(Landlock), Noexec],
            ),
            spec(
                "exec-via-loader-from-tmpdir",
                A::ExecLoader,
                vec![prog],
                "exit 127",
                &[Noexec],
            ),
            spec(
                "mmap-exec-tmpdir",
                A::MmapExecTmpdir,
                vec![],
                "EPERM",
                &[Noexec],
            ),
            // Host files by handle, past every path check.
            spec(
                "open-by-handle-outside",
                A::OpenByHandle,
                vec![s(&self.outside.join("secret.txt")), s(&self.root)],
                "ENOSYS|EPERM|ENOENT",
                &[Layer(Seccomp), Layer(Caps), Layer(Mountns)],
            ),
        ]
    }
}

/// RLIMIT_NPROC (not for root), a PID namespace's own pid_max, and pids.max
/// in the run's own cgroup each refuse the fork past their bound.
pub(super) const FORK_BOMB_HOLDERS: &[Stopper] = &[
    Stopper::Nproc,
    Stopper::Layer(crate::sandbox::Layer::PidMax),
    Stopper::Layer(crate::sandbox::Layer::Cgroup),
];
