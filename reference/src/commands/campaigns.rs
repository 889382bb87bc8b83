//! Commands that read a campaign file: its checks, a preview of its posts,
//! their spread over the days, and whether it is ready to schedule.
//!
//! A campaign's dates come from the file itself, never from a clock, so the
//! same file always gets the same answer.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::drafts::policy_findings;
use super::{Ctx, Outcome};
use crate::analysis::{channel_length, channel_limit};
use crate::args::Args;
use crate::dates::{valid_time, Date};
use crate::error::CliError;
use crate::files;
use crate::spec::{ArgSpec, CommandSpec, DefaultValue, CHANNELS};

const READ_ONLY: &[&str] = &["read_only"];

fn campaign_arg() -> ArgSpec {
    ArgSpec::path("campaign", "Campaign file (YAML or JSON).").required()
}

fn days_flag(default: i64) -> ArgSpec {
    ArgSpec::integer(
        "--days",
        1,
        365,
        "How many days from the campaign's start to look at.",
    )
    .default(DefaultValue::Integer(default))
}

pub fn specs() -> Vec<CommandSpec> {
    vec![
        CommandSpec::new(
            "campaign-check",
            "Check a campaign file for missing fields, bad dates, unknown channels and accounts, and missing drafts.",
            READ_ONLY,
            campaign_check,
        )
        .positional(campaign_arg())
        .flag(ArgSpec::boolean("--strict", "Treat warnings as findings."))
        .flag(days_flag(14))
        .flag(ArgSpec::channel("Only check posts on these channels.").repeatable())
        .flag(
            ArgSpec::boolean("--online", "Also fetch every link in the campaign (uses the network).")
                .network(),
        ),
        CommandSpec::new(
            "campaign-preview",
            "Show each post of a campaign as it would go out, with its length against the channel's limit.",
            READ_ONLY,
            campaign_preview,
        )
        .positional(campaign_arg())
        .flag(ArgSpec::channel("Only preview posts on these channels.").repeatable()),
        CommandSpec::new(
            "distribution-plan",
            "Lay a campaign's posts out day by day and flag days with two posts on one channel.",
            READ_ONLY,
            distribution_plan,
        )
        .positional(campaign_arg())
        .flag(days_flag(14)),
        CommandSpec::new(
            "readiness",
            "Say whether a campaign is ready to schedule: file errors, draft policy findings and pending approvals.",
            READ_ONLY,
            readiness,
        )
        .positional(campaign_arg()),
    ]
}

/// One post entry of a campaign file, as written.
#[derive(Debug, Clone)]
struct Post {
    index: usize,
    draft: Option<String>,
    channel: Option<String>,
    on: Option<String>,
    at: Option<String>,
}

impl Post {
    fn date(&self) -> Option<Date> {
        self.on.as_deref().and_then(Date::parse)
    }
}

/// A campaign file with the fields the commands use.
struct Campaign {
    doc: Value,
    id: Option<String>,
    starts_on: Option<Date>,
    ends_on: Option<Date>,
    channels: Vec<String>,
    posts: Vec<Post>,
}

fn text_field(value: &Value, key: &str) -> Option<String> {
    match value.get(key) {
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    }
}

fn load_campaign(ctx: &Ctx, given: &Path) -> Result<Campaign, CliError> {
    let path = ctx.file_arg(given);
    let doc = files::load_document(&path)?;
    if !doc.is_object() {
        return Err(CliError::invalid_file(
            &path,
            "a campaign must be a mapping of fields",
        ));
    }
    let channels = match doc.get("channels") {
        Some(Value::Array(items)) => items
            .iter()
            .map(|c| c.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| CliError::invalid_file(&path, "channels must be a list of names"))?,
        None | Some(Value::Null) => Vec::new(),
        Some(_) => {
            return Err(CliError::invalid_file(
                &path,
                "channels must be a list of names",
            ))
        }
    };
    let posts = match doc.get("posts") {
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(index, p)| {
                if !p.is_object() {
                    return Err(CliError::invalid_file(
                        &path,
                        format!("posts[{index}] must be a mapping"),
                    ));
                }
                Ok(Post {
                    index,
                    draft: text_field(p, "draft"),
                    channel: text_field(p, "channel"),
                    on: text_field(p, "on"),
                    at: text_field(p, "at"),
                })
            })
            .collect::<Result<Vec<_>, _>>()?,
        None | Some(Value::Null) => Vec::new(),
        Some(_) => return Err(CliError::invalid_file(&path, "posts must be a list")),
    };
    Ok(Campaign {
        id: text_field(&doc, "id"),
        starts_on: text_field(&doc, "starts_on")
            .as_deref()
            .and_then(Date::parse),
        ends_on: text_field(&doc, "ends_on").as_deref().and_then(Date::parse),
        channels,
        posts,
        doc,
    })
}

#[derive(Debug, Clone)]
struct Issue {
    severity: &'static str,
    field: String,
    message: String,
}

impl Issue {
    fn error(field: impl Into<String>, message: impl Into<String>) -> Self {
        Issue {
            severity: "error",
            field: field.into(),
            message: message.into(),
        }
    }

    fn warning(field: impl Into<String>, message: impl Into<String>) -> Self {
        Issue {
            severity: "warning",
            field: field.into(),
            message: message.into(),
        }
    }

    fn to_json(&self) -> Value {
        json!({"field": self.field, "message": self.message})
    }
}

/// The draft file a post names, relative to the workspace.
fn draft_path(ctx: &Ctx, draft: &str) -> PathBuf {
    super::absolute(Path::new(draft), &ctx.paths.home)
}

struct CheckResult {
    issues: Vec<Issue>,
    checked: usize,
    beyond_window: usize,
    window: Option<(Date, Date)>,
}

fn check_campaign(
    ctx: &Ctx,
    c: &Campaign,
    days: i64,
    only: &[&str],
) -> Result<CheckResult, CliError> {
    let mut issues = Vec::new();
    for key in ["id", "name", "starts_on", "ends_on", "channels", "posts"] {
        if c.doc.get(key).is_none_or(Value::is_null) {
            issues.push(Issue::error(key, format!("{key} is missing.")));
        }
    }
    for key in ["goal", "owner"] {
        if c.doc.get(key).is_none_or(Value::is_null) {
            issues.push(Issue::warning(
                key,
                format!("{key} is not set; say it so reviewers know."),
            ));
        }
    }
    for key in ["starts_on", "ends_on"] {
        if let Some(raw) = text_field(&c.doc, key) {
            if Date::parse(&raw).is_none() {
                issues.push(Issue::error(
                    key,
                    format!("{raw:?} is not a date written YYYY-MM-DD."),
                ));
            }
        }
    }
    let range_ok = match (c.starts_on, c.ends_on) {
        (Some(s), Some(e)) if e < s => {
            issues.push(Issue::error(
                "ends_on",
                format!("The campaign ends ({e}) before it starts ({s})."),
            ));
            false
        }
        (Some(_), Some(_)) => true,
        _ => false,
    };
    let accounts = ctx.accounts_if_present()?;
    let campaign_accounts = c.doc.get("accounts").and_then(Value::as_object);
    for channel in &c.channels {
        if !CHANNELS.contains(&channel.as_str()) {
            issues.push(Issue::error(
                "channels",
                format!("{channel} is not a channel this program posts to."),
            ));
            continue;
        }
        let configured: Vec<&str> = accounts
            .iter()
            .filter(|a| &a.channel == channel)
            .map(|a| a.handle.as_str())
            .collect();
        if configured.is_empty() {
            issues.push(Issue::error(
                "channels",
                format!("There is no {channel} account in the accounts file."),
            ));
            continue;
        }
        match campaign_accounts
            .and_then(|m| m.get(channel))
            .and_then(Value::as_str)
        {
            Some(handle) if !configured.contains(&handle) => issues.push(Issue::error(
                format!("accounts.{channel}"),
                format!("{handle} is not among the {channel} accounts in the accounts file."),
            )),
            Some(_) => {}
            None => issues.push(Issue::warning(
                format!("accounts.{channel}"),
                format!("No account named for {channel}; the first {channel} account is used."),
            )),
        }
    }
    let window = c.starts_on.map(|s| (s, s.add_days(days - 1)));
    let mut checked = 0;
    let mut beyond_window = 0;
    let mut slots: BTreeMap<(String, String, String), usize> = BTreeMap::new();
    for post in &c.posts {
        let field = |name: &str| format!("posts[{}].{name}", post.index);
        if !only.is_empty() && !post.channel.as_deref().is_some_and(|ch| only.contains(&ch)) {
            continue;
        }
        if let (Some(date), Some((_, last))) = (post.date(), window) {
            if date > last {
                beyond_window += 1;
                continue;
            }
        }
        checked += 1;
        match &post.channel {
            None => issues.push(Issue::error(field("channel"), "The post names no channel.")),
            Some(ch) if !c.channels.contains(ch) => issues.push(Issue::error(
                field("channel"),
                format!("{ch} is not one of the campaign's channels."),
            )),
            Some(_) => {}
        }
        match (&post.on, post.date()) {
            (None, _) => issues.push(Issue::error(field("on"), "The post has no date.")),
            (Some(raw), None) => issues.push(Issue::error(
                field("on"),
                format!("{raw:?} is not a date written YYYY-MM-DD."),
            )),
            (Some(_), Some(date)) => {
                if let (true, Some(s), Some(e)) = (range_ok, c.starts_on, c.ends_on) {
                    if date < s || date > e {
                        issues.push(Issue::error(
                            field("on"),
                            format!("{date} is outside the campaign's dates ({s} to {e})."),
                        ));
                    }
                }
            }
        }
        match &post.at {
            None => issues.push(Issue::warning(
                field("at"),
                "No time given; the first posting window of the channel is used.",
            )),
            Some(t) if !valid_time(t) => issues.push(Issue::error(
                field("at"),
                format!("{t:?} is not a time written HH:MM."),
            )),
            Some(_) => {}
        }
        match &post.draft {
            None => issues.push(Issue::error(
                field("draft"),
                "The post names no draft file.",
            )),
            Some(d) if !draft_path(ctx, d).is_file() => issues.push(Issue::error(
                field("draft"),
                format!("The draft file {d} does not exist."),
            )),
            Some(_) => {}
        }
        if let (Some(ch), Some(on), Some(at)) = (&post.channel, &post.on, &post.at) {
            let seen = slots
                .entry((ch.clone(), on.clone(), at.clone()))
                .or_insert(0);
            *seen += 1;
            if *seen == 2 {
                issues.push(Issue::error(
                    field("at"),
                    format!("Two posts go out on {ch} at {on} {at}."),
                ));
            }
        }
    }
    Ok(CheckResult {
        issues,
        checked,
        beyond_window,
        window,
    })
}

fn window_json(window: Option<(Date, Date)>, days: i64) -> Value {
    match window {
        Some((from, to)) => json!({"from": from.to_string(), "to": to.to_string(), "days": days}),
        None => Value::Null,
    }
}

fn campaign_check(ctx: &Ctx, args: &Args) -> Result<Outcome, CliError> {
    let given = args.required_path("campaign")?;
    let campaign = load_campaign(ctx, &given)?;
    let days = args.integer("--days").unwrap_or(14);
    let only = args.texts("--channel");
    let strict = args.switch("--strict");
    let result = check_campaign(ctx, &campaign, days, &only)?;
    let errors: Vec<Value> = result
        .issues
        .iter()
        .filter(|i| i.severity == "error")
        .map(Issue::to_json)
        .collect();
    let warnings: Vec<Value> = result
        .issues
        .iter()
        .filter(|i| i.severity == "warning")
        .map(Issue::to_json)
        .collect();
    let online = if args.switch("--online") {
        let links = campaign_links(ctx, &campaign);
        json!({
            "links": links,
            "fetched": 0,
            "note": "This build never uses the network; the links are listed, not fetched.",
        })
    } else {
        Value::Null
    };
    let findings = !errors.is_empty() || (strict && !warnings.is_empty());
    Ok(Outcome::findings_if(
        findings,
        json!({
            "campaign": campaign.id,
            "file": given,
            "window": window_json(result.window, days),
            "channels": if only.is_empty() { json!(campaign.channels) } else { json!(only) },
            "posts_checked": result.checked,
            "posts_beyond_window": result.beyond_window,
            "strict": strict,
            "errors": errors,
            "warnings": warnings,
            "online": online,
        }),
    ))
}

/// Every link in the campaign's drafts, in order, without duplicates.
fn campaign_links(ctx: &Ctx, campaign: &Campaign) -> Vec<String> {
    let mut links: Vec<String> = Vec::new();
    for post in &campaign.posts {
        let Some(draft) = &post.draft else { continue };
        let Ok(text) = files::read_text(&draft_path(ctx, draft)) else {
            continue;
        };
        for link in crate::analysis::links(&text) {
            if !links.contains(&link.url) {
                links.push(link.url);
            }
        }
    }
    links
}

fn campaign_preview(ctx: &Ctx, args: &Args) -> Result<Outcome, CliError> {
    let given = args.required_path("campaign")?;
    let campaign = load_campaign(ctx, &given)?;
    let only = args.texts("--channel");
    let mut problems = 0;
    let mut posts = Vec::new();
    for post in &campaign.posts {
        let channel = post.channel.as_deref().unwrap_or("");
        if !only.is_empty() && !only.contains(&channel) {
            continue;
        }
        let mut entry = json!({
            "index": post.index,
            "channel": post.channel,
            "on": post.on,
            "at": post.at,
            "draft": post.draft,
        });
        let text = match &post.draft {
            Some(d) => files::read_text(&draft_path(ctx, d)).map_err(|e| e.message().to_string()),
            None => Err("The post names no draft file.".to_string()),
        };
        match text {
            Ok(text) => {
                entry["text"] = json!(text.trim_end());
                if let Some(limit) = channel_limit(channel) {
                    let length = channel_length(&text, limit);
                    entry["length"] = json!(length);
                    entry["limit"] = json!(limit.max_chars);
                    entry["over_limit"] = json!(length > limit.max_chars);
                    if length > limit.max_chars {
                        problems += 1;
                    }
                }
            }
            Err(message) => {
                problems += 1;
                entry["error"] = json!(message);
            }
        }
        posts.push(entry);
    }
    Ok(Outcome::findings_if(
        problems > 0,
        json!({
            "campaign": campaign.id,
            "file": given,
            "posts": posts,
            "problems": problems,
        }),
    ))
}

fn distribution_plan(ctx: &Ctx, args: &Args) -> Result<Outcome, CliError> {
    let given = args.required_path("campaign")?;
    let campaign = load_campaign(ctx, &given)?;
    let days = args.integer("--days").unwrap_or(14);
    let from = campaign.starts_on.ok_or_else(|| {
        CliError::invalid_file(
            &ctx.file_arg(&given),
            "starts_on must be a date written YYYY-MM-DD",
        )
    })?;
    let to = from.add_days(days - 1);
    let mut by_day: BTreeMap<Date, Vec<&Post>> = BTreeMap::new();
    let mut undated = 0;
    let mut outside = 0;
    for post in &campaign.posts {
        match post.date() {
            Some(d) if d >= from && d <= to => by_day.entry(d).or_default().push(post),
            Some(_) => outside += 1,
            None => undated += 1,
        }
    }
    let mut per_channel: BTreeMap<String, usize> = BTreeMap::new();
    let mut conflicts = Vec::new();
    let mut plan = Vec::new();
    let mut quiet = 0;
    for offset in 0..days {
        let day = from.add_days(offset);
        let mut posts: Vec<&Post> = by_day.get(&day).cloned().unwrap_or_default();
        posts.sort_by(|a, b| (&a.at, &a.channel, a.index).cmp(&(&b.at, &b.channel, b.index)));
        if posts.is_empty() {
            quiet += 1;
        }
        let mut channel_counts: BTreeMap<&str, usize> = BTreeMap::new();
        for p in &posts {
            let ch = p.channel.as_deref().unwrap_or("unknown");
            *per_channel.entry(ch.to_string()).or_default() += 1;
            *channel_counts.entry(ch).or_default() += 1;
        }
        for (ch, n) in channel_counts {
            if n > 1 {
                conflicts.push(json!({"date": day.to_string(), "channel": ch, "posts": n}));
            }
        }
        plan.push(json!({
            "date": day.to_string(),
            "weekday": day.weekday(),
            "posts": posts.iter().map(|p| json!({"channel": p.channel, "at": p.at, "draft": p.draft})).collect::<Vec<_>>(),
        }));
    }
    Ok(Outcome::findings_if(
        !conflicts.is_empty(),
        json!({
            "campaign": campaign.id,
            "from": from.to_string(),
            "to": to.to_string(),
            "days": plan,
            "per_channel": per_channel,
            "quiet_days": quiet,
            "outside_window": outside,
            "undated": undated,
            "conflicts": conflicts,
        }),
    ))
}

fn readiness(ctx: &Ctx, args: &Args) -> Result<Outcome, CliError> {
    let given = args.required_path("campaign")?;
    let campaign = load_campaign(ctx, &given)?;
    let result = check_campaign(ctx, &campaign, 365, &[])?;
    let mut blockers = Vec::new();
    for issue in result.issues.iter().filter(|i| i.severity == "error") {
        blockers.push(
            json!({"kind": "campaign", "detail": format!("{}: {}", issue.field, issue.message)}),
        );
    }
    let brand = ctx.brand_if_present()?;
    let mut seen = Vec::new();
    for post in &campaign.posts {
        let (Some(draft), Some(channel)) = (&post.draft, &post.channel) else {
            continue;
        };
        if seen.contains(&(draft, channel)) {
            continue;
        }
        seen.push((draft, channel));
        let Ok(text) = files::read_text(&draft_path(ctx, draft)) else {
            continue;
        };
        for finding in policy_findings(&text, &[channel.as_str()], brand.as_ref(), 3) {
            blockers.push(json!({
                "kind": "draft",
                "detail": format!("{draft} on {channel}: {}", finding["message"].as_str().unwrap_or("")),
            }));
        }
    }
    if ctx.paths.db.is_file() {
        let conn = ctx.db_read_only()?;
        let mut stmt = conn.prepare(
            "SELECT id, channel, status FROM drafts WHERE campaign_id = ?1 AND status IN ('awaiting_approval', 'flagged') ORDER BY id",
        )?;
        let rows = stmt.query_map([campaign.id.as_deref().unwrap_or("")], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
            ))
        })?;
        for row in rows {
            let (id, channel, status) = row?;
            blockers.push(
                json!({"kind": "database", "detail": format!("{id} on {channel} is {status}")}),
            );
        }
    } else {
        blockers.push(
            json!({"kind": "database", "detail": "there is no database; run `reachweaver init`"}),
        );
    }
    let warnings = result
        .issues
        .iter()
        .filter(|i| i.severity == "warning")
        .count();
    Ok(Outcome::findings_if(
        !blockers.is_empty(),
        json!({
            "campaign": campaign.id,
            "file": given,
            "ready": blockers.is_empty(),
            "posts": campaign.posts.len(),
            "blockers": blockers,
            "warnings": warnings,
        }),
    ))
}
