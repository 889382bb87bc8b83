//! The tool pipeline seen through `mcp-serve` with the reference backend:
//! redaction, literal values, the output cap, the rate limit, drafts, and
//! the one log line per call.

use crate::support::mcp::*;
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
    // The variable's name is never a secret, and it never reaches the log
    // (looked at once the call's own line is there).
    let log = s.stderr_when("the call's log line", |l| {
        l.contains("call tool=log_summary")
    });
    assert!(!log.contains(secret), "{log}");
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
        own_db: true,
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
    let log = s.stderr_after_exit();
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

/// Every result of a call that ran names the layers that confined it and
/// the digest of its policy, in every revision; the log line says the same
/// in short; a call refused before anything ran carries no attestation.
#[test]
fn every_run_result_attests_its_sandbox_in_every_revision() {
    let status = std::process::Command::new(server_bin())
        .args(["sandbox", "status", "--json"])
        .output()
        .unwrap();
    let status: Value = serde_json::from_slice(&status.stdout).unwrap();
    let available: Vec<String> = status["layers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["available"] == true)
        .map(|l| l["name"].as_str().unwrap().to_string())
        .collect();
    let check = |res: &Value| {
        let a = &res["_meta"]["io.reachweaver/sandbox"];
        let layers: Vec<String> = a["layers"]
            .as_array()
            .unwrap_or_else(|| panic!("no attestation: {res}"))
            .iter()
            .map(|l| l.as_str().unwrap().to_string())
            .collect();
        // Everything this machine offers, nothing it doesn't, in list order.
        assert_eq!(layers, available, "{res}");
        let sha = a["policy_sha256"].as_str().unwrap();
        assert!(
            sha.len() == 64 && sha.bytes().all(|b| b.is_ascii_hexdigit()),
            "{sha}"
        );
        sha.to_string()
    };
    let mut s = Server::start();
    let first = check(&call(&mut s, 1, "version", json!({})));
    let other = check(&call(&mut s, 2, "context", json!({"note": "x"})));
    assert_ne!(first, other, "each run's own policy is hashed");
    let refused = call(&mut s, 3, "context", json!({"nope": 1}));
    assert_eq!(refused["isError"], true);
    assert!(
        refused["_meta"].get("io.reachweaver/sandbox").is_none(),
        "{refused}"
    );
    for rev in ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"] {
        let mut s = Server::start();
        s.initialize(rev);
        let r = s.request(req(
            json!(10),
            "tools/call",
            json!({"name": "version", "arguments": {}}),
        ));
        check(&r["result"]);
    }
    s.stderr_when("the sandbox letters in a call line", |l| {
        l.contains(" sandbox=UNIHPpMRLTSKC ")
    });
}

/// The example workspace's token and SMTP password.
const ACCOUNT_TOKEN: &str = "rwx_live_7Qm2VtB9kLp4Xn8Rz3Hd6Wc1Ys5Jf0Ga";
const SMTP_PASSWORD: &str = "not-a-real-password-1234";

fn assert_no_workspace_secret(what: &str) {
    assert!(!what.contains("rwx_live_"), "{what}");
    assert!(!what.contains(ACCOUNT_TOKEN), "{what}");
    assert!(!what.contains("smtp_password"), "{what}");
    assert!(!what.contains(SMTP_PASSWORD), "{what}");
}

#[test]
fn the_fixed_accounts_and_profile_files_are_refused_in_every_revision() {
    // The default root is the home, which holds both files.
    let mut s = Server::start();
    std::os::unix::fs::symlink(
        s.ws_path().join("accounts.yaml"),
        s.ws_path().join("templates/innocent.txt"),
    )
    .unwrap();
    let cases = [
        ("accounts.yaml", "fixed accounts file"),
        ("profile.yaml", "fixed profile file"),
        ("templates/innocent.txt", "fixed accounts file"),
        ("./templates/../accounts.yaml", "fixed accounts file"),
    ];
    for (i, (template, why)) in cases.iter().enumerate() {
        let raw = s.request(modern(
            json!(i),
            "tools/call",
            json!({"name": "template_render", "arguments": {"template": template}}),
        ));
        assert_no_workspace_secret(&raw.to_string());
        let res = &raw["result"];
        assert_eq!(res["isError"], true, "{raw}");
        let env = envelope_of(res);
        assert_eq!(env["output"]["error"]["code"], "path_protected", "{env}");
        let msg = env["output"]["error"]["message"].as_str().unwrap();
        assert!(msg.contains(why), "{template}: {msg}");
    }
    let log = s.stderr_when("a log line per refusal", |l| {
        l.matches("error=path_protected").count() >= cases.len()
    });
    assert_eq!(
        log.matches("error=path_protected").count(),
        cases.len(),
        "{log}"
    );

    // The same through the legacy handshake.
    let mut s = Server::start();
    s.initialize("2025-06-18");
    let raw = s.request(req(
        json!(1),
        "tools/call",
        json!({"name": "template_render", "arguments": {"template": "accounts.yaml"}}),
    ));
    assert_no_workspace_secret(&raw.to_string());
    assert_eq!(
        envelope_of(&raw["result"])["output"]["error"]["code"],
        "path_protected"
    );
}

#[test]
fn the_fixed_file_is_refused_through_call_too() {
    let ws = Workspace::new();
    let out = std::process::Command::new(server_bin())
        .arg(format!("--backend={}", reference_bin().display()))
        .arg(format!("--home={}", ws.path().display()))
        .args(["call", "template_render", "--arg", "template=accounts.yaml"])
        .current_dir(ws.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{stdout}");
    assert_no_workspace_secret(&stdout);
    let env: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(env["output"]["error"]["code"], "path_protected", "{env}");
}

#[test]
fn a_copy_of_the_secrets_is_redacted_and_the_count_is_reported() {
    let mut s = Server::start();
    let ws = s.ws_path().to_path_buf();
    let copy = format!(
        "{}\n{}\nAPI_TOKEN=abc123def456\n",
        std::fs::read_to_string(ws.join("accounts.yaml")).unwrap(),
        std::fs::read_to_string(ws.join("profile.yaml")).unwrap()
    );
    std::fs::write(ws.join("templates/copy.txt"), copy).unwrap();
    let res = call(
        &mut s,
        1,
        "template_render",
        json!({"template": "templates/copy.txt"}),
    );
    let text = res.to_string();
    assert!(!text.contains(ACCOUNT_TOKEN), "{text}");
    assert!(!text.contains(SMTP_PASSWORD), "{text}");
    assert!(!text.contains("abc123def456"), "{text}");
    assert_eq!(res["isError"], false, "{res}");
    let count = res["_meta"]["io.reachweaver/redacted"]
        .as_u64()
        .unwrap_or_else(|| panic!("a redaction count: {res}"));
    assert!(count >= 3, "{res}");
    // The modern stamp is still there beside it.
    assert!(res["_meta"].as_object().unwrap().len() >= 2, "{res}");
    let envelope = envelope_of(&res);
    assert!(
        !envelope.to_string().contains("io.reachweaver"),
        "{envelope}"
    );
    // The log line is written after the answer and read by another
    // thread, so it may arrive a moment later.
    let log = s.stderr_when("the call's log line", |l| {
        l.lines()
            .any(|l| l.starts_with("call tool=template_render"))
    });
    let line = log
        .lines()
        .find(|l| l.starts_with("call tool=template_render"))
        .unwrap_or_default();
    assert!(line.contains(&format!(" redacted={count}")), "{line}");

    // A clean result carries no count, in a legacy revision as well.
    let mut s = Server::start();
    s.initialize("2024-11-05");
    let raw = s.request(req(
        json!(1),
        "tools/call",
        json!({"name": "template_render", "arguments": {"template": "templates/launch.txt"}}),
    ));
    assert!(
        raw["result"]["_meta"]
            .get("io.reachweaver/redacted")
            .is_none(),
        "{raw}"
    );
    std::fs::write(
        s.ws_path().join("templates/t.txt"),
        "password: hunter2hunter2\n",
    )
    .unwrap();
    let raw = s.request(req(
        json!(2),
        "tools/call",
        json!({"name": "template_render", "arguments": {"template": "templates/t.txt"}}),
    ));
    assert_eq!(
        raw["result"]["_meta"]["io.reachweaver/redacted"],
        json!(1),
        "{raw}"
    );
    assert!(!raw.to_string().contains("hunter2hunter2"));
}

#[test]
fn protect_adds_patterns() {
    let mut s = Server::start_with(Opts {
        extra_serve_args: vec!["--protect=campaigns/".into(), "--protect=*.txt".into()],
        ..Opts::default()
    });
    for (i, (tool, args)) in [
        (
            "campaign_check",
            json!({"campaign": "campaigns/spring-launch.yaml"}),
        ),
        (
            "template_render",
            json!({"template": "templates/launch.txt"}),
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let res = call(&mut s, i as i64, tool, args);
        let env = envelope_of(&res);
        assert_eq!(env["output"]["error"]["code"], "path_protected", "{env}");
    }
    let res = call(
        &mut s,
        9,
        "log_summary",
        json!({"log": "logs/reachweaver.log"}),
    );
    assert_eq!(res["isError"], false, "{res}");
}

#[test]
fn secret_named_reachweaver_variables_never_come_back() {
    let values = [
        ("REACHWEAVER_SMTP_PASS", "smtp-pass-value-4471"),
        ("REACHWEAVER_SIGNING_KEY", "signing-key-value-9902"),
        ("REACHWEAVER_PASSPHRASE", "a long passphrase 3318"),
        ("REACHWEAVER_PIN_SECRET", "48213377"),
    ];
    let mut s = Server::start_with(Opts {
        // Passed by name: the owner asked, so the run gets it; results still hide it.
        extra_serve_args: vec!["--pass-env=REACHWEAVER_SMTP_PASS".into()],
        env: values
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..Opts::default()
    });
    let body: String = values.iter().map(|(_, v)| format!("note {v}\n")).collect();
    std::fs::write(s.ws_path().join("templates/env.txt"), body).unwrap();
    let res = call(
        &mut s,
        1,
        "template_render",
        json!({"template": "templates/env.txt"}),
    );
    assert_eq!(res["isError"], false, "{res}");
    let text = res.to_string();
    for (_, v) in values {
        assert!(!text.contains(v), "{v} leaked: {text}");
    }
    assert_eq!(res["_meta"]["io.reachweaver/redacted"], 4, "{res}");
    // Echoed back from an argument, it is hidden all the same.
    let res = call(&mut s, 2, "context", json!({"note": "pin 48213377"}));
    assert_eq!(res["isError"], false, "{res}");
    assert!(!res.to_string().contains("48213377"), "{res}");
    assert!(res.to_string().contains("pin [REDACTED]"), "{res}");
}
