//! The whole contract between the processes of the Linux sandbox, by
//! message and by role; each message is written and read in this folder
//! only:
//!
//! - `config.rs`, server → zygote at its start: the helper argument, the
//!   environment variable and the zygote's configuration.
//! - `ready.rs`, zygote → server and spare → zygote: the ready handshake.
//! - `request.rs`, server → zygote → spare: one run's policy and descriptors.
//! - `status.rs`, helper / init → server: the status pipe, silent when the
//!   backend was executed, else one typed [`Failure`].
//! - `channel.rs`, zygote / init → server: the run channel.
//!
//! This file holds the descriptor numbers each role finds its ends at and
//! the bounds on the waits.

pub(crate) mod channel;
pub(crate) mod config;
pub(crate) mod ready;
pub(crate) mod request;
pub(crate) mod status;

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

pub(crate) use config::{usable, Config, POLICY_ENV, POLICY_FROM_ENV, ZYGOTE_ARG};
pub(crate) use status::{last_error, report, report_to, Failure, RunStep};

/// The helper's status pipe is always this descriptor.
pub(crate) const STATUS_FD: RawFd = 3;
/// How long the server waits, at most, for a helper or zygote to confirm
/// the layers (a call timeout shortens it).
pub(crate) const STATUS_TIMEOUT: Duration = Duration::from_secs(20);

/// The zygote's end of the control socket.
pub(crate) const CONTROL_FD: RawFd = 3;
/// Descriptors passed with every request, in this order: stdin, stdout,
/// stderr, the status pipe, the run channel, and the run cgroup's
/// `cgroup.procs` (`/dev/null` when runs get no cgroup).
pub(crate) const PASSED: usize = 6;
/// Where each of them is in a request's list.
pub(crate) const PASSED_STATUS: usize = 3;
pub(crate) const PASSED_CHANNEL: usize = 4;
/// How long the zygote waits for a spare to say it is ready (the server's
/// own wait, bounded by the call timeout, may end first: the zygote is then
/// replaced), and the server on a run channel once the status pipe has
/// spoken.
pub(crate) const CHANNEL_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest request the zygote accepts (a policy is a few KiB).
pub(crate) const MAX_REQUEST: usize = 16 << 20;

/// Where init keeps its end of the run channel.
pub(crate) const RUN_CHANNEL_FD: RawFd = 4;
/// Where init finds its cgroup's `cgroup.procs` until it has entered.
pub(crate) const CGROUP_FD: RawFd = 5;
/// Where a spare keeps its socket to the zygote, and the zygote's pidfd
/// until it has checked the zygote is alive.
pub(crate) const SPARE_SOCKET: RawFd = 3;
pub(crate) const ZYGOTE_PIDFD: RawFd = 4;

pub(crate) fn pipe_cloexec() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: pipe2 fills the array we own.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned here alone.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Whether `fd` became readable (or hung up) within `timeout`.
pub(crate) fn wait_readable(fd: &OwnedFd, timeout: Duration) -> std::io::Result<bool> {
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
