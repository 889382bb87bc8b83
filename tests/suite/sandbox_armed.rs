//! A read-only run's init is confined before its call arrives: while one
//! run goes on, the init the zygote keeps for the next one already has the
//! run's seccomp filter, `no_new_privs`, capability sets and resource
//! limits, exactly as the running backend has them, while the zygote itself
//! has none of them.

use std::process::Stdio;

use crate::support::faults::{live_children_of, status_field};
use crate::support::mcp::HANG_GUARD;
use crate::support::sandbox::{kill_marker, marker, pids_running, spawn, wait_until, Who, World};

/// The lines of `/proc/PID/limits` that a run's resource limits set.
fn limits_of(pid: u32) -> Vec<String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap_or_default();
    text.lines()
        .filter(|l| {
            [
                "Max core file size",
                "Max address space",
                "Max file size",
                "Max open files",
                "Max processes",
            ]
            .iter()
            .any(|name| l.starts_with(name))
        })
        .map(str::to_string)
        .collect()
}

fn parent_of(pid: u32) -> Option<u32> {
    status_field(pid, "PPid")?.parse().ok()
}

/// What the kernel shows of a process's confinement.
fn confinement_of(pid: u32) -> Fields {
    [
        "Seccomp",
        "Seccomp_filters",
        "NoNewPrivs",
        "CapEff",
        "CapPrm",
        "CapInh",
        "CapBnd",
        "CapAmb",
    ]
    .iter()
    .map(|f| (f.to_string(), status_field(pid, f)))
    .collect()
}

fn the_next_runs_init_is_armed_before_its_call(who: Who) {
    let w = World::new();
    let root = w.folder("root");
    let marker = marker("armed");
    let mut cmd = w.cmd(who, &root);
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
    let mut server = spawn(&mut cmd);
    let mut shell = Vec::new();
    let started = wait_until(HANG_GUARD, || {
        shell = pids_running("/bin/sh", &marker);
        shell.len() == 1
    });
    // The run's shell, its init, and the zygote that forked the init.
    let backend = shell.first().map(|&p| p as u32);
    let init = backend.and_then(parent_of);
    let zygote = init.and_then(parent_of);
    let mut spares = Vec::new();
    let armed = zygote.is_some_and(|z| {
        wait_until(HANG_GUARD, || {
            spares = live_children_of(z);
            spares.retain(|&c| Some(c) != init);
            spares.len() == 2
                && spares
                    .iter()
                    .all(|&s| status_field(s, "Seccomp").as_deref() == Some("2"))
        })
    });
    let seen = (
        backend.map(confinement_of),
        zygote.map(confinement_of),
        backend.map(limits_of),
    );
    let spare_sets: Vec<Fields> = spares.iter().map(|&s| confinement_of(s)).collect();
    let spare_limits: Vec<Vec<String>> = spares.iter().map(|&s| limits_of(s)).collect();
    let _ = server.kill();
    let _ = server.wait();
    kill_marker(&marker);
    assert!(started, "the run never started");
    let (Some(backend), Some(zygote), Some(backend_limits)) = seen else {
        panic!("no run with an init and a zygote was found: {seen:?}");
    };
    assert!(
        armed,
        "not two spare inits, each with a seccomp filter: {spare_sets:?}"
    );
    for (spare, limits) in spare_sets.iter().zip(&spare_limits) {
        check_armed(spare, &backend, limits, &backend_limits);
    }
    // The zygote forks every init and holds none of it.
    let zygote_seccomp = zygote.iter().find(|(n, _)| n == "Seccomp");
    assert_eq!(
        zygote_seccomp,
        Some(&("Seccomp".to_string(), Some("0".to_string()))),
        "{zygote:?}"
    );
}

type Fields = Vec<(String, Option<String>)>;

/// A spare holds exactly what the running backend holds, and that is real
/// confinement: a filter, `no_new_privs`, no effective capability, limits.
fn check_armed(spare: &Fields, backend: &Fields, limits: &[String], backend_limits: &[String]) {
    assert_eq!(spare, backend);
    let field = |f: &str| {
        spare
            .iter()
            .find(|(n, _)| n == f)
            .and_then(|(_, v)| v.clone())
    };
    assert_eq!(field("NoNewPrivs").as_deref(), Some("1"), "{spare:?}");
    assert_eq!(
        field("CapEff").as_deref(),
        Some("0000000000000000"),
        "{spare:?}"
    );
    assert_eq!(limits.len(), 5, "{limits:?}");
    assert_eq!(limits, backend_limits);
}

#[test]
fn the_next_runs_init_is_armed_before_its_call_as_me() {
    the_next_runs_init_is_armed_before_its_call(Who::Me);
}

#[test]
fn the_next_runs_init_is_armed_before_its_call_for_an_unprivileged_user() {
    the_next_runs_init_is_armed_before_its_call(Who::Unprivileged);
}
