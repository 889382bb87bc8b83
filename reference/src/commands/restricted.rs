//! The commands a server must never offer: those that write, act for the
//! owner, use the network, read credentials or ask questions, a text-only
//! report, a command with an owner-only flag, and the backend's own server.
//!
//! They exist so the catalog is as varied as a real ReachWeaver's. The ones a
//! test runs (`init`, `draft`, `list`, and the other database writers) do the
//! real work; those acting for the owner or on the network only say what they
//! would do, and never touch the database, the network or a terminal.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use rusqlite::{params, OptionalExtension};
use serde_json::{json, Value};

use super::database::STATUSES;
use super::{Ctx, Outcome};
use crate::analysis;
use crate::args::Args;
use crate::dates::Date;
use crate::error::CliError;
use crate::files;
use crate::spec::{ArgSpec, CommandSpec, CHANNELS, TEXT_ONLY};

const WRITES: &[&str] = &["writes"];
const READ_ONLY: &[&str] = &["read_only"];
const OWNER_WRITES: &[&str] = &["owner_only", "writes"];
const OWNER_WRITES_NETWORK: &[&str] = &["owner_only", "writes", "network"];
const NETWORK: &[&str] = &["read_only", "network"];

fn draft_id_arg() -> ArgSpec {
    ArgSpec::string("draft_id", "The draft's id, like d-0001.").required()
}

pub fn specs() -> Vec<CommandSpec> {
    vec![
        CommandSpec::new(
            "list",
            "List drafts with their status, creating the database when it is missing.",
            WRITES,
            list,
        )
        .flag(ArgSpec::choice(
            "--status",
            STATUSES,
            "Only drafts with this status.",
        ))
        .flag(ArgSpec::string(
            "--campaign",
            "Only drafts of this campaign id.",
        ))
        .flag(ArgSpec::channel("Only drafts for this channel.")),
        CommandSpec::new(
            "show",
            "Show one draft with its text, creating the database when it is missing.",
            WRITES,
            show,
        )
        .positional(draft_id_arg()),
        CommandSpec::new(
            "check",
            "Re-check every unapproved draft for claims and record which are flagged.",
            WRITES,
            check,
        )
        .flag(ArgSpec::string(
            "--campaign",
            "Only drafts of this campaign id.",
        )),
        CommandSpec::new(
            "init",
            "Create the database with the example data; refuses to replace one unless --force.",
            WRITES,
            init,
        )
        .flag(ArgSpec::boolean("--force", "Replace an existing database.")),
        CommandSpec::new(
            "draft",
            "Save a new draft for a campaign in the database and print its id.",
            WRITES,
            draft,
        )
        .positional(
            ArgSpec::path(
                "campaign",
                "Campaign file (YAML or JSON) the draft belongs to.",
            )
            .required(),
        )
        .flag(ArgSpec::channel("The channel the draft is for.").required())
        .flag(ArgSpec::string("--text", "The draft's text.").required())
        .flag(ArgSpec::string("--title", "A short title for lists."))
        .flag(ArgSpec::string(
            "--reply-to",
            "The URL of the post this draft answers.",
        ))
        .flag(
            ArgSpec::boolean(
                "--online",
                "Also fetch the draft's links (uses the network).",
            )
            .network(),
        )
        .flag(ArgSpec::boolean(
            "--override-flagged",
            "Save the draft as ready even if a check flags it.",
        )),
        CommandSpec::new(
            "credentials-audit",
            "Read every stored credential and report its age and scopes.",
            &["read_only", "secrets"],
            credentials_audit,
        ),
        CommandSpec::new(
            "link-health",
            "Fetch every link in a draft and report broken or redirected ones.",
            NETWORK,
            link_health,
        )
        .positional(ArgSpec::path("draft", "The draft text file.").required()),
        CommandSpec::new(
            "landing-check",
            "Fetch a landing page and check its title, preview card and load time.",
            NETWORK,
            landing_check,
        )
        .positional(ArgSpec::string("url", "The landing page's address.").required()),
        CommandSpec::new(
            "seo-content-check",
            "Compare a draft with the search results for a keyword.",
            NETWORK,
            seo_content_check,
        )
        .positional(ArgSpec::path("draft", "The draft text file.").required())
        .flag(ArgSpec::string("--keyword", "The search keyword.").required()),
        CommandSpec::new(
            "approve",
            "Approve a draft so it can be scheduled.",
            OWNER_WRITES,
            owner_action,
        )
        .positional(draft_id_arg())
        .flag(ArgSpec::string(
            "--comment",
            "A note kept with the approval.",
        )),
        CommandSpec::new(
            "schedule",
            "Put an approved draft in the posting queue at a given time.",
            OWNER_WRITES,
            owner_action,
        )
        .positional(draft_id_arg())
        .flag(ArgSpec::string("--at", "When to post, written YYYY-MM-DDTHH:MM.").required()),
        CommandSpec::new(
            "publish",
            "Post a scheduled draft now.",
            OWNER_WRITES_NETWORK,
            owner_action,
        )
        .positional(draft_id_arg()),
        CommandSpec::new(
            "pause",
            "Hold a queued draft without removing it.",
            OWNER_WRITES,
            owner_action,
        )
        .positional(draft_id_arg()),
        CommandSpec::new(
            "resume",
            "Put a paused draft back in the queue.",
            OWNER_WRITES,
            owner_action,
        )
        .positional(draft_id_arg()),
        CommandSpec::new(
            "reconcile",
            "Compare the queue with what each channel actually posted and fix the records.",
            OWNER_WRITES_NETWORK,
            owner_action,
        ),
        CommandSpec::new(
            "reconnect",
            "Renew a channel's expired credential.",
            &["owner_only", "writes", "network", "secrets"],
            owner_action,
        )
        .flag(ArgSpec::channel("The channel to reconnect.").required()),
        CommandSpec::new(
            "connect",
            "Connect a new channel account through the channel's sign-in page.",
            &["owner_only", "interactive", "writes", "network", "secrets"],
            owner_action,
        )
        .flag(ArgSpec::channel("The channel to connect.").required()),
        CommandSpec::new(
            "approval-mode",
            "Choose which drafts need an approval before they can be scheduled.",
            OWNER_WRITES,
            owner_action,
        )
        .positional(
            ArgSpec::choice(
                "mode",
                &["always", "flagged-only", "never"],
                "Which drafts need approval.",
            )
            .required(),
        ),
        CommandSpec::new(
            "setup",
            "Create a workspace by asking questions at the terminal.",
            &["interactive", "writes"],
            setup,
        ),
        CommandSpec::new(
            "report-text",
            "Print a plain-text status report of the workspace for email.",
            READ_ONLY,
            report_text,
        )
        .formats(TEXT_ONLY),
        CommandSpec::new(
            "contacts-summary",
            "Count the contacts by segment.",
            READ_ONLY,
            contacts_summary,
        )
        .flag(ArgSpec::choice(
            "--segment",
            &["customer", "prospect", "partner"],
            "Only this segment.",
        ))
        .flag(
            ArgSpec::boolean("--show-emails", "Also list each contact's email address.")
                .owner_only(),
        ),
        CommandSpec::new(
            "mcp-serve",
            "Serve this program's commands over MCP on stdio.",
            READ_ONLY,
            mcp_serve,
        ),
    ]
}

fn draft_row(r: &rusqlite::Row) -> rusqlite::Result<Value> {
    Ok(json!({
        "id": r.get::<_, String>(0)?,
        "campaign": r.get::<_, Option<String>>(1)?,
        "channel": r.get::<_, String>(2)?,
        "title": r.get::<_, Option<String>>(3)?,
        "status": r.get::<_, String>(4)?,
        "created_on": r.get::<_, String>(5)?,
    }))
}

fn list(ctx: &Ctx, args: &Args) -> Result<Outcome, CliError> {
    let conn = crate::db::open_or_create(&ctx.paths.db)?;
    let mut stmt = conn.prepare(
        "SELECT id, campaign_id, channel, title, status, created_on FROM drafts WHERE (?1 = '' OR status = ?1) AND (?2 = '' OR campaign_id = ?2) AND (?3 = '' OR channel = ?3) ORDER BY id",
    )?;
    let drafts = stmt
        .query_map(
            params![
                args.text("--status").unwrap_or(""),
                args.text("--campaign").unwrap_or(""),
                args.text("--channel").unwrap_or(""),
            ],
            draft_row,
        )?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Outcome::clean(
        json!({"count": drafts.len(), "drafts": drafts}),
    ))
}

fn show(ctx: &Ctx, args: &Args) -> Result<Outcome, CliError> {
    let id = args.required_text("draft_id")?;
    let conn = crate::db::open_or_create(&ctx.paths.db)?;
    let found = conn
        .query_row(
            "SELECT id, campaign_id, channel, title, status, created_on, body, reply_to FROM drafts WHERE id = ?1",
            [id],
            |r| {
                let mut v = draft_row(r)?;
                v["text"] = json!(r.get::<_, String>(6)?);
                v["reply_to"] = json!(r.get::<_, Option<String>>(7)?);
                Ok(v)
            },
        )
        .optional()?;
    found
        .map(Outcome::clean)
        .ok_or_else(|| CliError::not_found(format!("There is no draft with id {id:?}.")))
}

fn check(ctx: &Ctx, args: &Args) -> Result<Outcome, CliError> {
    let mut conn = crate::db::open_or_create(&ctx.paths.db)?;
    let tx = conn.transaction()?;
    let rows: Vec<(String, String, String)> = {
        let mut stmt = tx.prepare(
            "SELECT id, body, status FROM drafts WHERE status IN ('draft', 'flagged') AND (?1 = '' OR campaign_id = ?1) ORDER BY id",
        )?;
        let rows = stmt
            .query_map([args.text("--campaign").unwrap_or("")], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        rows
    };
    let mut flagged = Vec::new();
    let mut cleared = Vec::new();
    for (id, body, status) in &rows {
        let has_findings = !analysis::claims(body).is_empty();
        let new_status = if has_findings { "flagged" } else { "draft" };
        tx.execute(
            "UPDATE drafts SET status = ?1, flagged = ?2 WHERE id = ?3",
            params![new_status, i64::from(has_findings), id],
        )?;
        if has_findings {
            flagged.push(id.clone());
        } else if status == "flagged" {
            cleared.push(id.clone());
        }
    }
    tx.commit()?;
    Ok(Outcome::findings_if(
        !flagged.is_empty(),
        json!({"checked": rows.len(), "flagged": flagged, "cleared": cleared}),
    ))
}

fn init(ctx: &Ctx, args: &Args) -> Result<Outcome, CliError> {
    let tables = crate::db::init(&ctx.paths.db, args.switch("--force"))?;
    Ok(Outcome::clean(json!({
        "database": ctx.paths.db,
        "created": true,
        "tables": tables,
    })))
}

/// The current UTC time as `YYYY-MM-DDTHH:MM:SSZ`, for the record a new draft
/// keeps; it is stored, never printed.
fn now_utc() -> (String, String) {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let day = Date::from_days(i64::try_from(secs / 86_400).unwrap_or(0));
    let rem = secs % 86_400;
    (
        day.to_string(),
        format!(
            "{day}T{:02}:{:02}:{:02}Z",
            rem / 3600,
            rem % 3600 / 60,
            rem % 60
        ),
    )
}

fn draft(ctx: &Ctx, args: &Args) -> Result<Outcome, CliError> {
    let given = args.required_path("campaign")?;
    let path = ctx.file_arg(&given);
    let campaign = files::load_document(&path)?;
    let campaign_id = campaign
        .get("id")
        .and_then(Value::as_str)
        .ok_or_else(|| CliError::invalid_file(&path, "the campaign has no id"))?
        .to_string();
    let channel = args.required_text("--channel")?;
    let in_campaign = campaign
        .get("channels")
        .and_then(Value::as_array)
        .is_some_and(|chs| chs.iter().any(|c| c.as_str() == Some(channel)));
    if !in_campaign {
        return Err(CliError::bad_argument(format!(
            "{channel} is not one of the channels of campaign {campaign_id}."
        )));
    }
    let text = args.required_text("--text")?;
    if text.trim().is_empty() {
        return Err(CliError::bad_argument("--text must not be empty."));
    }
    let brand = ctx.brand_if_present()?;
    let mut findings = analysis::claims(text);
    if let Some(brand) = &brand {
        findings.extend(analysis::voice(text, brand, None));
    }
    if let Some(limit) = analysis::channel_limit(channel) {
        let length = analysis::channel_length(text, limit);
        if length > limit.max_chars {
            findings.push(analysis::Finding {
                rule: "too_long_for_channel",
                text: channel.to_string(),
                line: 1,
                column: 1,
                message: format!(
                    "{length} characters on {channel}, over its limit of {}.",
                    limit.max_chars
                ),
            });
        }
    }
    let override_flagged = args.switch("--override-flagged");
    let flagged = !findings.is_empty() && !override_flagged;
    let status = if flagged { "flagged" } else { "draft" };

    let mut conn = crate::db::open_existing_read_write(&ctx.paths.db)?;
    let tx = conn.transaction()?;
    let last: Option<i64> = tx.query_row(
        "SELECT max(CAST(substr(id, 3) AS INTEGER)) FROM drafts WHERE id LIKE 'd-%'",
        [],
        |r| r.get(0),
    )?;
    let id = format!("d-{:04}", last.unwrap_or(0) + 1);
    let (today, now) = now_utc();
    tx.execute(
        "INSERT INTO drafts (id, campaign_id, channel, title, body, status, reply_to, flagged, created_on) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        params![id, campaign_id, channel, args.text("--title"), text, status, args.text("--reply-to"), i64::from(flagged), today],
    )?;
    tx.execute(
        "INSERT INTO events (draft_id, happened_at, kind, actor, detail) VALUES (?1, ?2, 'created', 'cli', ?3)",
        params![id, now, format!("for campaign {campaign_id}")],
    )?;
    if !findings.is_empty() {
        let rules: Vec<&str> = findings.iter().map(|f| f.rule).collect();
        let kind = if flagged {
            "flagged"
        } else {
            "flag_overridden"
        };
        tx.execute(
            "INSERT INTO events (draft_id, happened_at, kind, actor, detail) VALUES (?1, ?2, ?3, 'reachweaver', ?4)",
            params![id, now, kind, rules.join(", ")],
        )?;
    }
    tx.commit()?;
    let online = if args.switch("--online") {
        json!({"fetched": 0, "note": "This build never uses the network; links were not fetched."})
    } else {
        Value::Null
    };
    Ok(Outcome::findings_if(
        flagged,
        json!({
            "id": id,
            "campaign": campaign_id,
            "channel": channel,
            "status": status,
            "title": args.text("--title"),
            "reply_to": args.text("--reply-to"),
            "findings": analysis::findings_json(&findings),
            "online": online,
        }),
    ))
}

/// What a command that is never run here would do.
fn would(command: &str, action: String, details: Value) -> Outcome {
    Outcome::clean(json!({
        "command": command,
        "would": action,
        "done": false,
        "reason": "This build only describes this command; the owner runs the real one at their own terminal.",
        "details": details,
    }))
}

fn credentials_audit(ctx: &Ctx, _args: &Args) -> Result<Outcome, CliError> {
    let accounts = ctx.accounts_if_present()?;
    let channels: Vec<&str> = accounts.iter().map(|a| a.channel.as_str()).collect();
    Ok(would(
        "credentials-audit",
        "read the stored credential of every account and report its age and scopes".into(),
        json!({"accounts": channels}),
    ))
}

fn links_of(ctx: &Ctx, given: &Path) -> Result<Vec<String>, CliError> {
    let text = files::read_text(&ctx.file_arg(given))?;
    Ok(analysis::links(&text).into_iter().map(|l| l.url).collect())
}

fn link_health(ctx: &Ctx, args: &Args) -> Result<Outcome, CliError> {
    let given = args.required_path("draft")?;
    let links = links_of(ctx, &given)?;
    Ok(would(
        "link-health",
        format!(
            "fetch {} link(s) and report broken or redirected ones",
            links.len()
        ),
        json!({"links": links}),
    ))
}

fn landing_check(_ctx: &Ctx, args: &Args) -> Result<Outcome, CliError> {
    let url = args.required_text("url")?;
    Ok(would(
        "landing-check",
        format!("fetch {url} and check its title, preview card and load time"),
        json!({"url": url}),
    ))
}

fn seo_content_check(ctx: &Ctx, args: &Args) -> Result<Outcome, CliError> {
    let given = args.required_path("draft")?;
    let links = links_of(ctx, &given)?;
    let keyword = args.required_text("--keyword")?;
    Ok(would(
        "seo-content-check",
        format!("search the web for {keyword:?} and compare the results with the draft"),
        json!({"keyword": keyword, "links": links}),
    ))
}

fn owner_action(_ctx: &Ctx, args: &Args) -> Result<Outcome, CliError> {
    // One handler serves every owner-only command; the arguments the registry
    // checked for that command say what it would act on.
    let draft = args.text("draft_id").unwrap_or("");
    let channel = args.text("--channel").unwrap_or("");
    let action = match args.command_name() {
        "approve" => format!("approve draft {draft}"),
        "schedule" => format!(
            "put draft {draft} in the queue at {}",
            args.text("--at").unwrap_or("")
        ),
        "publish" => format!("post draft {draft} now"),
        "pause" => format!("hold draft {draft} in the queue"),
        "resume" => format!("put draft {draft} back in the queue"),
        "reconcile" => "compare the queue with what each channel posted and fix the records".into(),
        "reconnect" => format!("renew the credential of the {channel} account"),
        "connect" => format!("open the {channel} sign-in page and store the new account"),
        "approval-mode" => format!(
            "set the approval mode to {}",
            args.text("mode").unwrap_or("")
        ),
        other => other.to_string(),
    };
    Ok(would(
        args.command_name(),
        action,
        json!({
            "draft": args.text("draft_id"),
            "channel": args.text("--channel"),
            "at": args.text("--at"),
            "comment": args.text("--comment"),
        }),
    ))
}

fn setup(_ctx: &Ctx, _args: &Args) -> Result<Outcome, CliError> {
    Ok(would(
        "setup",
        "ask for the brand name, the accounts and a first campaign, then write the workspace files"
            .into(),
        json!({"asks": ["brand", "accounts", "campaign"]}),
    ))
}

fn report_text(ctx: &Ctx, _args: &Args) -> Result<Outcome, CliError> {
    let home = &ctx.paths.home;
    let campaigns = files::list_files(&home.join("campaigns"), &[".yaml", ".yml", ".json"]);
    let drafts = files::list_files(&home.join("drafts"), &[".txt", ".md"]);
    let mut text = String::from("ReachWeaver status report\n\n");
    text.push_str(&format!("Campaign files: {}\n", campaigns.len()));
    for c in &campaigns {
        text.push_str(&format!("  - {}\n", files::display_relative(c, home)));
    }
    text.push_str(&format!("Draft files: {}\n", drafts.len()));
    if ctx.paths.db.is_file() {
        let conn = ctx.db_read_only()?;
        let mut stmt =
            conn.prepare("SELECT status, count(*) FROM drafts GROUP BY status ORDER BY status")?;
        text.push_str("Drafts in the database by status:\n");
        for row in stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))? {
            let (status, n) = row?;
            text.push_str(&format!("  {status}: {n}\n"));
        }
    } else {
        text.push_str("No database yet.\n");
    }
    Ok(Outcome::clean(json!({"report": text.clone()})).with_text(text))
}

fn contacts_summary(ctx: &Ctx, args: &Args) -> Result<Outcome, CliError> {
    let conn = ctx.db_read_only()?;
    let segment = args.text("--segment").unwrap_or("");
    let show_emails = args.switch("--show-emails");
    let mut stmt = conn.prepare(
        "SELECT name, email, segment, handle FROM contacts WHERE ?1 = '' OR segment = ?1 ORDER BY segment, name",
    )?;
    let rows = stmt
        .query_map([segment], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, Option<String>>(3)?,
            ))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    let mut by_segment = serde_json::Map::new();
    for (_, _, seg, _) in &rows {
        let n = by_segment.get(seg).and_then(Value::as_i64).unwrap_or(0);
        by_segment.insert(seg.clone(), json!(n + 1));
    }
    let mut doc = json!({"total": rows.len(), "by_segment": by_segment});
    if show_emails {
        doc["contacts"] = json!(rows
            .iter()
            .map(|(name, email, seg, handle)| json!({"name": name, "email": email, "segment": seg, "handle": handle}))
            .collect::<Vec<_>>());
    }
    Ok(Outcome::clean(doc))
}

fn mcp_serve(_ctx: &Ctx, _args: &Args) -> Result<Outcome, CliError> {
    Ok(would(
        "mcp-serve",
        "serve this program's commands over MCP on stdio".into(),
        json!({"channels": CHANNELS}),
    ))
}
