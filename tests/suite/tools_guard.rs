//! What the server refuses before anything runs (bad arguments, paths
//! outside the root) and what it scrubs from results (secrets).

use std::fs;
use std::os::unix::fs::{symlink, MetadataExt};

use crate::support::mcp::{envelope_of, modern, req, Server};
use crate::support::tools::Workspace;
use serde_json::{json, Value};

/// Commands other than the catalog read that the backend recorded as run.
fn tool_runs(ws: &Workspace) -> Vec<String> {
    ws.ran().into_iter().filter(|c| c != "describe").collect()
}

#[test]
fn a_good_draft_call_runs_and_leaves_its_mark() {
    // The positive control for the tests below: `draft` may write beside
    // the database, so its mark proves the marker works.
    let ws = Workspace::new();
    let r = ws.call(
        "draft",
        r#"{"note": "order 40 widgets"}"#,
        &["--allow-drafts"],
    );
    assert_eq!(r.code, 0, "{} {}", r.stdout, r.stderr);
    assert_eq!(r.envelope["output"], json!({"drafted": "order 40 widgets"}));
    assert_eq!(tool_runs(&ws), vec!["draft"]);
}

#[test]
fn bad_arguments_never_start_the_backend() {
    let cases: &[(&str, &str, &str)] = &[
        ("draft", r#"{}"#, "missing_argument"),
        ("draft", r#"{"note": 5}"#, "invalid_argument"),
        ("draft", r#"{"note": "a\u0000b"}"#, "invalid_argument"),
        (
            "draft",
            r#"{"note": "x", "notes": "y"}"#,
            "unknown_argument",
        ),
        (
            "draft",
            r#"{"note": "x", "online": true}"#,
            "unknown_argument",
        ),
        ("draft", r#"{"note": ["x"]}"#, "invalid_argument"),
        ("selftest", r#"{"mode": "explode"}"#, "invalid_argument"),
        (
            "selftest",
            r#"{"mode": "ok", "seconds": 601}"#,
            "invalid_argument",
        ),
        (
            "selftest",
            r#"{"mode": "ok", "seconds": 1.5}"#,
            "invalid_argument",
        ),
        ("stock_report", r#"{"min_qty": -1}"#, "invalid_argument"),
        ("stock_report", r#"{"ratio": 1.5}"#, "invalid_argument"),
        (
            "stock_report",
            r#"{"warehouse": "north"}"#,
            "invalid_argument",
        ),
        (
            "stock_report",
            r#"{"fetch_prices": true}"#,
            "unknown_argument",
        ),
        ("stock_report", r#"{"format": "text"}"#, "unknown_argument"),
        (
            "stock_report",
            r#"{"db": "/elsewhere"}"#,
            "unknown_argument",
        ),
        (
            "stock_report",
            r#"{"sheet": "../state/shelf.db"}"#,
            "path_outside_root",
        ),
        ("sheet_check", r#"{"sheet": "nope.csv"}"#, "path_not_found"),
    ];
    for (tool, args, code) in cases {
        let ws = Workspace::new();
        let r = ws.call(tool, args, &["--allow-drafts"]);
        r.assert_error(code);
        assert!(
            tool_runs(&ws).is_empty(),
            "{tool} {args} started the backend: {:?}",
            ws.ran()
        );
        let line = r.log_line();
        assert!(
            line.starts_with(&format!("call tool={tool} exit=2 error={code} ms=")),
            "{line}"
        );
    }
}

#[test]
fn refusals_tell_the_model_what_to_change() {
    let ws = Workspace::new();
    let r = ws.call("stock_report", r#"{"warehose": ["north"]}"#, &[]);
    assert_eq!(
        r.error_message(),
        "Unknown argument `warehose`; `stock_report` accepts: sheet, warehouse, min_qty, ratio, verbose, label."
    );
    let r = ws.call("stock_report", r#"{"fetch_prices": true}"#, &[]);
    assert_eq!(
        r.error_message(),
        "`fetch_prices` is not available through this server; call `stock_report` without it."
    );
    let r = ws.call("stock_report", r#"{"warehouse": ["west"]}"#, &[]);
    assert_eq!(
        r.error_message(),
        "`warehouse` must be one of: north, south, east (got \"west\")."
    );
    let r = ws.call("stock_report", r#"{"min_qty": 20000}"#, &[]);
    assert_eq!(
        r.error_message(),
        "`min_qty` must be between 0 and 10000 (got 20000)."
    );
    let r = ws.call("selftest", r#"{}"#, &[]);
    assert!(
        r.error_message()
            .starts_with("`selftest` needs the argument `mode` (one of: ok, findings"),
        "{}",
        r.error_message()
    );
}

#[test]
fn paths_outside_the_root_are_refused() {
    let ws = Workspace::new();
    std::fs::create_dir_all(ws.root.join("sheets")).unwrap();
    symlink(&ws.db, ws.root.join("sheets/escape.csv")).unwrap();
    let outside = ws.db.to_str().unwrap().to_string();
    for raw in [
        "../state/shelf.db",
        "sheets/../../state/shelf.db",
        "/etc/passwd",
        outside.as_str(),
        "sheets/escape.csv",
    ] {
        let r = ws.call("sheet_check", &json!({"sheet": raw}).to_string(), &[]);
        r.assert_error("path_outside_root");
        assert!(
            r.error_message().contains("points outside the root folder"),
            "{}",
            r.error_message()
        );
    }
    for raw in ["~/sheet.csv", "-", ""] {
        let r = ws.call("sheet_check", &json!({"sheet": raw}).to_string(), &[]);
        r.assert_error("invalid_argument");
    }
    assert!(tool_runs(&ws).is_empty(), "{:?}", ws.ran());
}

#[test]
fn paths_inside_the_root_are_passed_canonical() {
    let ws = Workspace::new();
    std::fs::create_dir_all(ws.root.join("sheets")).unwrap();
    std::fs::write(ws.root.join("sheets/week1.csv"), "a\nb\nc\n").unwrap();
    std::fs::write(ws.root.join("sheets/week2.csv"), "a\nTODO\n").unwrap();
    symlink(ws.root.join("sheets/week1.csv"), ws.root.join("latest.csv")).unwrap();
    let week1 = ws.root.join("sheets/week1.csv");

    let r = ws.call("sheet_check", r#"{"sheet": "sheets/./week1.csv"}"#, &[]);
    assert_eq!(r.code, 0, "{} {}", r.stdout, r.stderr);
    assert_eq!(
        r.envelope["output"],
        json!({"sheet": week1.to_str().unwrap(), "lines": 3, "findings": []})
    );

    let r = ws.call(
        "sheet_check",
        &json!({"sheet": week1.to_str().unwrap()}).to_string(),
        &[],
    );
    assert_eq!(r.code, 0, "absolute inside is fine: {}", r.stdout);

    let r = ws.call("sheet_check", r#"{"sheet": "latest.csv"}"#, &[]);
    assert_eq!(
        r.envelope["output"]["sheet"],
        week1.to_str().unwrap(),
        "a symlink inside resolves to its target"
    );

    let r = ws.call(
        "sheet_check",
        r#"{"sheet": "sheets/week2.csv", "strict": true}"#,
        &[],
    );
    assert_eq!(r.code, 1, "findings: {}", r.stdout);
    assert_eq!(r.envelope["output"]["findings"], json!(["unfinished row"]));
}

/// A root with `.env` and `.aws/credentials`, a second name of each that
/// no pattern matches, and ordinary sheets with one name and with two.
fn root_with_linked_secrets(ws: &Workspace) {
    fs::create_dir_all(ws.root.join("sheets")).unwrap();
    fs::create_dir_all(ws.root.join(".aws")).unwrap();
    fs::write(ws.root.join(".env"), "SHELF_DB_PASSWORD=hunter2hunter2\n").unwrap();
    fs::write(
        ws.root.join(".aws/credentials"),
        "aws_secret_access_key=abc\n",
    )
    .unwrap();
    fs::write(ws.root.join("sheets/week1.csv"), "a\nb\n").unwrap();
    fs::write(ws.root.join("sheets/week2.csv"), "a\nb\nc\n").unwrap();
    fs::hard_link(ws.root.join(".env"), ws.root.join("sheets/env.csv")).unwrap();
    fs::hard_link(
        ws.root.join(".aws/credentials"),
        ws.root.join("sheets/aws.csv"),
    )
    .unwrap();
    fs::hard_link(
        ws.root.join("sheets/week2.csv"),
        ws.root.join("week2-again.csv"),
    )
    .unwrap();
    symlink(ws.root.join("sheets/env.csv"), ws.root.join("latest.csv")).unwrap();
}

#[test]
fn a_hard_link_to_a_protected_file_is_refused_by_its_inode() {
    let ws = Workspace::new();
    root_with_linked_secrets(&ws);
    for (raw, pattern) in [
        ("sheets/env.csv", ".env"),
        ("sheets/aws.csv", ".aws/"),
        // A symlink to the link: the file it leads to decides.
        ("latest.csv", ".env"),
    ] {
        let r = ws.call("sheet_check", &json!({"sheet": raw}).to_string(), &[]);
        r.assert_error("path_protected");
        assert!(
            r.error_message().contains(&format!(
                "it is another name (a hard link) of a file protected by the pattern `{pattern}`"
            )),
            "{raw}: {}",
            r.error_message()
        );
        assert!(!r.stdout.contains("hunter2"), "{}", r.stdout);
    }
    assert!(tool_runs(&ws).is_empty(), "{:?}", ws.ran());
    // Ordinary sheets run: one name (the usual case), and two names.
    for (raw, lines) in [("sheets/week1.csv", 2), ("week2-again.csv", 3)] {
        let nlink = fs::metadata(ws.root.join(raw)).unwrap().nlink();
        assert_eq!(nlink, if lines == 2 { 1 } else { 2 }, "{raw}");
        let r = ws.call("sheet_check", &json!({"sheet": raw}).to_string(), &[]);
        assert_eq!(r.code, 0, "{raw}: {} {}", r.stdout, r.stderr);
        assert_eq!(r.envelope["output"]["lines"], lines, "{raw}");
    }
}

/// A hard link made while the server runs, to a protected file its start-up
/// scan saw, is refused by its inode in both protocol eras.
#[test]
fn a_hard_link_made_after_start_is_refused_in_every_revision() {
    for legacy in [false, true] {
        let ws = Workspace::new();
        root_with_linked_secrets(&ws);
        let mut cmd = ws.command();
        cmd.args(["mcp-serve", "--sandbox", "best-effort", "--root"])
            .arg(&ws.root);
        let mut s = Server::spawn(cmd);
        let call = |s: &mut Server, id: i64, sheet: &str| -> Value {
            let params = json!({"name": "sheet_check", "arguments": {"sheet": sheet}});
            let r = match legacy {
                true => s.request(req(json!(id), "tools/call", params)),
                false => s.request(modern(json!(id), "tools/call", params)),
            };
            envelope_of(&r["result"])
        };
        if legacy {
            s.initialize("2025-06-18");
        }
        // Answered, so the server has started (and scanned) before the link.
        assert_eq!(call(&mut s, 1, "sheets/week1.csv")["output"]["lines"], 2);
        fs::hard_link(ws.root.join(".env"), ws.root.join("sheets/late.csv")).unwrap();
        let env = call(&mut s, 2, "sheets/late.csv");
        assert_eq!(
            env["output"]["error"]["code"], "path_protected",
            "legacy={legacy}: {env}"
        );
        s.close_stdin();
        let (status, _) = s.finish();
        let log = s.stderr_after_exit();
        assert!(status.success(), "legacy={legacy}: {log}");
        assert!(
            log.contains("call tool=sheet_check exit=2 error=path_protected "),
            "{log}"
        );
    }
}

#[test]
fn a_secret_from_the_environment_is_redacted() {
    let ws = Workspace::new();
    let secret = "shelf-9f8e7d6c5b4a-secret";
    let mut c = ws.command();
    c.env("SHELF_API_TOKEN", secret)
        .args(["call", "selftest", "--arg", "mode=leak-env"])
        .args(["--pass-env", "SHELF_API_TOKEN", "--sandbox", "best-effort"]);
    let r = crate::support::tools::CallResult::from(c.output().unwrap());
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.envelope["output"], json!({"token": "[REDACTED]"}));
    assert!(!r.stdout.contains(secret) && !r.stderr.contains(secret));
}

#[test]
fn secret_shapes_are_redacted_in_output_and_in_failure_messages() {
    let ws = Workspace::new();
    let r = ws.call("selftest", r#"{"mode": "leak-pattern"}"#, &[]);
    assert_eq!(
        r.envelope["output"],
        json!({"note": "key [REDACTED] in config"})
    );

    let r = ws.call("selftest", r#"{"mode": "leak-stderr"}"#, &[]);
    r.assert_error("backend_failed");
    assert_eq!(
        r.error_message(),
        "The command exited with code 4 (nothing on stdout): selftest: auth failed with \
         [REDACTED]; the server's owner can reproduce the run with `reachweaver-mcp sandbox run \
         -- BACKEND ARGS...`."
    );
    // Redacted in the quoted line before the cut, and counted.
    assert!(r.log_line().contains(" redacted=1"), "{}", r.log_line());
    assert!(!r.stdout.contains("ghp_"));
}
