//! The command line documents itself: every subcommand's `--help` names
//! every option the README documents, and `--version` answers.

use std::process::Command;

use crate::support::mcp::*;

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
    // The version, and which backend catalog versions this server reads.
    assert_eq!(
        String::from_utf8(out.stdout).unwrap().trim(),
        format!(
            "reachweaver-mcp {} (reads backend catalog version 1)",
            env!("CARGO_PKG_VERSION")
        )
    );
}

#[test]
fn every_subcommand_has_complete_help() {
    let globals = ["--backend", "--home", "--db", "--accounts", "--profile"];
    // Options of every subcommand that starts the backend, of a call, and of the server alone.
    let start = [
        "--allow-drafts",
        "--root",
        "--sandbox",
        "--allow-read",
        "--pass-env",
        "--protect",
    ];
    let limits = ["--max-output-bytes", "--call-timeout"];
    let server_only = [
        "--max-calls-per-minute",
        "--max-concurrent-calls",
        "--print-config",
    ];
    let serve: Vec<&str> = start
        .iter()
        .chain(&limits)
        .chain(&server_only)
        .copied()
        .collect();
    let top = help(&[]);
    for sub in ["mcp-serve", "tools", "call", "sandbox"] {
        assert!(top.contains(sub), "top-level help lists {sub}");
    }
    assert!(
        !top.contains("__sandbox-helper") && !top.contains("__probe-attempt"),
        "internal commands stay hidden"
    );
    let (serve_help, tools_help, call_help) =
        (help(&["mcp-serve"]), help(&["tools"]), help(&["call"]));
    for opt in globals.iter().chain(&serve) {
        assert!(serve_help.contains(opt), "mcp-serve --help names {opt}");
    }
    for opt in globals.iter().chain(&start) {
        assert!(tools_help.contains(opt), "tools --help names {opt}");
        assert!(call_help.contains(opt), "call --help names {opt}");
    }
    for opt in &limits {
        assert!(call_help.contains(opt), "call --help names {opt}");
        assert!(
            !tools_help.contains(opt),
            "tools --help does not offer {opt}"
        );
    }
    for opt in &server_only {
        assert!(
            !tools_help.contains(opt),
            "tools --help does not offer {opt}"
        );
        assert!(!call_help.contains(opt), "call --help does not offer {opt}");
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
    let apparmor = help(&["sandbox", "apparmor-profile"]);
    assert!(apparmor.contains("--exe") && apparmor.contains("sudo apparmor_parser -R"));
    // The README documents the same options.
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    for opt in &serve {
        assert!(
            readme.contains(&format!("`{opt}")),
            "README documents {opt}"
        );
    }
}

#[test]
fn tools_and_call_refuse_options_that_are_not_theirs() {
    for (sub, opt) in [
        (&["tools"][..], "--print-config=claude-desktop"),
        (&["tools"], "--max-concurrent-calls=2"),
        (&["tools"], "--call-timeout=5"),
        (&["call", "x"], "--print-config=claude-desktop"),
        (&["call", "x"], "--max-calls-per-minute=5"),
    ] {
        let out = Command::new(server_bin())
            .args(sub)
            .arg(opt)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{sub:?} {opt}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("unexpected argument"), "{sub:?} {opt}: {err}");
    }
}

/// Every message the program prints about its command line starts with its
/// name, like every other error it prints (clap's own say `error:`).
#[test]
fn parse_errors_start_with_the_program_name_and_the_timeout_asks_for_whole_seconds() {
    let out = Command::new(server_bin())
        .args(["call", "x", "--call-timeout", "5m"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.starts_with("reachweaver-mcp: invalid value '5m' for '--call-timeout <SECS>': give whole seconds as digits only, such as 300 for five minutes"),
        "{err}"
    );
    assert!(!err.contains("error:"), "{err}");
    let out = Command::new(server_bin())
        .args(["tools", "--no-such-option"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.starts_with("reachweaver-mcp: unexpected argument"),
        "{err}"
    );
    // Help still goes to stdout, whole, with exit 0.
    let out = Command::new(server_bin())
        .args(["call", "--help"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("in whole seconds"), "{help}");
}

/// The README names every option `tools` takes, `--protect` included, and
/// docs/CI.md carries no placeholder a reader would have to fill in.
#[test]
fn the_readme_lists_the_tools_options_and_ci_md_has_no_placeholder() {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    assert!(
        readme.contains("`tools` takes `--root`, `--allow-drafts`, `--sandbox`, `--allow-read`,\n`--pass-env` and `--protect`"),
        "README's tools options"
    );
    // `call` of a name that is not a tool prints no envelope (see
    // tools_call::unknown_or_withheld_tool_is_a_clear_message_and_exit_2),
    // and the README says so rather than "always".
    assert!(readme.contains(
        "A `TOOL` that is not offered (unknown, or a withheld command) prints no envelope"
    ));
    let out = Command::new(server_bin())
        .args(["tools", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    for opt in [
        "--root",
        "--allow-drafts",
        "--sandbox",
        "--allow-read",
        "--pass-env",
        "--protect",
    ] {
        assert!(help.contains(opt), "tools --help lacks {opt}");
    }
    let ci = std::fs::read_to_string(repo_root().join("docs/CI.md")).unwrap();
    assert!(!ci.contains("OWNER"), "docs/CI.md has an OWNER placeholder");
}

/// The README says what the test command costs and installs, with the same
/// versions `ci/test.sh` pins.
#[test]
fn the_readme_states_the_test_commands_cost_and_installs() {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let script = std::fs::read_to_string(repo_root().join("ci/test.sh")).unwrap();
    assert!(readme.contains("takes about 15 minutes once its caches are filled"));
    assert!(readme.contains("AddressSanitizer"));
    for (in_readme, in_script) in [
        ("`mcp` 2.3.0", "mcp==2.3.0"),
        ("Inspector 2.12.0", "inspector 2.12.0"),
        ("TypeScript SDK 1.32.2", "sdk 1.32.2"),
        ("Node 22.23.5", "node 22.23.5"),
        ("`mcpb` 2.1.2", "mcpb 2.1.2"),
        ("`cargo-fuzz` 0.13.2", "cargo-fuzz 0.13.2"),
        ("for 30 seconds", "${FUZZ_SECONDS:-30}"),
    ] {
        assert!(readme.contains(in_readme), "README lacks {in_readme}");
        assert!(script.contains(in_script), "ci/test.sh lacks {in_script}");
    }
}
