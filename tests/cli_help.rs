//! The command line documents itself: every subcommand's `--help` names
//! every option the README documents, and `--version` answers.

mod common;

use std::process::Command;

use common::*;

fn help(args: &[&str]) -> String {
    let out = Command::new(server_bin())
        .args(args)
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success(), "{args:?} --help failed");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn version_answers() {
    let out = Command::new(server_bin())
        .arg("--version")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8(out.stdout).unwrap().trim(),
        format!("reachweaver-mcp {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn every_subcommand_has_complete_help() {
    let globals = ["--backend", "--home", "--db", "--accounts", "--profile"];
    let serve = [
        "--allow-drafts",
        "--root",
        "--max-output-bytes",
        "--max-calls-per-minute",
        "--call-timeout",
        "--max-concurrent-calls",
        "--sandbox",
        "--allow-read",
        "--pass-env",
    ];
    let top = help(&[]);
    for sub in ["mcp-serve", "tools", "call", "sandbox"] {
        assert!(top.contains(sub), "top-level help lists {sub}");
    }
    assert!(
        !top.contains("__sandbox-helper") && !top.contains("__probe-attempt"),
        "internal commands stay hidden"
    );
    for sub in [&["mcp-serve"][..], &["tools"], &["call"]] {
        let h = help(sub);
        for opt in globals.iter().chain(serve.iter()) {
            assert!(h.contains(opt), "{sub:?} --help names {opt}");
        }
    }
    assert!(help(&["mcp-serve"]).contains("--print-config"));
    assert!(help(&["tools"]).contains("--json"));
    let call = help(&["call"]);
    assert!(call.contains("--arg") && call.contains("--args-json"));
    assert!(help(&["sandbox", "status"]).contains("--json"));
    let run = help(&["sandbox", "run"]);
    assert!(run.contains("--root") && run.contains("--allow-read"));
    let probe = help(&["sandbox", "probe"]);
    assert!(probe.contains("--json") && probe.contains("--without"));
    // The README documents the same options.
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    for opt in serve.iter().chain(["--print-config"].iter()) {
        assert!(
            readme.contains(&format!("`{opt}")),
            "README documents {opt}"
        );
    }
}
