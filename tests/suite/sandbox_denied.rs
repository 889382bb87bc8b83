//! What a run tried and was refused (docs/DENIED.md): a connect reported
//! with its destination, a lookup by the name asked for, as root and as
//! nobody, through `sandbox run --report/--report-junit/--fail-on-denied`
//! and through a tool result's `_meta`; clean runs (the reference backend's
//! tools, a Python program using local sockets) report nothing.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::mcp::*;
use crate::support::sandbox::{assert_clean, output_within, text, Who, World};

const PYTHON: &str = "/usr/bin/python3";
const META: &str = "io.reachweaver/denied";

/// Tries the internet twice, then exits 3 (its own code, which `sandbox
/// run` must pass on).
const PHONES_HOME: &str = r#"
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
try:
    s.connect(("192.0.2.1", 443))
    print("connect CONNECTED")
except OSError as e:
    print("connect", e.errno)
try:
    socket.getaddrinfo("api.example.com", 443)
    print("lookup RESOLVED")
except OSError as e:
    print("lookup", e.errno)
sys.exit(3)
"#;

/// Local sockets only: a socketpair's send and asyncio's self-pipe.
const LOCAL_ONLY: &str = r#"
import asyncio, socket, sys
a, b = socket.socketpair()
a.send(b"hi")
print("pair", b.recv(2).decode())
async def main():
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(None, lambda: 6 * 7)
print("asyncio", asyncio.run(main()))
sys.exit(7)
"#;

fn reports(w: &World) -> PathBuf {
    let dir = w.folder("reports");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    dir
}

fn run_python(w: &World, who: Who, script: &str, flags: &[&str]) -> std::process::Output {
    assert!(
        Path::new(PYTHON).exists(),
        "{PYTHON} is required by this test (install python3)"
    );
    let root = w.folder("root");
    let mut cmd = w.cmd(who, &root);
    cmd.args(["sandbox", "run"])
        .args(flags)
        .args(["--", PYTHON, "-c", script]);
    output_within(cmd, Duration::from_secs(60))
}

fn read_json(p: &Path) -> Value {
    let t = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&t).unwrap_or_else(|e| panic!("{}: {e}: {t}", p.display()))
}

/// The entry for `call` to `address:port`, which must be there once.
fn entry<'a>(report: &'a Value, address: &str, port: u64) -> &'a Value {
    let found: Vec<&Value> = report["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .filter(|e| e["address"] == address && e["port"] == port)
        .collect();
    assert_eq!(found.len(), 1, "{address}:{port} in {report:#}");
    found[0]
}

fn phoning_home_is_reported(who: Who) {
    let w = World::new();
    let dir = reports(&w);
    let (json_at, junit_at) = (dir.join("r.json"), dir.join("r.xml"));
    let out = run_python(
        &w,
        who,
        PHONES_HOME,
        &[
            "--report",
            json_at.to_str().unwrap(),
            "--report-junit",
            junit_at.to_str().unwrap(),
        ],
    );
    let stdout = text(&out.stdout);
    // The command's own exit, and a network error as fast as before.
    assert_eq!(out.status.code(), Some(3), "{stdout}{}", text(&out.stderr));
    assert_eq!(
        stdout,
        format!(
            "connect {}\nlookup {}\n",
            libc::ENETUNREACH,
            libc::EAI_AGAIN
        ),
        "{who:?}"
    );
    let r = read_json(&json_at);
    assert_eq!(r["status"], "watched", "{r:#}");
    let c = entry(&r, "192.0.2.1", 443);
    assert_eq!(
        *c,
        json!({"call": "connect", "family": "inet", "address": "192.0.2.1", "port": 443,
               "layer": "netns", "answer": "ENETUNREACH"})
    );
    // The lookup: the resolver's connect to the fixed name server, and the
    // name its query asked for (asked again per attempt: listed once).
    let dns = entry(&r, "127.0.0.1", 53);
    assert_eq!(dns["dns"], "api.example.com", "{r:#}");
    assert_eq!(dns["call"], "connect");
    assert_eq!(r["entries"].as_array().unwrap().len(), 2, "{r:#}");
    let total = r["network"].as_u64().unwrap();
    assert!(total >= 2, "{r:#}");
    assert_eq!(r["counts"]["connect"], total, "{r:#}");
    assert_eq!(r["omitted"], 0);
    let junit = std::fs::read_to_string(&junit_at).unwrap();
    assert!(
        junit.contains("tests=\"2\" failures=\"2\" skipped=\"0\""),
        "{junit}"
    );
    assert!(junit.contains("name=\"network: 192.0.2.1:443\""), "{junit}");
    assert!(
        junit.contains("name=\"network: api.example.com (DNS via 127.0.0.1:53)\""),
        "{junit}"
    );
    // --fail-on-denied: its own exit code, whatever the command's.
    let out = run_python(&w, who, PHONES_HOME, &["--fail-on-denied"]);
    assert_eq!(out.status.code(), Some(86), "{}", text(&out.stderr));
}

#[test]
fn a_connect_and_a_lookup_are_reported_with_their_destinations() {
    phoning_home_is_reported(Who::Me);
}

#[test]
fn a_connect_and_a_lookup_are_reported_for_an_unprivileged_user() {
    phoning_home_is_reported(Who::Unprivileged);
}

#[test]
fn local_sockets_are_not_network_attempts() {
    let w = World::new();
    let dir = reports(&w);
    let json_at = dir.join("r.json");
    let junit_at = dir.join("r.xml");
    let out = run_python(
        &w,
        Who::Me,
        LOCAL_ONLY,
        &[
            "--fail-on-denied",
            "--report",
            json_at.to_str().unwrap(),
            "--report-junit",
            junit_at.to_str().unwrap(),
        ],
    );
    // The command's exit: nothing was refused.
    assert_eq!(out.status.code(), Some(7), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "pair hi\nasyncio 42\n");
    assert_clean(&read_json(&json_at), "local sockets");
    let junit = std::fs::read_to_string(&junit_at).unwrap();
    assert!(
        junit.contains("tests=\"1\" failures=\"0\" skipped=\"0\"")
            && junit.contains("name=\"no network attempt\""),
        "{junit}"
    );
}

/// Every reference tool a client may call without arguments, each on the
/// same server: none tries the network, every result says it was watched,
/// and each log line says `denied=0`.
#[test]
fn the_reference_backends_tools_report_no_attempt() {
    let mut s = Server::start();
    let list = s.request(modern(json!(1), "tools/list", json!({})));
    let tools: Vec<String> = list["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter(|t| {
            t["inputSchema"]["required"]
                .as_array()
                .is_none_or(|r| r.is_empty())
        })
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    assert!(tools.len() >= 10, "{list}");
    for (i, tool) in tools.iter().enumerate() {
        let r = s.request(modern(
            json!(i + 2),
            "tools/call",
            json!({"name": tool, "arguments": {}}),
        ));
        assert_clean(&r["result"]["_meta"][META], tool);
    }
    let log = s.stderr_when("every call's line", |l| {
        l.matches("call tool=").count() >= tools.len()
    });
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.starts_with("call tool="))
        .collect();
    assert_eq!(lines.len(), tools.len(), "{log}");
    for l in lines {
        assert!(l.contains(" denied=0 "), "{l}");
    }
}

/// A Python backend that opens `https://api.example.com/x`: it fails with
/// a network error as before, and the result's `_meta` names the host it
/// looked up and the layer that refused it.
#[test]
fn a_python_backend_phoning_home_is_named_in_the_results_meta() {
    assert!(
        Path::new(PYTHON).exists(),
        "{PYTHON} is required by this test (install python3)"
    );
    let dir = tempfile::Builder::new()
        .prefix("rwmcp-fetch-")
        .tempdir()
        .unwrap();
    let script =
        std::fs::read_to_string(repo_root().join("tests/fixtures/pybackend/rw_fetch.py")).unwrap();
    let backend = dir.path().join("rw-fetch");
    crate::support::write_executable(&backend, &format!("#!{PYTHON}\n{script}"));
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let mut cmd = Command::new(server_bin());
    cmd.arg(format!("--backend={}", backend.display()))
        .arg("mcp-serve")
        .arg(format!("--root={}", root.display()))
        .current_dir(&root);
    let mut s = Server::spawn(cmd);
    let r = s.request(modern(
        json!(1),
        "tools/call",
        json!({"name": "fetch", "arguments": {}}),
    ));
    let env = envelope_of(&r["result"]);
    assert_eq!(env["exit_code"], 0, "{r}\n{}", s.stderr_text());
    assert_eq!(env["output"]["fetched"], false, "{env}");
    assert!(
        env["output"]["error"]
            .as_str()
            .unwrap()
            .contains("Temporary failure in name resolution"),
        "{env}"
    );
    let meta = &r["result"]["_meta"][META];
    assert_eq!(meta["status"], "watched", "{r}");
    let entries = meta["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 1, "{meta:#}");
    assert_eq!(entries[0]["dns"], "api.example.com", "{meta:#}");
    assert_eq!(entries[0]["layer"], "netns", "{meta:#}");
    let n = meta["network"].as_u64().unwrap();
    let log = s.stderr_when("the call's line", |l| l.contains("call tool=fetch"));
    assert!(log.contains(&format!(" denied={n} ")), "{log}");
}

/// A draft run is armed only once its request is there, so its init passes
/// its listener on the run channel itself: watched all the same.
#[test]
fn a_draft_run_is_watched_too() {
    let mut s = Server::start_with(Opts {
        extra_serve_args: vec!["--allow-drafts".into()],
        own_db: true,
        ..Opts::default()
    });
    let r = s.request(modern(
        json!(1),
        "tools/call",
        json!({"name": "draft", "arguments": {"campaign": "campaigns/spring-launch.yaml",
               "channel": "mastodon", "text": "A calm note about our spring release."}}),
    ));
    let env = envelope_of(&r["result"]);
    assert!(env["exit_code"] == 0 || env["exit_code"] == 1, "{env}");
    assert_clean(&r["result"]["_meta"][META], "draft");
}

/// Calls outside the allow-list through libc's `syscall`, each printed
/// with the errno it got: `ptrace`, `mount` twice, `io_uring_setup`, an
/// unlisted call (`memfd_create`), an `ioctl` request not listed and a
/// `fallocate` mode other than 0 (both on stdout: the filter answers
/// before any file system would). The numbers are this architecture's.
fn refused_calls_script() -> String {
    format!(
        r#"
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def call(name, nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    print(name, "ok" if r >= 0 else ctypes.get_errno())
call("ptrace", {ptrace}, 0, 0, 0, 0)
call("mount", {mount}, 0, 0, 0, 0, 0)
call("mount", {mount}, 0, 0, 0, 0, 0)
call("io_uring_setup", 425, 8, 0)
call("memfd_create", {memfd}, 0, 0)
call("ioctl", {ioctl}, 1, 0x80086601, 0)
call("fallocate", {fallocate}, 1, {keep_size}, 0, 4096)
sys.exit(5)
"#,
        ptrace = libc::SYS_ptrace,
        mount = libc::SYS_mount,
        memfd = libc::SYS_memfd_create,
        ioctl = libc::SYS_ioctl,
        fallocate = libc::SYS_fallocate,
        keep_size = libc::FALLOC_FL_KEEP_SIZE,
    )
}

fn refused_calls_are_named(who: Who) {
    let w = World::new();
    let dir = reports(&w);
    let (json_at, junit_at) = (dir.join("r.json"), dir.join("r.xml"));
    let script = refused_calls_script();
    let out = run_python(
        &w,
        who,
        &script,
        &[
            "--report",
            json_at.to_str().unwrap(),
            "--report-junit",
            junit_at.to_str().unwrap(),
        ],
    );
    // The errnos the plain filter gives (seccomp.rs's table), unchanged by
    // the supervisor that answers them now.
    assert_eq!(out.status.code(), Some(5), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        format!(
            "ptrace {eperm}\nmount {eperm}\nmount {eperm}\nio_uring_setup {eperm}\n\
             memfd_create {enosys}\nioctl {enotty}\nfallocate {eopnotsupp}\n",
            eperm = libc::EPERM,
            enosys = libc::ENOSYS,
            enotty = libc::ENOTTY,
            eopnotsupp = libc::EOPNOTSUPP,
        ),
        "{who:?}"
    );
    let r = read_json(&json_at);
    assert_eq!(r["status"], "watched", "{r:#}");
    assert_eq!(r["network"], 0, "{r:#}");
    assert_eq!(
        r["syscalls"]["entries"],
        json!([
            {"call": "ptrace", "answer": "EPERM", "count": 1},
            {"call": "mount", "answer": "EPERM", "count": 2},
            {"call": "io_uring_setup", "answer": "EPERM", "count": 1},
            {"call": "memfd_create", "answer": "ENOSYS", "count": 1},
            {"call": "ioctl", "answer": "ENOTTY", "count": 1},
            {"call": "fallocate", "answer": "EOPNOTSUPP", "count": 1},
        ]),
        "{r:#}"
    );
    assert_eq!(r["syscalls"]["refused"], 7, "{r:#}");
    assert_eq!(r["syscalls"]["omitted"], 0, "{r:#}");
    assert_eq!(r["killed_by_filter"], false, "{r:#}");
    let junit = std::fs::read_to_string(&junit_at).unwrap();
    assert!(junit.contains("failures=\"6\""), "{junit}");
    assert!(junit.contains("name=\"syscall: mount (EPERM)\""), "{junit}");
    let out = run_python(&w, who, &script, &["--fail-on-denied"]);
    assert_eq!(out.status.code(), Some(86), "{}", text(&out.stderr));
}

#[test]
fn refused_calls_are_named_with_counts_and_keep_their_errnos() {
    refused_calls_are_named(Who::Me);
}

#[test]
fn refused_calls_are_named_for_an_unprivileged_user() {
    refused_calls_are_named(Who::Unprivileged);
}

/// A thread (glibc's `clone3`, answered ENOSYS, then `clone`) and a local
/// socket (as glibc's nscd lookup makes): compatibility calls only.
const COMPAT_ONLY: &str = r#"
import socket, sys, threading
t = threading.Thread(target=lambda: None)
t.start()
t.join()
try:
    socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    print("unix socket made")
except OSError as e:
    print("unix socket", e.errno)
sys.exit(4)
"#;

#[test]
fn compatibility_calls_are_counted_apart_and_fail_no_job() {
    let w = World::new();
    let dir = reports(&w);
    let json_at = dir.join("r.json");
    let out = run_python(
        &w,
        Who::Me,
        COMPAT_ONLY,
        &["--fail-on-denied", "--report", json_at.to_str().unwrap()],
    );
    // The command's own exit: nothing it did fails the job.
    assert_eq!(out.status.code(), Some(4), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), format!("unix socket {}\n", libc::EPERM));
    let r = read_json(&json_at);
    assert_clean(&r, "compatibility calls");
    let compat = &r["syscalls"]["compatibility"];
    assert!(compat["clone3"].as_u64().unwrap() >= 1, "{r:#}");
    assert!(compat["socket"].as_u64().unwrap() >= 1, "{r:#}");
}

/// An x32 call: the filter kills the process; the report can't name the
/// call but says the filter killed the run.
#[test]
fn a_run_killed_by_the_filter_is_reported_so() {
    let w = World::new();
    let dir = reports(&w);
    let json_at = dir.join("r.json");
    let script = format!(
        "import ctypes\nctypes.CDLL(None).syscall({})\nprint('survived')\n",
        0x4000_0000 + libc::SYS_getpid
    );
    let out = run_python(
        &w,
        Who::Me,
        &script,
        &["--report", json_at.to_str().unwrap()],
    );
    assert_eq!(
        out.status.code(),
        Some(128 + libc::SIGSYS),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(text(&out.stdout), "");
    let r = read_json(&json_at);
    assert_eq!(r["killed_by_filter"], true, "{r:#}");
    assert_eq!(r["syscalls"]["refused"], 0, "{r:#}");
    let out = run_python(&w, Who::Me, &script, &["--fail-on-denied"]);
    assert_eq!(out.status.code(), Some(86), "{}", text(&out.stderr));
}
