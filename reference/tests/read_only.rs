//! Read-only commands never create, change or add files beside the database.

mod common;

use std::fs;
use std::path::Path;
use std::time::SystemTime;

use common::{catalog_commands, invocation, tags, Workspace};

/// Everything observable about the database folder: each file's name, size,
/// modification time and bytes.
fn snapshot(dir: &Path) -> Vec<(String, u64, SystemTime, Vec<u8>)> {
    let mut files: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let meta = e.metadata().unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                meta.len(),
                meta.modified().unwrap(),
                fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    files.sort();
    files
}

fn read_only_commands(ws: &Workspace) -> Vec<String> {
    catalog_commands(ws)
        .iter()
        .filter(|c| tags(c).iter().any(|t| t == "read_only"))
        .filter(|c| !tags(c).iter().any(|t| t == "writes"))
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn read_only_commands_leave_the_database_untouched() {
    let ws = Workspace::new();
    let names = read_only_commands(&ws);
    assert_eq!(names.len(), 37, "{names:?}");
    let data = ws.home.join("data");
    let before = snapshot(&data);
    assert_eq!(
        before.iter().map(|f| f.0.as_str()).collect::<Vec<_>>(),
        vec![".keep", "reachweaver.db"]
    );
    for name in &names {
        let inv = invocation(name);
        let run = ws.run_json(inv);
        assert_eq!(run.code, inv.exit, "{name}: {run:?}");
        // Also in text mode, which takes its own path through the output code.
        let mut args = vec![inv.command];
        args.extend_from_slice(inv.flags);
        args.push("--");
        args.extend_from_slice(inv.positionals);
        ws.run(&args);
    }
    let after = snapshot(&data);
    assert_eq!(
        before.len(),
        after.len(),
        "no journal, -wal or -shm file appeared"
    );
    for (b, a) in before.iter().zip(&after) {
        assert_eq!(b.0, a.0);
        assert_eq!(b.1, a.1, "{} size", b.0);
        assert_eq!(b.2, a.2, "{} modification time", b.0);
        assert!(b.3 == a.3, "{} contents", b.0);
    }
}

#[test]
fn a_missing_database_is_reported_and_never_created() {
    let ws = Workspace::without_db();
    let data = ws.home.join("data");
    let before = snapshot(&data);
    let needs_db = [
        "ops-summary",
        "trace",
        "queue-status",
        "approval-status",
        "calendar",
        "slot-suggest",
        "metrics-summary",
        "repeat-check",
        "contacts-summary",
    ];
    for name in read_only_commands(&ws) {
        let run = ws.run_json(invocation(&name));
        if needs_db.contains(&name.as_str()) {
            assert_eq!(run.error_code(), "database_missing", "{name}");
            let message = run.json()["error"]["message"].as_str().unwrap().to_string();
            assert!(
                message.contains("init"),
                "{name}: the message says to run init: {message}"
            );
        } else {
            let expected = invocation(&name).exit;
            assert_eq!(
                run.code, expected,
                "{name} answers without a database: {run:?}"
            );
        }
        assert!(!ws.db().exists(), "{name} created the database");
    }
    assert_eq!(snapshot(&data), before);
}

#[test]
fn draft_does_not_create_a_missing_database() {
    let ws = Workspace::without_db();
    let run = ws.run_json(invocation("draft"));
    assert_eq!(run.error_code(), "database_missing");
    assert!(!ws.db().exists());
    assert_eq!(
        fs::read_dir(ws.home.join("data")).unwrap().count(),
        1,
        "only .keep is in the data folder"
    );
}

#[test]
fn the_commands_tagged_writes_would_create_it() {
    // The reason list, show and check are tagged `writes`: a missing database
    // is created when they open it.
    let ws = Workspace::without_db();
    let run = ws.run(&["list", "--format=json"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.json()["count"], 0);
    assert!(ws.db().exists());
}

#[test]
fn read_only_opens_work_on_a_read_only_database_file() {
    // A database whose file and folder cannot be written still answers; as
    // root the permission bits are not enforced, so this checks the open mode
    // does not need them rather than that the kernel refuses a write.
    let ws = Workspace::new();
    let mut perms = fs::metadata(ws.db()).unwrap().permissions();
    perms.set_readonly(true);
    fs::set_permissions(ws.db(), perms).unwrap();
    let run = ws.run(&["ops-summary", "--format=json"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.json()["drafts"]["total"], 12);
}
