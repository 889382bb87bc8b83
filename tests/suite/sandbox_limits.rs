//! Resource bombs inside `sandbox run` fail on their own limits and leave
//! nothing behind, and normal programs keep working under the same limits.

use std::io::Read;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::support::mcp::HANG_GUARD;

use crate::support::sandbox::{
    kill_marker, output_within, pids_with_marker, text, wait_until, Who, World,
};

const PYTHON: &str = "/usr/bin/python3";

/// Forks sleeping children until fork fails, then reports how many it got.
const FORK_BOMB: &str = r#"
import os, sys, time
kids = []
err = "none"
for _ in range(2000):
    try:
        pid = os.fork()
    except OSError as e:
        err = e.strerror
        break
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    kids.append(pid)
print(len(kids), err)
sys.stdout.flush()
"#;

fn fork_bomb(who: Who) {
    let w = World::new();
    let root = w.folder("root");
    let marker = crate::support::sandbox::marker("forkbomb");
    let mut cmd = w.cmd(who, &root);
    cmd.args(["sandbox", "run", "--", PYTHON, "-c", FORK_BOMB, &marker]);
    let out = output_within(cmd, Duration::from_secs(120));
    let stdout = text(&out.stdout);
    let (count, err) = stdout
        .trim()
        .split_once(' ')
        .unwrap_or_else(|| panic!("{stdout:?} {}", text(&out.stderr)));
    let count: usize = count.parse().unwrap();
    assert_eq!(err, "Resource temporarily unavailable", "{stdout}");
    // 256 processes per user namespace for unprivileged owners; real root
    // is exempt from RLIMIT_NPROC and stopped by the namespace's pid_max.
    let limit = if who == Who::Me && crate::support::sandbox::is_root() {
        512
    } else {
        256
    };
    assert!(count > 10 && count < limit, "{count} children");
    // The run returned: every child it left died with its PID namespace.
    // Each would sleep 60 s: half of that is room enough for a busy machine
    // to reap them, and too short for a survivor to end by itself.
    assert!(
        wait_until(Duration::from_secs(30), || pids_with_marker(&marker)
            .is_empty()),
        "children outlived the run"
    );
}

#[test]
fn a_fork_bomb_is_contained() {
    fork_bomb(Who::Me);
}

#[test]
fn a_fork_bomb_is_contained_for_an_unprivileged_user() {
    fork_bomb(Who::Unprivileged);
}

#[test]
fn a_memory_bomb_gets_enomem() {
    let w = World::new();
    let root = w.folder("root");
    let mut cmd = w.cmd(Who::Me, &root);
    cmd.args([
        "sandbox",
        "run",
        "--",
        PYTHON,
        "-c",
        "import mmap\nmaps = []\ntry:\n    for i in range(16):\n        maps.append(mmap.mmap(-1, 1 << 30))\n    print('mapped', len(maps))\nexcept (MemoryError, OSError) as e:\n    print('stopped at', len(maps), type(e).__name__)\n\
         try:\n    b = bytearray(6 << 30)\n    print('ALLOCATED')\nexcept MemoryError:\n    print('MemoryError')",
    ]);
    let out = output_within(cmd, Duration::from_secs(60));
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines[0].starts_with("stopped at "), "{stdout}");
    let n: usize = lines[0].split(' ').nth(2).unwrap().parse().unwrap();
    assert!(
        n < 4,
        "the 4 GiB address-space limit must stop the mappings: {stdout}"
    );
    assert_eq!(lines[1], "MemoryError");
}

#[test]
fn a_file_size_bomb_stops_at_the_limit() {
    let w = World::new();
    let root = w.folder("root");
    let mut cmd = w.cmd(Who::Me, &root);
    cmd.args([
        "sandbox",
        "run",
        "--",
        PYTHON,
        "-c",
        "import os, signal\nsignal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n\
         f = open(os.environ['TMPDIR'] + '/big', 'wb')\nchunk = b'x' * (1 << 20)\nn = 0\n\
         try:\n    for _ in range(200):\n        f.write(chunk); f.flush(); n += 1\n    print('WROTE', n)\n\
         except OSError as e:\n    print('stopped', e.strerror)",
    ]);
    let out = output_within(cmd, Duration::from_secs(60));
    assert_eq!(
        text(&out.stdout).trim(),
        "stopped File too large",
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn an_output_flood_is_killed_with_its_whole_run() {
    let w = World::new();
    let root = w.folder("root");
    let marker = crate::support::sandbox::marker("flood");
    let mut cmd = w.cmd(Who::Me, &root);
    // `yes MARKER` floods stdout and carries the marker.
    cmd.args(["sandbox", "run", "--", "/usr/bin/yes", &marker])
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut server = crate::support::sandbox::spawn(&mut cmd);
    let mut stdout = server.stdout.take().unwrap();
    let mut buf = vec![0u8; 1 << 16];
    let mut total = 0usize;
    while total < 16 << 20 {
        let n = stdout.read(&mut buf).unwrap();
        assert!(n > 0, "the flood ended by itself");
        total += n;
    }
    // The reader stops; the flooding run must not outlive it.
    drop(stdout);
    let t = Instant::now();
    let status = loop {
        if let Some(s) = server.try_wait().unwrap() {
            break s;
        }
        // The flood never ends by itself; the wait only guards against a hang.
        if t.elapsed() > HANG_GUARD {
            let _ = server.kill();
            kill_marker(&marker);
            panic!("sandbox run kept running after its reader went away");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(!status.success());
    assert!(
        wait_until(HANG_GUARD, || pids_with_marker(&marker).is_empty()),
        "the flooding process survived"
    );
    assert!(crate::support::sandbox::run_folders_of(server.id()).is_empty());
}
