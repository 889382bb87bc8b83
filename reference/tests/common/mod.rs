//! Shared harness: a fresh copy of examples/workspace in a temporary folder,
//! the real binary run in it, and one known-good invocation per command.

#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

pub const BIN: &str = env!("CARGO_BIN_EXE_reachweaver-reference");

fn example_workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("examples")
        .join("workspace")
}

fn copy_dir(src: &Path, dst: &Path) {
    fs::create_dir_all(dst).unwrap();
    for entry in fs::read_dir(src).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        let name_s = name.to_string_lossy();
        // A database left in the source folder by a manual run is not copied.
        if name_s.contains(".db") {
            continue;
        }
        let target = dst.join(&name);
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// The finished run of the binary.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// stdout as exactly one JSON document on one line.
    pub fn json(&self) -> Value {
        assert_eq!(
            self.stdout.lines().count(),
            1,
            "expected one line of JSON, got {:?} (stderr {:?})",
            self.stdout,
            self.stderr
        );
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}): {:?}", self.stdout))
    }

    /// Asserts exit 2 with exactly the contract's error document, and returns its code.
    pub fn error_code(&self) -> String {
        assert_eq!(self.code, 2, "expected exit 2: {self:?}");
        let doc = self.json();
        let obj = doc.as_object().expect("error document is an object");
        assert_eq!(obj.len(), 1, "only the error key: {doc}");
        let err = doc["error"].as_object().expect("error is an object");
        assert_eq!(err.len(), 2, "only code and message: {doc}");
        let message = err["message"].as_str().expect("message is a string");
        assert!(
            !message.is_empty() && !message.contains('\n'),
            "one sentence: {message:?}"
        );
        let code = err["code"].as_str().expect("code is a string");
        assert!(
            !code.is_empty() && code.chars().all(|c| c.is_ascii_lowercase() || c == '_'),
            "snake_case code: {code:?}"
        );
        code.to_string()
    }
}

pub struct Workspace {
    _dir: tempfile::TempDir,
    pub home: PathBuf,
}

impl Workspace {
    /// A copy of the example workspace with its database created by `init`.
    pub fn new() -> Self {
        let ws = Workspace::without_db();
        let run = ws.run(&["init", "--format=json"]);
        assert_eq!(run.code, 0, "init failed: {run:?}");
        ws
    }

    /// A copy of the example workspace with no database.
    pub fn without_db() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("workspace");
        copy_dir(&example_workspace(), &home);
        assert!(!home.join("data").join("reachweaver.db").exists());
        Workspace { _dir: dir, home }
    }

    pub fn db(&self) -> PathBuf {
        self.home.join("data").join("reachweaver.db")
    }

    pub fn path(&self, rel: &str) -> String {
        self.home.join(rel).to_string_lossy().into_owned()
    }

    /// Runs `--home=HOME ARGS...` with the workspace as working folder.
    pub fn run(&self, args: &[&str]) -> Run {
        let home = format!("--home={}", self.home.display());
        let mut argv = vec![home.as_str()];
        argv.extend_from_slice(args);
        self.run_raw(&argv, &self.home, &[])
    }

    /// Runs the binary with exactly `argv`, in `cwd`, with extra variables.
    pub fn run_raw(&self, argv: &[&str], cwd: &Path, env: &[(&str, &str)]) -> Run {
        let mut cmd = Command::new(BIN);
        cmd.args(argv)
            .current_dir(cwd)
            .env_remove("REACHWEAVER_HOME")
            .stdin(Stdio::null());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().expect("the binary runs");
        Run {
            code: out.status.code().expect("exited, not killed"),
            stdout: String::from_utf8(out.stdout).expect("stdout is UTF-8"),
            stderr: String::from_utf8(out.stderr).expect("stderr is UTF-8"),
        }
    }

    /// Runs `command`, its flags, `--format=json`, then `--` and its positionals.
    pub fn run_json(&self, inv: &Invocation) -> Run {
        let mut args = vec![inv.command];
        args.extend_from_slice(inv.flags);
        args.push("--format=json");
        args.push("--");
        args.extend_from_slice(inv.positionals);
        self.run(&args)
    }
}

/// A valid call of one command against the example workspace with its
/// database, and the exit code it must give there.
pub struct Invocation {
    pub command: &'static str,
    pub flags: &'static [&'static str],
    pub positionals: &'static [&'static str],
    pub exit: i32,
}

const fn inv(
    command: &'static str,
    flags: &'static [&'static str],
    positionals: &'static [&'static str],
    exit: i32,
) -> Invocation {
    Invocation {
        command,
        flags,
        positionals,
        exit,
    }
}

/// One invocation per command in the catalog, with its expected exit code.
pub const INVOCATIONS: &[Invocation] = &[
    inv("version", &[], &[], 0),
    inv("context", &["--note=hello"], &[], 0),
    inv("describe", &[], &["version", "trace"], 0),
    inv("start", &[], &[], 0),
    inv("doctor", &[], &[], 1),
    inv("capabilities", &[], &[], 0),
    inv(
        "account-summary",
        &["--channel=x", "--channel=linkedin"],
        &[],
        0,
    ),
    inv("brand-summary", &[], &[], 0),
    inv("settings", &[], &[], 0),
    inv("log-summary", &[], &["logs/reachweaver.log"], 1),
    inv("error-explain", &[], &["database_missing"], 0),
    inv(
        "campaign-check",
        &["--days=30", "--channel=x"],
        &["campaigns/spring-launch.yaml"],
        0,
    ),
    inv(
        "campaign-preview",
        &[],
        &["campaigns/spring-launch.yaml"],
        0,
    ),
    inv(
        "distribution-plan",
        &["--days=7"],
        &["campaigns/spring-launch.yaml"],
        0,
    ),
    inv("readiness", &[], &["campaigns/spring-launch.yaml"], 1),
    inv("claims-check", &[], &["drafts/webinar-invite.txt"], 1),
    inv(
        "voice-check",
        &["--max-length=280"],
        &["drafts/launch-x.txt"],
        0,
    ),
    inv(
        "repeat-check",
        &["--threshold=0.8"],
        &["drafts/launch-recap.txt"],
        1,
    ),
    inv(
        "length-check",
        &["--channel=x"],
        &["drafts/launch-x.txt"],
        0,
    ),
    inv(
        "hashtag-check",
        &["--max-hashtags=2"],
        &["drafts/launch-x.txt"],
        0,
    ),
    inv("link-extract", &[], &["drafts/webinar-invite.txt"], 0),
    inv(
        "template-render",
        &[
            "--var=event=The March webinar",
            "--var=when=Monday",
            "--var=link=https://reachweaver.example/webinar",
        ],
        &["templates/reminder.txt"],
        0,
    ),
    inv("policy-check", &[], &["drafts/launch-announcement.txt"], 0),
    inv("ops-summary", &["--since=2026-02-25"], &[], 0),
    inv("trace", &[], &["d-0001"], 0),
    inv("queue-status", &[], &[], 1),
    inv("approval-status", &[], &[], 0),
    inv("calendar", &["--days=7"], &[], 0),
    inv("slot-suggest", &["--channel=x"], &[], 0),
    inv("metrics-summary", &["--channel=linkedin"], &[], 0),
    inv("list", &["--status=draft"], &[], 0),
    inv("show", &[], &["d-0007"], 0),
    inv("check", &[], &[], 1),
    inv("init", &[], &[], 2),
    inv(
        "draft",
        &["--channel=x", "--text=A calm post about the calendar."],
        &["campaigns/spring-launch.yaml"],
        0,
    ),
    inv("credentials-audit", &[], &[], 0),
    inv("link-health", &[], &["drafts/launch-x.txt"], 0),
    inv(
        "landing-check",
        &[],
        &["https://reachweaver.example/2-0"],
        0,
    ),
    inv(
        "seo-content-check",
        &["--keyword=social scheduling"],
        &["drafts/launch-x.txt"],
        0,
    ),
    inv("approve", &["--comment=fine"], &["d-0005"], 0),
    inv("schedule", &["--at=2026-03-09T09:00"], &["d-0005"], 0),
    inv("publish", &[], &["d-0003"], 0),
    inv("pause", &[], &["d-0003"], 0),
    inv("resume", &[], &["d-0010"], 0),
    inv("reconcile", &[], &[], 0),
    inv("reconnect", &["--channel=bluesky"], &[], 0),
    inv("connect", &["--channel=mastodon"], &[], 0),
    inv("approval-mode", &[], &["always"], 0),
    inv("setup", &[], &[], 0),
    inv("report-text", &[], &[], 2),
    inv("contacts-summary", &["--segment=customer"], &[], 0),
    inv("mcp-serve", &[], &[], 0),
];

pub fn invocation(command: &str) -> &'static Invocation {
    INVOCATIONS
        .iter()
        .find(|i| i.command == command)
        .unwrap_or_else(|| panic!("no invocation for {command}"))
}

/// The catalog's commands as JSON objects.
pub fn catalog_commands(ws: &Workspace) -> Vec<Value> {
    let run = ws.run(&["describe", "--format=json"]);
    assert_eq!(run.code, 0, "{run:?}");
    run.json()["commands"].as_array().unwrap().clone()
}

pub fn tags(command: &Value) -> Vec<String> {
    command["tags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap().to_string())
        .collect()
}
