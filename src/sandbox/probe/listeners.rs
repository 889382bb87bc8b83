//! The probe's loopback listeners on the host, on Linux and macOS: each
//! counts what reaches it, so a connection that got through is seen
//! whatever the attempt reports.

use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use anyhow::Context;

use crate::sandbox::sockpath;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Which {
    Tcp4,
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    Tcp6,
    Udp,
    Unix,
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    Abstract,
}

#[derive(Default)]
pub(crate) struct Counters {
    tcp4: AtomicUsize,
    tcp6: AtomicUsize,
    udp: AtomicUsize,
    unix: AtomicUsize,
    abstract_: AtomicUsize,
}

impl Counters {
    fn of(&self, w: Which) -> &AtomicUsize {
        match w {
            Which::Tcp4 => &self.tcp4,
            Which::Tcp6 => &self.tcp6,
            Which::Udp => &self.udp,
            Which::Unix => &self.unix,
            Which::Abstract => &self.abstract_,
        }
    }

    pub(crate) fn get(&self, w: Which) -> usize {
        self.of(w).load(Ordering::SeqCst)
    }

    fn hit(&self, w: Which) {
        self.of(w).fetch_add(1, Ordering::SeqCst);
    }
}

/// TCP on 127.0.0.1 (and ::1 on Linux), UDP on 127.0.0.1, a unix socket
/// in a short folder of its own, and on Linux an abstract unix socket.
/// The socket's folder goes with it.
pub(crate) struct Listeners {
    pub(crate) tcp4: SocketAddr,
    #[cfg(target_os = "linux")]
    pub(crate) tcp6: SocketAddr,
    pub(crate) udp: SocketAddr,
    pub(crate) host_sock: PathBuf,
    /// The socket's own short folder under /tmp (see `sockpath`).
    sock_dir: PathBuf,
    #[cfg(target_os = "linux")]
    pub(crate) abstract_name: String,
    pub(crate) counters: Arc<Counters>,
}

impl Drop for Listeners {
    fn drop(&mut self) {
        crate::sandbox::remove_tree(&self.sock_dir);
    }
}

impl Listeners {
    pub(crate) fn start() -> anyhow::Result<Listeners> {
        // The socket's path must fit sun_path whatever TMPDIR is (about 50
        // bytes on macOS already): a short folder of its own under /tmp.
        let sock_dir = sockpath::probe_socket_dir(crate::sandbox::random_u64());
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&sock_dir)
            .with_context(|| format!("{}", sock_dir.display()))?;
        let counters = Arc::new(Counters::default());
        let host_sock = sock_dir.join(sockpath::PROBE_SOCKET);
        let net = Listeners {
            tcp4: "127.0.0.1:9".parse()?,
            #[cfg(target_os = "linux")]
            tcp6: "[::1]:9".parse()?,
            udp: "127.0.0.1:9".parse()?,
            host_sock,
            sock_dir,
            #[cfg(target_os = "linux")]
            abstract_name: format!(
                "reachweaver-probe-{}-{:x}",
                std::process::id(),
                crate::sandbox::random_u64()
            ),
            counters,
        };
        net.bind()
    }

    fn bind(mut self) -> anyhow::Result<Listeners> {
        if !sockpath::fits_sun_path(&self.host_sock, sockpath::SUN_PATH) {
            anyhow::bail!(
                "the probe's socket path {} is too long for a unix socket",
                self.host_sock.display()
            );
        }
        let tcp4 = TcpListener::bind("127.0.0.1:0")?;
        self.tcp4 = tcp4.local_addr()?;
        accept(tcp4, self.counters.clone(), Which::Tcp4);
        #[cfg(target_os = "linux")]
        {
            // No IPv6 loopback: the control will fail and say so.
            if let Ok(l) = TcpListener::bind("[::1]:0") {
                self.tcp6 = l.local_addr()?;
                accept(l, self.counters.clone(), Which::Tcp6);
            }
        }
        let udp = UdpSocket::bind("127.0.0.1:0")?;
        self.udp = udp.local_addr()?;
        {
            let c = self.counters.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 2048];
                while udp.recv_from(&mut buf).is_ok() {
                    c.hit(Which::Udp);
                }
            });
        }
        let unix = UnixListener::bind(&self.host_sock)?;
        count_unix(unix, self.counters.clone(), Which::Unix);
        #[cfg(target_os = "linux")]
        {
            use std::os::linux::net::SocketAddrExt;
            let addr =
                std::os::unix::net::SocketAddr::from_abstract_name(self.abstract_name.as_bytes())?;
            count_unix(
                UnixListener::bind_addr(&addr)?,
                self.counters.clone(),
                Which::Abstract,
            );
        }
        Ok(self)
    }
}

fn accept(l: TcpListener, c: Arc<Counters>, w: Which) {
    std::thread::spawn(move || {
        for s in l.incoming() {
            if s.is_ok() {
                c.hit(w);
            }
        }
    });
}

fn count_unix(l: UnixListener, c: Arc<Counters>, w: Which) {
    std::thread::spawn(move || {
        for s in l.incoming() {
            if s.is_ok() {
                c.hit(w);
            }
        }
    });
}
