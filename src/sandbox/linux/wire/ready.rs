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

/// Wait up to `timeout` for the other side's word.
pub(crate) fn read(fd: &OwnedFd, timeout: Duration) -> Result<(), NotReady> {
    match wait_readable(fd, timeout) {
        Ok(true) => {}
        Ok(false) => return Err(NotReady::Silent),
        Err(_) => return Err(NotReady::Gone),
    }
    let mut first = [0u8; 1];
    let n = loop {
        // SAFETY: reading one byte into a buffer we own.
        let n = unsafe { libc::read(fd.as_raw_fd(), first.as_mut_ptr().cast(), 1) };
        if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        break n;
    };
    match (n, first[0]) {
        (1, READY) => Ok(()),
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
}
