//! One backend run: spawn in the sandbox, capture with caps, wait with a
//! deadline and a cancel flag, and map what happened to an envelope
//! (docs/BACKEND.md, Output and exit codes).
//!
//! The calling thread spawns the child and also waits for it, because the
//! sandbox asks the kernel to kill the child when the thread that spawned it
//! ends (`PR_SET_PDEATHSIG` is tied to that thread). Reading happens on two
//! small threads so a child that fills one pipe can never stall the other,
//! and the waiting loop wakes on their events, on cancellation and on the
//! deadline, so no run can hold its caller forever.

use std::io::{self, Read};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::ExitStatus;
use std::sync::mpsc::{self, RecvTimeoutError};
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
const MAX_MESSAGE_CHARS: usize = 300;

/// Caps of one run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bounds {
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

enum Event {
    Stdout(Vec<u8>),
    StdoutOverflow,
    Stderr(Vec<u8>),
}

/// Run `argv` once in the sandbox and capture it within `bounds`.
pub(crate) fn run_once(
    sandbox: &Sandbox,
    kind: RunKind,
    argv: &[String],
    cwd: &Path,
    bounds: Bounds,
    cancel: &Cancel,
) -> Result<RunEnd, RunError> {
    run_once_attested(sandbox, kind, argv, cwd, bounds, cancel, &mut None)
}

/// `run_once`, also telling what the run was confined by (once it started).
fn run_once_attested(
    sandbox: &Sandbox,
    kind: RunKind,
    argv: &[String],
    cwd: &Path,
    bounds: Bounds,
    cancel: &Cancel,
    attestation: &mut Option<Attestation>,
) -> Result<RunEnd, RunError> {
    let started = Instant::now();
    let deadline = bounds.timeout.map(|t| started + t);
    let mut child = sandbox.spawn(kind, argv, cwd).map_err(RunError::Spawn)?;
    attestation.clone_from(&child.attestation);

    let (tx, rx) = mpsc::channel();
    match child.stdout.take() {
        Some(out) => {
            let tx = tx.clone();
            let cap = bounds.max_stdout;
            thread::spawn(move || read_stdout(out, cap, &tx));
        }
        None => {
            let _ = tx.send(Event::Stdout(Vec::new()));
        }
    }
    match child.stderr.take() {
        Some(err) => {
            let tx = tx.clone();
            thread::spawn(move || read_stderr(err, &tx));
        }
        None => {
            let _ = tx.send(Event::Stderr(Vec::new()));
        }
    }
    drop(tx);

    let mut stdout: Option<Vec<u8>> = None;
    let mut stderr: Option<Vec<u8>> = None;
    let mut exited: Option<(Exit, Instant)> = None;
    let mut killed_leftovers = false;
    let mut idle = Duration::from_millis(1);
    loop {
        let outputs_done = stdout.is_some() && stderr.is_some();
        if outputs_done {
            // Only the exit is missing; it normally follows end-of-file closely.
            cancel.wait_timeout(idle);
            idle = (idle * 2).min(Duration::from_millis(5));
        } else {
            match rx.recv_timeout(Duration::from_millis(20)) {
                Ok(Event::Stdout(d)) => stdout = Some(d),
                Ok(Event::Stderr(d)) => stderr = Some(d),
                Ok(Event::StdoutOverflow) => {
                    stop(&mut child);
                    return Ok(RunEnd::TooLarge);
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    // Both readers are gone; whatever they didn't send is empty.
                    stdout.get_or_insert_with(Vec::new);
                    stderr.get_or_insert_with(Vec::new);
                }
            }
        }

        if cancel.is_cancelled() {
            stop(&mut child);
            return Ok(RunEnd::Cancelled);
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            stop(&mut child);
            return Ok(RunEnd::TimedOut);
        }
        if exited.is_none() {
            if let Some(status) = child.try_wait().map_err(RunError::Wait)? {
                exited = Some((Exit::from_status(status), Instant::now()));
            }
        }
        if let Some((exit, at)) = exited {
            if let (Some(out), Some(err)) = (&mut stdout, &mut stderr) {
                return Ok(RunEnd::Finished(Finished {
                    exit,
                    stdout: std::mem::take(out),
                    stderr: std::mem::take(err),
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

fn read_stdout(mut pipe: impl Read, cap: usize, tx: &mpsc::Sender<Event>) {
    let mut data = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        match pipe.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                data.extend_from_slice(&buf[..n]);
                if data.len() > cap {
                    let _ = tx.send(Event::StdoutOverflow);
                    return;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    let _ = tx.send(Event::Stdout(data));
}

fn read_stderr(mut pipe: impl Read, tx: &mpsc::Sender<Event>) {
    let mut data = Vec::new();
    let mut buf = [0u8; 8 * 1024];
    loop {
        match pipe.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                // Keep reading past the cap so the child never blocks on a full pipe.
                let room = MAX_STDERR_BYTES.saturating_sub(data.len());
                data.extend_from_slice(&buf[..n.min(room)]);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    let _ = tx.send(Event::Stderr(data));
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
/// run was confined by (`None` when it never started).
pub(crate) fn run_tool(
    sandbox: &Sandbox,
    kind: RunKind,
    argv: &[String],
    cwd: &Path,
    bounds: Bounds,
    cancel: &Cancel,
    redactor: &Redactor,
) -> (CallEnd, Option<Attestation>) {
    let mut attestation = None;
    let end = run_once_attested(sandbox, kind, argv, cwd, bounds, cancel, &mut attestation);
    (map_end(end, bounds, redactor), attestation)
}

fn map_end(end: Result<RunEnd, RunError>, bounds: Bounds, redactor: &Redactor) -> CallEnd {
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

/// On macOS, sandbox-exec's own refusal (a profile it could not apply, a
/// program it may not start) ends the run before the backend ran: that is
/// `sandbox_failed`, not the backend's exit code.
fn refused_by_sandbox(f: &Finished) -> Option<ToolError> {
    if !cfg!(target_os = "macos") {
        return None;
    }
    let Exit::Code(code) = f.exit else {
        return None;
    };
    let why = crate::sandbox::macos::sandbox_exec_refusal(code, &f.stderr)?;
    Some(ToolError::templated(
        ErrorCode::SandboxFailed,
        &why.to_string(),
    ))
}

/// A run that never got going: a sandbox layer is the sandbox's failure,
/// anything else (no such file, too many processes) the command's.
fn start_failure(e: &RunError) -> ToolError {
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
    let doc = serde_json::from_slice::<Value>(&f.stdout).ok();
    match (f.exit, doc) {
        (Exit::Code(code @ (0 | 1)), Some(doc)) => Ok(Envelope::from_run(code, doc)),
        (Exit::Code(2), Some(doc)) if is_error_document(&doc) => Ok(Envelope::from_run(2, doc)),
        (Exit::Code(2), _) => Err(failed(
            "The command failed (exit code 2) without printing an error document",
            &f.stderr,
            redactor,
        )),
        (Exit::Code(code @ (0 | 1)), None) => Err(failed(
            &format!("The command exited with code {code} but did not print one JSON document"),
            &f.stderr,
            redactor,
        )),
        (exit, _) => Err(failed(
            &format!("The command {}", describe_exit(exit)),
            &f.stderr,
            redactor,
        )),
    }
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

/// `backend_failed`, quoting stderr's first line, redacted before it is cut
/// (the whole envelope is redacted again on its way out).
fn failed(what: &str, stderr: &[u8], redactor: &Redactor) -> ToolError {
    let message = match first_line(stderr, redactor) {
        Some(line) => format!("{what}: {line}"),
        None => format!("{what}."),
    };
    ToolError::new(ErrorCode::BackendFailed, message)
}

/// The first line with any content, trimmed, without control characters,
/// redacted, then cut short: a secret straddling the cut would otherwise
/// leave a piece that no rule recognises any more.
pub(crate) fn first_line(stderr: &[u8], redactor: &Redactor) -> Option<String> {
    let text = String::from_utf8_lossy(stderr);
    let line = text.lines().map(str::trim).find(|l| !l.is_empty())?;
    let clean: String = line
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    Some(redactor.redact_and_cut(&clean, MAX_MESSAGE_CHARS))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map_exit_plain(f: &Finished) -> Result<Envelope, ToolError> {
        map_exit(f, &Redactor::new(Vec::new()))
    }

    fn first_line_plain(stderr: &[u8]) -> Option<String> {
        first_line(stderr, &Redactor::new(Vec::new()))
    }

    fn finished(exit: Exit, stdout: &str, stderr: &str) -> Finished {
        Finished {
            exit,
            stdout: stdout.as_bytes().to_vec(),
            stderr: stderr.as_bytes().to_vec(),
        }
    }

    #[test]
    fn exit_0_and_1_are_answers() {
        let e = map_exit_plain(&finished(Exit::Code(0), "{\"ok\": true}\n", "")).unwrap();
        assert_eq!(e, Envelope::from_run(0, json!({"ok": true})));
        let e = map_exit_plain(&finished(Exit::Code(1), " [1, 2] ", "warn")).unwrap();
        assert_eq!(e, Envelope::from_run(1, json!([1, 2])));
        assert!(!e.is_error());
    }

    #[test]
    fn exit_2_with_error_document_is_passed_on() {
        let doc = json!({"error": {"code": "no_such_campaign", "message": "No campaign q9."}});
        let e = map_exit_plain(&finished(Exit::Code(2), &doc.to_string(), "")).unwrap();
        assert_eq!(e, Envelope::from_run(2, doc));
        assert!(e.is_error());
    }

    #[test]
    fn everything_else_is_backend_failed_with_the_first_stderr_line() {
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
            let e = map_exit_plain(&f).unwrap_err();
            assert_eq!(e.code(), "backend_failed", "{f:?}");
            let msg = e.message();
            assert!(msg.ends_with(": first problem"), "{msg}");
        }
    }

    #[test]
    fn failure_messages_say_what_happened() {
        let msg = |f: Finished| map_exit_plain(&f).unwrap_err().message().to_string();
        assert_eq!(
            msg(finished(Exit::Code(7), "", "")),
            "The command exited with code 7."
        );
        assert_eq!(
            msg(finished(Exit::Signal(9), "", "")),
            "The command was killed by signal 9 (SIGKILL)."
        );
        assert!(msg(finished(Exit::Code(0), "x", "")).contains("did not print one JSON document"));
    }

    #[test]
    fn first_line_is_cut_and_cleaned() {
        assert_eq!(first_line_plain(b""), None);
        assert_eq!(first_line_plain(b"\n \n"), None);
        assert_eq!(
            first_line_plain(b"a\tb\x1b[31m\nc").as_deref(),
            Some("a b [31m")
        );
        let long = "x".repeat(1000);
        let cut = first_line_plain(long.as_bytes()).unwrap();
        assert_eq!(cut.chars().count(), MAX_MESSAGE_CHARS + 1);
        let exact = "x".repeat(MAX_MESSAGE_CHARS);
        assert_eq!(first_line_plain(exact.as_bytes()), Some(exact));
    }

    #[test]
    fn redact_first_line_a_secret_straddling_the_cut_is_hidden_whole() {
        // The token starts 5 characters before the cut: cutting first
        // would leave `ghp_a`, which no rule recognises.
        let token = "ghp_a1B2c3D4e5a1B2c3D4e5a1B2c3D4e5a1B2";
        let line = format!("{} {token} tail", "x".repeat(MAX_MESSAGE_CHARS - 6));
        let out = first_line_plain(line.as_bytes()).unwrap();
        assert!(!out.contains("ghp_"), "{out}");
        assert!(out.ends_with(" [REDA…"), "{out}");
        assert_eq!(out.chars().count(), MAX_MESSAGE_CHARS + 1);
        // A line with nothing secret is cut as before.
        let plain = format!("{} abcdefghij tail", "x".repeat(MAX_MESSAGE_CHARS - 11));
        let out = first_line_plain(plain.as_bytes()).unwrap();
        assert!(out.ends_with("x abcdefghij…"), "{out}");
        // Through the error message the backend's failure carries.
        let msg = map_exit_plain(&finished(Exit::Code(3), "", &line))
            .unwrap_err()
            .message()
            .to_string();
        assert!(!msg.contains("ghp_"), "{msg}");
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
}
