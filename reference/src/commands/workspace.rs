//! Commands about the workspace as a whole: what it holds, whether it is
//! healthy, what the backend can do, and the files that configure it.

use std::path::Path;

use serde_json::{json, Map, Value};

use super::{Ctx, Outcome};
use crate::analysis::CHANNEL_LIMITS;
use crate::args::Args;
use crate::error::CliError;
use crate::files;
use crate::spec::{ArgSpec, CommandSpec};

const READ_ONLY: &[&str] = &["read_only"];

pub fn specs() -> Vec<CommandSpec> {
    vec![
        CommandSpec::new(
            "version",
            "Show the program version, the catalog version and the database layout it expects.",
            READ_ONLY,
            version,
        ),
        CommandSpec::new(
            "context",
            "Give an overview of the workspace: campaign, draft, template and log files, accounts and database counts.",
            READ_ONLY,
            context,
        )
        .flag(ArgSpec::string("--note", "A free-text note echoed back unchanged in the output.")),
        CommandSpec::new(
            "describe",
            "Describe the commands this program offers, as the machine-readable catalog.",
            READ_ONLY,
            describe,
        )
        .positional(
            ArgSpec::string("commands", "Only describe these commands.").repeatable(),
        ),
        CommandSpec::new(
            "start",
            "Show the onboarding checklist: which workspace files and setup steps are done.",
            READ_ONLY,
            start,
        ),
        CommandSpec::new(
            "doctor",
            "Check the workspace's health: files that parse, the database, stored secrets and logged errors.",
            READ_ONLY,
            doctor,
        ),
        CommandSpec::new(
            "capabilities",
            "List the channels this program can post to, with their length, image and hashtag limits.",
            READ_ONLY,
            capabilities,
        ),
        CommandSpec::new(
            "account-summary",
            "List the configured accounts by channel and handle, without any credential.",
            READ_ONLY,
            account_summary,
        )
        .flag(ArgSpec::channel("Only accounts on these channels.").repeatable())
        .flag(
            ArgSpec::boolean(
                "--with-token-check",
                "Also read each stored token and say whether it looks usable.",
            )
            .secrets(),
        ),
        CommandSpec::new(
            "brand-summary",
            "Summarize the brand rules: tone, banned words, preferred terms, hashtags and posting windows.",
            READ_ONLY,
            brand_summary,
        ),
        CommandSpec::new(
            "settings",
            "Show the profile's settings, leaving out every key whose name looks secret.",
            READ_ONLY,
            settings,
        )
        .flag(ArgSpec::string("--note", "A free-text note echoed back unchanged in the output.")),
        CommandSpec::new(
            "log-summary",
            "Count a log file's lines by level and list the text of every ERROR line.",
            READ_ONLY,
            log_summary,
        )
        .positional(ArgSpec::path("log", "The log file to read.").required())
        .flag(ArgSpec::integer(
            "--tail",
            1,
            100_000,
            "Only read this many lines from the end of the file.",
        )),
        CommandSpec::new(
            "error-explain",
            "Explain an error code printed by this program or reported by a channel, and how to fix it.",
            READ_ONLY,
            error_explain,
        )
        .positional(ArgSpec::string("code", "The error code, like database_missing.").required()),
    ]
}

/// Whether a key name looks like it holds a credential.
pub fn looks_secret(key: &str) -> bool {
    const WORDS: &[&str] = &[
        "token",
        "secret",
        "password",
        "passwd",
        "apikey",
        "credential",
        "credentials",
        "cookie",
        "pin",
    ];
    let lower = key.to_ascii_lowercase();
    let joined = lower.replace(['-', '.'], "_");
    joined.split('_').any(|w| WORDS.contains(&w))
        || ["api_key", "private_key", "access_key"]
            .iter()
            .any(|k| joined.contains(k))
}

fn version(_ctx: &Ctx, _args: &Args) -> Result<Outcome, CliError> {
    Ok(Outcome::clean(json!({
        "program": "reachweaver",
        "version": env!("CARGO_PKG_VERSION"),
        "catalog": 1,
        "database_schema": 3,
    })))
}

fn count_files(dir: &Path, suffixes: &[&str]) -> usize {
    files::list_files(dir, suffixes).len()
}

const CAMPAIGN_SUFFIXES: &[&str] = &[".yaml", ".yml", ".json"];
const DRAFT_SUFFIXES: &[&str] = &[".txt", ".md"];

fn context(ctx: &Ctx, args: &Args) -> Result<Outcome, CliError> {
    let home = &ctx.paths.home;
    let accounts = ctx.accounts_if_present()?;
    let mut channels: Vec<&str> = accounts.iter().map(|a| a.channel.as_str()).collect();
    channels.sort();
    channels.dedup();
    let database = if ctx.paths.db.is_file() {
        let conn = ctx.db_read_only()?;
        let scheduled: i64 = conn.query_row(
            "SELECT count(*) FROM schedule WHERE state = 'queued'",
            [],
            |r| r.get(0),
        )?;
        json!({
            "path": ctx.paths.db,
            "present": true,
            "campaigns": crate::db::count(&conn, "campaigns")?,
            "drafts": crate::db::count(&conn, "drafts")?,
            "posts": crate::db::count(&conn, "posts")?,
            "queued": scheduled,
        })
    } else {
        json!({"path": ctx.paths.db, "present": false})
    };
    Ok(Outcome::clean(json!({
        "home": home,
        "campaigns": count_files(&home.join("campaigns"), CAMPAIGN_SUFFIXES),
        "drafts": count_files(&home.join("drafts"), DRAFT_SUFFIXES),
        "templates": count_files(&home.join("templates"), &[""]),
        "logs": count_files(&home.join("logs"), &[".log"]),
        "brand": ctx.brand_path().is_file(),
        "accounts": {"path": ctx.paths.accounts, "count": accounts.len(), "channels": channels},
        "profile": ctx.paths.profile,
        "database": database,
        "note": args.text("--note"),
    })))
}

/// The catalog document, with every command or only the named ones.
pub fn catalog(ctx: &Ctx, names: &[&str]) -> Result<Value, CliError> {
    let mut commands = Vec::new();
    if names.is_empty() {
        commands.extend(ctx.commands.iter().map(|c| c.to_json()));
    } else {
        for name in names {
            let spec = ctx
                .commands
                .iter()
                .find(|c| c.name == *name)
                .ok_or_else(|| {
                    CliError::new(
                        "unknown_command",
                        format!("There is no command named {name:?}; run `describe` to list them."),
                    )
                })?;
            commands.push(spec.to_json());
        }
    }
    Ok(json!({
        "catalog": 1,
        "program": {"name": "reachweaver", "version": env!("CARGO_PKG_VERSION")},
        "format_flag": "--format",
        "end_of_options": true,
        "paths": {
            "home": ctx.paths.home,
            "db": ctx.paths.db,
            "accounts": ctx.paths.accounts,
            "profile": ctx.paths.profile,
        },
        "commands": commands,
    }))
}

fn describe(ctx: &Ctx, args: &Args) -> Result<Outcome, CliError> {
    let names = args.texts("commands");
    let doc = catalog(ctx, &names)?;
    let mut text = String::new();
    for spec in ctx
        .commands
        .iter()
        .filter(|c| names.is_empty() || names.contains(&c.name))
    {
        text.push_str(&format!(
            "{:<20} {} [{}]\n",
            spec.name,
            spec.summary,
            spec.tags.join(", ")
        ));
    }
    Ok(Outcome::clean(doc).with_text(text))
}

fn start(ctx: &Ctx, _args: &Args) -> Result<Outcome, CliError> {
    let home = &ctx.paths.home;
    let steps = [
        (
            "accounts",
            ctx.paths.accounts.is_file(),
            "List your accounts, one per channel, in accounts.yaml.",
        ),
        (
            "brand",
            ctx.brand_path().is_file(),
            "Write your tone, banned words and posting windows in brand/voice.yaml.",
        ),
        (
            "campaign",
            count_files(&home.join("campaigns"), CAMPAIGN_SUFFIXES) > 0,
            "Describe a campaign in campaigns/NAME.yaml.",
        ),
        (
            "draft",
            count_files(&home.join("drafts"), DRAFT_SUFFIXES) > 0,
            "Write a first post in drafts/NAME.txt.",
        ),
        (
            "database",
            ctx.paths.db.is_file(),
            "Create the database with `reachweaver init`.",
        ),
    ];
    let done = steps.iter().filter(|s| s.1).count();
    let next = steps.iter().find(|s| !s.1).map(|s| s.2);
    Ok(Outcome::clean(json!({
        "home": home,
        "steps": steps.iter().map(|(step, done, how)| json!({"step": step, "done": done, "how": how})).collect::<Vec<_>>(),
        "done": done,
        "remaining": steps.len() - done,
        "next": next,
    })))
}

fn check(name: &str, status: &str, detail: impl Into<String>) -> Value {
    json!({"check": name, "status": status, "detail": detail.into()})
}

fn doctor(ctx: &Ctx, _args: &Args) -> Result<Outcome, CliError> {
    let home = &ctx.paths.home;
    let mut checks = Vec::new();
    checks.push(if home.is_dir() {
        check("home", "ok", format!("{} exists", home.display()))
    } else {
        check(
            "home",
            "fail",
            format!("{} is not a folder", home.display()),
        )
    });
    match ctx.accounts() {
        Ok(accounts) => {
            checks.push(check(
                "accounts",
                "ok",
                format!("{} account(s)", accounts.len()),
            ));
            for account in &accounts {
                if crate::analysis::channel_limit(&account.channel).is_none() {
                    checks.push(check(
                        "accounts",
                        "warn",
                        format!("{} is not a channel this program knows", account.channel),
                    ));
                }
                for key in &account.secret_keys {
                    checks.push(check(
                        "stored_secret",
                        "warn",
                        format!(
                            "the {} account keeps a secret under `{key}` in the accounts file; keep it in the keychain and name it with `keychain`",
                            account.channel
                        ),
                    ));
                }
            }
        }
        Err(e) => checks.push(check("accounts", "fail", e.message())),
    }
    match ctx.brand() {
        Ok(_) => checks.push(check("brand", "ok", "brand/voice.yaml is valid")),
        Err(e) => checks.push(check("brand", "fail", e.message())),
    }
    for path in files::list_files(&home.join("campaigns"), CAMPAIGN_SUFFIXES) {
        let name = files::display_relative(&path, home);
        match files::load_document(&path) {
            Ok(_) => checks.push(check("campaign", "ok", format!("{name} parses"))),
            Err(e) => checks.push(check("campaign", "fail", e.message())),
        }
    }
    if let Some(profile) = &ctx.paths.profile {
        match files::load_document(profile) {
            Ok(_) => checks.push(check(
                "profile",
                "ok",
                format!("{} parses", profile.display()),
            )),
            Err(e) => checks.push(check("profile", "fail", e.message())),
        }
    }
    if ctx.paths.db.is_file() {
        let conn = ctx.db_read_only()?;
        let integrity: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0))?;
        checks.push(if integrity == "ok" {
            check("database", "ok", "integrity check passed")
        } else {
            check("database", "fail", format!("integrity check: {integrity}"))
        });
        match crate::db::schema_version(&conn)? {
            Some(v) if v == "3" => checks.push(check("schema", "ok", "layout version 3")),
            Some(v) => checks.push(check(
                "schema",
                "fail",
                format!("layout version {v}, expected 3"),
            )),
            None => checks.push(check("schema", "fail", "no layout version recorded")),
        }
        let mut journal = ctx.paths.db.as_os_str().to_owned();
        journal.push("-journal");
        if Path::new(&journal).exists() {
            checks.push(check(
                "database",
                "warn",
                "a journal file is left beside the database; an earlier write was interrupted",
            ));
        }
    } else {
        checks.push(check(
            "database",
            "fail",
            format!(
                "no database at {}; run `reachweaver init`",
                ctx.paths.db.display()
            ),
        ));
    }
    for log in files::list_files(&home.join("logs"), &[".log"]) {
        let text = files::read_text(&log)?;
        let errors = text.lines().filter(|l| level_of(l) == "ERROR").count();
        let name = files::display_relative(&log, home);
        checks.push(if errors == 0 {
            check("logs", "ok", format!("{name} has no errors"))
        } else {
            check("logs", "warn", format!("{name} has {errors} error line(s)"))
        });
    }
    let count = |status: &str| checks.iter().filter(|c| c["status"] == status).count();
    let (ok, warnings, failures) = (count("ok"), count("warn"), count("fail"));
    Ok(Outcome::findings_if(
        warnings + failures > 0,
        json!({
            "healthy": warnings + failures == 0,
            "ok": ok,
            "warnings": warnings,
            "failures": failures,
            "checks": checks,
        }),
    ))
}

fn capabilities(ctx: &Ctx, _args: &Args) -> Result<Outcome, CliError> {
    let accounts = ctx.accounts_if_present()?;
    let channels: Vec<Value> = CHANNEL_LIMITS
        .iter()
        .map(|limit| {
            let account = accounts.iter().find(|a| a.channel == limit.channel);
            json!({
                "channel": limit.channel,
                "max_chars": limit.max_chars,
                "link_counts_as": limit.link_weight,
                "max_images": limit.max_images,
                "recommended_hashtags": limit.recommended_hashtags,
                "configured": account.is_some(),
                "handle": account.map(|a| a.handle.clone()),
            })
        })
        .collect();
    Ok(Outcome::clean(json!({
        "channels": channels,
        "approvals": true,
        "scheduling": true,
        "network_checks": "owner only",
    })))
}

fn account_summary(ctx: &Ctx, args: &Args) -> Result<Outcome, CliError> {
    let only = args.texts("--channel");
    let check_tokens = args.switch("--with-token-check");
    let accounts = ctx.accounts()?;
    let raw = if check_tokens {
        Some(files::load_document(&ctx.paths.accounts)?)
    } else {
        None
    };
    let list: Vec<Value> = accounts
        .iter()
        .enumerate()
        .filter(|(_, a)| only.is_empty() || only.contains(&a.channel.as_str()))
        .map(|(index, a)| {
            let credential = if a.keychain.is_some() {
                "keychain"
            } else if !a.secret_keys.is_empty() {
                "stored in the accounts file"
            } else {
                "none"
            };
            let mut entry = json!({
                "channel": a.channel,
                "handle": a.handle,
                "display_name": a.display_name,
                "credential_store": credential,
            });
            if let Some(raw) = &raw {
                // Only the shape of the value is looked at; it is never printed.
                let usable = (!a.secret_keys.is_empty()).then(|| {
                    a.secret_keys.iter().any(|k| {
                        raw["accounts"][index][k]
                            .as_str()
                            .is_some_and(|v| v.len() >= 20 && !v.contains(char::is_whitespace))
                    })
                });
                entry["token_looks_usable"] = json!(usable);
            }
            entry
        })
        .collect();
    Ok(Outcome::clean(json!({
        "file": ctx.paths.accounts,
        "count": list.len(),
        "accounts": list,
    })))
}

fn brand_summary(ctx: &Ctx, _args: &Args) -> Result<Outcome, CliError> {
    let brand = ctx.brand()?;
    Ok(Outcome::clean(json!({
        "file": ctx.brand_path(),
        "brand": brand.name,
        "tone": brand.tone,
        "banned_words": brand.banned_words,
        "preferred_terms": brand.preferred_terms.iter().map(|(a, p)| json!({"avoid": a, "prefer": p})).collect::<Vec<_>>(),
        "acronyms": brand.acronyms,
        "limits": {
            "max_exclamation_marks": brand.max_exclamation_marks,
            "max_emoji": brand.max_emoji,
        },
        "hashtags": {"preferred": brand.preferred_hashtags, "banned": brand.banned_hashtags},
        "posting_windows": brand.posting_windows,
    })))
}

/// Copies `value` without any key that looks secret, collecting the dotted
/// names of the keys left out.
fn without_secrets(value: &Value, prefix: &str, removed: &mut Vec<String>) -> Value {
    match value {
        Value::Object(map) => {
            let mut kept = Map::new();
            for (k, v) in map {
                let name = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                if looks_secret(k) {
                    removed.push(name);
                } else {
                    kept.insert(k.clone(), without_secrets(v, &name, removed));
                }
            }
            Value::Object(kept)
        }
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|i| without_secrets(i, prefix, removed))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn settings(ctx: &Ctx, args: &Args) -> Result<Outcome, CliError> {
    let mut removed = Vec::new();
    let settings = match &ctx.paths.profile {
        Some(path) => without_secrets(&files::load_document(path)?, "", &mut removed),
        None => json!({}),
    };
    Ok(Outcome::clean(json!({
        "profile": ctx.paths.profile,
        "settings": settings,
        "withheld_keys": removed,
        "note": args.text("--note"),
    })))
}

/// The level of a log line: the first of its leading words that names one.
pub fn level_of(line: &str) -> &'static str {
    for word in line.split_whitespace().take(2) {
        match word.trim_matches(|c| c == '[' || c == ']' || c == ':') {
            "ERROR" | "FATAL" => return "ERROR",
            "WARN" | "WARNING" => return "WARN",
            "INFO" => return "INFO",
            "DEBUG" | "TRACE" => return "DEBUG",
            _ => {}
        }
    }
    "other"
}

fn log_summary(ctx: &Ctx, args: &Args) -> Result<Outcome, CliError> {
    let given = args.required_path("log")?;
    let text = files::read_text(&ctx.file_arg(&given))?;
    let all: Vec<&str> = text.lines().collect();
    let skip = match args.integer("--tail") {
        Some(n) => all
            .len()
            .saturating_sub(usize::try_from(n).unwrap_or(usize::MAX)),
        None => 0,
    };
    let mut counts: Vec<(&str, usize)> = vec![
        ("ERROR", 0),
        ("WARN", 0),
        ("INFO", 0),
        ("DEBUG", 0),
        ("other", 0),
    ];
    let mut errors = Vec::new();
    for (index, line) in all.iter().enumerate().skip(skip) {
        let level = level_of(line);
        if let Some(entry) = counts.iter_mut().find(|(l, _)| *l == level) {
            entry.1 += 1;
        }
        if level == "ERROR" {
            errors.push(json!({"line": index + 1, "text": line}));
        }
    }
    let levels: Map<String, Value> = counts
        .iter()
        .map(|(l, n)| ((*l).to_string(), json!(n)))
        .collect();
    Ok(Outcome::findings_if(
        !errors.is_empty(),
        json!({
            "file": given,
            "lines": all.len() - skip,
            "levels": levels,
            "errors": errors,
        }),
    ))
}

const ERROR_CODES: &[(&str, &str, &str, &str)] = &[
    ("bad_argument", "backend", "An argument was unknown, malformed, out of range or missing.", "Run `describe COMMAND` and give each flag as --name=value."),
    ("unknown_command", "backend", "No command has that name.", "Run `describe` to list the commands."),
    ("database_missing", "backend", "The database file does not exist yet.", "Run `reachweaver init` in the workspace."),
    ("database_error", "backend", "The database could not be opened or queried.", "Run `reachweaver doctor` and restore the database from a backup if its integrity check fails."),
    ("file_not_found", "backend", "A file named on the command line or expected in the workspace does not exist.", "Check the path, or create the file `start` asks for."),
    ("invalid_file", "backend", "A workspace file could not be parsed or has a field of the wrong type.", "Fix the field the message names."),
    ("file_too_large", "backend", "A file is larger than this program reads.", "Give a smaller file."),
    ("io_error", "backend", "A file could not be read or written.", "Check the file's permissions."),
    ("not_found", "backend", "The draft, code or item asked for does not exist.", "List what exists with `list` or `error-explain` codes."),
    ("already_exists", "backend", "`init` found a database already in place.", "Keep it, or give --force to replace it with the example data."),
    ("rate_limited", "channel", "The channel refused a request because too many were sent.", "Wait for the time the channel names; the scheduler retries by itself."),
    ("auth_expired", "channel", "The channel no longer accepts the account's credential.", "The owner runs `reachweaver reconnect --channel=CHANNEL`."),
    ("duplicate_content", "channel", "The channel refused a post identical to a recent one.", "Change the text, or run `repeat-check` before scheduling."),
    ("media_too_large", "channel", "An attached image or video is over the channel's size limit.", "Attach a smaller file; `capabilities` lists the limits."),
    ("account_suspended", "channel", "The channel suspended the account.", "The owner contacts the channel; nothing can be posted until then."),
    ("link_blocked", "channel", "The channel refused a link in the post.", "Replace the link, or remove its tracking parameters."),
];

fn error_explain(_ctx: &Ctx, args: &Args) -> Result<Outcome, CliError> {
    let code = args.required_text("code")?;
    let (code, source, meaning, fix) = ERROR_CODES
        .iter()
        .find(|(c, ..)| *c == code)
        .ok_or_else(|| {
            CliError::not_found(format!(
                "{code:?} is not an error code this program knows; codes are snake_case like database_missing."
            ))
        })?;
    Ok(Outcome::clean(json!({
        "code": code,
        "source": source,
        "meaning": meaning,
        "fix": fix,
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_looking_keys() {
        for k in [
            "token",
            "smtp_password",
            "API-KEY",
            "api_key",
            "client_secret",
            "session.cookie",
            "app_password",
        ] {
            assert!(looks_secret(k), "{k}");
        }
        for k in ["keychain", "timezone", "author", "tokenizer_name", "handle"] {
            assert!(!looks_secret(k), "{k}");
        }
    }

    #[test]
    fn log_levels() {
        assert_eq!(
            level_of("2026-03-04T07:31:12Z ERROR metrics: timed out"),
            "ERROR"
        );
        assert_eq!(level_of("[WARN] disk"), "WARN");
        assert_eq!(level_of("nothing here ERROR later"), "other");
    }
}
