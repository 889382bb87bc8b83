//! No process outlives its call and no temp folder is left: killing the
//! server kills the run, a daemon the backend leaves behind dies when the
//! call ends, and the private temp folder is removed.

mod sandbox_common;

use std::process::Stdio;
use std::time::Duration;

use sandbox_common::{
    kill_marker, output_within, pids_with_marker, run_folders_of, text, wait_until, Who, World,
};

fn killing_the_server_kills_the_run(who: Who) {
    let w = World::new();
    let root = w.folder("root");
    let marker = sandbox_common::marker("parent");
    let mut cmd = w.cmd(who, &root);
    // The run starts a grandchild in a session of its own, the way a daemon
    // would, so the process group alone could not reach it.
    cmd.args([
        "sandbox",
        "run",
        "--",
        "/bin/sh",
        "-c",
        "setsid /bin/sh -c 'sleep 300; true' \"$0\" & /bin/sh -c 'sleep 300; true' \"$0\"",
        &marker,
    ])
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    let mut server = sandbox_common::spawn(&mut cmd);
    // Three shells carry the marker: the run, the one in its own session,
    // and the one it started.
    let started = wait_until(Duration::from_secs(10), || {
        sandbox_common::pids_running("/bin/sh", &marker).len() >= 3
    });
    if !started {
        let _ = server.kill();
        kill_marker(&marker);
        panic!("the run never started: {:?}", pids_with_marker(&marker));
    }
    // SIGKILL: the server gets no chance to clean up after itself.
    server.kill().unwrap();
    server.wait().unwrap();
    let gone = wait_until(Duration::from_secs(5), || {
        pids_with_marker(&marker).is_empty()
    });
    let left = pids_with_marker(&marker);
    kill_marker(&marker);
    assert!(gone, "processes outlived the killed server: {left:?}");
}

#[test]
fn killing_the_server_kills_the_whole_run() {
    killing_the_server_kills_the_run(Who::Me);
}

#[test]
fn killing_the_server_kills_the_whole_run_for_an_unprivileged_user() {
    killing_the_server_kills_the_run(Who::Unprivileged);
}

#[test]
fn a_daemon_dies_when_its_call_ends() {
    let w = World::new();
    let root = w.folder("root");
    let marker = sandbox_common::marker("daemon");
    let mut cmd = w.cmd(Who::Me, &root);
    cmd.args([
        "sandbox",
        "run",
        "--",
        "/usr/bin/python3",
        "-c",
        "import os, sys, time\n\
         if os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        os.closerange(0, 3)\n        time.sleep(300)\n    os._exit(0)\n\
         time.sleep(0.2)\nprint('left a daemon')",
        &marker,
    ]);
    let out = output_within(cmd, Duration::from_secs(30));
    assert_eq!(
        text(&out.stdout),
        "left a daemon\n",
        "{}",
        text(&out.stderr)
    );
    let gone = wait_until(Duration::from_secs(3), || {
        pids_with_marker(&marker).is_empty()
    });
    kill_marker(&marker);
    assert!(gone, "the daemon outlived its call");
}

#[test]
fn the_private_temp_folder_is_removed_after_the_run() {
    let w = World::new();
    let root = w.folder("root");
    let mut cmd = w.cmd(Who::Me, &root);
    // The run leaves files and a folder it made unreadable in TMPDIR, and
    // prints the folder's name.
    cmd.args([
        "sandbox",
        "run",
        "--",
        "/bin/sh",
        "-c",
        "echo \"$TMPDIR\"; mkdir -p \"$TMPDIR/a/b\"; echo x > \"$TMPDIR/a/b/f\"; mkdir -m 0 \"$TMPDIR/locked\"",
    ])
    .stdout(Stdio::piped());
    let out = output_within(cmd, Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let tmpdir = text(&out.stdout).trim().to_string();
    assert!(tmpdir.contains("reachweaver-run-"), "{tmpdir}");
    assert!(
        !std::path::Path::new(&tmpdir).exists(),
        "{tmpdir} was left behind"
    );
}

#[test]
fn a_killed_servers_temp_folder_is_swept_by_the_next_start() {
    let w = World::new();
    let root = w.folder("root");
    let marker = sandbox_common::marker("sweep");
    let mut cmd = w.cmd(Who::Me, &root);
    cmd.args([
        "sandbox",
        "run",
        "--",
        "/bin/sh",
        "-c",
        "sleep 300; true",
        &marker,
    ])
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    let mut server = sandbox_common::spawn(&mut cmd);
    let pid = server.id();
    let started = wait_until(Duration::from_secs(10), || {
        !sandbox_common::pids_running("/bin/sh", &marker).is_empty()
    });
    // While the server lives, its run has exactly one folder.
    let during = run_folders_of(pid);
    server.kill().unwrap();
    server.wait().unwrap();
    assert!(started, "the run never started");
    assert_eq!(during.len(), 1, "{during:?}");
    let gone = wait_until(Duration::from_secs(5), || {
        pids_with_marker(&marker).is_empty()
    });
    assert!(gone, "the run outlived its server");
    // Killed with SIGKILL, the server could not remove its folder; the next
    // start does (another test's start may already have).
    let mut next = w.cmd(Who::Me, &root);
    next.args(["sandbox", "run", "--", "/bin/true"]);
    assert!(output_within(next, Duration::from_secs(30))
        .status
        .success());
    assert!(!during[0].exists(), "{} was not swept", during[0].display());
}

#[test]
fn a_normal_run_leaves_no_temp_folder() {
    let w = World::new();
    let root = w.folder("root");
    let mut cmd = w.cmd(Who::Me, &root);
    cmd.args(["sandbox", "run", "--", "/bin/sh", "-c", "exit 0"]);
    cmd.stdout(Stdio::null()).stderr(Stdio::null());
    let mut child = sandbox_common::spawn(&mut cmd);
    let pid = child.id();
    assert!(child.wait().unwrap().success());
    assert!(run_folders_of(pid).is_empty(), "{:?}", run_folders_of(pid));
}
