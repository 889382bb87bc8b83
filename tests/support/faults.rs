//! What the fault-tolerance tests share: a server on the `faulty` backend
//! with a private temp folder, unique markers for the processes a fault
//! leaves running, and /proc scans that prove those processes are gone.

use std::fs;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use super::mcp::{modern, req, Server, HANG_GUARD};
use super::{fixture, server_bin};

/// The misbehaving backend (tests/fixtures/faults/faulty).
pub fn faulty() -> PathBuf {
    fixture("faults/faulty")
}

/// A server on `faulty`, with its own home and its own system temp folder
/// (so per-run temp folders can be counted), plus what keeps them alive.
pub struct Faulty {
    pub server: Server,
    /// `home/` (the root, read by the backend) and `tmp/` (the server's TMPDIR).
    pub dir: tempfile::TempDir,
    markers: Vec<String>,
}

impl Faulty {
    pub fn start(extra: &[&str]) -> Self {
        Self::start_env(extra, &[])
    }

    pub fn start_env(extra: &[&str], vars: &[(&str, &str)]) -> Self {
        Self::start_prepared(extra, vars, |_| {})
    }

    /// Like `start_env`, with `prepare` run on the home folder before the
    /// server starts (and so before it reads the catalog).
    pub fn start_prepared(
        extra: &[&str],
        vars: &[(&str, &str)],
        prepare: impl FnOnce(&std::path::Path),
    ) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("rwmcp-faults-")
            .tempdir()
            .expect("temp dir");
        let home = dir.path().join("home");
        let tmp = dir.path().join("tmp");
        fs::create_dir_all(&home).expect("home");
        fs::create_dir_all(&tmp).expect("tmp");
        prepare(&home);
        let mut cmd = Command::new(server_bin());
        cmd.arg(format!("--backend={}", faulty().display()))
            .arg(format!("--home={}", home.display()))
            .arg("mcp-serve")
            .args(extra)
            .current_dir(&home)
            .env("TMPDIR", &tmp)
            .env_remove("REACHWEAVER_FAULT_CATALOG");
        for (k, v) in vars {
            cmd.env(k, v);
        }
        Faulty {
            server: Server::spawn(cmd),
            dir,
            markers: Vec::new(),
        }
    }

    pub fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    pub fn tmp(&self) -> PathBuf {
        self.dir.path().join("tmp")
    }

    /// A marker unique to this test run; whatever carries it is killed on drop.
    pub fn marker(&mut self, what: &str) -> String {
        let m = marker(what);
        self.markers.push(m.clone());
        m
    }

    /// Call `tool` with `--marker` and return the result object.
    pub fn call(&mut self, id: Value, tool: &str, args: Value) -> Value {
        let r = self.server.request(modern(
            id,
            "tools/call",
            json!({"name": tool, "arguments": args}),
        ));
        assert!(r.get("result").is_some(), "not a result: {r}");
        r["result"].clone()
    }

    /// The call must end in an error result with exactly this code.
    pub fn expect_error(&mut self, tool: &str, args: Value, code: &str) -> Value {
        let res = self.call(json!(format!("call-{tool}")), tool, args);
        assert_eq!(res["isError"], true, "{res}");
        let envelope = &res["structuredContent"];
        assert_eq!(envelope["exit_code"], 2, "{res}");
        assert_eq!(envelope["output"]["error"]["code"], code, "{res}");
        let message = envelope["output"]["error"]["message"]
            .as_str()
            .expect("a message");
        assert!(
            message.len() > 10,
            "a message that says something: {message}"
        );
        // The text item is the same envelope, serialized.
        let text: Value = serde_json::from_str(res["content"][0]["text"].as_str().expect("text"))
            .expect("the text item is JSON");
        assert_eq!(&text, envelope);
        res
    }

    /// The server still answers.
    pub fn ping(&mut self) {
        let id = json!(format!("ping-{}", next()));
        let r = self.server.request(req(id.clone(), "ping", json!({})));
        assert_eq!(r["result"], json!({}), "{r}");
        let r = self.server.request(modern(
            json!(format!("list-{}", next())),
            "tools/list",
            json!({}),
        ));
        assert!(r["result"]["tools"].is_array(), "{r}");
    }

    /// No per-run temp folder is left in the server's temp folder (the
    /// live server's own lock file, which names its run folders, stays).
    pub fn assert_no_leftover_tmp(&self) {
        let left: Vec<String> = fs::read_dir(self.tmp())
            .expect("tmp")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| !(n.starts_with("reachweaver-srv-") && n.ends_with(".lock")))
            .collect();
        assert!(left.is_empty(), "left in the server's TMPDIR: {left:?}");
    }
}

impl Drop for Faulty {
    fn drop(&mut self) {
        // A failed test must not leave its lingering processes behind.
        for m in &self.markers {
            for pid in pids_with(m) {
                // SAFETY: kill(2) on a pid found by its unique marker.
                unsafe {
                    libc::kill(pid as i32, libc::SIGKILL);
                }
            }
        }
    }
}

fn next() -> u64 {
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

pub fn marker(what: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("rwfault-{what}-{}-{nanos}-{}", std::process::id(), next())
}

/// Live processes whose command line contains `marker`.
pub fn pids_with(marker: &str) -> Vec<u32> {
    all_pids()
        .into_iter()
        .filter(|&pid| {
            fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|cmdline| {
                cmdline
                    .windows(marker.len())
                    .any(|w| w == marker.as_bytes())
            }) && !is_zombie(pid)
        })
        .collect()
}

fn is_zombie(pid: u32) -> bool {
    status_field(pid, "State").is_some_and(|s| s.starts_with('Z'))
}

/// A field of /proc/PID/status, e.g. `Threads` or `PPid`.
pub fn status_field(pid: u32, field: &str) -> Option<String> {
    let text = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .map(|v| v.trim().to_string())
}

/// Poll `cond` until it holds or `limit` passes; returns how long it took.
pub fn wait_for(limit: Duration, mut cond: impl FnMut() -> bool) -> Option<Duration> {
    let t = Instant::now();
    loop {
        if cond() {
            return Some(t.elapsed());
        }
        if t.elapsed() > limit {
            return None;
        }
        thread::sleep(Duration::from_millis(10));
    }
}

/// Wait until something carrying `marker` runs (the fault got going).
pub fn assert_running(marker: &str) {
    assert!(
        wait_for(HANG_GUARD, || !pids_with(marker).is_empty()).is_some(),
        "nothing carrying {marker} ever ran"
    );
}

/// Nothing carrying `marker` survives the call. A killed process may take
/// a while to be reaped on a busy machine; what the faults leave carrying
/// a marker never ends by itself, so the wait (a guard against a hang, not
/// a bound) cannot let a survivor pass.
pub fn assert_gone(marker: &str) {
    let took = wait_for(HANG_GUARD, || pids_with(marker).is_empty());
    assert!(
        took.is_some(),
        "processes carrying {marker} outlived the call: {:?}",
        pids_with(marker)
            .iter()
            .map(|p| fs::read(format!("/proc/{p}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
                .unwrap_or_default())
            .collect::<Vec<_>>()
    );
}

/// Children of `pid` that are zombies.
pub fn zombie_children(pid: u32) -> Vec<u32> {
    children_of(pid)
        .into_iter()
        .filter(|&c| is_zombie(c))
        .collect()
}

/// Children of `pid` that have not exited.
pub fn live_children_of(pid: u32) -> Vec<u32> {
    children_of(pid)
        .into_iter()
        .filter(|&c| status_field(c, "State").is_some_and(|st| !st.starts_with('Z')))
        .collect()
}

/// Every child of `pid`, zombies included: the processes whose `PPid` is it.
pub fn children_of(pid: u32) -> Vec<u32> {
    let parent = pid.to_string();
    all_pids()
        .into_iter()
        .filter(|&c| status_field(c, "PPid").as_deref() == Some(parent.as_str()))
        .collect()
}

/// The command line of `pid`, its arguments split at their NUL bytes
/// (empty when the process is gone).
pub fn cmdline_args(pid: u32) -> Vec<Vec<u8>> {
    fs::read(format!("/proc/{pid}/cmdline"))
        .unwrap_or_default()
        .split(|&b| b == 0)
        .map(<[u8]>::to_vec)
        .collect()
}

/// Every process id /proc lists now.
pub fn all_pids() -> Vec<u32> {
    let Ok(dir) = fs::read_dir("/proc") else {
        panic!("/proc is not readable; these tests need it");
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()))
        .collect()
}

pub fn fd_count(pid: u32) -> usize {
    fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("the server's fd folder")
        .count()
}

/// The descriptor number the kernel would hand `pid` next: the lowest one
/// not open.
pub fn lowest_free_fd(pid: u32) -> usize {
    let open: std::collections::BTreeSet<usize> = fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("the server's fd folder")
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    (0..).find(|n| !open.contains(n)).unwrap()
}

pub fn thread_count(pid: u32) -> usize {
    status_field(pid, "Threads")
        .and_then(|t| t.parse().ok())
        .expect("the server's thread count")
}
