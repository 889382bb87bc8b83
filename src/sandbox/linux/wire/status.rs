//! Helper / init → server: the status pipe. It reaches end of file with
//! nothing written exactly when the backend was executed; anything written
//! is one [`Failure`], encoded here and decoded here only. The same
//! encoding carries a spare's failure to the zygote (see `ready.rs`).

use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::STATUS_FD;
use crate::sandbox::linux::step_error::{LayerStep, StepError};
use crate::sandbox::{Layer, SandboxError};

/// A step of setting up a run that belongs to no layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum RunStep {
    /// The helper's, zygote's and init's own process steps: fork, clone,
    /// descriptors, session, the namespace's `memfd_noexec`. Only these
    /// can fail for want of processes, memory or descriptors.
    Process,
    /// Reading and checking what the run was asked to be: the policy, the
    /// zygote's configuration, the command line, the working folder.
    Request,
}

/// Whose step failed: a layer's, or the run's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Part {
    Layer(Layer),
    Run(RunStep),
}

impl From<Layer> for Part {
    fn from(l: Layer) -> Part {
        Part::Layer(l)
    }
}

impl From<RunStep> for Part {
    fn from(s: RunStep) -> Part {
        Part::Run(s)
    }
}

/// One step of setting up a run that failed: whose, which step, and the
/// kernel's error number when a call failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct LayerFailure {
    pub(crate) part: Part,
    /// What was being done, as the owner reads it.
    pub(crate) step: String,
    pub(crate) errno: Option<i32>,
    /// The named step, when its code said which: then `step` is the whole
    /// message, the error number's text included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) at: Option<LayerStep>,
}

impl LayerFailure {
    /// Whether the machine ran out rather than the step being refused: a
    /// named step decides for itself; of the rest, only the run's own
    /// process steps can run short.
    fn is_shortage(&self) -> bool {
        let Some(n) = self.errno else {
            return false;
        };
        match self.at {
            Some(step) => step.short_of(n),
            None => {
                self.part == Part::Run(RunStep::Process) && crate::sandbox::shortage(n).is_some()
            }
        }
    }
}

impl std::fmt::Display for LayerFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.errno, self.at) {
            (Some(n), None) => {
                write!(f, "{}: {}", self.step, std::io::Error::from_raw_os_error(n))
            }
            _ => f.write_str(&self.step),
        }
    }
}

/// A failure before the backend runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Failure {
    /// A layer (or the process around it) could not be set up.
    Layer(LayerFailure),
    /// Every layer applied, but `execve` of the backend failed.
    Exec { errno: i32, what: String },
}

impl Failure {
    /// A step's failure, described by the code that took it.
    pub(crate) fn layer(part: impl Into<Part>, step: impl Into<String>) -> Failure {
        Failure::Layer(LayerFailure {
            part: part.into(),
            step: step.into(),
            errno: None,
            at: None,
        })
    }

    /// A named step's failure, its error number kept.
    pub(crate) fn step(part: impl Into<Part>, e: StepError) -> Failure {
        Failure::Layer(LayerFailure {
            part: part.into(),
            step: e.detail,
            errno: e.errno,
            at: Some(e.step),
        })
    }

    /// For `map_err`: a layer function's failure, attributed to `layer`.
    pub(crate) fn of(layer: Layer) -> impl Fn(StepError) -> Failure {
        move |e| Failure::step(layer, e)
    }

    /// The encoding on the status pipe and a spare's socket.
    pub(crate) fn encode(&self) -> Vec<u8> {
        // Serialising plain strings and integers cannot fail; an empty
        // message would read as success, so never send one.
        serde_json::to_vec(self).unwrap_or_else(|_| b"{}".to_vec())
    }

    /// What the server makes of a failure it was told about.
    pub(crate) fn decode(bytes: &[u8]) -> Failure {
        serde_json::from_slice(bytes).unwrap_or_else(|_| {
            Failure::layer(
                RunStep::Process,
                format!(
                    "an unreadable status message: {}",
                    String::from_utf8_lossy(bytes)
                ),
            )
        })
    }

    /// The server's error for this failure. A step that failed because the
    /// machine ran out (processes, memory, descriptors) is a shortage, not
    /// a refusal by a layer.
    pub(crate) fn into_error(self) -> SandboxError {
        match self {
            Failure::Exec { errno, what } => {
                let os = std::io::Error::from_raw_os_error(errno);
                SandboxError::Exec(std::io::Error::new(os.kind(), format!("{what}: {os}")))
            }
            Failure::Layer(f) => match f.errno {
                Some(n) if f.is_shortage() => SandboxError::Exhausted(f.to_string(), n),
                _ => SandboxError::LayerFailed(f.to_string()),
            },
        }
    }
}

/// A process step that failed with the last error number.
pub(crate) fn last_error(what: &str) -> Failure {
    last_error_in(RunStep::Process, what)
}

/// A step of `part` that failed with the last error number.
pub(crate) fn last_error_in(part: impl Into<Part>, what: &str) -> Failure {
    let errno = std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO);
    Failure::Layer(LayerFailure {
        part: part.into(),
        step: what.to_string(),
        errno: Some(errno),
        at: None,
    })
}

/// A process step, named for the server's reading of its error number,
/// that failed with the last error number.
pub(crate) fn last_error_at(step: LayerStep, what: &str) -> Failure {
    Failure::step(RunStep::Process, StepError::last(step, what))
}

/// Report a failure on the status pipe, at its fixed number.
pub(crate) fn report(f: &Failure) {
    report_to(STATUS_FD, f);
}

/// Report a failure on a run's status pipe before the run's init has it
/// at its number.
pub(crate) fn report_to(status: RawFd, f: &Failure) {
    let bytes = f.encode();
    // SAFETY: writing our own buffer to a descriptor we hold.
    unsafe { libc::write(status, bytes.as_ptr().cast(), bytes.len()) };
}

/// Read the status pipe to end of file: `None` when nothing was written
/// (the backend was executed), else the failure.
pub(crate) fn read_status(fd: OwnedFd, timeout: Duration) -> std::io::Result<Option<Failure>> {
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
    Ok((!buf.is_empty()).then(|| Failure::decode(&buf)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(f: &Failure) -> SandboxError {
        let back = Failure::decode(&f.encode());
        assert_eq!(&back, f);
        back.into_error()
    }

    #[test]
    fn a_layers_failure_keeps_its_layer_step_and_text() {
        let f = Failure::layer(Layer::Landlock, "landlock: the ruleset is not enforced");
        let Failure::Layer(l) = &f else { panic!() };
        assert_eq!(l.part, Part::Layer(Layer::Landlock));
        match round_trip(&f) {
            SandboxError::LayerFailed(m) => assert_eq!(m, "landlock: the ruleset is not enforced"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_exec_failure_is_the_programs_whatever_its_errno() {
        // An exec that failed inside the run is the program's failure, told
        // apart from the server's own (`Io`) whatever its errno.
        match round_trip(&Failure::Exec {
            errno: libc::ENOENT,
            what: "execute /nope".into(),
        }) {
            SandboxError::Exec(e) => {
                assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
                assert!(e.to_string().contains("/nope"), "{e}");
                assert!(e.raw_os_error().is_none(), "{e:?}");
            }
            other => panic!("{other:?}"),
        }
        let e = round_trip(&Failure::Exec {
            errno: libc::EMFILE,
            what: "execute /b".into(),
        });
        assert!(matches!(e, SandboxError::Exec(_)), "{e:?}");
        assert_eq!(e.exhausted(), None);
    }

    #[test]
    fn a_fork_the_machine_could_not_afford_is_a_shortage() {
        for (errno, what) in [
            (libc::EAGAIN, "processes or threads"),
            (libc::ENOMEM, "memory"),
            (libc::EMFILE, "open files"),
            (libc::ENFILE, "open files"),
        ] {
            let f = Failure::Layer(LayerFailure {
                part: Part::Run(RunStep::Process),
                step: "fork".into(),
                errno: Some(errno),
                at: None,
            });
            let e = round_trip(&f);
            assert!(
                matches!(e, SandboxError::Exhausted(_, n) if n == errno),
                "{e:?}"
            );
            assert_eq!(e.exhausted(), Some(what));
            assert!(
                e.to_string()
                    .starts_with("could not start the sandboxed run: fork: "),
                "{e}"
            );
        }
        // Any other error number of the same step is the sandbox's failure.
        let e = round_trip(&Failure::Layer(LayerFailure {
            part: Part::Run(RunStep::Process),
            step: "clone".into(),
            errno: Some(libc::EPERM),
            at: None,
        }));
        assert!(matches!(e, SandboxError::LayerFailed(_)), "{e:?}");
        assert_eq!(e.exhausted(), None);
        // A layer's own ENOMEM is that layer failing, not a shortage of the
        // process steps.
        let e = round_trip(&Failure::Layer(LayerFailure {
            part: Part::Layer(Layer::Seccomp),
            step: "seccomp: load".into(),
            errno: Some(libc::ENOMEM),
            at: None,
        }));
        assert!(matches!(e, SandboxError::LayerFailed(_)), "{e:?}");
    }

    #[test]
    fn a_layer_step_that_ran_short_is_a_shortage_naming_the_step() {
        let step = |step, errno| {
            Failure::step(
                Layer::Landlock,
                StepError::io(
                    step,
                    "landlock: failed to create a ruleset",
                    &std::io::Error::from_raw_os_error(errno),
                ),
            )
        };
        let e = round_trip(&step(LayerStep::LandlockRuleset, libc::EMFILE));
        assert!(
            matches!(&e, SandboxError::Exhausted(m, n)
                if *n == libc::EMFILE
                    && m == "landlock: failed to create a ruleset: Too many open files (os error 24)"),
            "{e:?}"
        );
        assert_eq!(e.exhausted(), Some("open files"));
        // The same errno from a step that opens nothing is a refusal, its
        // text unchanged.
        let e = round_trip(&step(LayerStep::LandlockAccess, libc::EMFILE));
        assert!(
            matches!(&e, SandboxError::LayerFailed(m)
                if m == "landlock: failed to create a ruleset: Too many open files (os error 24)"),
            "{e:?}"
        );
        // A fork into a PID namespace whose init died: ENOMEM, no shortage.
        let e = round_trip(&Failure::step(
            RunStep::Process,
            StepError::io(
                LayerStep::ForkIntoPidns,
                "fork",
                &std::io::Error::from_raw_os_error(libc::ENOMEM),
            ),
        ));
        assert!(matches!(e, SandboxError::LayerFailed(_)), "{e:?}");
        let e = round_trip(&Failure::step(
            RunStep::Process,
            StepError::io(
                LayerStep::ForkIntoPidns,
                "fork",
                &std::io::Error::from_raw_os_error(libc::EAGAIN),
            ),
        ));
        assert_eq!(e.exhausted(), Some("processes or threads"));
        // A failure without a named step reads as it always did, and says
        // nothing of steps on the pipe.
        let unnamed = Failure::Layer(LayerFailure {
            part: Part::Layer(Layer::Seccomp),
            step: "seccomp: load".into(),
            errno: Some(libc::ENOMEM),
            at: None,
        });
        assert!(!String::from_utf8_lossy(&unnamed.encode()).contains("\"at\""));
        let e = round_trip(&unnamed);
        assert!(
            matches!(&e, SandboxError::LayerFailed(m)
                if m == "seccomp: load: Cannot allocate memory (os error 12)"),
            "{e:?}"
        );
    }

    #[test]
    fn last_error_takes_the_errno_of_the_failed_call() {
        // SAFETY: closing a descriptor number that is never open.
        let r = unsafe { libc::close(-1) };
        assert_eq!(r, -1);
        let Failure::Layer(f) = last_error("close") else {
            panic!()
        };
        assert_eq!(
            (f.part, f.step.as_str()),
            (Part::Run(RunStep::Process), "close")
        );
        assert_eq!(f.errno, Some(libc::EBADF));
    }

    #[test]
    fn garbage_on_the_pipe_is_a_failure_never_a_success() {
        match Failure::decode(b"Lold style").into_error() {
            SandboxError::LayerFailed(m) => assert!(m.contains("Lold style"), "{m}"),
            other => panic!("{other:?}"),
        }
        assert!(!Failure::layer(RunStep::Process, "").encode().is_empty());
    }
}
