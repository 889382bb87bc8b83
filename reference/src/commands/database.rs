//! Commands that read the database: the state of drafts, their history, the
//! queue, approvals, the calendar, free slots and metrics.
//!
//! Each opens the database read-only; a missing database is an error that
//! tells the owner to run `init`, never a reason to create one.

use std::collections::BTreeMap;

use rusqlite::{params, Connection, OptionalExtension};
use serde_json::{json, Map, Value};

use super::{Ctx, Outcome};
use crate::args::Args;
use crate::dates::Date;
use crate::error::CliError;
use crate::spec::{ArgSpec, CommandSpec, DefaultValue, CHANNELS};

const READ_ONLY: &[&str] = &["read_only"];

pub const STATUSES: &[&str] = &[
    "draft",
    "flagged",
    "awaiting_approval",
    "approved",
    "scheduled",
    "published",
    "paused",
    "failed",
];

pub fn specs() -> Vec<CommandSpec> {
    vec![
        CommandSpec::new(
            "ops-summary",
            "Count drafts by status, posts published and events since a date.",
            READ_ONLY,
            ops_summary,
        )
        .flag(ArgSpec::string("--since", "Only count what happened on or after this date (YYYY-MM-DD).")),
        CommandSpec::new(
            "trace",
            "Show a draft's full history: its events, approval, schedule slot and published post.",
            READ_ONLY,
            trace,
        )
        .positional(ArgSpec::string("draft_id", "The draft's id, like d-0001.").required()),
        CommandSpec::new(
            "queue-status",
            "Show the posting queue: what is queued, paused or failed, and what needs attention.",
            READ_ONLY,
            queue_status,
        )
        .flag(ArgSpec::channel("Only these channels.").repeatable()),
        CommandSpec::new(
            "approval-status",
            "List drafts waiting for approval and the decisions already taken.",
            READ_ONLY,
            approval_status,
        )
        .flag(ArgSpec::boolean("--pending-only", "Leave out the decisions already taken.")),
        CommandSpec::new(
            "calendar",
            "Show scheduled and published posts day by day.",
            READ_ONLY,
            calendar,
        )
        .flag(ArgSpec::string("--from", "First day to show (YYYY-MM-DD); the first scheduled day when not given."))
        .flag(
            ArgSpec::integer("--days", 1, 90, "How many days to show.")
                .default(DefaultValue::Integer(14)),
        ),
        CommandSpec::new(
            "slot-suggest",
            "Suggest free weekday posting slots from the brand's posting windows and the current schedule.",
            READ_ONLY,
            slot_suggest,
        )
        .flag(ArgSpec::channel("Only these channels.").repeatable())
        .flag(ArgSpec::string("--from", "First day to consider (YYYY-MM-DD); the first scheduled day when not given."))
        .flag(
            ArgSpec::integer("--days", 1, 60, "How many days to consider.")
                .default(DefaultValue::Integer(7)),
        )
        .flag(
            ArgSpec::integer("--limit", 1, 100, "The most suggestions to list.")
                .default(DefaultValue::Integer(10)),
        ),
        CommandSpec::new(
            "metrics-summary",
            "Sum impressions, engagements, clicks and replies of published posts, by channel.",
            READ_ONLY,
            metrics_summary,
        )
        .flag(ArgSpec::channel("Only this channel."))
        .flag(ArgSpec::boolean(
            "--include-individuals",
            "Also list the people who engaged most, by handle.",
        )),
    ]
}

fn date_flag(args: &Args, name: &str) -> Result<Option<Date>, CliError> {
    match args.text(name) {
        None => Ok(None),
        Some(raw) => Date::parse(raw).map(Some).ok_or_else(|| {
            CliError::bad_argument(format!(
                "{name} must be a date written YYYY-MM-DD, not {raw:?}."
            ))
        }),
    }
}

fn ops_summary(ctx: &Ctx, args: &Args) -> Result<Outcome, CliError> {
    let since = date_flag(args, "--since")?;
    let since_text = since.map(|d| d.to_string()).unwrap_or_default();
    let conn = ctx.db_read_only()?;
    let mut by_status = Map::new();
    let mut total = 0i64;
    for status in STATUSES {
        let n: i64 = conn.query_row(
            "SELECT count(*) FROM drafts WHERE status = ?1 AND created_on >= ?2",
            params![status, since_text],
            |r| r.get(0),
        )?;
        total += n;
        by_status.insert((*status).to_string(), json!(n));
    }
    let published: i64 = conn.query_row(
        "SELECT count(*) FROM posts WHERE published_on >= ?1",
        [&since_text],
        |r| r.get(0),
    )?;
    let mut events = Map::new();
    let mut stmt = conn.prepare(
        "SELECT kind, count(*) FROM events WHERE substr(happened_at, 1, 10) >= ?1 GROUP BY kind ORDER BY kind",
    )?;
    for row in stmt.query_map([&since_text], |r| {
        Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?))
    })? {
        let (kind, n) = row?;
        events.insert(kind, json!(n));
    }
    let mut queue = Map::new();
    for state in ["queued", "paused", "failed"] {
        let n: i64 = conn.query_row(
            "SELECT count(*) FROM schedule WHERE state = ?1",
            [state],
            |r| r.get(0),
        )?;
        queue.insert(state.to_string(), json!(n));
    }
    Ok(Outcome::clean(json!({
        "since": since.map(|d| d.to_string()),
        "drafts": {"total": total, "by_status": by_status},
        "published": published,
        "events": events,
        "queue": queue,
    })))
}

fn trace(ctx: &Ctx, args: &Args) -> Result<Outcome, CliError> {
    let id = args.required_text("draft_id")?;
    let conn = ctx.db_read_only()?;
    let draft = conn
        .query_row(
            "SELECT id, campaign_id, channel, title, status, created_on, reply_to, flagged FROM drafts WHERE id = ?1",
            [id],
            |r| {
                Ok(json!({
                    "id": r.get::<_, String>(0)?,
                    "campaign": r.get::<_, Option<String>>(1)?,
                    "channel": r.get::<_, String>(2)?,
                    "title": r.get::<_, Option<String>>(3)?,
                    "status": r.get::<_, String>(4)?,
                    "created_on": r.get::<_, String>(5)?,
                    "reply_to": r.get::<_, Option<String>>(6)?,
                    "flagged": r.get::<_, i64>(7)? != 0,
                }))
            },
        )
        .optional()?
        .ok_or_else(|| CliError::not_found(format!("There is no draft with id {id:?}; `list` shows the drafts.")))?;
    let mut stmt = conn.prepare(
        "SELECT happened_at, kind, actor, detail FROM events WHERE draft_id = ?1 ORDER BY happened_at, id",
    )?;
    let events = stmt
        .query_map([id], |r| {
            Ok(json!({
                "at": r.get::<_, String>(0)?,
                "kind": r.get::<_, String>(1)?,
                "actor": r.get::<_, String>(2)?,
                "detail": r.get::<_, Option<String>>(3)?,
            }))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    let approval = conn
        .query_row(
            "SELECT requested_on, decided_on, decision, approver, note FROM approvals WHERE draft_id = ?1",
            [id],
            |r| {
                Ok(json!({
                    "requested_on": r.get::<_, String>(0)?,
                    "decided_on": r.get::<_, Option<String>>(1)?,
                    "decision": r.get::<_, Option<String>>(2)?,
                    "approver": r.get::<_, Option<String>>(3)?,
                    "note": r.get::<_, Option<String>>(4)?,
                }))
            },
        )
        .optional()?;
    let schedule = conn
        .query_row(
            "SELECT channel, slot, state FROM schedule WHERE draft_id = ?1",
            [id],
            |r| {
                Ok(json!({
                    "channel": r.get::<_, String>(0)?,
                    "slot": r.get::<_, String>(1)?,
                    "state": r.get::<_, String>(2)?,
                }))
            },
        )
        .optional()?;
    let post = conn
        .query_row(
            "SELECT id, published_on, url FROM posts WHERE draft_id = ?1",
            [id],
            |r| {
                Ok(json!({
                    "id": r.get::<_, String>(0)?,
                    "published_on": r.get::<_, String>(1)?,
                    "url": r.get::<_, Option<String>>(2)?,
                }))
            },
        )
        .optional()?;
    Ok(Outcome::clean(json!({
        "draft": draft,
        "events": events,
        "approval": approval,
        "schedule": schedule,
        "post": post,
    })))
}

fn last_event_detail(conn: &Connection, id: &str) -> Result<Option<String>, CliError> {
    Ok(conn
        .query_row(
            "SELECT detail FROM events WHERE draft_id = ?1 ORDER BY happened_at DESC, id DESC LIMIT 1",
            [id],
            |r| r.get::<_, Option<String>>(0),
        )
        .optional()?
        .flatten())
}

fn queue_status(ctx: &Ctx, args: &Args) -> Result<Outcome, CliError> {
    let only = args.texts("--channel");
    let conn = ctx.db_read_only()?;
    let mut stmt = conn.prepare(
        "SELECT s.draft_id, s.channel, s.slot, s.state, d.title FROM schedule s LEFT JOIN drafts d ON d.id = s.draft_id ORDER BY s.slot, s.channel, s.draft_id",
    )?;
    let rows = stmt
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, Option<String>>(4)?,
            ))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    let mut counts: BTreeMap<&str, usize> =
        [("queued", 0), ("paused", 0), ("failed", 0), ("sent", 0)]
            .into_iter()
            .collect();
    let mut items = Vec::new();
    let mut attention = Vec::new();
    for (draft, channel, slot, state, title) in &rows {
        if !only.is_empty() && !only.contains(&channel.as_str()) {
            continue;
        }
        if let Some(n) = counts.get_mut(state.as_str()) {
            *n += 1;
        }
        if state == "sent" {
            continue;
        }
        items.push(json!({"draft": draft, "channel": channel, "slot": slot, "state": state, "title": title}));
        if state == "failed" || state == "paused" {
            attention.push(json!({
                "draft": draft,
                "state": state,
                "detail": last_event_detail(&conn, draft)?,
            }));
        }
    }
    let failed = counts.get("failed").copied().unwrap_or(0);
    Ok(Outcome::findings_if(
        failed > 0,
        json!({
            "items": items,
            "counts": counts,
            "needs_attention": attention,
        }),
    ))
}

fn approval_status(ctx: &Ctx, args: &Args) -> Result<Outcome, CliError> {
    let conn = ctx.db_read_only()?;
    let mut stmt = conn.prepare(
        "SELECT a.draft_id, d.channel, d.title, a.requested_on, a.decided_on, a.decision, a.approver, a.note FROM approvals a JOIN drafts d ON d.id = a.draft_id ORDER BY a.requested_on, a.draft_id",
    )?;
    let rows = stmt
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, Option<String>>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, Option<String>>(4)?,
                r.get::<_, Option<String>>(5)?,
                r.get::<_, Option<String>>(6)?,
                r.get::<_, Option<String>>(7)?,
            ))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    let mut pending = Vec::new();
    let mut decided = Vec::new();
    let (mut approved, mut rejected) = (0, 0);
    for (draft, channel, title, requested, decided_on, decision, approver, note) in rows {
        match decision.as_deref() {
            None => pending.push(json!({
                "draft": draft, "channel": channel, "title": title, "requested_on": requested,
            })),
            Some(d) => {
                if d == "approved" {
                    approved += 1;
                } else {
                    rejected += 1;
                }
                decided.push(json!({
                    "draft": draft, "channel": channel, "title": title, "requested_on": requested,
                    "decided_on": decided_on, "decision": d, "approver": approver, "note": note,
                }));
            }
        }
    }
    let mut doc = json!({
        "counts": {"pending": pending.len(), "approved": approved, "rejected": rejected},
        "pending": pending,
    });
    if !args.switch("--pending-only") {
        doc["decided"] = json!(decided);
    }
    Ok(Outcome::clean(doc))
}

/// The first scheduled day, the anchor of date ranges when no --from is given.
fn first_scheduled_day(conn: &Connection) -> Result<Option<Date>, CliError> {
    let first: Option<String> =
        conn.query_row("SELECT min(substr(slot, 1, 10)) FROM schedule", [], |r| {
            r.get(0)
        })?;
    Ok(first.as_deref().and_then(Date::parse))
}

fn calendar(ctx: &Ctx, args: &Args) -> Result<Outcome, CliError> {
    let conn = ctx.db_read_only()?;
    let days = args.integer("--days").unwrap_or(14);
    let Some(from) = date_flag(args, "--from")?.or(first_scheduled_day(&conn)?) else {
        return Ok(Outcome::clean(
            json!({"from": null, "to": null, "days": [], "entries": 0}),
        ));
    };
    let to = from.add_days(days - 1);
    let (from_s, to_s) = (from.to_string(), to.to_string());
    let mut by_day: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    let mut stmt = conn.prepare(
        "SELECT substr(s.slot, 1, 10), substr(s.slot, 12, 5), s.channel, s.draft_id, s.state, d.title FROM schedule s LEFT JOIN drafts d ON d.id = s.draft_id WHERE substr(s.slot, 1, 10) BETWEEN ?1 AND ?2 ORDER BY s.slot, s.channel, s.draft_id",
    )?;
    for row in stmt.query_map(params![from_s, to_s], |r| {
        Ok((
            r.get::<_, String>(0)?,
            json!({
                "time": r.get::<_, String>(1)?,
                "channel": r.get::<_, String>(2)?,
                "draft": r.get::<_, String>(3)?,
                "state": r.get::<_, String>(4)?,
                "title": r.get::<_, Option<String>>(5)?,
            }),
        ))
    })? {
        let (day, entry) = row?;
        by_day.entry(day).or_default().push(entry);
    }
    // Posts published without going through the queue (imported history).
    let mut stmt = conn.prepare(
        "SELECT published_on, channel, id FROM posts WHERE (draft_id IS NULL OR draft_id NOT IN (SELECT draft_id FROM schedule)) AND published_on BETWEEN ?1 AND ?2 ORDER BY published_on, channel, id",
    )?;
    for row in stmt.query_map(params![from_s, to_s], |r| {
        Ok((
            r.get::<_, String>(0)?,
            json!({
                "time": null,
                "channel": r.get::<_, String>(1)?,
                "post": r.get::<_, String>(2)?,
                "state": "published",
            }),
        ))
    })? {
        let (day, entry) = row?;
        by_day.entry(day).or_default().push(entry);
    }
    let mut entries = 0;
    let list: Vec<Value> = (0..days)
        .map(|offset| {
            let day = from.add_days(offset);
            let items = by_day.remove(&day.to_string()).unwrap_or_default();
            entries += items.len();
            json!({"date": day.to_string(), "weekday": day.weekday(), "entries": items})
        })
        .collect();
    Ok(Outcome::clean(json!({
        "from": from_s,
        "to": to_s,
        "entries": entries,
        "days": list,
    })))
}

const DEFAULT_WINDOWS: &[(&str, &[&str])] = &[
    ("x", &["09:00", "12:30", "17:00"]),
    ("linkedin", &["08:30", "12:00"]),
    ("bluesky", &["10:00", "15:00"]),
    ("mastodon", &["10:00", "18:00"]),
];

fn slot_suggest(ctx: &Ctx, args: &Args) -> Result<Outcome, CliError> {
    let conn = ctx.db_read_only()?;
    let brand = ctx.brand_if_present()?;
    let days = args.integer("--days").unwrap_or(7);
    let limit = usize::try_from(args.integer("--limit").unwrap_or(10)).unwrap_or(10);
    let only = args.texts("--channel");
    let channels: Vec<&str> = CHANNELS
        .iter()
        .copied()
        .filter(|c| only.is_empty() || only.contains(c))
        .collect();
    let Some(from) = date_flag(args, "--from")?.or(first_scheduled_day(&conn)?) else {
        return Err(CliError::bad_argument(
            "The schedule is empty, so give --from=YYYY-MM-DD to say where to start.",
        ));
    };
    let mut busy_days: Vec<(String, String)> = Vec::new();
    let mut stmt =
        conn.prepare("SELECT channel, substr(slot, 1, 10) FROM schedule WHERE state != 'failed'")?;
    for row in stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))? {
        busy_days.push(row?);
    }
    let mut suggestions = Vec::new();
    let mut skipped_busy = 0;
    'days: for offset in 0..days {
        let day = from.add_days(offset);
        if matches!(day.weekday(), "saturday" | "sunday") {
            continue;
        }
        let day_s = day.to_string();
        for channel in &channels {
            if busy_days.iter().any(|(c, d)| c == channel && *d == day_s) {
                skipped_busy += 1;
                continue;
            }
            let windows: Vec<String> = brand
                .as_ref()
                .and_then(|b| b.posting_windows.get(*channel).cloned())
                .unwrap_or_else(|| {
                    DEFAULT_WINDOWS
                        .iter()
                        .find(|(c, _)| c == channel)
                        .map(|(_, w)| w.iter().map(|s| s.to_string()).collect())
                        .unwrap_or_default()
                });
            if let Some(time) = windows.first() {
                suggestions.push(json!({
                    "date": day_s, "weekday": day.weekday(), "time": time, "channel": channel,
                }));
                if suggestions.len() >= limit {
                    break 'days;
                }
            }
        }
    }
    Ok(Outcome::clean(json!({
        "from": from.to_string(),
        "days": days,
        "channels": channels,
        "busy_channel_days": skipped_busy,
        "suggestions": suggestions,
    })))
}

fn rate(engagements: i64, impressions: i64) -> f64 {
    if impressions == 0 {
        return 0.0;
    }
    ((engagements as f64 / impressions as f64) * 10_000.0).round() / 10_000.0
}

fn metrics_summary(ctx: &Ctx, args: &Args) -> Result<Outcome, CliError> {
    let conn = ctx.db_read_only()?;
    let channel = args.text("--channel");
    let filter = channel.unwrap_or("");
    let mut stmt = conn.prepare(
        "SELECT p.channel, count(DISTINCT p.id), sum(m.impressions), sum(m.engagements), sum(m.clicks), sum(m.replies) FROM posts p JOIN metrics m ON m.post_id = p.id WHERE ?1 = '' OR p.channel = ?1 GROUP BY p.channel ORDER BY p.channel",
    )?;
    let rows = stmt
        .query_map([filter], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, i64>(2)?,
                r.get::<_, i64>(3)?,
                r.get::<_, i64>(4)?,
                r.get::<_, i64>(5)?,
            ))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    let mut totals = [0i64; 5];
    let per_channel: Vec<Value> = rows
        .iter()
        .map(|(ch, posts, imp, eng, clicks, replies)| {
            for (t, v) in totals.iter_mut().zip([posts, imp, eng, clicks, replies]) {
                *t += v;
            }
            json!({
                "channel": ch, "posts": posts, "impressions": imp, "engagements": eng,
                "clicks": clicks, "replies": replies, "engagement_rate": rate(*eng, *imp),
            })
        })
        .collect();
    let top = conn
        .query_row(
            "SELECT p.id, p.channel, sum(m.engagements) AS e FROM posts p JOIN metrics m ON m.post_id = p.id WHERE ?1 = '' OR p.channel = ?1 GROUP BY p.id ORDER BY e DESC, p.id LIMIT 1",
            [filter],
            |r| {
                Ok(json!({
                    "post": r.get::<_, String>(0)?,
                    "channel": r.get::<_, String>(1)?,
                    "engagements": r.get::<_, i64>(2)?,
                }))
            },
        )
        .optional()?;
    let mut doc = json!({
        "channel": channel,
        "totals": {
            "posts": totals[0], "impressions": totals[1], "engagements": totals[2],
            "clicks": totals[3], "replies": totals[4], "engagement_rate": rate(totals[2], totals[1]),
        },
        "per_channel": per_channel,
        "top_post": top,
    });
    if args.switch("--include-individuals") {
        let mut stmt = conn.prepare(
            "SELECT e.handle, e.display_name, sum(e.interactions) AS n FROM engagers e JOIN posts p ON p.id = e.post_id WHERE ?1 = '' OR p.channel = ?1 GROUP BY e.handle, e.display_name ORDER BY n DESC, e.handle",
        )?;
        let people = stmt
            .query_map([filter], |r| {
                Ok(json!({
                    "handle": r.get::<_, String>(0)?,
                    "name": r.get::<_, String>(1)?,
                    "interactions": r.get::<_, i64>(2)?,
                }))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        doc["engagers"] = json!(people);
    }
    Ok(Outcome::clean(doc))
}
