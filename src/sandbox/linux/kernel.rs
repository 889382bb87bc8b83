//! Small facts about the running kernel and a way to try a call in a
//! throwaway child: shared by detection (`detect.rs`) and the layers' own
//! availability checks, so neither has to import the other.

use super::step_error::{LayerStep, StepError};

/// Whether a release string like `6.18.44-foo` is at least `major.minor`. Pure.
pub fn kernel_at_least(release: &str, major: u32, minor: u32) -> bool {
    let mut it = release
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<u32>().unwrap_or(0));
    let ma = it.next().unwrap_or(0);
    let mi = it.next().unwrap_or(0);
    (ma, mi) >= (major, minor)
}

/// The last error number, as a child's exit code carries it.
pub(crate) fn errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
        & 0xff
}

/// A throwaway child started by [`start_child`], reaped by
/// [`ChildProbe::result`] (or on drop, so no zombie is left behind).
pub(crate) struct ChildProbe(Option<libc::pid_t>);

/// Start `f` in a forked child (its exit code: 0 for success, else an
/// errno) and return without waiting, so several probes can run at once.
/// `f` must stick to async-signal-safe calls: the server may have other
/// threads.
pub(crate) fn start_child(f: impl FnOnce() -> i32) -> Result<ChildProbe, std::io::Error> {
    // SAFETY: the child runs `f` (async-signal-safe by contract) and _exits.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(std::io::Error::last_os_error());
    }
    if pid == 0 {
        let code = f();
        // SAFETY: leaving the child without running the parent's destructors.
        unsafe { libc::_exit(code & 0xff) };
    }
    Ok(ChildProbe(Some(pid)))
}

impl ChildProbe {
    /// Wait for the child: `Ok` if it exited 0, else its errno (or that it died).
    pub(crate) fn result(mut self) -> Result<(), std::io::Error> {
        match self.0.take() {
            Some(pid) => reap(pid),
            None => Err(std::io::Error::other("the probe child was already reaped")),
        }
    }
}

impl Drop for ChildProbe {
    fn drop(&mut self) {
        if let Some(pid) = self.0.take() {
            let _ = reap(pid);
        }
    }
}

fn reap(pid: libc::pid_t) -> Result<(), std::io::Error> {
    let mut status = 0;
    loop {
        // SAFETY: waiting for the child we forked.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            break;
        }
        if r < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return Err(std::io::Error::last_os_error());
        }
    }
    if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
        Ok(())
    } else if libc::WIFEXITED(status) {
        Err(std::io::Error::from_raw_os_error(libc::WEXITSTATUS(status)))
    } else {
        Err(std::io::Error::other("the probe child died"))
    }
}

/// A probe started in a child, with the words its failure is named by and
/// the step its error number belongs to, so a machine short of processes,
/// memory or descriptors is not taken for a kernel without the layer.
pub(crate) struct Pending {
    child: Result<ChildProbe, std::io::Error>,
    what: &'static str,
    step: LayerStep,
}

impl Pending {
    pub(crate) fn start(what: &'static str, step: LayerStep, f: impl FnOnce() -> i32) -> Pending {
        Pending {
            child: start_child(f),
            what,
            step,
        }
    }

    /// Wait for it: `Err` says what failed and why. The probe's own fork
    /// failing is [`LayerStep::ProbeFork`]; an error number the child
    /// exited with belongs to the probe's step.
    pub(crate) fn finish(self) -> Result<(), StepError> {
        let child = self
            .child
            .map_err(|e| StepError::io(LayerStep::ProbeFork, format!("{}: fork", self.what), &e))?;
        child
            .result()
            .map_err(|e| StepError::io(self.step, self.what, &e))
    }
}
