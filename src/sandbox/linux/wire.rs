//! The wire formats between the processes of a run: the status pipe (one
//! message when something failed before the backend was executed, end of
//! file when it was), the request a helper receives (a length, the policy,
//! and six descriptors), and the run channel (`P` pid + pidfd, `S` backend
//! status, `Z` init status). Each is written and read here only.

use std::io::{IoSlice, IoSliceMut, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use nix::sys::socket::{recvmsg, sendmsg, ControlMessage, ControlMessageOwned, MsgFlags};
use serde::Deserialize;

use crate::sandbox::{RunKind, SandboxError};

/// The helper's status pipe is always this descriptor.
pub(super) const STATUS_FD: RawFd = 3;
/// The environment variable that carries the policy to the helper (argv
/// would show it to every user through `/proc/*/cmdline`).
pub const POLICY_ENV: &str = "REACHWEAVER_SANDBOX_POLICY";
/// The helper argument meaning "read the policy from `POLICY_ENV`".
pub const POLICY_FROM_ENV: &str = "@env";
/// How long the server waits for the helper to confirm the layers.
pub(super) const STATUS_TIMEOUT: Duration = Duration::from_secs(20);

/// The zygote's end of the control socket.
pub(super) const CONTROL_FD: RawFd = 3;
/// Descriptors passed with every request, in this order: stdin, stdout,
/// stderr, the status pipe, the run channel, and the run cgroup's
/// `cgroup.procs` (`/dev/null` when runs get no cgroup).
pub(super) const PASSED: usize = 6;
/// How long the server waits on a run channel once the status pipe has
/// spoken, and the zygote on a spare that is setting itself up.
pub(super) const CHANNEL_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest request the zygote accepts (a policy is a few KiB).
pub(super) const MAX_REQUEST: usize = 16 << 20;
/// Run channel messages: the init's pid (with a pidfd), the backend's wait
/// status (from init), the init's own wait status (from the zygote).
pub(super) const MSG_PID: u8 = b'P';
pub(super) const MSG_BACKEND: u8 = b'S';
pub(super) const MSG_INIT: u8 = b'Z';

/// Where init keeps its end of the run channel.
pub(super) const RUN_CHANNEL_FD: RawFd = 4;
/// Where init finds its cgroup's `cgroup.procs` until it has entered.
pub(super) const CGROUP_FD: RawFd = 5;
/// Where a spare keeps its socket to the zygote, and the zygote's pidfd
/// until it has checked the zygote is alive.
pub(super) const SPARE_SOCKET: RawFd = 3;
pub(super) const ZYGOTE_PIDFD: RawFd = 4;

/// The one field of a request the zygote reads: which kind of spare serves it.
#[derive(Deserialize)]
pub(super) struct RequestKind {
    pub(super) kind: RunKind,
}

// ---------------------------------------------------------------------------
// Helper side. Everything below runs in the helper process and its forks,
// which are single-threaded, so allocating between fork and exec is safe.

/// A failure before the backend runs: reported on the status pipe.
pub(super) enum Failure {
    Layer(String),
    Exec(i32, String),
}

pub(super) fn report(f: &Failure) {
    report_to(STATUS_FD, f);
}

/// Write a failure to a run's status pipe before the run's init has it at
/// its number.
pub(super) fn report_to(status: RawFd, f: &Failure) {
    let text = failure_text(f);
    // SAFETY: writing our own buffer to a descriptor we hold.
    unsafe { libc::write(status, text.as_ptr().cast(), text.len()) };
}

pub(super) fn failure_text(f: &Failure) -> String {
    match f {
        Failure::Layer(m) => format!("L{m}"),
        Failure::Exec(errno, m) => format!("E{errno} {m}"),
    }
}

pub(super) fn last_error(what: &str) -> Failure {
    Failure::Layer(format!("{what}: {}", std::io::Error::last_os_error()))
}

/// `L<message>`: a layer failed. `E<errno> <message>`: the program could
/// not be executed (inside the sandbox, so after every layer applied).
pub(super) fn decode_status(msg: &str) -> SandboxError {
    if let Some(rest) = msg.strip_prefix('E') {
        let (num, text) = rest.split_once(' ').unwrap_or((rest, ""));
        let errno = num.parse::<i32>().unwrap_or(libc::EIO);
        let os = std::io::Error::from_raw_os_error(errno);
        return SandboxError::Exec(std::io::Error::new(os.kind(), format!("{text}: {os}")));
    }
    SandboxError::LayerFailed(msg.strip_prefix('L').unwrap_or(msg).to_string())
}

pub(super) fn pipe_cloexec() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: pipe2 fills the array we own.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned here alone.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Read the status pipe to end of file: `None` when nothing was written
/// (the backend was executed), else the message.
pub(super) fn read_status(fd: OwnedFd, timeout: Duration) -> std::io::Result<Option<String>> {
    let deadline = std::time::Instant::now() + timeout;
    let mut file = std::fs::File::from(fd);
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "timed out",
            ));
        }
        let mut pfd = libc::pollfd {
            fd: file.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: poll on one descriptor we own.
        let r = unsafe { libc::poll(&mut pfd, 1, left.as_millis().min(i32::MAX as u128) as i32) };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if r == 0 {
            continue;
        }
        match file.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => {
                if buf.len() < 64 * 1024 {
                    buf.extend_from_slice(&chunk[..n]);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    if buf.is_empty() {
        Ok(None)
    } else {
        Ok(Some(String::from_utf8_lossy(&buf).into_owned()))
    }
}

/// Whether `fd` became readable (or hung up) within `timeout`.
pub(super) fn wait_readable(fd: &OwnedFd, timeout: Duration) -> std::io::Result<bool> {
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let mut pfd = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: poll on one descriptor we own.
        let r = unsafe { libc::poll(&mut pfd, 1, left.as_millis().min(i32::MAX as u128) as i32) };
        if r > 0 {
            return Ok(true);
        }
        if r == 0 {
            return Ok(false);
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Read one request: a length, the policy, and the descriptors that came
/// with the length. `None` at end of file or on anything malformed.
pub(super) fn read_request(fd: RawFd) -> Option<(Vec<u8>, Vec<OwnedFd>)> {
    let mut len = [0u8; 4];
    let mut cmsg = nix::cmsg_space!([RawFd; PASSED]);
    let (n, fds) = loop {
        let mut iov = [IoSliceMut::new(&mut len)];
        match recvmsg::<()>(
            fd,
            &mut iov,
            Some(&mut cmsg),
            MsgFlags::MSG_CMSG_CLOEXEC | MsgFlags::MSG_WAITALL,
        ) {
            Ok(msg) => {
                let mut fds: Vec<OwnedFd> = Vec::new();
                if let Ok(cmsgs) = msg.cmsgs() {
                    for c in cmsgs {
                        if let ControlMessageOwned::ScmRights(list) = c {
                            // SAFETY: the kernel just gave us these descriptors.
                            fds.extend(
                                list.into_iter().map(|f| unsafe { OwnedFd::from_raw_fd(f) }),
                            );
                        }
                    }
                }
                break (msg.bytes, fds);
            }
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return None,
        }
    };
    if n != len.len() {
        return None;
    }
    let size = u32::from_le_bytes(len) as usize;
    if size > MAX_REQUEST {
        return None;
    }
    let mut body = vec![0u8; size];
    let mut got = 0;
    while got < size {
        // SAFETY: reading into a buffer we own.
        let r = unsafe { libc::read(fd, body[got..].as_mut_ptr().cast(), size - got) };
        if r < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        if r <= 0 {
            return None;
        }
        got += r as usize;
    }
    Some((body, fds))
}

/// Send a request (length, policy, descriptors) on a stream socket.
pub(super) fn send_request(
    fd: &OwnedFd,
    policy: &[u8],
    fds: &[RawFd; PASSED],
) -> std::io::Result<()> {
    let len = (policy.len() as u32).to_le_bytes();
    let iov = [IoSlice::new(&len), IoSlice::new(policy)];
    let cmsg = [ControlMessage::ScmRights(fds)];
    let mut sent = loop {
        match sendmsg::<()>(fd.as_raw_fd(), &iov, &cmsg, MsgFlags::MSG_NOSIGNAL, None) {
            Ok(n) => break n,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        }
    };
    // A stream socket may take a long message in parts; the descriptors
    // went with the first one.
    let total = len.len() + policy.len();
    while sent < total {
        let rest = if sent < len.len() {
            &len[sent..]
        } else {
            &policy[sent - len.len()..]
        };
        // SAFETY: sending from a buffer we own.
        let n = unsafe {
            libc::send(
                fd.as_raw_fd(),
                rest.as_ptr().cast(),
                rest.len(),
                libc::MSG_NOSIGNAL,
            )
        };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        sent += n as usize;
    }
    Ok(())
}

/// One run-channel message: kind, value, and a descriptor if one came.
/// `None` at end of file.
pub(super) fn recv_message(
    fd: &OwnedFd,
    block: bool,
) -> std::io::Result<Option<(u8, i32, Option<OwnedFd>)>> {
    let mut buf = [0u8; 5];
    let mut cmsg = nix::cmsg_space!([RawFd; 1]);
    let mut flags = MsgFlags::MSG_CMSG_CLOEXEC;
    if !block {
        flags |= MsgFlags::MSG_DONTWAIT;
    }
    let (n, passed) = loop {
        let mut iov = [IoSliceMut::new(&mut buf)];
        match recvmsg::<()>(fd.as_raw_fd(), &mut iov, Some(&mut cmsg), flags) {
            Ok(msg) => {
                let mut passed: Option<OwnedFd> = None;
                if let Ok(cmsgs) = msg.cmsgs() {
                    for c in cmsgs {
                        if let ControlMessageOwned::ScmRights(fds) = c {
                            for f in fds {
                                // SAFETY: the kernel just gave us this descriptor.
                                let owned = unsafe { OwnedFd::from_raw_fd(f) };
                                if passed.is_none() {
                                    passed = Some(owned);
                                }
                            }
                        }
                    }
                }
                if passed.is_none() && msg.flags.contains(MsgFlags::MSG_CTRUNC) {
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
    Ok(Some((buf[0], value, passed)))
}

// ---------------------------------------------------------------------------
// Zygote side. Everything below runs in the zygote and the inits it forks,
// which are single-threaded.

/// Send one run-channel message (never blocks, never raises SIGPIPE: a
/// server that stopped listening loses nothing it still needs).
pub(super) fn send_message(fd: RawFd, kind: u8, value: i32, pass: Option<RawFd>) -> bool {
    let mut buf = [0u8; 5];
    buf[0] = kind;
    buf[1..].copy_from_slice(&value.to_le_bytes());
    let iov = [IoSlice::new(&buf)];
    let fds: Vec<RawFd> = pass.into_iter().collect();
    let cmsg: Vec<ControlMessage> = if fds.is_empty() {
        Vec::new()
    } else {
        vec![ControlMessage::ScmRights(&fds)]
    };
    loop {
        match sendmsg::<()>(
            fd,
            &iov,
            &cmsg,
            MsgFlags::MSG_NOSIGNAL | MsgFlags::MSG_DONTWAIT,
            None,
        ) {
            Ok(n) => return n == buf.len(),
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_messages_decode_to_typed_errors() {
        match decode_status("Llandlock: the ruleset is not enforced") {
            SandboxError::LayerFailed(m) => assert_eq!(m, "landlock: the ruleset is not enforced"),
            other => panic!("{other:?}"),
        }
        // An exec that failed inside the run is the program's failure, told
        // apart from the server's own (`Io`) whatever its errno.
        match decode_status("E2 execute /nope") {
            SandboxError::Exec(e) => {
                assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
                assert!(e.to_string().contains("/nope"));
            }
            other => panic!("{other:?}"),
        }
        match decode_status("E24 execute /b") {
            SandboxError::Exec(e) => assert!(e.raw_os_error().is_none(), "{e:?}"),
            other => panic!("{other:?}"),
        }
    }
}
