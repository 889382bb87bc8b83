//! Zygote / init → server: the run channel, one `SOCK_SEQPACKET` pair per
//! run. Four messages, five bytes each (a tag and a little-endian value):
//! the init exists (its pid, with a pidfd, and the seccomp listener of a
//! spare armed ahead), the run's seccomp listener (from an init armed only
//! after its request, with the listener, before the backend starts), the
//! backend's wait status (from init, once its namespace is empty), init's
//! own wait status (from the zygote).

use std::io::{IoSlice, IoSliceMut};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use nix::sys::socket::{recvmsg, sendmsg, ControlMessage, ControlMessageOwned, MsgFlags};

const STARTED: u8 = b'P';
const BACKEND: u8 = b'S';
const INIT: u8 = b'Z';
const LISTENER: u8 = b'L';

/// One run-channel message as the server receives it.
#[derive(Debug)]
pub(crate) enum Message {
    /// The run's init exists: its pid (in the server's PID namespace view
    /// of the zygote's), a pidfd for it, and its seccomp listener when it
    /// was armed ahead with one.
    Started {
        pid: i32,
        pidfd: Option<OwnedFd>,
        listener: Option<OwnedFd>,
    },
    /// The backend's raw wait status; nothing else is left of the run.
    Backend(i32),
    /// Init's own raw wait status.
    Init(i32),
    /// The run's seccomp listener (`None` if the descriptor did not come).
    Listener(Option<OwnedFd>),
    /// A tag this version does not know.
    Unknown,
}

/// The zygote: the run's init exists (with the listener its spare
/// handed over, if any: no message of its own on the call's path).
pub(crate) fn send_started(fd: RawFd, pid: i32, pidfd: RawFd, listener: Option<RawFd>) -> bool {
    let mut pass = vec![pidfd];
    pass.extend(listener);
    send(fd, STARTED, pid, &pass)
}

/// The zygote: init ended with this wait status.
pub(crate) fn send_init(fd: RawFd, status: i32) -> bool {
    send(fd, INIT, status, &[])
}

/// Init: the run's seccomp listener, sent with the flags the watched
/// filter lets through for exactly this (`seccomp::HANDOVER_FLAGS`).
pub(crate) fn send_listener(fd: RawFd, listener: RawFd) -> bool {
    let flags =
        MsgFlags::from_bits_retain(crate::sandbox::linux::seccomp::HANDOVER_FLAGS as libc::c_int);
    send_with(fd, LISTENER, 1, &[listener], flags)
}

/// The backend's status, as init writes it: the tagged message bytes.
pub(crate) fn backend_bytes(status: i32) -> [u8; 5] {
    let mut buf = [0u8; 5];
    buf[0] = BACKEND;
    buf[1..].copy_from_slice(&status.to_le_bytes());
    buf
}

/// Send one message (never blocks, never raises SIGPIPE: a server that
/// stopped listening loses nothing it still needs).
fn send(fd: RawFd, kind: u8, value: i32, pass: &[RawFd]) -> bool {
    let flags = MsgFlags::MSG_NOSIGNAL | MsgFlags::MSG_DONTWAIT;
    send_with(fd, kind, value, pass, flags)
}

fn send_with(fd: RawFd, kind: u8, value: i32, pass: &[RawFd], flags: MsgFlags) -> bool {
    let mut buf = [0u8; 5];
    buf[0] = kind;
    buf[1..].copy_from_slice(&value.to_le_bytes());
    let iov = [IoSlice::new(&buf)];
    let cmsg: Vec<ControlMessage> = if pass.is_empty() {
        Vec::new()
    } else {
        vec![ControlMessage::ScmRights(pass)]
    };
    loop {
        match sendmsg::<()>(fd, &iov, &cmsg, flags, None) {
            Ok(n) => return n == buf.len(),
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return false,
        }
    }
}

/// One message, `None` at end of file.
pub(crate) fn recv(fd: &OwnedFd, block: bool) -> std::io::Result<Option<Message>> {
    let mut buf = [0u8; 5];
    let mut cmsg = nix::cmsg_space!([RawFd; 2]);
    let mut flags = MsgFlags::MSG_CMSG_CLOEXEC;
    if !block {
        flags |= MsgFlags::MSG_DONTWAIT;
    }
    let (n, passed) = loop {
        let mut iov = [IoSliceMut::new(&mut buf)];
        match recvmsg::<()>(fd.as_raw_fd(), &mut iov, Some(&mut cmsg), flags) {
            Ok(msg) => {
                // In the order sent; any beyond two are closed.
                let mut passed: Vec<OwnedFd> = Vec::new();
                if let Ok(cmsgs) = msg.cmsgs() {
                    for c in cmsgs {
                        if let ControlMessageOwned::ScmRights(fds) = c {
                            for f in fds {
                                // SAFETY: the kernel just gave us this descriptor.
                                let owned = unsafe { OwnedFd::from_raw_fd(f) };
                                if passed.len() < 2 {
                                    passed.push(owned);
                                }
                            }
                        }
                    }
                }
                if msg.flags.contains(MsgFlags::MSG_CTRUNC) {
                    // A descriptor was sent but the kernel could not give
                    // it to us: this process has no descriptor left.
                    return Err(std::io::Error::from_raw_os_error(libc::EMFILE));
                }
                break (msg.bytes, passed);
            }
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        }
    };
    if n == 0 {
        return Ok(None);
    }
    if n != buf.len() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "short message from the sandbox zygote",
        ));
    }
    let value = i32::from_le_bytes([buf[1], buf[2], buf[3], buf[4]]);
    let mut passed = passed.into_iter();
    let first = passed.next();
    Ok(Some(match buf[0] {
        STARTED => Message::Started {
            pid: value,
            pidfd: first,
            listener: passed.next(),
        },
        BACKEND => Message::Backend(value),
        INIT => Message::Init(value),
        LISTENER => Message::Listener(first),
        _ => Message::Unknown,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::sys::socket::{socketpair, AddressFamily, SockFlag, SockType};

    #[test]
    fn run_channel_messages_round_trip_with_a_descriptor() {
        let (a, b) = socketpair(
            AddressFamily::Unix,
            SockType::SeqPacket,
            None,
            SockFlag::SOCK_CLOEXEC,
        )
        .unwrap();
        let f = std::fs::File::open("/dev/null").unwrap();
        assert!(send_started(b.as_raw_fd(), 4242, f.as_raw_fd(), None));
        let g = std::fs::File::open("/dev/zero").unwrap();
        assert!(send_started(
            b.as_raw_fd(),
            4243,
            f.as_raw_fd(),
            Some(g.as_raw_fd())
        ));
        let backend = backend_bytes(1 << 8);
        // SAFETY: writing our own buffer to a socket we hold.
        let n = unsafe { libc::write(b.as_raw_fd(), backend.as_ptr().cast(), backend.len()) };
        assert_eq!(n, 5);
        assert!(send_init(b.as_raw_fd(), 9));
        match recv(&a, true).unwrap().unwrap() {
            Message::Started {
                pid,
                pidfd,
                listener,
            } => assert!(pid == 4242 && pidfd.is_some() && listener.is_none()),
            other => panic!("{other:?}"),
        }
        match recv(&a, true).unwrap().unwrap() {
            Message::Started {
                pid,
                pidfd: Some(pidfd),
                listener: Some(listener),
            } => {
                assert_eq!(pid, 4243);
                // In the order sent: the pidfd's stand-in, then the listener's.
                let name = |fd: &OwnedFd| {
                    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).unwrap()
                };
                assert_eq!(name(&pidfd), std::path::Path::new("/dev/null"));
                assert_eq!(name(&listener), std::path::Path::new("/dev/zero"));
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            recv(&a, false).unwrap(),
            Some(Message::Backend(256))
        ));
        assert!(matches!(recv(&a, false).unwrap(), Some(Message::Init(9))));
        let e = recv(&a, false).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock);
        drop(b);
        assert!(recv(&a, true).unwrap().is_none());
    }
}
