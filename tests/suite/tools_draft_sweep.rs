//! The clean-up after a `draft` run follows the folder the run wrote in,
//! whatever is put at its path while the run goes on.

use std::fs;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use crate::support::tools::{CallResult, Workspace};
use crate::support::{fixture, server_bin};

fn names(dir: &Path) -> Vec<String> {
    let mut left: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    left
}

#[test]
fn a_database_folder_swapped_for_a_link_during_a_draft_steers_no_removal() {
    let ws = Workspace::new();
    let state = ws.db.parent().unwrap().to_path_buf();
    let gate = state.join("gate");
    let c = std::ffi::CString::new(gate.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid C string.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let victim = tempfile::tempdir().unwrap();
    fs::write(victim.path().join("fresh"), b"v").unwrap();
    fs::create_dir(victim.path().join("sub")).unwrap();
    fs::write(victim.path().join("sub/inner"), b"v").unwrap();

    let mut cmd = std::process::Command::new(server_bin());
    cmd.arg("--backend")
        .arg(fixture("swap-backend"))
        .arg("--db")
        .arg(&ws.db)
        .current_dir(&ws.root)
        .args(["call", "draft", "--args-json", r#"{"note": "n"}"#])
        .args(["--allow-drafts", "--sandbox", "best-effort", "--root"])
        .arg(&ws.root)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = cmd.spawn().expect("run reachweaver-mcp");
    let (tx, rx) = std::sync::mpsc::channel();
    let gate_for_exit = gate.clone();
    let waiter = std::thread::spawn(move || {
        let out = child.wait_with_output().expect("wait for reachweaver-mcp");
        tx.send(out).unwrap();
        // A call that ended without reaching the gate must not leave the
        // test waiting on it: opening it to read lets the writer's open end.
        let _ = fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&gate_for_exit);
    });
    // Opening the pipe to write waits for the run to open it to read, which
    // it does once its stray file is made.
    let mut w = fs::OpenOptions::new().write(true).open(&gate).unwrap();
    if let Ok(out) = rx.try_recv() {
        let r = CallResult::from(out);
        panic!(
            "the call ended before its run reached the gate: {} {}",
            r.stdout, r.stderr
        );
    }
    let real = state.with_extension("real");
    fs::rename(&state, &real).unwrap();
    std::os::unix::fs::symlink(victim.path(), &state).unwrap();
    w.write_all(b"open\n").unwrap();
    drop(w);
    let r = CallResult::from(rx.recv().unwrap());
    waiter.join().unwrap();

    assert_eq!(r.code, 0, "{} {}", r.stdout, r.stderr);
    assert_eq!(r.envelope["output"]["gate"], "open", "{}", r.stdout);
    // Nothing was removed where the link points, and nothing beneath.
    assert_eq!(names(victim.path()), ["fresh", "sub"]);
    assert!(victim.path().join("sub/inner").exists());
    // The stray file went from the folder the run wrote in.
    assert_eq!(names(&real), ["gate", "shelf.db"]);
}
