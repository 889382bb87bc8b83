//! 10,000 tool calls through one `mcp-serve` process, four in flight, then
//! about a hundred faulty ones (crashes, floods, time-outs, daemons), and
//! after each phase the server must look as it did after start-up: no
//! zombie children, the same open descriptors and threads, no per-run temp
//! folder left.

use std::fs;
use std::time::{Duration, Instant};

use crate::support::faults::*;
use crate::support::mcp::modern;
use serde_json::json;

const CALLS: usize = 10_000;
const IN_FLIGHT: usize = 4;
/// Descriptors may differ by a few (a pipe being closed as we look).
const FD_SLACK: usize = 2;
/// Rounds of the faulty calls after the quick ones.
const FAULT_ROUNDS: usize = 12;
/// Calls that hang until the time limit.
const HANGS: usize = 4;

fn call(id: usize) -> serde_json::Value {
    modern(
        json!(id),
        "tools/call",
        json!({"name": "quick", "arguments": {}}),
    )
}

#[test]
fn ten_thousand_calls_leave_nothing_behind() {
    let mut f = Faulty::start(&[
        "--max-calls-per-minute",
        "1000000",
        "--max-concurrent-calls",
        "4",
        "--call-timeout",
        "2",
    ]);
    let pid = f.server.pid();
    let before: Vec<String> = fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    f.ping();
    // One call first, so whatever the first call sets up once is in the baseline.
    f.call(json!("warm"), "quick", json!({}));
    // No more than after start-up: the baseline may still count the warm
    // call's worker, which ends a moment after its log line.
    let settle = |what: &str, target: usize, now: &dyn Fn() -> usize| {
        wait_for(Duration::from_secs(3), || now() <= target)
            .unwrap_or_else(|| panic!("{what}: {} now, {target} after start-up", now()));
    };
    // The warm call is over, its descriptors closed, once its log line is
    // out (written after the answer).
    f.server.stderr_when("the warm call's log line", |l| {
        l.contains("call tool=quick ")
    });
    let fds0 = fd_count(pid);
    let threads0 = thread_count(pid);

    let t = Instant::now();
    let mut sent = 0;
    let mut done = 0;
    while sent < IN_FLIGHT {
        f.server.send(&call(sent));
        sent += 1;
    }
    let mut peak_threads = 0;
    while done < CALLS {
        let r = f.server.recv();
        let envelope = &r["result"]["structuredContent"];
        assert_eq!(
            envelope,
            &json!({"exit_code": 0, "output": {"ok": true}}),
            "call {} answered {r}",
            r["id"]
        );
        done += 1;
        if sent < CALLS {
            f.server.send(&call(sent));
            sent += 1;
        }
        if done % 1000 == 0 {
            peak_threads = peak_threads.max(thread_count(pid));
        }
    }
    let took = t.elapsed();
    eprintln!(
        "{CALLS} calls, {IN_FLIGHT} in flight: {:.1} s, {:.0} calls/s, {:.2} ms per call; peak threads {peak_threads}",
        took.as_secs_f64(),
        CALLS as f64 / took.as_secs_f64(),
        took.as_secs_f64() * 1000.0 / CALLS as f64
    );

    // Workers and reader threads end a moment after their answer is queued.
    settle("threads", threads0, &|| thread_count(pid));
    assert!(
        zombie_children(pid).is_empty(),
        "zombie children of the server: {:?}",
        zombie_children(pid)
    );
    let fds = fd_count(pid);
    assert!(
        fds.abs_diff(fds0) <= FD_SLACK,
        "open descriptors: {fds} now, {fds0} after start-up"
    );
    f.assert_no_leftover_tmp();
    // Each run's TMPDIR is a tmpfs of its own mount namespace, so the server
    // makes nothing in the host's temp folder: no run-folder lock (which it
    // takes only to make a host folder, where runs have no mount namespace)
    // and no run folder.
    let tokens: Vec<String> = fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .flatten()
        .filter_map(|e| fs::read_link(e.path()).ok())
        .filter_map(|p| {
            let name = p.file_name()?.to_str()?.to_string();
            Some(
                name.strip_prefix("reachweaver-srv-")?
                    .strip_suffix(".lock")?
                    .to_string(),
            )
        })
        .collect();
    assert!(
        tokens.is_empty(),
        "the server made a host run folder: {tokens:?}"
    );
    let stray: Vec<String> = fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("reachweaver-run-") && !before.contains(n))
        // Other tests' servers run beside this one and may make run folders
        // in the shared temp folder; each is named after the lock file its
        // server holds, so one whose lock another process holds is theirs.
        .filter(|n| !lock_held_by_another(n, pid))
        .collect();
    assert!(stray.is_empty(), "per-run temp folders left: {stray:?}");

    // Then faulty calls of every kind, which take the kill and time-out paths.
    let m = f.marker("leak");
    let faults = [
        ("crash", json!({"signal": "segv"})),
        ("crash", json!({"signal": "abrt"})),
        ("flood", json!({"marker": m})),
        ("garbage", json!({})),
        ("not_utf8", json!({})),
        ("exit_early", json!({})),
        ("daemon", json!({"marker": m})),
        ("stderr_flood", json!({})),
    ];
    let mut fault_calls: Vec<serde_json::Value> = (0..FAULT_ROUNDS)
        .flat_map(|round| {
            faults.iter().enumerate().map(move |(i, (tool, args))| {
                modern(
                    json!(format!("fault-{round}-{i}")),
                    "tools/call",
                    json!({"name": tool, "arguments": args}),
                )
            })
        })
        .collect();
    for i in 0..HANGS {
        fault_calls.push(modern(
            json!(format!("hang-{i}")),
            "tools/call",
            json!({"name": "hang", "arguments": {"marker": m}}),
        ));
    }
    let total = fault_calls.len();
    let mut pending = fault_calls.into_iter();
    for c in pending.by_ref().take(IN_FLIGHT) {
        f.server.send(&c);
    }
    for _ in 0..total {
        let r = f.server.recv();
        assert!(
            r["result"]["structuredContent"]["exit_code"].is_i64(),
            "{r}"
        );
        if let Some(c) = pending.next() {
            f.server.send(&c);
        }
    }
    assert_gone(&m);
    settle("threads after faults", threads0, &|| thread_count(pid));
    assert!(zombie_children(pid).is_empty(), "zombies after faults");
    let fds = fd_count(pid);
    assert!(
        fds.abs_diff(fds0) <= FD_SLACK,
        "open descriptors after faults: {fds} now, {fds0} after start-up"
    );
    f.assert_no_leftover_tmp();

    f.ping();
    let log = f.server.stderr_when("a log line per quick call", |l| {
        l.matches("call tool=quick exit=0").count() > CALLS
    });
    assert_eq!(
        log.matches("call tool=quick exit=0").count(),
        CALLS + 1,
        "one log line per call"
    );
}

/// Whether the server lock that names run folder `run` (`reachweaver-run-TOKEN-…`
/// is made under `reachweaver-srv-TOKEN.lock`) is held open by a process other than `ours`.
fn lock_held_by_another(run: &str, ours: u32) -> bool {
    let Some(token) = run
        .strip_prefix("reachweaver-run-")
        .and_then(|r| r.split('-').next())
    else {
        return false;
    };
    let lock = std::env::temp_dir().join(format!("reachweaver-srv-{token}.lock"));
    let Ok(procs) = fs::read_dir("/proc") else {
        return false;
    };
    procs.flatten().any(|p| {
        let Some(pid) = p.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            return false;
        };
        pid != ours
            && fs::read_dir(p.path().join("fd")).is_ok_and(|fds| {
                fds.flatten()
                    .any(|fd| fs::read_link(fd.path()).is_ok_and(|t| t == lock))
            })
    })
}
