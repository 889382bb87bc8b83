//! The machine shapes owners run, simulated here: a Linux without user
//! namespaces (`tests/fixtures/shape-no-userns`: a child user namespace
//! whose `max_user_namespaces` is 0, as root of it and as an ordinary
//! uid), and Landlock without its TCP or scope rules (`--without`).
//!
//! On every shape the probe must report nothing through; an attempt whose
//! promise the server does not make there is reported as "not promised",
//! never as blocked; every network and read-outside attempt is blocked.
//! A real `mcp-serve` session runs a tool on each shape.
//!
//! Ubuntu's AppArmor restriction (a user namespace without capabilities)
//! is simulated by a seccomp filter that lets the server make a user
//! namespace but no namespace inside it (`restrict_namespaces_like_ubuntu`).
//!
//! What the simulation cannot show: a host whose kernel has user namespaces
//! compiled out answers `unshare` with EINVAL instead of ENOSPC (the server
//! treats both alike); AppArmor's denial of every capability inside the
//! user namespace (mounts, capability changes) is not reproduced, as these
//! machines have no AppArmor, but the server never uses such a namespace.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::fixture;
use crate::support::mcp::{req, Server, Workspace};
use crate::support::sandbox::{
    is_root, output_within, restrict_namespaces_like_ubuntu, text, Who, World,
};

/// Network attempts: blocked on every shape (raw and packet sockets may be
/// unproven where no user may open them outside either).
const NETWORK: &[&str] = &[
    "tcp-connect-127.0.0.1",
    "tcp-connect-::1",
    "udp-send-127.0.0.1",
    "mptcp-connect-127.0.0.1",
    "connect-with-swapped-address",
    "dns-lookup-localhost",
    "socket-netlink",
    "socket-vsock",
    "abstract-unix-connect",
    "host-unix-connect",
];
const NETWORK_MAYBE_UNPROVEN: &[&str] = &["socket-raw-icmp", "socket-packet"];

/// Reading outside the grant: blocked on every shape.
const READ_OUTSIDE: &[&str] = &[
    "read-outside-root",
    "list-outside-root",
    "read-symlink-out-of-root",
    "read-dotdot-out-of-root",
    "read-through-planted-symlink",
    "read-server-environ",
    "read-server-cmdline",
    "exec-outside-runtime",
];

/// What only the mount layer (and the UTS namespace) holds, so what an ordinary user on a machine
/// without user namespaces is not promised (`tmpdir-name-carries-server-pid`
/// is held there too: the host folder is named without the server's pid;
/// inotify is refused by seccomp) (the start-up line's "not held
/// here": tmpdir_bounded, host_hidden, protected_hidden, draft_confined).
const WITHOUT_MOUNT_LAYER: &[&str] = &[
    "draft-db-replaced-by-symlink",
    "draft-rename-beside-db",
    "draft-replace-beside-db",
    "draft-write-beside-db",
    "stat-through-planted-symlink",
    "tmpdir-size-cap",
    "tmpdir-inode-cap",
    "getxattr-outside-file",
    "stat-etc-hostname",
    "stat-outside-file",
    "stat-server-home",
    "readlink-outside",
    "stat-proc-server",
    "exec-via-loader-from-tmpdir",
    "mmap-exec-tmpdir",
    // The host's name: a UTS namespace needs a user namespace or root.
    "uname-nodename",
];

/// Ordinary users of these tests: uids of their own, not `nobody`, whose
/// process count (`RLIMIT_NPROC`) other tests' runs as `nobody` share and
/// would use up while a fork bomb or a daemon's control runs here.
const PROBE_UID: u32 = 47312;
const RESTRICTED_UID: u32 = 47313;
const SESSION_UID: u32 = 47314;
/// The ordinary users of the switched-off Landlock probes, one per layer.
const LANDLOCK_OFF_UIDS: [u32; 2] = [47321, 47322];

/// The server as `uid`, an ordinary user with no passwd entry.
fn as_uid(uid: u32, exe: &Path, cwd: &Path) -> Command {
    let mut c = Command::new("setpriv");
    c.arg(format!("--reuid={uid}"))
        .arg(format!("--regid={uid}"))
        .arg("--clear-groups")
        .arg(exe)
        .current_dir(cwd)
        .stdin(std::process::Stdio::null());
    c
}

fn need_root() {
    assert!(
        is_root(),
        "the shape tests build a child user namespace with ids mapped, which needs root"
    );
}

/// `shape-no-userns UID EXE ARGS...` as a command.
fn no_userns(uid: u32, exe: &Path, cwd: &Path) -> Command {
    let mut c = Command::new(fixture("shape-no-userns"));
    c.arg(uid.to_string()).arg(exe).current_dir(cwd);
    c
}

fn probe_json(mut cmd: Command) -> Value {
    cmd.args(["sandbox", "probe", "--json"]);
    let out = output_within(cmd, Duration::from_secs(600));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON ({e}): {}\n{}",
            text(&out.stdout),
            text(&out.stderr)
        )
    })
}

fn verdicts(report: &Value) -> Vec<(String, String)> {
    report["attempts"]
        .as_array()
        .expect("attempts")
        .iter()
        .map(|a| {
            (
                a["name"].as_str().unwrap().to_string(),
                a["verdict"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn verdict<'a>(v: &'a [(String, String)], name: &str) -> &'a str {
    &v.iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("no attempt {name}"))
        .1
}

/// What holds on every shape.
fn check_every_shape(report: &Value) {
    assert_eq!(report["escaped"], 0, "{report:#}");
    assert_eq!(report["broken"], 0, "{report:#}");
    let v = verdicts(report);
    for n in NETWORK {
        assert_eq!(verdict(&v, n), "blocked", "{n} on {}", report["layers"]);
    }
    for n in NETWORK_MAYBE_UNPROVEN {
        assert!(
            ["blocked", "unproven"].contains(&verdict(&v, n)),
            "{n}: {}",
            verdict(&v, n)
        );
    }
    for n in READ_OUTSIDE {
        assert_eq!(verdict(&v, n), "blocked", "{n} on {}", report["layers"]);
    }
    for (n, verdict) in &v {
        assert_ne!(verdict, "ESCAPED", "{n}");
    }
}

/// One attempt of a probe report, by name.
fn attempt<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["attempts"]
        .as_array()
        .expect("attempts")
        .iter()
        .find(|a| a["name"] == name)
        .unwrap_or_else(|| panic!("no attempt {name}"))
}

fn not_promised(report: &Value) -> Vec<String> {
    verdicts(report)
        .into_iter()
        .filter(|(_, v)| v == "not promised")
        .map(|(n, _)| n)
        .collect()
}

#[test]
fn without_user_namespaces_root_keeps_every_other_namespace_and_nothing_gets_through() {
    need_root();
    let w = World::new();
    let r = probe_json(no_userns(0, &w.exe, w.path()));
    check_every_shape(&r);
    let layers = r["layers"].as_str().unwrap();
    assert!(
        layers.starts_with("netns+ipcns+utsns+pidns(pid_max 512)+mountns "),
        "{layers}"
    );
    assert!(!layers.contains("userns"), "{layers}");
    // Root's run is uid 0 with no capability there: the one promise made
    // only with a user namespace (uid 0 does not exist in the run).
    assert_eq!(not_promised(&r), vec!["setuid-0".to_string()]);
    let v = verdicts(&r);
    for n in [
        "caps-held",
        "daemon-outlives-call",
        "fork-bomb",
        "stat-outside-file",
    ] {
        assert_eq!(verdict(&v, n), "blocked", "{n}");
    }
}

#[test]
fn without_user_namespaces_an_ordinary_user_gets_a_working_sandbox() {
    need_root();
    let w = World::new();
    let r = probe_json(no_userns(PROBE_UID, &w.exe, w.path()));
    check_every_shape(&r);
    assert_eq!(
        r["layers"].as_str().unwrap(),
        "landlock(abi7: fs tcp scope) seccomp caps rlimits",
        "this test expects Landlock ABI 6 or newer, as on the machines it is run on"
    );
    let mut np = not_promised(&r);
    np.sort();
    let mut want: Vec<String> = WITHOUT_MOUNT_LAYER.iter().map(|s| s.to_string()).collect();
    want.sort();
    assert_eq!(np, want);
    let v = verdicts(&r);
    // The subreaper holds what the PID namespace would; RLIMIT_NPROC the
    // fork bomb; the capability sets are empty (the bounding set is kept:
    // emptying it needs CAP_SETPCAP).
    for n in ["daemon-outlives-call", "fork-bomb", "caps-held", "setuid-0"] {
        assert!(
            ["blocked", "unproven"].contains(&verdict(&v, n)),
            "{n}: {}",
            verdict(&v, n)
        );
    }
    // Whatever its control saw on a loaded machine, inside the daemon is gone
    // (the subreaper killed it); the layer matrix proves the control too.
    let daemon = attempt(&r, "daemon-outlives-call");
    assert_eq!(daemon["inside"], "gone", "{daemon}");
    // An ordinary user holds no capability outside either, so the control
    // proves nothing here; inside, every set but the bounding set is empty.
    let caps = attempt(&r, "caps-held");
    assert!(
        caps["inside"]
            .as_str()
            .unwrap()
            .starts_with("CapEff=0 CapPrm=0 CapInh=0 (bounding set "),
        "{caps}"
    );
}

#[test]
fn landlock_without_tcp_or_scope_rules_still_holds_every_promise() {
    for (layer, uid) in ["landlock_tcp", "landlock_scope"]
        .into_iter()
        .zip(LANDLOCK_OFF_UIDS)
    {
        for who in [Who::Me, Who::Unprivileged] {
            let w = World::new();
            // The ordinary user is one of its own, not `nobody`: a run's
            // process limit counts every task of its user, and another
            // test's fork bomb as `nobody` at the same moment would leave
            // this probe's sanity checks (a run, a child) no room to start.
            let mut c = match who {
                Who::Unprivileged if is_root() => as_uid(uid, &w.exe, w.path()),
                _ => w.cmd(who, w.path()),
            };
            c.args(["sandbox", "probe", "--json", "--without", layer]);
            let out = output_within(c, Duration::from_secs(600));
            let r: Value = serde_json::from_slice(&out.stdout)
                .unwrap_or_else(|e| panic!("no JSON ({e}): {}", text(&out.stderr)));
            assert!(
                r["layers"]
                    .as_str()
                    .unwrap()
                    .contains(&format!("SWITCHED OFF: {layer}")),
                "{}",
                r["layers"]
            );
            // The other layers hold every network and signal attempt. A
            // failure names the attempts first (the whole report follows).
            let odd: Vec<&Value> = r["attempts"]
                .as_array()
                .expect("attempts")
                .iter()
                .filter(|a| {
                    ["ESCAPED", "BROKEN", "FAILED"].contains(&a["verdict"].as_str().unwrap_or(""))
                })
                .collect();
            assert_eq!(r["escaped"], 0, "{layer} {who:?}: {odd:#?}\n{r:#}");
            assert_eq!(r["broken"], 0, "{layer} {who:?}: {odd:#?}\n{r:#}");
            assert_eq!(out.status.code(), Some(0));
        }
    }
}

/// A workspace every uid may use (the ordinary user's server writes drafts).
fn open_workspace(w: &World) -> (Workspace, std::path::PathBuf) {
    let ws = Workspace::new();
    chmod_tree(ws.path());
    let backend = w.path().join("bin-copy/reachweaver-reference");
    std::fs::copy(crate::support::reference_bin(), &backend).expect("copy the backend");
    std::fs::set_permissions(&backend, std::fs::Permissions::from_mode(0o755)).unwrap();
    (ws, backend)
}

fn chmod_tree(p: &Path) {
    let meta = std::fs::symlink_metadata(p).unwrap();
    if meta.is_dir() {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o777)).unwrap();
        for e in std::fs::read_dir(p).unwrap() {
            chmod_tree(&e.unwrap().path());
        }
    } else if meta.is_file() {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o666)).unwrap();
    }
}

/// One session: initialize, a tool call, EOF. Returns the call's result
/// and the server's stderr.
fn session(uid: u32, extra: &[&str]) -> (Value, String) {
    let w = World::new();
    let (ws, backend) = open_workspace(&w);
    let mut cmd = no_userns(uid, &w.exe, ws.path());
    cmd.arg(format!("--backend={}", backend.display()))
        .arg(format!("--home={}", ws.path().display()))
        .arg("mcp-serve")
        .args(extra);
    check_campaign(cmd)
}

/// `session` with `--pin` (the pins written by this first start): the
/// reference backend, a binary, is executed from the descriptor hashed.
fn pinned_session(uid: u32) -> (Value, String) {
    let w = World::new();
    let (ws, backend) = open_workspace(&w);
    let mut cmd = no_userns(uid, &w.exe, ws.path());
    cmd.arg(format!("--backend={}", backend.display()))
        .arg(format!("--home={}", ws.path().display()))
        .arg("mcp-serve")
        .arg(format!("--pin={}", ws.path().join("pins.json").display()));
    check_campaign(cmd)
}

/// Serve `cmd`: initialize, one `campaign_check` call, EOF. Returns the
/// call's answer and the server's stderr; the server must exit 0.
fn check_campaign(cmd: Command) -> (Value, String) {
    let mut s = Server::spawn(cmd);
    s.initialize("2025-06-18");
    let r = s.request(req(
        json!(2),
        "tools/call",
        json!({"name": "campaign_check", "arguments": {"campaign": "campaigns/spring-launch.yaml"}}),
    ));
    let (status, _) = s.finish();
    let log = s.stderr_after_exit();
    assert!(status.success(), "{status:?}\n{log}");
    (r, log)
}

fn layers_of(result: &Value) -> Vec<String> {
    result["result"]["_meta"]["io.reachweaver/sandbox"]["layers"]
        .as_array()
        .unwrap_or_else(|| panic!("no attestation: {result:#}"))
        .iter()
        .map(|l| l.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_real_session_runs_without_user_namespaces_as_root_and_as_an_ordinary_user() {
    need_root();
    let (r, stderr) = session(0, &[]);
    assert_eq!(r["result"]["isError"], false, "{r:#}\n{stderr}");
    let layers = layers_of(&r);
    assert!(
        layers.contains(&"mountns".to_string()) && !layers.contains(&"userns".to_string()),
        "{layers:?}"
    );
    assert!(
        stderr.contains("promises: no_network(netns seccomp landlock_tcp)"),
        "{stderr}"
    );
    // Only the cgroup holds kernel memory, and only where the machine gives one.
    assert_eq!(
        not_held_here(&stderr),
        kernel_memory_unless_cgroup(&layers, &[]),
        "{stderr}"
    );

    let (r, stderr) = session(SESSION_UID, &[]);
    assert_eq!(r["result"]["isError"], false, "{r:#}\n{stderr}");
    assert_eq!(
        layers_of(&r),
        vec![
            "rlimits",
            "landlock",
            "landlock_tcp",
            "landlock_scope",
            "caps",
            "seccomp"
        ]
    );
    assert!(stderr.contains("nothing_outlives(subreaper)"), "{stderr}");
    assert_eq!(
        not_held_here(&stderr),
        [
            "nothing_outlives_server",
            "kernel_memory_bounded",
            "tmpdir_bounded",
            "host_hidden",
            "protected_hidden"
        ],
        "{stderr}"
    );
}

/// The re-executed helper's shapes (with and without a PID namespace) run
/// a pinned backend from the descriptor the server hashed, under Landlock.
#[test]
fn without_user_namespaces_a_pinned_backend_runs_as_root_and_as_an_ordinary_user() {
    need_root();
    for uid in [0, SESSION_UID] {
        let (r, stderr) = pinned_session(uid);
        assert_eq!(r["result"]["isError"], false, "{r:#}\n{stderr}");
        assert!(layers_of(&r).contains(&"landlock".to_string()), "{r:#}");
        assert!(stderr.contains("pins: first start"), "{stderr}");
    }
}

/// Where the re-executed helper runs the backend (no mount namespace for
/// an ordinary user), a pinned `#!` script is executed from the descriptor
/// the server hashed too: its interpreter reads `/dev/fd/6`, which is the
/// server's own open file (found at its end, where hashing left it).
#[test]
fn without_user_namespaces_a_pinned_script_runs_from_its_hashed_descriptor() {
    need_root();
    let w = World::new();
    let dir = w.folder("pinned");
    let (bin, home) = (dir.join("bin"), dir.join("home"));
    std::fs::create_dir(&bin).unwrap();
    std::fs::create_dir(&home).unwrap();
    let backend = bin.join("backend");
    crate::support::write_executable(&backend, &super::tools_pins::self_reporting_backend());
    std::fs::write(
        home.join("catalog.json"),
        super::tools_pins::catalog().to_string(),
    )
    .unwrap();
    chmod_tree(&dir);
    std::fs::set_permissions(&backend, std::fs::Permissions::from_mode(0o755)).unwrap();
    for uid in [0, SESSION_UID] {
        let mut cmd = no_userns(uid, &w.exe, &home);
        cmd.arg(format!("--backend={}", backend.display()))
            .arg(format!("--home={}", home.display()))
            .arg("mcp-serve")
            .arg(format!(
                "--pin={}",
                dir.join(format!("pins-{uid}.json")).display()
            ));
        let mut s = Server::spawn(cmd);
        s.initialize("2025-06-18");
        let r = s.request(req(
            json!(2),
            "tools/call",
            json!({"name": "ping", "arguments": {}}),
        ));
        let (status, _) = s.finish();
        let log = s.stderr_after_exit();
        assert!(status.success(), "{status:?}\n{log}");
        assert_eq!(
            r["result"]["structuredContent"]["output"],
            json!({"ran": "ping", "self": "/dev/fd/6", "at_end": "yes"}),
            "uid {uid}: {r:#}\n{log}"
        );
    }
}

/// The promises the start-up line says are not held here.
fn not_held_here(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .find_map(|l| l.split("; not held here: ").nth(1))
        .map(|rest| {
            rest.split(';')
                .next()
                .unwrap_or("")
                .split(", ")
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// `others`, with kernel memory first when the run had no cgroup layer.
fn kernel_memory_unless_cgroup(layers: &[String], others: &[&str]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    if !layers.iter().any(|l| l == "cgroup") {
        out.push("kernel_memory_bounded".into());
    }
    out.extend(others.iter().map(|s| s.to_string()));
    out
}

/// Serve with `--allow-drafts` as an ordinary user without user
/// namespaces; returns the tool names and the server's stderr.
fn draft_session(beside_db: bool) -> (Vec<String>, String) {
    let w = World::new();
    let (ws, backend) = open_workspace(&w);
    let db_dir = ws.path().join("data");
    if beside_db {
        std::fs::write(db_dir.join("notes.txt"), "beside the database\n").unwrap();
        chmod_tree(&db_dir);
    } else {
        // The example's folder keeps a placeholder beside the database.
        for e in std::fs::read_dir(&db_dir).unwrap() {
            let p = e.unwrap().path();
            if p.file_name().is_some_and(|n| n != "reachweaver.db") {
                std::fs::remove_file(&p).unwrap();
            }
        }
    }
    let mut cmd = no_userns(SESSION_UID, &w.exe, ws.path());
    cmd.arg(format!("--backend={}", backend.display()))
        .arg(format!("--home={}", ws.path().display()))
        .arg(format!("--db={}", db_dir.join("reachweaver.db").display()))
        .args(["mcp-serve", "--allow-drafts"]);
    let mut s = Server::spawn(cmd);
    s.initialize("2025-06-18");
    let list = s.request(req(json!(2), "tools/list", json!({})));
    let (status, _) = s.finish();
    let log = s.stderr_after_exit();
    assert!(status.success(), "{log}");
    let names = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    (names, log)
}

#[test]
fn drafts_are_offered_only_where_their_promise_holds() {
    need_root();
    // Something beside the database (the example's placeholder, and a note):
    // only the mount layer could keep a draft from renaming or rewriting it,
    // and there is none here.
    let (names, stderr) = draft_session(true);
    assert!(!names.iter().any(|n| n == "draft"), "{names:?}");
    assert!(
        stderr.contains("refused: --allow-drafts (a draft writes only the database and its companions is held by nothing here"),
        "{stderr}"
    );
    // The database alone in its folder: Landlock's rules hold it.
    let (names, stderr) = draft_session(false);
    assert!(names.iter().any(|n| n == "draft"), "{names:?}");
    assert!(stderr.contains("draft_confined(landlock)"), "{stderr}");
    assert!(!stderr.contains("refused: --allow-drafts"), "{stderr}");
}

/// Root on a machine without user or PID namespaces (as in many
/// containers): nothing bounds a run's fork bomb (`RLIMIT_NPROC` exempts
/// root, and `pid_max` needs a PID namespace), so the default mode refuses
/// to start and says why; best-effort starts and says what it lacks.
#[test]
fn root_without_pid_namespaces_is_refused_and_best_effort_says_what_it_lacks() {
    need_root();
    let w = World::new();
    let (ws, backend) = open_workspace(&w);
    let serve = |extra: &[&str]| {
        let mut c = Command::new(fixture("shape-no-userns"));
        c.args(["--no-pidns", "0"])
            .arg(&w.exe)
            .arg(format!("--backend={}", backend.display()))
            .arg(format!("--home={}", ws.path().display()))
            .arg("mcp-serve")
            .args(extra)
            .current_dir(ws.path())
            .stdin(std::process::Stdio::null());
        output_within(c, Duration::from_secs(60))
    };
    let out = serve(&[]);
    let stderr = text(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("this machine cannot hold what every run is promised: a run's processes bounded (needs for a server run as root"),
        "{stderr}"
    );
    // stdin is empty: best-effort starts, says what it gave up, and exits at EOF.
    let out = serve(&["--sandbox", "best-effort"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("nothing_outlives(subreaper)"), "{stderr}");
    assert_eq!(
        not_held_here(&stderr),
        [
            "nothing_outlives_server",
            "processes_bounded",
            "kernel_memory_bounded",
            "tmpdir_bounded",
            "host_hidden",
            "protected_hidden"
        ],
        "{stderr}"
    );
}

/// Ubuntu 23.10+'s restriction, as closely as this machine allows
/// (`restrict_namespaces_like_ubuntu`: a user namespace can be made, nothing
/// inside it): the server treats it as no user namespaces, says why, and
/// holds the same promises as on such a machine.
#[test]
fn restricted_user_namespaces_count_as_none_and_say_why() {
    need_root();
    let w = World::new();
    let mut c = as_uid(RESTRICTED_UID, &w.exe, w.path());
    c.args(["sandbox", "status", "--json"]);
    restrict_namespaces_like_ubuntu(&mut c);
    let out = output_within(c, Duration::from_secs(60));
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", text(&out.stderr)));
    let userns = v["layers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["name"] == "userns")
        .unwrap();
    assert_eq!(userns["available"], false, "{userns}");
    assert!(
        userns["detail"]
            .as_str()
            .unwrap()
            .starts_with("a user namespace can be made but gives no capability in it"),
        "{userns}"
    );
    assert_eq!(v["require_missing"], json!([]), "{v:#}");
    assert_eq!(
        v["trial"],
        "passed: every layer listed as available was applied"
    );

    let mut c = as_uid(RESTRICTED_UID, &w.exe, w.path());
    restrict_namespaces_like_ubuntu(&mut c);
    let r = probe_json(c);
    check_every_shape(&r);
    let mut np = not_promised(&r);
    np.sort();
    let mut want: Vec<String> = WITHOUT_MOUNT_LAYER.iter().map(|s| s.to_string()).collect();
    want.sort();
    assert_eq!(np, want);

    let (ws, backend) = open_workspace(&w);
    let mut cmd = as_uid(RESTRICTED_UID, &w.exe, ws.path());
    cmd.arg(format!("--backend={}", backend.display()))
        .arg(format!("--home={}", ws.path().display()))
        .arg("mcp-serve");
    restrict_namespaces_like_ubuntu(&mut cmd);
    let (r, stderr) = check_campaign(cmd);
    assert_eq!(r["result"]["isError"], false, "{r:#}\n{stderr}");
    assert_eq!(
        layers_of(&r),
        vec![
            "rlimits",
            "landlock",
            "landlock_tcp",
            "landlock_scope",
            "caps",
            "seccomp"
        ]
    );
}

/// Without a PID namespace only the run's helper, its child subreaper, can
/// find what a run left (a daemon in a session of its own). A server
/// killed outright gives its helper a parent-death signal the helper
/// catches, so it kills them before it goes.
#[test]
fn without_a_pid_namespace_a_killed_server_leaves_no_daemon() {
    need_root();
    let w = World::new();
    let marker = crate::support::sandbox::marker("orphan");
    let mut cmd = no_userns(SESSION_UID, &w.exe, w.path());
    cmd.args([
        "sandbox",
        "run",
        "--",
        "/bin/sh",
        "-c",
        "setsid /bin/sh -c 'sleep 300; true' \"$0\" & /bin/sh -c 'sleep 300; true' \"$0\"",
        &marker,
    ])
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null());
    let mut wrapper = crate::support::sandbox::spawn(&mut cmd);
    // The run's two shells: the one in a session of its own, and the other.
    let shells = || {
        crate::support::sandbox::pids_with_marker(&marker)
            .into_iter()
            .filter(|&pid| {
                crate::support::faults::cmdline_args(pid as u32)
                    .iter()
                    .any(|a| a == b"sleep 300; true")
            })
            .count()
    };
    // Each wait has a cap only so a broken run fails instead of hanging.
    let started = crate::support::sandbox::wait_until(Duration::from_secs(60), || shells() == 2);
    let exe = w.exe.to_string_lossy().into_owned();
    let server = crate::support::sandbox::pids_running(&exe, &marker);
    if !started || server.len() != 1 {
        crate::support::sandbox::kill_marker(&marker);
        let _ = wrapper.kill();
        panic!(
            "the run never started: {} shells, server {server:?}",
            shells()
        );
    }
    // SAFETY: signalling the server this test started (found by its marker).
    unsafe { libc::kill(server[0], libc::SIGKILL) };
    let _ = wrapper.wait();
    let gone = crate::support::sandbox::wait_until(Duration::from_secs(60), || shells() == 0);
    let left = shells();
    crate::support::sandbox::kill_marker(&marker);
    assert!(
        gone,
        "{left} of the run's processes outlived the killed server"
    );
}
