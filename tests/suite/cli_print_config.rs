//! `mcp-serve --print-config claude-desktop` prints an entry that parses and,
//! run exactly as printed, serves MCP.

use std::process::Command;

use crate::support::install_executable;
use crate::support::mcp::*;
use serde_json::{json, Value};

#[test]
fn printed_entry_parses_and_runs_as_printed() {
    let ws = Workspace::new();
    let out = Command::new(server_bin())
        .arg(format!("--backend={}", reference_bin().display()))
        .arg("--home=.")
        .arg("--db=data/reachweaver.db")
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
    for place in ["Library/Application Support/Claude", ".config/Claude"] {
        assert!(stderr.contains(place), "{stderr}");
    }
    // Windows is not supported: no path of it is offered.
    assert!(
        !stderr.contains("%APPDATA%") && !stderr.contains("Windows"),
        "{stderr}"
    );

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

/// A `reachweaver` in the current folder and another on PATH: the printed
/// entry, `tools` and the server all name the one on PATH.
#[test]
fn the_printed_backend_is_the_one_the_server_runs() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let (cwd, bin) = (base.join("cwd"), base.join("bin"));
    std::fs::create_dir_all(&cwd).unwrap();
    std::fs::create_dir_all(&bin).unwrap();
    crate::support::install_executable(
        &crate::support::fixture("nap-backend"),
        &bin.join("reachweaver"),
    );
    crate::support::write_executable(&cwd.join("reachweaver"), "#!/bin/sh\nexit 3\n");
    let path = format!("{}:.:/usr/bin:/bin", bin.display());
    let run = |args: &[&str]| {
        Command::new(server_bin())
            .args(args)
            .env("PATH", &path)
            .current_dir(&cwd)
            .output()
            .unwrap()
    };
    let on_path = bin.join("reachweaver");
    for given in [&[][..], &["--backend", "reachweaver"]] {
        let mut args = given.to_vec();
        args.extend(["mcp-serve", "--print-config", "claude-desktop"]);
        let out = run(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let entry: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            entry["mcpServers"]["reachweaver"]["args"][0],
            format!("--backend={}", on_path.display()),
            "{given:?}"
        );
        let mut args = given.to_vec();
        args.extend(["tools", "--json"]);
        let out = run(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let tools: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(tools["backend"]["path"], on_path.display().to_string());
        assert_eq!(tools["backend"]["name"], "napper");
    }
    // `./reachweaver` means the one in the current folder, for both.
    let out = run(&[
        "--backend",
        "./reachweaver",
        "mcp-serve",
        "--print-config",
        "claude-desktop",
    ]);
    let entry: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        entry["mcpServers"]["reachweaver"]["args"][0],
        format!("--backend={}", cwd.join("reachweaver").display())
    );
}

/// `--print-config` checks what it names, with the server's own messages.
#[test]
fn print_config_refuses_a_missing_backend_or_home() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(server_bin())
        .args(["mcp-serve", "--print-config", "claude-desktop"])
        .env("PATH", dir.path())
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim_end(),
        "reachweaver-mcp: --backend: 'reachweaver' was not found on PATH; install it or pass --backend /absolute/path"
    );

    let out = Command::new(server_bin())
        .arg(format!("--backend={}", reference_bin().display()))
        .args(["--home", "/no/such/rw-home"])
        .args(["mcp-serve", "--print-config", "claude-desktop"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim_end(),
        "reachweaver-mcp: --home /no/such/rw-home: no such folder"
    );
}

/// The lines of the first `sh` block after `heading` in the README, with
/// `\`-continued lines joined.
fn readme_block(heading: &str) -> Vec<String> {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let at = readme.find(heading).expect("README heading");
    let rest = &readme[at..];
    let start = rest.find("```sh\n").expect("an sh block") + 6;
    let end = start + rest[start..].find("```").unwrap();
    rest[start..end]
        .replace("\\\n", " ")
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|l| !l.is_empty())
        .collect()
}

/// The README's first-run commands work as written from a clone: a copy of
/// the parts they use (the two binaries where `cargo build` puts them and
/// `examples/workspace`) stands in for one.
#[test]
fn the_readme_commands_work_from_a_clone_as_written() {
    let clone = tempfile::tempdir().unwrap();
    let top = clone.path().canonicalize().unwrap();
    let bin = top.join("target/debug");
    std::fs::create_dir_all(&bin).unwrap();
    install_executable(&server_bin(), &bin.join("reachweaver-mcp"));
    install_executable(&reference_bin(), &bin.join("reachweaver-reference"));
    std::fs::create_dir(top.join("examples")).unwrap();
    let cp = Command::new("cp")
        .arg("-r")
        .arg(repo_root().join("examples/workspace"))
        .arg(top.join("examples/workspace"))
        .output()
        .unwrap();
    assert!(cp.status.success());
    // A database made by another run in the repository is not part of a clone.
    for entry in std::fs::read_dir(top.join("examples/workspace/data"))
        .unwrap()
        .flatten()
    {
        if entry
            .file_name()
            .to_string_lossy()
            .starts_with("reachweaver.db")
        {
            std::fs::remove_file(entry.path()).unwrap();
        }
    }

    let lines = readme_block("## Connect Claude Desktop");
    assert_eq!(lines[0], "cargo build --workspace", "{lines:?}");
    // Built already (the copies above); the rest runs as written: the
    // database first (it prints `init`'s answer), then the entry.
    let (last, setup) = lines[1..].split_last().unwrap();
    let run = |script: &str| {
        let out = Command::new("sh")
            .args(["-c", script])
            .current_dir(&top)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{script}\n{err}");
        out
    };
    run(&setup.join("\n"));
    assert!(top.join("examples/workspace/data/reachweaver.db").is_file());
    let out = run(last);
    let entry: Value = serde_json::from_slice(&out.stdout).expect("pure JSON");
    let server = &entry["mcpServers"]["reachweaver"];
    assert_eq!(
        server["command"],
        json!(bin.join("reachweaver-mcp").display().to_string())
    );
    assert_eq!(
        server["args"],
        json!([
            format!("--backend={}", bin.join("reachweaver-reference").display()),
            format!("--home={}", top.join("examples/workspace").display()),
            "mcp-serve"
        ])
    );

    // Each Inspector command's server part starts the server from the clone.
    let inspector = readme_block("## Connect with the MCP Inspector");
    assert_eq!(inspector.len(), 2, "{inspector:?}");
    for line in &inspector {
        let server_part = line.split(" -- ").nth(1).expect("a server after --");
        let out = Command::new("sh")
            .args(["-c", &format!("{server_part} < /dev/null")])
            .current_dir(&top)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{server_part}\n{err}");
        assert!(
            err.contains(&format!(
                "serving {} (reachweaver",
                bin.join("reachweaver-reference").display()
            )),
            "{err}"
        );
    }
}
