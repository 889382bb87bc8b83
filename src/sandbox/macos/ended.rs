//! Telling a run the profile stopped at start (sandbox-exec refusing, or
//! the system loader killed before `main`) from the backend's own exit.

/// sandbox-exec's own failures (a profile it can't compile, a sandbox it
/// can't apply, such as inside another sandbox, a program it may not
/// start) end with a `sandbox-exec: ...` line on stderr and a sysexits
/// code (65 for a bad profile, 71 when applying or executing fails), before
/// the backend ever ran. Those are the sandbox's failures, not the
/// backend's. A backend that prints the same only misreports its own run.
/// Returns the message. Pure.
pub fn sandbox_exec_refusal(code: i32, stderr: &[u8]) -> Option<String> {
    if !(64..=78).contains(&code) {
        return None;
    }
    let text = String::from_utf8_lossy(stderr);
    let line = text.lines().map(str::trim).find(|l| !l.is_empty())?;
    line.starts_with("sandbox-exec: ")
        .then(|| line.chars().take(300).collect())
}

/// How a run under sandbox-exec ended, as far as telling the sandbox's
/// failures from the backend's goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    Code(i32),
    Signal(i32),
}

/// Signals that end a program the sandbox stopped before its `main`: dyld
/// aborts (SIGABRT) when it may not read what it needs, halts with a trap
/// on some releases (SIGTRAP), and the kernel kills (SIGKILL) a process
/// whose exec the sandbox or code signing refused after the point of no
/// return.
const START_SIGNALS: [i32; 3] = [libc::SIGABRT, libc::SIGTRAP, libc::SIGKILL];

/// Whether a run died at start under the profile instead of running: a
/// `sandbox-exec: ...` refusal ([`sandbox_exec_refusal`]), or one of the
/// signals above (or exit 134, the same abort reported through a shell)
/// with nothing on stdout and, on stderr, nothing or only dyld's own lines.
/// A backend that wrote anything of its own had started, and its crash is
/// its own. Returns the reason, for a `sandbox_failed` answer. Pure.
pub fn died_at_start(ended: Ended, stdout: &[u8], stderr: &[u8]) -> Option<String> {
    if let Ended::Code(code) = ended {
        if let Some(why) = sandbox_exec_refusal(code, stderr) {
            return Some(why);
        }
    }
    let how = match ended {
        Ended::Signal(sig) if START_SIGNALS.contains(&sig) => format!("signal {sig}"),
        Ended::Code(134) => "exit 134 (SIGABRT)".to_string(),
        _ => return None,
    };
    if stdout.iter().any(|b| !b.is_ascii_whitespace()) {
        return None;
    }
    let text = String::from_utf8_lossy(stderr);
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.next();
    let dyld_only = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .all(|l| l.starts_with("dyld"));
    if !dyld_only {
        return None;
    }
    let said = first
        .map(|l| format!(": {}", l.chars().take(200).collect::<String>()))
        .unwrap_or_else(|| ", printing nothing".to_string());
    Some(format!(
        "the program was stopped before it started ({how}{said}); the sandbox profile refused \
         something the system loader needs"
    ))
}
