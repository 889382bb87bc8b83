//! A first run from the command line: the README's connect command when the
//! backend is not installed, and output piped into a reader that stops
//! early (`| head`), which must end quietly with exit 0, never a panic.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use crate::support::mcp::*;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `--backend ""` (what `"$(command -v reachweaver)"` gives when nothing is
/// installed) is reported as a backend not found, for every subcommand.
#[test]
fn an_empty_backend_is_reported_as_not_found() {
    let home = tempfile::tempdir().unwrap();
    let home_arg = format!("--home={}", home.path().display());
    for args in [
        vec!["--backend", "", home_arg.as_str(), "tools"],
        vec![
            "--backend=",
            home_arg.as_str(),
            "mcp-serve",
            "--print-config",
            "claude-desktop",
        ],
        vec![home_arg.as_str(), "call", "--backend", "", "anything"],
    ] {
        let out = Command::new(server_bin()).args(&args).output().unwrap();
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
        assert!(
            err.contains("--backend: the backend was not found")
                && err.contains("$(command -v reachweaver)"),
            "{args:?}: {err}"
        );
        assert!(!err.contains("a value is required"), "{args:?}: {err}");
    }
}

/// The README's command without `--backend`, on a machine where
/// `reachweaver` is not installed, names the lookup that failed.
#[test]
fn the_readme_connect_command_without_a_backend_says_not_found_on_path() {
    let home = tempfile::tempdir().unwrap();
    let empty_path = tempfile::tempdir().unwrap();
    let out = Command::new(server_bin())
        .arg(format!("--home={}", home.path().display()))
        .args(["mcp-serve", "--print-config", "claude-desktop"])
        .env("PATH", empty_path.path())
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(out.stdout.is_empty());
    assert!(
        err.contains("--backend: 'reachweaver' was not found on PATH"),
        "{err}"
    );
}

/// Run with stdout a pipe whose reading end is closed before the program
/// writes anything: every write to it fails with a broken pipe.
fn with_closed_stdout(mut cmd: Command) -> Output {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    child.wait_with_output().unwrap()
}

fn server_on(ws: &Path) -> Command {
    let mut cmd = Command::new(server_bin());
    cmd.arg(format!("--backend={}", reference_bin().display()))
        .arg(format!("--home={}", ws.display()))
        .current_dir(ws);
    cmd
}

#[test]
fn a_reader_that_goes_away_ends_every_printing_command_quietly() {
    let ws = Workspace::new();
    for args in [
        vec!["tools", "--check"],
        vec!["tools", "--check", "--json"],
        vec!["mcp-serve", "--print-config", "claude-desktop"],
        vec!["tools"],
        vec!["tools", "--json"],
        vec!["call", "version"],
    ] {
        let mut cmd = server_on(ws.path());
        cmd.args(&args);
        let out = with_closed_stdout(cmd);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
        assert!(
            !err.contains("panicked") && !err.contains("Broken pipe"),
            "{args:?}: {err}"
        );
    }
}

/// The same commands with a reader that stays print what they should, so
/// the test above saw them reach their writes.
#[test]
fn the_same_commands_print_when_read() {
    let ws = Workspace::new();
    for (args, starts) in [
        (vec!["tools", "--check", "--json"], "{"),
        (vec!["mcp-serve", "--print-config", "claude-desktop"], "{"),
    ] {
        let out = server_on(ws.path()).args(&args).output().unwrap();
        let stdout = text(&out.stdout);
        assert!(
            out.status.code().is_some_and(|c| c <= 1),
            "{args:?}: {}",
            text(&out.stderr)
        );
        assert!(stdout.starts_with(starts), "{args:?}: {stdout}");
        serde_json::from_str::<serde_json::Value>(&stdout).unwrap();
    }
}
