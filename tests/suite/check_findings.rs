//! `tools --check` says what a backend's author would otherwise find out
//! from a client: names outside the one rule (which the server withholds
//! exactly as the checker says), defaults that do not fit, read-only
//! commands without JSON, and a `draft` offered with no database.

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::{json, Value};

use crate::support::mcp::{modern, Server};
use crate::support::{server_bin, write_executable};

/// A backend laid out as `PREFIX/bin/b` that prints `PREFIX/catalog.json`
/// for `describe` and `{"ok": true}` for anything else, with a home.
struct Backend {
    _dir: tempfile::TempDir,
    exe: PathBuf,
    home: PathBuf,
}

impl Backend {
    fn new(commands: Value) -> Backend {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let prefix = base.join("pfx");
        let home = base.join("home");
        std::fs::create_dir_all(prefix.join("bin")).unwrap();
        std::fs::create_dir_all(home.join("state")).unwrap();
        let catalog = json!({"catalog": 1, "program": {"name": "names", "version": "1"},
                             "format_flag": "--format", "commands": commands});
        std::fs::write(prefix.join("catalog.json"), catalog.to_string()).unwrap();
        let exe = prefix.join("bin/b");
        write_executable(
            &exe,
            "#!/bin/sh\nfor a in \"$@\"; do\n  case \"$a\" in describe) exec cat \"$(dirname \"$0\")/../catalog.json\";; esac\ndone\necho '{\"ok\": true}'\n",
        );
        Backend {
            _dir: dir,
            exe,
            home,
        }
    }

    fn command(&self, extra_globals: &[&str]) -> Command {
        let mut c = Command::new(server_bin());
        c.arg(format!("--backend={}", self.exe.display()))
            .arg(format!("--home={}", self.home.display()))
            .args(extra_globals)
            .current_dir(&self.home);
        c
    }

    fn check(&self, extra_globals: &[&str], extra: &[&str]) -> (Output, Value) {
        let out = self
            .command(extra_globals)
            .args(["tools", "--check", "--json", "--sandbox", "best-effort"])
            .args(extra)
            .output()
            .unwrap();
        let v: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
        (out, v)
    }
}

fn cmd(name: &str, flags: Value) -> Value {
    json!({"name": name, "summary": "Do it.", "tags": ["read_only"], "formats": ["json"], "flags": flags})
}

fn diagnostics(v: &Value) -> Vec<(String, String, String)> {
    v["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["severity"].as_str().unwrap().to_string(),
                d["code"].as_str().unwrap().to_string(),
                d["pointer"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// docs/BACKEND.md and the schema forbid `_` in a flag name; the checker
/// says it is an error that withholds the command, and a server started on
/// the same catalog does not list it.
#[test]
fn a_flag_with_an_underscore_withholds_its_command_in_check_and_in_the_server() {
    let b = Backend::new(json!([
        cmd("good", json!([{"name": "--max-len", "type": "integer"}])),
        cmd("bad", json!([{"name": "--max_len", "type": "integer"}])),
    ]));
    let (out, v) = b.check(&[], &[]);
    assert_eq!(out.status.code(), Some(2), "{v}");
    assert_eq!(
        diagnostics(&v),
        vec![(
            "error".to_string(),
            "bad_name".to_string(),
            "/commands/1/flags/0/name".to_string()
        )]
    );

    let mut s = Server::spawn({
        let mut c = b.command(&[]);
        c.args(["mcp-serve", "--sandbox", "best-effort"]);
        c
    });
    s.initialize("2025-06-18");
    let list = s.request(modern(json!(1), "tools/list", json!({})));
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["good"], "{list}");
}

#[test]
fn wrong_type_defaults_and_read_only_commands_without_json_are_warnings() {
    let mut text_only = cmd("report", json!([]));
    text_only["formats"] = json!(["text"]);
    let b = Backend::new(json!([
        cmd(
            "days",
            json!([{"name": "--days", "type": "integer", "default": "14"}])
        ),
        text_only,
    ]));
    let (out, v) = b.check(&[], &[]);
    assert_eq!(out.status.code(), Some(1), "{v}");
    assert_eq!(
        diagnostics(&v),
        vec![
            (
                "warning".to_string(),
                "suspicious".to_string(),
                "/commands/0/flags/0/default".to_string()
            ),
            (
                "warning".to_string(),
                "suspicious".to_string(),
                "/commands/1/formats".to_string()
            ),
        ]
    );
}

/// `draft` with no database: a warning from `tools --check`, and the
/// start-up line names the missing file.
#[test]
fn a_draft_offered_without_a_database_is_warned_at_check_and_at_start() {
    let mut draft = cmd("draft", json!([]));
    draft["tags"] = json!(["writes"]);
    let b = Backend::new(json!([cmd("status", json!([])), draft]));
    let db = b.home.join("state/rw.db");
    let db_arg = format!("--db={}", db.display());
    let (out, v) = b.check(&[&db_arg], &["--allow-drafts"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{v} {err}");
    let d = &v["diagnostics"][0];
    assert_eq!(d["command"], "draft", "{v}");
    assert!(
        d["message"].as_str().unwrap().starts_with(&format!(
            "`draft` is offered but the database {} does not exist yet",
            db.display()
        )),
        "{v}"
    );
    assert!(
        err.contains(&format!(
            "; warning: the database {} does not exist yet: tools that read it will fail",
            db.display()
        )),
        "{err}"
    );
    // Without drafts there is nothing to warn about in the catalog, but
    // the start-up line still says the database is missing.
    let (out, v) = b.check(&[&db_arg], &[]);
    assert_eq!(out.status.code(), Some(0), "{v}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not exist yet"));
}
