//! `mcp-serve --audit-log` with the real binary and the reference backend:
//! what a record holds, the chain `audit verify` checks (edits, removals,
//! reordering, torn lines, wrong keys), rotation, several servers on one
//! file, `--audit-required`, and secrets kept out of the log.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::mcp::*;
use serde_json::{json, Value};

/// A folder for the log, and another for the key.
struct Dirs {
    log: tempfile::TempDir,
    key: tempfile::TempDir,
}

impl Dirs {
    fn new() -> Self {
        Dirs {
            log: tempfile::tempdir().unwrap(),
            key: tempfile::tempdir().unwrap(),
        }
    }

    fn log(&self) -> PathBuf {
        self.log.path().join("audit.log")
    }

    /// A key file of 32 bytes `b`, readable by its owner only.
    fn key(&self, b: u8) -> PathBuf {
        let p = self.key.path().join(format!("key{b}"));
        std::fs::write(&p, [b; 32]).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        p
    }
}

fn serve(log: &Path, extra: &[String], env: &[(&str, &str)]) -> Server {
    let mut args = vec![format!("--audit-log={}", log.display())];
    args.extend(extra.iter().cloned());
    Server::start_with(Opts {
        extra_serve_args: args,
        env: env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..Opts::default()
    })
}

fn call(s: &mut Server, id: Value, args: Value) -> Value {
    let r = s.request(modern(
        id,
        "tools/call",
        json!({"name": "context", "arguments": args}),
    ));
    assert!(r["result"].is_object(), "{r}");
    r["result"].clone()
}

fn end(s: &mut Server) {
    let (status, _) = s.finish();
    assert!(status.success(), "{}", s.stderr_after_exit());
}

fn records(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn kinds(records: &[Value]) -> Vec<&str> {
    records
        .iter()
        .map(|r| r["type"].as_str().unwrap())
        .collect()
}

/// `audit verify`: exit code and stdout.
fn verify(files: &[&Path], key: Option<&Path>) -> (i32, String) {
    let mut cmd = Command::new(server_bin());
    cmd.args(["audit", "verify"]).args(files);
    if let Some(k) = key {
        cmd.arg(format!("--audit-key={}", k.display()));
    }
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A session: initialize, tools/list, a legacy call, a modern call with a
/// trace context and its own client identity; then stdin closes.
fn session(log: &Path, extra: &[String]) {
    let mut s = serve(log, extra, &[]);
    s.initialize("2025-06-18");
    let list = s.request(req(json!(2), "tools/list", json!({})));
    assert!(list["result"]["tools"].is_array(), "{list}");
    let r = s.request(req(
        json!(3),
        "tools/call",
        json!({"name": "context", "arguments": {"note": "first"}}),
    ));
    assert_eq!(r["result"]["isError"], false, "{r}");
    let mut m = modern(
        json!("four"),
        "tools/call",
        json!({"name": "context", "arguments": {"note": "second"}}),
    );
    m["params"]["_meta"]["traceparent"] =
        json!("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
    m["params"]["_meta"]["io.modelcontextprotocol/clientInfo"] =
        json!({"name": "modern-client", "version": "2"});
    let r = s.request(m);
    assert_eq!(r["result"]["isError"], false, "{r}");
    // No such tool: refused where it is read, and recorded all the same.
    let r = s.request(modern(
        json!(5),
        "tools/call",
        json!({"name": "no_such_tool", "arguments": {"x": 1}}),
    ));
    assert!(r.to_string().contains("no_such_tool"), "{r}");
    end(&mut s);
}

#[test]
fn audit_every_request_is_one_record_and_the_chain_verifies() {
    let d = Dirs::new();
    session(&d.log(), &[]);
    let recs = records(&d.log());
    assert_eq!(
        kinds(&recs),
        [
            "genesis",
            "start",
            "tools_list",
            "call",
            "call",
            "call",
            "stop"
        ]
    );
    let hex64 = |v: &Value| v.as_str().is_some_and(|s| s.len() == 64);
    assert_eq!(recs[0]["prev"], "0".repeat(64));
    assert_eq!(recs[0]["follows"], Value::Null);
    let session = &recs[0]["session"];
    assert!(session["pid"].as_u64().unwrap() > 0, "{session}");
    for (i, r) in recs.iter().enumerate() {
        assert_eq!(r["v"], 1);
        assert_eq!(&r["session"], session, "{r}");
        assert_eq!(r["seq"], i as u64 + 1);
        assert!(r["time"].as_str().unwrap().ends_with('Z'), "{r}");
        assert!(r.get("hmac").is_none(), "{r}");
        if i > 0 {
            let before = std::fs::read_to_string(d.log()).unwrap();
            let line = before.lines().nth(i - 1).unwrap();
            assert_eq!(r["prev"], sha256_hex(line.as_bytes()), "line {}", i + 1);
        }
    }
    let legacy = &recs[3];
    assert_eq!(legacy["jsonrpc_id"], 3);
    assert_eq!(legacy["tool"], "context");
    assert_eq!(legacy["client"], json!({"name": "t", "version": "1"}));
    assert_eq!(legacy["arguments"], json!({"note": "first"}));
    assert_eq!(legacy["outcome"], "ok");
    assert_eq!(legacy["exit_code"], 0);
    assert!(legacy["output_bytes"].as_u64().unwrap() > 0);
    assert_eq!(legacy["redacted"], 0);
    assert!(legacy["sandbox"]["layers"].is_array(), "{legacy}");
    assert!(hex64(&legacy["sandbox"]["policy_sha256"]), "{legacy}");
    // What the run tried and was refused (docs/DENIED.md): nothing, as far
    // as the platform can watch.
    let watch = if cfg!(target_os = "linux") {
        "watched"
    } else {
        "unavailable"
    };
    assert_eq!(legacy["denied"]["status"], watch, "{legacy}");
    assert_eq!(legacy["denied"]["network"], 0, "{legacy}");
    assert!(hex64(&legacy["catalog_sha256"]), "{legacy}");
    assert_eq!(
        legacy["backend_sha256"],
        sha256_hex(&std::fs::read(reference_bin()).unwrap())
    );
    assert!(legacy.get("arguments_hmac").is_none());
    assert!(legacy.get("traceparent").is_none());
    let modern = &recs[4];
    assert_eq!(modern["jsonrpc_id"], "four");
    assert_eq!(
        modern["client"],
        json!({"name": "modern-client", "version": "2"})
    );
    assert_eq!(
        modern["traceparent"],
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    );
    assert_eq!(recs[2]["jsonrpc_id"], 2);
    let unknown = &recs[5];
    assert_eq!(unknown["tool"], "no_such_tool");
    assert_eq!(unknown["arguments"], json!({"x": 1}));
    assert_eq!(unknown["outcome"], "refused");
    assert_eq!(unknown["reason"], "unknown_tool");
    assert_eq!(recs[6]["session_lines"], 6);
    let (code, out) = verify(&[&d.log()], None);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("intact: 7 lines"), "{out}");
}

/// The log's lines, rewritten with `change` applied.
fn rewrite(path: &Path, change: impl FnOnce(&mut Vec<String>)) {
    let mut lines: Vec<String> = std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    change(&mut lines);
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

#[test]
fn audit_verify_names_the_line_after_an_edit_a_removal_or_a_reordering() {
    let d = Dirs::new();
    session(&d.log(), &[]);
    let pristine = std::fs::read(d.log()).unwrap();
    type Change = fn(&mut Vec<String>);
    let cases: [(&str, Change, &str); 3] = [
        (
            "edit",
            |l| l[3] = l[3].replace("\"first\"", "\"fir5t\""),
            "line 5 is broken",
        ),
        ("removal", |l| drop(l.remove(2)), "line 3 is broken"),
        ("reordering", |l| l.swap(3, 4), "line 4 is broken"),
    ];
    for (what, change, says) in cases {
        std::fs::write(d.log(), &pristine).unwrap();
        rewrite(&d.log(), change);
        let (code, out) = verify(&[&d.log()], None);
        assert_eq!(code, 1, "{what}: {out}");
        assert!(out.contains(says), "{what}: {out}");
    }
    // Cut off at the end: what is left holds, and the session shows as
    // one without its closing record.
    std::fs::write(d.log(), &pristine).unwrap();
    rewrite(&d.log(), |l| l.truncate(4));
    let (code, out) = verify(&[&d.log()], None);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("1 session without a closing record"), "{out}");
    std::fs::write(d.log(), &pristine).unwrap();
    let (_, out) = verify(&[&d.log()], None);
    assert!(!out.contains("without a closing record"), "{out}");
}

#[test]
fn audit_a_torn_last_line_is_reported_as_torn_and_the_next_server_chains_past_it() {
    let d = Dirs::new();
    session(&d.log(), &[]);
    let bytes = std::fs::read(d.log()).unwrap();
    // The stop record cut in the middle, as a crash mid-write leaves it.
    let cut = bytes.len() - 40;
    std::fs::write(d.log(), &bytes[..cut]).unwrap();
    let (code, out) = verify(&[&d.log()], None);
    assert_eq!(code, 3, "{out}");
    assert!(out.contains("line 7 is torn"), "{out}");
    // A later server neither overwrites nor hides it.
    session(&d.log(), &[]);
    let text = std::fs::read(d.log()).unwrap();
    assert_eq!(&text[..cut], &bytes[..cut]);
    let (code, out) = verify(&[&d.log()], None);
    assert_eq!(code, 3, "{out}");
    assert!(out.contains("line 7 is torn"), "{out}");
    let recs: Vec<Value> = String::from_utf8(text)
        .unwrap()
        .lines()
        .skip(7)
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(recs[0]["type"], "start");
    assert_eq!(recs[0]["after_torn"], true);
    // Edited after the torn line: broken, not torn.
    rewrite(&d.log(), |l| l[9] = l[9].replace("\"first\"", "\"fir5t\""));
    let (code, out) = verify(&[&d.log()], None);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("line 11 is broken"), "{out}");
}

#[test]
fn audit_with_a_key_every_line_is_signed_and_a_wrong_key_fails() {
    use hmac::Mac;
    let d = Dirs::new();
    let key = d.key(7);
    session(&d.log(), &[format!("--audit-key={}", key.display())]);
    let recs = records(&d.log());
    assert!(recs
        .iter()
        .all(|r| r["hmac"].as_str().is_some_and(|h| h.len() == 64)));
    // The arguments' HMAC: over the canonical form, never a plain hash.
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(&[7u8; 32]).unwrap();
    mac.update(b"reachweaver-mcp audit arguments\n{\"note\":\"first\"}");
    let want: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(recs[3]["arguments_hmac"], want);
    assert_ne!(
        recs[3]["arguments_hmac"],
        sha256_hex(b"{\"note\":\"first\"}")
    );
    let (code, out) = verify(&[&d.log()], Some(&key));
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("every HMAC verified"), "{out}");
    let (code, out) = verify(&[&d.log()], Some(&d.key(8)));
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("line 1 is broken"), "{out}");
    // A whole-file rewrite rebuilds a plain chain, but not the HMACs.
    let text = std::fs::read_to_string(d.log()).unwrap();
    let mut prev = "0".repeat(64);
    let mut forged = String::new();
    for line in text.lines() {
        let mut v: serde_json::Map<String, Value> = serde_json::from_str(line).unwrap();
        v.remove("hmac");
        v.insert("prev".into(), json!(prev));
        if v["type"] == "call" {
            v.insert("arguments".into(), json!({"note": "forged"}));
        }
        let l = Value::Object(v).to_string();
        prev = sha256_hex(l.as_bytes());
        forged.push_str(&l);
        forged.push('\n');
    }
    std::fs::write(d.log(), forged).unwrap();
    assert_eq!(verify(&[&d.log()], None).0, 0);
    let (code, out) = verify(&[&d.log()], Some(&key));
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("line 1 is broken"), "{out}");
}

#[test]
fn audit_keys_open_to_others_or_beside_the_log_are_refused_at_start() {
    let d = Dirs::new();
    let key = d.key(7);
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let beside = d.log.path().join("key");
    std::fs::write(&beside, [7u8; 32]).unwrap();
    std::fs::set_permissions(&beside, std::fs::Permissions::from_mode(0o600)).unwrap();
    for (k, says) in [
        (&key, "open to other users"),
        (&beside, "in the audit log's folder"),
    ] {
        let mut s = serve(&d.log(), &[format!("--audit-key={}", k.display())], &[]);
        let status = s.wait_exit("a refused key");
        assert_eq!(status.code(), Some(2));
        let err = s.stderr_after_exit();
        assert!(err.contains(says), "{err}");
    }
    assert!(!d.log().exists());
}

#[test]
fn audit_a_rotated_log_continues_in_a_new_file_that_names_the_old_ones_last_line() {
    let d = Dirs::new();
    let mut s = serve(&d.log(), &[], &[]);
    call(&mut s, json!(1), json!({"note": "before"}));
    let old = d.log.path().join("audit.log.1");
    std::fs::rename(d.log(), &old).unwrap();
    call(&mut s, json!(2), json!({"note": "after"}));
    end(&mut s);
    let old_text = std::fs::read_to_string(&old).unwrap();
    assert_eq!(kinds(&records(&old)), ["genesis", "start", "call"]);
    let new = records(&d.log());
    assert_eq!(kinds(&new), ["genesis", "call", "stop"]);
    let last_old = sha256_hex(old_text.lines().last().unwrap().as_bytes());
    assert_eq!(new[0]["prev"], last_old);
    assert_eq!(new[0]["follows"], last_old);
    assert_eq!(new[1]["arguments"], json!({"note": "after"}));
    // Both in order: the session's count holds across them.
    let (code, out) = verify(&[&old, &d.log()], None);
    assert_eq!(code, 0, "{out}");
    // The new file alone verifies too (its session started elsewhere).
    assert_eq!(verify(&[&d.log()], None).0, 0);
    // The old file's last line removed: the new file's genesis no longer follows it.
    rewrite(&old, |l| drop(l.pop()));
    let (code, out) = verify(&[&old, &d.log()], None);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("audit.log: line 1 is broken"), "{out}");
}

#[test]
fn audit_two_servers_share_one_file_and_one_chain() {
    let d = Dirs::new();
    let mut a = serve(&d.log(), &[], &[]);
    let mut b = serve(&d.log(), &[], &[]);
    for i in 0..3 {
        call(&mut a, json!(i), json!({"note": format!("a{i}")}));
        call(&mut b, json!(i), json!({"note": format!("b{i}")}));
    }
    end(&mut a);
    end(&mut b);
    let recs = records(&d.log());
    assert_eq!(recs.len(), 1 + 2 * (1 + 3 + 1));
    assert_eq!(kinds(&recs).iter().filter(|k| **k == "genesis").count(), 1);
    let notes: Vec<&str> = recs
        .iter()
        .filter(|r| r["type"] == "call")
        .map(|r| r["arguments"]["note"].as_str().unwrap())
        .collect();
    assert_eq!(notes, ["a0", "b0", "a1", "b1", "a2", "b2"]);
    let (code, out) = verify(&[&d.log()], None);
    assert_eq!(code, 0, "{out}");
}

#[test]
fn audit_required_refuses_a_call_it_cannot_record_and_runs_nothing() {
    for required in [true, false] {
        let d = Dirs::new();
        let extra = if required {
            vec!["--audit-required".to_string()]
        } else {
            vec![]
        };
        let mut s = serve(&d.log(), &extra, &[]);
        // Answered once serving started: the start record is written by then.
        s.request(req(json!("p"), "ping", json!({})));
        // The log's path now names a folder: no line can be written there.
        std::fs::remove_file(d.log()).unwrap();
        std::fs::create_dir(d.log()).unwrap();
        for id in 1..=2 {
            let res = call(&mut s, json!(id), json!({"note": "x"}));
            let env = envelope_of(&res);
            if required {
                assert_eq!(res["isError"], true, "{res}");
                assert_eq!(env["output"]["error"]["code"], "audit_failed", "{env}");
            } else {
                assert_eq!(res["isError"], false, "{res}");
            }
        }
        end(&mut s);
        let err = s.stderr_after_exit();
        assert_eq!(
            err.matches("audit: cannot write the audit log").count(),
            1,
            "{err}"
        );
        // The server's own per-call line is written only by a call that ran.
        assert_eq!(
            err.matches("call tool=context").count(),
            if required { 0 } else { 2 },
            "{err}"
        );
    }
}

#[test]
fn audit_required_with_a_log_that_cannot_be_opened_refuses_to_start() {
    let d = Dirs::new();
    std::fs::create_dir(d.log()).unwrap();
    let mut s = serve(&d.log(), &["--audit-required".to_string()], &[]);
    assert_eq!(s.wait_exit("an unwritable log").code(), Some(2));
    assert!(s.stderr_after_exit().contains("--audit-log"));
}

#[test]
fn audit_secrets_never_reach_the_log() {
    let d = Dirs::new();
    let key = d.key(9);
    let env_secret = "envSECRET-value-4417-do-not-log";
    let corpus = [
        "sent Authorization: Bearer abcDEF0123456789ghiJKLmno upstream",
        "AccountName=acct;AccountKey=azKEY0123456789abcdefXYZ==;EndpointSuffix=core.windows.net",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAleakPEMbody\n-----END RSA PRIVATE KEY-----",
        "AKIAIOSFODNN7EXAMPLE wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "connect failed: ghp_a1B2c3D4e5a1B2c3D4e5a1B2c3D4e5a1B2 more",
        "jdbc:oracle:thin:scott/leakORApw9@//db.example.com:1521/ORCLPDB1",
        "mysql -h db -u root -pleakMYpw7 app",
        "https://dana:leakGITpw5@github.com/dana/app.git",
        "postgres://app:hunter2pw@db.local/app",
        env_secret,
    ];
    let hidden = [
        "abcDEF0123456789ghiJKLmno",
        "azKEY0123456789abcdefXYZ",
        "MIIEowIBAAKCAQEAleakPEMbody",
        "AKIAIOSFODNN7EXAMPLE",
        "wJalrXUtnFEMI",
        "ghp_a1B2c3D4e5a1B2c3D4e5a1B2c3D4e5a1B2",
        "leakORApw9",
        "leakMYpw7",
        "leakGITpw5",
        "hunter2pw",
        env_secret,
        "tok-value-9911",
    ];
    let mut s = serve(
        &d.log(),
        &[format!("--audit-key={}", key.display())],
        &[("OUTREACH_API_TOKEN", env_secret)],
    );
    for (i, text) in corpus.iter().enumerate() {
        call(&mut s, json!(i), json!({"note": text}));
    }
    // Refused (no such argument), yet recorded: its value by its name.
    call(&mut s, json!("k"), json!({"api_token": "tok-value-9911"}));
    let mut m = modern(
        json!("ghp_a1B2c3D4e5a1B2c3D4e5a1B2c3D4e5a1B2"),
        "tools/list",
        json!({}),
    );
    m["params"]["_meta"]["io.modelcontextprotocol/clientInfo"] =
        json!({"name": "c", "version": env_secret});
    s.request(m);
    end(&mut s);
    let log = std::fs::read_to_string(d.log()).unwrap();
    for h in hidden {
        assert!(!log.contains(h), "{h} is in the log:\n{log}");
    }
    let recs = records(&d.log());
    let calls: Vec<&Value> = recs.iter().filter(|r| r["type"] == "call").collect();
    assert_eq!(calls.len(), corpus.len() + 1);
    for c in &calls {
        assert!(
            c["arguments_hmac"].as_str().is_some_and(|h| h.len() == 64),
            "{c}"
        );
    }
    assert!(log.contains("[REDACTED]"));
    assert_eq!(
        calls[corpus.len()]["outcome"],
        "refused",
        "{}",
        calls[corpus.len()]
    );
    assert_eq!(calls[corpus.len()]["reason"], "unknown_argument");
    assert_eq!(verify(&[&d.log()], Some(&key)).0, 0);
}

#[test]
fn audit_a_signal_ends_the_session_with_one_closing_record() {
    let d = Dirs::new();
    let mut s = serve(&d.log(), &[], &[]);
    call(&mut s, json!(1), json!({"note": "x"}));
    // SAFETY: a signal to the child this test started.
    unsafe {
        libc::kill(s.pid() as i32, libc::SIGTERM);
    }
    assert_eq!(s.wait_exit("SIGTERM").code(), Some(143));
    let recs = records(&d.log());
    assert_eq!(kinds(&recs), ["genesis", "start", "call", "stop"]);
    assert_eq!(recs[3]["session_lines"], 3);
    let (code, out) = verify(&[&d.log()], None);
    assert_eq!(code, 0, "{out}");
    assert!(!out.contains("without a closing record"), "{out}");
}

#[test]
fn audit_the_printed_desktop_entry_carries_the_audit_options_and_records() {
    let d = Dirs::new();
    let key = d.key(3);
    let ws = Workspace::new();
    let out = Command::new(server_bin())
        .arg(format!("--backend={}", reference_bin().display()))
        .arg("--home=.")
        .args(["mcp-serve", "--audit-log=audit.log"])
        .arg(format!("--audit-key={}", key.display()))
        .args(["--audit-required", "--print-config", "claude-desktop"])
        .current_dir(ws.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let entry: Value = serde_json::from_slice(&out.stdout).unwrap();
    let server = &entry["mcpServers"]["reachweaver"];
    let args: Vec<String> = server["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    let log = ws.path().join("audit.log");
    assert!(
        args.contains(&format!("--audit-log={}", log.display())),
        "{args:?}"
    );
    assert!(
        args.contains(&format!("--audit-key={}", key.display())),
        "{args:?}"
    );
    assert!(args.contains(&"--audit-required".to_string()), "{args:?}");
    // Run as printed, from elsewhere: the log lands where the entry says.
    let mut cmd = Command::new(server["command"].as_str().unwrap());
    cmd.args(&args).current_dir(d.log.path());
    let mut s = Server::spawn(cmd);
    call(&mut s, json!(1), json!({"note": "x"}));
    end(&mut s);
    // --audit-required: the call's start is recorded before it runs.
    assert_eq!(
        kinds(&records(&log)),
        ["genesis", "start", "call_start", "call", "stop"]
    );
    assert_eq!(verify(&[&log], Some(&key)).0, 0);
}

#[test]
fn audit_a_call_cancelled_while_queued_is_recorded_as_cancelled() {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let d = Dirs::new();
    let home = tempfile::tempdir().unwrap();
    let ws = home.path().canonicalize().unwrap();
    let gate = ws.join("gate");
    let c = std::ffi::CString::new(gate.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: mkfifo with a NUL-terminated path we own.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let mut cmd = Command::new(server_bin());
    cmd.arg(format!(
        "--backend={}",
        crate::support::fixture("gate-backend").display()
    ))
    .arg(format!("--home={}", ws.display()))
    .args(["mcp-serve", "--max-concurrent-calls=1"])
    .arg(format!("--audit-log={}", d.log().display()))
    .current_dir(&ws);
    let mut s = Server::spawn(cmd);
    s.send(&modern(
        json!(1),
        "tools/call",
        json!({"name": "wait_gate", "arguments": {}}),
    ));
    // The one worker is busy once the run holds the gate open for reading:
    // only then does a non-blocking open for writing succeed.
    let mut tries = 0;
    let mut writer = loop {
        match std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&gate)
        {
            Ok(f) => break f,
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) && tries < 6000 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(e) => panic!("the run never reached the gate: {e}"),
        }
    };
    s.send(&modern(
        json!(2),
        "tools/call",
        json!({"name": "quick", "arguments": {}}),
    ));
    s.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                   "params": {"requestId": 2}}),
    );
    // Lines are read in order: the cancel was handled once this is answered.
    s.request(req(json!("p"), "ping", json!({})));
    writer.write_all(b"open\n").unwrap();
    drop(writer);
    let first = s.recv_id(&json!(1));
    assert_eq!(first["result"]["isError"], false, "{first}");
    end(&mut s);
    let recs = records(&d.log());
    assert_eq!(kinds(&recs), ["genesis", "start", "call", "call", "stop"]);
    assert_eq!(recs[2]["jsonrpc_id"], 2);
    assert_eq!(recs[2]["tool"], "quick");
    assert_eq!(recs[2]["outcome"], "cancelled");
    assert_eq!(recs[3]["jsonrpc_id"], 1);
    assert_eq!(recs[3]["outcome"], "ok");
    assert_eq!(verify(&[&d.log()], None).0, 0);
}
