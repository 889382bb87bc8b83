//! `draft` adds one row and nothing else; `init` creates and refuses to replace.

mod common;

use common::Workspace;
use rusqlite::{Connection, OpenFlags};

fn open(ws: &Workspace) -> Connection {
    Connection::open_with_flags(ws.db(), OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap()
}

fn count(ws: &Workspace, table: &str) -> i64 {
    open(ws)
        .query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
        .unwrap()
}

#[test]
fn draft_inserts_one_row_and_prints_its_id() {
    let ws = Workspace::new();
    assert_eq!(count(&ws, "drafts"), 12);
    let campaign = ws.path("campaigns/spring-launch.yaml");
    let run = ws.run(&[
        "draft",
        "--channel=bluesky",
        "--text=A calendar for every channel, with the approvals in it.",
        "--title=Calendar teaser",
        "--reply-to=https://bsky.example/post/1",
        "--format=json",
        "--",
        &campaign,
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    let doc = run.json();
    assert_eq!(doc["id"], "d-0013");
    assert_eq!(doc["status"], "draft");
    assert_eq!(doc["campaign"], "spring-launch");
    assert_eq!(count(&ws, "drafts"), 13);
    let row: (String, String, String, String, String, Option<String>, i64) = open(&ws)
        .query_row(
            "SELECT campaign_id, channel, title, body, status, reply_to, flagged FROM drafts WHERE id = 'd-0013'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?)),
        )
        .unwrap();
    assert_eq!(
        row,
        (
            "spring-launch".into(),
            "bluesky".into(),
            "Calendar teaser".into(),
            "A calendar for every channel, with the approvals in it.".into(),
            "draft".into(),
            Some("https://bsky.example/post/1".into()),
            0
        )
    );
    // The new draft has a history, visible to the read-only trace command.
    let trace = ws.run(&["trace", "--format=json", "--", "d-0013"]);
    assert_eq!(trace.code, 0);
    assert_eq!(trace.json()["events"][0]["kind"], "created");
    // Nothing but the database is left in its folder.
    let mut names: Vec<String> = std::fs::read_dir(ws.home.join("data"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, vec![".keep", "reachweaver.db"]);
}

#[test]
fn a_draft_with_claims_is_saved_flagged_unless_overridden() {
    let ws = Workspace::new();
    let campaign = ws.path("campaigns/spring-launch.yaml");
    let flagged = ws.run(&[
        "draft",
        "--channel=x",
        "--text=Guaranteed reach, 50% more clicks.",
        "--format=json",
        "--",
        &campaign,
    ]);
    assert_eq!(flagged.code, 1, "{flagged:?}");
    let doc = flagged.json();
    assert_eq!(doc["status"], "flagged");
    let rules: Vec<&str> = doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["rule"].as_str().unwrap())
        .collect();
    assert_eq!(rules, vec!["absolute_claim", "unsourced_percentage"]);

    let overridden = ws.run(&[
        "draft",
        "--channel=x",
        "--text=Guaranteed reach, 50% more clicks.",
        "--override-flagged",
        "--format=json",
        "--",
        &campaign,
    ]);
    assert_eq!(overridden.code, 0, "{overridden:?}");
    assert_eq!(overridden.json()["status"], "draft");
    assert_eq!(overridden.json()["id"], "d-0014");
    assert_eq!(count(&ws, "drafts"), 14);
}

#[test]
fn draft_refuses_a_channel_outside_the_campaign_and_writes_nothing() {
    let ws = Workspace::new();
    let before = std::fs::read(ws.db()).unwrap();
    let campaign = ws.path("campaigns/customer-stories.json");
    let run = ws.run(&[
        "draft",
        "--channel=mastodon",
        "--text=Hello.",
        "--format=json",
        "--",
        &campaign,
    ]);
    assert_eq!(run.error_code(), "bad_argument");
    let run = ws.run(&["draft", "--text=Hello.", "--format=json", "--", &campaign]);
    assert_eq!(run.error_code(), "bad_argument", "--channel is required");
    assert_eq!(std::fs::read(ws.db()).unwrap(), before);
}

#[test]
fn init_refuses_to_replace_and_force_restores_the_example_data() {
    let ws = Workspace::new();
    let campaign = ws.path("campaigns/spring-launch.yaml");
    ws.run(&[
        "draft",
        "--channel=x",
        "--text=One more.",
        "--format=json",
        "--",
        &campaign,
    ]);
    assert_eq!(count(&ws, "drafts"), 13);
    assert_eq!(
        ws.run(&["init", "--format=json"]).error_code(),
        "already_exists"
    );
    assert_eq!(count(&ws, "drafts"), 13);
    let run = ws.run(&["init", "--force", "--format=json"]);
    assert_eq!(run.code, 0);
    let doc = run.json();
    assert_eq!(doc["tables"]["drafts"], 12);
    assert_eq!(doc["tables"]["posts"], 5);
    assert_eq!(count(&ws, "drafts"), 12);
    let mode: String = open(&ws)
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "delete");
}
