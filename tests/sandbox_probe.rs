//! `sandbox probe --json` on this machine, as root (or whoever runs the
//! tests) and as an unprivileged user: every escape attempt is blocked with
//! its exact expected errno, every sanity check works, and the only attempt
//! allowed to "prove nothing" is one the kernel itself lacks (x32 system
//! calls, when the positive control gets ENOSYS outside too).

mod sandbox_common;

use std::time::Duration;

use sandbox_common::{output_within, text, Who, World};
use serde_json::Value;

/// The suite's attempts and the exact result each must get inside.
const EXPECTED: &[(&str, &str)] = &[
    ("tcp-connect-127.0.0.1", "EPERM"),
    ("tcp-connect-::1", "EPERM"),
    ("udp-send-127.0.0.1", "EPERM"),
    ("mptcp-connect-127.0.0.1", "EPERM"),
    ("dns-lookup-localhost", "EAI_AGAIN"),
    ("socket-raw-icmp", "EPERM"),
    ("socket-packet", "EPERM"),
    ("socket-netlink", "EPERM"),
    ("socket-vsock", "EPERM"),
    ("abstract-unix-connect", "EPERM"),
    ("host-unix-connect", "EPERM"),
    ("socketpair-dgram", "EPERM"),
    ("socketpair-seqpacket", "EPERM"),
    ("io-uring-setup", "EPERM"),
    ("x32-syscall", "SIGSYS"),
    ("unshare-userns", "EPERM"),
    ("clone-newuser", "EPERM"),
    ("clone3", "ENOSYS"),
    ("mount-tmpfs", "EPERM"),
    ("read-outside-root", "EACCES"),
    ("list-outside-root", "EACCES"),
    ("read-symlink-out-of-root", "EACCES"),
    ("read-dotdot-out-of-root", "EACCES"),
    ("exec-outside-runtime", "EACCES"),
    ("write-database", "EACCES"),
    ("draft-create-in-root", "EACCES"),
    ("draft-create-in-home", "EACCES"),
    ("chmod-host-file", "EPERM"),
    ("chown-host-file", "EPERM"),
    ("utime-host-file", "EPERM"),
    ("setxattr-host-file", "EPERM"),
    ("read-server-environ", "EACCES"),
    ("read-server-cmdline", "EACCES"),
    ("kill-server", "ESRCH"),
    ("ptrace-server", "EPERM"),
    ("tiocsti-terminal", "EPERM"),
    ("setuid-0", "EINVAL"),
    ("no-new-privs-off", "NoNewPrivs=1"),
    ("seccomp-off", "Seccomp=2"),
    ("caps-held", "CapEff=0 CapPrm=0 CapInh=0 CapBnd=0 CapAmb=0"),
    ("fork-bomb", "EAGAIN after "),
    ("memory-bomb", "ENOMEM after "),
    ("stdout-flood", "contained"),
    ("daemon-outlives-call", "gone"),
    ("run-outlives-killed-server", "gone"),
    ("loader-and-secret-env", "absent"),
];

const ALLOWED: &[&str] = &[
    "allowed-read-root",
    "allowed-list-root",
    "allowed-read-db",
    "allowed-write-tmpdir",
    "allowed-socketpair-stream",
    "allowed-start-child",
    "allowed-draft-writes-db-journal",
];

fn expected_for(name: &str) -> &'static str {
    if let Some((_, e)) = EXPECTED.iter().find(|(n, _)| *n == name) {
        return e;
    }
    for op in [
        "create", "write", "truncate", "rename", "unlink", "mkdir", "link", "mknod",
    ] {
        for place in ["root", "home", "outside"] {
            if name == format!("{op}-in-{place}") {
                return "EACCES";
            }
        }
    }
    panic!("the probe reports an attempt this test doesn't know: {name}");
}

fn probe(who: Who) -> Value {
    let w = World::new();
    let mut cmd = w.cmd(who, w.path());
    cmd.args(["sandbox", "probe", "--json"]);
    let out = output_within(cmd, Duration::from_secs(240));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "probe printed no JSON ({e}); exit {:?}\nstdout:\n{}\nstderr:\n{}",
            out.status,
            text(&out.stdout),
            text(&out.stderr)
        )
    });
    assert_eq!(
        out.status.code(),
        Some(0),
        "probe exit status; report:\n{report:#}\nstderr:\n{}",
        text(&out.stderr)
    );
    report
}

fn check(report: &Value, unprivileged: bool) {
    let attempts = report["attempts"].as_array().expect("attempts");
    assert_eq!(report["escaped"], 0, "{report:#}");
    assert_eq!(report["broken"], 0, "{report:#}");
    assert!(report["without"].is_null());
    assert!(
        report["layers"].as_str().unwrap().contains("seccomp"),
        "{}",
        report["layers"]
    );
    // The named attempts, 24 file operations, and the sanity checks.
    assert_eq!(
        attempts.len(),
        EXPECTED.len() + 24 + ALLOWED.len(),
        "{report:#}"
    );
    for a in attempts {
        let name = a["name"].as_str().unwrap();
        let inside = a["inside"].as_str().unwrap();
        let verdict = a["verdict"].as_str().unwrap();
        if ALLOWED.contains(&name) {
            assert_eq!(verdict, "allowed", "{name}: {a}");
            continue;
        }
        let want = expected_for(name);
        assert!(
            inside.starts_with(want),
            "{name}: inside got {inside:?}, expected {want:?}: {a}"
        );
        assert_eq!(a["predicted"], "blocked", "{name}: {a}");
        if verdict == "unproven" {
            assert_eq!(name, "x32-syscall", "only x32 may lack a control: {a}");
            assert_eq!(a["control"], "ENOSYS", "{a}");
        } else {
            assert_eq!(verdict, "blocked", "{name}: {a}");
            assert_eq!(a["control_ok"], true, "{name}: {a}");
        }
    }
    let fork = attempts.iter().find(|a| a["name"] == "fork-bomb").unwrap();
    let count: usize = fork["inside"]
        .as_str()
        .unwrap()
        .trim_start_matches("EAGAIN after ")
        .trim_end_matches(" processes")
        .parse()
        .unwrap();
    // Unprivileged runs hit RLIMIT_NPROC (256); real root is exempt from it
    // and hits the PID namespace's pid_max (512) instead.
    if unprivileged {
        assert!(count < 256, "{fork}");
    } else {
        assert!(count < 512, "{fork}");
    }
}

#[test]
fn every_escape_is_blocked_for_the_user_running_the_tests() {
    let report = probe(Who::Me);
    check(&report, !sandbox_common::is_root());
}

#[test]
fn every_escape_is_blocked_for_an_unprivileged_user() {
    let report = probe(Who::Unprivileged);
    check(&report, true);
}
