//! The example backends under `examples/` (docs/BACKEND.md, Pitfalls by
//! language) pass `tools --check` clean and serve a real MCP client. Node
//! must be installed: this test fails, never skips, without it.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};

use crate::support::mcp::{envelope_of, req, Server};
use crate::support::{repo_root, server_bin};

fn node_backend() -> PathBuf {
    let found = Command::new("node").arg("--version").output();
    assert!(
        found.as_ref().is_ok_and(|o| o.status.success()),
        "these tests need Node.js (`node` on PATH) for examples/node-backend; install it: {found:?}"
    );
    repo_root().join("examples/node-backend/bin/rw-node")
}

fn shell_backend() -> PathBuf {
    repo_root().join("examples/shell-backend/bin/rw-sh")
}

fn check(backend: &Path, home: &Path) {
    let out = Command::new(server_bin())
        .arg(format!("--backend={}", backend.display()))
        .arg(format!("--home={}", home.display()))
        .args(["tools", "--check"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.starts_with("0 errors, 0 warnings\n"), "{stdout}");
    assert!(stdout.ends_with("result: clean\n"), "{stdout}");
}

fn serve(backend: &Path, home: &Path) -> Server {
    let mut cmd = Command::new(server_bin());
    cmd.arg(format!("--backend={}", backend.display()))
        .arg(format!("--home={}", home.display()))
        .arg("mcp-serve")
        .current_dir(home);
    let mut s = Server::spawn(cmd);
    s.initialize("2025-06-18");
    s
}

fn call(s: &mut Server, id: i64, tool: &str, args: Value) -> (Value, Value) {
    let r = s.request(req(
        json!(id),
        "tools/call",
        json!({"name": tool, "arguments": args}),
    ));
    let result = r["result"].clone();
    assert!(result.is_object(), "{r}");
    (envelope_of(&result), result)
}

fn tool_names(s: &mut Server) -> Vec<String> {
    let list = s.request(req(json!("l"), "tools/list", json!({})));
    list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

/// Node: more than 64 KiB of output arrives whole, because the example sets
/// `process.exitCode` instead of calling `process.exit()`.
#[test]
fn the_node_example_is_clean_and_serves_output_over_64_kib_whole() {
    let backend = node_backend();
    let home = tempfile::tempdir().unwrap();
    check(&backend, home.path());

    let line = "x".repeat(99);
    let text = format!("{line}\n").repeat(1500) + "short\n";
    std::fs::write(home.path().join("big.txt"), &text).unwrap();
    let mut s = serve(&backend, home.path());
    assert_eq!(tool_names(&mut s), vec!["describe", "read_lines"]);
    let (env, result) = call(
        &mut s,
        1,
        "read_lines",
        json!({"file": "big.txt", "min_length": 10}),
    );
    assert_eq!(result["isError"], false, "{env}");
    assert_eq!(env["exit_code"], 0);
    assert_eq!(env["output"]["count"], 1500, "{}", env["output"]["count"]);
    assert!(
        result["content"][0]["text"].as_str().unwrap().len() > 150_000,
        "the answer is over 64 KiB"
    );
    // Node.js makes compatibility calls only (V8's pkey_alloc, its
    // threads' clone3): nothing refused (docs/DENIED.md).
    #[cfg(target_os = "linux")]
    crate::support::sandbox::assert_clean(&result["_meta"]["io.reachweaver/denied"], "rw-node");

    let (env, _) = call(&mut s, 2, "read_lines", json!({"file": "missing.txt"}));
    assert_eq!(env["output"]["error"]["code"], "path_not_found", "{env}");
}

#[test]
fn the_shell_example_is_clean_and_answers_with_findings_and_errors() {
    let backend = shell_backend();
    let home = tempfile::tempdir().unwrap();
    check(&backend, home.path());

    std::fs::write(home.path().join("some.txt"), "hello\n").unwrap();
    std::fs::write(home.path().join("empty.txt"), "").unwrap();
    let mut s = serve(&backend, home.path());
    assert_eq!(tool_names(&mut s), vec!["describe", "file_size"]);
    let (env, first) = call(&mut s, 1, "file_size", json!({"file": "some.txt"}));
    assert_eq!(
        env,
        json!({"exit_code": 0, "output": {"bytes": 6, "empty": false}})
    );
    // Watched where runs are (Linux); macOS runs say `unavailable`.
    if cfg!(target_os = "linux") {
        crate::support::sandbox::assert_clean(&first["_meta"]["io.reachweaver/denied"], "rw-shell");
    }
    // Exit 1 is findings: a normal answer, not an error.
    let (env, result) = call(&mut s, 2, "file_size", json!({"file": "empty.txt"}));
    assert_eq!(
        env,
        json!({"exit_code": 1, "output": {"bytes": 0, "empty": true}})
    );
    assert_eq!(result["isError"], false);
    // A folder is not a file: the backend's own error document.
    std::fs::create_dir(home.path().join("dir")).unwrap();
    let (env, result) = call(&mut s, 3, "file_size", json!({"file": "dir"}));
    assert_eq!(env["output"]["error"]["code"], "unreadable_file", "{env}");
    assert_eq!(result["isError"], true);
}
