//! `tools`: what a client would get from the fake backend's catalog, and the
//! start-up refusals of catalogs the server must not guess about.

use crate::support::server_bin;
use crate::support::tools::{fake_backend, Workspace};
use serde_json::{json, Value};

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn tools_text_shows_every_command_and_its_fate() {
    let ws = Workspace::new();
    let out = ws.tools(&[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let expect = [
        "backend: ",
        "(shelfcheck 0.3.1)",
        "4 of 15 commands offered as tools",
        "describe      describe",
        "stock-report  stock_report  withheld arguments: --fetch-prices (uses the network), --output (never offered by this server), --format (output format, set by the server)",
        "sheet-check   sheet_check",
        "selftest      selftest",
        "restock       -             withheld: not tagged read_only; tagged writes",
        "price-sync    -             withheld: tagged network",
        "vault-peek    -             withheld: tagged secrets",
        "setup-wizard  -             withheld: tagged interactive",
        "ship-order    -             withheld: not tagged read_only; tagged writes; tagged owner_only",
        "export-csv    -             withheld: no JSON output format",
        "legacy-count  -             withheld: not tagged read_only",
        "audit-log     -             withheld: owner-only argument --as-admin",
        "mcp-serve     -             withheld: is mcp-serve itself",
        "mirror-feed   -             withheld: required argument --feed-url is withheld (uses the network)",
        "draft         -             withheld: offered only with --allow-drafts",
    ];
    for e in expect {
        assert!(text.contains(e), "missing {e:?} in:\n{text}");
    }
    assert!(
        text.contains(&format!("globals: --db={}", ws.db.display())),
        "{text}"
    );
}

#[test]
fn tools_json_is_complete_and_machine_readable() {
    let ws = Workspace::new();
    let out = ws.tools(&["--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_str(&stdout(&out)).expect("tools --json prints JSON");
    assert_eq!(v["backend"]["name"], "shelfcheck");
    assert_eq!(v["backend"]["version"], "0.3.1");
    assert_eq!(
        v["backend"]["path"],
        fake_backend().canonicalize().unwrap().to_str().unwrap()
    );
    assert_eq!(v["root"], ws.root.to_str().unwrap());
    assert_eq!(v["tool_count"], 4);
    let commands = v["commands"].as_array().unwrap();
    assert_eq!(commands.len(), 15);

    let stock = &commands[1];
    assert_eq!(stock["command"], "stock-report");
    assert_eq!(stock["offered"], true);
    assert_eq!(stock["tool"], "stock_report");
    assert_eq!(stock["kind"], "read_only");
    assert_eq!(
        stock["withheld_arguments"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| (w["argument"].as_str().unwrap(), w["why"].as_str().unwrap()))
            .collect::<Vec<_>>(),
        vec![
            ("--fetch-prices", "network"),
            ("--output", "never_offered"),
            ("--format", "output_format")
        ]
    );
    assert_eq!(
        stock["input_schema"]["properties"]["min_qty"],
        json!({"type": "integer", "minimum": 0, "maximum": 10000,
               "description": "Hide items with fewer units.", "default": 0})
    );
    assert_eq!(stock["input_schema"]["additionalProperties"], false);
    assert!(stock["input_schema"].get("required").is_none());

    let mirror = commands
        .iter()
        .find(|c| c["command"] == "mirror-feed")
        .unwrap();
    assert_eq!(mirror["offered"], false);
    assert_eq!(
        mirror["reasons"][0],
        json!({"code": "required_argument_withheld", "argument": "--feed-url", "why": "network",
               "text": "required argument --feed-url is withheld (uses the network)"})
    );
    let audit = commands
        .iter()
        .find(|c| c["command"] == "audit-log")
        .unwrap();
    assert_eq!(audit["reasons"][0]["code"], "owner_only_argument");
    assert_eq!(audit["reasons"][0]["argument"], "--as-admin");
}

#[test]
fn allow_drafts_offers_the_draft_tool() {
    let ws = Workspace::new();
    let out = ws.tools(&["--json", "--allow-drafts"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["tool_count"], 5);
    let draft = v["commands"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["command"] == "draft")
        .unwrap();
    assert_eq!(draft["tool"], "draft");
    assert_eq!(draft["kind"], "draft");
    assert_eq!(draft["withheld_arguments"][0]["argument"], "--online");
    assert_eq!(draft["input_schema"]["required"], json!(["note"]));
}

#[test]
fn startup_line_names_backend_tool_count_and_sandbox() {
    let ws = Workspace::new();
    let out = ws.tools(&[]);
    let err = stderr(&out);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "exactly one start-up line: {err}");
    let backend = fake_backend().canonicalize().unwrap();
    assert!(
        lines[0].starts_with(&format!(
            "reachweaver-mcp: serving {} (shelfcheck 0.3.1): 4 tools; sandbox: ",
            backend.display()
        )),
        "{}",
        lines[0]
    );
}

#[test]
fn allow_drafts_without_a_draft_command_is_a_warning_not_an_error() {
    let ws = Workspace::new();
    let mut c = ws.command();
    c.env("REACHWEAVER_FAKE_CATALOG", "nodraft").args([
        "tools",
        "--allow-drafts",
        "--sandbox",
        "best-effort",
    ]);
    let out = c.output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(
            "warning: --allow-drafts given, but the backend has no eligible `draft` command"
        ),
        "{err}"
    );
}

fn refused_catalog(variant: &str) -> String {
    let ws = Workspace::new();
    let mut c = ws.command();
    c.env("REACHWEAVER_FAKE_CATALOG", variant)
        .args(["tools", "--sandbox", "best-effort"]);
    let out = c.output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "catalog {variant} must be refused; stdout {}",
        stdout(&out)
    );
    assert!(stdout(&out).is_empty());
    stderr(&out)
}

#[test]
fn catalog_with_another_version_is_refused() {
    let err = refused_catalog("bad-version");
    assert!(err.contains("catalog version 7 is not supported"), "{err}");
}

/// `tools --json` on a catalog variant that is served with one command
/// withheld: that command's reasons, and the number of tools.
fn withheld_by_catalog(variant: &str, command: &str) -> (Vec<Value>, u64) {
    let ws = Workspace::new();
    let mut c = ws.command();
    c.env("REACHWEAVER_FAKE_CATALOG", variant).args([
        "tools",
        "--json",
        "--sandbox",
        "best-effort",
    ]);
    let out = c.output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("; note: 1 command withheld for problems in the catalog"),
        "{}",
        stderr(&out)
    );
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let entry = v["commands"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["command"] == command)
        .unwrap_or_else(|| panic!("{command} not reported"))
        .clone();
    assert_eq!(entry["offered"], false, "{entry}");
    (
        entry["reasons"].as_array().unwrap().clone(),
        v["tool_count"].as_u64().unwrap(),
    )
}

#[test]
fn an_unknown_type_withholds_only_that_command() {
    let (reasons, tools) = withheld_by_catalog("unknown-type", "age-report");
    assert_eq!(tools, 4, "the other tools are still served");
    assert_eq!(reasons[0]["code"], "unknown_type");
    assert_eq!(reasons[0]["pointer"], "/commands/15/flags/0/type");
    assert!(
        reasons[0]["text"]
            .as_str()
            .unwrap()
            .starts_with("unknown type \"date\""),
        "{reasons:?}"
    );
}

#[test]
fn an_unknown_tag_withholds_only_that_command() {
    let (reasons, tools) = withheld_by_catalog("unknown-tag", "stock-report");
    assert_eq!(tools, 3);
    assert_eq!(reasons[0]["code"], "unknown_tag");
    assert_eq!(reasons[0]["pointer"], "/commands/1/tags/1");
}

#[test]
fn a_duplicate_after_mapping_withholds_only_that_command() {
    let (reasons, tools) = withheld_by_catalog("dup-mapping", "restock-plan");
    assert_eq!(tools, 4);
    assert_eq!(reasons[0]["code"], "duplicate");
    assert_eq!(reasons[0]["pointer"], "/commands/15/flags/0/name");
    let text = reasons[0]["text"].as_str().unwrap();
    assert!(
        text.contains("\"--dry-run\"") && text.contains("`dry_run`"),
        "{text}"
    );
}

#[test]
fn describe_that_fails_or_prints_garbage_is_refused() {
    let err = refused_catalog("fails");
    assert!(
        err.contains(
            "describe --format=json` failed (exit code 2): No shelfcheck.toml in this folder."
        ),
        "{err}"
    );
    let err = refused_catalog("garbage");
    assert!(
        err.contains("describe did not print one JSON document"),
        "{err}"
    );
}

#[test]
fn missing_or_non_executable_backend_is_a_clear_error() {
    let ws = Workspace::new();
    let out = std::process::Command::new(server_bin())
        .args([
            "--backend",
            "/no/such/shelfcheck",
            "tools",
            "--sandbox",
            "best-effort",
        ])
        .current_dir(&ws.root)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--backend /no/such/shelfcheck: no such file"),
        "{}",
        stderr(&out)
    );

    let out = std::process::Command::new(server_bin())
        .arg("--backend")
        .arg(&ws.db)
        .args(["tools", "--sandbox", "best-effort"])
        .current_dir(&ws.root)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains(&format!(
            "--backend {}: not an executable file",
            ws.db.display()
        )),
        "{}",
        stderr(&out)
    );

    let out = std::process::Command::new(server_bin())
        .args(["tools", "--sandbox", "best-effort"])
        .env("PATH", ws.root.as_os_str())
        .current_dir(&ws.root)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains(
            "--backend: 'reachweaver' was not found on PATH; install it or pass --backend /absolute/path"
        ),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_root_of_slash_is_refused() {
    let ws = Workspace::new();
    let mut c = ws.command();
    c.args(["tools", "--sandbox", "best-effort", "--root", "/"]);
    let out = c.output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--root /: refused: / would open every file"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_root_equal_to_the_home_folder_or_holding_it_is_refused() {
    let ws = Workspace::new();
    let mut c = ws.command();
    c.env("HOME", &ws.root)
        .args(["tools", "--sandbox", "best-effort"]);
    let out = c.output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(&format!(
            "the root (the current folder) {}: refused: it is your home folder",
            ws.root.display()
        )) && err.contains("pass --root or --home"),
        "{err}"
    );

    // A HOME spelled through a symlink is the same home.
    let link = ws.dir.path().join("home-link");
    std::os::unix::fs::symlink(&ws.root, &link).unwrap();
    let mut c = ws.command();
    c.env("HOME", &link)
        .args(["tools", "--sandbox", "best-effort"]);
    let out = c.output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("refused: it is your home folder"),
        "{}",
        stderr(&out)
    );

    // A root that holds the home folder.
    let mut c = ws.command();
    c.env("HOME", ws.root.join("sub"))
        .args(["tools", "--sandbox", "best-effort"]);
    let out = c.output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("refused: it holds your home folder"),
        "{}",
        stderr(&out)
    );

    let mut c = ws.command();
    c.env("HOME", ws.dir.path())
        .args(["tools", "--sandbox", "best-effort"]);
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "a folder below home is fine: {}",
        stderr(&out)
    );
    assert_eq!(
        stderr(&out).lines().count(),
        1,
        "only the start-up line: {}",
        stderr(&out)
    );
}

#[test]
fn the_catalog_home_becomes_the_home_global_and_the_root() {
    let ws = Workspace::new();
    let home = ws.dir.path().canonicalize().unwrap().join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(home.join("sheet.csv"), "a\nb\n").unwrap();
    // Neither --home nor --root: the backend's reported home is fixed and used.
    let out = std::process::Command::new(server_bin())
        .arg("--backend")
        .arg(fake_backend())
        .args([
            "call",
            "stock_report",
            "--arg",
            "sheet=sheet.csv",
            "--sandbox",
            "best-effort",
        ])
        .env("REACHWEAVER_FAKE_HOME", &home)
        // A proposed home must lie inside the user's own home folder.
        .env("HOME", ws.dir.path())
        .current_dir(&ws.root)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    let home_s = home.to_str().unwrap();
    assert_eq!(v["output"]["globals"], json!([format!("--home={home_s}")]));
    assert_eq!(v["output"]["cwd"], home_s);
    assert_eq!(
        v["output"]["args"],
        json!(["--format=json", "--", format!("{home_s}/sheet.csv")])
    );
}

#[test]
fn owner_globals_are_made_absolute_and_passed_in_order() {
    let ws = Workspace::new();
    let out = std::process::Command::new(server_bin())
        .arg("--backend")
        .arg(fake_backend())
        .args([
            "--profile",
            "p.yaml",
            "--home",
            ".",
            "--accounts",
            "a.yaml",
            "--db",
            "../state/shelf.db",
        ])
        .args(["call", "stock_report", "--sandbox", "best-effort"])
        .current_dir(&ws.root)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    let r = ws.root.to_str().unwrap();
    assert_eq!(
        v["output"]["globals"],
        json!([
            format!("--home={r}"),
            format!("--db={}", ws.db.display()),
            format!("--accounts={r}/a.yaml"),
            format!("--profile={r}/p.yaml"),
        ])
    );
}

#[test]
fn a_missing_home_folder_is_reported_as_missing() {
    let ws = Workspace::new();
    let missing = ws.dir.path().join("no-such-home");
    let mut c = ws.command();
    c.arg("--home")
        .arg(&missing)
        .args(["tools", "--sandbox", "best-effort"]);
    let out = c.output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out).trim_end(),
        format!(
            "reachweaver-mcp: --home {}: no such folder",
            missing.display()
        )
    );
}

#[test]
fn pass_env_names_that_are_never_passed_get_a_warning() {
    let ws = Workspace::new();
    let out = ws.tools(&[
        "--pass-env",
        "PYTHONPATH",
        "--pass-env",
        "LANG",
        "--pass-env",
        "LD_PRELOAD",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    let warning = err.lines().next().unwrap();
    assert!(
        warning.starts_with("reachweaver-mcp: warning: --pass-env PYTHONPATH, LD_PRELOAD ignored"),
        "{err}"
    );
    assert!(!warning.contains("LANG"), "{err}");
    let quiet = ws.tools(&["--pass-env", "LANG"]);
    assert!(!stderr(&quiet).contains("warning"), "{}", stderr(&quiet));
}

#[test]
fn a_reader_that_closes_stdout_early_ends_tools_quietly() {
    let ws = Workspace::new();
    let mut c = ws.command();
    c.args(["tools", "--json", "--sandbox", "best-effort"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = c.spawn().unwrap();
    // Like `| head -0`: the reader is gone before anything is written.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));
    assert!(!stderr(&out).contains("Broken pipe"), "{}", stderr(&out));
}

#[test]
fn a_database_given_through_a_symlink_is_refused() {
    let ws = Workspace::new();
    let link = ws.dir.path().join("link.db");
    std::os::unix::fs::symlink(&ws.db, &link).unwrap();
    let out = std::process::Command::new(server_bin())
        .arg("--backend")
        .arg(fake_backend())
        .arg("--db")
        .arg(&link)
        .args(["tools", "--sandbox", "best-effort", "--root"])
        .arg(&ws.root)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out).trim_end(),
        format!(
            "reachweaver-mcp: --db {}: is a symbolic link; name the file it points to",
            link.display()
        )
    );
}

#[test]
fn tools_shows_the_protected_patterns_and_fixed_files() {
    let ws = Workspace::new();
    let out = ws.tools(&["--protect", "*.sqlite", "--protect", "private/"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let line = text
        .lines()
        .find(|l| l.starts_with("protected"))
        .unwrap_or_else(|| panic!("no protected line in:\n{text}"));
    for p in [
        ".env ", "*.pem", "id_rsa*", ".ssh/", ".kube/", "*.sqlite", "private/",
    ] {
        assert!(line.contains(p), "{p} missing: {line}");
    }
    assert!(line.contains("the fixed database file"), "{line}");

    let out = ws.tools(&["--json", "--protect", "*.sqlite"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let patterns: Vec<&str> = v["protected"]["patterns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    assert_eq!(patterns.first(), Some(&".env"));
    assert_eq!(patterns.last(), Some(&"*.sqlite"));
    assert!(patterns.contains(&".aws/"));
    let fixed = &v["protected"]["fixed_files"];
    assert!(
        fixed
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["file"] == "database" && f["path"] == ws.db.display().to_string().as_str()),
        "{fixed}"
    );

    let out = ws.tools(&["--protect", "../x"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("--protect `../x` cannot be used"),
        "{}",
        stderr(&out)
    );
}
