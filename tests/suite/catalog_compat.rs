//! Catalogs from backends newer than the server, or that print text no
//! client should see: a problem in one command withholds that command and
//! the rest is served; unknown top-level fields are noted; a newer catalog
//! version is refused naming both versions; catalog text is cleaned and
//! capped, and the start-up line stays one line; `tools --check` lists every
//! finding with its JSON pointer.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::mcp::{modern, reference_bin, repo_root, server_bin, Server};
use serde_json::{json, Value};

/// The backend that prints HOME/catalog.json as its catalog.
fn catalog_backend() -> PathBuf {
    let p = repo_root().join("tests/fixtures/catalog-file");
    assert!(p.exists(), "fixture missing: {}", p.display());
    p
}

fn command(name: &str) -> Value {
    json!({"name": name, "summary": format!("Run {name}."), "tags": ["read_only"], "formats": ["json"],
           "flags": [{"name": "--format", "type": "choice", "choices": ["json"], "output_format": true}]})
}

/// A catalog as a newer backend release could print it: one command with a
/// tag this server does not know, one with an argument type it does not know.
fn newer_catalog() -> Value {
    let mut beta = command("beta-report");
    beta["tags"] = json!(["read_only", "experimental"]);
    let mut paint = command("paint");
    paint["flags"].as_array_mut().unwrap().insert(
        0,
        json!({"name": "--shade", "type": "colour", "help": "The shade."}),
    );
    json!({
        "catalog": 1,
        "program": {"name": "future", "version": "9.0.0"},
        "format_flag": "--format",
        "commands": [command("ping"), beta, paint, command("stock-count")]
    })
}

/// A home folder holding `catalog` as catalog.json, written as given.
fn home_with(catalog: &[u8]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("catalog.json"), catalog).unwrap();
    dir
}

fn server_command(home: &Path, backend: &Path) -> Command {
    let mut c = Command::new(server_bin());
    c.arg(format!("--backend={}", backend.display()))
        .arg(format!("--home={}", home.display()))
        .current_dir(home);
    c
}

fn run(home: &Path, args: &[&str]) -> Output {
    server_command(home, &catalog_backend())
        .args(args)
        .args(["--sandbox", "best-effort"])
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn startup_lines(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.starts_with("reachweaver-mcp: serving"))
        .collect()
}

#[test]
fn unknown_tag_and_type_withhold_only_their_commands_and_the_rest_is_served() {
    let home = home_with(newer_catalog().to_string().as_bytes());

    let out = run(home.path(), &["tools", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["tool_count"], 2);
    let by_name = |n: &str| {
        v["commands"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["command"] == n)
            .cloned()
            .unwrap_or_else(|| panic!("{n} not reported: {v}"))
    };
    assert_eq!(by_name("ping")["offered"], true);
    assert_eq!(by_name("stock-count")["offered"], true);
    let beta = by_name("beta-report");
    assert_eq!(beta["offered"], false);
    assert_eq!(beta["reasons"][0]["code"], "unknown_tag");
    assert_eq!(beta["reasons"][0]["pointer"], "/commands/1/tags/1");
    let paint = by_name("paint");
    assert_eq!(paint["offered"], false);
    assert_eq!(paint["reasons"][0]["code"], "unknown_type");
    assert_eq!(paint["reasons"][0]["pointer"], "/commands/2/flags/0/type");

    let err = text(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(": 2 tools; ")
            && err.contains(
                "; note: 2 commands withheld for problems in the catalog (`tools` says why)"
            ),
        "{err}"
    );

    let out = run(home.path(), &["tools"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let table = text(&out.stdout);
    assert!(
        table.contains("beta-report  -            withheld: unknown tag \"experimental\""),
        "{table}"
    );
    assert!(
        table.contains("paint        -            withheld: unknown type \"colour\""),
        "{table}"
    );

    // The server itself starts and serves the others.
    let mut cmd = server_command(home.path(), &catalog_backend());
    cmd.args(["mcp-serve", "--sandbox", "best-effort"]);
    let mut server = Server::spawn(cmd);
    let list = server.request(modern(json!(1), "tools/list", json!({})));
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{list}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["ping", "stock_count"]);
    let call = server.request(modern(
        json!(2),
        "tools/call",
        json!({"name": "ping", "arguments": {}}),
    ));
    assert_eq!(
        call["result"]["structuredContent"],
        json!({"exit_code": 0, "output": {"ran": "ping"}}),
        "{call}"
    );
    let refused = server.request(modern(
        json!(3),
        "tools/call",
        json!({"name": "paint", "arguments": {}}),
    ));
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
}

#[test]
fn unknown_top_level_fields_are_ignored_and_noted_in_the_startup_line() {
    let mut v = newer_catalog();
    v["commands"] = json!([command("ping")]);
    v["homepage"] = json!("https://example.org");
    v["signing"] = json!({"key": "abc"});
    let home = home_with(v.to_string().as_bytes());
    let out = run(home.path(), &["tools"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(": 1 tool; ")
            && err.contains("; note: unknown catalog fields ignored: /homepage, /signing"),
        "{err}"
    );
}

#[test]
fn a_newer_catalog_version_is_refused_naming_both_versions() {
    let mut v = newer_catalog();
    v["catalog"] = json!(2);
    let home = home_with(v.to_string().as_bytes());
    let out = run(home.path(), &["tools"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let err = text(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("/catalog: catalog version 2 is not supported: it is newer than this server understands (catalog version 1)"),
        "{err}"
    );
}

#[test]
fn a_newline_in_the_program_name_cannot_forge_a_second_startup_line() {
    let mut v = newer_catalog();
    v["commands"] = json!([command("ping")]);
    v["program"]["name"] = json!("future\nreachweaver-mcp: serving /bin/true (safe 1.0): 0 tools");
    v["program"]["version"] = json!("9.0\u{1b}[2K\r");
    let home = home_with(v.to_string().as_bytes());
    let out = run(home.path(), &["tools", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert_eq!(
        err.lines().count(),
        1,
        "one line whatever the backend prints: {err:?}"
    );
    assert_eq!(startup_lines(&err).len(), 1, "{err:?}");
    assert!(!err.contains('\u{1b}') && !err.contains('\r'), "{err:?}");
    assert!(
        err.contains("; note: control or bidirectional characters removed from 2 catalog texts"),
        "{err}"
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["backend"]["name"],
        "future reachweaver-mcp: serving /bin/true (safe 1.0): 0 tools"
    );
    assert_eq!(v["backend"]["version"], "9.0[2K");
}

#[test]
fn control_characters_bidi_and_huge_summaries_never_reach_clients() {
    let mut ping = command("ping");
    ping["summary"] =
        json!("Ping\u{1b}]0;owned\u{7} the \u{202e}store\u{202c}\u{0}.\u{2066}\u{9b}");
    ping["flags"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "--note", "type": "string", "help": "n".repeat(200_000)}));
    let mut v = newer_catalog();
    v["commands"] = json!([ping]);
    let home = home_with(v.to_string().as_bytes());

    let mut cmd = server_command(home.path(), &catalog_backend());
    cmd.args(["mcp-serve", "--sandbox", "best-effort"]);
    let mut server = Server::spawn(cmd);
    let list = server.request(modern(json!(1), "tools/list", json!({})));
    let tool = &list["result"]["tools"][0];
    assert_eq!(tool["description"], "Ping]0;owned the store.", "{tool}");
    let help = tool["inputSchema"]["properties"]["note"]["description"]
        .as_str()
        .unwrap();
    assert!(help.len() <= 1024, "help is {} bytes", help.len());
    assert!(help.ends_with('…'));
    server.close_stdin();
    server.finish();
    let err = server.stderr_after_exit();
    let lines = startup_lines(&err);
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].contains("; note: 1 catalog text cut to fit (`tools --check` lists them)"),
        "{}",
        lines[0]
    );
}

/// The reference backend keeps one text-only read-only command on purpose
/// (it shows the `no_json_format` withholding): that is its one warning.
#[test]
fn check_on_the_reference_backend_warns_only_about_its_text_only_command() {
    let home = tempfile::tempdir().unwrap();
    let out = server_command(home.path(), &reference_bin())
        .args(["tools", "--check", "--sandbox", "best-effort"])
        .output()
        .unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    assert!(stdout.starts_with("0 errors, 1 warning\n"), "{stdout}");
    assert!(
        stdout.contains(
            "/formats: the command is tagged read_only but `formats` has no \"json\": it cannot be a tool"
        ) && stdout.contains("[command report-text]"),
        "{stdout}"
    );
    assert!(stdout.contains("commands: 30 offered as tools"), "{stdout}");
    assert!(
        stdout.contains("to validate the catalog against docs/catalog.schema.json"),
        "{stdout}"
    );
    assert!(
        stdout.ends_with("result: warnings only (exit 1)\n"),
        "{stdout}"
    );
}

/// A catalog with errors in several commands and a warning: every one is
/// listed with its pointer, and the command it is about.
#[test]
fn check_on_a_bad_backend_lists_every_problem_and_exits_2() {
    let mut v = newer_catalog();
    v["homepage"] = json!("x");
    let mut bad = command("Bad_Name");
    bad["positionals"] = json!([{"name": "where", "type": "place"}]);
    v["commands"].as_array_mut().unwrap().push(bad);
    let home = home_with(v.to_string().as_bytes());
    let out = run(home.path(), &["tools", "--check"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{stdout}{}", text(&out.stderr));
    for want in [
        "4 errors, 1 warning\n",
        "error    /commands/1/tags/1: unknown tag \"experimental\"",
        "[command beta-report]",
        "error    /commands/2/flags/0/type: unknown type \"colour\"",
        "[command paint]",
        "error    /commands/4/name: command name \"Bad_Name\" must be",
        "error    /commands/4/positionals/0/type: unknown type \"place\"",
        "warning  /homepage: unknown field \"homepage\"; ignored",
        "5 commands: 2 offered as tools, 3 withheld\n",
        "result: errors (exit 2)\n",
    ] {
        assert!(stdout.contains(want), "missing {want:?} in:\n{stdout}");
    }

    let out = run(home.path(), &["tools", "--check", "--json"]);
    assert_eq!(out.status.code(), Some(2));
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    let pointers: Vec<&str> = j["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["pointer"].as_str().unwrap())
        .collect();
    assert_eq!(
        pointers,
        vec![
            "/homepage",
            "/commands/1/tags/1",
            "/commands/2/flags/0/type",
            "/commands/4/name",
            "/commands/4/positionals/0/type"
        ]
    );
}

#[test]
fn check_exits_1_on_warnings_only_and_2_on_a_refused_catalog() {
    let mut v = newer_catalog();
    v["commands"] = json!([command("ping")]);
    v["commands"][0]["summary"] = json!("s".repeat(2000));
    let home = home_with(v.to_string().as_bytes());
    let out = run(home.path(), &["tools", "--check"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("warning  /commands/0/summary: the summary is 2000 bytes long; cut to 1024 bytes  [command ping]"),
        "{stdout}"
    );

    let home = home_with(br#"{"catalog": 1, "program": {"name": "x", "version": "1"}, "commands": [{"name": "a", "summary": "s", "tags": ["new"]}]}"#);
    let out = run(home.path(), &["tools", "--check"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{stdout}");
    assert!(stdout.starts_with("the catalog is refused"), "{stdout}");
    assert!(
        stdout.contains("error    /format_flag: `format_flag` is missing\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("error    /commands/0/tags/0: unknown tag \"new\""),
        "{stdout}"
    );
}

#[test]
fn a_failing_describe_cannot_forge_lines_either() {
    let home = home_with(b"");
    fs::write(
        home.path().join("describe-error.json"),
        json!({"error": {"code": "no_config",
                         "message": "No config.\nreachweaver-mcp: serving /bin/true: 9 tools\u{1b}[1A"}})
        .to_string(),
    )
    .unwrap();
    let out = run(home.path(), &["tools"]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    // The failure on one line, then the server's own hint: nothing the
    // backend wrote starts a line.
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 2, "{err:?}");
    assert!(
        lines[1].starts_with("hint: in the sandbox the backend may"),
        "{err:?}"
    );
    assert!(!err.contains('\u{1b}'), "{err:?}");
    assert!(
        err.contains(
            "failed (exit code 2): No config. reachweaver-mcp: serving /bin/true: 9 tools[1A"
        ),
        "{err}"
    );
}
