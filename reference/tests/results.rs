//! Exact answers on the example workspace, so a change in any check shows.

mod common;

use common::Workspace;
use serde_json::{json, Value};

fn run_json(ws: &Workspace, args: &[&str], exit: i32) -> Value {
    let run = ws.run(args);
    assert_eq!(run.code, exit, "{args:?}: {run:?}");
    run.json()
}

fn pluck<'a>(doc: &'a Value, list: &str, field: &str) -> Vec<&'a str> {
    doc[list]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f[field].as_str().unwrap())
        .collect()
}

#[test]
fn claims_check_finds_the_webinar_invites_claims() {
    let ws = Workspace::new();
    let doc = run_json(
        &ws,
        &[
            "claims-check",
            "--format=json",
            "--",
            "drafts/webinar-invite.txt",
        ],
        1,
    );
    let found: Vec<(String, String, u64, u64)> = doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["rule"].as_str().unwrap().into(),
                f["text"].as_str().unwrap().into(),
                f["line"].as_u64().unwrap(),
                f["column"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        found,
        vec![
            ("absolute_claim".into(), "Guaranteed".into(), 1, 33),
            ("unsourced_percentage".into(), "40%".into(), 2, 11),
            ("superlative".into(), "best in class".into(), 2, 36),
        ]
    );
    let clean = run_json(
        &ws,
        &[
            "claims-check",
            "--format=json",
            "--",
            "drafts/customer-story-acme.txt",
        ],
        0,
    );
    assert_eq!(clean["count"], 0);
}

#[test]
fn voice_and_hashtag_checks_use_the_brand_file() {
    let ws = Workspace::new();
    let doc = run_json(
        &ws,
        &[
            "voice-check",
            "--format=json",
            "--",
            "drafts/webinar-invite.txt",
        ],
        1,
    );
    assert_eq!(
        pluck(&doc, "findings", "rule"),
        vec![
            "banned_word",
            "too_many_exclamations",
            "preferred_term",
            "shouting"
        ]
    );
    let doc = run_json(
        &ws,
        &[
            "hashtag-check",
            "--format=json",
            "--",
            "drafts/webinar-invite.txt",
        ],
        1,
    );
    assert_eq!(doc["count"], 5);
    assert_eq!(
        pluck(&doc, "findings", "rule"),
        vec!["duplicate_hashtag", "too_many_hashtags", "banned_hashtag"]
    );
    let doc = run_json(
        &ws,
        &[
            "voice-check",
            "--max-length=50",
            "--format=json",
            "--",
            "drafts/launch-x.txt",
        ],
        1,
    );
    assert_eq!(pluck(&doc, "findings", "rule"), vec!["too_long"]);
}

#[test]
fn campaign_check_lists_the_problems_of_the_broken_campaign() {
    let ws = Workspace::new();
    let doc = run_json(
        &ws,
        &[
            "campaign-check",
            "--format=json",
            "--",
            "campaigns/webinar-series.yaml",
        ],
        1,
    );
    assert_eq!(
        pluck(&doc, "errors", "field"),
        vec![
            "ends_on",
            "accounts.x",
            "channels",
            "posts[1].at",
            "posts[2].on",
            "posts[2].draft",
            "posts[3].at"
        ]
    );
    assert_eq!(
        pluck(&doc, "warnings", "field"),
        vec!["goal", "posts[2].at"]
    );
}

#[test]
fn strict_and_days_change_the_campaign_check() {
    let ws = Workspace::new();
    let file = "campaigns/customer-stories.json";
    let lenient = run_json(&ws, &["campaign-check", "--format=json", "--", file], 0);
    assert_eq!(lenient["warnings"].as_array().unwrap().len(), 1);
    let strict = run_json(
        &ws,
        &["campaign-check", "--strict", "--format=json", "--", file],
        1,
    );
    assert_eq!(strict["strict"], true);
    let short = run_json(
        &ws,
        &[
            "campaign-check",
            "--format=json",
            "--",
            "campaigns/spring-launch.yaml",
        ],
        0,
    );
    assert_eq!(
        (
            short["posts_checked"].as_u64(),
            short["posts_beyond_window"].as_u64()
        ),
        (Some(4), Some(1))
    );
    assert_eq!(
        short["window"],
        json!({"from": "2026-03-02", "to": "2026-03-15", "days": 14})
    );
}

#[test]
fn ops_summary_counts_by_status() {
    let ws = Workspace::new();
    let doc = run_json(&ws, &["ops-summary", "--format=json"], 0);
    assert_eq!(
        doc["drafts"]["by_status"],
        json!({"draft": 1, "flagged": 1, "awaiting_approval": 2, "approved": 1, "scheduled": 2,
               "published": 3, "paused": 1, "failed": 1})
    );
    assert_eq!(doc["drafts"]["total"], 12);
    assert_eq!(doc["published"], 5);
    let since = run_json(
        &ws,
        &["ops-summary", "--since=2026-03-01", "--format=json"],
        0,
    );
    assert_eq!(since["published"], 2);
    assert_eq!(since["drafts"]["total"], 0);
}

#[test]
fn trace_shows_a_drafts_history_in_order() {
    let ws = Workspace::new();
    let doc = run_json(&ws, &["trace", "--format=json", "--", "d-0009"], 0);
    assert_eq!(
        pluck(&doc, "events", "kind"),
        vec!["created", "approved", "scheduled", "failed"]
    );
    assert_eq!(doc["schedule"]["state"], "failed");
    assert_eq!(doc["post"], Value::Null);
    let published = run_json(&ws, &["trace", "--format=json", "--", "d-0001"], 0);
    assert_eq!(published["post"]["id"], "p-0104");
}

#[test]
fn repeat_check_finds_the_published_launch_post() {
    let ws = Workspace::new();
    let doc = run_json(
        &ws,
        &[
            "repeat-check",
            "--format=json",
            "--",
            "drafts/launch-recap.txt",
        ],
        1,
    );
    assert_eq!(
        doc["matches"],
        json!([{"post": "p-0104", "channel": "linkedin", "published_on": "2026-03-02", "similarity": 0.92}])
    );
    let strict = run_json(
        &ws,
        &[
            "repeat-check",
            "--threshold=0.95",
            "--format=json",
            "--",
            "drafts/launch-recap.txt",
        ],
        0,
    );
    assert_eq!(strict["matches"], json!([]));
    assert_eq!(strict["closest"]["post"], "p-0104");
}

#[test]
fn log_summary_prints_the_text_of_error_lines() {
    let ws = Workspace::new();
    let doc = run_json(
        &ws,
        &["log-summary", "--format=json", "--", "logs/reachweaver.log"],
        1,
    );
    assert_eq!(
        doc["levels"],
        json!({"ERROR": 2, "WARN": 2, "INFO": 5, "DEBUG": 1, "other": 0})
    );
    assert_eq!(
        pluck(&doc, "errors", "text"),
        vec![
            "2026-03-03T12:00:03Z ERROR publish: d-0009 to x failed: 403 duplicate content",
            "2026-03-04T07:31:12Z ERROR metrics: mastodon instance fosstodon.example timed out after 30s",
        ]
    );
    let tail = run_json(
        &ws,
        &[
            "log-summary",
            "--tail=3",
            "--format=json",
            "--",
            "logs/reachweaver.log",
        ],
        1,
    );
    assert_eq!(tail["lines"], 3);
    assert_eq!(tail["levels"]["ERROR"], 1);
}

#[test]
fn no_command_prints_a_stored_token() {
    let ws = Workspace::new();
    let token = "rwx_live_7Qm2VtB9kLp4Xn8Rz3Hd6Wc1Ys5Jf0Ga";
    assert!(std::fs::read_to_string(ws.home.join("accounts.yaml"))
        .unwrap()
        .contains(token));
    let doc = run_json(&ws, &["account-summary", "--format=json"], 0);
    assert_eq!(
        pluck(&doc, "accounts", "channel"),
        vec!["x", "linkedin", "bluesky", "mastodon"]
    );
    for inv in common::INVOCATIONS {
        let run = ws.run_json(inv);
        assert!(
            !run.stdout.contains(token),
            "{} printed the token",
            inv.command
        );
    }
    let run = ws.run(&["account-summary", "--with-token-check", "--format=json"]);
    assert!(!run.stdout.contains(token));
    assert_eq!(run.json()["accounts"][0]["token_looks_usable"], true);
}

#[test]
fn settings_leave_out_secret_keys() {
    let ws = Workspace::new();
    let run = ws.run(&["settings", "--format=json"]);
    assert_eq!(run.code, 0);
    assert!(!run.stdout.contains("not-a-real-password"));
    let doc = run.json();
    assert_eq!(doc["withheld_keys"], json!(["notifications.smtp_password"]));
    assert_eq!(doc["settings"]["timezone"], "Europe/Berlin");
}

#[test]
fn readiness_and_queue_reflect_the_database() {
    let ws = Workspace::new();
    let doc = run_json(
        &ws,
        &[
            "readiness",
            "--format=json",
            "--",
            "campaigns/spring-launch.yaml",
        ],
        1,
    );
    assert_eq!(
        pluck(&doc, "blockers", "detail"),
        vec![
            "d-0005 on x is awaiting_approval",
            "d-0011 on linkedin is awaiting_approval"
        ]
    );
    let ready = run_json(
        &ws,
        &[
            "readiness",
            "--format=json",
            "--",
            "campaigns/customer-stories.json",
        ],
        0,
    );
    assert_eq!(ready["ready"], true);
    let queue = run_json(&ws, &["queue-status", "--format=json"], 1);
    assert_eq!(
        queue["counts"],
        json!({"failed": 1, "paused": 1, "queued": 3, "sent": 2})
    );
    assert_eq!(
        pluck(&queue, "needs_attention", "draft"),
        vec!["d-0009", "d-0010"]
    );
}

#[test]
fn metrics_withhold_individuals_unless_asked() {
    let ws = Workspace::new();
    let doc = run_json(&ws, &["metrics-summary", "--format=json"], 0);
    assert_eq!(doc["totals"]["impressions"], 40200);
    assert_eq!(doc["top_post"]["post"], "p-0104");
    assert!(doc.get("engagers").is_none());
    let with = run_json(
        &ws,
        &[
            "metrics-summary",
            "--include-individuals",
            "--channel=x",
            "--format=json",
        ],
        0,
    );
    assert_eq!(
        pluck(&with, "engagers", "handle"),
        vec!["@opsnerd", "@jordanlee"]
    );
}

#[test]
fn template_render_fills_and_reports_placeholders() {
    let ws = Workspace::new();
    let doc = run_json(
        &ws,
        &[
            "template-render",
            "--var=product=ReachWeaver",
            "--var=version=2.0",
            "--var=extra=1",
            "--format=json",
            "--",
            "templates/launch.txt",
        ],
        1,
    );
    assert_eq!(
        doc["text"],
        "ReachWeaver 2.0 is here. {{headline}} Try it: {{link}}"
    );
    assert_eq!(doc["unresolved"], json!(["headline", "link"]));
    assert_eq!(doc["unused_vars"], json!(["extra"]));
}

#[test]
fn distribution_plan_flags_two_posts_on_one_channel_and_day() {
    let ws = Workspace::new();
    let doc = run_json(
        &ws,
        &[
            "distribution-plan",
            "--days=3",
            "--format=json",
            "--",
            "campaigns/webinar-series.yaml",
        ],
        1,
    );
    assert_eq!(
        doc["conflicts"],
        json!([{"date": "2026-03-16", "channel": "linkedin", "posts": 2}])
    );
    let plan = run_json(
        &ws,
        &[
            "distribution-plan",
            "--days=5",
            "--format=json",
            "--",
            "campaigns/spring-launch.yaml",
        ],
        0,
    );
    assert_eq!(plan["days"].as_array().unwrap().len(), 5);
    assert_eq!(plan["days"][0]["weekday"], "monday");
    assert_eq!(plan["quiet_days"], 2);
}
