//! A backend written in Python, installed in its own virtual environment,
//! served through `mcp-serve` with the full sandbox: the interpreter found
//! through the shebang, the venv as the install prefix, and nothing else.

use std::process::Command;

use crate::support::mcp::*;
use serde_json::json;

/// A virtual environment in `dir` with the Python backend as `bin/rw-py`.
fn venv_backend(dir: &std::path::Path) -> std::path::PathBuf {
    let venv = dir.join("venv");
    let out = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .output()
        .expect("python3 is needed");
    assert!(
        out.status.success(),
        "venv: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let script =
        std::fs::read_to_string(repo_root().join("tests/fixtures/pybackend/rw_py.py")).unwrap();
    let backend = venv.join("bin/rw-py");
    crate::support::write_executable(
        &backend,
        &format!("#!{}\n{script}", venv.join("bin/python").display()),
    );
    backend
}

/// A folder with the Python backend in a venv of its own, and a root
/// holding `note.txt` with `words`.
fn venv_world(words: &str) -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let dir = tempfile::Builder::new()
        .prefix("rwmcp-venv-")
        .tempdir()
        .unwrap();
    let backend = venv_backend(dir.path());
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    std::fs::write(root.join("note.txt"), words).unwrap();
    (dir, backend, root)
}

#[test]
fn python_backend_in_its_own_venv_works_under_the_sandbox() {
    let (_dir, backend, root) = venv_world("one two two three three three");

    let mut cmd = Command::new(server_bin());
    cmd.arg(format!("--backend={}", backend.display()))
        .arg("mcp-serve")
        .arg(format!("--root={}", root.display()))
        // The server's environment must not reach the backend.
        .env("PYTHONPATH", "/nonexistent-injected")
        .env("PYTHONSTARTUP", "/nonexistent-startup")
        .env("LD_PRELOAD", "/nonexistent-preload.so")
        .current_dir(&root);
    let mut s = Server::spawn(cmd);
    let list = s.request(modern(json!(1), "tools/list", json!({})));
    assert_eq!(
        list["result"]["tools"][0]["name"],
        "word_count",
        "{list}\n{}",
        s.stderr_text()
    );
    let r = s.request(modern(
        json!(2),
        "tools/call",
        json!({"name": "word_count", "arguments": {"file": "note.txt"}}),
    ));
    let env = envelope_of(&r["result"]);
    assert_eq!(env["exit_code"], 0, "{env}\n{}", s.stderr_text());
    assert_eq!(env["output"]["words"], 6);
    assert_eq!(env["output"]["distinct"], 3);
    // asyncio's local sockets are no network attempt (docs/DENIED.md).
    crate::support::sandbox::assert_clean(&r["result"]["_meta"]["io.reachweaver/denied"], "rw-py");
    // Written at start, but read by another thread: waited for.
    s.stderr_when("the sandbox in force", |l| {
        l.contains("landlock") && l.contains("seccomp")
    });
    // A path outside the root is refused before the run.
    let r = s.request(modern(
        json!(3),
        "tools/call",
        json!({"name": "word_count", "arguments": {"file": "/etc/hostname"}}),
    ));
    assert_eq!(
        envelope_of(&r["result"])["output"]["error"]["code"],
        "path_outside_root"
    );
}

/// With `--pin` the script is executed from the descriptor the server
/// hashed: the interpreter gets it as `/dev/fd/N` in the run.
#[test]
fn python_backend_pinned_runs_from_its_hashed_descriptor() {
    let (dir, backend, root) = venv_world("one two two");
    let mut cmd = Command::new(server_bin());
    cmd.arg(format!("--backend={}", backend.display()))
        .arg("mcp-serve")
        .arg(format!("--root={}", root.display()))
        .arg(format!("--pin={}", dir.path().join("pins.json").display()))
        .current_dir(&root);
    let mut s = Server::spawn(cmd);
    let r = s.request(modern(
        json!(1),
        "tools/call",
        json!({"name": "word_count", "arguments": {"file": "note.txt"}}),
    ));
    let env = envelope_of(&r["result"]);
    assert_eq!(env["exit_code"], 0, "{env}\n{}", s.stderr_text());
    assert_eq!(env["output"]["words"], 3);
    assert_eq!(env["output"]["distinct"], 2);
    s.stderr_when("the pins written", |l| l.contains("pins: first start"));
}
