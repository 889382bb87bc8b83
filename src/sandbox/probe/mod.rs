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

pub mod attempts;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Serialize;

use super::policy::Layers;
use super::{Layer, RunKind, Sandbox, SandboxOptions};
use crate::cli::SandboxMode;

/// A layer (or mechanism) that stops an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Holder {
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
    Pidns,
    PidMax,
    /// RLIMIT_NPROC (the kernel exempts real root).
    Nproc,
    Rlimits,
    /// What the helper does whatever the layers: the built environment,
    /// no_new_privs, the kill path.
    Helper,
}

impl Holder {
    fn active(self, l: &Layers, uid: u32) -> bool {
        match self {
            Holder::Seccomp => l.seccomp,
            Holder::Landlock => l.landlock_abi.is_some(),
            Holder::LandlockTcp => l.landlock_net,
            Holder::LandlockScope => l.landlock_scope,
            Holder::LandlockUnix => l.landlock_abi.is_some_and(|a| a >= 9),
            Holder::Netns => l.netns,
            Holder::Caps => l.caps,
            Holder::Userns => l.userns,
            Holder::NsLimits => l.ns_limits,
            Holder::Pidns => l.pidns,
            Holder::PidMax => l.pid_max.is_some(),
            Holder::Nproc => l.rlimits && uid != 0,
            Holder::Rlimits => l.rlimits,
            Holder::Helper => true,
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
    /// The terminal's input queue must stay empty.
    Tty,
    Flood,
    Daemon,
    OutliveParent,
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
    host_sock: PathBuf,
    abstract_name: String,
    tcp4: SocketAddr,
    tcp6: SocketAddr,
    udp: SocketAddr,
    counters: Arc<Counters>,
    marker_seq: AtomicUsize,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        super::remove_tree(&self.base);
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
        let sockets = base.join("sockets");
        std::fs::create_dir(&sockets)?;
        let counters = Arc::new(Counters::default());
        let host_sock = sockets.join("host.sock");
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
            base,
            exe,
            host_sock,
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

    /// Rebuild the file fixture from scratch (attempts change it on purpose).
    fn reset(&self) -> anyhow::Result<()> {
        let fs = self.base.join("fs");
        if fs.exists() {
            super::remove_tree(&fs);
        }
        for d in [&self.root, &self.home, &self.outside] {
            std::fs::create_dir_all(d)?;
            std::fs::write(d.join("victim.txt"), b"original\n")?;
            std::fs::set_permissions(d.join("victim.txt"), std::fs::Permissions::from_mode(0o644))?;
        }
        std::fs::create_dir_all(self.root.join("sub"))?;
        std::fs::write(self.root.join("sub/inside.txt"), b"inside the root\n")?;
        std::fs::write(self.outside.join("secret.txt"), b"outside the root\n")?;
        std::os::unix::fs::symlink("../outside/secret.txt", self.root.join("link-out"))?;
        std::fs::create_dir_all(self.db.parent().context("db folder")?)?;
        std::fs::write(&self.db, b"SQLite format 3\0probe database\n")?;
        let t = self.outside.join("true");
        let small = ["/usr/bin/true", "/bin/true"]
            .into_iter()
            .map(Path::new)
            .find(|p| p.exists());
        std::fs::copy(small.unwrap_or(&self.exe), &t)?;
        std::fs::set_permissions(&t, std::fs::Permissions::from_mode(0o755))?;
        std::fs::create_dir_all(self.root.join("mnt"))?;
        Ok(())
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
    fn specs(&self, server_pid: u32) -> Vec<Spec> {
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
                &[Landlock],
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
                &[Seccomp, LandlockUnix],
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
                "EACCES",
                &[Landlock],
            ),
            spec(
                "list-outside-root",
                "list",
                vec![s(&self.outside)],
                "EACCES",
                &[Landlock],
            ),
            spec(
                "read-symlink-out-of-root",
                "read",
                vec![s(&self.root.join("link-out"))],
                "EACCES",
                &[Landlock],
            ),
            spec(
                "read-dotdot-out-of-root",
                "read",
                vec![s(&self.root.join("../outside/secret.txt"))],
                "EACCES",
                &[Landlock],
            ),
            spec(
                "exec-outside-runtime",
                "exec",
                vec![s(&self.outside.join("true"))],
                "EACCES",
                &[Landlock],
            ),
            spec(
                "write-database",
                "write",
                vec![s(&self.db)],
                "EACCES",
                &[Landlock],
            )
            .truth(Truth::Files),
            spec(
                "draft-create-in-root",
                "create",
                vec![s(&self.root.join("new.txt"))],
                "EACCES",
                &[Landlock],
            )
            .truth(Truth::Files)
            .draft(),
            spec(
                "draft-create-in-home",
                "create",
                vec![s(&self.home.join("new.txt"))],
                "EACCES",
                &[Landlock],
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
                        "EACCES",
                        &[Landlock],
                    )
                    .truth(Truth::Files),
                );
            }
        }
        // Metadata changes Landlock does not cover: seccomp alone refuses them.
        let host_file = s(&self.outside.join("victim.txt"));
        for attempt in ["chmod", "chown", "utime", "setxattr"] {
            v.push(
                spec(
                    format!("{attempt}-host-file"),
                    attempt,
                    vec![host_file.clone()],
                    "EPERM",
                    &[Seccomp],
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
                "EACCES",
                &[Landlock, Userns],
            ),
            spec(
                "read-server-cmdline",
                "read",
                vec![format!("/proc/{server_pid}/cmdline")],
                "EACCES",
                &[Landlock],
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
            spec("setuid-0", "setuid-0", vec![], "EINVAL", &[Userns, Caps]).in_userns(),
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
            spec(
                "caps-held",
                "caps-held",
                vec![],
                "CapEff=0 CapPrm=0 CapInh=0 CapBnd=0 CapAmb=0",
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
            spec("daemon-outlives-call", "daemon", vec![], "gone", &[Pidns]).truth(Truth::Daemon),
            spec(
                "run-outlives-killed-server",
                "sleep-marker",
                vec![],
                "gone",
                &[Pidns],
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
        v
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
    let mut cmd = Command::new(&fx.exe);
    cmd.arg("__probe-attempt")
        .arg(name)
        .args(args)
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
            map.insert(
                p.clone(),
                format!(
                    "{:o} {} {} {} {}.{} {}.{} {} {xattr} {content}",
                    m.mode(),
                    m.uid(),
                    m.gid(),
                    m.len(),
                    m.mtime(),
                    m.mtime_nsec(),
                    m.ctime(),
                    m.ctime_nsec(),
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
pub struct Line {
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
pub struct Report {
    pub layers: String,
    pub without: Option<&'static str>,
    pub uid: u32,
    pub landlock_abi: Option<i32>,
    pub attempts: Vec<Line>,
    pub escaped: usize,
    pub broken: usize,
}

/// `sandbox probe`.
pub fn run(json: bool, without: Option<Layer>) -> anyhow::Result<u8> {
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
        db: Some(fx.db.clone()),
        allow_read: Vec::new(),
        pass_env: Vec::new(),
        helper: None,
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
    for sp in fx.specs(server_pid) {
        let l = run_one(&sb, &fx, &sp, &layers, uid)?;
        if !json {
            writeln!(out, "{}", render(&l))?;
            out.flush()?;
        }
        lines.push(l);
    }
    let escaped = lines.iter().filter(|l| l.verdict == "ESCAPED").count();
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
            "{} attempts: {} got through, {} broken or not run, {} proved nothing (control failed)",
            report.attempts.len(),
            escaped,
            broken,
            unproven
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
    s
}

fn run_one(
    sb: &Sandbox,
    fx: &Fixture,
    sp: &Spec,
    layers: &Layers,
    uid: u32,
) -> anyhow::Result<Line> {
    let predicted = if sp.allowed || sp.holders.iter().any(|h| h.active(layers, uid)) {
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
        Truth::Files => {
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
        (Outcome::Failed(s), false) => s.starts_with(&sp.expect),
        _ => false,
    };
    let verdict = match (&inside, sp.allowed, control_ok) {
        (Outcome::NotRun(_), _, _) => "FAILED",
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
    let prefix = format!("reachweaver-run-{}-", std::process::id());
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
            let alive = wait_for(|| !marker_pids(&marker).is_empty(), Duration::from_secs(3));
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
