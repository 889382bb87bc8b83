//! The run's supervisor: the network calls the watched seccomp filter
//! hands over (`seccomp::WATCHED`) are read, recorded and answered here,
//! and so is every call the plain filter refuses with an errno (answered
//! that errno, recorded by name),
//! on the thread that already polls the run's pipes (`run.rs`), never on a
//! thread of its own.
//!
//! Two sides, two processes:
//!
//! - the run's init installs the watched filter with a listener
//!   ([`install`]), passes the listener to the server on the run channel
//!   and seals the two holes the filter left for exactly that
//!   ([`hand_over`]), before the backend is forked;
//! - the server holds the listener ([`Supervisor`]) and answers each call.
//!
//! What it may answer: an error, or success without doing anything (a
//! `connect` to port 53, so a resolver goes on to send its query and
//! shows the name). It lets a call go on (`CONTINUE`) only on a local
//! socket or one without a destination, where the empty network namespace
//! holds whatever the call does; the memory it read may have changed
//! since, which matters to the report only, never to what is reachable.
//! A closed listener makes the kernel fail every watched call (`ENOSYS`).

use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicI32, Ordering};

use crate::sandbox::denied::{dns_query_name, Attempt, Denied, Watch};
use crate::sandbox::Layer;

use super::wire::{channel, Failure};
use super::{refused, seccomp};

// ---------------------------------------------------------------------------
// The run's side (init, single-threaded).

/// The listener between [`install`] and [`hand_over`]: init takes its
/// steps through `steps.rs`, which has nowhere else to put it.
static PENDING: AtomicI32 = AtomicI32::new(-1);

/// Install the watched filter with a listener; where the kernel has no
/// user notification (or an outer supervisor holds one), the plain filter
/// instead, and the run is reported unwatched.
pub(super) fn install(
    watched: &seccomp::Watched,
    plain: &seccompiler::BpfProgram,
) -> Result<(), Failure> {
    match seccomp::apply_with_listener(&watched.filter) {
        Ok(fd) => {
            PENDING.store(fd.into_raw_fd(), Ordering::Relaxed);
            Ok(())
        }
        Err(_) => seccomp::apply(plain).map_err(Failure::of(Layer::Seccomp)),
    }
}

/// Pass a pending listener to the server on `channel` and seal the holes;
/// nothing when there is none. A listener that can't be passed fails the
/// run: it must not go on with nobody watching and nobody told.
pub(super) fn hand_over(channel_fd: RawFd, seal: &seccompiler::BpfProgram) -> Result<(), Failure> {
    let fd = PENDING.swap(-1, Ordering::Relaxed);
    if fd < 0 {
        return Ok(());
    }
    // SAFETY: `install` gave this descriptor up to PENDING, and the swap
    // took it back: no one else owns it.
    let listener = unsafe { OwnedFd::from_raw_fd(fd) };
    let sent = channel::send_listener(channel_fd, listener.as_raw_fd());
    drop(listener);
    if !sent {
        return Err(Failure::layer(
            Layer::Seccomp,
            "seccomp: the listener could not be passed to the server",
        ));
    }
    seccomp::apply_seal(seal).map_err(|e| {
        Failure::layer(
            Layer::Seccomp,
            format!("seccomp: sealing the listener's handover: {e}"),
        )
    })
}

/// A spare armed ahead says it is ready: with its pending listener, which
/// the zygote passes on with the run's first message (nothing more on the
/// call's path), then the seal; a plain word when there is none. Whether
/// the word went out (a failed seal is a failed set-up: no word).
pub(super) fn announce(spare_socket: RawFd, seal: &seccompiler::BpfProgram) -> bool {
    let fd = PENDING.swap(-1, Ordering::Relaxed);
    if fd < 0 {
        return super::wire::ready::announce(spare_socket);
    }
    // SAFETY: `install` gave this descriptor up to PENDING, and the swap
    // took it back: no one else owns it.
    let listener = unsafe { OwnedFd::from_raw_fd(fd) };
    // The handover first: the seal refuses it. A spare whose seal fails
    // exits, and its run with it, before any request reaches it.
    let sent = super::wire::ready::announce_with(spare_socket, listener.as_raw_fd());
    drop(listener);
    sent && seccomp::apply_seal(seal).is_ok()
}

// ---------------------------------------------------------------------------
// The server's side.

/// Largest socket address read from a run.
const MAX_SOCKADDR: usize = 128;
/// Largest datagram read for a DNS name (a classic DNS message).
const MAX_DATAGRAM: usize = 512;
/// How many messages of one `sendmmsg` are looked at.
const MAX_MMSG: usize = 8;
/// How many sockets told they reached a DNS server are remembered.
const MAX_FAKED: usize = 64;

/// `struct msghdr` (x86_64 and aarch64 alike).
const MSGHDR_SIZE: usize = 56;
/// `struct mmsghdr`: a `msghdr`, its length, padding.
const MMSGHDR_SIZE: usize = 64;

/// A UDP socket told its `connect` to port 53 worked: its query comes next.
#[derive(Debug, Clone)]
struct Faked {
    pid: u32,
    fd: u64,
    /// The socket's inode, so a descriptor number used again for another
    /// socket is not taken for it.
    inode: Option<String>,
    /// Where its attempt was kept, if it was.
    entry: Option<usize>,
}

/// What a call is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    Errno(i32),
    /// Success, and nothing done.
    Fake,
    Continue,
}

/// The server's end of one run's listener and what it saw.
#[derive(Debug)]
pub(crate) struct Supervisor {
    listener: Option<OwnedFd>,
    denied: Denied,
    faked: Vec<Faked>,
    /// What the run's filter was built beside, so its refusals get the
    /// errnos of the plain program built the same way.
    beside: seccomp::Beside,
}

impl Supervisor {
    /// Nobody watches the run (yet): its report says so unless a listener
    /// comes. `beside`: what the run's filter was built beside.
    pub(crate) fn unwatched(beside: seccomp::Beside) -> Supervisor {
        Supervisor {
            listener: None,
            denied: Denied::new(Watch::Unavailable),
            faked: Vec::new(),
            beside,
        }
    }

    /// The run's listener arrived.
    pub(crate) fn watch(&mut self, listener: OwnedFd) {
        if self.listener.is_none() && self.denied.watch == Watch::Unavailable {
            self.listener = Some(listener);
            self.denied.watch = Watch::Watched;
        }
    }

    /// The descriptor to poll, while there is one.
    pub(crate) fn fd(&self) -> Option<RawFd> {
        self.listener.as_ref().map(AsRawFd::as_raw_fd)
    }

    /// The run is over: the report.
    pub(crate) fn report(&self) -> Denied {
        self.denied.clone()
    }

    /// Stop answering: the kernel fails the run's watched calls from now
    /// on, and the report says so.
    pub(crate) fn lose(&mut self) {
        if self.listener.take().is_some() {
            self.denied.watch = Watch::Lost;
        }
    }

    /// `poll` set `revents` on the listener: answer one notification. A
    /// hang-up without input means no process uses the filter any more.
    pub(crate) fn ready(&mut self, revents: i16) {
        let Some(listener) = self.listener.as_ref() else {
            return;
        };
        if revents & libc::POLLIN == 0 {
            if revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
                // The run is done with the filter: nothing is lost.
                self.listener = None;
            }
            return;
        }
        let fd = listener.as_raw_fd();
        // SAFETY: a zeroed plain C struct, as RECV requires.
        let mut req: libc::seccomp_notif = unsafe { std::mem::zeroed() };
        // SAFETY: RECV fills `req`, which we own.
        if unsafe { libc::ioctl(fd, libc::SECCOMP_IOCTL_NOTIF_RECV as _, &mut req) } != 0 {
            // ENOENT: the caller was killed or interrupted meanwhile.
            let e = std::io::Error::last_os_error().raw_os_error();
            if !matches!(e, Some(libc::ENOENT | libc::EINTR | libc::EAGAIN)) {
                self.lose();
            }
            return;
        }
        let answer = self.judge(&req, fd);
        respond(fd, req.id, answer);
    }

    /// Read what the call names, record it, and decide.
    fn judge(&mut self, req: &libc::seccomp_notif, listener: RawFd) -> Answer {
        if !seccomp::WATCHED.contains(&i64::from(req.data.nr)) {
            return self.refuse(&req.data);
        }
        let pid = req.pid;
        let args = req.data.args;
        let read = |addr: u64, len: usize| read_memory(pid, addr, len);
        let nr = i64::from(req.data.nr);
        let looked = match nr {
            libc::SYS_connect => {
                Looked::call("connect", args[0], read_sockaddr(&read, args[1], args[2]))
            }
            libc::SYS_bind => Looked::call("bind", args[0], read_sockaddr(&read, args[1], args[2])),
            libc::SYS_listen => Looked {
                call: "listen",
                fd: args[0],
                to: To::Nowhere,
                payload: None,
            },
            libc::SYS_sendto => {
                let to = if args[4] == 0 {
                    To::Nowhere
                } else {
                    read_sockaddr(&read, args[4], args[5])
                };
                Looked {
                    call: "sendto",
                    fd: args[0],
                    to,
                    payload: Some((args[1], args[2])),
                }
            }
            libc::SYS_sendmsg => read_msghdr(&read, "sendmsg", args[0], args[1]),
            libc::SYS_sendmmsg => read_mmsg(&read, args[0], args[1], args[2]),
            _ => Looked {
                call: "unknown",
                fd: args[0],
                to: To::Unreadable,
                payload: None,
            },
        };
        // What was read may be stale if the call was abandoned: only a
        // live request is acted on.
        // SAFETY: ID_VALID reads the id we pass by pointer.
        if unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_ID_VALID as _, &req.id) } != 0 {
            return Answer::Errno(libc::ENOSYS);
        }
        self.decide(pid, looked, &read)
    }

    /// A call the plain filter refuses with an errno: that errno, and the
    /// call recorded by name. Nothing is read from the run, so nothing the
    /// run changes meanwhile matters: the errno follows from the number
    /// and the arguments the kernel handed over. Were the plain program to
    /// allow it (it never does: only its refusals are handed over), the
    /// answer is still a refusal.
    fn refuse(&mut self, data: &libc::seccomp_data) -> Answer {
        let d = seccomp::bpf_eval::seccomp_data(
            data.nr,
            data.arch,
            data.instruction_pointer,
            data.args,
        );
        let errno = plain_program(self.beside)
            .and_then(|p| seccomp::errno_of(p, &d))
            .unwrap_or(libc::ENOSYS);
        self.denied.record_syscall(
            refused::name(data.nr),
            refused::errno_name(errno),
            refused::is_compatibility(data.nr, &data.args),
        );
        Answer::Errno(errno)
    }

    fn decide(
        &mut self,
        pid: u32,
        l: Looked,
        read: &dyn Fn(u64, usize) -> Option<Vec<u8>>,
    ) -> Answer {
        let is_send = matches!(l.call, "sendto" | "sendmsg" | "sendmmsg");
        match l.to {
            To::Nowhere if is_send => {
                // A connected socket: a socketpair's end, or a UDP socket
                // whose connect to a DNS server was faked.
                if let Some(i) = self.faked_index(pid, l.fd) {
                    let f = self.faked.remove(i);
                    let name = l
                        .payload
                        .and_then(|(p, n)| read(p, bounded(n, MAX_DATAGRAM)))
                        .and_then(|d| dns_query_name(&d));
                    if let Some(name) = name {
                        self.denied.name_dns(f.entry, name);
                    }
                    return Answer::Errno(libc::ECONNREFUSED);
                }
                Answer::Continue
            }
            To::Nowhere => {
                self.denied.record(Attempt {
                    call: l.call,
                    note: Some("no address"),
                    layer: "seccomp",
                    answer: "EPERM",
                    ..Attempt::default()
                });
                Answer::Errno(libc::EPERM)
            }
            To::Unreadable => {
                self.denied.record(Attempt {
                    call: l.call,
                    note: Some("address unreadable"),
                    layer: "seccomp",
                    answer: "EPERM",
                    ..Attempt::default()
                });
                Answer::Errno(libc::EPERM)
            }
            To::Local if is_send => Answer::Continue,
            To::Local | To::Other(_) => {
                let family = match l.to {
                    To::Other(f) => f.to_string(),
                    _ => "unix".into(),
                };
                self.denied.record(Attempt {
                    call: l.call,
                    family: Some(family),
                    layer: "seccomp",
                    answer: "EPERM",
                    ..Attempt::default()
                });
                Answer::Errno(libc::EPERM)
            }
            To::Internet {
                family,
                address,
                port,
            } => {
                let mut a = Attempt {
                    call: l.call,
                    family: Some(family.into()),
                    address: Some(address),
                    port: Some(port),
                    layer: "netns",
                    answer: "ENETUNREACH",
                    ..Attempt::default()
                };
                match l.call {
                    "connect" if port == 53 => {
                        a.answer = "faked success, then ECONNREFUSED on the query";
                        let entry = self.denied.record(a);
                        self.remember(pid, l.fd, entry);
                        Answer::Fake
                    }
                    "bind" | "listen" => {
                        a.layer = "seccomp";
                        a.answer = "EPERM";
                        self.denied.record(a);
                        Answer::Errno(libc::EPERM)
                    }
                    _ => {
                        if port == 53 {
                            a.dns = l
                                .payload
                                .and_then(|(p, n)| read(p, bounded(n, MAX_DATAGRAM)))
                                .and_then(|d| dns_query_name(&d));
                        }
                        self.denied.record(a);
                        Answer::Errno(libc::ENETUNREACH)
                    }
                }
            }
        }
    }

    fn faked_index(&self, pid: u32, fd: u64) -> Option<usize> {
        let i = self.faked.iter().position(|f| f.pid == pid && f.fd == fd)?;
        (self.faked[i].inode == socket_inode(pid, fd)).then_some(i)
    }

    fn remember(&mut self, pid: u32, fd: u64, entry: Option<usize>) {
        self.faked.retain(|f| !(f.pid == pid && f.fd == fd));
        if self.faked.len() >= MAX_FAKED {
            self.faked.remove(0);
        }
        self.faked.push(Faked {
            pid,
            fd,
            inode: socket_inode(pid, fd),
            entry,
        });
    }
}

fn respond(listener: RawFd, id: u64, answer: Answer) {
    let (val, error, flags) = match answer {
        Answer::Errno(e) => (0, -e, 0),
        Answer::Fake => (0, 0, 0),
        Answer::Continue => (0, 0, libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32),
    };
    let mut resp = libc::seccomp_notif_resp {
        id,
        val,
        error,
        flags,
    };
    // SAFETY: SEND reads `resp`, which we own. A failure (ENOENT) means the
    // caller is gone: nothing to answer.
    unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_SEND as _, &mut resp) };
}

/// The plain filter, whose errnos the supervisor gives the calls handed
/// over to it: built once per process for each way a run's filter can be
/// built, from the same table as the runs'.
fn plain_program(beside: seccomp::Beside) -> Option<&'static seccompiler::BpfProgram> {
    type Plain = std::sync::OnceLock<Option<seccompiler::BpfProgram>>;
    static BESIDE_TRUNCATE: Plain = std::sync::OnceLock::new();
    static ALONE: Plain = std::sync::OnceLock::new();
    let cell = if beside.landlock_truncates {
        &BESIDE_TRUNCATE
    } else {
        &ALONE
    };
    cell.get_or_init(|| seccomp::build_program(beside).ok())
        .as_ref()
}

fn bounded(n: u64, max: usize) -> usize {
    usize::try_from(n).map_or(max, |n| n.min(max))
}

/// Where a call was going.
#[derive(Debug, Clone, PartialEq, Eq)]
enum To {
    /// No address given (a connected socket, or `listen`).
    Nowhere,
    Unreadable,
    /// `AF_UNIX`.
    Local,
    Internet {
        family: &'static str,
        address: String,
        port: u16,
    },
    /// Another family, by number.
    Other(u16),
}

struct Looked {
    call: &'static str,
    fd: u64,
    to: To,
    /// The data sent: address and length in the run's memory.
    payload: Option<(u64, u64)>,
}

impl Looked {
    fn call(call: &'static str, fd: u64, to: To) -> Looked {
        Looked {
            call,
            fd,
            to,
            payload: None,
        }
    }
}

fn read_sockaddr(read: &dyn Fn(u64, usize) -> Option<Vec<u8>>, addr: u64, len: u64) -> To {
    if addr == 0 {
        return To::Unreadable;
    }
    match read(addr, bounded(len, MAX_SOCKADDR)) {
        Some(bytes) => parse_sockaddr(&bytes),
        None => To::Unreadable,
    }
}

/// A socket address as the run wrote it (native byte order for the
/// family, network order for port and address).
fn parse_sockaddr(b: &[u8]) -> To {
    let Some(family) = b.get(..2).map(|f| u16::from_ne_bytes([f[0], f[1]])) else {
        return To::Unreadable;
    };
    let port = |b: &[u8]| b.get(2..4).map(|p| u16::from_be_bytes([p[0], p[1]]));
    match i32::from(family) {
        libc::AF_UNIX => To::Local,
        libc::AF_INET => match (port(b), b.get(4..8)) {
            (Some(port), Some(a)) => To::Internet {
                family: "inet",
                address: std::net::Ipv4Addr::new(a[0], a[1], a[2], a[3]).to_string(),
                port,
            },
            _ => To::Unreadable,
        },
        libc::AF_INET6 => match (port(b), b.get(8..24)) {
            (Some(port), Some(a)) => {
                let mut o = [0u8; 16];
                o.copy_from_slice(a);
                To::Internet {
                    family: "inet6",
                    address: std::net::Ipv6Addr::from(o).to_string(),
                    port,
                }
            }
            _ => To::Unreadable,
        },
        _ => To::Other(family),
    }
}

fn word(b: &[u8], at: usize) -> Option<u64> {
    b.get(at..at + 8)
        .map(|w| u64::from_ne_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]))
}

/// One `msghdr` in `b` (already read): its destination and first buffer.
fn parse_msghdr(
    read: &dyn Fn(u64, usize) -> Option<Vec<u8>>,
    b: &[u8],
) -> (To, Option<(u64, u64)>) {
    let (Some(name), Some(namelen), Some(iov), Some(iovlen)) =
        (word(b, 0), b.get(8..12), word(b, 16), word(b, 24))
    else {
        return (To::Unreadable, None);
    };
    let namelen = u32::from_ne_bytes([namelen[0], namelen[1], namelen[2], namelen[3]]);
    let to = if name == 0 {
        To::Nowhere
    } else {
        read_sockaddr(read, name, u64::from(namelen))
    };
    let payload = if iov != 0 && iovlen > 0 {
        read(iov, 16).and_then(|v| Some((word(&v, 0)?, word(&v, 8)?)))
    } else {
        None
    };
    (to, payload)
}

fn read_msghdr(
    read: &dyn Fn(u64, usize) -> Option<Vec<u8>>,
    call: &'static str,
    fd: u64,
    addr: u64,
) -> Looked {
    let (to, payload) = match read(addr, MSGHDR_SIZE) {
        Some(b) => parse_msghdr(read, &b),
        None => (To::Unreadable, None),
    };
    Looked {
        call,
        fd,
        to,
        payload,
    }
}

/// `sendmmsg`: the first message with a destination decides (a resolver
/// sends its questions for one name together); none with one, the first.
fn read_mmsg(
    read: &dyn Fn(u64, usize) -> Option<Vec<u8>>,
    fd: u64,
    addr: u64,
    vlen: u64,
) -> Looked {
    let n = bounded(vlen, MAX_MMSG);
    let mut first = None;
    for i in 0..n {
        let Some(b) = read(addr + (i * MMSGHDR_SIZE) as u64, MSGHDR_SIZE) else {
            return Looked::call("sendmmsg", fd, To::Unreadable);
        };
        let (to, payload) = parse_msghdr(read, &b);
        if to != To::Nowhere {
            return Looked {
                call: "sendmmsg",
                fd,
                to,
                payload,
            };
        }
        first.get_or_insert(payload);
    }
    Looked {
        call: "sendmmsg",
        fd,
        to: To::Nowhere,
        payload: first.flatten(),
    }
}

/// `len` bytes at `addr` in process `pid`, or `None` when they can't be
/// read (unmapped, or the process is gone).
fn read_memory(pid: u32, addr: u64, len: usize) -> Option<Vec<u8>> {
    if len == 0 {
        return Some(Vec::new());
    }
    let mut buf = vec![0u8; len];
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: len,
    };
    let remote = libc::iovec {
        iov_base: addr as usize as *mut libc::c_void,
        iov_len: len,
    };
    let pid = libc::pid_t::try_from(pid).ok()?;
    // SAFETY: the local iovec points at `buf`, `len` bytes we own; the
    // remote one is only read by the kernel, in the other process.
    let n = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
    let n = usize::try_from(n).ok()?;
    buf.truncate(n);
    (n > 0).then_some(buf)
}

/// `socket:[INODE]` of a run's descriptor, as its `/proc` link names it.
fn socket_inode(pid: u32, fd: u64) -> Option<String> {
    std::fs::read_link(format!("/proc/{pid}/fd/{fd}"))
        .ok()
        .map(|p| p.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A filter built beside Landlock ABI 3 or later.
    const NEWEST: seccomp::Beside = seccomp::Beside {
        landlock_truncates: true,
    };

    fn inet(port: u16, a: [u8; 4]) -> Vec<u8> {
        let mut b = (libc::AF_INET as u16).to_ne_bytes().to_vec();
        b.extend_from_slice(&port.to_be_bytes());
        b.extend_from_slice(&a);
        b.extend_from_slice(&[0; 8]);
        b
    }

    #[test]
    fn socket_addresses_are_read_by_family() {
        assert_eq!(
            parse_sockaddr(&inet(443, [192, 0, 2, 1])),
            To::Internet {
                family: "inet",
                address: "192.0.2.1".into(),
                port: 443
            }
        );
        let mut v6 = (libc::AF_INET6 as u16).to_ne_bytes().to_vec();
        v6.extend_from_slice(&80u16.to_be_bytes());
        v6.extend_from_slice(&[0; 4]);
        let mut a = [0u8; 16];
        a[0] = 0x20;
        a[1] = 0x01;
        a[2] = 0x0d;
        a[3] = 0xb8;
        a[15] = 1;
        v6.extend_from_slice(&a);
        assert_eq!(
            parse_sockaddr(&v6),
            To::Internet {
                family: "inet6",
                address: "2001:db8::1".into(),
                port: 80
            }
        );
        // One byte short of the address: unreadable, never a guess.
        assert_eq!(parse_sockaddr(&v6[..23]), To::Unreadable);
        assert_eq!(parse_sockaddr(&inet(1, [1, 2, 3, 4])[..7]), To::Unreadable);
        assert_eq!(
            parse_sockaddr(&(libc::AF_UNIX as u16).to_ne_bytes()),
            To::Local
        );
        assert_eq!(
            parse_sockaddr(&(libc::AF_NETLINK as u16).to_ne_bytes()),
            To::Other(libc::AF_NETLINK as u16)
        );
        assert_eq!(parse_sockaddr(&[2]), To::Unreadable);
    }

    /// A fake memory: one region at `base`.
    fn memory(base: u64, bytes: Vec<u8>) -> impl Fn(u64, usize) -> Option<Vec<u8>> {
        move |addr, len| {
            let at = usize::try_from(addr.checked_sub(base)?).ok()?;
            let end = (at + len).min(bytes.len());
            (at < end).then(|| bytes[at..end].to_vec())
        }
    }

    #[test]
    fn a_send_without_address_continues_and_a_faked_socket_gives_its_query() {
        let mut s = Supervisor::unwatched(NEWEST);
        let read = memory(0, Vec::new());
        let looked = Looked {
            call: "sendto",
            fd: 5,
            to: To::Nowhere,
            payload: None,
        };
        assert_eq!(s.decide(1, looked, &read), Answer::Continue);
        assert_eq!(s.denied.total, 0);
        let local = Looked::call("sendto", 5, To::Local);
        assert_eq!(s.decide(1, local, &read), Answer::Continue);
        // A connect to port 53 is faked and recorded.
        let to = parse_sockaddr(&inet(53, [127, 0, 0, 1]));
        assert_eq!(
            s.decide(u32::MAX, Looked::call("connect", 7, to), &read),
            Answer::Fake
        );
        assert_eq!(s.denied.total, 1);
        // Its query (no such process: the inode reads as None both times).
        let mut q = vec![0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0];
        q.extend_from_slice(b"\x03api\x07example\x03com\x00\x00\x01\x00\x01");
        let read = memory(0x1000, q);
        let send = Looked {
            call: "sendmmsg",
            fd: 7,
            to: To::Nowhere,
            payload: Some((0x1000, 512)),
        };
        assert_eq!(
            s.decide(u32::MAX, send, &read),
            Answer::Errno(libc::ECONNREFUSED)
        );
        assert_eq!(s.denied.total, 1);
        assert_eq!(s.denied.entries[0].dns.as_deref(), Some("api.example.com"));
        assert_eq!(s.denied.entries[0].port, Some(53));
        // Once: the next send on that descriptor goes on as any other.
        let again = Looked {
            call: "sendto",
            fd: 7,
            to: To::Nowhere,
            payload: None,
        };
        assert_eq!(s.decide(u32::MAX, again, &read), Answer::Continue);
    }

    fn call(nr: i64, args: [u64; 6]) -> libc::seccomp_data {
        libc::seccomp_data {
            nr: nr as i32,
            arch: seccomp::audit_arch().unwrap(),
            instruction_pointer: 0,
            args,
        }
    }

    #[test]
    fn a_refusal_handed_over_gets_the_plain_errno_and_its_name() {
        let mut s = Supervisor::unwatched(NEWEST);
        let ptrace = call(libc::SYS_ptrace, [0; 6]);
        assert_eq!(s.refuse(&ptrace), Answer::Errno(libc::EPERM));
        let mount = call(libc::SYS_mount, [0; 6]);
        assert_eq!(s.refuse(&mount), Answer::Errno(libc::EPERM));
        assert_eq!(s.refuse(&mount), Answer::Errno(libc::EPERM));
        let ioctl = call(libc::SYS_ioctl, [1, 0x8008_6601, 0, 0, 0, 0]);
        assert_eq!(s.refuse(&ioctl), Answer::Errno(libc::ENOTTY));
        let clone3 = call(libc::SYS_clone3, [0; 6]);
        assert_eq!(s.refuse(&clone3), Answer::Errno(libc::ENOSYS));
        // A call the plain program allows is never let through from here.
        let getpid = call(libc::SYS_getpid, [0; 6]);
        assert_eq!(s.refuse(&getpid), Answer::Errno(libc::ENOSYS));
        let d = s.report();
        let named: Vec<(String, String, u64)> = d
            .syscalls
            .entries
            .iter()
            .map(|r| (r.call.to_string(), r.answer.to_string(), r.count))
            .collect();
        let want = |c: &str, a: &str, n: u64| (c.to_string(), a.to_string(), n);
        assert_eq!(
            named,
            [
                want("ptrace", "EPERM", 1),
                want("mount", "EPERM", 2),
                want("ioctl", "ENOTTY", 1),
                want("getpid", "ENOSYS", 1),
            ]
        );
        assert_eq!(d.syscalls.total, 5);
        assert_eq!(d.syscalls.compatibility.get("clone3"), Some(&1));
        assert_eq!(d.total, 0);
    }

    #[test]
    fn a_run_built_below_landlock_abi_3_gets_eacces_for_truncate_by_path() {
        let truncate = call(libc::SYS_truncate, [0x1000, 0, 0, 0, 0, 0]);
        let mut below = Supervisor::unwatched(seccomp::Beside {
            landlock_truncates: false,
        });
        assert_eq!(below.refuse(&truncate), Answer::Errno(libc::EACCES));
        let d = below.report();
        assert_eq!(d.syscalls.entries.len(), 1);
        assert_eq!(
            (
                d.syscalls.entries[0].call.as_ref(),
                d.syscalls.entries[0].answer.as_ref()
            ),
            ("truncate", "EACCES")
        );
        // Beside Landlock's truncate right the plain program allows it, so
        // it is never handed over; were it, it would still be refused.
        let mut newest = Supervisor::unwatched(NEWEST);
        assert_eq!(newest.refuse(&truncate), Answer::Errno(libc::ENOSYS));
    }

    #[test]
    fn internet_destinations_are_refused_and_recorded_and_unreadable_ones_too() {
        let mut s = Supervisor::unwatched(NEWEST);
        let read = memory(0, Vec::new());
        let to = parse_sockaddr(&inet(443, [192, 0, 2, 1]));
        assert_eq!(
            s.decide(1, Looked::call("connect", 3, to.clone()), &read),
            Answer::Errno(libc::ENETUNREACH)
        );
        assert_eq!(
            s.decide(1, Looked::call("bind", 3, to), &read),
            Answer::Errno(libc::EPERM)
        );
        assert_eq!(
            s.decide(1, Looked::call("connect", 3, To::Unreadable), &read),
            Answer::Errno(libc::EPERM)
        );
        assert_eq!(
            s.decide(1, Looked::call("connect", 3, To::Local), &read),
            Answer::Errno(libc::EPERM)
        );
        assert_eq!(
            s.decide(1, Looked::call("listen", 3, To::Nowhere), &read),
            Answer::Errno(libc::EPERM)
        );
        let e = &s.denied.entries;
        assert_eq!(e[0].destination(), "192.0.2.1:443");
        assert_eq!((e[0].layer, e[0].answer), ("netns", "ENETUNREACH"));
        assert_eq!(e[1].call, "bind");
        assert_eq!(e[2].note, Some("address unreadable"));
        assert_eq!(e[3].family.as_deref(), Some("unix"));
        assert_eq!(s.denied.total, 5);
    }

    #[test]
    fn a_message_header_names_its_destination_and_first_buffer() {
        let mut mem = vec![0u8; 0x400];
        let addr = inet(53, [10, 0, 0, 1]);
        mem[0x100..0x100 + addr.len()].copy_from_slice(&addr);
        // iovec at 0x200: buffer 0x300, 33 bytes.
        mem[0x200..0x208].copy_from_slice(&0x1300u64.to_ne_bytes());
        mem[0x208..0x210].copy_from_slice(&33u64.to_ne_bytes());
        // msghdr at 0x000: name 0x1100 (len 16), iov 0x1200, 1 entry.
        mem[0..8].copy_from_slice(&0x1100u64.to_ne_bytes());
        mem[8..12].copy_from_slice(&16u32.to_ne_bytes());
        mem[16..24].copy_from_slice(&0x1200u64.to_ne_bytes());
        mem[24..32].copy_from_slice(&1u64.to_ne_bytes());
        let read = memory(0x1000, mem);
        let l = read_msghdr(&read, "sendmsg", 4, 0x1000);
        assert_eq!(
            l.to,
            To::Internet {
                family: "inet",
                address: "10.0.0.1".into(),
                port: 53
            }
        );
        assert_eq!(l.payload, Some((0x1300, 33)));
        assert_eq!(read_msghdr(&read, "sendmsg", 4, 0x9000).to, To::Unreadable);
    }

    fn inet_addr(port: u16, a: [u8; 4]) -> libc::sockaddr_in {
        libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: port.to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from_ne_bytes(a),
            },
            sin_zero: [0; 8],
        }
    }

    fn connect_to(port: u16, a: [u8; 4]) -> String {
        use crate::sandbox::linux::seccomp::in_child::raw;
        // SAFETY: socket takes no pointer.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return format!("socket {}", raw(-1));
        }
        let addr = inet_addr(port, a);
        // SAFETY: `addr` is a sockaddr_in of the size given.
        let rc = unsafe {
            libc::connect(
                fd,
                std::ptr::addr_of!(addr).cast(),
                std::mem::size_of::<libc::sockaddr_in>() as u32,
            )
        };
        let shown = raw(rc.into());
        // SAFETY: closing the socket made above.
        unsafe { libc::close(fd) };
        shown
    }

    /// The kernel side for real, in a copy of the test binary: the watched
    /// filter with a listener, a supervisor thread (started before the
    /// filter, so outside it) answering, the handover hole and its seal,
    /// then the supervisor gone.
    #[test]
    fn the_kernel_hands_watched_calls_to_the_supervisor_and_fails_them_without_one() {
        use crate::sandbox::linux::seccomp::in_child::{raw, report, run};
        let name = "the_kernel_hands_watched_calls_to_the_supervisor_and_fails_them_without_one";
        if crate::sandbox::linux::seccomp::in_child::arg().is_none() {
            let reports = run(module_path!(), name, "watched");
            assert_eq!(
                reports,
                [
                    "install ok",
                    "socket unix EPERM",
                    "connect 192.0.2.1:443 errno 101",
                    "socketpair send ok",
                    "handover ok",
                    "seal ok",
                    "seccomp again ENOSYS",
                    "handover again EPERM",
                    "ptrace EPERM",
                    "personality ENOSYS",
                    "supervisor saw connect 192.0.2.1:443 netns ENETUNREACH, 1 in all",
                    "supervisor named ptrace EPERM 1, personality ENOSYS 1; compatibility socket 1",
                    "connect without supervisor ENOSYS",
                    "socketpair send without supervisor ENOSYS",
                    "ptrace without supervisor ENOSYS",
                ]
            );
            return;
        }
        let watched = seccomp::build_watched(NEWEST).unwrap();
        let (tx, rx) = std::sync::mpsc::channel::<OwnedFd>();
        let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
        let supervisor = std::thread::spawn(move || {
            let mut s = Supervisor::unwatched(NEWEST);
            s.watch(rx.recv().unwrap());
            while stop_rx.try_recv().is_err() {
                let mut pfd = libc::pollfd {
                    fd: s.fd().unwrap(),
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: poll on one descriptor the supervisor owns.
                if unsafe { libc::poll(&mut pfd, 1, 10) } > 0 {
                    s.ready(pfd.revents);
                }
            }
            s.report()
        });
        // SAFETY: integer-only prctl; the filter needs it.
        let rc = unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) };
        assert_eq!(rc, 0);
        let listener = seccomp::apply_with_listener(&watched.filter);
        report(format!(
            "install {}",
            crate::sandbox::linux::seccomp::in_child::outcome(
                listener
                    .as_ref()
                    .map(|_| ())
                    .map_err(|e| std::io::Error::from_raw_os_error(e.raw_os_error().unwrap_or(0)))
            )
        ));
        let listener = listener.unwrap();
        let mut pair = [-1; 2];
        // SAFETY: `pair` has room for two descriptors (a stream pair: the
        // only kind the filter lets a run make).
        let rc = unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
                0,
                pair.as_mut_ptr(),
            )
        };
        assert_eq!(rc, 0);
        // The handover goes through unseen, before any supervisor reads.
        let sent = channel::send_listener(pair[0], listener.as_raw_fd());
        let peer = unsafe_owned(pair[1]);
        let theirs = match channel::recv(&peer, true) {
            Ok(Some(channel::Message::Listener(Some(fd)))) => fd,
            other => panic!("{other:?}"),
        };
        tx.send(theirs).unwrap();
        drop(listener);
        // SAFETY: socket takes no pointer.
        let unix = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0) };
        report(format!("socket unix {}", raw(unix.into())));
        report(format!(
            "connect 192.0.2.1:443 {}",
            connect_to(443, [192, 0, 2, 1])
        ));
        let send = |what: &str| {
            // SAFETY: sending two bytes of a constant on our own socket.
            let n = unsafe { libc::send(pair[0], b"hi".as_ptr().cast(), 2, 0) };
            report(format!("{what} {}", raw(n as i64)));
        };
        send("socketpair send");
        report(format!("handover {}", if sent { "ok" } else { "failed" }));
        report(format!(
            "seal {}",
            crate::sandbox::linux::seccomp::in_child::outcome(seccomp::apply_seal(&watched.seal))
        ));
        report(format!(
            "seccomp again {}",
            crate::sandbox::linux::seccomp::in_child::outcome(seccomp::apply_seal(&watched.seal))
        ));
        report(format!(
            "handover again {}",
            if channel::send_listener(pair[0], 0) {
                "ok".to_string()
            } else {
                raw(-1)
            }
        ));
        // Refused with an errno by the plain filter: answered the same
        // errno by the supervisor, and named.
        let ptrace = || {
            // SAFETY: PTRACE_PEEKDATA on pid 1 with no buffer; refused.
            raw(unsafe { libc::syscall(libc::SYS_ptrace, libc::PTRACE_PEEKDATA, 1, 0, 0) })
        };
        report(format!("ptrace {}", ptrace()));
        // SAFETY: personality with 0xffffffff only reads the persona.
        let persona = unsafe { libc::syscall(libc::SYS_personality, 0xffff_ffff_u64) };
        report(format!("personality {}", raw(persona)));
        stop_tx.send(()).unwrap();
        let seen = supervisor.join().unwrap();
        let e = &seen.entries[0];
        report(format!(
            "supervisor saw {} {} {} {}, {} in all",
            e.call,
            e.destination(),
            e.layer,
            e.answer,
            seen.total
        ));
        let named: Vec<String> = seen
            .syscalls
            .entries
            .iter()
            .map(|r| format!("{} {} {}", r.call, r.answer, r.count))
            .collect();
        let compat: Vec<String> = seen
            .syscalls
            .compatibility
            .iter()
            .map(|(c, n)| format!("{c} {n}"))
            .collect();
        report(format!(
            "supervisor named {}; compatibility {}",
            named.join(", "),
            compat.join(", ")
        ));
        // Its listener closed with it: the kernel answers alone.
        report(format!(
            "connect without supervisor {}",
            connect_to(443, [192, 0, 2, 1])
        ));
        send("socketpair send without supervisor");
        report(format!("ptrace without supervisor {}", ptrace()));
    }

    fn unsafe_owned(fd: RawFd) -> OwnedFd {
        // SAFETY: a descriptor of the test's own socketpair, owned from here.
        unsafe { OwnedFd::from_raw_fd(fd) }
    }
}
