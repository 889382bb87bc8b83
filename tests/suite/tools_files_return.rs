//! Files that come back while a server runs (README, "Long-running servers:
//! files that come back"): a database deleted and restored, replaced by a
//! rename or by a file the guards refuse, and a root removed and made
//! again, each seen through `mcp-serve` with the reference backend, with
//! the one stderr line each change gets.

use std::fs;
use std::path::{Path, PathBuf};

use crate::support::mcp::*;
use serde_json::{json, Value};

fn call(s: &mut Server, id: i64, name: &str) -> Value {
    call_with(s, id, name, json!({}))
}

fn call_with(s: &mut Server, id: i64, name: &str, args: Value) -> Value {
    let r = s.request(modern(
        json!(id),
        "tools/call",
        json!({"name": name, "arguments": args}),
    ));
    assert!(r["result"].is_object(), "{r}");
    r["result"].clone()
}

/// A call that must succeed: its envelope.
fn served(s: &mut Server, id: i64, name: &str) -> Value {
    let res = call(s, id, name);
    assert_eq!(res["isError"], false, "{name}: {res}");
    envelope_of(&res)
}

/// A call that must be refused: its error's code and message.
fn refused(s: &mut Server, id: i64, name: &str) -> (String, String) {
    let res = call(s, id, name);
    assert_eq!(res["isError"], true, "{name}: {res}");
    let env = envelope_of(&res);
    (
        env["output"]["error"]["code"].as_str().unwrap().to_string(),
        env["output"]["error"]["message"]
            .as_str()
            .unwrap()
            .to_string(),
    )
}

/// The database as `context` reports it.
fn database(s: &mut Server, id: i64) -> Value {
    served(s, id, "context")["output"]["database"].clone()
}

/// The server's "files changed" lines, once there are `n` of them.
fn change_lines(s: &Server, n: usize) -> Vec<String> {
    let text = s.stderr_when(&format!("{n} files-changed lines"), |t| {
        t.lines()
            .filter(|l| l.contains(": files changed: "))
            .count()
            >= n
    });
    text.lines()
        .filter(|l| l.contains(": files changed: "))
        .map(str::to_string)
        .collect()
}

/// The workspace (root and home) and its database, canonical.
fn paths(s: &Server) -> (PathBuf, PathBuf) {
    let ws = s.ws_path().canonicalize().unwrap();
    let db = ws.join("data/reachweaver.db");
    (ws, db)
}

fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), &target).unwrap();
        }
    }
}

#[test]
fn a_database_deleted_then_restored_is_served_again_and_version_never_fails() {
    let mut s = Server::start();
    let (_, db) = paths(&s);
    let keep = tempfile::tempdir().unwrap();
    let backup = keep.path().join("reachweaver.db");
    assert_eq!(database(&mut s, 1)["present"], true);

    fs::copy(&db, &backup).unwrap();
    fs::remove_file(&db).unwrap();
    served(&mut s, 2, "version");
    assert_eq!(database(&mut s, 3)["present"], false);
    served(&mut s, 4, "version");
    let lines = change_lines(&s, 1);
    assert_eq!(
        lines,
        vec![format!(
            "reachweaver-mcp: files changed: the database {} is gone; serving from what is there now",
            db.display()
        )]
    );

    // Put back as a copy: another file (inode) under the same name.
    fs::copy(&backup, &db).unwrap();
    served(&mut s, 5, "version");
    let back = database(&mut s, 6);
    assert_eq!(back["present"], true, "{back}");
    assert_eq!(back["drafts"], 12, "{back}");
    assert_eq!(database(&mut s, 7)["present"], true);
    let lines = change_lines(&s, 2);
    assert_eq!(
        lines[1],
        format!(
            "reachweaver-mcp: files changed: the database {} is back; serving from what is there now",
            db.display()
        )
    );
    // One line per change, however many calls follow it.
    assert_eq!(lines.len(), 2, "{lines:?}");
}

#[test]
fn a_database_replaced_by_rename_is_served_on_every_later_call() {
    let mut s = Server::start();
    let (ws, db) = paths(&s);
    assert_eq!(database(&mut s, 1)["drafts"], 12);

    // The replacement has one draft more, written by the backend itself.
    let new = ws.join("data/new.db");
    fs::copy(&db, &new).unwrap();
    let out = std::process::Command::new(reference_bin())
        .arg(format!("--home={}", ws.display()))
        .arg(format!("--db={}", new.display()))
        .args([
            "draft",
            "--format=json",
            "--channel=x",
            "--text=Hello there",
        ])
        .arg(ws.join("campaigns/spring-launch.yaml"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    fs::rename(&new, &db).unwrap();

    for id in 2..6 {
        assert_eq!(database(&mut s, id)["drafts"], 13, "call {id}");
    }
    assert_eq!(
        change_lines(&s, 1),
        vec![format!(
            "reachweaver-mcp: files changed: the database {} was replaced; serving from what is there now",
            db.display()
        )]
    );
}

#[test]
fn a_root_removed_and_made_again_is_served_again() {
    let mut s = Server::start();
    let (ws, db) = paths(&s);
    served(&mut s, 1, "version");

    let keep = tempfile::tempdir().unwrap();
    let old = keep.path().join("ws");
    copy_tree(&ws, &old);
    fs::remove_dir_all(&ws).unwrap();
    for (id, tool) in [(2, "version"), (3, "context")] {
        let (code, message) = refused(&mut s, id, tool);
        assert_eq!(code, "sandbox_failed", "{message}");
        assert!(
            message.contains(&format!("--home {}: no such folder", ws.display())),
            "{message}"
        );
    }
    let gone = &change_lines(&s, 1)[0];
    assert!(
        gone.starts_with(&format!(
            "reachweaver-mcp: files changed: the root {} is gone, the database {} is gone",
            ws.display(),
            db.display()
        )),
        "{gone}"
    );
    assert!(
        gone.ends_with(&format!(
            "; every tool is refused until it is fixed: --home {}: no such folder",
            ws.display()
        )),
        "{gone}"
    );

    copy_tree(&old, &ws);
    served(&mut s, 4, "version");
    assert_eq!(database(&mut s, 5)["drafts"], 12);
    let lines = change_lines(&s, 2);
    assert!(
        lines[1].starts_with(&format!(
            "reachweaver-mcp: files changed: the root {} is back",
            ws.display()
        )),
        "{lines:?}"
    );
    assert!(
        lines[1].ends_with("; serving from what is there now"),
        "{lines:?}"
    );
    assert_eq!(lines.len(), 2, "{lines:?}");
}

/// A run that could swap the database (a draft, or anything else) still
/// cannot widen a grant: the replacement passes the start-up guards or is
/// refused with the guard's reason, and `version`, which reads no owner
/// file, still runs.
#[test]
fn a_database_replaced_by_a_link_is_refused_with_the_guards_reason() {
    let mut s = Server::start_with(Opts {
        extra_serve_args: vec!["--allow-drafts".into()],
        own_db: true,
        ..Opts::default()
    });
    let (ws, db) = paths(&s);
    fs::write(ws.join(".env"), "API_TOKEN=not-for-runs\n").unwrap();
    let outside = tempfile::tempdir().unwrap();
    let elsewhere = outside.path().join("other.db");
    fs::copy(&db, &elsewhere).unwrap();
    let outside_before = fs::read(&elsewhere).unwrap();
    assert_eq!(database(&mut s, 1)["present"], true);

    // A symbolic link to a file outside the home, renamed over it (made
    // while the database is there, so it can't be given its inode number).
    let swap = ws.join("data/swap");
    std::os::unix::fs::symlink(&elsewhere, &swap).unwrap();
    fs::rename(&swap, &db).unwrap();
    served(&mut s, 2, "version");
    let (code, message) = refused(&mut s, 3, "context");
    assert_eq!(code, "sandbox_failed", "{message}");
    let reason = format!(
        "--db {}: is a symbolic link; name the file it points to",
        db.display()
    );
    assert!(
        message.contains(&format!(
            "the database was replaced by a file the server refuses: {reason}"
        )),
        "{message}"
    );
    assert_eq!(
        change_lines(&s, 1),
        vec![format!(
            "reachweaver-mcp: files changed: the database {} was replaced; the database is not \
             granted: {reason}; tools other than `version` are refused until it is fixed",
            db.display()
        )]
    );
    served(&mut s, 4, "version");
    // Nor may a draft write through the link.
    let draft = call_with(
        &mut s,
        40,
        "draft",
        json!({"campaign": "campaigns/spring-launch.yaml", "channel": "mastodon", "text": "A calm note."}),
    );
    assert_eq!(draft["isError"], true, "{draft}");
    let env = envelope_of(&draft);
    assert_eq!(env["output"]["error"]["code"], "sandbox_failed", "{env}");
    assert!(env.to_string().contains(&reason), "{env}");
    assert!(
        fs::read(&elsewhere).unwrap() == outside_before,
        "the file outside the home is untouched"
    );

    // Another name (a hard link) of a file a protected pattern covers.
    fs::hard_link(ws.join(".env"), &swap).unwrap();
    fs::rename(&swap, &db).unwrap();
    let (code, message) = refused(&mut s, 5, "context");
    assert_eq!(code, "sandbox_failed", "{message}");
    assert!(
        message.contains(&format!(
            "--db {}: refused: it has 2 names (hard links)",
            db.display()
        )),
        "{message}"
    );
    served(&mut s, 6, "version");
    assert_eq!(change_lines(&s, 2).len(), 2);
}

/// A database replaced by another name (a hard link) of a credential that
/// lies outside the root and the home, which no protected pattern there
/// covers: a fixed file with two names is refused, by the same lookup that
/// would pin it.
#[test]
fn a_database_replaced_by_a_hard_link_to_a_file_outside_is_refused() {
    let mut s = Server::start();
    let (ws, db) = paths(&s);
    let outside = tempfile::tempdir().unwrap();
    let netrc = outside.path().join("netrc");
    fs::write(&netrc, "machine example.org login owner password hunter2\n").unwrap();
    assert_eq!(database(&mut s, 1)["present"], true);

    let swap = ws.join("data/swap");
    fs::hard_link(&netrc, &swap).unwrap();
    fs::rename(&swap, &db).unwrap();
    let (code, message) = refused(&mut s, 2, "context");
    assert_eq!(code, "sandbox_failed", "{message}");
    assert!(
        message.contains(&format!(
            "the database was replaced by a file the server refuses: the backend's catalog field \
             paths.db {}: refused: it has 2 names (hard links)",
            db.display()
        )),
        "{message}"
    );
    served(&mut s, 3, "version");
    assert_eq!(
        fs::read_to_string(&netrc).unwrap(),
        "machine example.org login owner password hunter2\n"
    );
}

/// A file change while a run is in flight: the next call is served from a
/// fresh sandbox helper, and the run already going finishes on the old
/// one, with its own answer (it used to be killed with the old helper and
/// reported as the backend's death by signal 9).
#[test]
fn a_run_in_flight_finishes_on_its_own_helper_when_a_file_changes() {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;

    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().canonicalize().unwrap();
    let accounts = ws.join("accounts.yaml");
    fs::write(&accounts, "channels: []\n").unwrap();
    let gate = ws.join("gate");
    let c = std::ffi::CString::new(gate.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: mkfifo with a NUL-terminated path we own.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);

    let mut cmd = std::process::Command::new(server_bin());
    cmd.arg(format!(
        "--backend={}",
        crate::support::fixture("gate-backend").display()
    ))
    .arg(format!("--home={}", ws.display()))
    .arg(format!("--accounts={}", accounts.display()))
    .args(["mcp-serve", "--max-concurrent-calls=2"])
    .current_dir(&ws);
    let mut s = Server::spawn(cmd);
    s.send(&modern(
        json!(1),
        "tools/call",
        json!({"name": "wait_gate", "arguments": {}}),
    ));
    // The run is in flight once it holds the gate open for reading: only
    // then does a non-blocking open for writing succeed.
    let mut tries = 0;
    let mut writer = loop {
        match fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&gate)
        {
            Ok(f) => break f,
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) && tries < 6000 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(e) => panic!("the run never reached the gate: {e}"),
        }
    };

    // The owner saves the accounts file: same content, a new file.
    let saved = ws.join("accounts.yaml.new");
    fs::write(&saved, "channels: []\n").unwrap();
    fs::rename(&saved, &accounts).unwrap();
    let quick = call(&mut s, 2, "quick");
    assert_eq!(quick["isError"], false, "{quick}");
    assert_eq!(change_lines(&s, 1).len(), 1);

    writer.write_all(b"open\n").unwrap();
    drop(writer);
    let first = s.recv_id(&json!(1));
    let result = &first["result"];
    assert_eq!(result["isError"], false, "{first}");
    assert_eq!(envelope_of(result)["output"]["gate"], "open", "{first}");
}
