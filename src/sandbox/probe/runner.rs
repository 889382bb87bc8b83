//! Running one attempt as a process: outside as the positive control, or
//! inside the sandbox, reading back the one report line it prints
//! (`report_line.rs`). The same on Linux and macOS; each platform's
//! fixture says where the attempt runs.

use std::fmt::Display;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::model::{Control, Outcome, Spec};
use crate::sandbox::Sandbox;

/// Where a platform's attempts run: its fixture.
pub(in crate::sandbox) trait Place {
    /// The server binary, which runs the attempts as `__probe-attempt`.
    fn exe(&self) -> &Path;
    /// The run's root, and every attempt's working folder.
    fn root(&self) -> &Path;
    /// The TMPDIR of the next positive control, ready for it.
    fn control_tmpdir(&self) -> &Path;
}

/// The first word of what a run that never started says, before the
/// sandbox's error: each platform's report has always said it so.
#[cfg(target_os = "linux")]
const NOT_STARTED: &str = "sandbox";
#[cfg(target_os = "macos")]
const NOT_STARTED: &str = "could not start";

pub(super) fn parse_report(stdout: &[u8], status: Option<std::process::ExitStatus>) -> Outcome {
    use std::os::unix::process::ExitStatusExt;
    if let Some(sig) = status.and_then(|s| s.signal()) {
        return Outcome::Failed(signal_name(sig));
    }
    let line = String::from_utf8_lossy(stdout);
    let line = line.lines().last().unwrap_or("");
    match serde_json::from_str::<serde_json::Value>(line) {
        Ok(v) => {
            let r = v["result"].as_str().unwrap_or("").to_string();
            if v["ok"].as_bool() == Some(true) {
                Outcome::Ok(r)
            } else {
                Outcome::Failed(r)
            }
        }
        Err(_) => Outcome::Failed(format!(
            "no report (exit {})",
            status
                .and_then(|s| s.code())
                .map(|c| c.to_string())
                .unwrap_or_else(|| "?".into())
        )),
    }
}

pub(super) fn signal_name(sig: i32) -> String {
    match sig {
        libc::SIGSYS => "SIGSYS".into(),
        libc::SIGKILL => "SIGKILL".into(),
        libc::SIGSEGV => "SIGSEGV".into(),
        libc::SIGXFSZ => "SIGXFSZ".into(),
        libc::SIGABRT => "SIGABRT".into(),
        other => format!("signal {other}"),
    }
}

/// Read a pipe to its end (up to `cap` bytes kept) on a thread.
pub(super) fn reader<R: Read + Send + 'static>(
    r: Option<R>,
    cap: usize,
) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut out = Vec::new();
        if let Some(mut r) = r {
            let mut buf = [0u8; 65536];
            while let Ok(n) = r.read(&mut buf) {
                if n == 0 {
                    break;
                }
                if out.len() < cap {
                    out.extend_from_slice(&buf[..n.min(cap - out.len())]);
                }
            }
        }
        out
    })
}

pub(super) const RUN_TIMEOUT: Duration = Duration::from_secs(60);

/// Run one attempt as a plain child of the probe (the positive control).
pub(in crate::sandbox) fn run_control<A: Display, T, P: Place>(
    fx: &P,
    sp: &Spec<A, T>,
    args: &[String],
    stdin: Option<OwnedFd>,
) -> Outcome {
    run_control_watched(fx, sp, args, stdin, &mut || {})
}

/// Like `run_control`, calling `watch` while the attempt runs.
pub(in crate::sandbox) fn run_control_watched<A: Display, T, P: Place>(
    fx: &P,
    sp: &Spec<A, T>,
    args: &[String],
    stdin: Option<OwnedFd>,
    watch: &mut dyn FnMut(),
) -> Outcome {
    let name = match sp.control {
        Control::Userns => format!("userns:{}", sp.attempt),
        _ => sp.attempt.to_string(),
    };
    let mut cmd = Command::new(fx.exe());
    cmd.arg("__probe-attempt")
        .arg(name)
        .args(args)
        .env("TMPDIR", fx.control_tmpdir())
        .current_dir(fx.root())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    match stdin {
        Some(fd) => cmd.stdin(Stdio::from(fd)),
        None => cmd.stdin(Stdio::null()),
    };
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return Outcome::Failed(format!("could not start: {e}")),
    };
    let out = reader(child.stdout.take(), 1 << 16);
    let deadline = Instant::now() + RUN_TIMEOUT;
    let status = loop {
        watch();
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            _ => {
                let _ = child.kill();
                break child.wait().ok();
            }
        }
    };
    parse_report(&out.join().unwrap_or_default(), status)
}

/// Run one attempt inside the sandbox.
pub(in crate::sandbox) fn run_inside<A: Display, T, P: Place>(
    sb: &Sandbox,
    fx: &P,
    sp: &Spec<A, T>,
    args: &[String],
    stdin: Option<OwnedFd>,
) -> Outcome {
    run_inside_watched(sb, fx, sp, args, stdin, &mut || {})
}

/// Like `run_inside`, calling `watch` while the attempt runs.
pub(in crate::sandbox) fn run_inside_watched<A: Display, T, P: Place>(
    sb: &Sandbox,
    fx: &P,
    sp: &Spec<A, T>,
    args: &[String],
    stdin: Option<OwnedFd>,
    watch: &mut dyn FnMut(),
) -> Outcome {
    run_inside_reporting(sb, fx, sp, args, stdin, watch).0
}

/// Like `run_inside`, with the run's report of what it tried and was refused.
#[cfg(target_os = "linux")]
pub(in crate::sandbox) fn run_inside_reported<A: Display, T, P: Place>(
    sb: &Sandbox,
    fx: &P,
    sp: &Spec<A, T>,
    args: &[String],
) -> (Outcome, crate::sandbox::denied::Denied) {
    run_inside_reporting(sb, fx, sp, args, None, &mut || {})
}

fn run_inside_reporting<A: Display, T, P: Place>(
    sb: &Sandbox,
    fx: &P,
    sp: &Spec<A, T>,
    args: &[String],
    stdin: Option<OwnedFd>,
    watch: &mut dyn FnMut(),
) -> (Outcome, crate::sandbox::denied::Denied) {
    use crate::sandbox::denied::{Denied, Watch};
    let mut argv = vec![
        fx.exe().to_string_lossy().into_owned(),
        "__probe-attempt".to_string(),
        sp.attempt.to_string(),
    ];
    argv.extend(args.iter().cloned());
    let mut child = match sb.spawn_with_stdin(sp.kind, &argv, fx.root(), stdin, None) {
        Ok(c) => c,
        Err(e) => {
            return (
                Outcome::NotRun(format!("{NOT_STARTED}: {e}")),
                Denied::new(Watch::Unavailable),
            )
        }
    };
    let out = reader(child.stdout.take(), 1 << 16);
    let err = reader(child.stderr.take(), 1 << 16);
    let deadline = Instant::now() + RUN_TIMEOUT;
    let status = loop {
        watch();
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            _ => {
                child.kill_tree();
                break child.wait().ok();
            }
        }
    };
    let err = err.join().unwrap_or_default();
    let out = out.join().unwrap_or_default();
    let denied = child.denied();
    #[cfg(target_os = "macos")]
    if let Some(why) = status.and_then(|s| stopped_at_start(s, &out, &err)) {
        return (
            Outcome::Failed(format!("the sandbox stopped it at start: {why}")),
            denied,
        );
    }
    let _ = err;
    (parse_report(&out, status), denied)
}

/// A run the profile stopped before the attempt began (dyld refused,
/// sandbox-exec refused): the attempt tried nothing.
#[cfg(target_os = "macos")]
fn stopped_at_start(status: std::process::ExitStatus, out: &[u8], err: &[u8]) -> Option<String> {
    use crate::sandbox::macos::{died_at_start, Ended};
    use std::os::unix::process::ExitStatusExt;
    let ended = match (status.code(), status.signal()) {
        (Some(c), _) => Ended::Code(c),
        (None, Some(sig)) => Ended::Signal(sig),
        (None, None) => return None,
    };
    died_at_start(ended, out, err)
}
