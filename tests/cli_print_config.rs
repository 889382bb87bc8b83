//! `mcp-serve --print-config claude-desktop` prints an entry that parses and,
//! run exactly as printed, serves MCP.

mod common;

use std::process::Command;

use common::*;
use serde_json::{json, Value};

#[test]
fn printed_entry_parses_and_runs_as_printed() {
    let ws = Workspace::new();
    let out = Command::new(server_bin())
        .arg(format!("--backend={}", reference_bin().display()))
        .arg("--home=.")
        .args([
            "mcp-serve",
            "--allow-drafts",
            "--print-config",
            "claude-desktop",
        ])
        .current_dir(ws.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let entry: Value = serde_json::from_slice(&out.stdout).expect("stdout is pure JSON");
    let server = &entry["mcpServers"]["reachweaver"];
    let command = server["command"].as_str().unwrap();
    let args: Vec<String> = server["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    assert!(std::path::Path::new(command).is_absolute());
    let home = std::fs::canonicalize(ws.path()).unwrap();
    assert!(
        args.contains(&format!("--home={}", home.display())),
        "{args:?}"
    );
    assert!(args.contains(&"--allow-drafts".to_string()));
    let stderr = String::from_utf8_lossy(&out.stderr);
    for place in [
        "Library/Application Support/Claude",
        "%APPDATA%",
        ".config/Claude",
    ] {
        assert!(stderr.contains(place), "{stderr}");
    }

    // Run as printed, from another folder: absolute paths make it independent of the cwd.
    let mut cmd = Command::new(command);
    cmd.args(&args).current_dir(std::env::temp_dir());
    let mut s = Server::spawn(cmd);
    let r = s.request(modern(json!(1), "server/discover", json!({})));
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
    let tools = s.request(modern(json!(2), "tools/list", json!({})));
    assert!(tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["name"] == "draft"));
}
