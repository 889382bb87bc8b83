//! The whole contract between the processes of the Linux sandbox, by
//! message and by role; each message is written and read in this folder
//! only:
//!
//! - `config.rs`, server → zygote at its start: the helper argument, the
//!   environment variable and the zygote's configuration.
//! - `ready.rs`, zygote → server and spare → zygote: the ready handshake.
//! - `request.rs`, server → zygote → spare: one run's policy and descriptors
//!   (with `--pin`, the backend's descriptor too).
//! - `status.rs`, helper / init → server: the status pipe, silent when the
//!   backend was executed, else one typed [`Failure`].
//! - `channel.rs`, zygote / init → server: the run channel.
//!
//! This file holds the descriptor numbers each role finds its ends at, the
//! run's descriptors as passed ([`RunFds`]), and the bounds on the waits.

pub(crate) mod channel;
pub(crate) mod config;
pub(crate) mod ready;
pub(crate) mod request;
pub(crate) mod status;

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

pub(crate) use config::{
    usable, ZygoteConfig, POLICY_ENV, POLICY_FROM_ENV, POLICY_FROM_ENV_EXE, ZYGOTE_ARG,
};
pub(crate) use status::{last_error, report, report_to, Failure, RunStep};

/// How long the server waits, at most, for a helper or zygote to confirm
/// the layers (a call timeout shortens it).
pub(crate) const STATUS_TIMEOUT: Duration = Duration::from_secs(20);

/// The zygote's end of the control socket.
pub(crate) const CONTROL_FD: RawFd = 3;
/// How many descriptors a request carries: one per field of [`RunFds`],
/// and after them, when the run executes it, the backend's own.
pub(crate) const PASSED: usize = 6;
/// Where init (and the re-executed helper) keeps the backend's descriptor
/// when the run executes it rather than its path: right after the run's.
pub(crate) const EXE_FD: RawFd = PASSED as RawFd;
/// How long the zygote waits for a spare to say it is ready (the server's
/// own wait, bounded by the call timeout, may end first: the zygote is then
/// replaced), and the server on a run channel once the status pipe has
/// spoken.
pub(crate) const CHANNEL_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest request the zygote accepts (a policy is a few KiB).
pub(crate) const MAX_REQUEST: usize = 16 << 20;

/// Where the helper and init find the status pipe.
pub(crate) const STATUS_FD: RawFd = 3;
/// Where init keeps its end of the run channel.
pub(crate) const RUN_CHANNEL_FD: RawFd = 4;
/// Where init finds its cgroup's `cgroup.procs` until it has entered.
pub(crate) const CGROUP_FD: RawFd = 5;
/// Where a spare keeps its socket to the zygote, and the zygote's pidfd
/// until it has checked the zygote is alive.
pub(crate) const SPARE_SOCKET: RawFd = 3;
pub(crate) const ZYGOTE_PIDFD: RawFd = 4;

/// The descriptors the server makes for one run and the zygote forwards
/// to its init, which places each at the number it has in the run: a
/// field's place in the list sent ([`RunFds::into_array`]) is that number,
/// which the assertions below hold at compile time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RunFds<F> {
    pub(crate) stdin: F,
    pub(crate) stdout: F,
    pub(crate) stderr: F,
    /// The status pipe's writing end.
    pub(crate) status: F,
    /// The run's end of the run channel.
    pub(crate) channel: F,
    /// The run cgroup's `cgroup.procs` (`/dev/null` when runs get no cgroup).
    pub(crate) cgroup_procs: F,
}

/// One list of the fields, in the order sent, makes both conversions and
/// [`AT`]: the order can't differ between them.
macro_rules! in_wire_order {
    ($($field:ident),* $(,)?) => {
        impl<F> RunFds<F> {
            pub(crate) fn from_array(fds: [F; PASSED]) -> RunFds<F> {
                let [$($field),*] = fds;
                RunFds { $($field),* }
            }

            /// The list as sent, each at the index that is its number in the run.
            pub(crate) fn into_array(self) -> [F; PASSED] {
                let RunFds { $($field),* } = self;
                [$($field),*]
            }
        }

        /// Each field's index in the list sent.
        const AT: RunFds<usize> = {
            let mut at = 0;
            $(
                let $field = at;
                at += 1;
            )*
            assert!(at == PASSED);
            RunFds { $($field),* }
        };
    };
}

in_wire_order!(stdin, stdout, stderr, status, channel, cgroup_procs);

impl<F> RunFds<F> {
    /// The list a request brought, when it holds exactly one per field.
    pub(crate) fn from_vec(fds: Vec<F>) -> Option<RunFds<F>> {
        <[F; PASSED]>::try_from(fds).ok().map(RunFds::from_array)
    }

    pub(crate) fn raw(&self) -> RunFds<RawFd>
    where
        F: AsRawFd,
    {
        RunFds {
            stdin: self.stdin.as_raw_fd(),
            stdout: self.stdout.as_raw_fd(),
            stderr: self.stderr.as_raw_fd(),
            status: self.status.as_raw_fd(),
            channel: self.channel.as_raw_fd(),
            cgroup_procs: self.cgroup_procs.as_raw_fd(),
        }
    }
}

// Init places the list at 0, 1, 2, ... and then uses the numbers below: a
// change of order on either side fails the build, not a run.
const _: () = {
    assert!(AT.stdin as RawFd == libc::STDIN_FILENO);
    assert!(AT.stdout as RawFd == libc::STDOUT_FILENO);
    assert!(AT.stderr as RawFd == libc::STDERR_FILENO);
    assert!(AT.status as RawFd == STATUS_FD);
    assert!(AT.channel as RawFd == RUN_CHANNEL_FD);
    assert!(AT.cgroup_procs as RawFd == CGROUP_FD);
};

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_run_fds_go_out_and_come_back_in_one_order() {
        let list = [10, 11, 12, 13, 14, 15];
        let fds = RunFds::from_array(list);
        assert_eq!((fds.status, fds.channel, fds.cgroup_procs), (13, 14, 15));
        assert_eq!(fds.into_array(), list);
        assert_eq!(RunFds::from_vec(list.to_vec()), Some(fds));
        assert_eq!(RunFds::from_vec(list[..5].to_vec()), None);
    }
}
