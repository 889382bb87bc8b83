//! The per-call pipeline of `mcp-serve` on the `shelfcheck` backend: the
//! rate limit, cancellation before and during a run, concurrent calls.

use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::faults::{all_pids, cmdline_args, status_field, wait_for};
use crate::support::mcp::{envelope_of, modern, Server, HANG_GUARD};
use crate::support::server_bin;
use crate::support::tools::{fake_backend, Workspace};

fn serve(ws: &Workspace, extra: &[&str]) -> Server {
    let mut cmd = Command::new(server_bin());
    cmd.arg("--backend")
        .arg(fake_backend())
        .arg("--db")
        .arg(&ws.db)
        .arg("mcp-serve")
        .arg(format!("--root={}", ws.root.display()))
        .args(extra)
        .current_dir(&ws.root);
    Server::spawn(cmd)
}

fn selftest(id: Value, args: Value) -> Value {
    modern(
        id,
        "tools/call",
        json!({"name": "selftest", "arguments": args}),
    )
}

fn call(s: &mut Server, id: u64, args: Value) -> Value {
    s.send(&selftest(json!(id), args));
    envelope_of(&s.recv_id(&json!(id))["result"])
}

fn code(e: &Value) -> &str {
    e["output"]["error"]["code"].as_str().unwrap_or("")
}

#[test]
fn rate_limit_counts_started_calls_only() {
    let ws = Workspace::new();
    let mut s = serve(&ws, &["--max-calls-per-minute=2"]);
    assert_eq!(call(&mut s, 1, json!({"mode": "ok"}))["exit_code"], 0);
    for id in 2..5 {
        assert_eq!(
            code(&call(&mut s, id, json!({"mode": "nope"}))),
            "invalid_argument"
        );
    }
    // A failed run still started, so it counts.
    assert_eq!(
        code(&call(&mut s, 5, json!({"mode": "crash"}))),
        "backend_failed"
    );
    let refused = call(&mut s, 6, json!({"mode": "ok"}));
    assert_eq!(code(&refused), "rate_limited");
    assert!(
        refused["output"]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Wait "),
        "{refused}"
    );
    // Validation comes first and stays exact while the budget is spent.
    assert_eq!(
        code(&call(&mut s, 7, json!({"mode": "nope"}))),
        "invalid_argument"
    );
}

#[test]
fn cancelling_a_running_call_answers_nothing_and_returns_promptly() {
    let ws = Workspace::new();
    let mut s = serve(&ws, &["--max-concurrent-calls=1"]);
    // A length no other test sleeps for (the fixture allows up to 600 s),
    // far beyond any wait here.
    let seconds = "583";
    s.send(&selftest(json!(1), json!({"mode": "slow", "seconds": 583})));
    // Running: its sleep is there.
    let started = wait_for(HANG_GUARD, || !sleepers(s.pid(), seconds).is_empty());
    assert!(started.is_some(), "the slow call never ran");
    s.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}),
    );
    // The only worker is free again long before the run would end: the
    // next call is answered (and nothing for the cancelled one before it),
    // and the run's sleep is gone.
    let next = call(&mut s, 2, json!({"mode": "ok"}));
    assert_eq!(next["output"], json!({"status": "ok"}));
    let gone = wait_for(HANG_GUARD, || sleepers(s.pid(), seconds).is_empty());
    assert!(gone.is_some(), "{:?}", sleepers(s.pid(), seconds));
    // Nothing comes for the cancelled call before the end of input either.
    let (status, _) = s.finish();
    assert_eq!(status.code(), Some(0));
    let rest = s.rest_after_exit();
    assert!(rest.is_empty(), "answered after all: {rest:?}");
}

#[test]
fn a_call_cancelled_before_it_starts_does_not_run() {
    let ws = Workspace::new();
    // One call at a time, two per minute: the second call waits for the
    // first's slot, and is cancelled while it waits.
    let mut s = serve(
        &ws,
        &["--max-concurrent-calls=1", "--max-calls-per-minute=2"],
    );
    let seconds = "581";
    s.send(&selftest(json!(1), json!({"mode": "slow", "seconds": 581})));
    // The first call holds the only worker: its sleep is there.
    let started = wait_for(HANG_GUARD, || !sleepers(s.pid(), seconds).is_empty());
    assert!(started.is_some(), "the slow call never ran");
    s.send(&selftest(json!(2), json!({"mode": "ok"})));
    s.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}}),
    );
    // Read after the cancel of the waiting call (one reader, in order): the
    // worker comes free, and the second call, had it stayed queued, would
    // run now and take the budget's second start.
    s.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}),
    );
    // It never started, so it took none of the budget: the third call is
    // the second to start, and the fourth is refused (and nothing came for
    // the cancelled calls before them).
    assert_eq!(
        call(&mut s, 3, json!({"mode": "ok"}))["output"],
        json!({"status": "ok"})
    );
    assert_eq!(
        code(&call(&mut s, 4, json!({"mode": "ok"}))),
        "rate_limited"
    );
}

/// Whether `pid` descends from `ancestor` (its parent chain reaches it).
fn descends_from(pid: u32, ancestor: u32) -> bool {
    let mut p = pid;
    for _ in 0..64 {
        match status_field(p, "PPid").and_then(|v| v.parse::<u32>().ok()) {
            Some(parent) if parent == ancestor => return true,
            Some(parent) if parent > 1 => p = parent,
            _ => return false,
        }
    }
    false
}

/// The `sleep SECONDS` processes this server's runs started.
fn sleepers(server: u32, seconds: &str) -> Vec<u32> {
    all_pids()
        .into_iter()
        .filter(|&p| {
            let args = cmdline_args(p);
            args.first().is_some_and(|a| a.ends_with(b"sleep"))
                && args.get(1).is_some_and(|a| a == seconds.as_bytes())
        })
        .filter(|&p| descends_from(p, server))
        .collect()
}

/// Two calls run at once: both runs' processes are seen alive together
/// (a rendezvous between the runs is impossible by design: they share
/// nothing writable), then both calls are cancelled. With one call at a
/// time this fails, seeing one run.
#[test]
fn calls_run_concurrently_from_worker_threads() {
    let ws = Workspace::new();
    let mut s = serve(&ws, &["--max-concurrent-calls=2"]);
    // A length (the fixture allows up to 600 s) no other test sleeps for,
    // so only these runs match.
    let seconds = "587";
    for id in [1, 2] {
        s.send(&selftest(
            json!(id),
            json!({"mode": "slow", "seconds": 587}),
        ));
    }
    let mut seen = Vec::new();
    let both = wait_for(Duration::from_secs(30), || {
        seen = sleepers(s.pid(), seconds);
        seen.len() == 2
    });
    for id in [1, 2] {
        s.send(
            &json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id}}),
        );
    }
    assert!(
        both.is_some(),
        "the two calls never ran at the same time: {seen:?}"
    );
    // Cancelled runs are killed: none of them is left.
    let gone = wait_for(Duration::from_secs(10), || {
        sleepers(s.pid(), seconds).is_empty()
    });
    assert!(gone.is_some(), "{:?}", sleepers(s.pid(), seconds));
}

#[test]
fn instructions_and_tools_are_set() {
    let ws = Workspace::new();
    let mut s = serve(&ws, &[]);
    let init = s.initialize("2025-06-18");
    assert!(
        init["result"]["instructions"]
            .as_str()
            .is_some_and(|i| i.contains("exit_code")),
        "{init}"
    );
    let list = s.request(json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list"}));
    assert_eq!(
        list["result"]["tools"].as_array().map(Vec::len),
        Some(4),
        "{list}"
    );
}
