//! The layer matrix: `sandbox probe --without LAYER` for each layer in turn.
//!
//! With one layer off, every attempt must end exactly as the probe's holder
//! table predicts: blocked when another layer still holds it, through when
//! that layer held it alone. This tests the table in `sandbox/LAYERS.md`
//! (each layer really does what it claims, and no promise silently rests on
//! a layer nobody listed). The network promise must survive any single
//! layer being off.

mod sandbox_common;

use std::time::Duration;

use sandbox_common::{output_within, text, Who, World};
use serde_json::Value;

/// Attempts that send anything to a listener on this machine.
const NETWORK: &[&str] = &[
    "tcp-connect-127.0.0.1",
    "tcp-connect-::1",
    "udp-send-127.0.0.1",
    "mptcp-connect-127.0.0.1",
    "abstract-unix-connect",
];

fn probe_without(layer: &str) -> Value {
    let w = World::new();
    let mut cmd = w.cmd(Who::Me, w.path());
    cmd.args(["sandbox", "probe", "--json", "--without", layer]);
    let out = output_within(cmd, Duration::from_secs(240));
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

/// Every attempt ends as predicted; returns the names that got through.
fn check_prediction(report: &Value) -> Vec<String> {
    let mut through = Vec::new();
    for a in report["attempts"].as_array().unwrap() {
        let name = a["name"].as_str().unwrap().to_string();
        let verdict = a["verdict"].as_str().unwrap();
        assert_ne!(verdict, "BROKEN", "{a}");
        assert_ne!(verdict, "FAILED", "{a}");
        if verdict == "unproven" {
            // The kernel itself lacks it (x32); no prediction to check.
            assert_eq!(name, "x32-syscall", "{a}");
            continue;
        }
        let got = if verdict == "ESCAPED" {
            "escaped"
        } else {
            "blocked"
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

fn abi(report: &Value) -> i64 {
    // With Landlock off the report has no ABI; ask a full probe's status.
    report["landlock_abi"].as_i64().unwrap_or(0)
}

#[test]
fn without_landlock_only_file_promises_fall_and_the_network_holds() {
    let r = probe_without("landlock");
    let through = check_prediction(&r);
    assert!(
        through.contains(&"read-outside-root".to_string()),
        "{through:?}"
    );
    assert!(
        through.contains(&"create-in-root".to_string()),
        "{through:?}"
    );
    for t in &through {
        let file_side = t.contains("-in-")
            || t.starts_with("read-")
            || t.starts_with("list-")
            || t == "exec-outside-runtime"
            || t == "write-database"
            || t == "dns-lookup-localhost";
        assert!(
            file_side,
            "only file promises rest on Landlock alone, not {t}"
        );
    }
    assert!(
        !through.contains(&"read-server-environ".to_string()),
        "held by the user namespace too"
    );
}

#[test]
fn without_seccomp_the_network_and_files_hold() {
    let r = probe_without("seccomp");
    let through = check_prediction(&r);
    for held in [
        "read-outside-root",
        "create-in-root",
        "write-database",
        "ptrace-server",
        "unshare-userns",
        "clone-newuser",
        "mount-tmpfs",
        "socket-raw-icmp",
    ] {
        assert!(
            !through.iter().any(|t| t == held),
            "{held} must be held by another layer: {through:?}"
        );
    }
    assert!(through.contains(&"seccomp-off".to_string()), "{through:?}");
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
    let caps = r["attempts"]
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
