//! `sandbox status`: the shape of the JSON report and what it says about
//! this machine (which offers every layer), and its AppArmor line.

use std::time::Duration;

use crate::support::sandbox::{output_within, text, Who, World};
use serde_json::Value;

const LAYERS: &[&str] = &[
    "userns",
    "netns",
    "ipcns",
    "utsns",
    "pidns",
    "pid_max",
    "mountns",
    "cgroup",
    "rlimits",
    "landlock",
    "landlock_tcp",
    "landlock_scope",
    "caps",
    "seccomp",
];

fn status_json(who: Who) -> Value {
    let w = World::new();
    let mut cmd = w.cmd(who, w.path());
    cmd.args(["sandbox", "status", "--json"]);
    let out = output_within(cmd, Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out.stdout)))
}

fn check(v: &Value) {
    let obj = v.as_object().unwrap();
    let keys: Vec<&str> = obj.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "platform",
            "kernel",
            "landlock_abi",
            "layers",
            "require_missing",
            "require_layers",
            "best_effort_layers",
            "trial",
            "promises",
            "apparmor"
        ]
    );
    assert_eq!(v["platform"], "linux");
    // The layers were applied in a trial run, not guessed.
    assert_eq!(
        v["trial"], "passed: every layer listed as available was applied",
        "{v:#}"
    );
    // On this machine every promise is held, each by at least one layer,
    // but kernel memory, which only a cgroup v2 per run holds.
    let promises = v["promises"].as_array().unwrap();
    let ids: Vec<&str> = promises.iter().map(|p| p["id"].as_str().unwrap()).collect();
    assert_eq!(
        ids,
        [
            "no_network",
            "reads_confined",
            "writes_confined",
            "no_privileges",
            "nothing_outlives",
            "nothing_outlives_server",
            "processes_bounded",
            "kernel_memory_bounded",
            "tmpdir_bounded",
            "host_hidden",
            "protected_hidden",
            "draft_confined"
        ]
    );
    let cgroup = v["layers"]
        .as_array()
        .unwrap()
        .iter()
        .any(|l| l["name"] == "cgroup" && l["available"] == true);
    for p in promises {
        let held = !p["held_by"].as_array().unwrap().is_empty();
        match p["id"].as_str() {
            Some("kernel_memory_bounded") => assert_eq!(held, cgroup, "{p}"),
            _ => assert!(held, "{p}"),
        }
    }
    assert!(!v["kernel"].as_str().unwrap().is_empty());
    let abi = v["landlock_abi"].as_i64().unwrap();
    assert!(
        abi >= 6,
        "this machine has Landlock ABI 6 or newer, got {abi}"
    );
    let layers = v["layers"].as_array().unwrap();
    let names: Vec<&str> = layers.iter().map(|l| l["name"].as_str().unwrap()).collect();
    assert_eq!(names, LAYERS);
    for l in layers {
        let fields: Vec<&str> = l.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(fields, ["name", "available", "detail"]);
        assert!(!l["detail"].as_str().unwrap().is_empty());
        if l["name"] == "cgroup" {
            // This version never applies per-run cgroups, and says why: on
            // the machines this is built on, the memory and pids
            // controllers are bound to cgroup v1.
            assert_eq!(l["available"], false, "{l}");
            let on_v1 = !std::fs::read_to_string("/proc/mounts")
                .unwrap()
                .lines()
                .any(|m| {
                    m.split_whitespace().nth(1) == Some("/sys/fs/cgroup") && m.contains("cgroup2")
                });
            if on_v1 {
                let d = l["detail"].as_str().unwrap();
                assert!(d.contains("v1") || d.contains("no cgroup v2"), "{d}");
            }
        } else {
            assert_eq!(l["available"], true, "{l}");
        }
    }
    assert_eq!(v["require_missing"], serde_json::json!([]));
    check_apparmor(&v["apparmor"]);
    let line = v["require_layers"].as_str().unwrap();
    for part in [
        "userns+netns+ipcns+utsns+pidns",
        "+mountns",
        "landlock(abi",
        "seccomp",
        "caps",
        "rlimits",
    ] {
        assert!(line.contains(part), "{line}");
    }
}

/// The AppArmor fields, against the kernel's files read here.
fn check_apparmor(a: &Value) {
    let fields: Vec<&str> = a.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        fields,
        [
            "enabled",
            "userns_restriction",
            "restricted",
            "profile",
            "detail"
        ]
    );
    let sysctl = std::fs::read_to_string("/proc/sys/kernel/apparmor_restrict_unprivileged_userns");
    let want = match sysctl.as_deref() {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => "not_present",
        Ok("0\n") => "off",
        Ok("1\n") => "on",
        _ => "unrecognised",
    };
    assert_eq!(a["userns_restriction"], want, "{a}");
    let enabled = std::fs::read_to_string("/sys/module/apparmor/parameters/enabled")
        .is_ok_and(|t| t == "Y\n");
    assert_eq!(a["enabled"], enabled, "{a}");
    assert_eq!(a["restricted"], want == "on" && enabled, "{a}");
    let detail = a["detail"].as_str().unwrap();
    if a["restricted"] == true && a["profile"] != "reachweaver-mcp" {
        assert!(
            detail.contains("sudo apparmor_parser -r /etc/apparmor.d/reachweaver-mcp"),
            "{detail}"
        );
    }
    if want == "not_present" {
        assert_eq!(
            detail,
            "no user namespace restriction on this kernel \
             (kernel.apparmor_restrict_unprivileged_userns not present)"
        );
    }
}

#[test]
fn status_json_lists_every_layer() {
    check(&status_json(Who::Me));
}

#[test]
fn status_json_is_the_same_for_an_unprivileged_user() {
    check(&status_json(Who::Unprivileged));
}

#[test]
fn status_text_says_what_mcp_serve_would_use() {
    let w = World::new();
    let mut cmd = w.cmd(Who::Me, w.path());
    cmd.args(["sandbox", "status"]);
    let out = output_within(cmd, Duration::from_secs(30));
    let t = text(&out.stdout);
    assert!(
        t.contains("mcp-serve (--sandbox require) would use: userns"),
        "{t}"
    );
    assert!(t.contains("available  seccomp"), "{t}");
    // One line about AppArmor's user-namespace restriction, before the verdict.
    let lines: Vec<&str> = t.lines().collect();
    let apparmor: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].starts_with("apparmor: "))
        .collect();
    assert_eq!(apparmor.len(), 1, "{t}");
    assert!(
        lines[apparmor[0]].contains("kernel.apparmor_restrict_unprivileged_userns"),
        "{t}"
    );
    assert!(lines[apparmor[0] + 1].starts_with("mcp-serve "), "{t}");
}
