//! A backend whose catalog is bad: too big or malformed is a clear refusal
//! at start (exit 2, one message, nothing on stdout); a catalog that changes
//! after start changes nothing, because the start-up catalog stands.

use std::fs;
use std::process::{Command, Stdio};

use crate::support::faults::*;
use crate::support::mcp::{modern, server_bin, HANG_GUARD};
use crate::support::sandbox::output_within;
use serde_json::{json, Value};

/// Start `mcp-serve` on `faulty` with this catalog variant; it must refuse.
/// The wait for the refusal only guards against a server that never
/// gives up (reading an endless catalog, or its stdin, which stays open).
fn refused(variant: &str) -> String {
    let home = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(server_bin());
    cmd.arg(format!("--backend={}", faulty().display()))
        .arg(format!("--home={}", home.path().display()))
        .arg("mcp-serve")
        .current_dir(home.path())
        .env("REACHWEAVER_FAULT_CATALOG", variant)
        .env("TMPDIR", tmp.path())
        // Start-up happens before stdin is read; an open stdin must not matter.
        .stdin(Stdio::piped());
    let out = output_within(cmd, HANG_GUARD);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(out.stdout.is_empty(), "nothing on stdout: {out:?}");
    // The server's lock file (reachweaver-srv-TOKEN.lock) stays until the
    // next start sweeps it; nothing else may.
    let leftovers: Vec<_> = fs::read_dir(tmp.path())
        .unwrap()
        .flatten()
        .filter(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            !(n.starts_with("reachweaver-srv-") && n.ends_with(".lock"))
        })
        .collect();
    assert!(leftovers.is_empty(), "temp folders left: {leftovers:?}");
    String::from_utf8(out.stderr).unwrap()
}

#[test]
fn a_catalog_over_16_mib_is_refused_at_start() {
    let err = refused("huge");
    assert_eq!(err.lines().count(), 1, "one clear line: {err}");
    assert!(
        err.starts_with("reachweaver-mcp: ")
            && err.contains("describe --format=json")
            && err.contains("printed more than 16 MiB"),
        "{err}"
    );
}

#[test]
fn a_malformed_catalog_is_refused_at_start() {
    let err = refused("malformed");
    assert_eq!(err.lines().count(), 1, "one clear line: {err}");
    assert!(
        err.contains("describe did not print one JSON document"),
        "{err}"
    );
}

#[test]
fn a_catalog_proposing_a_database_outside_the_home_is_refused_at_start() {
    let err = refused("paths-root");
    assert_eq!(err.lines().count(), 1, "one clear line: {err}");
    assert_eq!(
        err.trim_end(),
        "reachweaver-mcp: the backend's catalog field paths.db /: refused: / would open every file on this machine",
    );
    let err = refused("paths-tmp");
    assert_eq!(err.lines().count(), 1, "one clear line: {err}");
    assert!(
        err.starts_with(
            "reachweaver-mcp: the backend's catalog field paths.db /tmp/x.db: refused: "
        ) && err.contains("must be a file inside its home"),
        "{err}"
    );
}

#[test]
fn a_backend_that_fails_at_start_shows_the_end_of_its_error_output() {
    let err = refused("traceback");
    let lines: Vec<&str> = err.lines().collect();
    assert!(
        lines[0].starts_with("reachweaver-mcp: ")
            && lines[0]
                .contains("failed (exit code 1): KeyError: config token [REDACTED] rejected"),
        "the traceback's last line is quoted, not its first: {err}"
    );
    assert_eq!(lines[1], "the last lines of its error output:", "{err}");
    // Bounded: the last 20 lines, the first frames left out; then the hint.
    assert_eq!(lines.len(), 2 + 20 + 1, "{err}");
    assert!(lines[22].starts_with("hint: in the sandbox"), "{err}");
    assert!(lines[2].contains("line 10, in frame_10"), "{err}");
    assert!(
        lines[21].starts_with("  | KeyError: config token "),
        "{err}"
    );
    // Redacted like every result.
    assert!(!err.contains("ghp_abcdefghijklmnopqrstuvwxyz0123"), "{err}");
}

fn tool_names(list: &Value) -> Vec<String> {
    list["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_catalog_that_changes_after_start_changes_nothing() {
    let mut f = Faulty::start_prepared(&[], &[("REACHWEAVER_FAULT_CATALOG", "shifting")], |home| {
        fs::write(home.join("variant"), "first").unwrap();
    });
    let before = f
        .server
        .request(modern(json!("l1"), "tools/list", json!({})));
    let names = tool_names(&before);
    assert!(names.contains(&"shape_first".to_string()), "{names:?}");

    // From now on every `describe` would print another catalog.
    fs::write(f.home().join("variant"), "second").unwrap();
    let res = f.call(json!("c1"), "shape_first", json!({}));
    assert_eq!(
        res["structuredContent"],
        json!({"exit_code": 0, "output": {"variant_now": "second"}}),
        "the backend itself now sees the change"
    );
    let after = f
        .server
        .request(modern(json!("l2"), "tools/list", json!({})));
    assert_eq!(
        after["result"]["tools"], before["result"]["tools"],
        "the start-up tool list stands"
    );
    let r = f.server.request(modern(
        json!("c2"),
        "tools/call",
        json!({"name": "shape_second", "arguments": {}}),
    ));
    assert_eq!(r["error"]["code"], -32602, "{r}");
    f.ping();
    f.assert_no_leftover_tmp();
}
