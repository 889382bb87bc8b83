//! `sandbox probe`: try every escape we know of, inside the same sandbox a
//! tool call gets, and say what the kernel answered.
//!
//! Each attempt runs twice: first outside the sandbox as a positive control
//! (it must work there, or the line says the attempt proves nothing), then
//! inside it, as the server binary's hidden `__probe-attempt` command under
//! the read-only policy. The probe doesn't take the attempt's word for it:
//! it runs its own listeners on loopback (TCP on 127.0.0.1 and ::1, UDP, a
//! unix socket outside the root, an abstract unix socket) and counts what
//! reaches them, fingerprints the files before and after, watches the
//! terminal's input queue and looks for marker processes that outlived
//! their run.
//!
//! Every attempt names the layers that hold it on this kernel ("holders").
//! With `--without LAYER` the probe predicts which attempts must now get
//! through (those held by that layer alone) and the layer matrix test
//! checks the prediction against what happened, so the table in
//! `sandbox/LAYERS.md` is tested, not just written.

pub(super) mod attempts;
mod cleanup;
pub(super) mod host_attempts;
mod junit;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Serialize;

use super::policy::Layers;
use super::{Layer, RunKind, Sandbox, SandboxOptions};
use crate::sandbox::SandboxMode;

/// A layer (or mechanism) that stops an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum Holder {
    Seccomp,
    Landlock,
    LandlockTcp,
    LandlockScope,
    /// Landlock's pathname unix-socket right (ABI 9).
    LandlockUnix,
    Netns,
    Caps,
    /// The run's user namespace: uid 0 is unmapped, the run is not root
    /// there, and the host's mount namespace isn't its own.
    Userns,
    /// The namespace counters set to 0.
    NsLimits,
    /// The run's PID namespace with `vm.memfd_noexec` = 2, which only a
    /// server running as root can set (the file belongs to the host's root).
    MemfdNoexec,
    Pidns,
    PidMax,
    /// RLIMIT_NPROC (the kernel exempts real root).
    Nproc,
    Rlimits,
    /// What the helper does whatever the layers: the built environment,
    /// no_new_privs, the kill path.
    Helper,
    /// Without a PID namespace, the re-executed helper is the run's child
    /// subreaper and kills every process the run leaves behind.
    Subreaper,
    /// Capabilities dropped, for a run that is not uid 0: `setuid(0)`
    /// needs CAP_SETUID. A root server's run without a user namespace is
    /// uid 0 already (with no capability), which this can't change.
    CapsUnprivileged,
    /// The run's own mount namespace with a minimal root: only the granted
    /// paths exist, read-only except the draft run's database folder; no
    /// host mount and no `/proc` of the host is visible.
    Mountns,
    /// The run's TMPDIR is its own tmpfs, capped in size and inodes, gone
    /// with the run's mount namespace.
    Tmpfs,
    /// The run's TMPDIR is mounted noexec: nothing there can be executed
    /// or mapped executable, not even through the dynamic loader.
    Noexec,
    /// The run's UTS namespace with its fixed host and domain name.
    Utsns,
}

impl Holder {
    /// The entry of the one layer list this holder is part of; `None` for
    /// what the server does whatever the layers.
    fn layer(self) -> Option<&'static str> {
        Some(match self {
            Holder::Seccomp => "seccomp",
            Holder::Landlock | Holder::LandlockUnix => "landlock",
            Holder::LandlockTcp => "landlock_tcp",
            Holder::LandlockScope => "landlock_scope",
            Holder::Netns => "netns",
            Holder::Caps | Holder::CapsUnprivileged => "caps",
            Holder::Userns | Holder::NsLimits => "userns",
            Holder::Pidns | Holder::MemfdNoexec => "pidns",
            Holder::PidMax => "pid_max",
            Holder::Nproc | Holder::Rlimits => "rlimits",
            Holder::Mountns | Holder::Tmpfs | Holder::Noexec => "mountns",
            Holder::Utsns => "utsns",
            Holder::Helper | Holder::Subreaper => return None,
        })
    }

    fn active(self, l: &Layers, uid: u32) -> bool {
        match self {
            Holder::Helper => true,
            // Parts of a layer that are there only with more of it.
            Holder::LandlockUnix => l.landlock_abi.is_some_and(|a| a >= 9),
            Holder::NsLimits => l.ns_limits,
            Holder::Nproc => l.rlimits && uid != 0,
            Holder::MemfdNoexec => l.pidns && uid == 0,
            Holder::Subreaper => !l.pidns,
            Holder::CapsUnprivileged => l.caps && uid != 0,
            other => other.layer().is_some_and(|name| l.names().contains(&name)),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Control {
    /// A plain child of the probe.
    Host,
    /// A child in a bare user+net+mount namespace with every capability.
    Userns,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Truth {
    /// Only the attempt's own report.
    Report,
    Listener(Which),
    /// The fixture files must be unchanged.
    Files,
    /// The fixture files must be unchanged once the run is over, whatever
    /// the attempt saw while it ran (a draft run's new file in the
    /// database's folder is removed by the server when the run ends).
    FilesAfter,
    /// The terminal's input queue must stay empty.
    Tty,
    Flood,
    Daemon,
    OutliveParent,
    /// A first call leaves traces (`leave-traces`); the attempt is the next
    /// call, which must see none of them.
    NextCall,
    /// The file the attempt created must not have an execute bit.
    ExecBits(PathBuf),
    /// A folder chain left in TMPDIR must neither outlive the run nor take
    /// the server (a stand-in process) down while it is cleaned up.
    DeepTmp,
    /// The reported TMPDIR must not contain the server's pid.
    NoServerPid(u32),
    /// The listed processes must not include the server (the run's own
    /// `proc` shows the run's processes only).
    ProcHidesServer(u32),
    /// The attempt watches a host folder while the probe touches a file
    /// there; seeing it is getting through.
    Watch(Trigger),
    /// The mount ids the attempt lists must not include the host's.
    HostMounts,
    /// Once the run is over this file must hold no more disk than the
    /// run's file-size limit. The control reserves in a scratch file of its
    /// own instead (its first argument replaced).
    Reserved(PathBuf),
}

/// What the probe does on the host while a watching attempt runs.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Trigger {
    /// Create and remove this file.
    Create(PathBuf),
    /// Open this file for reading.
    Open(PathBuf),
}

impl Trigger {
    fn fire(&self) {
        match self {
            Trigger::Create(p) => {
                let _ = std::fs::write(p, b"probe");
                let _ = std::fs::remove_file(p);
            }
            Trigger::Open(p) => {
                let _ = std::fs::File::open(p);
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Which {
    Tcp4,
    Tcp6,
    Udp,
    Unix,
    Abstract,
}

struct Spec {
    name: String,
    attempt: &'static str,
    args: Vec<String>,
    control: Control,
    /// What the inside run must report (a prefix); for allowed attempts,
    /// "ok".
    expect: String,
    holders: Vec<Holder>,
    truth: Truth,
    /// A sanity check that must work inside (else the probe proves nothing).
    allowed: bool,
    /// The run kind the attempt runs under.
    kind: RunKind,
}

fn spec(
    name: impl Into<String>,
    attempt: &'static str,
    args: Vec<String>,
    expect: &str,
    holders: &[Holder],
) -> Spec {
    Spec {
        name: name.into(),
        attempt,
        args,
        control: Control::Host,
        expect: expect.to_string(),
        holders: holders.to_vec(),
        truth: Truth::Report,
        allowed: false,
        kind: RunKind::ReadOnly,
    }
}

impl Spec {
    fn truth(mut self, t: Truth) -> Spec {
        self.truth = t;
        self
    }
    fn in_userns(mut self) -> Spec {
        self.control = Control::Userns;
        self
    }
    fn draft(mut self) -> Spec {
        self.kind = RunKind::Draft;
        self
    }
    fn allowed(mut self) -> Spec {
        self.allowed = true;
        self.expect = "ok".into();
        self
    }
}

#[derive(Default)]
struct Counters {
    tcp4: AtomicUsize,
    tcp6: AtomicUsize,
    udp: AtomicUsize,
    unix: AtomicUsize,
    abstract_: AtomicUsize,
}

impl Counters {
    fn get(&self, w: Which) -> usize {
        match w {
            Which::Tcp4 => &self.tcp4,
            Which::Tcp6 => &self.tcp6,
            Which::Udp => &self.udp,
            Which::Unix => &self.unix,
            Which::Abstract => &self.abstract_,
        }
        .load(Ordering::SeqCst)
    }
}

/// The probe's world: a temp folder with the root, a backend home, a
/// folder outside both, and the listeners.
struct Fixture {
    base: PathBuf,
    exe: PathBuf,
    root: PathBuf,
    home: PathBuf,
    outside: PathBuf,
    db: PathBuf,
    /// The TMPDIR of the positive controls (emptied before each).
    ctl_tmp: PathBuf,
    /// The canonical system temp folder.
    tmp_base: PathBuf,
    host_sock: PathBuf,
    /// The socket's own short folder under /tmp (see `sockpath`).
    sock_dir: PathBuf,
    abstract_name: String,
    tcp4: SocketAddr,
    tcp6: SocketAddr,
    udp: SocketAddr,
    counters: Arc<Counters>,
    marker_seq: AtomicUsize,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = cleanup::remove_deep(&self.ctl_tmp);
        super::remove_tree(&self.base);
        super::remove_tree(&self.sock_dir);
    }
}

impl Fixture {
    fn new() -> anyhow::Result<Fixture> {
        let exe = std::fs::canonicalize(std::env::current_exe()?)?;
        let tmp = std::fs::canonicalize(std::env::temp_dir())?;
        let base = tmp.join(format!(
            "reachweaver-probe-{}-{:x}",
            std::process::id(),
            super::random_u64()
        ));
        std::fs::create_dir(&base).with_context(|| format!("{}", base.display()))?;
        std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o700))?;
        let fs = base.join("fs");
        // The socket's path must fit sun_path (108 bytes) whatever TMPDIR
        // is: a short folder of its own under /tmp.
        let sock_dir = super::sockpath::probe_socket_dir(super::random_u64());
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&sock_dir)
            .with_context(|| format!("{}", sock_dir.display()))?;
        let counters = Arc::new(Counters::default());
        let host_sock = sock_dir.join(super::sockpath::PROBE_SOCKET);
        if !super::sockpath::fits_sun_path(&host_sock, super::sockpath::SUN_PATH) {
            anyhow::bail!(
                "the probe's socket path {} is too long for a unix socket",
                host_sock.display()
            );
        }
        let abstract_name = format!(
            "reachweaver-probe-{}-{:x}",
            std::process::id(),
            super::random_u64()
        );

        let tcp4l = TcpListener::bind("127.0.0.1:0")?;
        let tcp4 = tcp4l.local_addr()?;
        spawn_accept(tcp4l, counters.clone(), Which::Tcp4);
        let tcp6 = match TcpListener::bind("[::1]:0") {
            Ok(l) => {
                let a = l.local_addr()?;
                spawn_accept(l, counters.clone(), Which::Tcp6);
                a
            }
            // No IPv6 loopback: the control will fail and say so.
            Err(_) => "[::1]:9".parse()?,
        };
        let udpl = UdpSocket::bind("127.0.0.1:0")?;
        let udp = udpl.local_addr()?;
        {
            let c = counters.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 2048];
                while udpl.recv_from(&mut buf).is_ok() {
                    c.udp.fetch_add(1, Ordering::SeqCst);
                }
            });
        }
        let unixl = std::os::unix::net::UnixListener::bind(&host_sock)?;
        {
            let c = counters.clone();
            std::thread::spawn(move || {
                for s in unixl.incoming() {
                    if s.is_ok() {
                        c.unix.fetch_add(1, Ordering::SeqCst);
                    }
                }
            });
        }
        {
            use std::os::linux::net::SocketAddrExt;
            let addr =
                std::os::unix::net::SocketAddr::from_abstract_name(abstract_name.as_bytes())?;
            let l = std::os::unix::net::UnixListener::bind_addr(&addr)?;
            let c = counters.clone();
            std::thread::spawn(move || {
                for s in l.incoming() {
                    if s.is_ok() {
                        c.abstract_.fetch_add(1, Ordering::SeqCst);
                    }
                }
            });
        }
        let fx = Fixture {
            root: fs.join("root"),
            home: fs.join("home"),
            outside: fs.join("outside"),
            db: fs.join("home/db/reachweaver.db"),
            ctl_tmp: base.join("control-tmp"),
            tmp_base: tmp,
            base,
            exe,
            host_sock,
            sock_dir,
            abstract_name,
            tcp4,
            tcp6,
            udp,
            counters,
            marker_seq: AtomicUsize::new(0),
        };
        fx.reset()?;
        Ok(fx)
    }

    /// Rebuild the file fixture (attempts change it on purpose). The
    /// folders and the database keep their inodes: the sandbox pinned them
    /// at start and refuses runs once they name other files. A positive
    /// control may replace the database (with a link, say): the original
    /// inode is kept under a second name outside the fixture and linked
    /// back.
    fn reset(&self) -> anyhow::Result<()> {
        use std::os::unix::fs::MetadataExt;
        let db_folder = self.db.parent().context("db folder")?;
        let keep = self.base.join("db-original");
        std::fs::create_dir_all(db_folder)?;
        if !keep.exists() {
            std::fs::write(&self.db, b"")?;
            std::fs::hard_link(&self.db, &keep)?;
        }
        let original = std::fs::metadata(&keep)?.ino();
        match std::fs::symlink_metadata(&self.db) {
            Ok(m) if m.ino() == original => {}
            Ok(m) => {
                if m.is_dir() {
                    super::remove_tree(&self.db);
                } else {
                    std::fs::remove_file(&self.db)?;
                }
                std::fs::hard_link(&keep, &self.db)?;
            }
            Err(_) => std::fs::hard_link(&keep, &self.db)?,
        }
        for d in [&self.root, &self.home, &self.outside, db_folder] {
            std::fs::create_dir_all(d)?;
            for e in std::fs::read_dir(d)?.flatten() {
                let p = e.path();
                if p == self.db || self.db.starts_with(&p) {
                    continue;
                }
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    super::remove_tree(&p);
                } else {
                    std::fs::remove_file(&p)?;
                }
            }
        }
        for d in [&self.root, &self.home, &self.outside] {
            std::fs::write(d.join("victim.txt"), b"original\n")?;
            std::fs::set_permissions(d.join("victim.txt"), std::fs::Permissions::from_mode(0o644))?;
        }
        std::fs::create_dir_all(self.root.join("sub"))?;
        std::fs::write(self.root.join("sub/inside.txt"), b"inside the root\n")?;
        std::fs::write(self.outside.join("secret.txt"), b"outside the root\n")?;
        std::os::unix::fs::symlink("../outside/secret.txt", self.root.join("link-out"))?;
        std::fs::write(&self.db, b"SQLite format 3\0probe database\n")?;
        let t = self.outside.join("true");
        let small = ["/usr/bin/true", "/bin/true"]
            .into_iter()
            .map(Path::new)
            .find(|p| p.exists());
        std::fs::copy(small.unwrap_or(&self.exe), &t)?;
        std::fs::set_permissions(&t, std::fs::Permissions::from_mode(0o755))?;
        std::fs::create_dir_all(self.root.join("mnt"))?;
        // A program the run may read (but not execute) from its root.
        std::fs::create_dir_all(self.root.join("tools"))?;
        std::fs::copy(&t, self.root.join("tools/true"))?;
        std::fs::set_permissions(
            self.root.join("tools/true"),
            std::fs::Permissions::from_mode(0o755),
        )?;
        // Beside the database: a file the draft run must not replace, and
        // a symlink to outside, as an earlier draft run could have planted.
        let db_dir = self.db.parent().context("db folder")?;
        std::fs::write(db_dir.join("accounts.yaml"), b"accounts: []\n")?;
        std::os::unix::fs::symlink(self.outside.join("secret.txt"), db_dir.join("planted-link"))?;
        std::os::unix::fs::symlink("secret.txt", self.outside.join("alias"))?;
        // An attribute to read from outside (if the file system has them,
        // else the control says so).
        let p = std::ffi::CString::new(
            self.outside
                .join("secret.txt")
                .as_os_str()
                .as_encoded_bytes(),
        )?;
        // SAFETY: setxattr with C strings and a buffer we own.
        unsafe {
            libc::setxattr(
                p.as_ptr(),
                c"user.reachweaver-probe".as_ptr(),
                b"outside-value".as_ptr().cast(),
                13,
                0,
            )
        };
        Ok(())
    }

    /// An empty TMPDIR for the next positive control.
    fn fresh_ctl_tmp(&self) {
        let _ = cleanup::remove_deep(&self.ctl_tmp);
        let _ = std::fs::create_dir(&self.ctl_tmp);
    }

    fn marker(&self) -> String {
        format!(
            "rwprobe-{}-{}-{:x}",
            std::process::id(),
            self.marker_seq.fetch_add(1, Ordering::SeqCst),
            super::random_u64() & 0xffff_ffff
        )
    }

    fn s(p: &Path) -> String {
        p.to_string_lossy().into_owned()
    }

    /// The suite, in report order.
    fn specs(&self, server_pid: u32, caps_bounding: bool) -> Vec<Spec> {
        use Holder::*;
        let s = Self::s;
        let mut v = vec![
            // Sanity: what a backend legitimately needs still works.
            spec(
                "allowed-read-root",
                "read",
                vec![s(&self.root.join("sub/inside.txt"))],
                "",
                &[],
            )
            .allowed(),
            spec("allowed-list-root", "list", vec![s(&self.root)], "", &[]).allowed(),
            spec("allowed-read-db", "read", vec![s(&self.db)], "", &[]).allowed(),
            spec("allowed-write-tmpdir", "write-tmpdir", vec![], "", &[]).allowed(),
            spec(
                "allowed-socketpair-stream",
                "socketpair",
                vec!["stream".into()],
                "",
                &[],
            )
            .allowed(),
            spec("allowed-start-child", "fork", vec![], "", &[]).allowed(),
            // The draft kind may write the database's folder, and nothing more.
            spec(
                "allowed-draft-writes-db-journal",
                "create",
                vec![format!("{}-journal", s(&self.db))],
                "",
                &[],
            )
            .allowed()
            .draft(),
            // Network.
            spec(
                "tcp-connect-127.0.0.1",
                "tcp-connect",
                vec![self.tcp4.to_string()],
                "EPERM",
                &[Seccomp, LandlockTcp, Netns],
            )
            .truth(Truth::Listener(Which::Tcp4)),
            spec(
                "tcp-connect-::1",
                "tcp-connect",
                vec![self.tcp6.to_string()],
                "EPERM",
                &[Seccomp, LandlockTcp, Netns],
            )
            .truth(Truth::Listener(Which::Tcp6)),
            spec(
                "udp-send-127.0.0.1",
                "udp-send",
                vec![self.udp.to_string()],
                "EPERM",
                &[Seccomp, Netns],
            )
            .truth(Truth::Listener(Which::Udp)),
            spec(
                "mptcp-connect-127.0.0.1",
                "mptcp-connect",
                vec![self.tcp4.to_string()],
                "EPERM",
                &[Seccomp, Netns],
            )
            .truth(Truth::Listener(Which::Tcp4)),
            spec(
                "dns-lookup-localhost",
                "dns-lookup",
                vec!["localhost".into()],
                "EAI_",
                &[Landlock, Mountns],
            ),
            spec(
                "socket-raw-icmp",
                "socket",
                vec!["raw".into()],
                "EPERM",
                &[Seccomp, Caps, Userns],
            )
            .in_userns(),
            spec(
                "socket-packet",
                "socket",
                vec!["packet".into()],
                "EPERM",
                &[Seccomp, Caps, Userns],
            )
            .in_userns(),
            spec(
                "socket-netlink",
                "socket",
                vec!["netlink".into()],
                "EPERM",
                &[Seccomp],
            ),
            spec(
                "socket-vsock",
                "socket",
                vec!["vsock".into()],
                "EPERM",
                &[Seccomp],
            ),
            spec(
                "abstract-unix-connect",
                "abstract-connect",
                vec![self.abstract_name.clone()],
                "EPERM",
                &[Seccomp, LandlockScope, Netns],
            )
            .truth(Truth::Listener(Which::Abstract)),
            spec(
                "host-unix-connect",
                "unix-connect",
                vec![s(&self.host_sock)],
                "EPERM",
                &[Seccomp, LandlockUnix, Mountns],
            )
            .truth(Truth::Listener(Which::Unix)),
            spec(
                "socketpair-dgram",
                "socketpair",
                vec!["dgram".into()],
                "EPERM",
                &[Seccomp],
            ),
            spec(
                "socketpair-seqpacket",
                "socketpair",
                vec!["seqpacket".into()],
                "EPERM",
                &[Seccomp],
            ),
            // Kernel surface.
            spec(
                "io-uring-setup",
                "io-uring-setup",
                vec![],
                "EPERM",
                &[Seccomp],
            ),
            spec("x32-syscall", "x32-syscall", vec![], "SIGSYS", &[Seccomp]),
            spec(
                "unshare-userns",
                "unshare-userns",
                vec![],
                "EPERM",
                &[Seccomp, NsLimits],
            ),
            spec(
                "clone-newuser",
                "clone-newuser",
                vec![],
                "EPERM",
                &[Seccomp, NsLimits],
            ),
            spec("clone3", "clone3", vec![], "ENOSYS", &[Seccomp]),
            spec(
                "mount-tmpfs",
                "mount-tmpfs",
                vec![s(&self.root.join("mnt"))],
                "EPERM",
                &[Seccomp, Userns],
            )
            .in_userns(),
            // Reading outside the root.
            spec(
                "read-outside-root",
                "read",
                vec![s(&self.outside.join("secret.txt"))],
                "ENOENT|EACCES",
                &[Landlock, Mountns],
            ),
            spec(
                "list-outside-root",
                "list",
                vec![s(&self.outside)],
                "ENOENT|EACCES",
                &[Landlock, Mountns],
            ),
            spec(
                "read-symlink-out-of-root",
                "read",
                vec![s(&self.root.join("link-out"))],
                "ENOENT|EACCES",
                &[Landlock, Mountns],
            ),
            spec(
                "read-dotdot-out-of-root",
                "read",
                vec![s(&self.root.join("../outside/secret.txt"))],
                "ENOENT|EACCES",
                &[Landlock, Mountns],
            ),
            spec(
                "exec-outside-runtime",
                "exec",
                vec![s(&self.outside.join("true"))],
                "ENOENT|EACCES",
                &[Landlock, Mountns],
            ),
            spec(
                "write-database",
                "write",
                vec![s(&self.db)],
                "EROFS|EACCES",
                &[Landlock, Mountns],
            )
            .truth(Truth::Files),
            spec(
                "draft-create-in-root",
                "create",
                vec![s(&self.root.join("new.txt"))],
                "EROFS|EACCES",
                &[Landlock, Mountns],
            )
            .truth(Truth::Files)
            .draft(),
            spec(
                "draft-create-in-home",
                "create",
                vec![s(&self.home.join("new.txt"))],
                "EROFS|EACCES",
                &[Landlock, Mountns],
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
            let ops: [(&str, &'static str, Vec<String>); 8] = [
                ("create", "create", vec![s(&dir.join("new.txt"))]),
                ("write", "write", vec![victim.clone()]),
                ("truncate", "truncate", vec![victim.clone()]),
                (
                    "rename",
                    "rename",
                    vec![victim.clone(), s(&dir.join("renamed.txt"))],
                ),
                ("unlink", "unlink", vec![victim.clone()]),
                ("mkdir", "mkdir", vec![s(&dir.join("newdir"))]),
                (
                    "link",
                    "link",
                    vec![victim.clone(), s(&dir.join("hardlink.txt"))],
                ),
                ("mknod", "mknod", vec![s(&dir.join("fifo"))]),
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
                        if op == "mknod" {
                            &[Seccomp, Landlock, Mountns]
                        } else {
                            &[Landlock, Mountns]
                        },
                    )
                    .truth(Truth::Files),
                );
            }
        }
        // Metadata changes Landlock does not cover: seccomp refuses them, and
        // a host file outside the grant isn't there to change.
        let host_file = s(&self.outside.join("victim.txt"));
        for attempt in ["chmod", "chown", "utime", "setxattr"] {
            v.push(
                spec(
                    format!("{attempt}-host-file"),
                    attempt,
                    vec![host_file.clone()],
                    "EPERM|ENOENT",
                    &[Seccomp, Mountns],
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
                "read",
                vec![format!("/proc/{server_pid}/environ")],
                "ENOENT|EACCES",
                &[Landlock, Userns, Mountns],
            ),
            spec(
                "read-server-cmdline",
                "read",
                vec![format!("/proc/{server_pid}/cmdline")],
                "ENOENT|EACCES",
                &[Landlock, Userns, Mountns],
            ),
            spec(
                "kill-server",
                "kill",
                vec![server_pid.to_string()],
                "ESRCH",
                &[Pidns, LandlockScope],
            ),
            spec(
                "ptrace-server",
                "ptrace",
                vec![server_pid.to_string()],
                "EPERM",
                &[Seccomp, Pidns, Landlock],
            ),
            spec("tiocsti-terminal", "tiocsti", vec![], "EPERM", &[Seccomp]).truth(Truth::Tty),
            // Privilege.
            spec(
                "setuid-0",
                "setuid-0",
                vec![],
                "EINVAL|EPERM",
                &[Userns, CapsUnprivileged],
            )
            .in_userns(),
            spec(
                "no-new-privs-off",
                "no-new-privs-off",
                vec![],
                "NoNewPrivs=1",
                &[Helper],
            ),
            spec(
                "seccomp-off",
                "seccomp-off",
                vec![],
                "Seccomp=2",
                &[Seccomp],
            ),
            // Where the run can't hold CAP_SETPCAP (an ordinary user without
            // user namespaces) the bounding set stays and is not checked:
            // with every other set empty and no_new_privs, it grants nothing.
            spec(
                "caps-held",
                "caps-held",
                vec![if caps_bounding { "all" } else { "sets" }.into()],
                "CapEff=0 CapPrm=0 CapInh=0 CapBnd=0 CapAmb=0|CapEff=0 CapPrm=0 CapInh=0",
                &[Caps],
            ),
            // Resources and lifetime.
            spec(
                "fork-bomb",
                "fork-bomb",
                vec!["600".into()],
                "EAGAIN",
                &[Nproc, PidMax],
            ),
            spec(
                "memory-bomb",
                "memory-bomb",
                vec!["8".into()],
                "ENOMEM",
                &[Rlimits],
            ),
            spec(
                "stdout-flood",
                "stdout-flood",
                vec![],
                "contained",
                &[Helper],
            )
            .truth(Truth::Flood),
            spec(
                "daemon-outlives-call",
                "daemon",
                vec![],
                "gone",
                &[Pidns, Subreaper],
            )
            .truth(Truth::Daemon),
            spec(
                "next-call-sees-nothing",
                "find-traces",
                vec![],
                "none",
                // Each run's own TMPDIR (a tmpfs, or a host folder removed
                // with it), IPC and PID namespaces and minimal root.
                &[Mountns, Pidns, Helper],
            )
            .truth(Truth::NextCall),
            spec(
                "run-outlives-killed-server",
                "sleep-marker",
                vec![],
                "gone",
                // The run's init dies with its parent (the parent-death
                // signal every helper arms) and takes the namespace along.
                &[Pidns, Helper],
            )
            .truth(Truth::OutliveParent),
            spec(
                "loader-and-secret-env",
                "env",
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
    fn second_generation(&self, server_pid: u32) -> Vec<Spec> {
        use Holder::*;
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
        let host_mount = host_attempts::listmount()
            .ok()
            .and_then(|ids| ids.first().copied())
            .unwrap_or(0);
        let (host_node, host_domain) = super::linux::namespaces::uts_names().unwrap_or_default();
        let run_names = format!(
            "nodename {} domainname {}",
            super::linux::namespaces::RUN_HOSTNAME,
            super::linux::namespaces::RUN_DOMAINNAME
        );
        // Twice the file-size limit.
        let reserve_mib = (super::policy::Rlimits::default().file_size >> 20) * 2;
        vec![
            // Grants: the draft run may write the database (and SQLite's
            // companions), nothing else in its folder.
            spec(
                "draft-db-replaced-by-symlink",
                "replace-with-symlink",
                vec![db.clone(), "/".into()],
                "EBUSY",
                &[Mountns],
            )
            .truth(Truth::Files)
            .draft(),
            spec(
                "draft-db-symlink-renamed-over",
                "symlink-rename-over",
                vec![db.clone(), "/".into()],
                "EACCES",
                &[Landlock, Mountns],
            )
            .truth(Truth::Files)
            .draft(),
            spec(
                "draft-symlink-in-db-folder",
                "symlink",
                vec!["/".into(), s(&db_dir.join("escape"))],
                "EACCES|nothing left",
                &[Landlock, Helper],
            )
            .truth(Truth::FilesAfter)
            .draft(),
            spec(
                "draft-mkdir-in-db-folder",
                "mkdir",
                vec![s(&db_dir.join("newdir"))],
                "EACCES|nothing left",
                &[Landlock, Helper],
            )
            .truth(Truth::FilesAfter)
            .draft(),
            spec(
                "draft-fifo-in-db-folder",
                "mknod",
                vec![s(&db_dir.join("fifo"))],
                "EPERM|EACCES|nothing left",
                &[Seccomp, Landlock, Helper],
            )
            .truth(Truth::FilesAfter)
            .draft(),
            spec(
                "draft-other-file-in-db-folder",
                "create",
                vec![s(&db_dir.join("other.txt"))],
                "nothing left",
                &[Helper],
            )
            .truth(Truth::FilesAfter)
            .draft(),
            spec(
                "draft-rename-beside-db",
                "rename",
                vec![beside.clone(), format!("{beside}.bak")],
                "EBUSY",
                &[Mountns],
            )
            .truth(Truth::Files)
            .draft(),
            spec(
                "draft-replace-beside-db",
                "replace",
                vec![beside.clone()],
                "EBUSY",
                &[Mountns],
            )
            .truth(Truth::Files)
            .draft(),
            spec(
                "draft-write-beside-db",
                "write",
                vec![beside.clone()],
                "EROFS",
                &[Mountns],
            )
            .truth(Truth::Files)
            .draft(),
            spec(
                "draft-executable-in-db-folder",
                "create-exec",
                vec![s(&db_dir.join("tool"))],
                "EPERM|no executable left",
                &[Seccomp, Helper],
            )
            .truth(Truth::ExecBits(db_dir.join("tool")))
            .draft(),
            spec(
                "draft-mknod-exec-companion",
                "mknod-exec",
                vec![format!("{db}-wal")],
                "EPERM|no executable left",
                &[Seccomp, Helper],
            )
            .truth(Truth::ExecBits(PathBuf::from(format!("{db}-wal"))))
            .draft(),
            // Disk and devices: a draft run's database grows within the
            // file-size limit, and no device appears in its folder.
            spec(
                "allowed-draft-fallocate-db",
                "fallocate",
                vec![db.clone(), "plain".into(), "1".into()],
                "",
                &[],
            )
            .allowed()
            .draft(),
            spec(
                "draft-fallocate-keep-size",
                "fallocate",
                vec![db.clone(), "keep-size".into(), reserve_mib.to_string()],
                "EOPNOTSUPP",
                &[Seccomp],
            )
            .truth(Truth::Reserved(self.db.clone()))
            .draft(),
            spec(
                "draft-rename-whiteout",
                "rename-whiteout",
                vec![format!("{db}-journal"), format!("{db}-wal")],
                "EPERM|nothing left",
                // The clean-up removes anything under a companion's name
                // that is not a plain file.
                &[Seccomp, Helper],
            )
            .truth(Truth::FilesAfter)
            .draft(),
            // A later read-only run must not follow what was planted.
            spec("allowed-read-beside-db", "read", vec![beside], "", &[]).allowed(),
            spec(
                "read-through-planted-symlink",
                "read",
                vec![planted.clone()],
                "ENOENT|EACCES",
                &[Landlock, Mountns],
            ),
            spec(
                "stat-through-planted-symlink",
                "stat",
                vec![planted],
                "ENOENT",
                &[Mountns],
            ),
            // The run's temp folder.
            spec(
                "tmpdir-deep-chain",
                "deep-tmpdir",
                vec!["1100".into(), self.marker()],
                "cleaned up",
                &[Tmpfs, Helper],
            )
            .truth(Truth::DeepTmp),
            spec(
                "tmpdir-size-cap",
                "fill-size",
                vec!["1024".into()],
                "ENOSPC",
                &[Tmpfs],
            ),
            spec(
                "tmpdir-inode-cap",
                "fill-inodes",
                vec!["65536".into()],
                "ENOSPC",
                &[Tmpfs],
            ),
            spec(
                "tmpdir-name-carries-server-pid",
                "tmpdir-path",
                vec![],
                "no server pid",
                &[Mountns, Helper],
            )
            .truth(Truth::NoServerPid(server_pid)),
            // Metadata of host files.
            spec(
                "file-setattr-host-file",
                "file-setattr",
                vec![s(&self.outside.join("victim.txt"))],
                "ENOSYS",
                &[Seccomp, Mountns],
            )
            .truth(Truth::Files),
            spec(
                "ioctl-setflags-read-only-fd",
                "ioctl-flags",
                vec!["setflags".into(), s(&self.root.join("victim.txt"))],
                "ENOTTY",
                &[Seccomp, Mountns],
            )
            .truth(Truth::Files),
            spec(
                "ioctl-fssetxattr-read-only-fd",
                "ioctl-flags",
                vec!["fssetxattr".into(), s(&self.root.join("victim.txt"))],
                "ENOTTY",
                &[Seccomp, Mountns],
            )
            .truth(Truth::Files),
            spec(
                "ioctl-ext4-setversion-read-only-fd",
                "ioctl-flags",
                vec!["setversion".into(), s(&self.root.join("victim.txt"))],
                "ENOTTY",
                &[Seccomp, Mountns],
            )
            .truth(Truth::Files),
            // Memory and code outside RLIMIT_AS and the runtime.
            spec(
                "memfd-outside-rlimit-as",
                "memfd-fill",
                vec!["1024".into()],
                "ENOSYS",
                &[Seccomp],
            ),
            spec(
                "memfd-exec",
                "memfd-exec",
                vec![prog.clone()],
                "ENOSYS|EACCES",
                // Landlock's execute right is about files beneath a folder;
                // a memfd is beneath none.
                &[Seccomp, MemfdNoexec],
            ),
            // Observation outside the grant.
            spec(
                "inotify-system-tmp",
                "inotify-watch",
                vec![tmp.clone(), tmp_marker.clone()],
                "ENOSYS|no event",
                &[Seccomp, Mountns],
            )
            .truth(Truth::Watch(Trigger::Create(
                self.tmp_base.join(&tmp_marker),
            ))),
            spec(
                "inotify-etc",
                "inotify-watch",
                vec!["/etc".into(), "passwd".into()],
                "ENOSYS|no event",
                &[Seccomp, Mountns],
            )
            .truth(Truth::Watch(Trigger::Open("/etc/passwd".into()))),
            // Other runs: the root is the same inodes in every run, so a
            // watch there would see what a concurrent run (here, the probe)
            // opens.
            spec(
                "inotify-shared-root",
                "inotify-watch",
                vec![s(&self.root), "victim.txt".into()],
                "ENOSYS",
                &[Seccomp],
            )
            .truth(Truth::Watch(Trigger::Open(self.root.join("victim.txt")))),
            spec(
                "fanotify-outside",
                "fanotify-watch",
                vec![s(&self.outside)],
                "ENOSYS|ENOENT",
                &[Seccomp, Mountns],
            ),
            spec(
                "getxattr-outside-file",
                "getxattr",
                vec![
                    s(&self.outside.join("secret.txt")),
                    "user.reachweaver-probe".into(),
                ],
                "ENOENT",
                &[Mountns],
            ),
            spec(
                "stat-etc-hostname",
                "stat",
                vec!["/etc/hostname".into()],
                "ENOENT",
                &[Mountns],
            ),
            spec(
                "uname-nodename",
                "uname-nodename",
                vec![host_node, host_domain],
                &run_names,
                &[Utsns],
            ),
            spec(
                "stat-outside-file",
                "stat",
                vec![s(&self.outside.join("secret.txt"))],
                "ENOENT",
                &[Mountns],
            ),
            spec(
                "stat-server-home",
                "stat",
                vec![s(&server_home)],
                "ENOENT",
                &[Mountns],
            ),
            spec(
                "readlink-outside",
                "readlink",
                vec![s(&self.outside.join("alias"))],
                "ENOENT",
                &[Mountns],
            ),
            spec(
                "listmount-host-mounts",
                "listmount",
                vec![],
                "ENOSYS",
                &[Seccomp, Mountns],
            )
            .truth(Truth::HostMounts),
            spec(
                "statmount-host-mount",
                "statmount",
                vec![host_mount.to_string()],
                "ENOSYS",
                &[Seccomp, Mountns],
            ),
            spec(
                "stat-proc-server",
                "stat",
                vec![format!("/proc/{server_pid}")],
                "ENOENT",
                &[Mountns],
            ),
            spec(
                "list-proc",
                "list-pids",
                vec!["/proc".into()],
                "EACCES|ENOENT|only the run's own",
                &[Landlock, Mountns],
            )
            .truth(Truth::ProcHidesServer(server_pid)),
            // Execution outside the runtime.
            spec(
                "exec-from-tmpdir",
                "exec-tmpdir",
                vec![prog.clone()],
                "EPERM|EACCES",
                &[Seccomp, Landlock, Noexec],
            ),
            spec(
                "exec-via-loader-from-tmpdir",
                "exec-loader",
                vec![prog],
                "exit 127",
                &[Noexec],
            ),
            spec(
                "mmap-exec-tmpdir",
                "mmap-exec-tmpdir",
                vec![],
                "EPERM",
                &[Noexec],
            ),
            // Host files by handle, past every path check.
            spec(
                "open-by-handle-outside",
                "open-by-handle",
                vec![s(&self.outside.join("secret.txt")), s(&self.root)],
                "ENOSYS|EPERM|ENOENT",
                &[Seccomp, Caps, Mountns],
            ),
        ]
    }
}

/// Variables the probe plants in its own environment (when not already
/// set) to show they never reach a run.
const PLANTED_ENV: &[(&str, &str)] = &[
    ("LD_PRELOAD", "libc.so.6"),
    ("PYTHONPATH", "/nonexistent/reachweaver-probe"),
    ("NODE_OPTIONS", "--no-warnings"),
    ("BASH_ENV", "/nonexistent/reachweaver-probe.sh"),
    (
        "REACHWEAVER_PROBE_API_TOKEN",
        "probe-secret-value-0123456789",
    ),
];

fn spawn_accept(l: TcpListener, c: Arc<Counters>, w: Which) {
    std::thread::spawn(move || {
        for s in l.incoming() {
            if s.is_ok() {
                match w {
                    Which::Tcp4 => &c.tcp4,
                    _ => &c.tcp6,
                }
                .fetch_add(1, Ordering::SeqCst);
            }
        }
    });
}

/// What one run of an attempt produced.
#[derive(Debug, Clone)]
enum Outcome {
    Ok(String),
    Failed(String),
    /// The sandbox itself refused to start the run: nothing was tried.
    NotRun(String),
}

impl Outcome {
    fn text(&self) -> &str {
        match self {
            Outcome::Ok(s) | Outcome::Failed(s) | Outcome::NotRun(s) => s,
        }
    }
}

fn parse_report(stdout: &[u8], status: Option<std::process::ExitStatus>) -> Outcome {
    use std::os::unix::process::ExitStatusExt;
    if let Some(sig) = status.and_then(|s| s.signal()) {
        return Outcome::Failed(signal_name(sig));
    }
    let line = String::from_utf8_lossy(stdout);
    let line = line.lines().last().unwrap_or("");
    match serde_json::from_str::<serde_json::Value>(line) {
        Ok(v) => {
            let r = v["result"].as_str().unwrap_or("").to_string();
            if v["ok"].as_bool() == Some(true) {
                Outcome::Ok(r)
            } else {
                Outcome::Failed(r)
            }
        }
        Err(_) => Outcome::Failed(format!(
            "no report (exit {})",
            status
                .and_then(|s| s.code())
                .map(|c| c.to_string())
                .unwrap_or_else(|| "?".into())
        )),
    }
}

fn signal_name(sig: i32) -> String {
    match sig {
        libc::SIGSYS => "SIGSYS".into(),
        libc::SIGKILL => "SIGKILL".into(),
        libc::SIGSEGV => "SIGSEGV".into(),
        libc::SIGXFSZ => "SIGXFSZ".into(),
        libc::SIGABRT => "SIGABRT".into(),
        other => format!("signal {other}"),
    }
}

/// Read a pipe to its end (up to `cap` bytes kept) on a thread.
fn reader<R: Read + Send + 'static>(r: Option<R>, cap: usize) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut out = Vec::new();
        if let Some(mut r) = r {
            let mut buf = [0u8; 65536];
            while let Ok(n) = r.read(&mut buf) {
                if n == 0 {
                    break;
                }
                if out.len() < cap {
                    out.extend_from_slice(&buf[..n.min(cap - out.len())]);
                }
            }
        }
        out
    })
}

const RUN_TIMEOUT: Duration = Duration::from_secs(60);

/// Run one attempt as a plain child of the probe (the positive control).
fn run_control(fx: &Fixture, sp: &Spec, args: &[String], stdin: Option<OwnedFd>) -> Outcome {
    run_control_watched(fx, sp, args, stdin, &mut || {})
}

/// Like `run_control`, calling `watch` while the attempt runs.
fn run_control_watched(
    fx: &Fixture,
    sp: &Spec,
    args: &[String],
    stdin: Option<OwnedFd>,
    watch: &mut dyn FnMut(),
) -> Outcome {
    let name = match sp.control {
        Control::Host => sp.attempt.to_string(),
        Control::Userns => format!("userns:{}", sp.attempt),
    };
    fx.fresh_ctl_tmp();
    let mut cmd = Command::new(&fx.exe);
    cmd.arg("__probe-attempt")
        .arg(name)
        .args(args)
        .env("TMPDIR", &fx.ctl_tmp)
        .current_dir(&fx.root)
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    match stdin {
        Some(fd) => cmd.stdin(Stdio::from(fd)),
        None => cmd.stdin(Stdio::null()),
    };
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return Outcome::Failed(format!("could not start: {e}")),
    };
    let out = reader(child.stdout.take(), 1 << 16);
    let deadline = Instant::now() + RUN_TIMEOUT;
    let status = loop {
        watch();
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            _ => {
                let _ = child.kill();
                break child.wait().ok();
            }
        }
    };
    parse_report(&out.join().unwrap_or_default(), status)
}

/// Run one attempt inside the sandbox.
fn run_inside(
    sb: &Sandbox,
    fx: &Fixture,
    sp: &Spec,
    args: &[String],
    stdin: Option<OwnedFd>,
) -> Outcome {
    run_inside_watched(sb, fx, sp, args, stdin, &mut || {})
}

/// Like `run_inside`, calling `watch` while the attempt runs.
fn run_inside_watched(
    sb: &Sandbox,
    fx: &Fixture,
    sp: &Spec,
    args: &[String],
    stdin: Option<OwnedFd>,
    watch: &mut dyn FnMut(),
) -> Outcome {
    let mut argv = vec![
        Fixture::s(&fx.exe),
        "__probe-attempt".to_string(),
        sp.attempt.to_string(),
    ];
    argv.extend(args.iter().cloned());
    let mut child = match sb.spawn_with_stdin(sp.kind, &argv, &fx.root, stdin) {
        Ok(c) => c,
        Err(e) => return Outcome::NotRun(format!("sandbox: {e}")),
    };
    let out = reader(child.stdout.take(), 1 << 16);
    let err = reader(child.stderr.take(), 1 << 16);
    let deadline = Instant::now() + RUN_TIMEOUT;
    let status = loop {
        watch();
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            _ => {
                child.kill_tree();
                break child.wait().ok();
            }
        }
    };
    let _ = err.join();
    parse_report(&out.join().unwrap_or_default(), status)
}

/// Sleeping marker processes (`__probe-attempt sleep-marker MARKER`); the
/// processes that merely pass the marker along don't count.
fn marker_pids(marker: &str) -> Vec<i32> {
    let mut pids = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for e in entries.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            if let Ok(cmd) = std::fs::read(e.path().join("cmdline")) {
                // Exactly `EXE __probe-attempt sleep-marker MARKER`: the server
                // and its forks carry the marker in other positions.
                let args: Vec<&[u8]> = cmd.split(|&b| b == 0).collect();
                if args.len() >= 4
                    && args[1] == b"__probe-attempt"
                    && args[2] == b"sleep-marker"
                    && args[3] == marker.as_bytes()
                {
                    pids.push(pid);
                }
            }
        }
    }
    pids
}

fn wait_for(mut cond: impl FnMut() -> bool, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn kill_marker(marker: &str) {
    for pid in marker_pids(marker) {
        // SAFETY: signalling a process that carries our own marker.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
}

/// A fingerprint of every file under the fixture (type, size, mode, times,
/// content), to prove an attempt changed nothing.
fn fingerprint(dir: &Path) -> BTreeMap<PathBuf, String> {
    let mut map = BTreeMap::new();
    fn walk(dir: &Path, map: &mut BTreeMap<PathBuf, String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            let Ok(m) = std::fs::symlink_metadata(&p) else {
                continue;
            };
            let content = if m.is_file() {
                use std::hash::{Hash, Hasher};
                let mut h = std::collections::hash_map::DefaultHasher::new();
                std::fs::read(&p).unwrap_or_default().hash(&mut h);
                format!("{:016x}", h.finish())
            } else {
                String::new()
            };
            let xattr = {
                let c = std::ffi::CString::new(p.to_string_lossy().as_bytes()).unwrap_or_default();
                let mut buf = [0u8; 256];
                // SAFETY: listxattr into a buffer we own.
                let n = unsafe { libc::llistxattr(c.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
                if n > 0 {
                    String::from_utf8_lossy(&buf[..n as usize]).into_owned()
                } else {
                    String::new()
                }
            };
            let flags = if m.is_file() || m.is_dir() {
                inode_flags(&p)
            } else {
                String::new()
            };
            // A folder's size and times follow its entries, which are
            // fingerprinted themselves: a file made and removed again (as
            // SQLite's journal is) leaves nothing behind but those.
            let times = if m.is_dir() {
                String::from("-")
            } else {
                format!(
                    "{} {}.{} {}.{}",
                    m.len(),
                    m.mtime(),
                    m.mtime_nsec(),
                    m.ctime(),
                    m.ctime_nsec()
                )
            };
            map.insert(
                p.clone(),
                format!(
                    "{:o} {} {} {times} {} {xattr} {flags} {content}",
                    m.mode(),
                    m.uid(),
                    m.gid(),
                    m.nlink()
                ),
            );
            if m.is_dir() {
                walk(&p, map);
            }
        }
    }
    walk(dir, &mut map);
    map
}

/// The inode flags and generation, as `lsattr` and `lsattr -v` read them.
fn inode_flags(p: &Path) -> String {
    use std::os::unix::fs::OpenOptionsExt;
    let Ok(f) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(p)
    else {
        return "?".into();
    };
    // Both are ints to the kernel.
    let mut flags: libc::c_int = 0;
    let mut generation: libc::c_int = 0;
    // SAFETY: the two get ioctls write integers we own.
    let (a, b) = unsafe {
        (
            libc::ioctl(f.as_raw_fd(), host_attempts::FS_IOC_GETFLAGS, &mut flags),
            libc::ioctl(
                f.as_raw_fd(),
                host_attempts::FS_IOC_GETVERSION,
                &mut generation,
            ),
        )
    };
    format!(
        "flags={} gen={}",
        if a == 0 {
            format!("{flags:x}")
        } else {
            "-".into()
        },
        if b == 0 {
            format!("{generation}")
        } else {
            "-".into()
        }
    )
}

struct Pty {
    master: OwnedFd,
    slave: OwnedFd,
}

impl Pty {
    fn open() -> anyhow::Result<Pty> {
        // SAFETY: standard pseudo-terminal setup on descriptors we own.
        unsafe {
            let m = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
            if m < 0 {
                anyhow::bail!("posix_openpt: {}", std::io::Error::last_os_error());
            }
            let master = OwnedFd::from_raw_fd(m);
            if libc::grantpt(m) != 0 || libc::unlockpt(m) != 0 {
                anyhow::bail!("pty: {}", std::io::Error::last_os_error());
            }
            let mut name = [0 as libc::c_char; 128];
            if libc::ptsname_r(m, name.as_mut_ptr(), name.len()) != 0 {
                anyhow::bail!("ptsname: {}", std::io::Error::last_os_error());
            }
            let s = libc::open(
                name.as_ptr(),
                libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
            );
            if s < 0 {
                anyhow::bail!("pty slave: {}", std::io::Error::last_os_error());
            }
            // Raw mode: the input queue counts every byte, not whole lines.
            let mut t: libc::termios = std::mem::zeroed();
            if libc::tcgetattr(s, &mut t) == 0 {
                libc::cfmakeraw(&mut t);
                libc::tcsetattr(s, libc::TCSANOW, &t);
            }
            Ok(Pty {
                master,
                slave: OwnedFd::from_raw_fd(s),
            })
        }
    }

    /// Bytes waiting in the terminal's input queue.
    fn pending(&self) -> i32 {
        let mut n: libc::c_int = 0;
        // SAFETY: FIONREAD writes an int we own.
        unsafe { libc::ioctl(self.slave.as_raw_fd(), libc::FIONREAD, &mut n) };
        let _ = &self.master;
        n
    }

    fn flush(&self) {
        // SAFETY: discarding the input queue of our own terminal.
        unsafe { libc::tcflush(self.slave.as_raw_fd(), libc::TCIFLUSH) };
    }
}

/// One line of the report.
#[derive(Debug, Clone, Serialize)]
pub(super) struct Line {
    pub name: String,
    /// `blocked`, `ESCAPED`, `unproven` (the control failed too), `FAILED`
    /// (the sandbox refused to start the run), or for the sanity checks
    /// `allowed` / `BROKEN`.
    pub verdict: &'static str,
    /// What the inside run got: the errno, the signal, or the observation.
    pub inside: String,
    pub expected: String,
    pub expected_matches: bool,
    pub control: String,
    pub control_ok: bool,
    pub holders: Vec<Holder>,
    /// What the holders table predicts with the layers in force.
    pub predicted: &'static str,
}

#[derive(Debug, Serialize)]
pub(super) struct Report {
    pub layers: String,
    pub without: Option<&'static str>,
    pub uid: u32,
    pub landlock_abi: Option<i32>,
    pub attempts: Vec<Line>,
    pub escaped: usize,
    pub broken: usize,
}

/// `sandbox probe`.
pub(super) fn run(json: bool, without: Option<Layer>, junit: Option<&Path>) -> anyhow::Result<u8> {
    // Planted before any thread starts, so the environment isn't shared yet.
    for (k, v) in PLANTED_ENV {
        if std::env::var_os(k).is_none() {
            std::env::set_var(k, v);
        }
    }
    let fx = Fixture::new()?;
    let opts = SandboxOptions {
        mode: SandboxMode::Require,
        backend: fx.exe.clone(),
        root: fx.root.clone(),
        read: vec![fx.home.clone()],
        home: Some(fx.home.clone()),
        db: Some(fx.db.clone()),
        allow_read: Vec::new(),
        pass_env: Vec::new(),
        ..SandboxOptions::default()
    };
    let mut sb = Sandbox::detect(&opts)?;
    if let Some(l) = without {
        // The layer matrix: every run of this probe goes without it, and the
        // layers line says so.
        sb.state.without(l);
    }
    let layers = sb.state.layers();
    let line = sb.layers_line();
    let mut out = std::io::stdout().lock();
    if !json {
        if let Some(l) = without {
            writeln!(
                out,
                "!!! WARNING: the {} layer is SWITCHED OFF for this probe; the results show what the other layers hold !!!",
                l.name()
            )?;
        }
        writeln!(out, "layers: {line}")?;
    }
    // SAFETY: getuid can't fail.
    let uid = unsafe { libc::getuid() };
    let server_pid = std::process::id();
    let mut lines = Vec::new();
    for sp in fx.specs(server_pid, layers.caps_bounding) {
        let l = run_one(&sb, &fx, &sp, &layers, uid, without.is_some())?;
        if !json {
            writeln!(out, "{}", render(&l))?;
            out.flush()?;
        }
        lines.push(l);
    }
    let escaped = lines.iter().filter(|l| l.verdict == "ESCAPED").count();
    let not_promised = lines.iter().filter(|l| l.verdict == "not promised").count();
    let broken = lines
        .iter()
        .filter(|l| l.verdict == "BROKEN" || l.verdict == "FAILED")
        .count();
    let report = Report {
        layers: line,
        without: without.map(Layer::name),
        uid,
        landlock_abi: layers.landlock_abi,
        attempts: lines,
        escaped,
        broken,
    };
    if let Some(path) = junit {
        std::fs::write(path, junit::render(&report))
            .with_context(|| format!("writing the JUnit report {}", path.display()))?;
    }
    if json {
        serde_json::to_writer_pretty(&mut out, &report)?;
        writeln!(out)?;
    } else {
        let unproven = report
            .attempts
            .iter()
            .filter(|l| l.verdict == "unproven")
            .count();
        writeln!(
            out,
            "{} attempts: {} got through, {} broken or not run, {} proved nothing (control failed), {} not promised on this machine",
            report.attempts.len(),
            escaped,
            broken,
            unproven,
            not_promised
        )?;
    }
    Ok(if escaped + broken > 0 { 1 } else { 0 })
}

fn render(l: &Line) -> String {
    let mut s = format!("{:<8} {:<32} {}", l.verdict, l.name, l.inside);
    if !l.expected_matches && l.verdict == "blocked" {
        s.push_str(&format!("  (expected {})", l.expected));
    }
    if !l.control_ok {
        s.push_str(&format!("  [proves nothing: outside it got {}]", l.control));
    }
    if l.predicted == "escaped" && l.verdict == "blocked" {
        s.push_str("  (held by a layer the table doesn't list)");
    }
    if l.predicted == "blocked" && l.verdict == "ESCAPED" {
        s.push_str("  (its holders don't hold it yet)");
    }
    if l.predicted == "escaped" && l.verdict == "ESCAPED" {
        s.push_str("  (no layer in force holds it)");
    }
    s
}

fn run_one(
    sb: &Sandbox,
    fx: &Fixture,
    sp: &Spec,
    layers: &Layers,
    uid: u32,
    switched_off: bool,
) -> anyhow::Result<Line> {
    // A sanity check is predicted to work; an attempt to be blocked when a
    // holder is in force, else to get through.
    let predicted = if sp.allowed {
        "allowed"
    } else if sp.holders.iter().any(|h| h.active(layers, uid)) {
        "blocked"
    } else {
        "escaped"
    };
    let (control, inside) = match &sp.truth {
        // A sanity check needs no control: it must simply work inside.
        _ if sp.allowed => (
            Outcome::Ok("not needed".into()),
            run_inside(sb, fx, sp, &sp.args, None),
        ),
        Truth::Flood => (flood(fx, sp, None), flood(fx, sp, Some(sb))),
        Truth::Daemon => (daemon(fx, sp, None), daemon(fx, sp, Some(sb))),
        Truth::NextCall => (next_call(fx, sp, None), next_call(fx, sp, Some(sb))),
        Truth::OutliveParent => (outlive_control(fx), outlive_inside(fx)),
        Truth::Tty => {
            // The queue is flushed when the attempt's session ends, so it is
            // watched while the attempt runs (it lingers after injecting).
            let pty = Pty::open()?;
            let mut seen = 0;
            let c =
                run_control_watched(fx, sp, &sp.args, Some(pty.slave.try_clone()?), &mut || {
                    seen = seen.max(pty.pending())
                });
            let c = match c {
                Outcome::Ok(_) if seen == 0 => Outcome::Failed("no byte arrived".into()),
                other => other,
            };
            pty.flush();
            let mut seen = 0;
            let i = run_inside_watched(
                sb,
                fx,
                sp,
                &sp.args,
                Some(pty.slave.try_clone()?),
                &mut || seen = seen.max(pty.pending()),
            );
            let i = if seen > 0 {
                Outcome::Ok(format!("{seen} byte(s) reached the terminal's input"))
            } else {
                i
            };
            pty.flush();
            (c, i)
        }
        Truth::Files | Truth::FilesAfter => {
            fx.reset()?;
            let before = fingerprint(&fx.base.join("fs"));
            let c = run_control(fx, sp, &sp.args, None);
            let changed = fingerprint(&fx.base.join("fs")) != before;
            let c = match c {
                Outcome::Ok(s) if changed => Outcome::Ok(s),
                Outcome::Ok(s) => Outcome::Failed(format!("reported {s} but nothing changed")),
                other => other,
            };
            fx.reset()?;
            let before = fingerprint(&fx.base.join("fs"));
            let i = run_inside(sb, fx, sp, &sp.args, None);
            let after = fingerprint(&fx.base.join("fs"));
            let i = if after != before {
                let diff: Vec<String> = after
                    .iter()
                    .filter(|(k, v)| before.get(*k) != Some(v))
                    .map(|(k, _)| k.display().to_string())
                    .chain(
                        before
                            .keys()
                            .filter(|k| !after.contains_key(*k))
                            .map(|k| k.display().to_string()),
                    )
                    .collect();
                Outcome::Ok(format!("changed {}", diff.join(", ")))
            } else if sp.truth == Truth::FilesAfter {
                Outcome::Failed(format!(
                    "nothing left once the run was over (inside: {})",
                    i.text()
                ))
            } else {
                i
            };
            fx.reset()?;
            (c, i)
        }
        Truth::Listener(w) => {
            let n0 = fx.counters.get(*w);
            let c = run_control(fx, sp, &sp.args, None);
            let got = wait_for(|| fx.counters.get(*w) > n0, Duration::from_secs(2));
            let c = match c {
                Outcome::Ok(s) if !got => {
                    Outcome::Failed(format!("reported {s} but the listener saw nothing"))
                }
                other => other,
            };
            let n1 = fx.counters.get(*w);
            let i = run_inside(sb, fx, sp, &sp.args, None);
            std::thread::sleep(Duration::from_millis(50));
            let n2 = fx.counters.get(*w);
            let i = if n2 > n1 {
                Outcome::Ok(format!(
                    "the listener received {} connection(s)/datagram(s)",
                    n2 - n1
                ))
            } else {
                i
            };
            (c, i)
        }
        Truth::ExecBits(p) => {
            fx.reset()?;
            let c = match run_control(fx, sp, &sp.args, None) {
                Outcome::Ok(s) if exec_bits(p).is_some() => Outcome::Ok(s),
                Outcome::Ok(s) => {
                    Outcome::Failed(format!("reported {s} but the host sees no execute bit"))
                }
                other => other,
            };
            fx.reset()?;
            let i = run_inside(sb, fx, sp, &sp.args, None);
            // What counts is the host once the run is over.
            let i = match (exec_bits(p), i) {
                (Some(mode), _) => {
                    Outcome::Ok(format!("{} has mode {mode:o} on the host", p.display()))
                }
                (None, Outcome::Ok(s)) => {
                    Outcome::Failed(format!("no executable left on the host (inside: {s})"))
                }
                (None, other) => other,
            };
            fx.reset()?;
            (c, i)
        }
        Truth::DeepTmp => {
            let c = deep_tmp_control(fx, sp);
            let i = deep_tmp_inside(fx, sp);
            (c, i)
        }
        Truth::ProcHidesServer(pid) => {
            let judge = |o: Outcome| match o {
                Outcome::Ok(list) if carries_pid(&list, *pid) => {
                    Outcome::Ok(format!("the server's pid {pid} is listed"))
                }
                Outcome::Ok(list) => Outcome::Failed(format!(
                    "only the run's own processes ({})",
                    list.trim_start_matches("pids ")
                )),
                other => other,
            };
            let c = judge(run_control(fx, sp, &sp.args, None));
            let i = judge(run_inside(sb, fx, sp, &sp.args, None));
            (c, i)
        }
        Truth::NoServerPid(pid) => {
            let judge = |o: Outcome| match o {
                Outcome::Ok(path) if carries_pid(&path, *pid) => {
                    Outcome::Ok(format!("TMPDIR {path} carries the server's pid {pid}"))
                }
                Outcome::Ok(path) => Outcome::Failed(format!("no server pid in TMPDIR {path}")),
                other => other,
            };
            let c = judge(run_control(fx, sp, &sp.args, None));
            let i = judge(run_inside(sb, fx, sp, &sp.args, None));
            (c, i)
        }
        Truth::Watch(t) => {
            let mut last = Instant::now();
            let mut fire = || {
                if last.elapsed() > Duration::from_millis(100) {
                    t.fire();
                    last = Instant::now();
                }
            };
            let c = run_control_watched(fx, sp, &sp.args, None, &mut fire);
            let i = run_inside_watched(sb, fx, sp, &sp.args, None, &mut fire);
            (c, i)
        }
        Truth::HostMounts => {
            let host: std::collections::BTreeSet<u64> = host_attempts::listmount()
                .unwrap_or_default()
                .into_iter()
                .collect();
            let judge = |o: Outcome| match o {
                Outcome::Ok(list) => {
                    let ids: Vec<u64> = list.split(',').filter_map(|x| x.parse().ok()).collect();
                    let seen = ids.iter().filter(|i| host.contains(i)).count();
                    if seen > 0 {
                        Outcome::Ok(format!("listed {seen} of the host's {} mounts", host.len()))
                    } else {
                        Outcome::Failed(format!("only the run's own {} mounts", ids.len()))
                    }
                }
                other => other,
            };
            let c = judge(run_control(fx, sp, &sp.args, None));
            let i = judge(run_inside(sb, fx, sp, &sp.args, None));
            (c, i)
        }
        Truth::Reserved(p) => {
            let limit = super::policy::Rlimits::default().file_size;
            let on_disk = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.blocks() * 512);
            let scratch = fx.base.join("reserve-scratch");
            std::fs::write(&scratch, b"")?;
            let mut args = sp.args.clone();
            if let Some(a) = args.first_mut() {
                *a = Fixture::s(&scratch);
            }
            let c = match run_control(fx, sp, &args, None) {
                Outcome::Ok(s) if on_disk(&scratch) > limit => Outcome::Ok(s),
                Outcome::Ok(s) => Outcome::Failed(format!(
                    "reported {s} but the file holds {} bytes",
                    on_disk(&scratch)
                )),
                other => other,
            };
            let _ = std::fs::remove_file(&scratch);
            fx.reset()?;
            let i = run_inside(sb, fx, sp, &sp.args, None);
            let held = on_disk(p);
            let i = if held > limit {
                Outcome::Ok(format!(
                    "{} holds {} MiB on the host after the run",
                    p.display(),
                    held >> 20
                ))
            } else {
                i
            };
            fx.reset()?;
            (c, i)
        }
        Truth::Report => {
            fx.reset()?;
            let c = run_control(fx, sp, &sp.args, None);
            fx.reset()?;
            let i = run_inside(sb, fx, sp, &sp.args, None);
            (c, i)
        }
    };
    let control_ok = matches!(control, Outcome::Ok(_));
    let expected_matches = match (&inside, sp.allowed) {
        (Outcome::Ok(_), true) => true,
        // `A|B`: either answer is right (the first is what every layer in
        // force gives; the second what the layer behind gives alone).
        (Outcome::Failed(s), false) => sp.expect.split('|').any(|e| s.starts_with(e)),
        _ => false,
    };
    let verdict = match (&inside, sp.allowed, control_ok) {
        (Outcome::NotRun(_), _, _) => "FAILED",
        // No layer this machine gives holds it: the server does not make
        // this promise here (its start-up line and `sandbox status` say
        // so), whatever the attempt happened to get. With a layer switched
        // off for the matrix, the prediction is checked instead.
        (_, false, _) if predicted == "escaped" && !switched_off => "not promised",
        (Outcome::Ok(_), true, _) => "allowed",
        (Outcome::Failed(_), true, _) => "BROKEN",
        (Outcome::Ok(_), false, _) => "ESCAPED",
        (Outcome::Failed(_), false, true) => "blocked",
        (Outcome::Failed(_), false, false) => "unproven",
    };
    Ok(Line {
        name: sp.name.clone(),
        verdict,
        inside: inside.text().to_string(),
        expected: sp.expect.clone(),
        expected_matches,
        control: control.text().to_string(),
        control_ok,
        holders: sp.holders.clone(),
        predicted,
    })
}

/// The file's permission bits when it exists with an execute bit.
fn exec_bits(p: &Path) -> Option<u32> {
    let m = std::fs::symlink_metadata(p).ok()?;
    let mode = m.mode() & 0o7777;
    (m.is_file() && mode & 0o111 != 0).then_some(mode)
}

/// Whether `pid` appears in `path` as a whole number.
fn carries_pid(path: &str, pid: u32) -> bool {
    let pid = pid.to_string();
    path.split(|c: char| !c.is_ascii_digit()).any(|t| t == pid)
}

/// Outside: the attempt builds the chain in the control's TMPDIR.
fn deep_tmp_control(fx: &Fixture, sp: &Spec) -> Outcome {
    let marker = sp.args.get(1).cloned().unwrap_or_default();
    match run_control(fx, sp, &sp.args, None) {
        Outcome::Ok(s) if fx.ctl_tmp.join(&marker).is_dir() => Outcome::Ok(s),
        Outcome::Ok(s) => Outcome::Failed(format!("reported {s} but nothing is there")),
        other => other,
    }
}

/// Inside: a stand-in server process runs the attempt as one call, on a
/// thread with a call thread's stack, and cleans up after it. Then nothing
/// of the run may be left in the system temp folder, and the stand-in must
/// have lived to report.
fn deep_tmp_inside(fx: &Fixture, sp: &Spec) -> Outcome {
    let marker = sp.args.get(1).cloned().unwrap_or_default();
    let mut cmd = Command::new(&fx.exe);
    cmd.args(["__probe-attempt", "serve-one-call"])
        .arg(&fx.root)
        .arg(&fx.home)
        .arg(&fx.db)
        .arg(sp.attempt)
        .args(&sp.args)
        .current_dir(&fx.root)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return Outcome::NotRun(format!("stand-in server: {e}")),
    };
    let server = child.id();
    let out = reader(child.stdout.take(), 1 << 16);
    let err = reader(child.stderr.take(), 1 << 16);
    let deadline = Instant::now() + RUN_TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            _ => {
                let _ = child.kill();
                break child.wait().ok();
            }
        }
    };
    let out = out.join().unwrap_or_default();
    let err = err.join().unwrap_or_default();
    // What the run left: its folder by the stand-in's pid, or the chain's
    // top wherever it is.
    let prefix = format!("reachweaver-run-{server}-");
    let mut left = Vec::new();
    if let Ok(d) = std::fs::read_dir(&fx.tmp_base) {
        for e in d.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with(&prefix) || name == marker {
                left.push(e.path());
            } else if std::fs::symlink_metadata(e.path().join(&marker)).is_ok() {
                left.push(e.path().join(&marker));
            }
        }
    }
    for p in &left {
        let _ = cleanup::remove_deep(p);
    }
    use std::os::unix::process::ExitStatusExt;
    if let Some(sig) = status.and_then(|s| s.signal()) {
        return Outcome::Ok(format!(
            "the server stand-in died with {} cleaning up; left {left:?}",
            signal_name(sig)
        ));
    }
    if status.and_then(|s| s.code()) == Some(4) {
        return Outcome::Ok(format!(
            "the server stand-in's call thread panicked cleaning up; left {left:?}"
        ));
    }
    if status.and_then(|s| s.code()) == Some(3) {
        return Outcome::NotRun(format!(
            "stand-in server: {}",
            String::from_utf8_lossy(&err).trim()
        ));
    }
    if !left.is_empty() {
        return Outcome::Ok(format!("left behind in the temp folder: {left:?}"));
    }
    match parse_report(&out, status) {
        Outcome::Ok(_) => Outcome::Failed("cleaned up".into()),
        other => other,
    }
}

/// `__probe-attempt serve-one-call ROOT HOME DB ATTEMPT ARGS...`: what the
/// server does for one call (a sandbox of the probe's shape, the run on a
/// thread with a call thread's stack, the clean-up when it ends), printing
/// the run's report. Exit 3 when the sandbox can't be set up.
pub(crate) fn serve_one_call(args: &[String]) -> u8 {
    // The server's call threads have this stack (see serve.rs).
    const CALL_STACK: usize = 512 * 1024;
    if args.len() < 4 {
        eprintln!("serve-one-call: ROOT HOME DB ATTEMPT [ARGS...]");
        return 3;
    }
    let args = args.to_vec();
    let call = move || -> Result<Vec<u8>, String> {
        let exe = std::env::current_exe()
            .and_then(std::fs::canonicalize)
            .map_err(|e| e.to_string())?;
        let root = PathBuf::from(&args[0]);
        let opts = SandboxOptions {
            mode: SandboxMode::Require,
            backend: exe.clone(),
            root: root.clone(),
            read: vec![PathBuf::from(&args[1])],
            home: Some(PathBuf::from(&args[1])),
            db: Some(PathBuf::from(&args[2])),
            allow_read: Vec::new(),
            pass_env: Vec::new(),
            ..SandboxOptions::default()
        };
        let sb = Sandbox::detect(&opts).map_err(|e| e.to_string())?;
        let mut argv = vec![Fixture::s(&exe), "__probe-attempt".to_string()];
        argv.extend(args[3..].iter().cloned());
        let mut child = sb
            .spawn(RunKind::ReadOnly, &argv, &root)
            .map_err(|e| e.to_string())?;
        let out = reader(child.stdout.take(), 1 << 16);
        let _ = child.wait();
        // Dropping the run removes its temp folder, here on the call thread.
        drop(child);
        Ok(out.join().unwrap_or_default())
    };
    let thread = match std::thread::Builder::new()
        .stack_size(CALL_STACK)
        .spawn(call)
    {
        Ok(t) => t,
        Err(e) => {
            eprintln!("serve-one-call: {e}");
            return 3;
        }
    };
    match thread.join() {
        Ok(Ok(out)) => {
            let mut o = std::io::stdout().lock();
            let _ = o.write_all(&out);
            let _ = o.flush();
            0
        }
        Ok(Err(e)) => {
            eprintln!("serve-one-call: {e}");
            3
        }
        // A server's call thread that panics fails its call at least.
        Err(_) => 4,
    }
}

/// Flood stdout; read up to the cap, then kill the run. Contained means the
/// whole run was gone right after the kill.
fn flood(fx: &Fixture, sp: &Spec, sb: Option<&Sandbox>) -> Outcome {
    const CAP: usize = 4 << 20;
    let drain = |r: &mut dyn Read| -> usize {
        let mut buf = vec![0u8; 1 << 16];
        let mut total = 0;
        while total < CAP {
            match r.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => total += n,
            }
        }
        total
    };
    match sb {
        None => {
            let mut child = match Command::new(&fx.exe)
                .args(["__probe-attempt", sp.attempt])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
            {
                Ok(c) => c,
                Err(e) => return Outcome::Failed(e.to_string()),
            };
            let got = child.stdout.as_mut().map(|s| drain(s)).unwrap_or(0);
            let _ = child.kill();
            let _ = child.wait();
            if got >= CAP {
                Outcome::Ok(format!("{got} bytes"))
            } else {
                Outcome::Failed(format!("only {got} bytes"))
            }
        }
        Some(sb) => {
            let argv = vec![
                Fixture::s(&fx.exe),
                "__probe-attempt".into(),
                sp.attempt.into(),
            ];
            let tmp_before = run_tmpdirs();
            let mut child = match sb.spawn(RunKind::ReadOnly, &argv, &fx.root) {
                Ok(c) => c,
                Err(e) => return Outcome::NotRun(format!("sandbox: {e}")),
            };
            let mut stdout = child.stdout.take();
            let got = stdout.as_mut().map(|s| drain(s)).unwrap_or(0);
            let t = Instant::now();
            child.kill_tree();
            let waited = child.wait();
            drop(child);
            // The reader sees end of file only when every process holding
            // the pipe is gone.
            let eof = stdout
                .as_mut()
                .map(|s| {
                    let mut buf = vec![0u8; 1 << 16];
                    loop {
                        match s.read(&mut buf) {
                            Ok(0) => break true,
                            Ok(_) => continue,
                            Err(_) => break false,
                        }
                    }
                })
                .unwrap_or(true);
            let elapsed = t.elapsed();
            let leftover: Vec<PathBuf> = run_tmpdirs()
                .into_iter()
                .filter(|d| !tmp_before.contains(d))
                .collect();
            if got < CAP {
                Outcome::Ok(format!("the run stopped by itself after {got} bytes"))
            } else if waited.is_err()
                || !eof
                || elapsed > Duration::from_secs(5)
                || !leftover.is_empty()
            {
                Outcome::Ok(format!(
                    "not contained: eof={eof} after {elapsed:?}, temp folders left {leftover:?}"
                ))
            } else {
                Outcome::Failed("contained".into())
            }
        }
    }
}

/// This process's private run folders currently in the temp folder.
fn run_tmpdirs() -> Vec<PathBuf> {
    let Ok(prefix) = crate::sandbox::tmpdir::own_run_prefix() else {
        return Vec::new();
    };
    let Ok(tmp) = std::fs::canonicalize(std::env::temp_dir()) else {
        return Vec::new();
    };
    std::fs::read_dir(tmp)
        .map(|d| {
            d.flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default()
}

/// A backend that leaves a daemon behind and returns: the daemon must be
/// gone once the call is over.
fn daemon(fx: &Fixture, sp: &Spec, sb: Option<&Sandbox>) -> Outcome {
    let marker = fx.marker();
    let args = vec![marker.clone()];
    match sb {
        None => {
            let r = run_control(fx, sp, &args, None);
            let alive = wait_for(|| !marker_pids(&marker).is_empty(), Duration::from_secs(20));
            kill_marker(&marker);
            match r {
                Outcome::Ok(_) if alive => Outcome::Ok("the daemon outlived the call".into()),
                Outcome::Ok(_) => Outcome::Failed("no daemon seen".into()),
                other => other,
            }
        }
        Some(sb) => {
            let r = run_inside(sb, fx, sp, &args, None);
            // Give a surviving daemon time to show up.
            std::thread::sleep(Duration::from_millis(300));
            let left = marker_pids(&marker);
            kill_marker(&marker);
            match r {
                Outcome::Ok(_) if left.is_empty() => Outcome::Failed("gone".into()),
                Outcome::Ok(_) => {
                    Outcome::Ok(format!("the daemon outlived the call (pids {left:?})"))
                }
                Outcome::Failed(e) => Outcome::Failed(format!("the attempt failed: {e}")),
                not_run @ Outcome::NotRun(_) => not_run,
            }
        }
    }
}

/// Two calls in a row: the first leaves traces, the second (the attempt)
/// looks for them. Outside, both run as plain children of the probe.
fn next_call(fx: &Fixture, sp: &Spec, sb: Option<&Sandbox>) -> Outcome {
    let marker = fx.marker();
    let args = vec![marker.clone()];
    let first = spec("leave-traces", "leave-traces", vec![], "", &[]);
    let first = Spec {
        control: sp.control,
        kind: sp.kind,
        ..first
    };
    let left = match sb {
        None => run_control(fx, &first, &args, None),
        Some(sb) => run_inside(sb, fx, &first, &args, None),
    };
    let found = match left {
        Outcome::Ok(_) => match sb {
            // The control's TMPDIR is emptied before each run: the second
            // finds the other traces.
            None => run_control(fx, sp, &args, None),
            Some(sb) => run_inside(sb, fx, sp, &args, None),
        },
        Outcome::Failed(e) => Outcome::Failed(format!("the first call failed: {e}")),
        not_run @ Outcome::NotRun(_) => not_run,
    };
    // Whatever was left and not found (a daemon the attempt could not see).
    kill_marker(&marker);
    found
}

/// Outside: a process whose parent is killed keeps running (orphans live on).
fn outlive_control(fx: &Fixture) -> Outcome {
    let marker = fx.marker();
    let mut parent = match Command::new(&fx.exe)
        .args(["__probe-attempt", "daemon", &marker])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => return Outcome::Failed(e.to_string()),
    };
    let seen = wait_for(|| !marker_pids(&marker).is_empty(), Duration::from_secs(5));
    let _ = parent.kill();
    let _ = parent.wait();
    std::thread::sleep(Duration::from_millis(200));
    let alive = !marker_pids(&marker).is_empty();
    kill_marker(&marker);
    if seen && alive {
        Outcome::Ok("the process outlived its killed parent".into())
    } else {
        Outcome::Failed("no surviving process seen".into())
    }
}

/// Inside: `sandbox run` (standing in for the server) is killed with
/// SIGKILL while its run sleeps; the run must die with it.
fn outlive_inside(fx: &Fixture) -> Outcome {
    let marker = fx.marker();
    let mut server = match Command::new(&fx.exe)
        .arg("sandbox")
        .arg("run")
        .arg("--root")
        .arg(&fx.root)
        .arg("--")
        .arg(&fx.exe)
        .args(["__probe-attempt", "sleep-marker", &marker])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => return Outcome::Failed(e.to_string()),
    };
    let started = wait_for(|| !marker_pids(&marker).is_empty(), Duration::from_secs(10));
    let _ = server.kill();
    let _ = server.wait();
    if !started {
        kill_marker(&marker);
        return Outcome::Failed("the run never started (proves nothing)".into());
    }
    if wait_for(|| marker_pids(&marker).is_empty(), Duration::from_secs(3)) {
        Outcome::Failed("gone".into())
    } else {
        let left = marker_pids(&marker);
        kill_marker(&marker);
        Outcome::Ok(format!(
            "the run outlived the killed server (pids {left:?})"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_holder_is_part_of_a_listed_layer() {
        use Holder::*;
        for h in [
            Seccomp,
            Landlock,
            LandlockTcp,
            LandlockScope,
            LandlockUnix,
            Netns,
            Caps,
            Userns,
            NsLimits,
            MemfdNoexec,
            Pidns,
            PidMax,
            Nproc,
            Rlimits,
            Mountns,
            Tmpfs,
            Noexec,
            Utsns,
        ] {
            let name = h.layer().unwrap_or_else(|| panic!("{h:?} names no layer"));
            assert!(
                crate::sandbox::layers::info(name).is_some(),
                "{h:?}: {name}"
            );
        }
        assert_eq!(Helper.layer(), None);
        // Switched on exactly when its layer is.
        let on = Layers {
            mountns: true,
            ..Layers::default()
        };
        assert!(Noexec.active(&on, 0) && !Seccomp.active(&on, 0));
    }
}
