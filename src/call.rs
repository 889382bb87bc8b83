//! The per-call pipeline shared by `mcp-serve` and `call`: validate →
//! confine → argv → rate limit → run in the sandbox → map → redact →
//! envelope, with one log line per call.

use std::time::Instant;

use serde_json::{Map, Value};

use crate::cancel::Cancel;
use crate::envelope::Envelope;
use crate::error::{ErrorCode, ToolError};
use crate::run::{self, CallEnd};
use crate::startup::{App, Resolved};
use crate::tools::Tool;
use crate::validate;

// The `_meta` members are named where the envelope is defined.
pub(crate) use crate::envelope::{META_DENIED, META_REDACTED, META_SANDBOX};

/// ` redacted=N` for the log line when anything was hidden.
fn redacted_note(envelope: &Envelope) -> String {
    match envelope.meta.get(META_REDACTED).and_then(Value::as_u64) {
        Some(n) if n > 0 => format!(" redacted={n}"),
        _ => String::new(),
    }
}

/// What a call's log line says between `exit=` and `ms=`, in one order for
/// every answered call however it ended: ` error=CODE` for an error the
/// server reports, ` bytes=N` once a run was attempted, ` redacted=N` when
/// anything was hidden, and ` sandbox=LETTERS` when a run was confined.
fn outcome_fields(envelope: &Envelope, error: Option<&str>, ran: bool, sandbox: &str) -> String {
    let mut out = String::new();
    if let Some(code) = error {
        out.push_str(&format!(" error={code}"));
    }
    if ran {
        out.push_str(&format!(" bytes={}", envelope.to_text().len()));
    }
    out.push_str(&redacted_note(envelope));
    out.push_str(sandbox);
    out
}

pub enum CallOutcome {
    Done(Envelope),
    /// Cancelled by the client: nothing is written for it.
    Cancelled,
    /// No served tool has this name: answered as a `tools/call` naming an
    /// unknown tool is answered where the request is read.
    UnknownTool,
}

impl CallOutcome {
    /// How the audit log sees this end.
    pub(crate) fn audited(&self) -> crate::audit::Ended<'_> {
        match self {
            CallOutcome::Done(envelope) => crate::audit::Ended::Done(envelope),
            CallOutcome::Cancelled => crate::audit::Ended::Cancelled,
            CallOutcome::UnknownTool => crate::audit::Ended::UnknownTool,
        }
    }
}

/// What the serve loop needs to run a `tools/call`: the one thing it asks
/// of the started server, so the loop can be driven with a stand-in.
pub(crate) trait CallRunner: Send + Sync {
    fn run_call(&self, tool: &str, arguments: &Map<String, Value>, cancel: &Cancel) -> CallOutcome;
}

impl CallRunner for App {
    fn run_call(&self, tool: &str, arguments: &Map<String, Value>, cancel: &Cancel) -> CallOutcome {
        match self.tools.get(tool) {
            Some(t) => self.call(t, arguments, cancel),
            None => CallOutcome::UnknownTool,
        }
    }
}

impl App {
    /// Validate, confine, build argv, rate-limit, run, map, redact; one log line.
    pub fn call(&self, tool: &Tool, args: &Map<String, Value>, cancel: &Cancel) -> CallOutcome {
        let started = Instant::now();
        let log = |exit: &str, extra: &str| {
            crate::log::line(format!(
                "call tool={} exit={exit}{extra} ms={}",
                tool.name,
                started.elapsed().as_millis()
            ));
        };

        // One resolution of the root and the fixed files for the whole
        // call: its argv, its grants and its pins.
        let files = match self
            .files
            .current()
            .and_then(|r| match r.refusal(&tool.command) {
                Some(why) => Err(why),
                None => Ok(r),
            }) {
            Ok(files) => files,
            Err(why) => {
                let e = ToolError::templated(ErrorCode::SandboxFailed, &why);
                let envelope = self.finish(Envelope::from_error(&e));
                log("2", &outcome_fields(&envelope, Some(e.code()), false, ""));
                return CallOutcome::Done(envelope);
            }
        };
        let argv = match prepare(&files, tool, args) {
            Ok(argv) => argv,
            Err(e) => {
                let envelope = self.finish(Envelope::from_error(&e));
                log("2", &outcome_fields(&envelope, Some(e.code()), false, ""));
                return CallOutcome::Done(envelope);
            }
        };
        if cancel.is_cancelled() {
            log("cancelled", "");
            return CallOutcome::Cancelled;
        }
        // The backend is the one approved (docs/PINS.md), or nothing runs;
        // with `--pin` the run executes the very descriptor checked.
        let exe = match self.watch.as_ref().map(crate::pins::Watch::check) {
            Some(Err(e)) => {
                let envelope = self.finish(Envelope::from_error(&e));
                log("2", &outcome_fields(&envelope, Some(e.code()), false, ""));
                return CallOutcome::Done(envelope);
            }
            Some(Ok(exe)) => exe,
            None => None,
        };
        if let Err(e) = self.limiter.try_start() {
            let envelope = self.finish(Envelope::from_error(&e));
            log("2", &outcome_fields(&envelope, Some(e.code()), false, ""));
            return CallOutcome::Done(envelope);
        }

        let (end, attestation) = run::run_tool(
            &files.sandbox,
            tool.kind,
            &argv,
            files.root.path(),
            exe.as_deref().map(std::os::fd::AsFd::as_fd),
            self.bounds,
            cancel,
            &self.redactor,
        );
        let attest = |mut envelope: Envelope| {
            if let Some(a) = &attestation {
                envelope.meta.insert(META_SANDBOX.into(), a.to_json());
                if let Some(d) = &a.denied {
                    envelope.meta.insert(META_DENIED.into(), d.to_json());
                }
            }
            envelope
        };
        let sandbox = attestation
            .as_ref()
            .map(|a| {
                let denied = a.denied.as_ref().map(|d| d.log_field()).unwrap_or_default();
                format!(" sandbox={}{denied}", a.code())
            })
            .unwrap_or_default();
        match end {
            CallEnd::Answer(envelope) => {
                let envelope = attest(self.finish(envelope));
                let exit = envelope.exit_code.to_string();
                log(&exit, &outcome_fields(&envelope, None, true, &sandbox));
                CallOutcome::Done(envelope)
            }
            CallEnd::Failed(e) => {
                let envelope = attest(self.finish(Envelope::from_error(&e)));
                log(
                    "2",
                    &outcome_fields(&envelope, Some(e.code()), true, &sandbox),
                );
                CallOutcome::Done(envelope)
            }
            CallEnd::TimedOut(e) => {
                let envelope = attest(self.finish(Envelope::from_error(&e)));
                log(
                    "timeout",
                    &outcome_fields(&envelope, Some(e.code()), true, &sandbox),
                );
                CallOutcome::Done(envelope)
            }
            CallEnd::Cancelled => {
                log("cancelled", "");
                CallOutcome::Cancelled
            }
        }
    }

    /// Every string of the envelope passes through redaction before it leaves.
    fn finish(&self, envelope: Envelope) -> Envelope {
        let (output, redacted) = self.redactor.redact(envelope.output);
        let mut meta = envelope.meta;
        let before = meta.get(META_REDACTED).and_then(Value::as_u64).unwrap_or(0);
        if redacted + before as usize > 0 {
            meta.insert(
                META_REDACTED.into(),
                Value::from(before as usize + redacted),
            );
        }
        Envelope {
            exit_code: envelope.exit_code,
            output,
            meta,
        }
    }
}

fn prepare(
    files: &Resolved,
    tool: &Tool,
    args: &Map<String, Value>,
) -> Result<Vec<String>, ToolError> {
    let call = validate::validate(tool, args)?.confine(&files.root, &files.protected)?;
    files.invocation.build(&call)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn app_can_be_shared_between_worker_threads() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<App>();
    }
}
