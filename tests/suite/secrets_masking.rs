//! Protected files beneath the root are hidden inside every run, through
//! the real binary: a backend that reads them itself, with no path argument
//! for the server to refuse, finds them empty, and so are other names (hard
//! links) of them, while ordinary files and the fixed files (even inside a
//! protected folder) read as they are. Linux only: the mount namespace is
//! what hides them.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::mcp::*;
use serde_json::{json, Value};

fn peek_backend() -> PathBuf {
    repo_root().join("tests/fixtures/peek-backend")
}

/// A root holding secrets the backend may stumble on, ordinary notes, and
/// the fixed accounts file inside the protected `.aws/` folder.
fn root_with_secrets() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    fs::create_dir_all(root.join("sub")).unwrap();
    fs::create_dir_all(root.join(".aws")).unwrap();
    fs::write(root.join(".env"), "HIDDENMARKERenv1234\n").unwrap();
    fs::write(root.join("sub/.env.local"), "HIDDENMARKERlocal99\n").unwrap();
    fs::write(root.join(".aws/credentials"), "HIDDENMARKERaws777\n").unwrap();
    fs::write(root.join(".aws/accounts.yaml"), "channel: demo42\n").unwrap();
    fs::write(root.join("notes.txt"), "plain notes 42\n").unwrap();
    (dir, root)
}

fn server(root: &Path) -> Command {
    let mut cmd = Command::new(server_bin());
    cmd.arg(format!("--backend={}", peek_backend().display()))
        .arg(format!(
            "--accounts={}",
            root.join(".aws/accounts.yaml").display()
        ));
    cmd
}

fn peek(root: &Path, file: &str) -> (Value, Output) {
    let out = server(root)
        .args(["call", "peek", "--root"])
        .arg(root)
        .arg("--arg")
        .arg(format!("file={file}"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{file}: {stderr}");
    let envelope: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        stderr.contains("mountns"),
        "the run had no mount namespace: {stderr}"
    );
    (envelope["output"].clone(), out)
}

#[test]
fn a_backend_walking_the_root_finds_protected_files_empty() {
    let (_dir, root) = root_with_secrets();
    for file in [".env", "sub/.env.local", ".aws/credentials"] {
        let (output, out) = peek(&root, file);
        // Empty, not merely redacted: the run never had the bytes.
        assert_eq!(
            output,
            json!({"file": file, "readable": true, "bytes": 0, "text": ""}),
            "{file}"
        );
        assert!(!String::from_utf8_lossy(&out.stdout).contains("HIDDENMARKER"));
    }
    let (output, _) = peek(&root, "notes.txt");
    assert_eq!(output["text"], "plainnotes42");
    // The fixed accounts file sits inside `.aws/`, yet the backend reads it.
    let (output, _) = peek(&root, ".aws/accounts.yaml");
    assert_eq!(output["text"], "channeldemo42");
}

/// A repository's config (its remote URL holding a token) and files named
/// for a token are hidden like the others; the rest of `.git/` is not.
#[test]
fn a_backend_finds_git_config_and_token_files_empty() {
    let (_dir, root) = root_with_secrets();
    fs::create_dir_all(root.join(".git")).unwrap();
    fs::write(
        root.join(".git/config"),
        "[remote \"origin\"]\n\turl = https://dana:HIDDENMARKERgit42@github.com/dana/app.git\n",
    )
    .unwrap();
    fs::write(root.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    fs::write(root.join("token.txt"), "HIDDENMARKERtok5\n").unwrap();
    fs::write(root.join("sub/gh.token"), "HIDDENMARKERgh6\n").unwrap();
    for file in [".git/config", "token.txt", "sub/gh.token"] {
        let (output, out) = peek(&root, file);
        assert_eq!(
            output,
            json!({"file": file, "readable": true, "bytes": 0, "text": ""}),
            "{file}"
        );
        assert!(!String::from_utf8_lossy(&out.stdout).contains("HIDDENMARKER"));
    }
    assert_eq!(peek(&root, ".git/HEAD").0["text"], "refrefsheadsmain");
}

/// Other names of the secrets, by names no pattern matches, and a second
/// name of an ordinary file. (A second name of the fixed accounts file is
/// refused at start: [`a_fixed_file_with_a_second_name_is_refused_at_start`].)
fn add_hard_links(root: &Path) {
    for (from, to) in [
        (".env", "env-copy.txt"),
        (".aws/credentials", "sub/aws-copy.txt"),
        ("notes.txt", "notes-again.txt"),
    ] {
        fs::hard_link(root.join(from), root.join(to)).unwrap();
    }
}

#[test]
fn a_backend_walking_the_root_finds_hard_links_to_protected_files_empty() {
    let (_dir, root) = root_with_secrets();
    add_hard_links(&root);
    // Each an ordinary name, two links to its file (the positive control
    // for the count: outside the run every one of them reads in full).
    for file in ["env-copy.txt", "sub/aws-copy.txt"] {
        let meta = fs::metadata(root.join(file)).unwrap();
        assert_eq!(std::os::unix::fs::MetadataExt::nlink(&meta), 2, "{file}");
        assert!(fs::read_to_string(root.join(file)).unwrap().len() > 10);
        let (output, out) = peek(&root, file);
        assert_eq!(
            output,
            json!({"file": file, "readable": true, "bytes": 0, "text": ""}),
            "{file}"
        );
        assert!(!String::from_utf8_lossy(&out.stdout).contains("HIDDENMARKER"));
    }
    // The protected names stay hidden; the fixed file is read under its own
    // name; an ordinary file with two names reads under both.
    assert_eq!(peek(&root, ".env").0["bytes"], 0);
    assert_eq!(peek(&root, ".aws/accounts.yaml").0["text"], "channeldemo42");
    assert_eq!(peek(&root, "notes.txt").0["text"], "plainnotes42");
    assert_eq!(peek(&root, "notes-again.txt").0["text"], "plainnotes42");
}

#[test]
fn tools_says_how_many_entries_every_run_hides() {
    let (_dir, root) = root_with_secrets();
    let out = server(&root)
        .args(["tools", "--root"])
        .arg(&root)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains(
            "hidden in every run by its mount namespace (found at start): 3 protected entries"
        ),
        "{text}"
    );
    assert!(!text.contains("stopped at its limit"), "{text}");
    let out = server(&root)
        .args(["tools", "--json", "--root"])
        .arg(&root)
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["protected"]["hidden_in_runs"], 3);
    assert_eq!(v["protected"]["hidden_hard_links"], 0);
    assert_eq!(v["protected"]["hidden_scan_truncated"], false);

    // With two other names of protected files, and a second name of an
    // ordinary file (not counted).
    add_hard_links(&root);
    let out = server(&root)
        .args(["tools", "--root"])
        .arg(&root)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(
        "hidden in every run by its mount namespace (found at start): 5 protected entries under the root and home, 2 of them only as another name (hard link) of a protected or fixed file\n"
    ), "{text}");
    assert!(
        text.contains("; and other names (hard links) of the fixed files and of the 3 protected files the start-up scan found\n"),
        "{text}"
    );
    let out = server(&root)
        .args(["tools", "--json", "--root"])
        .arg(&root)
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["protected"]["hidden_in_runs"], 5);
    assert_eq!(v["protected"]["hidden_hard_links"], 2);
}

/// A fixed file is granted whole and exempt from the masks, so a second
/// name of it (which could be a credential's, or change under the server)
/// refuses the start; the same file with one name starts.
#[test]
fn a_fixed_file_with_a_second_name_is_refused_at_start() {
    let (_dir, root) = root_with_secrets();
    let ok = server(&root)
        .args(["tools", "--root"])
        .arg(&root)
        .output()
        .unwrap();
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    fs::hard_link(
        root.join(".aws/accounts.yaml"),
        root.join("accounts-copy.txt"),
    )
    .unwrap();
    let out = server(&root)
        .args(["tools", "--root"])
        .arg(&root)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "--accounts {}: refused: it has 2 names (hard links)",
            root.join(".aws/accounts.yaml").display()
        )),
        "{err}"
    );
}

/// The list is taken at start: a protected file made later, or a hard link
/// made later to one, is not hidden from a server already running (README,
/// "Protected files and redaction").
#[test]
fn the_mask_list_is_a_start_up_snapshot() {
    let (_dir, root) = root_with_secrets();
    let mut cmd = server(&root);
    cmd.args(["mcp-serve", "--root"]).arg(&root);
    let mut s = Server::spawn(cmd);
    s.initialize("2025-06-18");
    let call = |s: &mut Server, id: i64, file: &str| {
        let r = s.request(req(
            json!(id),
            "tools/call",
            json!({"name": "peek", "arguments": {"file": file}}),
        ));
        envelope_of(&r["result"])["output"].clone()
    };
    assert_eq!(call(&mut s, 1, ".env")["bytes"], 0);
    fs::write(root.join(".env.late"), "madeafterstart\n").unwrap();
    assert_eq!(call(&mut s, 2, ".env.late")["text"], "madeafterstart");
    fs::hard_link(root.join(".env"), root.join("late-copy.txt")).unwrap();
    assert_eq!(
        call(&mut s, 3, "late-copy.txt")["text"],
        "HIDDENMARKERenv1234"
    );
    s.close_stdin();
    let (status, _) = s.finish();
    assert!(status.success());
}

/// The owner saves a protected file while the server runs: the sandbox
/// helper's spares, made before, must not show the new file. An editor's
/// atomic save (a new file renamed over it), a delete and re-create, and a
/// protected folder moved aside and made again, each followed by calls.
#[test]
fn masks_survive_the_owners_saves() {
    let (_dir, root) = root_with_secrets();
    let mut cmd = server(&root);
    cmd.args(["mcp-serve", "--root"]).arg(&root);
    let mut s = Server::spawn(cmd);
    s.initialize("2025-06-18");
    let mut id = 0;
    let mut peek = |s: &mut Server, file: &str| {
        id += 1;
        let r = s.request(req(
            json!(id),
            "tools/call",
            json!({"name": "peek", "arguments": {"file": file}}),
        ));
        envelope_of(&r["result"])["output"].clone()
    };
    let hidden = |v: &Value| v["bytes"] == 0 && v["text"] == "";
    // Two calls first, so the spares that serve the next ones are armed.
    assert!(hidden(&peek(&mut s, ".env")));
    assert!(hidden(&peek(&mut s, ".aws/credentials")));

    fs::write(root.join(".env.swp"), "HIDDENMARKERsaved1\n").unwrap();
    fs::rename(root.join(".env.swp"), root.join(".env")).unwrap();
    for _ in 0..3 {
        let v = peek(&mut s, ".env");
        assert!(hidden(&v), "after an atomic save: {v}");
    }

    fs::remove_file(root.join(".env")).unwrap();
    fs::write(root.join(".env"), "HIDDENMARKERremade2\n").unwrap();
    for _ in 0..3 {
        let v = peek(&mut s, ".env");
        assert!(hidden(&v), "after a re-creation: {v}");
    }

    fs::rename(root.join(".aws"), root.join("aws-old")).unwrap();
    fs::create_dir(root.join(".aws")).unwrap();
    fs::write(root.join(".aws/credentials"), "HIDDENMARKERaws3\n").unwrap();
    for _ in 0..3 {
        let v = peek(&mut s, ".aws/credentials");
        assert!(
            v["bytes"] == 0 || v["readable"] == false,
            "after a folder moved aside: {v}"
        );
        assert!(!v.to_string().contains("HIDDENMARKER"), "{v}");
    }
    // The positive control: outside the sandbox the new content is there.
    assert!(fs::read_to_string(root.join(".env"))
        .unwrap()
        .contains("HIDDENMARKERremade2"));
    s.close_stdin();
    let (status, _) = s.finish();
    assert!(status.success());
}

/// A scan that stops at its bounds says so at start and in `tools`, since
/// what it did not reach is not hidden.
#[test]
fn a_scan_cut_short_is_reported() {
    let (_dir, root) = root_with_secrets();
    let mut deep = root.clone();
    for _ in 0..40 {
        deep.push("d");
    }
    fs::create_dir_all(&deep).unwrap();
    fs::write(deep.join(".env"), "HIDDENMARKERdeep\n").unwrap();
    let out = server(&root)
        .args(["tools", "--root"])
        .arg(&root)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let first = stderr.lines().next().unwrap_or_default();
    for text in [first, &*stdout] {
        assert!(
            text.contains("the scan for protected files to hide in runs stopped at its limit")
                && text.contains(&root.display().to_string()),
            "{text}"
        );
    }
    let out = server(&root)
        .args(["tools", "--json", "--root"])
        .arg(&root)
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["protected"]["hidden_scan_truncated"], true);
}

/// `env` through the real binary with `REACHWEAVER_SMTP_PASS=value` in the
/// server's environment: the envelope, and the call's log line.
fn env_call(value: &str, pass: bool) -> (Value, String) {
    let (_dir, root) = root_with_secrets();
    let mut cmd = server(&root);
    cmd.args([
        "call",
        "env",
        "--arg",
        "name=REACHWEAVER_SMTP_PASS",
        "--root",
    ])
    .arg(&root)
    .env("REACHWEAVER_SMTP_PASS", value);
    if pass {
        cmd.arg("--pass-env=REACHWEAVER_SMTP_PASS");
    }
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    (serde_json::from_slice(&out.stdout).unwrap(), stderr)
}

#[test]
fn a_short_secret_passed_with_pass_env_is_redacted_from_results() {
    // Four characters, passed: the run gets it, the result does not.
    let (envelope, stderr) = env_call("hunt", true);
    assert_eq!(envelope["output"]["value"], "[REDACTED]", "{envelope}");
    assert!(stderr.contains(" redacted=1"), "{stderr}");
    assert!(!stderr.contains("too short to redact"), "{stderr}");
    // Not passed: the run never gets it (secret-named), nothing to redact.
    let (envelope, stderr) = env_call("hunt", false);
    assert_eq!(envelope["output"]["value"], "", "{envelope}");
    assert!(!stderr.contains("redacted="), "{stderr}");
    // Too short to look for: passed as asked, and start-up says it is not
    // redacted as text. Here the document names it (`"name":
    // "REACHWEAVER_SMTP_PASS"` beside `"value"`), so the name/value rule hides it.
    let (envelope, stderr) = env_call("ab1", true);
    assert_eq!(envelope["output"]["value"], "[REDACTED]", "{envelope}");
    assert!(
        stderr.contains("warning: --pass-env REACHWEAVER_SMTP_PASS: the value is shorter than 4 characters, too short to redact from results"),
        "{stderr}"
    );
}
