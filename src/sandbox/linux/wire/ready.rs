//! The ready handshake, zygote → server on the control socket and spare →
//! zygote on the spare's socket: one byte `R` once the sender's set-up is
//! done, or else one encoded [`Failure`] followed by the sender's exit.
//! Written and read here only.

use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::Duration;

use super::status::Failure;
use super::wait_readable;

const READY: u8 = b'R';

/// How a handshake ended when it did not end ready.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum NotReady {
    /// The sender said why.
    Failed(Failure),
    /// The sender went away without a word (killed, or exited).
    Gone,
    /// Nothing within the wait.
    Silent,
}

/// Say the set-up is done.
pub(crate) fn announce(fd: RawFd) -> bool {
    // SAFETY: writing one byte from a constant to a descriptor we hold.
    unsafe { libc::write(fd, [READY].as_ptr().cast(), 1) == 1 }
}

/// Say why the set-up failed (the sender exits right after).
pub(crate) fn refuse(fd: RawFd, f: &Failure) {
    let bytes = f.encode();
    // SAFETY: writing our own buffer to a descriptor we hold.
    unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
}

/// Say the set-up is done, passing `listener` (the spare's seccomp
/// listener) with the byte: `sendmsg` with the flags the watched filter
/// lets through for exactly this (`seccomp::HANDOVER_FLAGS`).
pub(crate) fn announce_with(fd: RawFd, listener: RawFd) -> bool {
    use nix::sys::socket::{sendmsg, ControlMessage, MsgFlags};
    let flags =
        MsgFlags::from_bits_retain(crate::sandbox::linux::seccomp::HANDOVER_FLAGS as libc::c_int);
    let iov = [std::io::IoSlice::new(&[READY])];
    let fds = [listener];
    loop {
        match sendmsg::<()>(fd, &iov, &[ControlMessage::ScmRights(&fds)], flags, None) {
            Ok(n) => return n == 1,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return false,
        }
    }
}

/// Wait up to `timeout` for the other side's word.
pub(crate) fn read(fd: &OwnedFd, timeout: Duration) -> Result<(), NotReady> {
    read_with(fd, timeout).map(|_| ())
}

/// [`read`], and the descriptor sent with the word, if one was.
pub(crate) fn read_with(fd: &OwnedFd, timeout: Duration) -> Result<Option<OwnedFd>, NotReady> {
    use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags};
    use std::os::fd::FromRawFd;
    match wait_readable(fd, timeout) {
        Ok(true) => {}
        Ok(false) => return Err(NotReady::Silent),
        Err(_) => return Err(NotReady::Gone),
    }
    let mut first = [0u8; 1];
    let mut cmsg = nix::cmsg_space!([RawFd; 1]);
    let (n, passed) = loop {
        let mut iov = [std::io::IoSliceMut::new(&mut first)];
        match recvmsg::<()>(
            fd.as_raw_fd(),
            &mut iov,
            Some(&mut cmsg),
            MsgFlags::MSG_CMSG_CLOEXEC,
        ) {
            Ok(msg) => {
                let mut passed = None;
                for c in msg.cmsgs().into_iter().flatten() {
                    if let ControlMessageOwned::ScmRights(fds) = c {
                        for f in fds {
                            // SAFETY: the kernel just gave us this descriptor.
                            let owned = unsafe { OwnedFd::from_raw_fd(f) };
                            passed.get_or_insert(owned);
                        }
                    }
                }
                if msg.flags.contains(MsgFlags::MSG_CTRUNC) {
                    // A listener that could not be taken: nobody would answer the run.
                    return Err(NotReady::Gone);
                }
                break (msg.bytes, passed);
            }
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => break (0, None),
        }
    };
    match (n, first[0]) {
        (1, READY) => Ok(passed),
        (1, _) => {
            // The rest of the failure follows; the sender exits after it.
            let mut msg = vec![first[0]];
            if let Ok(dup) = fd.try_clone() {
                let _ = std::fs::File::from(dup)
                    .take(64 * 1024)
                    .read_to_end(&mut msg);
            }
            Err(NotReady::Failed(Failure::decode(&msg)))
        }
        _ => Err(NotReady::Gone),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::sys::socket::{socketpair, AddressFamily, SockFlag, SockType};

    fn pair() -> (OwnedFd, OwnedFd) {
        socketpair(
            AddressFamily::Unix,
            SockType::Stream,
            None,
            SockFlag::SOCK_CLOEXEC,
        )
        .unwrap()
    }

    #[test]
    fn ready_failed_gone_and_silent_are_told_apart() {
        let (a, b) = pair();
        assert!(announce(b.as_raw_fd()));
        assert_eq!(read(&a, Duration::from_secs(5)), Ok(()));

        let (a, b) = pair();
        let f = Failure::layer(crate::sandbox::Layer::Mountns, "mountns: pivot_root");
        refuse(b.as_raw_fd(), &f);
        drop(b);
        assert_eq!(read(&a, Duration::from_secs(5)), Err(NotReady::Failed(f)));

        let (a, b) = pair();
        drop(b);
        assert_eq!(read(&a, Duration::from_secs(5)), Err(NotReady::Gone));

        let (a, _b) = pair();
        assert_eq!(read(&a, Duration::ZERO), Err(NotReady::Silent));
    }

    #[test]
    fn a_ready_word_may_carry_a_descriptor() {
        let (a, b) = pair();
        let f = std::fs::File::open("/dev/zero").unwrap();
        assert!(announce_with(b.as_raw_fd(), f.as_raw_fd()));
        let got = read_with(&a, Duration::from_secs(5)).unwrap().unwrap();
        let name = std::fs::read_link(format!("/proc/self/fd/{}", got.as_raw_fd())).unwrap();
        assert_eq!(name, std::path::Path::new("/dev/zero"));
        let (a, b) = pair();
        assert!(announce(b.as_raw_fd()));
        assert!(read_with(&a, Duration::from_secs(5)).unwrap().is_none());
    }
}
