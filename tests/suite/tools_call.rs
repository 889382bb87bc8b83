//! `call`: one tool call through the full server path against the fake
//! backend, for every way a run can end.

use std::time::{Duration, Instant};

use crate::support::tools::Workspace;
use serde_json::json;

fn selftest(ws: &Workspace, mode: &str, extra: &[&str]) -> crate::support::tools::CallResult {
    ws.call("selftest", &json!({"mode": mode}).to_string(), extra)
}

#[test]
fn exit_0_is_a_plain_answer() {
    let ws = Workspace::new();
    let r = selftest(&ws, "ok", &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        r.envelope,
        json!({"exit_code": 0, "output": {"status": "ok"}})
    );
    assert_eq!(
        r.stdout,
        "{\"exit_code\":0,\"output\":{\"status\":\"ok\"}}\n"
    );
    let line = r.log_line();
    let bytes = r.stdout.trim_end().len();
    // The layers the run was confined by, in the short form `sandbox status`
    // documents: userns netns ipcns utsns pidns pid_max mountns rlimits landlock
    // landlock_tcp landlock_scope caps seccomp on this machine.
    assert!(
        line.starts_with(&format!(
            "call tool=selftest exit=0 bytes={bytes} sandbox=UNIHPpMRLTSKC denied=0 ms="
        )),
        "{line}"
    );
}

#[test]
fn exit_1_findings_are_not_an_error() {
    let ws = Workspace::new();
    let r = selftest(&ws, "findings", &[]);
    assert_eq!(r.code, 1);
    assert_eq!(
        r.envelope,
        json!({"exit_code": 1, "output": {"findings": ["low stock: widget"]}})
    );
    assert!(r.log_line().starts_with("call tool=selftest exit=1 bytes="));
}

#[test]
fn exit_2_passes_the_backend_error_document_on() {
    let ws = Workspace::new();
    let r = selftest(&ws, "error-doc", &[]);
    r.assert_error("bad_shelf");
    assert_eq!(r.error_message(), "Shelf 9 does not exist.");
    // The backend's own error code is part of the result, so it is not logged.
    assert!(
        r.log_line().starts_with("call tool=selftest exit=2 bytes="),
        "{}",
        r.log_line()
    );
}

#[test]
fn other_exit_code_is_backend_failed_with_the_stderr_line_and_a_way_to_reproduce() {
    let ws = Workspace::new();
    let r = selftest(&ws, "crash", &[]);
    r.assert_error("backend_failed");
    assert_eq!(
        r.error_message(),
        "The command exited with code 3 (nothing on stdout): selftest: the stock database is \
         corrupt; the server's owner can reproduce the run with `reachweaver-mcp sandbox run -- \
         BACKEND ARGS...`."
    );
    assert!(
        r.log_line()
            .starts_with("call tool=selftest exit=2 error=backend_failed bytes="),
        "{}",
        r.log_line()
    );
}

#[test]
fn death_by_signal_is_backend_failed() {
    let ws = Workspace::new();
    let r = selftest(&ws, "signal", &[]);
    r.assert_error("backend_failed");
    assert_eq!(
        r.error_message(),
        "The command was killed by signal 9 (SIGKILL) (nothing on stdout): selftest: about to \
         be killed; the server's owner can reproduce the run with `reachweaver-mcp sandbox run -- \
         BACKEND ARGS...`."
    );
}

#[test]
fn garbage_and_two_documents_are_backend_failed() {
    let ws = Workspace::new();
    for mode in ["garbage", "two-docs"] {
        let r = selftest(&ws, mode, &[]);
        r.assert_error("backend_failed");
        assert!(
            r.error_message()
                .contains("did not print one JSON document"),
            "{}",
            r.error_message()
        );
    }
}

#[test]
fn exit_2_without_an_error_document_is_backend_failed() {
    let ws = Workspace::new();
    let r = selftest(&ws, "bad-error-doc", &[]);
    r.assert_error("backend_failed");
    assert!(
        r.error_message()
            .contains("without printing an error document (")
            && r.error_message().contains(
                "): selftest: wrote no error document; the server's owner can reproduce the run"
            ),
        "{}",
        r.error_message()
    );
}

#[test]
fn output_over_the_cap_is_refused_not_cut() {
    let ws = Workspace::new();
    // `{"blob": "` + N + `"}\n` is N + 13 bytes.
    let fits = ws.call(
        "selftest",
        r#"{"mode": "big", "bytes": 1011}"#,
        &["--max-output-bytes", "1024"],
    );
    assert_eq!(fits.code, 0, "{}", fits.stdout);
    assert_eq!(
        fits.envelope["output"]["blob"].as_str().unwrap().len(),
        1011
    );

    let over = ws.call(
        "selftest",
        r#"{"mode": "big", "bytes": 1012}"#,
        &["--max-output-bytes", "1024"],
    );
    over.assert_error("output_too_large");
    assert!(
        over.error_message().contains("larger than 1024 bytes"),
        "{}",
        over.error_message()
    );
    assert!(
        over.error_message().contains("ask for less"),
        "{}",
        over.error_message()
    );
    assert!(over
        .log_line()
        .starts_with("call tool=selftest exit=2 error=output_too_large bytes="));

    let huge = ws.call("selftest", r#"{"mode": "big", "bytes": 5000000}"#, &[]);
    huge.assert_error("output_too_large");
    assert!(huge.error_message().contains("larger than 262144 bytes"));
}

#[test]
fn a_run_past_the_timeout_is_killed_and_answered() {
    let ws = Workspace::new();
    let t = Instant::now();
    // The run would sleep 600 s (the fixture's most).
    let r = ws.call(
        "selftest",
        r#"{"mode": "slow", "seconds": 600}"#,
        &["--call-timeout", "1"],
    );
    let took = t.elapsed();
    r.assert_error("timeout");
    assert!(
        r.error_message().contains("within 1 seconds"),
        "{}",
        r.error_message()
    );
    // Killed at its timeout, not answered once the run ended: the bound is
    // generous (a busy machine) yet a tenth of the run's own length.
    assert!(took < Duration::from_secs(60), "took {took:?}");
    assert!(
        r.log_line().starts_with("call tool=selftest exit=timeout"),
        "{}",
        r.log_line()
    );
}

#[test]
fn a_quick_run_within_the_timeout_is_fine() {
    let ws = Workspace::new();
    let r = ws.call(
        "selftest",
        r#"{"mode": "slow", "seconds": 0}"#,
        &["--call-timeout", "5"],
    );
    assert_eq!(r.code, 0, "{}", r.stdout);
    assert_eq!(r.envelope["output"]["status"], "slept");
}

#[test]
fn argv_reaches_the_backend_spelled_by_the_contract() {
    let ws = Workspace::new();
    std::fs::write(ws.root.join("sheet.csv"), "x\n").unwrap();
    let args = r#"{"sheet": "sheet.csv", "warehouse": ["north", "east"], "min_qty": 5,
                   "ratio": 2.5e-1, "verbose": true, "label": "--db=/elsewhere"}"#;
    let r = ws.call("stock_report", args, &[]);
    assert_eq!(r.code, 0, "{} {}", r.stdout, r.stderr);
    let out = &r.envelope["output"];
    assert_eq!(out["globals"], json!([format!("--db={}", ws.db.display())]));
    assert_eq!(
        out["args"],
        json!([
            "--warehouse=north",
            "--warehouse=east",
            "--min-qty=5",
            "--ratio=0.25",
            "--verbose",
            "--label=--db=/elsewhere",
            "--format=json",
            "--",
            format!("{}/sheet.csv", ws.root.display()),
        ])
    );
    assert_eq!(out["cwd"], ws.root.to_str().unwrap());
}

#[test]
fn arg_pairs_build_the_same_call() {
    let ws = Workspace::new();
    let mut c = ws.command();
    c.args([
        "call",
        "stock_report",
        "--arg",
        "warehouse=south",
        "--arg",
        "warehouse=east",
    ])
    .args([
        "--arg",
        "min_qty=7",
        "--arg",
        "label=hello world",
        "--sandbox",
        "best-effort",
    ]);
    let r = crate::support::tools::CallResult::from(c.output().unwrap());
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        r.envelope["output"]["args"],
        json!([
            "--warehouse=south",
            "--warehouse=east",
            "--min-qty=7",
            "--label=hello world",
            "--format=json"
        ])
    );
}

#[test]
fn unknown_or_withheld_tool_is_a_clear_message_and_exit_2() {
    let ws = Workspace::new();
    let r = ws.call("restock_now", "{}", &[]);
    assert_eq!(r.code, 2);
    assert!(r.stdout.is_empty());
    assert!(
        r.stderr
            .contains("no tool named `restock_now`; `reachweaver-mcp tools` lists what is offered"),
        "{}",
        r.stderr
    );

    let r = ws.call("price_sync", "{}", &[]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr
            .contains("the backend command `price-sync` is not offered as a tool: tagged network"),
        "{}",
        r.stderr
    );
    assert!(
        ws.ran().iter().all(|c| c == "describe"),
        "only the catalog was read: {:?}",
        ws.ran()
    );
}

#[test]
fn bad_call_arguments_on_the_command_line_are_refused_before_start() {
    let ws = Workspace::new();
    let mut c = ws.command();
    c.args([
        "call",
        "selftest",
        "--args-json",
        "[1]",
        "--sandbox",
        "best-effort",
    ]);
    let out = c.output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--args-json must be a JSON object"));
    assert!(
        ws.ran().is_empty(),
        "the backend never started: {:?}",
        ws.ran()
    );
}
