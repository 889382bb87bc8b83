//! The tool pipeline seen through `mcp-serve` with the reference backend:
//! redaction, literal values, the output cap, the rate limit, drafts, and
//! the one log line per call.

mod common;

use common::*;
use serde_json::{json, Value};

fn call(s: &mut Server, id: i64, name: &str, args: Value) -> Value {
    let r = s.request(modern(
        json!(id),
        "tools/call",
        json!({"name": name, "arguments": args}),
    ));
    assert!(r["result"].is_object(), "{r}");
    r["result"].clone()
}

#[test]
fn secret_from_the_server_environment_is_redacted_in_results() {
    let secret = "s3cr3t-value-that-must-not-leak";
    let mut s = Server::start_with(Opts {
        env: vec![("OUTREACH_API_TOKEN".into(), secret.into())],
        ..Opts::default()
    });
    std::fs::write(
        s.ws_path().join("logs/leak.log"),
        format!("2026-01-01T00:00:00Z ERROR auth failed with {secret}\n2026-01-01T00:00:01Z ERROR key ghp_abcdefghijklmnopqrstuvwxyz0123456789\n"),
    )
    .unwrap();
    let res = call(&mut s, 1, "log_summary", json!({"log": "logs/leak.log"}));
    let text = res["content"][0]["text"].as_str().unwrap();
    assert!(!text.contains(secret), "{text}");
    assert!(
        !text.contains("ghp_abcdefghijklmnopqrstuvwxyz0123456789"),
        "{text}"
    );
    assert!(text.contains("REDACTED"), "{text}");
    assert!(!res["structuredContent"].to_string().contains(secret));
    // The variable's name is never a secret, and it never reaches the log.
    assert!(!s.stderr_text().contains(secret));
}

#[test]
fn a_value_that_looks_like_a_global_is_passed_literally() {
    let mut s = Server::start();
    let res = call(&mut s, 1, "context", json!({"note": "--db=/elsewhere"}));
    assert_eq!(res["isError"], false, "{res}");
    let env = envelope_of(&res);
    assert!(env.to_string().contains("--db=/elsewhere"), "{env}");
    // The fixed database is still the one in use.
    let db = s.ws_path().join("data/reachweaver.db");
    assert!(db.exists());
}

#[test]
fn output_over_the_cap_is_refused_and_the_server_stays_responsive() {
    let mut s = Server::start_with(Opts {
        extra_serve_args: vec!["--max-output-bytes=2048".into()],
        ..Opts::default()
    });
    let mut big = String::new();
    for i in 0..400 {
        big.push_str(&format!(
            "2026-01-01T00:00:00Z ERROR line {i} with some padding text\n"
        ));
    }
    std::fs::write(s.ws_path().join("logs/big.log"), big).unwrap();
    let res = call(&mut s, 1, "log_summary", json!({"log": "logs/big.log"}));
    assert_eq!(res["isError"], true);
    let env = envelope_of(&res);
    assert_eq!(env["output"]["error"]["code"], "output_too_large");
    assert!(env["output"]["error"]["message"]
        .as_str()
        .unwrap()
        .contains("2048"));
    let res = call(
        &mut s,
        2,
        "log_summary",
        json!({"log": "logs/big.log", "tail": 3}),
    );
    assert_eq!(res["isError"], false, "asking for less works: {res}");
    assert_eq!(
        s.request(req(json!(3), "ping", json!({})))["result"],
        json!({})
    );
}

#[test]
fn rate_limit_counts_started_calls_only() {
    let mut s = Server::start_with(Opts {
        extra_serve_args: vec!["--max-calls-per-minute=2".into()],
        ..Opts::default()
    });
    assert_eq!(call(&mut s, 1, "version", json!({}))["isError"], false);
    // Refused by validation: does not count.
    assert_eq!(
        call(&mut s, 2, "version", json!({"bogus": 1}))["isError"],
        true
    );
    assert_eq!(call(&mut s, 3, "version", json!({}))["isError"], false);
    let res = call(&mut s, 4, "version", json!({}));
    assert_eq!(res["isError"], true);
    let env = envelope_of(&res);
    assert_eq!(env["output"]["error"]["code"], "rate_limited");
    // Other methods are never limited.
    for i in 0..5 {
        assert!(s.request(modern(json!(10 + i), "tools/list", json!({})))["result"].is_object());
    }
}

#[test]
fn draft_is_offered_only_with_allow_drafts_and_writes_the_database() {
    let mut s = Server::start();
    let r = s.request(modern(
        json!(1),
        "tools/call",
        json!({"name": "draft", "arguments": {}}),
    ));
    assert_eq!(r["error"]["code"], -32602);

    let mut s = Server::start_with(Opts {
        extra_serve_args: vec!["--allow-drafts".into()],
        ..Opts::default()
    });
    let list = s.request(modern(json!(1), "tools/list", json!({})));
    let draft = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "draft")
        .cloned()
        .expect("draft offered");
    assert_eq!(draft["annotations"]["readOnlyHint"], false);
    assert_eq!(draft["annotations"]["destructiveHint"], false);
    assert_eq!(draft["annotations"]["idempotentHint"], false);
    let props = draft["inputSchema"]["properties"].as_object().unwrap();
    for withheld in ["reply_to", "online", "override_flagged", "format"] {
        assert!(!props.contains_key(withheld), "{withheld} must be withheld");
    }
    let res = call(
        &mut s,
        2,
        "draft",
        json!({"campaign": "campaigns/spring-launch.yaml", "channel": "mastodon", "text": "A calm note about our spring release."}),
    );
    let env = envelope_of(&res);
    assert!(env["exit_code"] == 0 || env["exit_code"] == 1, "{env}");
    let id = env["output"]["id"]
        .as_str()
        .or(env["output"]["draft_id"].as_str())
        .map(str::to_string);
    let id = id.unwrap_or_else(|| panic!("the new draft's id: {env}"));
    let trace = call(&mut s, 3, "trace", json!({"draft_id": id}));
    assert_eq!(trace["isError"], false, "{trace}");
}

#[test]
fn one_log_line_per_call_and_never_arguments() {
    let mut s = Server::start();
    call(&mut s, 1, "version", json!({}));
    call(
        &mut s,
        2,
        "trace",
        json!({"draft_id": "marker-never-logged"}),
    );
    call(
        &mut s,
        3,
        "campaign_check",
        json!({"campaign": "/etc/passwd"}),
    );
    s.request(req(json!(4), "ping", json!({})));
    let (status, _) = s.finish();
    assert_eq!(status.code(), Some(0));
    let log = s.stderr_text();
    let calls: Vec<&str> = log.lines().filter(|l| l.starts_with("call ")).collect();
    assert_eq!(calls.len(), 3, "{log}");
    assert!(
        calls[0].starts_with("call tool=version exit=0 bytes="),
        "{}",
        calls[0]
    );
    assert!(calls[0].contains(" ms="));
    assert!(
        calls[1].starts_with("call tool=trace exit=2"),
        "{}",
        calls[1]
    );
    assert!(
        calls[2].contains("exit=2 error=path_outside_root"),
        "{}",
        calls[2]
    );
    assert!(!log.contains("marker-never-logged"), "{log}");
    assert!(!log.contains("/etc/passwd"), "{log}");
    let startup = log.lines().next().unwrap();
    assert!(startup.contains("30 tools"), "{startup}");
    assert!(startup.contains("sandbox"), "{startup}");
}
