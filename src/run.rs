//! One backend run: spawn in the sandbox, capture with caps, wait with a
//! deadline and a cancel flag, and map what happened to an envelope
//! (docs/BACKEND.md, Output and exit codes).
//!
//! The calling thread spawns the child and also waits for it, because the
//! sandbox asks the kernel to kill the child when the thread that spawned it
//! ends (`PR_SET_PDEATHSIG` is tied to that thread). The same thread reads
//! both pipes, whichever has data (poll), so a child that fills one can never
//! stall the other and a run starts no thread of its own; the loop wakes on
//! output, on cancellation and on the deadline, so no run can hold its
//! caller forever.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::ExitStatus;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::cancel::Cancel;
use crate::envelope::Envelope;
use crate::error::{ErrorCode, ToolError};
use crate::limits::MAX_STDERR_BYTES;
use crate::redact::Redactor;
use crate::sandbox::layers::Attestation;
use crate::sandbox::{RunKind, Sandbox, SandboxError, SandboxedChild};

/// After the child exits, how long its pipes may stay open (a process it
/// left behind) before the rest of its tree is killed.
const HELD_OPEN_GRACE: Duration = Duration::from_millis(100);
/// After that kill, how long the readers get to see end-of-file.
const DRAIN_AFTER_KILL: Duration = Duration::from_millis(500);
/// How long to wait for a killed child to be reaped before leaving it to `Drop`.
const REAP_LIMIT: Duration = Duration::from_secs(2);
/// Longest stderr line quoted in an error message.
pub(crate) const MAX_MESSAGE_CHARS: usize = 300;
/// Bytes taken from a pipe per read.
const READ_CHUNK: usize = 64 * 1024;
/// Longest wait for output before the loop looks at the exit, the
/// deadline and the cancel flag again.
const POLL_WAIT: Duration = Duration::from_millis(20);

/// Caps of one run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RunBounds {
    pub max_stdout: usize,
    /// `None`: no time limit.
    pub timeout: Option<Duration>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exit {
    Code(i32),
    Signal(i32),
}

impl Exit {
    fn from_status(status: ExitStatus) -> Exit {
        match (status.code(), status.signal()) {
            (Some(c), _) => Exit::Code(c),
            (None, Some(s)) => Exit::Signal(s),
            // Neither is only possible for a stopped child, which `wait` doesn't report.
            (None, None) => Exit::Signal(0),
        }
    }
}

/// A run that ended by itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Finished {
    pub exit: Exit,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

#[derive(Debug)]
pub(crate) enum RunEnd {
    Finished(Finished),
    /// stdout passed the cap; the run was killed.
    TooLarge,
    TimedOut,
    Cancelled,
    /// The child exited but something it started kept its output open.
    HeldOpen(Exit),
    /// The kernel killed a process of the run for going past the run's
    /// memory bound (this many bytes, its cgroup's `memory.max`), and the
    /// run did not succeed.
    MemoryExceeded(u64),
}

#[derive(Debug)]
pub enum RunError {
    Spawn(SandboxError),
    Wait(io::Error),
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::Spawn(e) => write!(f, "{e}"),
            RunError::Wait(e) => write!(f, "waiting for the command failed: {e}"),
        }
    }
}

impl std::error::Error for RunError {}

/// Run `argv` once in the sandbox and capture it within `bounds`. `exe`,
/// when given, is the backend's descriptor the run executes (`--pin`),
/// else its path.
pub(crate) fn run_once(
    sandbox: &Sandbox,
    kind: RunKind,
    argv: &[String],
    cwd: &Path,
    exe: Option<BorrowedFd<'_>>,
    bounds: RunBounds,
    cancel: &Cancel,
) -> Result<RunEnd, RunError> {
    run_once_attested(sandbox, kind, argv, cwd, exe, bounds, cancel, &mut None)
}

/// `run_once`, also telling what the run was confined by (once it started);
/// `exe`, when given, is the backend's descriptor the run executes.
#[allow(clippy::too_many_arguments)]
fn run_once_attested(
    sandbox: &Sandbox,
    kind: RunKind,
    argv: &[String],
    cwd: &Path,
    exe: Option<BorrowedFd<'_>>,
    bounds: RunBounds,
    cancel: &Cancel,
    attestation: &mut Option<Attestation>,
) -> Result<RunEnd, RunError> {
    let started = Instant::now();
    let deadline = bounds.timeout.map(|t| started + t);
    let mut child = sandbox
        .spawn_from(kind, argv, cwd, exe)
        .map_err(RunError::Spawn)?;
    attestation.clone_from(&child.attestation);
    let end = capture(&mut child, bounds, deadline, cancel);
    if let Some(a) = attestation.as_mut() {
        a.denied = Some(child.denied());
    }
    Ok(memory_bound(end?, || child.memory_exceeded()))
}

/// A run that failed after the kernel killed one of its processes at the
/// run's memory bound failed for that, whatever the exit said: the bound
/// is the run's shortage, not the backend's fault. A run that succeeded
/// all the same (it handled a child's death) keeps its answer, and only a
/// failed run's cgroup is looked at (`exceeded`).
fn memory_bound(end: RunEnd, exceeded: impl FnOnce() -> Option<u64>) -> RunEnd {
    let failed = match &end {
        RunEnd::Finished(f) => f.exit != Exit::Code(0),
        RunEnd::HeldOpen(_) => true,
        _ => false,
    };
    match failed.then(exceeded).flatten() {
        Some(bound) => RunEnd::MemoryExceeded(bound),
        None => end,
    }
}

/// Read the run's output, answer its supervisor, and wait for its end.
fn capture(
    child: &mut SandboxedChild,
    bounds: RunBounds,
    deadline: Option<Instant>,
    cancel: &Cancel,
) -> Result<RunEnd, RunError> {
    // Both pipes are read on this thread, whichever has data, so a child
    // that fills one can never stall the other, and a run needs no thread
    // beyond the caller's (none that could fail to start mid-call).
    // stdout is kept one byte past its cap: enough to know it was passed.
    let mut stdout = Capture::new(
        child.stdout.take().map(OwnedFd::from),
        bounds.max_stdout.saturating_add(1),
    );
    let mut stderr = Capture::new(child.stderr.take().map(OwnedFd::from), MAX_STDERR_BYTES);
    let mut buf = vec![0u8; READ_CHUNK];
    let mut exited: Option<(Exit, Instant)> = None;
    let mut killed_leftovers = false;
    let mut idle = Duration::from_millis(1);
    loop {
        // Where the run tells its end on a descriptor, the same poll waits
        // for output and for the exit, so the answer goes out as soon as
        // both are in, with no sleep between.
        let exit_fd = match exited {
            None => child.exit_fd().map(|fd| fd.as_raw_fd()),
            Some(_) => None,
        };
        // The run's watched calls wait for an answer from this same loop.
        let watch_fd = child.supervisor_fd();
        if stdout.is_done() && stderr.is_done() && exit_fd.is_none() && watch_fd.is_none() {
            // Only the exit is missing and nothing will signal it: look
            // again soon (it normally follows end-of-file closely).
            cancel.wait_timeout(idle);
            idle = (idle * 2).min(Duration::from_millis(5));
        } else {
            let watched = poll_readable(
                &mut [&mut stdout, &mut stderr],
                [exit_fd, watch_fd],
                POLL_WAIT,
            );
            if watched[1] != 0 {
                child.supervise(watched[1]);
            }
            stdout.read_ready(&mut buf);
            stderr.read_ready(&mut buf);
            if stdout.data.len() > bounds.max_stdout {
                stop(child);
                return Ok(RunEnd::TooLarge);
            }
        }

        if cancel.is_cancelled() {
            stop(child);
            return Ok(RunEnd::Cancelled);
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            stop(child);
            return Ok(RunEnd::TimedOut);
        }
        if exited.is_none() {
            if let Some(status) = child.try_wait().map_err(RunError::Wait)? {
                exited = Some((Exit::from_status(status), Instant::now()));
            }
        }
        if let Some((exit, at)) = exited {
            if stdout.is_done() && stderr.is_done() {
                return Ok(RunEnd::Finished(Finished {
                    exit,
                    stdout: std::mem::take(&mut stdout.data),
                    stderr: std::mem::take(&mut stderr.data),
                }));
            }
            if !killed_leftovers && at.elapsed() >= HELD_OPEN_GRACE {
                child.kill_tree();
                killed_leftovers = true;
            }
            if at.elapsed() >= HELD_OPEN_GRACE + DRAIN_AFTER_KILL {
                return Ok(RunEnd::HeldOpen(exit));
            }
        }
    }
}

/// For a caller that reads the run's output elsewhere (`sandbox run`):
/// answer the run's supervisor until the run's end is in, or nobody
/// watches it any more. Returns at once for a run without a supervisor.
pub(crate) fn supervise_until_exit(child: &mut SandboxedChild) {
    while let Some(watch_fd) = child.supervisor_fd() {
        let exit_fd = child.exit_fd().map(|fd| fd.as_raw_fd());
        let revents = poll_readable(&mut [], [exit_fd, Some(watch_fd)], POLL_WAIT);
        if revents[1] != 0 {
            child.supervise(revents[1]);
        }
        if revents[0] != 0 {
            return;
        }
    }
}

/// Kill the run's tree and reap the child, within a bound.
fn stop(child: &mut SandboxedChild) {
    child.kill_tree();
    let until = Instant::now() + REAP_LIMIT;
    while Instant::now() < until {
        match child.try_wait() {
            Ok(Some(_)) | Err(_) => return,
            Ok(None) => thread::sleep(Duration::from_millis(2)),
        }
    }
}

/// One of the run's output pipes, read to its end, keeping at most `keep`
/// bytes and draining the rest so the child never blocks on a full pipe.
struct Capture {
    pipe: Option<OwnedFd>,
    /// Whether the last poll found it readable (or closed).
    ready: bool,
    data: Vec<u8>,
    keep: usize,
}

impl Capture {
    fn new(pipe: Option<OwnedFd>, keep: usize) -> Capture {
        Capture {
            pipe,
            ready: false,
            data: Vec::new(),
            keep,
        }
    }

    fn is_done(&self) -> bool {
        self.pipe.is_none()
    }

    /// One read, when the last poll said there is something to read.
    fn read_ready(&mut self, buf: &mut [u8]) {
        if !std::mem::take(&mut self.ready) {
            return;
        }
        let Some(pipe) = &self.pipe else {
            return;
        };
        // SAFETY: reading into a buffer we own from a descriptor we own;
        // poll said it will not block.
        let n = unsafe { libc::read(pipe.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        match n {
            0 => self.pipe = None,
            n if n > 0 => {
                let n = n as usize;
                let room = self.keep.saturating_sub(self.data.len());
                self.data.extend_from_slice(&buf[..n.min(room)]);
            }
            _ => {
                let e = io::Error::last_os_error();
                if !matches!(
                    e.kind(),
                    io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock
                ) {
                    self.pipe = None;
                }
            }
        }
    }
}

/// Wait up to `wait` until one of the open pipes can be read (or is
/// closed), or `exit` can, and mark which pipes.
/// Poll the pipes and the `others` (the exit and the supervisor's
/// descriptors); the `revents` of each of the others.
fn poll_readable(
    captures: &mut [&mut Capture],
    others: [Option<RawFd>; 2],
    wait: Duration,
) -> [i16; 2] {
    let mut fds: Vec<libc::pollfd> = Vec::with_capacity(captures.len() + 2);
    for c in captures.iter() {
        if let Some(p) = &c.pipe {
            fds.push(libc::pollfd {
                fd: p.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            });
        }
    }
    let pipes = fds.len();
    // Last, so the pipes keep their places for the marking below.
    for fd in others.iter().flatten() {
        fds.push(libc::pollfd {
            fd: *fd,
            events: libc::POLLIN,
            revents: 0,
        });
    }
    let ms = libc::c_int::try_from(wait.as_millis()).unwrap_or(libc::c_int::MAX);
    // SAFETY: poll over descriptors we own, in an array we own.
    let r = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
    if r <= 0 {
        // Timed out, or interrupted: the caller's loop comes back.
        return [0; 2];
    }
    let mut i = 0;
    for c in captures.iter_mut() {
        if c.pipe.is_some() {
            c.ready = fds[i].revents != 0;
            i += 1;
        }
    }
    let mut revents = [0; 2];
    let mut at = pipes;
    for (slot, fd) in revents.iter_mut().zip(others) {
        if fd.is_some() {
            *slot = fds[at].revents;
            at += 1;
        }
    }
    revents
}

/// How a tool call ended, for the answer and the log line.
#[derive(Debug)]
pub(crate) enum CallEnd {
    /// The backend's own answer (exit 0, 1, or 2 with its error document).
    Answer(Envelope),
    /// A failure the server reports: the run could not start, failed, or was too large.
    Failed(ToolError),
    TimedOut(ToolError),
    Cancelled,
}

/// One tool run, mapped to an envelope (not yet redacted), and what the
/// run was confined by (`None` when it never started). `exe`: the
/// backend's descriptor the run executes (`--pin`), else its path.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_tool(
    sandbox: &Sandbox,
    kind: RunKind,
    argv: &[String],
    cwd: &Path,
    exe: Option<BorrowedFd<'_>>,
    bounds: RunBounds,
    cancel: &Cancel,
    redactor: &Redactor,
) -> (CallEnd, Option<Attestation>) {
    let mut attestation = None;
    let end = run_once_attested(
        sandbox,
        kind,
        argv,
        cwd,
        exe,
        bounds,
        cancel,
        &mut attestation,
    );
    (map_end(end, bounds, redactor), attestation)
}

fn map_end(end: Result<RunEnd, RunError>, bounds: RunBounds, redactor: &Redactor) -> CallEnd {
    match end {
        Ok(RunEnd::Finished(f)) => match refused_by_sandbox(&f) {
            Some(e) => CallEnd::Failed(e),
            None => match map_exit(&f, redactor) {
                Ok(envelope) => CallEnd::Answer(envelope),
                Err(e) => CallEnd::Failed(e),
            },
        },
        Ok(RunEnd::TooLarge) => CallEnd::Failed(ToolError::templated(
            ErrorCode::OutputTooLarge,
            &bounds.max_stdout.to_string(),
        )),
        Ok(RunEnd::TimedOut) => {
            let secs = bounds.timeout.map_or(0, |t| t.as_secs());
            CallEnd::TimedOut(ToolError::templated(ErrorCode::Timeout, &secs.to_string()))
        }
        Ok(RunEnd::Cancelled) => CallEnd::Cancelled,
        Ok(RunEnd::MemoryExceeded(bound)) => CallEnd::Failed(memory_exceeded(bound)),
        Ok(RunEnd::HeldOpen(exit)) => CallEnd::Failed(failed(
            &format!(
                "The command {} but left a process running that kept its output open",
                describe_exit(exit)
            ),
            &[],
            redactor,
        )),
        Err(e) => CallEnd::Failed(start_failure(&e)),
    }
}

/// The answer for a run stopped at its memory bound: the command ran, so
/// the shortage is said in words of its own, not the server's template
/// for a call that never started.
fn memory_exceeded(bound: u64) -> ToolError {
    ToolError::new(
        ErrorCode::ResourceExhausted,
        format!(
            "The command used more than the {} MiB of memory a call may use (its processes and \
             their kernel buffers together), and the kernel stopped it; ask for less, or ask the \
             server's owner to raise the bound.",
            bound >> 20
        ),
    )
}

/// On macOS, sandbox-exec's own refusal (a profile it could not apply, a
/// program it may not start) and a program the profile stopped before its
/// `main` (dyld's abort, with nothing printed) end the run before the
/// backend ran: that is `sandbox_failed`, not the backend's exit.
fn refused_by_sandbox(f: &Finished) -> Option<ToolError> {
    refused_by_sandbox_exec(cfg!(target_os = "macos"), f)
}

/// [`refused_by_sandbox`] with the platform given, so its rules are tested
/// on every system.
fn refused_by_sandbox_exec(macos: bool, f: &Finished) -> Option<ToolError> {
    if !macos {
        return None;
    }
    let ended = match f.exit {
        Exit::Code(c) => crate::sandbox::macos::Ended::Code(c),
        Exit::Signal(s) => crate::sandbox::macos::Ended::Signal(s),
    };
    let why = crate::sandbox::macos::died_at_start(ended, &f.stdout, &f.stderr)?;
    Some(ToolError::templated(
        ErrorCode::SandboxFailed,
        &why.to_string(),
    ))
}

/// A run that never got going: the server's own descriptors, processes or
/// memory running out is the server's shortage, a sandbox layer the
/// sandbox's failure, anything else (no such file) the command's.
fn start_failure(e: &RunError) -> ToolError {
    if let Some(what) = match e {
        RunError::Spawn(s) => s.exhausted(),
        RunError::Wait(_) => None,
    } {
        // A step inside the sandbox that ran short is named, so the owner
        // knows which limit to raise.
        return match e {
            RunError::Spawn(SandboxError::Exhausted(step, _)) => {
                ToolError::templated(ErrorCode::ResourceExhausted, &format!("{what} ({step})"))
            }
            _ => ToolError::templated(ErrorCode::ResourceExhausted, what),
        };
    }
    match e {
        RunError::Spawn(SandboxError::LayerFailed(_) | SandboxError::Unavailable(_)) => {
            ToolError::templated(ErrorCode::SandboxFailed, &e.to_string())
        }
        _ => ToolError::new(
            ErrorCode::BackendFailed,
            format!("The command could not be run: {e}."),
        ),
    }
}

/// docs/BACKEND.md, Output and exit codes: exit 0/1 with one JSON document, or exit 2 with an error
/// document, is the backend's answer; anything else is a failed run.
pub(crate) fn map_exit(f: &Finished, redactor: &Redactor) -> Result<Envelope, ToolError> {
    let parsed = serde_json::from_slice::<Value>(&f.stdout);
    let fail = |what: String| Err(failed(&what, &f.stderr, redactor));
    match (f.exit, parsed) {
        (Exit::Code(code @ (0 | 1)), Ok(doc)) => Ok(Envelope::from_run(code, doc)),
        (Exit::Code(2), Ok(doc)) if is_error_document(&doc) => Ok(Envelope::from_run(2, doc)),
        (Exit::Code(2), parsed) => fail(format!(
            "The command failed (exit code 2) without printing an error document ({})",
            stdout_report(&f.stdout, parsed.err().as_ref())
        )),
        (Exit::Code(code @ (0 | 1)), Err(e)) => fail(format!(
            "The command exited with code {code} but did not print one JSON document ({})",
            stdout_report(&f.stdout, Some(&e))
        )),
        (exit, parsed) => fail(format!(
            "The command {} ({})",
            describe_exit(exit),
            stdout_report(&f.stdout, parsed.err().as_ref())
        )),
    }
}

/// How much stdout arrived and, when it is not one JSON document, where
/// parsing stopped: a cut at 64 KiB (a Node `process.exit()` before its
/// output was flushed) reads differently from a stray log line.
fn stdout_report(stdout: &[u8], parse: Option<&serde_json::Error>) -> String {
    let n = stdout.len();
    let bytes = format!("{n} byte{} on stdout", if n == 1 { "" } else { "s" });
    if stdout.iter().all(u8::is_ascii_whitespace) {
        return if n == 0 {
            "nothing on stdout".to_string()
        } else {
            format!("{bytes}, all whitespace")
        };
    }
    match parse {
        Some(e) => format!(
            "{bytes}; the JSON stopped parsing at line {} column {}: {}",
            e.line(),
            e.column(),
            parse_problem(e)
        ),
        None => bytes,
    }
}

/// serde_json's message without its own "at line L column C" tail, which
/// [`stdout_report`] already gives.
fn parse_problem(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let tail = format!(" at line {} column {}", e.line(), e.column());
    text.strip_suffix(&tail).unwrap_or(&text).to_string()
}

fn describe_exit(exit: Exit) -> String {
    match exit {
        Exit::Code(c) => format!("exited with code {c}"),
        Exit::Signal(s) => format!("was killed by signal {s}{}", signal_name(s)),
    }
}

fn signal_name(s: i32) -> &'static str {
    match s {
        libc::SIGKILL => " (SIGKILL)",
        libc::SIGSEGV => " (SIGSEGV)",
        libc::SIGABRT => " (SIGABRT)",
        libc::SIGTERM => " (SIGTERM)",
        libc::SIGSYS => " (SIGSYS)",
        libc::SIGBUS => " (SIGBUS)",
        libc::SIGPIPE => " (SIGPIPE)",
        libc::SIGXFSZ => " (SIGXFSZ)",
        libc::SIGXCPU => " (SIGXCPU)",
        _ => "",
    }
}

/// `{"error": {"code": "...", "message": "..."}}`.
fn is_error_document(doc: &Value) -> bool {
    doc.get("error").is_some_and(|e| {
        e.get("code").is_some_and(Value::is_string)
            && e.get("message").is_some_and(Value::is_string)
    })
}

/// Where an owner can watch the same run, said in every `backend_failed`.
pub(crate) const REPRODUCE_HINT: &str =
    "the server's owner can reproduce the run with `reachweaver-mcp sandbox run -- BACKEND ARGS...`";

/// `backend_failed`, quoting the stderr line that carries the error. The
/// line is redacted whole before it is cut, so a secret split by the cut
/// is still found; the count of what was replaced travels with the error.
fn failed(what: &str, stderr: &[u8], redactor: &Redactor) -> ToolError {
    let mut redacted = 0;
    let message = match error_line(stderr) {
        Some(line) => {
            let clean = redactor.redact_text(&line, &mut redacted);
            format!("{what}: {}; {REPRODUCE_HINT}.", cut(&clean))
        }
        None => format!("{what}; {REPRODUCE_HINT}."),
    };
    ToolError::new(ErrorCode::BackendFailed, message).with_redacted(redacted)
}

/// The stderr line that says what went wrong, without control characters:
/// the last line of a Python traceback, else the first line that looks like
/// an error (`TypeError: ...`, `error: ...`, `panicked at`), else the first
/// line with any content. Runtimes print a location first (Node's
/// `node:fs:2380`, a traceback's `File ...` lines), which tells nobody
/// what failed.
pub(crate) fn error_line(stderr: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(stderr);
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty())
        .collect();
    let traceback = lines
        .iter()
        .rposition(|l| l.starts_with("Traceback (most recent call last)"))
        .and_then(|at| {
            lines[at + 1..]
                .iter()
                .rev()
                .find(|l| !l.starts_with(char::is_whitespace))
        });
    let line = traceback
        .or_else(|| lines.iter().find(|l| looks_like_an_error(l.trim())))
        .or_else(|| lines.first())?;
    Some(
        line.trim()
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect(),
    )
}

fn looks_like_an_error(line: &str) -> bool {
    let head = line.split([':', ' ']).next().unwrap_or_default();
    let lower = line.to_ascii_lowercase();
    (head.len() > 5
        && (head.ends_with("Error") || head.ends_with("Exception"))
        && line[head.len()..].starts_with(':'))
        || lower.starts_with("error:")
        || lower.starts_with("error ")
        || lower.starts_with("fatal:")
        || lower.starts_with("fatal error")
        || line.contains("panicked at")
}

/// At most [`MAX_MESSAGE_CHARS`] characters, marked when cut.
pub(crate) fn cut(line: &str) -> String {
    let mut out: String = line.chars().take(MAX_MESSAGE_CHARS).collect();
    if line.chars().count() > MAX_MESSAGE_CHARS {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn finished(exit: Exit, stdout: &str, stderr: &str) -> Finished {
        Finished {
            exit,
            stdout: stdout.as_bytes().to_vec(),
            stderr: stderr.as_bytes().to_vec(),
        }
    }

    fn none() -> Redactor {
        Redactor::new([])
    }

    fn map(f: &Finished) -> Result<Envelope, ToolError> {
        map_exit(f, &none())
    }

    #[test]
    fn a_failed_run_past_its_memory_bound_is_resource_exhausted() {
        const BOUND: u64 = 4 << 30;
        let end = |exit| RunEnd::Finished(finished(exit, "", ""));
        for exit in [Exit::Signal(libc::SIGKILL), Exit::Code(1), Exit::Code(137)] {
            assert!(matches!(
                memory_bound(end(exit), || Some(BOUND)),
                RunEnd::MemoryExceeded(BOUND)
            ));
        }
        assert!(matches!(
            memory_bound(RunEnd::HeldOpen(Exit::Code(0)), || Some(BOUND)),
            RunEnd::MemoryExceeded(BOUND)
        ));
        // A run that succeeded, or that no bound stopped, keeps its end.
        assert!(matches!(
            memory_bound(end(Exit::Code(0)), || -> Option<u64> {
                panic!("a run that succeeded is not looked at")
            }),
            RunEnd::Finished(Finished {
                exit: Exit::Code(0),
                ..
            })
        ));
        assert!(matches!(
            memory_bound(end(Exit::Signal(libc::SIGKILL)), || None),
            RunEnd::Finished(Finished {
                exit: Exit::Signal(9),
                ..
            })
        ));
        assert!(matches!(
            memory_bound(RunEnd::TimedOut, || Some(BOUND)),
            RunEnd::TimedOut
        ));
        let bounds = RunBounds {
            timeout: None,
            max_stdout: 10,
        };
        let CallEnd::Failed(e) = map_end(Ok(RunEnd::MemoryExceeded(BOUND)), bounds, &none()) else {
            panic!("not a failure");
        };
        assert_eq!(e.code(), "resource_exhausted");
        assert!(
            e.message()
                .starts_with("The command used more than the 4096 MiB of memory a call may use"),
            "{}",
            e.message()
        );
    }

    #[test]
    fn exit_0_and_1_are_answers() {
        let e = map(&finished(Exit::Code(0), "{\"ok\": true}\n", "")).unwrap();
        assert_eq!(e, Envelope::from_run(0, json!({"ok": true})));
        let e = map(&finished(Exit::Code(1), " [1, 2] ", "warn")).unwrap();
        assert_eq!(e, Envelope::from_run(1, json!([1, 2])));
        assert!(!e.is_error());
    }

    #[test]
    fn exit_2_with_error_document_is_passed_on() {
        let doc = json!({"error": {"code": "no_such_campaign", "message": "No campaign q9."}});
        let e = map(&finished(Exit::Code(2), &doc.to_string(), "")).unwrap();
        assert_eq!(e, Envelope::from_run(2, doc));
        assert!(e.is_error());
    }

    #[test]
    fn everything_else_is_backend_failed_quoting_stderr_and_pointing_to_sandbox_run() {
        let cases = [
            finished(
                Exit::Code(2),
                "{\"oops\": 1}",
                "\n  first problem  \nsecond",
            ),
            finished(Exit::Code(2), "", "first problem"),
            finished(Exit::Code(3), "{}", "first problem"),
            finished(Exit::Code(0), "not json", "first problem"),
            finished(Exit::Code(0), "{} {}", "first problem"),
            finished(Exit::Code(1), "", "first problem"),
            finished(Exit::Signal(9), "{}", "first problem"),
        ];
        for f in cases {
            let e = map(&f).unwrap_err();
            assert_eq!(e.code(), "backend_failed", "{f:?}");
            let msg = e.message();
            assert!(
                msg.ends_with(&format!(": first problem; {REPRODUCE_HINT}.")),
                "{msg}"
            );
        }
    }

    #[test]
    fn failure_messages_say_what_happened_and_what_arrived_on_stdout() {
        let msg = |f: Finished| map(&f).unwrap_err().message().to_string();
        assert_eq!(
            msg(finished(Exit::Code(7), "", "")),
            format!("The command exited with code 7 (nothing on stdout); {REPRODUCE_HINT}.")
        );
        assert_eq!(
            msg(finished(Exit::Signal(9), "{}", "")),
            format!(
                "The command was killed by signal 9 (SIGKILL) (2 bytes on stdout); {REPRODUCE_HINT}."
            )
        );
        assert_eq!(
            msg(finished(Exit::Code(0), "x", "")),
            format!(
                "The command exited with code 0 but did not print one JSON document (1 byte on stdout; \
                 the JSON stopped parsing at line 1 column 1: expected value); {REPRODUCE_HINT}."
            )
        );
        // A document cut short, as when a runtime exits before its output
        // is flushed: the byte count and the place say so.
        let cut_short = format!("{{\"items\": [{}", "1,".repeat(10));
        let m = msg(finished(Exit::Code(0), &cut_short, ""));
        assert!(
            m.contains("(31 bytes on stdout; the JSON stopped parsing at line 1 column 31: EOF while parsing a value)"),
            "{m}"
        );
        assert!(
            msg(finished(Exit::Code(1), " \n", "")).contains("(2 bytes on stdout, all whitespace)")
        );
    }

    #[test]
    fn the_quoted_line_is_the_one_that_carries_the_error() {
        let line = |s: &str| error_line(s.as_bytes());
        assert_eq!(line(""), None);
        assert_eq!(line("\n \n"), None);
        let node = "node:fs:2380\n    return binding.readFileUtf8(path, stringToFlags(options.flag));\n                   ^\n\nError: ENOENT: no such file or directory, open '/x/catalog.json'\n    at Object.readFileSync (node:fs:2380:20)\n";
        assert_eq!(
            line(node).as_deref(),
            Some("Error: ENOENT: no such file or directory, open '/x/catalog.json'")
        );
        let py = "Traceback (most recent call last):\n  File \"/x/b.py\", line 3, in <module>\n    open('c.json')\nFileNotFoundError: [Errno 2] No such file or directory: 'c.json'\n";
        assert_eq!(
            line(py).as_deref(),
            Some("FileNotFoundError: [Errno 2] No such file or directory: 'c.json'")
        );
        assert_eq!(
            line("warming up\nerror: no database at /x/rw.db\n").as_deref(),
            Some("error: no database at /x/rw.db")
        );
        assert_eq!(
            line("thread 'main' panicked at src/main.rs:3:5:\nboom\n").as_deref(),
            Some("thread 'main' panicked at src/main.rs:3:5:")
        );
        // Nothing looks like an error: the first line with content.
        assert_eq!(
            line("\n  just a note\nmore").as_deref(),
            Some("just a note")
        );
        assert_eq!(line("a\tb\x1b[31m\nc").as_deref(), Some("a b [31m"));
    }

    #[test]
    fn the_quoted_line_is_redacted_before_it_is_cut_and_counted() {
        let secret = "s3cr3t-token-value-0123456789";
        let r = Redactor::new([("API_TOKEN".to_string(), secret.to_string())]);
        // The secret straddles the cut at MAX_MESSAGE_CHARS.
        let stderr = format!(
            "Error: {}{secret} refused",
            "x".repeat(MAX_MESSAGE_CHARS - 17)
        );
        let e = map_exit(&finished(Exit::Code(3), "", &stderr), &r).unwrap_err();
        assert!(!e.message().contains("s3cr3t"), "{}", e.message());
        assert!(e.message().contains("[REDACTED]"), "{}", e.message());
        assert_eq!(e.redacted(), 1);
        let env = Envelope::from_error(&e);
        assert_eq!(env.meta[crate::call::META_REDACTED], json!(1));
        let long = "x".repeat(1000);
        assert_eq!(cut(&long).chars().count(), MAX_MESSAGE_CHARS + 1);
    }

    #[test]
    fn a_run_macos_stopped_before_main_is_sandbox_failed() {
        let finished = |exit, stdout: &[u8], stderr: &[u8]| Finished {
            exit,
            stdout: stdout.to_vec(),
            stderr: stderr.to_vec(),
        };
        // dyld's abort on macOS 26: SIGABRT, nothing printed.
        let f = finished(Exit::Signal(libc::SIGABRT), b"", b"");
        let e = refused_by_sandbox_exec(true, &f).unwrap();
        assert_eq!(e.code(), "sandbox_failed");
        assert!(e.message().contains("before it started"), "{}", e.message());
        // sandbox-exec's own refusal.
        let f = finished(
            Exit::Code(71),
            b"",
            b"sandbox-exec: sandbox_apply: Operation not permitted\n",
        );
        assert_eq!(
            refused_by_sandbox_exec(true, &f).map(|e| e.code()),
            Some("sandbox_failed")
        );
        // A backend that printed and then aborted: its own failure.
        let f = finished(Exit::Signal(libc::SIGABRT), b"{\"partial\": ", b"");
        assert!(refused_by_sandbox_exec(true, &f).is_none());
        assert_eq!(map_exit(&f, &none()).unwrap_err().code(), "backend_failed");
        // Linux has no sandbox-exec: never read this way there.
        let f = finished(Exit::Signal(libc::SIGABRT), b"", b"");
        assert!(refused_by_sandbox_exec(false, &f).is_none());
    }

    #[test]
    fn a_layer_failure_is_sandbox_failed_and_anything_else_backend_failed() {
        let e = start_failure(&RunError::Spawn(SandboxError::LayerFailed(
            "landlock: not enforced".into(),
        )));
        assert_eq!(e.code(), "sandbox_failed");
        assert!(
            e.message().contains("nothing ran") && e.message().contains("landlock"),
            "{}",
            e.message()
        );
        let e = start_failure(&RunError::Spawn(SandboxError::Unavailable(
            "seccomp".into(),
        )));
        assert_eq!(e.code(), "sandbox_failed");
        let e = start_failure(&RunError::Spawn(SandboxError::Io(io::Error::from(
            io::ErrorKind::NotFound,
        ))));
        assert_eq!(e.code(), "backend_failed");
    }

    #[test]
    fn a_sandbox_step_that_ran_short_is_named_in_the_message() {
        let e = start_failure(&RunError::Spawn(SandboxError::Exhausted(
            "landlock: failed to create a ruleset: Too many open files (os error 24)".into(),
            libc::EMFILE,
        )));
        assert_eq!(e.code(), "resource_exhausted");
        assert!(
            e.message().starts_with(
                "The server ran out of open files (landlock: failed to create a ruleset: "
            ),
            "{}",
            e.message()
        );
    }

    #[test]
    fn the_servers_own_shortage_is_resource_exhausted_never_backend_failed() {
        let io = |n| RunError::Spawn(SandboxError::Io(io::Error::from_raw_os_error(n)));
        for (errno, what) in [
            (libc::EMFILE, "open files"),
            (libc::ENFILE, "open files"),
            (libc::EAGAIN, "processes or threads"),
            (libc::ENOMEM, "memory"),
            (libc::ENOBUFS, "memory"),
        ] {
            let e = start_failure(&io(errno));
            assert_eq!(e.code(), "resource_exhausted", "{errno}");
            assert!(
                e.message()
                    .starts_with(&format!("The server ran out of {what} before")),
                "{}",
                e.message()
            );
        }
        // Another error of the server's own call is still the command's.
        assert_eq!(start_failure(&io(libc::ENOENT)).code(), "backend_failed");
        // An exec that failed inside the run is the program's, whatever its errno.
        for errno in [libc::ENOENT, libc::EAGAIN, libc::EMFILE] {
            let os = io::Error::from_raw_os_error(errno);
            let e = start_failure(&RunError::Spawn(SandboxError::Exec(io::Error::new(
                os.kind(),
                format!("execute /b: {os}"),
            ))));
            assert_eq!(e.code(), "backend_failed", "{errno}");
        }
    }
}
