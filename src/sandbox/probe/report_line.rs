//! The one line an attempt prints as `__probe-attempt`, on every
//! platform: what the attempt saw, for the probe to read back (see
//! `runner.rs`).

use std::io::Write;

/// What an attempt's TIOCSTI refused for want of the kernel's legacy switch
/// reports, so its verdict can tell the kernel's refusal from a layer's.
pub(in crate::sandbox) const LEGACY_TIOCSTI_OFF: &str = "dev.tty.legacy_tiocsti is 0";

/// An attempt's outcome, as the attempt itself sees it: `Ok(what
/// happened)` or `Err(what stopped it)`.
pub(in crate::sandbox) type Tried = Result<String, String>;

/// Print the one report line of `__probe-attempt`:
/// `{"ok":true,"result":"..."}` when the attempt did what it tried,
/// `{"ok":false,"result":"..."}` when it was stopped. The exit code is 0
/// either way: the line is the answer, a signal or a missing line is the
/// sandbox's.
pub(in crate::sandbox) fn print_report(outcome: Tried) -> u8 {
    let line = match outcome {
        Ok(r) => serde_json::json!({"ok": true, "result": r}),
        Err(r) => serde_json::json!({"ok": false, "result": r}),
    };
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
    0
}
