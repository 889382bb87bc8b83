//! No process outlives its call and no temp folder is left: killing the
//! server kills the run, a daemon the backend leaves behind dies when the
//! call ends, and the run's temp folder lives in its own mount namespace.

use crate::support::mcp::HANG_GUARD;
use std::process::Stdio;
use std::time::Duration;

use crate::support::sandbox::{
    kill_marker, output_within, pids_with_marker, run_folders_of, text, wait_until, Who, World,
};

fn killing_the_server_kills_the_run(who: Who) {
    let w = World::new();
    let root = w.folder("root");
    let marker = crate::support::sandbox::marker("parent");
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
    let mut server = crate::support::sandbox::spawn(&mut cmd);
    // Three shells carry the marker: the run, the one in its own session,
    // and the one it started.
    let started = wait_until(HANG_GUARD, || {
        crate::support::sandbox::pids_running("/bin/sh", &marker).len() >= 3
    });
    if !started {
        let _ = server.kill();
        kill_marker(&marker);
        panic!("the run never started: {:?}", pids_with_marker(&marker));
    }
    // SIGKILL: the server gets no chance to clean up after itself.
    server.kill().unwrap();
    server.wait().unwrap();
    let gone = wait_until(HANG_GUARD, || pids_with_marker(&marker).is_empty());
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
    let marker = crate::support::sandbox::marker("daemon");
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
    let gone = wait_until(HANG_GUARD, || pids_with_marker(&marker).is_empty());
    kill_marker(&marker);
    assert!(gone, "the daemon outlived its call");
}

/// The run's TMPDIR is a tmpfs of its own mount namespace: `/tmp` inside,
/// nothing on the host, and gone with the run, whatever it left there.
fn the_temp_folder_is_the_runs_own_and_goes_with_it(who: Who) {
    let w = World::new();
    let root = w.folder("root");
    let before = host_temp_entries();
    let mut cmd = w.cmd(who, &root);
    // Files, a folder made unreadable, and a marker the next run looks for.
    cmd.args([
        "sandbox",
        "run",
        "--",
        "/bin/sh",
        "-c",
        "echo \"$TMPDIR\"; mkdir -p \"$TMPDIR/a/b\"; echo x > \"$TMPDIR/a/b/f\"; mkdir -m 0 \"$TMPDIR/locked\"; echo here > \"$TMPDIR/marker\"",
    ])
    .stdout(Stdio::piped());
    let out = output_within(cmd, Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), "/tmp/run");
    let mut next = w.cmd(who, &root);
    next.args([
        "sandbox",
        "run",
        "--",
        "/bin/sh",
        "-c",
        "test -e \"$TMPDIR/marker\" && echo leaked || echo fresh",
    ])
    .stdout(Stdio::piped());
    let out = output_within(next, Duration::from_secs(30));
    assert_eq!(text(&out.stdout).trim(), "fresh", "{}", text(&out.stderr));
    let after = host_temp_entries();
    let new: Vec<&String> = after
        .iter()
        .filter(|e| !before.contains(e) && e.starts_with("reachweaver-run-"))
        .collect();
    assert!(new.is_empty(), "runs left folders on the host: {new:?}");
}

#[test]
fn the_temp_folder_is_the_runs_own_and_goes_with_it_as_me() {
    the_temp_folder_is_the_runs_own_and_goes_with_it(Who::Me);
}

#[test]
fn the_temp_folder_is_the_runs_own_and_goes_with_it_for_an_unprivileged_user() {
    the_temp_folder_is_the_runs_own_and_goes_with_it(Who::Unprivileged);
}

fn host_temp_entries() -> Vec<String> {
    let tmp = std::fs::canonicalize(std::env::temp_dir()).unwrap();
    std::fs::read_dir(tmp)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

/// A run that builds a folder chain deeper than any recursive removal can
/// take (the host once crashed removing one) ends like any other, and the
/// server answers the next run.
#[test]
fn a_deep_folder_chain_in_tmpdir_cannot_hurt_the_server() {
    let w = World::new();
    let root = w.folder("root");
    let mut cmd = w.cmd(Who::Me, &root);
    cmd.args([
        "sandbox",
        "run",
        "--",
        "/usr/bin/python3",
        "-c",
        "import os\nos.chdir(os.environ['TMPDIR'])\nfor _ in range(1500):\n    os.mkdir('d'); os.chdir('d')\nopen('bottom', 'w').write('x')\nprint('deep')",
    ])
    .stdout(Stdio::piped());
    let out = output_within(cmd, Duration::from_secs(60));
    assert_eq!(text(&out.stdout).trim(), "deep", "{}", text(&out.stderr));
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn a_killed_server_leaves_no_temp_folder_to_sweep() {
    let w = World::new();
    let root = w.folder("root");
    let marker = crate::support::sandbox::marker("sweep");
    let mut cmd = w.cmd(Who::Me, &root);
    cmd.args([
        "sandbox",
        "run",
        "--",
        "/bin/sh",
        "-c",
        "echo x > \"$TMPDIR/f\"; sleep 300; true",
        &marker,
    ])
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    let mut server = crate::support::sandbox::spawn(&mut cmd);
    let pid = server.id();
    let started = wait_until(HANG_GUARD, || {
        !crate::support::sandbox::pids_running("/bin/sh", &marker).is_empty()
    });
    // While the run lives, the host has no folder of it at all.
    let during = run_folders_of(pid);
    server.kill().unwrap();
    server.wait().unwrap();
    assert!(started, "the run never started");
    assert!(during.is_empty(), "{during:?}");
    let gone = wait_until(HANG_GUARD, || pids_with_marker(&marker).is_empty());
    kill_marker(&marker);
    assert!(gone, "the run outlived its server");
}

#[test]
fn a_normal_run_leaves_no_temp_folder() {
    let w = World::new();
    let root = w.folder("root");
    let mut cmd = w.cmd(Who::Me, &root);
    cmd.args(["sandbox", "run", "--", "/bin/sh", "-c", "exit 0"]);
    cmd.stdout(Stdio::null()).stderr(Stdio::null());
    let mut child = crate::support::sandbox::spawn(&mut cmd);
    let pid = child.id();
    assert!(child.wait().unwrap().success());
    assert!(run_folders_of(pid).is_empty(), "{:?}", run_folders_of(pid));
}
