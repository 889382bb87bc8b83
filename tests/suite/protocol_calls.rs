//! docs/PROTOCOL.md sections F (tools/call), H (cancellation) and I (lifecycle).

use std::process::Command;
use std::time::Duration;

use crate::support::mcp::*;
use serde_json::{json, Value};

const LEGACY: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// Call a tool at a revision on a fresh server; returns the result object.
fn call_at(rev: &str, name: &str, args: Value) -> Value {
    let mut s = Server::start();
    call_on(&mut s, rev, name, args)
}

fn call_on(s: &mut Server, rev: &str, name: &str, args: Value) -> Value {
    let r = if rev == MODERN {
        s.request(modern(
            json!(1),
            "tools/call",
            json!({"name": name, "arguments": args}),
        ))
    } else {
        s.initialize(rev);
        s.request(req(
            json!(1),
            "tools/call",
            json!({"name": name, "arguments": args}),
        ))
    };
    assert!(r.get("result").is_some(), "{r}");
    r["result"].clone()
}

#[test]
fn f2_result_shape_by_revision() {
    for rev in LEGACY.iter().chain([MODERN].iter()) {
        let res = call_at(rev, "version", json!({}));
        assert_eq!(res["isError"], false, "{rev}");
        let content = res["content"].as_array().unwrap();
        assert_eq!(content.len(), 1);
        assert_eq!(content[0]["type"], "text");
        let env = envelope_of(&res);
        assert_eq!(env["exit_code"], 0);
        assert!(env["output"].is_object());
        let structured = *rev >= "2025-06-18";
        assert_eq!(res.get("structuredContent").is_some(), structured, "{rev}");
        if structured {
            assert_eq!(
                res["structuredContent"], env,
                "{rev}: text and structuredContent agree"
            );
        }
        assert_eq!(res.get("resultType").is_some(), *rev == MODERN);
        assert!(res.get("ttlMs").is_none());
    }
}

#[test]
fn f4_unknown_tool_is_invalid_params_in_every_era() {
    for rev in LEGACY.iter().chain([MODERN].iter()) {
        let mut s = Server::start();
        let r = if *rev == MODERN {
            s.request(modern(
                json!(8),
                "tools/call",
                json!({"name": "nope", "arguments": {}}),
            ))
        } else {
            s.initialize(rev);
            s.request(req(json!(8), "tools/call", json!({"name": "nope"})))
        };
        assert_eq!(r["error"]["code"], -32602, "{rev}");
        assert!(r["error"]["message"].as_str().unwrap().contains("nope"));
    }
}

#[test]
fn f4_owner_only_commands_are_not_tools() {
    let mut s = Server::start();
    for name in [
        "approve",
        "schedule",
        "publish",
        "connect",
        "draft",
        "credentials_audit",
        "link_health",
        "mcp_serve",
        "list",
    ] {
        let r = s.request(modern(
            json!(name),
            "tools/call",
            json!({"name": name, "arguments": {}}),
        ));
        assert_eq!(r["error"]["code"], -32602, "{name} must not be callable");
    }
}

#[test]
fn f5_malformed_call_params() {
    let mut s = Server::start();
    for params in [
        json!({"arguments": {}}),
        json!({"name": 5}),
        json!({"name": "version", "arguments": [1]}),
        json!({"name": "version", "arguments": null}),
        json!({"name": "version", "arguments": "x"}),
    ] {
        let r = s.request(modern(json!(3), "tools/call", params.clone()));
        assert_eq!(r["error"]["code"], -32602, "{params}");
    }
}

#[test]
fn f6_bad_argument_values_are_tool_errors_in_every_revision() {
    for rev in LEGACY.iter().chain([MODERN].iter()) {
        for args in [
            json!({"campaign": 5}),
            json!({}),
            json!({"campaign": "campaigns/spring-launch.yaml", "days": 0}),
            json!({"campaign": "campaigns/spring-launch.yaml", "bogus": 1}),
            json!({"campaign": "campaigns/spring-launch.yaml", "online": true}),
        ] {
            let res = call_at(rev, "campaign_check", args.clone());
            assert_eq!(res["isError"], true, "{rev} {args}");
            let env = envelope_of(&res);
            assert_eq!(env["exit_code"], 2);
            assert!(env["output"]["error"]["code"].is_string(), "{env}");
            assert!(env["output"]["error"]["message"]
                .as_str()
                .is_some_and(|m| m.len() > 10));
        }
    }
}

#[test]
fn f7_backend_error_document_is_a_tool_error() {
    let res = call_at(MODERN, "trace", json!({"draft_id": "no-such-draft"}));
    assert_eq!(res["isError"], true);
    assert_eq!(res["resultType"], "complete");
    let env = envelope_of(&res);
    assert_eq!(env["exit_code"], 2);
    assert!(env["output"]["error"]["code"].is_string());
}

#[test]
fn findings_are_a_normal_answer() {
    let mut s = Server::start();
    let r = s.request(modern(json!(1), "tools/list", json!({})));
    let has = |n: &str| {
        r["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == n)
    };
    assert!(has("claims_check"));
    // A draft with unsupported claims: exit 1, findings, not an error.
    let res = call_on(&mut s, MODERN, "doctor", json!({}));
    let env = envelope_of(&res);
    assert!(env["exit_code"] == 0 || env["exit_code"] == 1, "{env}");
    assert_eq!(res["isError"], false);
}

#[test]
fn path_argument_reaches_the_backend() {
    let res = call_at(
        MODERN,
        "campaign_check",
        json!({"campaign": "campaigns/spring-launch.yaml"}),
    );
    assert_eq!(res["isError"], false, "{res}");
    let res = call_at(
        MODERN,
        "campaign_check",
        json!({"campaign": "../../etc/passwd"}),
    );
    assert_eq!(res["isError"], true);
    assert_eq!(
        envelope_of(&res)["output"]["error"]["code"],
        "path_outside_root"
    );
}

fn nap_server(extra: &[&str]) -> Server {
    let ws = Workspace::new();
    let mut cmd = Command::new(server_bin());
    cmd.arg(format!(
        "--backend={}",
        repo_root().join("tests/fixtures/nap-backend").display()
    ))
    .arg(format!("--home={}", ws.path().display()))
    .arg("mcp-serve")
    .args(extra)
    .current_dir(ws.path());
    let mut s = Server::spawn(cmd);
    s.ws = Some(ws);
    s
}

fn nap(id: Value, secs: u64) -> Value {
    modern(
        id,
        "tools/call",
        json!({"name": "nap", "arguments": {"seconds": secs}}),
    )
}

#[test]
fn i7_calls_overlap_and_answer_as_they_finish() {
    let mut s = nap_server(&["--max-concurrent-calls", "2"]);
    s.send(&nap(json!("slow"), 3));
    s.send(&nap(json!("fast"), 0));
    s.send(&req(json!("p"), "ping", json!({})));
    let first = s.recv();
    let second = s.recv();
    let third = s.recv();
    let order: Vec<Value> = [&first, &second, &third]
        .iter()
        .map(|m| m["id"].clone())
        .collect();
    assert_eq!(order[2], "slow", "the slow call answers last: {order:?}");
    assert!(order.contains(&json!("p")) && order.contains(&json!("fast")));
    assert_eq!(envelope_of(&third["result"])["output"]["slept"], 3);
}

#[test]
fn h1_cancelled_call_gets_no_answer_and_its_run_dies() {
    let mut s = nap_server(&[]);
    s.send(&nap(json!(9), 530));
    // Cancelled once its run is going (a call cancelled while it waits for
    // a slot never runs at all).
    let naps = running_naps("530", s.pid());
    s.send(&json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9,"reason":"test"}}));
    // The string "9" is another id: not cancelled by this, and unknown ids are ignored.
    s.send(
        &json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"nope"}}),
    );
    // The cancels were read before the ping: whatever they were answered
    // with would come first.
    s.expect_nothing_before_ping();
    s.stderr_when("the cancelled call's log line", |l| {
        l.contains("exit=cancelled")
    });
    assert!(gone(&naps, "530"), "the cancelled run's sleep is gone");
    // At the end of input every call received and not cancelled is
    // answered before the exit: nothing ever comes for the cancelled one.
    let (status, _) = s.finish();
    assert_eq!(status.code(), Some(0));
    let rest = s.rest_after_exit();
    assert!(rest.is_empty(), "answered after all: {rest:?}");
}

/// The `sleep SECS` processes descended from `server` (by /proc scan;
/// other tests' sleepers run beside this one in the same suite).
fn naps_of(secs: &str, server: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| is_nap(pid, secs) && descends_from(pid, server))
        .collect()
}

/// Whether `pid` is a live `sleep SECS` (a zombie has no command line).
fn is_nap(pid: u32, secs: &str) -> bool {
    let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let parts: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
    parts.len() >= 2 && parts[0].ends_with(b"sleep") && parts[1] == secs.as_bytes()
}

/// The run's `sleep SECS`, once it is going; panics when none shows up.
fn running_naps(secs: &str, server: u32) -> Vec<u32> {
    let t = std::time::Instant::now();
    loop {
        let naps = naps_of(secs, server);
        if !naps.is_empty() {
            return naps;
        }
        assert!(
            t.elapsed() < HANG_GUARD,
            "no `sleep {secs}` under the server within {HANG_GUARD:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether every one of `naps` has ended (each nap lasts longer than the
/// wait, which only keeps a leak from hanging the test).
fn gone(naps: &[u32], secs: &str) -> bool {
    let t = std::time::Instant::now();
    while naps.iter().any(|&pid| is_nap(pid, secs)) {
        if t.elapsed() > HANG_GUARD {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}

fn descends_from(mut pid: u32, ancestor: u32) -> bool {
    while pid > 1 {
        let Some(parent) = crate::support::faults::status_field(pid, "PPid")
            .and_then(|p| p.trim().parse::<u32>().ok())
        else {
            return false;
        };
        if parent == ancestor {
            return true;
        }
        pid = parent;
    }
    false
}

#[test]
fn i2_eof_waits_for_a_running_call_up_to_its_timeout_and_answers_it() {
    let mut s = nap_server(&["--call-timeout=1"]);
    assert_eq!(
        s.request(req(json!(1), "ping", json!({})))["result"],
        json!({})
    );
    s.send(&nap(json!(2), 541));
    let naps = running_naps("541", s.pid());
    let (status, _) = s.finish();
    assert_eq!(status.code(), Some(0));
    // Waited for, and bounded by --call-timeout (1 s), not by the nap: the
    // one answer, written before the exit, is the call timeout's.
    let rest = s.rest_after_exit();
    assert_eq!(
        rest.len(),
        1,
        "the running call is answered before the exit: {rest:?}"
    );
    let answer = &rest[0];
    assert_eq!(answer["id"], 2, "{answer}");
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    assert_eq!(
        envelope_of(&answer["result"])["output"]["error"]["code"],
        "timeout",
        "{answer}"
    );
    assert!(gone(&naps, "541"), "no run outlives the server");
}

/// What CI jobs do: pipe a whole session in, close stdin, read every answer.
#[test]
fn i2b_a_piped_session_gets_every_answer_including_a_running_call() {
    let ws = Workspace::new();
    let mut child = Command::new(server_bin())
        .arg(format!(
            "--backend={}",
            repo_root().join("tests/fixtures/nap-backend").display()
        ))
        .arg(format!("--home={}", ws.path().display()))
        .arg("mcp-serve")
        .current_dir(ws.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Before anything is sent: the nap can only start after this.
    let t = std::time::Instant::now();
    let session = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "pipe", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": "nap", "arguments": {"seconds": 1}}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {}}),
    ];
    let mut text = String::new();
    for m in &session {
        text.push_str(&m.to_string());
        text.push('\n');
    }
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(text.as_bytes()).unwrap();
        // Dropped here: EOF right after the last request.
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The nap was waited for to its end (1 s, counted from before it could
    // start).
    assert!(t.elapsed() >= Duration::from_secs(1), "{:?}", t.elapsed());
    let answers: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let ids: Vec<&Value> = answers.iter().map(|a| &a["id"]).collect();
    assert_eq!(ids.len(), 3, "{answers:?}");
    for id in [1, 2, 3] {
        assert!(ids.contains(&&json!(id)), "id {id} answered: {answers:?}");
    }
    let call = answers.iter().find(|a| a["id"] == 2).unwrap();
    assert_eq!(call["result"]["isError"], false, "{call}");
    assert!(
        call["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("\"slept\":1"),
        "{call}"
    );
}

#[test]
fn i3_sigterm_exits_promptly() {
    let mut s = nap_server(&[]);
    assert_eq!(
        s.request(req(json!(1), "ping", json!({})))["result"],
        json!({})
    );
    s.send(&nap(json!(2), 543));
    let naps = running_naps("543", s.pid());
    // SAFETY: signalling our own child.
    unsafe { libc_kill(s.pid() as i32, 15) };
    // Promptly: a server that let the nap (543 s) or the default call
    // timeout (120 s) run out would answer the call; a stop writes nothing
    // for it. The wait for the exit only guards against a hang.
    let status = s.wait_exit("SIGTERM");
    assert_eq!(status.code(), Some(143));
    let rest = s.rest_after_exit();
    assert!(rest.is_empty(), "written for a killed call: {rest:?}");
    assert!(gone(&naps, "543"), "no run outlives the server");
}

extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}
