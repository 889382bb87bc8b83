//! Every command in the catalog runs with --format=json, prints one JSON
//! document and exits with the code its answer calls for.

mod common;

use std::collections::BTreeSet;

use common::{catalog_commands, Workspace, INVOCATIONS};

#[test]
fn the_invocation_table_covers_the_catalog_exactly() {
    let ws = Workspace::new();
    let in_catalog: BTreeSet<String> = catalog_commands(&ws)
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect();
    let in_table: BTreeSet<String> = INVOCATIONS.iter().map(|i| i.command.to_string()).collect();
    assert_eq!(in_catalog, in_table);
    assert_eq!(in_table.len(), INVOCATIONS.len(), "one row per command");
}

#[test]
fn every_command_prints_one_json_document_with_the_right_exit_code() {
    let ws = Workspace::new();
    for inv in INVOCATIONS {
        let run = ws.run_json(inv);
        assert_eq!(run.code, inv.exit, "{}: {run:?}", inv.command);
        let doc = run.json();
        assert!(doc.is_object(), "{}: {doc}", inv.command);
        if run.code == 2 {
            run.error_code();
        } else {
            assert!(doc.get("error").is_none(), "{}: {doc}", inv.command);
        }
    }
}

#[test]
fn the_expected_errors_are_the_documented_ones() {
    let ws = Workspace::new();
    // init refuses to replace the database the workspace already has.
    assert_eq!(
        ws.run_json(common::invocation("init")).error_code(),
        "already_exists"
    );
    // report-text prints text only, so a JSON request is a bad argument.
    assert_eq!(
        ws.run_json(common::invocation("report-text")).error_code(),
        "bad_argument"
    );
}

#[test]
fn text_output_gives_the_same_exit_codes() {
    let ws = Workspace::new();
    for inv in INVOCATIONS {
        let mut args = vec![inv.command];
        args.extend_from_slice(inv.flags);
        args.push("--");
        args.extend_from_slice(inv.positionals);
        let run = ws.run(&args);
        let expected = if inv.command == "report-text" {
            0
        } else {
            inv.exit
        };
        assert_eq!(run.code, expected, "{}: {run:?}", inv.command);
        if run.code == 2 {
            assert!(
                run.stdout.is_empty(),
                "{}: errors go to stderr in text mode",
                inv.command
            );
            assert!(
                run.stderr.starts_with("reachweaver: "),
                "{}: {run:?}",
                inv.command
            );
        } else {
            assert!(
                !run.stdout.trim().is_empty(),
                "{}: prints something",
                inv.command
            );
            assert!(
                serde_json::from_str::<serde_json::Value>(&run.stdout).is_err(),
                "{}: text is not JSON",
                inv.command
            );
        }
    }
}

#[test]
fn output_is_deterministic() {
    let a = Workspace::new();
    let b = Workspace::new();
    for inv in INVOCATIONS.iter().filter(|i| i.command != "draft") {
        let (ra, rb) = (a.run_json(inv), b.run_json(inv));
        // Absolute paths differ between the two workspaces; nothing else may.
        let norm =
            |s: &str, ws: &Workspace| s.replace(&ws.home.to_string_lossy().into_owned(), "HOME");
        assert_eq!(
            norm(&ra.stdout, &a),
            norm(&rb.stdout, &b),
            "{}",
            inv.command
        );
    }
}
