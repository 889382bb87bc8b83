//! The per-call pipeline shared by `mcp-serve` and `call`: validate →
//! confine → argv → rate limit → run in the sandbox → map → redact →
//! envelope, with one log line per call.

use std::time::Instant;

use serde_json::{Map, Value};

use crate::cancel::Cancel;
use crate::envelope::Envelope;
use crate::error::ToolError;
use crate::run::{self, CallEnd};
use crate::sandbox::RunKind;
use crate::startup::App;
use crate::tools::{Tool, ToolKind};
use crate::validate;

/// The `_meta` member naming what a tool run was confined by.
pub const META_SANDBOX: &str = "io.reachweaver/sandbox";

/// The `_meta` member counting what redaction hid (only when it hid
/// anything; never what it was).
pub const META_REDACTED: &str = "io.reachweaver/redacted";

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
}

/// What the serve loop needs to run a `tools/call`: the one thing it asks
/// of the started server, so the loop can be driven with a stand-in.
pub trait CallRunner: Send + Sync {
    fn run_call(&self, tool: &str, arguments: &Map<String, Value>, cancel: &Cancel) -> CallOutcome;
}

impl CallRunner for App {
    fn run_call(&self, tool: &str, arguments: &Map<String, Value>, cancel: &Cancel) -> CallOutcome {
        match self.tools.get(tool) {
            Some(t) => self.call(t, arguments, cancel),
            // Dispatch answers an unknown tool itself; nothing to run or say.
            None => CallOutcome::Cancelled,
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

        let argv = match self.prepare(tool, args) {
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
        if let Err(e) = self.limiter.try_start() {
            let envelope = self.finish(Envelope::from_error(&e));
            log("2", &outcome_fields(&envelope, Some(e.code()), false, ""));
            return CallOutcome::Done(envelope);
        }

        let kind = match tool.kind {
            ToolKind::ReadOnly => RunKind::ReadOnly,
            ToolKind::Draft => RunKind::Draft,
        };
        let (end, attestation) = run::run_tool(
            &self.sandbox,
            kind,
            &argv,
            self.root.path(),
            self.bounds,
            cancel,
        );
        let attest = |mut envelope: Envelope| {
            if let Some(a) = &attestation {
                envelope.meta.insert(META_SANDBOX.into(), a.to_json());
            }
            envelope
        };
        let sandbox = attestation
            .as_ref()
            .map(|a| format!(" sandbox={}", a.code()))
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

    fn prepare(&self, tool: &Tool, args: &Map<String, Value>) -> Result<Vec<String>, ToolError> {
        let call = validate::validate(tool, args)?.confine(&self.root, &self.protected)?;
        self.invocation.build(&call)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{CallLimits, Globals, SandboxMode, ServeArgs, StartArgs};
    use serde_json::json;
    use std::path::Path;
    use std::sync::Arc;
    use std::time::Duration;

    /// An app serving the integration tests' fake backend.
    fn fixture_app(max_calls: u32) -> (tempfile::TempDir, App) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir_all(&root).unwrap();
        let globals = Globals {
            backend: Some(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/shelfcheck")),
            db: Some(dir.path().join("shelf.db")),
            ..Globals::default()
        };
        let serve = ServeArgs {
            start: StartArgs {
                root: Some(root),
                sandbox: SandboxMode::BestEffort,
                ..StartArgs::default()
            },
            limits: CallLimits {
                max_output_bytes: 262_144,
                call_timeout: 60,
            },
            max_calls_per_minute: max_calls,
            ..ServeArgs::default()
        };
        let helper = crate::sandbox::helper_next_to_test_binary();
        let app = App::start_with_helper(&globals, &serve, Some(helper)).unwrap();
        (dir, app)
    }

    fn call(app: &App, tool: &str, args: Value) -> Envelope {
        let tool = app.tools.get(tool).unwrap();
        match app.call(tool, args.as_object().unwrap(), &Cancel::new()) {
            CallOutcome::Done(e) => e,
            CallOutcome::Cancelled => panic!("cancelled"),
        }
    }

    fn code(e: &Envelope) -> &str {
        e.output["error"]["code"].as_str().unwrap_or("")
    }

    #[test]
    fn every_log_line_has_its_fields_in_one_order() {
        let mut envelope = Envelope::from_error(&ToolError::new(
            crate::error::ErrorCode::Timeout,
            "did not finish",
        ));
        envelope.meta.insert(META_REDACTED.into(), Value::from(2));
        let bytes = envelope.to_text().len();
        assert_eq!(
            outcome_fields(&envelope, Some("timeout"), true, " sandbox=UN"),
            format!(" error=timeout bytes={bytes} redacted=2 sandbox=UN")
        );
        // Refused before a run: no bytes or sandbox, but the count all the same.
        assert_eq!(
            outcome_fields(&envelope, Some("path_protected"), false, ""),
            " error=path_protected redacted=2"
        );
        envelope.meta.remove(META_REDACTED);
        assert_eq!(
            outcome_fields(&envelope, None, true, ""),
            format!(" bytes={bytes}")
        );
    }

    #[test]
    fn rate_limit_counts_started_calls_only() {
        let (_dir, app) = fixture_app(2);
        assert_eq!(call(&app, "selftest", json!({"mode": "ok"})).exit_code, 0);
        for _ in 0..3 {
            assert_eq!(
                code(&call(&app, "selftest", json!({"mode": "nope"}))),
                "invalid_argument"
            );
        }
        // A failed run still started, so it counts.
        assert_eq!(
            code(&call(&app, "selftest", json!({"mode": "crash"}))),
            "backend_failed"
        );
        let refused = call(&app, "selftest", json!({"mode": "ok"}));
        assert_eq!(code(&refused), "rate_limited");
        assert!(refused.output["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Wait "));
        // Validation comes first and stays exact while the budget is spent.
        assert_eq!(
            code(&call(&app, "selftest", json!({"mode": "nope"}))),
            "invalid_argument"
        );
    }

    #[test]
    fn cancelling_a_running_call_answers_nothing_and_returns_promptly() {
        let (_dir, app) = fixture_app(60);
        let tool = app.tools.get("selftest").unwrap();
        let cancel = Cancel::new();
        let c2 = cancel.clone();
        let canceller = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            c2.cancel();
        });
        let t = Instant::now();
        let args = json!({"mode": "slow", "seconds": 30});
        let outcome = app.call(tool, args.as_object().unwrap(), &cancel);
        canceller.join().unwrap();
        assert!(matches!(outcome, CallOutcome::Cancelled));
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    }

    #[test]
    fn a_call_cancelled_before_it_starts_does_not_run() {
        let (dir, app) = fixture_app(60);
        let tool = app.tools.get("selftest").unwrap();
        let cancel = Cancel::new();
        cancel.cancel();
        let args = json!({"mode": "ok"});
        assert!(matches!(
            app.call(tool, args.as_object().unwrap(), &cancel),
            CallOutcome::Cancelled
        ));
        let ran = std::fs::read_to_string(dir.path().join("shelf.db")).unwrap_or_default();
        assert!(!ran.contains("ran selftest"), "{ran}");
    }

    #[test]
    fn calls_run_concurrently_from_worker_threads() {
        let (_dir, app) = fixture_app(60);
        let app = Arc::new(app);
        let t = Instant::now();
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let app = Arc::clone(&app);
                std::thread::spawn(move || {
                    call(&app, "selftest", json!({"mode": "slow", "seconds": 1}))
                })
            })
            .collect();
        for w in workers {
            assert_eq!(w.join().unwrap().output, json!({"status": "slept"}));
        }
        assert!(
            t.elapsed() < Duration::from_millis(1900),
            "ran one after the other: {:?}",
            t.elapsed()
        );
    }

    #[test]
    fn instructions_and_concurrency_are_set() {
        let (_dir, app) = fixture_app(60);
        assert!(app.instructions.contains("exit_code"));
        assert!(app.max_concurrent >= 1);
        assert_eq!(app.tools.len(), 4);
    }

    #[test]
    fn app_can_be_shared_between_worker_threads() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<App>();
    }
}
