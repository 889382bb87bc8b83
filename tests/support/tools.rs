//! Shared harness for the `tools_*` tests: a fresh workspace per test and a
//! way to run the real binary against the `shelfcheck` fake backend.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

use super::{fixture, server_bin};

/// The fake backend; it must be executable or every test here fails.
pub fn fake_backend() -> PathBuf {
    let p = fixture("shelfcheck");
    let mode = fs::metadata(&p)
        .unwrap_or_else(|e| panic!("fake backend {} missing: {e}", p.display()))
        .permissions()
        .mode();
    assert!(
        mode & 0o111 != 0,
        "fake backend {} is not executable",
        p.display()
    );
    p
}

/// A workspace: `root/` (shared with tools) and `state/shelf.db` (the
/// backend's database, outside the root, which the fake backend appends a
/// "ran COMMAND" line to on every run that may write there).
pub struct Workspace {
    pub dir: tempfile::TempDir,
    pub root: PathBuf,
    pub db: PathBuf,
}

impl Workspace {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let base = dir.path().canonicalize().expect("canonical temp dir");
        let root = base.join("root");
        let state = base.join("state");
        fs::create_dir_all(&root).unwrap();
        fs::create_dir_all(&state).unwrap();
        let db = state.join("shelf.db");
        fs::write(&db, "").unwrap();
        Workspace { dir, root, db }
    }

    /// The binary with `--backend`, `--db` and a clean environment for the knobs.
    pub fn command(&self) -> Command {
        let mut c = Command::new(server_bin());
        c.arg("--backend")
            .arg(fake_backend())
            .arg("--db")
            .arg(&self.db)
            .current_dir(&self.root)
            .env_remove("REACHWEAVER_FAKE_CATALOG")
            .env_remove("REACHWEAVER_FAKE_HOME")
            .env_remove("SHELF_API_TOKEN");
        c
    }

    /// `tools [extra...] --sandbox best-effort --root ROOT`.
    pub fn tools(&self, extra: &[&str]) -> Output {
        let mut c = self.command();
        c.arg("tools")
            .args(extra)
            .args(["--sandbox", "best-effort", "--root"])
            .arg(&self.root);
        c.output().expect("run reachweaver-mcp")
    }

    /// `call TOOL --args-json ARGS [extra...] --sandbox best-effort --root ROOT`.
    pub fn call(&self, tool: &str, args: &str, extra: &[&str]) -> CallResult {
        let mut c = self.command();
        c.args(["call", tool, "--args-json", args])
            .args(extra)
            .args(["--sandbox", "best-effort", "--root"])
            .arg(&self.root);
        CallResult::from(c.output().expect("run reachweaver-mcp"))
    }

    /// The commands the fake backend recorded as run (when it could write).
    pub fn ran(&self) -> Vec<String> {
        fs::read_to_string(&self.db)
            .unwrap()
            .lines()
            .filter_map(|l| l.strip_prefix("ran ").map(str::to_string))
            .collect()
    }
}

pub struct CallResult {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub envelope: Value,
}

impl From<Output> for CallResult {
    fn from(out: Output) -> Self {
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let envelope = serde_json::from_str(stdout.trim()).unwrap_or(Value::Null);
        CallResult {
            code: out.status.code().unwrap_or(-1),
            stdout,
            stderr,
            envelope,
        }
    }
}

impl CallResult {
    pub fn error_code(&self) -> &str {
        self.envelope["output"]["error"]["code"]
            .as_str()
            .unwrap_or("")
    }

    pub fn error_message(&self) -> &str {
        self.envelope["output"]["error"]["message"]
            .as_str()
            .unwrap_or("")
    }

    /// An `isError` envelope with this code, and exit status 2.
    pub fn assert_error(&self, code: &str) {
        assert_eq!(
            self.code, 2,
            "exit status; stdout {} stderr {}",
            self.stdout, self.stderr
        );
        assert_eq!(self.envelope["exit_code"], 2, "{}", self.stdout);
        assert_eq!(
            self.error_code(),
            code,
            "stdout {} stderr {}",
            self.stdout,
            self.stderr
        );
    }

    /// The one `call tool=...` log line.
    pub fn log_line(&self) -> &str {
        let lines: Vec<&str> = self
            .stderr
            .lines()
            .filter(|l| l.starts_with("call tool="))
            .collect();
        assert_eq!(
            lines.len(),
            1,
            "exactly one call log line in: {}",
            self.stderr
        );
        lines[0]
    }
}
