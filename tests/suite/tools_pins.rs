//! `--pin FILE` with the real binary, on a backend whose catalog is a file
//! the test writes (tests/fixtures/catalog-file), copied into a folder of
//! the test's own so its bytes can change: the first start writes the
//! pins, a restart compares them, each kind of change is refused naming
//! the tool and the field, warn mode serves, `tools --pin --check` and
//! `--update`, a backend swapped between two calls, two servers starting
//! together, and pinned runs executing the descriptor the server hashed.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use crate::support::mcp::{modern, server_bin, Opts, Server};
use crate::support::{fixture, install_executable, write_executable};
use serde_json::{json, Value};

fn command(name: &str, summary: &str) -> Value {
    json!({"name": name, "summary": summary, "tags": ["read_only"], "formats": ["json"],
           "flags": [{"name": "--format", "type": "choice", "choices": ["json"], "output_format": true}]})
}

pub(crate) fn catalog() -> Value {
    let mut count = command("stock-count", "Count the stock.");
    count["flags"].as_array_mut().unwrap().insert(
        0,
        json!({"name": "--limit", "type": "integer", "minimum": 1, "maximum": 9, "help": "How many."}),
    );
    json!({
        "catalog": 1,
        "program": {"name": "stock", "version": "1.0.0"},
        "format_flag": "--format",
        "commands": [command("ping", "Answer."), count]
    })
}

/// A backend of the test's own (a copy of catalog-file), its home with
/// the catalog, and where the pins go.
struct Setup {
    dir: tempfile::TempDir,
}

impl Setup {
    fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("rwmcp-pins-")
            .tempdir()
            .unwrap();
        std::fs::create_dir(dir.path().join("home")).unwrap();
        std::fs::create_dir(dir.path().join("bin")).unwrap();
        let s = Setup { dir };
        install_executable(&fixture("catalog-file"), &s.backend());
        s.set_catalog(&catalog());
        s
    }

    fn backend(&self) -> PathBuf {
        self.dir.path().join("bin/backend")
    }

    fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    fn pins(&self) -> PathBuf {
        self.dir.path().join("pins.json")
    }

    fn set_catalog(&self, c: &Value) {
        std::fs::write(self.home().join("catalog.json"), c.to_string()).unwrap();
    }

    /// Put a backend with other bytes (the same behaviour, one comment
    /// more) in the backend's place.
    fn change_backend_bytes(&self) {
        let text = std::fs::read_to_string(fixture("catalog-file")).unwrap();
        write_executable(&self.backend(), &format!("{text}# another build\n"));
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(server_bin());
        c.arg(format!("--backend={}", self.backend().display()))
            .arg(format!("--home={}", self.home().display()))
            .args(args)
            .current_dir(self.home());
        c
    }

    /// `mcp-serve --pin` with nothing to read: it starts (or refuses to),
    /// and with stdin at its end, stops.
    fn serve_once(&self, extra: &[&str]) -> Output {
        let pin = format!("--pin={}", self.pins().display());
        let mut args = vec!["mcp-serve", pin.as_str()];
        args.extend(extra);
        self.command(&args).stdin(Stdio::null()).output().unwrap()
    }

    fn tools_pin(&self, what: &str) -> Output {
        let pin = format!("--pin={}", self.pins().display());
        self.command(&["tools", pin.as_str(), what])
            .output()
            .unwrap()
    }

    fn pin_file(&self) -> Value {
        serde_json::from_str(&std::fs::read_to_string(self.pins()).unwrap()).unwrap()
    }

    fn edit_pins(&self, edit: impl FnOnce(&mut Value)) {
        let mut v = self.pin_file();
        edit(&mut v);
        std::fs::write(self.pins(), serde_json::to_string_pretty(&v).unwrap()).unwrap();
    }
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A pinned setup: the first start wrote the pins.
fn pinned() -> Setup {
    let s = Setup::new();
    let first = s.serve_once(&[]);
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    s
}

/// The start is refused, and the refusal names `line`.
fn assert_refused_naming(s: &Setup, extra: &[&str], line: &str) -> String {
    let o = s.serve_once(extra);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("the backend or its tools changed since they were pinned"),
        "{err}"
    );
    assert!(
        err.contains(line),
        "the refusal should name {line:?}:\n{err}"
    );
    assert!(!err.contains("reachweaver-mcp: serving"), "{err}");
    err
}

#[test]
fn the_first_start_writes_the_pins_and_an_unchanged_restart_serves() {
    let s = Setup::new();
    let first = s.serve_once(&[]);
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    let err = stderr(&first);
    assert!(
        err.contains(&format!(
            "pins: first start: pinned the backend and its 2 tools in {}",
            s.pins().display()
        )),
        "{err}"
    );
    let pins = s.pin_file();
    assert_eq!(pins["format"], 1);
    assert_eq!(pins["server"]["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(pins["backend"]["path"], s.backend().display().to_string());
    assert_eq!(pins["backend"]["version"], "1.0.0");
    assert_eq!(pins["backend"]["sha256"].as_str().unwrap().len(), 64);
    let names: Vec<&String> = pins["tools"].as_object().unwrap().keys().collect();
    assert_eq!(names, ["ping", "stock_count"]);
    let count = &pins["tools"]["stock_count"];
    let keys: Vec<&String> = count.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "annotations",
            "description",
            "inputSchema",
            "name",
            "outputSchema",
            "title"
        ]
    );
    assert_eq!(count["inputSchema"]["properties"]["limit"]["maximum"], 9);

    let again = s.serve_once(&[]);
    let err = stderr(&again);
    assert_eq!(again.status.code(), Some(0), "{err}");
    assert!(err.contains("pins: unchanged"), "{err}");
    assert!(err.contains("reachweaver-mcp: serving"), "{err}");
    assert_eq!(
        s.pin_file(),
        pins,
        "an unchanged start leaves the file alone"
    );
}

#[test]
fn a_changed_description_schema_or_tool_set_is_refused_naming_it() {
    let s = pinned();
    let mut c = catalog();
    c["commands"][0]["summary"] = json!("Answer, and more.");
    s.set_catalog(&c);
    assert_refused_naming(
        &s,
        &[],
        "tool `ping`: description: \"Answer.\" -> \"Answer, and more.\"",
    );

    let mut c = catalog();
    c["commands"][1]["flags"][0]["maximum"] = json!(99);
    s.set_catalog(&c);
    assert_refused_naming(
        &s,
        &[],
        "tool `stock_count`: inputSchema/properties/limit/maximum: 9 -> 99",
    );

    let mut c = catalog();
    c["commands"]
        .as_array_mut()
        .unwrap()
        .push(command("extra", "More."));
    s.set_catalog(&c);
    assert_refused_naming(&s, &[], "tool `extra`: new tool");

    let mut c = catalog();
    c["commands"].as_array_mut().unwrap().remove(0);
    s.set_catalog(&c);
    assert_refused_naming(&s, &[], "tool `ping`: removed");

    let mut c = catalog();
    c["program"]["version"] = json!("1.0.1");
    s.set_catalog(&c);
    assert_refused_naming(&s, &[], "backend: version: \"1.0.0\" -> \"1.0.1\"");

    s.set_catalog(&catalog());
    let was = s.pin_file()["backend"]["sha256"]
        .as_str()
        .unwrap()
        .to_string();
    s.change_backend_bytes();
    assert_refused_naming(&s, &[], &format!("backend: sha256: \"{was}\" -> \""));
}

/// Members the backend cannot change alone (the title follows the name,
/// the annotations the kind, the output schema is the server's) are still
/// compared: pins edited by hand stand for what was approved.
#[test]
fn a_changed_title_output_schema_or_annotation_is_refused_naming_it() {
    let s = pinned();
    s.edit_pins(|p| p["tools"]["ping"]["title"] = json!("Pong"));
    assert_refused_naming(&s, &[], "tool `ping`: title: \"Pong\" -> \"Ping\"");
    s.edit_pins(|p| p["tools"]["ping"]["title"] = json!("Ping"));

    s.edit_pins(|p| p["tools"]["ping"]["annotations"]["readOnlyHint"] = json!(false));
    assert_refused_naming(
        &s,
        &[],
        "tool `ping`: annotations/readOnlyHint: false -> true",
    );
    s.edit_pins(|p| p["tools"]["ping"]["annotations"]["readOnlyHint"] = json!(true));

    s.edit_pins(|p| p["tools"]["ping"]["outputSchema"]["required"] = json!(["exit_code"]));
    assert_refused_naming(
        &s,
        &[],
        "tool `ping`: outputSchema/required: [\"exit_code\"] -> [\"exit_code\",\"output\"]",
    );
}

/// Zero-width characters pass the catalog's own cleaning (which removes
/// controls and bidirectional marks), so the diff shows them escaped; a
/// bidirectional override in the pins is shown escaped too.
#[test]
fn hidden_characters_in_a_description_are_shown_escaped() {
    let s = pinned();
    let mut c = catalog();
    c["commands"][0]["summary"] = json!("Answer.\u{200B}\u{2060}\u{FEFF}");
    s.set_catalog(&c);
    let err = assert_refused_naming(
        &s,
        &[],
        "tool `ping`: description: \"Answer.\" -> \"Answer.\\u{200B}\\u{2060}\\u{FEFF}\"",
    );
    for c in ['\u{200B}', '\u{2060}', '\u{FEFF}'] {
        assert!(!err.contains(c), "{c:?} shown raw:\n{err}");
    }

    s.set_catalog(&catalog());
    s.edit_pins(|p| p["tools"]["ping"]["description"] = json!("Answer.\u{202E}\u{2066}"));
    let err = assert_refused_naming(
        &s,
        &[],
        "tool `ping`: description: \"Answer.\\u{202E}\\u{2066}\" -> \"Answer.\"",
    );
    assert!(
        !err.contains('\u{202E}') && !err.contains('\u{2066}'),
        "{err}"
    );
}

#[test]
fn warn_mode_serves_and_logs_the_change() {
    let s = pinned();
    let mut c = catalog();
    c["commands"][0]["summary"] = json!("Answer, and more.");
    s.set_catalog(&c);
    let o = s.serve_once(&["--pin-mode=warn"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains(
            "pins: changed: tool `ping`: description: \"Answer.\" -> \"Answer, and more.\""
        ),
        "{err}"
    );
    assert!(err.contains("2 changes from"), "{err}");
    assert!(
        err.contains("pins: changed: backend: describe_sha256: "),
        "{err}"
    );
    assert!(err.contains("reachweaver-mcp: serving"), "{err}");
    // Warn mode leaves the pins as approved.
    assert_eq!(s.pin_file()["tools"]["ping"]["description"], "Answer.");
}

#[test]
fn tools_check_gives_an_exit_code_and_update_rewrites_the_pins() {
    let s = Setup::new();
    let pin = format!("--pin={}", s.pins().display());
    let bare = s.command(&["tools", pin.as_str()]).output().unwrap();
    assert_eq!(bare.status.code(), Some(2), "{}", stderr(&bare));
    assert!(
        stderr(&bare).contains("--pin FILE goes with --check (compare) or --update"),
        "{}",
        stderr(&bare)
    );
    let none = s.tools_pin("--check");
    assert_eq!(none.status.code(), Some(2), "{}", stderr(&none));
    assert!(
        stderr(&none).contains("there is no pin file yet"),
        "{}",
        stderr(&none)
    );

    let wrote = s.tools_pin("--update");
    assert_eq!(wrote.status.code(), Some(0), "{}", stderr(&wrote));
    assert!(stdout(&wrote).contains("pinned the backend and its 2 tools"));
    let same = s.tools_pin("--check");
    assert_eq!(same.status.code(), Some(0), "{}", stderr(&same));
    assert_eq!(stdout(&same), "");

    let mut c = catalog();
    c["commands"][0]["summary"] = json!("Answer, and more.");
    s.set_catalog(&c);
    let changed = s.tools_pin("--check");
    assert_eq!(changed.status.code(), Some(1), "{}", stderr(&changed));
    let lines: Vec<String> = stdout(&changed).lines().map(str::to_string).collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(
        lines[0].starts_with("backend: describe_sha256: \""),
        "{lines:?}"
    );
    assert_eq!(
        lines[1],
        "tool `ping`: description: \"Answer.\" -> \"Answer, and more.\""
    );

    let updated = s.tools_pin("--update");
    assert_eq!(updated.status.code(), Some(0), "{}", stderr(&updated));
    assert!(
        stdout(&updated).contains("updated: tool `ping`: description:"),
        "{}",
        stdout(&updated)
    );
    assert_eq!(s.tools_pin("--check").status.code(), Some(0));
    let served = s.serve_once(&[]);
    assert_eq!(served.status.code(), Some(0), "{}", stderr(&served));
}

/// What `tools/list` carries in `_meta` is the digest in the pin file, and
/// the tools come in name order.
#[test]
fn tools_list_carries_the_pinned_digest_in_name_order() {
    let s = pinned();
    let digest = s.pin_file()["tools_sha256"].clone();
    let mut server = serve(&s, &[]);
    let r = server.request(modern(json!(1), "tools/list", json!({})));
    assert_eq!(
        r["result"]["_meta"]["io.reachweaver/tools-sha256"], digest,
        "{r}"
    );
    let names: Vec<&str> = r["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["ping", "stock_count"]);
    let d = server.request(modern(json!(2), "server/discover", json!({})));
    assert_eq!(
        d["result"]["_meta"]["io.reachweaver/tools-sha256"], digest,
        "{d}"
    );
    let (status, _) = server.finish();
    assert!(status.success());
}

fn serve(s: &Setup, extra: &[&str]) -> Server {
    let mut args = vec!["mcp-serve".to_string()];
    args.extend(extra.iter().map(|a| a.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Server::spawn(s.command(&args))
}

fn call_ping(server: &mut Server, id: u64) -> Value {
    let r = server.request(modern(
        json!(id),
        "tools/call",
        json!({"name": "ping", "arguments": {}}),
    ));
    r["result"]["structuredContent"].clone()
}

#[test]
fn a_backend_swapped_mid_session_is_refused_until_it_matches_again() {
    let s = pinned();
    let pin = format!("--pin={}", s.pins().display());
    let mut server = serve(&s, &[&pin]);
    assert_eq!(call_ping(&mut server, 1)["output"], json!({"ran": "ping"}));

    s.change_backend_bytes();
    let refused = call_ping(&mut server, 2);
    assert_eq!(refused["exit_code"], 2, "{refused}");
    assert_eq!(
        refused["output"]["error"]["code"], "backend_changed",
        "{refused}"
    );
    let err = server.stderr_when("the change logged", |e| e.contains("pins: backend changed"));
    assert!(
        err.contains("its calls are refused (backend_changed)"),
        "{err}"
    );

    // The original bytes again, in a new file: served, by every call
    // (more than runs are ever set up ahead).
    install_executable(&fixture("catalog-file"), &s.backend());
    for id in 3..=7 {
        assert_eq!(
            call_ping(&mut server, id)["output"],
            json!({"ran": "ping"}),
            "call {id}: {}",
            server.stderr_text()
        );
    }
    let (status, _) = server.finish();
    assert!(status.success());
}

#[test]
fn without_pins_a_swapped_backend_is_served_and_logged_once() {
    let s = Setup::new();
    let mut server = serve(&s, &[]);
    assert_eq!(call_ping(&mut server, 1)["output"], json!({"ran": "ping"}));
    // Another build in its place (a new file, as an upgrade leaves it):
    // every later call runs it, more calls than runs are ever set up
    // ahead.
    let text = std::fs::read_to_string(fixture("catalog-file")).unwrap();
    let plain = r#"printf '{"ran":"%s"}\n' "$cmd""#;
    assert!(text.contains(plain));
    let build_2 = text.replace(plain, r#"printf '{"ran":"%s","build":2}\n' "$cmd""#);
    write_executable(&s.backend(), &build_2);
    for id in 2..=6 {
        let out = call_ping(&mut server, id);
        assert_eq!(
            out["output"],
            json!({"ran": "ping", "build": 2}),
            "call {id}: {out}\n{}",
            server.stderr_text()
        );
    }
    let (status, _) = server.finish();
    assert!(status.success());
    let err = server.stderr_after_exit();
    assert_eq!(err.matches("pins: backend changed").count(), 1, "{err}");
    assert!(err.contains("serving goes on"), "{err}");
}

#[test]
fn two_servers_starting_together_write_one_file() {
    let s = Setup::new();
    let pin = format!("--pin={}", s.pins().display());
    let start = || {
        s.command(&["mcp-serve", &pin])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (start(), start());
    let outs = [a.wait_with_output().unwrap(), b.wait_with_output().unwrap()];
    for o in &outs {
        assert_eq!(o.status.code(), Some(0), "{}", stderr(o));
    }
    let firsts = outs
        .iter()
        .filter(|o| stderr(o).contains("pins: first start"))
        .count();
    assert_eq!(firsts, 1, "{}\n---\n{}", stderr(&outs[0]), stderr(&outs[1]));
    assert!(outs.iter().any(|o| stderr(o).contains("pins: unchanged")));
    let left: Vec<String> = std::fs::read_dir(s.dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let mut left = left;
    left.sort();
    assert_eq!(left, ["bin", "home", "pins.json"]);
}

/// A backend that answers a call with what it was started from: its `$0`
/// and, when that is a descriptor (`/dev/fd/N`), whether a read from that
/// very descriptor finds its end at once: the server's own open file, read
/// to its end to hash it, does; a file opened afresh would give its first
/// line.
pub(crate) fn self_reporting_backend() -> String {
    let text = std::fs::read_to_string(fixture("catalog-file")).unwrap();
    let report = r#"  *)
    fd="${0#/dev/fd/}"
    at_end=""
    if [ "$fd" != "$0" ]; then
      if eval "read -r first <&$fd"; then at_end="no"; else at_end="yes"; fi
    fi
    printf '{"ran":"%s","self":"%s","at_end":"%s"}\n' "$cmd" "$0" "$at_end"
    ;;"#;
    let plain = r#"  *) printf '{"ran":"%s"}\n' "$cmd" ;;"#;
    assert!(text.contains(plain));
    text.replace(plain, report)
}

#[test]
fn a_pinned_run_executes_the_descriptor_that_was_hashed() {
    let s = Setup::new();
    write_executable(&s.backend(), &self_reporting_backend());
    let pin = format!("--pin={}", s.pins().display());
    let mut server = serve(&s, &[&pin]);
    let ran = call_ping(&mut server, 1);
    assert_eq!(
        ran["output"],
        json!({"ran": "ping", "self": "/dev/fd/6", "at_end": "yes"}),
        "{ran}\n{}",
        server.stderr_text()
    );
    let (status, _) = server.finish();
    assert!(status.success());
}

/// The catalog read at start names the file that ran it: with `--pin`
/// the descriptor hashed before the read, as every later run.
#[test]
fn the_catalog_at_start_is_read_from_the_descriptor_that_was_hashed() {
    for pinned in [true, false] {
        let s = Setup::new();
        let text = self_reporting_backend();
        let plain = r#"    cat "$home/catalog.json""#;
        assert!(text.contains(plain));
        let naming = text.replace(plain, r#"    sed "s|@SELF@|$0|" "$home/catalog.json""#);
        write_executable(&s.backend(), &naming);
        s.set_catalog(&json!({
            "catalog": 1,
            "program": {"name": "stock", "version": "1.0.0"},
            "format_flag": "--format",
            "commands": [command("ping", "Answer; run as @SELF@.")]
        }));
        let pin = format!("--pin={}", s.pins().display());
        let extra: Vec<&str> = if pinned { vec![&pin] } else { Vec::new() };
        let mut server = serve(&s, &extra);
        let listed = server.request(modern(json!(1), "tools/list", json!({})));
        let description = listed["result"]["tools"][0]["description"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let ran_as = if pinned {
            "/dev/fd/6".to_string()
        } else {
            s.backend().display().to_string()
        };
        assert!(
            description.starts_with(&format!("Answer; run as {ran_as}.")),
            "pinned {pinned}: {listed}\n{}",
            server.stderr_text()
        );
        let (status, _) = server.finish();
        assert!(status.success());
    }
}

#[test]
fn without_pins_the_backend_is_executed_by_its_path() {
    let s = Setup::new();
    write_executable(&s.backend(), &self_reporting_backend());
    let mut server = serve(&s, &[]);
    let out = call_ping(&mut server, 1)["output"].clone();
    let path = s.backend().display().to_string();
    assert_eq!(
        out,
        json!({"ran": "ping", "self": path, "at_end": ""}),
        "{out}"
    );
    let (status, _) = server.finish();
    assert!(status.success());
}

/// The reference backend, a binary, pinned: executed from the descriptor
/// hashed (Landlock's execute right holds for it), its calls answer, a
/// read-only one (its init armed ahead) and a draft (armed once its
/// request, and the descriptor, are there).
#[test]
fn a_pinned_binary_backend_serves_read_only_and_draft_calls() {
    let pins = tempfile::tempdir().unwrap();
    let mut server = Server::start_with(Opts {
        extra_serve_args: vec![
            "--allow-drafts".into(),
            format!("--pin={}", pins.path().join("pins.json").display()),
        ],
        own_db: true,
        ..Opts::default()
    });
    let calls = [
        json!({"name": "context", "arguments": {}}),
        json!({"name": "draft", "arguments": {"campaign": "campaigns/spring-launch.yaml",
               "channel": "mastodon", "text": "A calm note about our spring release."}}),
        json!({"name": "context", "arguments": {}}),
    ];
    for (id, call) in calls.into_iter().enumerate() {
        let r = server.request(modern(json!(id), "tools/call", call));
        assert_eq!(
            r["result"]["isError"],
            false,
            "{r}\n{}",
            server.stderr_text()
        );
    }
    let (status, _) = server.finish();
    assert!(status.success());
}
