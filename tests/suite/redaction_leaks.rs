//! Redaction through the real binary, with a backend that prints
//! credentials in every place a result carries them: content text and
//! structured content, the `backend_failed` message quoting stderr, the
//! catalog text behind tools/list, and the call's log line. Each kind
//! also carries ordinary values that must come back as they are.

use std::path::PathBuf;
use std::process::Command;

use crate::support::mcp::*;
use serde_json::{json, Value};

fn leak_backend() -> PathBuf {
    repo_root().join("tests/fixtures/leak-backend")
}

/// `call leak --kind=KIND`: the envelope and the server's stderr (the log line).
fn leak(kind: &str, env: &[(&str, &str)]) -> (Value, String) {
    leak_with(kind, env, &[])
}

/// [`leak`] with more options for `call`.
fn leak_with(kind: &str, env: &[(&str, &str)], args: &[&str]) -> (Value, String) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let mut cmd = Command::new(server_bin());
    cmd.arg(format!("--backend={}", leak_backend().display()))
        .arg(format!("--home={}", root.display()))
        .args(["call", "leak", "--sandbox", "best-effort", "--arg"])
        .arg(format!("kind={kind}"))
        .args(args)
        .arg("--root")
        .arg(&root)
        .current_dir(&root);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let envelope =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{kind}: {e}: {stderr}"));
    (envelope, stderr)
}

fn assert_hidden(what: &str, text: &str, secrets: &[&str]) {
    for s in secrets {
        assert!(!text.contains(s), "{what}: {s} came back: {text}");
    }
}

#[test]
fn redaction_headers_keep_their_whole_value() {
    let (env, log) = leak("header", &[]);
    let out = &env["output"];
    assert_eq!(out["log"], "sent Authorization: [REDACTED]", "{env}");
    assert_eq!(
        out["cmd"], "curl -H 'Authorization: [REDACTED]' https://x.y",
        "{env}"
    );
    assert_eq!(out["accept"], "Accept: application/json", "{env}");
    assert_hidden("header", &env.to_string(), &["abcDEF0123456789ghiJKLmno"]);
    assert!(log.contains(" redacted=2"), "{log}");
    assert_hidden("log", &log, &["abcDEF0123456789ghiJKLmno"]);
}

#[test]
fn redaction_values_named_by_their_siblings_and_split_secrets() {
    let (env, _) = leak("pairs", &[]);
    let out = &env["output"];
    assert_eq!(
        out["env"][0],
        json!({"name": "DB_PASSWORD", "value": "[REDACTED]"})
    );
    assert_eq!(
        out["env"][1],
        json!({"name": "LOG_LEVEL", "value": "debug"})
    );
    assert_eq!(
        out["yaml"],
        "- name: API_TOKEN\n  value: [REDACTED]\n- name: HOST\n  value: db.local\n"
    );
    assert_eq!(
        out["azure"],
        "AccountName=acct;AccountKey=[REDACTED];EndpointSuffix=core.windows.net"
    );
    let (env, _) = leak("pem_lines", &[]);
    assert_hidden(
        "pem_lines",
        &env.to_string(),
        &[
            "MIIEowIBAAKCAQEAleakPEMbody",
            "wJalrXUtnFEMI",
            "AKIAIOSFODNN7EXAMPLE",
        ],
    );
    assert_eq!(
        env["output"]["cells"][0],
        json!(["Access key ID", "Secret access key"])
    );
}

#[test]
fn redaction_secret_named_variables_stay_out_of_runs_and_results() {
    let vars = [
        ("REACHWEAVER_SMTP_AUTH", "smtp-auth-value-5521"),
        ("REACHWEAVER_DB_PWD", "db-pwd-value-7781"),
        ("REACHWEAVER_API_KEYS", "k1-value-3318"),
    ];
    // Not passed: the run never gets them.
    let (env, log) = leak("env", &vars);
    assert_eq!(
        env["output"],
        json!({"a": "unset", "p": "unset", "k": "unset"}),
        "{env}"
    );
    assert!(!log.contains("redacted="), "{log}");
    // Passed by name: the run gets it, the result hides it.
    let (env, log) = leak_with("env", &vars, &["--pass-env=REACHWEAVER_DB_PWD"]);
    assert_eq!(
        env["output"],
        json!({"a": "unset", "p": "[REDACTED]", "k": "unset"}),
        "{env}"
    );
    assert!(log.contains(" redacted=1"), "{log}");
    assert_hidden("log", &log, &["db-pwd-value-7781"]);
}

#[test]
fn redaction_a_token_straddling_the_message_cut_never_shows_in_part() {
    let (env, log) = leak("fail", &[]);
    assert_eq!(env["output"]["error"]["code"], "backend_failed", "{env}");
    let message = env["output"]["error"]["message"].as_str().unwrap();
    assert!(!message.contains("ghp_"), "{message}");
    // Redacted whole, then cut: the cut falls inside the marker, and the
    // reproduce hint follows.
    assert!(message.contains(" [REDA…; "), "{message}");
    assert!(log.contains("error=backend_failed"), "{log}");
    assert!(!log.contains("ghp_"), "{log}");
}

#[test]
fn redaction_connect_strings_command_lines_and_key_pairs() {
    let (env, log) = leak("connect", &[]);
    assert_eq!(
        env["output"],
        json!({
            "basic": "[REDACTED]",
            "oracle": "jdbc:oracle:thin:scott/[REDACTED]@//db.example.com:1521/ORCLPDB1",
            "sid": "jdbc:oracle:thin:scott/[REDACTED]@db.example.com:1521:ORCL",
            "cmd": "mysql -h db -u root -p[REDACTED] app",
            "port": "ssh -p2222 db && mkdir -p out",
            "remote": "https://dana:[REDACTED]@github.com/dana/app.git",
        }),
        "{env}"
    );
    let secrets = ["leakTWsecret", "leakORApw9", "leakMYpw7", "leakGITpw5"];
    assert_hidden("connect", &env.to_string(), &secrets);
    assert_hidden("log", &log, &secrets);
    assert!(log.contains(" redacted=5"), "{log}");
}

#[test]
fn redaction_ordinary_values_come_back_as_they_are() {
    let (env, log) = leak("ordinary", &[]);
    assert_eq!(
        env["output"],
        json!({"session": "Morning keynote", "auth": "oauth2", "env_has_secret": "no",
               "span": "MTk4NjIyNDgzNDcxOTI1MjQ4.handler.process_incoming_request_batch",
               "rpc": "OrderFulfillmentServiceV2.grpcV1.CreateShipmentLabelRequestHandler",
               "token_count": 12}),
        "{env}"
    );
    assert!(!log.contains("redacted="), "{log}");
}

#[test]
fn redaction_catalog_text_in_tools_list_and_results_over_mcp() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let mut cmd = Command::new(server_bin());
    cmd.arg(format!("--backend={}", leak_backend().display()))
        .arg(format!("--home={}", root.display()))
        .args(["mcp-serve", "--sandbox", "best-effort"])
        .current_dir(&root);
    let mut s = Server::spawn(cmd);
    let list = s.request(modern(json!(1), "tools/list", json!({})));
    let text = list.to_string();
    assert_hidden(
        "tools/list",
        &text,
        &["XXXXXXXXXXXXXXXXXXXXXXXX", "hunter2pw"],
    );
    let tool = &list["result"]["tools"][0];
    assert!(
        tool["description"]
            .as_str()
            .unwrap()
            .contains("https://hooks.slack.com/services/[REDACTED]"),
        "{tool}"
    );
    assert_eq!(
        tool["inputSchema"]["properties"]["server"]["default"],
        "postgres://app:[REDACTED]@db.local/app",
        "{tool}"
    );
    // A result over MCP: content text and structured content alike.
    let res = s.request(modern(
        json!(2),
        "tools/call",
        json!({"name": "leak", "arguments": {"kind": "header"}}),
    ));
    let r = &res["result"];
    assert_hidden("result", &r.to_string(), &["abcDEF0123456789ghiJKLmno"]);
    let content = r["content"][0]["text"].as_str().unwrap();
    assert!(content.contains("Authorization: [REDACTED]"), "{content}");
    assert!(content.contains("Accept: application/json"), "{content}");
    s.close_stdin();
    s.finish();
    let log = s.stderr_after_exit();
    assert_hidden("log", &log, &["abcDEF0123456789ghiJKLmno", "hunter2pw"]);
    assert!(log.contains("call tool=leak exit=0"), "{log}");
}
