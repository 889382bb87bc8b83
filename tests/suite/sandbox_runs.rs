//! How the server starts, bounds and ends confined runs, seen from outside
//! the binary: `sandbox run` for a single run, `mcp-serve` on the
//! `run-probe` backend for runs that share one sandbox (and so one zygote).

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::faults::{children_of, pids_with, wait_for, zombie_children};
use crate::support::mcp::{envelope_of, modern, Server, HANG_GUARD};
use crate::support::sandbox::{output_within, text};
use crate::support::{fixture, server_bin};

/// `reachweaver-mcp sandbox run --root ROOT -- ARGV…`.
fn sandbox_run(root: &Path, argv: &[&str]) -> Command {
    let mut c = Command::new(server_bin());
    c.arg("sandbox")
        .arg("run")
        .arg(format!("--root={}", root.display()))
        .arg("--")
        .args(argv)
        .current_dir(root);
    c
}

/// A server on `run-probe`, its root a fresh folder, with `extra` options.
fn probe_server(root: &Path, extra: &[&str]) -> Server {
    let mut cmd = Command::new(server_bin());
    cmd.arg(format!("--backend={}", fixture("run-probe").display()))
        .arg("mcp-serve")
        .arg(format!("--root={}", root.display()))
        .args(extra)
        .current_dir(root);
    Server::spawn(cmd)
}

fn call(id: Value, tool: &str, args: Value) -> Value {
    modern(id, "tools/call", json!({"name": tool, "arguments": args}))
}

/// The sandbox helpers (`reachweaver-mcp-sandbox …`) that are children of `pid`.
fn helpers_of(pid: u32) -> Vec<u32> {
    children_of(pid)
        .into_iter()
        .filter(|&c| {
            std::fs::read(format!("/proc/{c}/cmdline"))
                .unwrap_or_default()
                .starts_with(b"reachweaver-mcp-sandbox\0__sandbox-helper\0@zygote")
        })
        .collect()
}

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

#[test]
fn a_forked_run_holds_no_descriptor_beyond_stdio() {
    let root = tempfile::tempdir().unwrap();
    let out = output_within(
        sandbox_run(
            root.path(),
            &[
                "/usr/bin/python3",
                "-c",
                "import os\n\
                 fds = []\n\
                 for fd in range(3, 1024):\n    \
                     try:\n        os.fstat(fd)\n        fds.append(fd)\n    \
                     except OSError:\n        pass\n\
                 print(os.getpid(), os.getppid(), fds)",
            ],
        ),
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "{out:?}");
    // The backend is pid 2 under its own init, and holds nothing of the
    // zygote's (its control socket, other runs' channels) nor its own
    // status pipe or run channel.
    assert_eq!(text(&out.stdout).trim(), "2 1 []");
}

#[test]
fn concurrent_runs_have_their_own_pid_and_ipc_namespaces() {
    // System V IPC itself is refused by seccomp, so the namespaces are
    // compared by identity: each run's (read from its own proc) differs
    // from the other run's and from the server's.
    let root = tempfile::tempdir().unwrap();
    let mut s = probe_server(root.path(), &["--max-concurrent-calls=2"]);
    s.send(&call(json!("first"), "ns", json!({"seconds": 3})));
    s.send(&call(json!("second"), "ns", json!({"seconds": 0})));
    let a = s.recv();
    let b = s.recv();
    assert_eq!(
        (&a["id"], &b["id"]),
        (&json!("second"), &json!("first")),
        "the second run answers while the first still runs"
    );
    let (a, b) = (envelope_of(&a["result"]), envelope_of(&b["result"]));
    assert_eq!(
        (a["exit_code"].clone(), b["exit_code"].clone()),
        (json!(0), json!(0))
    );
    let (a, b) = (&a["output"], &b["output"]);
    // Each backend is pid 2 under its own init.
    assert_eq!((&a["pid"], &b["pid"]), (&json!(2), &json!(2)));
    let server = s.pid();
    for key in ["ipc", "pidns"] {
        let link = if key == "ipc" { "ipc" } else { "pid" };
        let host = std::fs::read_link(format!("/proc/{server}/ns/{link}")).unwrap();
        let host = host.to_string_lossy();
        assert_ne!(a[key], b[key], "the two runs share a namespace: {a} / {b}");
        assert!(
            a[key].as_str().is_some_and(|n| !n.is_empty() && n != host),
            "{a}"
        );
        assert!(
            b[key].as_str().is_some_and(|n| !n.is_empty() && n != host),
            "{b}"
        );
    }
}

#[test]
fn protected_files_under_the_root_are_empty_in_the_run() {
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join(".env"), "API_TOKEN=do-not-leak\n").unwrap();
    std::fs::create_dir(root.path().join(".ssh")).unwrap();
    std::fs::write(root.path().join(".ssh/id_ed25519"), "PRIVATE\n").unwrap();
    std::fs::write(root.path().join("notes.txt"), "visible\n").unwrap();
    let mut s = probe_server(root.path(), &[]);
    s.send(&call(json!(1), "show", json!({})));
    let e = envelope_of(&s.recv_id(&json!(1))["result"]);
    // The masked file reads empty, the masked folder lists nothing, and
    // the rest of the root is as it is.
    assert_eq!(
        e,
        json!({"exit_code": 0, "output": {"lines": ["visible", "end"]}})
    );
    // On the host nothing changed.
    assert_eq!(
        std::fs::read_to_string(root.path().join(".env")).unwrap(),
        "API_TOKEN=do-not-leak\n"
    );
}

#[test]
fn many_runs_from_many_threads_each_get_their_own_output_and_status() {
    let root = tempfile::tempdir().unwrap();
    let mut s = probe_server(
        root.path(),
        &["--max-concurrent-calls=8", "--max-calls-per-minute=1000"],
    );
    for n in 0..48 {
        s.send(&call(
            json!(n),
            "echo",
            json!({"token": format!("run-{n}"), "code": n % 2}),
        ));
    }
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..48 {
        let m = s.recv();
        let n = m["id"].as_u64().unwrap();
        let e = envelope_of(&m["result"]);
        assert_eq!(
            e,
            json!({"exit_code": n % 2, "output": {"said": format!("run-{n}")}}),
            "call {n}"
        );
        assert!(seen.insert(n), "two answers for call {n}");
    }
}

#[test]
fn a_killed_run_is_reaped_with_its_whole_tree() {
    let root = tempfile::tempdir().unwrap();
    let label = crate::support::faults::marker("killed");
    let mut s = probe_server(root.path(), &["--call-timeout=1"]);
    s.send(&call(
        json!(1),
        "tree",
        json!({"label": label, "seconds": 300}),
    ));
    let e = envelope_of(&s.recv_id(&json!(1))["result"]);
    assert_eq!(e["output"]["error"]["code"], "timeout", "{e}");
    // Killed, waited for, and gone: no process of the tree, no zombie
    // the server forgot to reap.
    assert!(
        wait_for(HANG_GUARD, || pids_with(&label).is_empty()).is_some(),
        "the run's processes outlived it: {:?}",
        pids_with(&label)
    );
    let server = s.pid();
    assert!(
        wait_for(HANG_GUARD, || zombie_children(server).is_empty()).is_some(),
        "unreaped children of the server: {:?}",
        zombie_children(server)
    );
}

#[test]
fn runs_die_with_the_zygote_and_the_next_run_gets_a_new_one() {
    let root = tempfile::tempdir().unwrap();
    let label = crate::support::faults::marker("zygote");
    let mut s = probe_server(root.path(), &[]);
    s.send(&call(
        json!(1),
        "tree",
        json!({"label": label, "seconds": 300}),
    ));
    assert!(
        wait_for(HANG_GUARD, || pids_with(&label).len() >= 3).is_some(),
        "the run never started"
    );
    let zygotes = helpers_of(s.pid());
    assert_eq!(zygotes.len(), 1, "one zygote per server: {zygotes:?}");
    let zygote = zygotes[0];
    // SAFETY: killing the zygote this test's server started.
    unsafe { libc::kill(zygote as libc::pid_t, libc::SIGKILL) };
    let e = envelope_of(&s.recv_id(&json!(1))["result"]);
    assert_eq!(e["output"]["error"]["code"], "backend_failed", "{e}");
    assert!(
        e["output"]["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("signal 9")),
        "{e}"
    );
    assert!(
        wait_for(HANG_GUARD, || pids_with(&label).is_empty()).is_some(),
        "the run outlived its zygote"
    );

    s.send(&call(json!(2), "echo", json!({"token": "again"})));
    let e = envelope_of(&s.recv_id(&json!(2))["result"]);
    assert_eq!(e, json!({"exit_code": 0, "output": {"said": "again"}}));
    let next = helpers_of(s.pid());
    assert_eq!(next.len(), 1, "{next:?}");
    assert_ne!(next[0], zygote);
}

#[test]
fn ending_the_sandbox_stops_its_zygote() {
    let root = tempfile::tempdir().unwrap();
    let mut child = sandbox_run(root.path(), &["/bin/sh", "-c", "sleep 1; exit 7"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut zygotes = Vec::new();
    assert!(
        wait_for(HANG_GUARD, || {
            zygotes = helpers_of(child.id());
            !zygotes.is_empty()
        })
        .is_some(),
        "no zygote under `sandbox run`"
    );
    assert_eq!(child.wait().unwrap().code(), Some(7));
    // The sandbox reaped its zygote before `sandbox run` returned.
    for z in zygotes {
        assert!(!alive(z), "zygote {z} outlived its sandbox");
    }
}

#[test]
fn a_runs_stdin_is_empty() {
    // The server's stdin stays open and silent; the shell reads end of
    // file from /dev/null and exits.
    let root = tempfile::tempdir().unwrap();
    let mut child = sandbox_run(root.path(), &["/bin/sh"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let _stdin = child.stdin.take();
    // A shell reading this open, silent pipe would wait forever.
    assert!(
        wait_for(HANG_GUARD, || child.try_wait().unwrap().is_some()).is_some(),
        "the run waited for input"
    );
    assert!(child.wait().unwrap().success());
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    assert_eq!(out, "");
}

#[test]
fn a_run_gives_back_stdout_stderr_and_exit() {
    let root = tempfile::tempdir().unwrap();
    let out = output_within(
        sandbox_run(
            root.path(),
            &["/bin/sh", "-c", "echo '{}'; echo oops >&2; exit 1"],
        ),
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert_eq!(text(&out.stdout), "{}\n");
    assert_eq!(text(&out.stderr), "oops\n");
}

#[test]
fn output_exactly_at_the_cap_is_fine_and_one_more_byte_is_not() {
    let root = tempfile::tempdir().unwrap();
    let mut s = probe_server(
        root.path(),
        &["--max-output-bytes=2048", "--call-timeout=0"],
    );
    s.send(&call(
        json!(1),
        "spew",
        json!({"bytes": 2048, "seconds": 0}),
    ));
    let e = envelope_of(&s.recv_id(&json!(1))["result"]);
    assert_eq!(e["exit_code"], 0, "{e}");
    assert_eq!(e["output"]["a"].as_str().map(str::len), Some(2048 - 9));
    // The run then sleeps 600 s, with no call timeout: refused as the byte
    // arrives, not when the run ends, is the only way to an answer within
    // the wait (which only guards against a hang).
    s.send(&call(
        json!(2),
        "spew",
        json!({"bytes": 2049, "seconds": 600}),
    ));
    let e = envelope_of(&s.recv_id(&json!(2))["result"]);
    assert_eq!(e["output"]["error"]["code"], "output_too_large", "{e}");
}

#[test]
fn timeout_kills_the_tree() {
    let root = tempfile::tempdir().unwrap();
    let label = crate::support::faults::marker("timeout");
    let mut s = probe_server(root.path(), &["--call-timeout=1"]);
    // The tree sleeps 600 s: its answer is the call timeout's, and its
    // processes go only when they are killed.
    s.send(&call(
        json!(1),
        "tree",
        json!({"label": label, "seconds": 600}),
    ));
    let e = envelope_of(&s.recv_id(&json!(1))["result"]);
    assert_eq!(e["output"]["error"]["code"], "timeout", "{e}");
    assert!(
        wait_for(HANG_GUARD, || pids_with(&label).is_empty()).is_some(),
        "{:?}",
        pids_with(&label)
    );
}

#[test]
fn cancel_stops_the_run_promptly() {
    let root = tempfile::tempdir().unwrap();
    let label = crate::support::faults::marker("cancel");
    let mut s = probe_server(root.path(), &[]);
    // The tree sleeps 600 s: only the cancel ends it within the waits.
    s.send(&call(
        json!(1),
        "tree",
        json!({"label": label, "seconds": 600}),
    ));
    assert!(
        wait_for(HANG_GUARD, || pids_with(&label).len() >= 3).is_some(),
        "the run never started"
    );
    s.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}),
    );
    assert!(
        wait_for(HANG_GUARD, || pids_with(&label).is_empty()).is_some(),
        "the cancelled run still runs: {:?}",
        pids_with(&label)
    );
    // A cancelled request is not answered, not even at the end of input.
    let (status, _) = s.finish();
    assert_eq!(status.code(), Some(0));
    let rest = s.rest_after_exit();
    assert!(rest.is_empty(), "answered after all: {rest:?}");
}

#[test]
fn a_left_behind_process_holding_stdout_does_not_hang_the_call() {
    let root = tempfile::tempdir().unwrap();
    // No call timeout, and the leftover sleeps 600 s holding the run's
    // stdout: a call that waited for that end of file would not be answered
    // within the wait (which only guards against a hang).
    let mut s = probe_server(root.path(), &["--call-timeout=0"]);
    s.send(&call(json!(1), "orphan", json!({})));
    let e = envelope_of(&s.recv_id(&json!(1))["result"]);
    // The leftover is killed with the tree; the answer printed before stands.
    assert_eq!(e, json!({"exit_code": 0, "output": {}}));
}

#[test]
fn a_program_that_cannot_start_fails_the_run_and_nothing_runs() {
    let root = tempfile::tempdir().unwrap();
    let out = output_within(
        sandbox_run(root.path(), &["/no/such/backend"]),
        Duration::from_secs(30),
    );
    assert!(!out.status.success(), "{out:?}");
    assert_eq!(text(&out.stdout), "");
    assert!(
        text(&out.stderr).contains("/no/such/backend"),
        "the error names the program: {}",
        text(&out.stderr)
    );
}
