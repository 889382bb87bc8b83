//! The layer matrix: `sandbox probe --without LAYER` for each layer in turn.
//!
//! With one layer off, every attempt must end exactly as the probe's holder
//! table predicts: blocked when another layer still holds it, through when
//! that layer held it alone. This tests the table in `sandbox/LAYERS.md`
//! (each layer really does what it claims, and no promise silently rests on
//! a layer nobody listed). The network promise must survive any single
//! layer being off.

use std::time::Duration;

use crate::support::sandbox::{output_within, text, Who, World};
use serde_json::Value;

/// Attempts that send anything to a listener on this machine.
const NETWORK: &[&str] = &[
    "tcp-connect-127.0.0.1",
    "tcp-connect-::1",
    "udp-send-127.0.0.1",
    "mptcp-connect-127.0.0.1",
    "connect-with-swapped-address",
    "abstract-unix-connect",
];

/// The matrix as whoever runs the tests (root in CI) and as an
/// unprivileged user, whose runs differ (`RLIMIT_NPROC` applies, the PID
/// namespace's `vm.memfd_noexec` can't be set): each prediction must hold
/// for both.
fn probe_without(layer: &str) -> Vec<Value> {
    [Who::Me, Who::Unprivileged]
        .into_iter()
        .map(|who| probe_without_as(layer, who))
        .collect()
}

fn probe_without_as(layer: &str, who: Who) -> Value {
    let w = World::new();
    let mut cmd = w.cmd(who, w.path());
    cmd.args(["sandbox", "probe", "--json", "--without", layer]);
    let out = output_within(cmd, Duration::from_secs(400));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON ({e}): {}\n{}",
            text(&out.stdout),
            text(&out.stderr)
        )
    });
    assert_eq!(report["without"], layer);
    assert!(
        report["layers"]
            .as_str()
            .unwrap()
            .contains(&format!("SWITCHED OFF: {layer}")),
        "the layers line must say loudly what is off: {}",
        report["layers"]
    );
    // Something gets through with a layer off, so the probe exits 1,
    // except for netns, whose promises are all held twice.
    let expected_exit = if report["escaped"] == 0 { 0 } else { 1 };
    assert_eq!(out.status.code(), Some(expected_exit), "{report:#}");
    report
}

/// Every attempt ends as predicted, for every user; returns the names that
/// got through for any of them.
fn check_prediction(reports: &[Value]) -> Vec<String> {
    let mut through: Vec<String> = reports.iter().flat_map(check_one).collect();
    through.sort();
    through.dedup();
    through
}

fn check_one(report: &Value) -> Vec<String> {
    let mut through = Vec::new();
    for a in report["attempts"].as_array().unwrap() {
        let name = a["name"].as_str().unwrap().to_string();
        let verdict = a["verdict"].as_str().unwrap();
        assert_ne!(verdict, "BROKEN", "{a}");
        assert_ne!(verdict, "FAILED", "{a}");
        if verdict == "not applicable" {
            // The kernel itself lacks it: no prediction to check.
            assert_eq!(name, "x32-syscall", "{a}");
            continue;
        }
        if verdict == "unproven" {
            // Only a privileged control can open by handle; no prediction
            // to check.
            assert!(
                name == "open-by-handle-outside" && report["uid"] != 0,
                "{a}"
            );
            continue;
        }
        let got = match verdict {
            "ESCAPED" => "escaped",
            "allowed" => "allowed",
            _ => "blocked",
        };
        assert_eq!(got, a["predicted"].as_str().unwrap(), "{name}: {a}");
        if verdict == "ESCAPED" {
            through.push(name);
        }
    }
    for n in NETWORK {
        assert!(
            !through.iter().any(|t| t == n),
            "network promise broken with a layer off: {n}"
        );
    }
    through
}

fn abi(reports: &[Value]) -> i64 {
    // With Landlock off the report has no ABI; ask a full probe's status.
    reports[0]["landlock_abi"].as_i64().unwrap_or(0)
}

/// Held by seccomp alone, and why that is acceptable: sockets that can
/// only be made in the run's empty network namespace or between its own
/// processes (and vsock, which no namespace separates: seccomp refuses
/// `socket()` for every family), kernel interfaces (io_uring, clone3 without namespace
/// flags), a terminal a tool run never has (its stdin is /dev/null), the
/// filter's own presence, memory in memfds (a per-run cgroup would be
/// the second layer; the machines this is built on have none), disk
/// reserved past the file-size limit (only `fallocate`'s mode 0 is
/// bounded by it; the database file is a draft's to write), and inotify
/// on the root every run shares (the same inodes in every run: only
/// refusing the call keeps runs from watching each other).
const SECCOMP_ALONE: &[&str] = &[
    "socket-netlink",
    "socket-vsock",
    "socketpair-dgram",
    "socketpair-seqpacket",
    "io-uring-setup",
    "clone3",
    "tiocsti-terminal",
    "seccomp-off",
    "memfd-outside-rlimit-as",
    "draft-fallocate-keep-size",
    "inotify-shared-root",
    // For an unprivileged server only: root's runs also get the PID
    // namespace's `vm.memfd_noexec`, which an unprivileged user can't set.
    "memfd-exec",
];

/// Held by the mount layer alone: what Landlock does not mediate (stat,
/// readlink, getxattr, /proc), the temp folder's caps and `noexec`, and
/// the entries beside a draft's database.
const MOUNTNS_ALONE: &[&str] = &[
    "draft-db-replaced-by-symlink",
    "draft-rename-beside-db",
    "draft-replace-beside-db",
    "draft-write-beside-db",
    "stat-through-planted-symlink",
    "tmpdir-size-cap",
    "tmpdir-inode-cap",
    "tmpdir-name-carries-server-pid",
    "getxattr-outside-file",
    "stat-etc-hostname",
    "stat-outside-file",
    "stat-server-home",
    "readlink-outside",
    "stat-proc-server",
    "exec-via-loader-from-tmpdir",
    "mmap-exec-tmpdir",
];

#[test]
fn without_landlock_every_file_network_and_process_promise_holds() {
    let r = probe_without("landlock");
    let through = check_prediction(&r);
    assert!(through.is_empty(), "{through:?}");
}

#[test]
fn without_seccomp_no_host_file_socket_or_process_gets_through() {
    let r = probe_without("seccomp");
    let through = check_prediction(&r);
    for t in &through {
        assert!(
            SECCOMP_ALONE.contains(&t.as_str()),
            "{t} must be held by another layer too: {through:?}"
        );
    }
    for shown in [
        "seccomp-off",
        "draft-fallocate-keep-size",
        "inotify-shared-root",
    ] {
        assert!(through.contains(&shown.to_string()), "{through:?}");
    }
}

#[test]
fn without_the_mount_namespace_only_what_it_alone_holds_gets_through() {
    let r = probe_without("mountns");
    let through = check_prediction(&r);
    for t in &through {
        assert!(
            MOUNTNS_ALONE.contains(&t.as_str()),
            "{t} must be held by another layer too: {through:?}"
        );
    }
    // The classes it alone holds do show.
    for shown in [
        "stat-outside-file",
        "tmpdir-size-cap",
        "draft-rename-beside-db",
    ] {
        assert!(through.contains(&shown.to_string()), "{through:?}");
    }
}

/// Without PID namespaces runs take the re-executed helper, as on machines
/// that have none: no minimal root either, so what the mount layer alone
/// holds shows, and what only the PID namespace's `pid_max` holds for root,
/// whom `RLIMIT_NPROC` exempts: a fork bomb. A daemon outliving its call is
/// still held: the helper is then the run's child subreaper and kills every
/// process the run leaves.
#[test]
fn without_pid_namespaces_the_reexec_helper_holds_the_rest() {
    let r = probe_without("pidns");
    let through = check_prediction(&r);
    for t in &through {
        assert!(
            MOUNTNS_ALONE.contains(&t.as_str()) || t == "fork-bomb",
            "{t} must be held without a PID namespace too: {through:?}"
        );
    }
    // The runs really took the other shape.
    for report in &r {
        let layers = report["layers"].as_str().unwrap();
        assert!(
            !layers.contains("+pidns") && !layers.contains("+mountns"),
            "{layers}"
        );
        let daemon = report["attempts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["name"] == "daemon-outlives-call")
            .unwrap();
        assert_eq!(daemon["verdict"], "blocked", "{daemon}");
        // Root's fork bomb is bounded by nothing in this shape, and the
        // probe says so; an ordinary user's by RLIMIT_NPROC.
        let bomb = report["attempts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["name"] == "fork-bomb")
            .unwrap();
        let want = if report["uid"] == 0 {
            "ESCAPED"
        } else {
            "blocked"
        };
        assert_eq!(bomb["verdict"], want, "{bomb}");
    }
}

/// The host's name is the one thing the UTS namespace holds, and it holds
/// it alone: `/etc/hostname` is hidden by the minimal root, but `uname()`
/// needs no file.
#[test]
fn without_utsns_only_the_host_name_shows() {
    let r = probe_without("utsns");
    let through = check_prediction(&r);
    assert_eq!(through, vec!["uname-nodename".to_string()]);
}

#[test]
fn without_netns_nothing_gets_through() {
    let r = probe_without("netns");
    let through = check_prediction(&r);
    assert!(through.is_empty(), "{through:?}");
    assert!(abi(&r) >= 1);
}

#[test]
fn without_caps_only_the_capability_sets_show_it() {
    let r = probe_without("caps");
    let through = check_prediction(&r);
    assert_eq!(through, vec!["caps-held".to_string()]);
    for report in &r {
        let caps = report["attempts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["name"] == "caps-held")
            .unwrap();
        // The bounding set is left, but exec as a non-root uid in the run's
        // namespace still leaves the effective and permitted sets empty.
        assert!(
            caps["inside"]
                .as_str()
                .unwrap()
                .starts_with("CapEff=0 CapPrm=0"),
            "{caps}"
        );
    }
}
