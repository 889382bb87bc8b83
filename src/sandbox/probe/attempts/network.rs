//! Attempts on the network: connections to the probe's loopback listeners,
//! the resolver, sockets of families a backend has no use for.

use super::errno::{check, cstr, io, os_err};
use super::Tried;

pub(super) fn unix_connect(path: &str) -> Tried {
    std::os::unix::net::UnixStream::connect(path)
        .map(|_| "connected".to_string())
        .map_err(io)
}

pub(super) fn tcp_connect(addr: &str) -> Tried {
    let a: std::net::SocketAddr = addr.parse().map_err(|_| "bad address")?;
    std::net::TcpStream::connect_timeout(&a, std::time::Duration::from_secs(3))
        .map(|_| "connected".into())
        .map_err(io)
}

pub(super) fn udp_send(addr: &str) -> Tried {
    let a: std::net::SocketAddr = addr.parse().map_err(|_| "bad address")?;
    let s = std::net::UdpSocket::bind("127.0.0.1:0").map_err(io)?;
    s.send_to(b"reachweaver-probe", a)
        .map(|n| format!("sent {n} bytes"))
        .map_err(io)
}

/// `count` TCP connects to `host`, each to a port of its own from 1024 up:
/// as many distinct destinations. Reports how many connected.
pub(super) fn connect_many(host: &str, count: &str) -> Tried {
    let ip: std::net::IpAddr = host.parse().map_err(|_| "bad address")?;
    let n: u16 = count.parse().map_err(|_| "bad count")?;
    let mut connected = 0;
    let mut last = String::new();
    for i in 0..n {
        let a = std::net::SocketAddr::new(ip, 1024 + i);
        match std::net::TcpStream::connect_timeout(&a, std::time::Duration::from_secs(3)) {
            Ok(_) => connected += 1,
            Err(e) => last = io(e),
        }
    }
    if connected > 0 {
        Ok(format!("{connected} of {n} connected"))
    } else {
        Err(format!("{last} ({n} refused)"))
    }
}

/// `getaddrinfo`, reporting the resolver's own error code.
pub(super) fn dns_lookup(name: &str) -> Tried {
    let host = cstr(name)?;
    let mut res: *mut libc::addrinfo = std::ptr::null_mut();
    // SAFETY: getaddrinfo with a C string we own; the result is freed below.
    let r =
        unsafe { libc::getaddrinfo(host.as_ptr(), std::ptr::null(), std::ptr::null(), &mut res) };
    if r == 0 {
        // SAFETY: freeing what getaddrinfo returned.
        unsafe { libc::freeaddrinfo(res) };
        return Ok(format!("{name} resolved"));
    }
    let code = match r {
        libc::EAI_AGAIN => "EAI_AGAIN".to_string(),
        libc::EAI_FAIL => "EAI_FAIL".to_string(),
        libc::EAI_NONAME => "EAI_NONAME".to_string(),
        libc::EAI_NODATA => "EAI_NODATA".to_string(),
        libc::EAI_SYSTEM => format!("EAI_SYSTEM({})", os_err()),
        other => format!("EAI({other})"),
    };
    Err(code)
}

pub(super) fn socket(kind: &str) -> Tried {
    let (family, ty, proto) = match kind {
        "raw" => (libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_ICMP),
        "packet" => (libc::AF_PACKET, libc::SOCK_RAW, 0),
        "netlink" => (libc::AF_NETLINK, libc::SOCK_RAW, libc::NETLINK_ROUTE),
        "vsock" => (libc::AF_VSOCK, libc::SOCK_STREAM, 0),
        "unix" => (libc::AF_UNIX, libc::SOCK_STREAM, 0),
        other => return Err(format!("unknown socket kind {other}")),
    };
    // SAFETY: socket takes integers; the descriptor is closed at once.
    let fd = check(unsafe { libc::socket(family, ty | libc::SOCK_CLOEXEC, proto) } as _)?;
    // SAFETY: closing the descriptor just made, which nothing else owns.
    unsafe { libc::close(fd as i32) };
    Ok(format!("{kind} socket created"))
}

pub(super) fn mptcp_connect(addr: &str) -> Tried {
    let a: std::net::SocketAddrV4 = addr.parse().map_err(|_| "bad address")?;
    // SAFETY: socket/connect/close on a descriptor we own, with a sockaddr we built.
    unsafe {
        let fd =
            check(libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 262) as _)?
                as i32;
        let sa = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: a.port().to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from(*a.ip()).to_be(),
            },
            sin_zero: [0; 8],
        };
        let r = libc::connect(
            fd,
            (&sa as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as u32,
        );
        let e = os_err();
        libc::close(fd);
        if r == 0 {
            Ok("connected".into())
        } else {
            Err(e)
        }
    }
}

pub(super) fn abstract_connect(name: &str) -> Tried {
    use std::os::linux::net::SocketAddrExt;
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).map_err(io)?;
    std::os::unix::net::UnixStream::connect_addr(&addr)
        .map(|_| "connected".into())
        .map_err(io)
}

pub(super) fn socketpair(kind: &str) -> Tried {
    let ty = match kind {
        "dgram" => libc::SOCK_DGRAM,
        "seqpacket" => libc::SOCK_SEQPACKET,
        "stream" => libc::SOCK_STREAM,
        other => return Err(format!("unknown type {other}")),
    };
    let mut fds = [0i32; 2];
    check(
        // SAFETY: socketpair writes two descriptors into fds, which holds two.
        unsafe { libc::socketpair(libc::AF_UNIX, ty | libc::SOCK_CLOEXEC, 0, fds.as_mut_ptr()) }
            as _,
    )?;
    // SAFETY: closing the two descriptors socketpair just made, which nothing else owns.
    unsafe {
        libc::close(fds[0]);
        libc::close(fds[1]);
    }
    Ok(format!("{kind} pair created"))
}

/// `sockaddr_in` whose address another thread may rewrite while a call
/// reads it.
#[repr(C)]
struct SwappedAddr {
    family: libc::sa_family_t,
    port: u16,
    addr: std::sync::atomic::AtomicU32,
    zero: [u8; 8],
}

/// Up to `count` TCP connects to `target` (an IPv4 `address:port`) while
/// another thread flips the address the call reads between the target's
/// and TEST-NET-1's (192.0.2.1) in a loop: what a supervisor reads may not
/// be what the kernel would connect to. Stops at the first connect that
/// is established, so the listener sees at most one connection (a second
/// still waiting in its queue would be counted against the next run);
/// one to TEST-NET-1 that doesn't answer within a second is dropped.
pub(super) fn connect_swapped(target: &str, count: &str) -> Tried {
    use std::sync::atomic::{AtomicBool, Ordering};
    let to: std::net::SocketAddrV4 = target.parse().map_err(|_| "bad address")?;
    let n: u32 = count.parse().map_err(|_| "bad count")?;
    let real = u32::from_ne_bytes(to.ip().octets());
    let decoy = u32::from_ne_bytes([192, 0, 2, 1]);
    let addr = SwappedAddr {
        family: libc::AF_INET as libc::sa_family_t,
        port: to.port().to_be(),
        addr: std::sync::atomic::AtomicU32::new(real),
        zero: [0; 8],
    };
    let done = AtomicBool::new(false);
    let mut last = String::new();
    let mut connected = None;
    std::thread::scope(|s| {
        s.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                addr.addr.store(decoy, Ordering::Relaxed);
                addr.addr.store(real, Ordering::Relaxed);
            }
        });
        for i in 0..n {
            match connect_once(&addr) {
                Ok(()) => {
                    connected = Some(i + 1);
                    break;
                }
                Err(e) => last = e,
            }
        }
        done.store(true, Ordering::Relaxed);
    });
    match connected {
        Some(i) => Ok(format!("connected at connect {i} of {n}")),
        None => Err(format!("{last} ({n} refused)")),
    }
}

/// One non-blocking connect to `addr`, waited for up to a second.
fn connect_once(addr: &SwappedAddr) -> Result<(), String> {
    // SAFETY: socket takes no pointer.
    let fd = unsafe {
        libc::socket(
            libc::AF_INET,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    };
    if fd < 0 {
        return Err(os_err());
    }
    // SAFETY: `addr` has sockaddr_in's layout (AtomicU32 is a u32) and
    // outlives the call.
    let rc = unsafe {
        libc::connect(
            fd,
            std::ptr::from_ref(addr).cast(),
            std::mem::size_of::<SwappedAddr>() as libc::socklen_t,
        )
    };
    let outcome = if rc == 0 {
        Ok(())
    } else if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINPROGRESS) {
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLOUT,
            revents: 0,
        };
        // SAFETY: poll on one descriptor we own.
        match unsafe { libc::poll(&mut pfd, 1, 1000) } {
            1 => {
                let mut err: libc::c_int = 0;
                let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
                // SAFETY: SO_ERROR writes one int into `err`, `len` its size.
                let rc = unsafe {
                    libc::getsockopt(
                        fd,
                        libc::SOL_SOCKET,
                        libc::SO_ERROR,
                        std::ptr::addr_of_mut!(err).cast(),
                        &mut len,
                    )
                };
                match (rc, err) {
                    (0, 0) => Ok(()),
                    (0, e) => Err(super::errno::errno_name(e)),
                    _ => Err(os_err()),
                }
            }
            _ => Err("ETIMEDOUT".to_string()),
        }
    } else {
        Err(os_err())
    };
    // SAFETY: closing the socket made above.
    unsafe { libc::close(fd) };
    outcome
}
