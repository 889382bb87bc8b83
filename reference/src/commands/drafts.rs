//! Commands that read one draft or template text and check it: claims, the
//! brand's voice, repeats of published posts, channel lengths, hashtags,
//! links, and all policies at once.

use std::collections::BTreeSet;

use serde_json::{json, Value};

use super::{Ctx, Outcome};
use crate::analysis::{
    self, channel_length, channel_limit, findings_json, Brand, Finding, CHANNEL_LIMITS,
};
use crate::args::Args;
use crate::error::CliError;
use crate::files;
use crate::spec::{ArgSpec, CommandSpec, DefaultValue};

const READ_ONLY: &[&str] = &["read_only"];

fn draft_arg() -> ArgSpec {
    ArgSpec::path("draft", "The draft text file.").required()
}

pub fn specs() -> Vec<CommandSpec> {
    vec![
        CommandSpec::new(
            "claims-check",
            "Flag claims a draft cannot back up: guarantees, superlatives, claimed proof and percentages without a source.",
            READ_ONLY,
            claims_check,
        )
        .positional(draft_arg()),
        CommandSpec::new(
            "voice-check",
            "Compare a draft with the brand's voice: banned words, preferred terms, exclamation marks, capitals, emoji and length.",
            READ_ONLY,
            voice_check,
        )
        .positional(draft_arg())
        .flag(ArgSpec::integer("--max-length", 1, 100_000, "Also flag a draft longer than this many characters.")),
        CommandSpec::new(
            "repeat-check",
            "Compare a draft with every published post and flag the ones it repeats.",
            READ_ONLY,
            repeat_check,
        )
        .positional(draft_arg())
        .flag(
            ArgSpec::number("--threshold", 0.0, 1.0, "Similarity from 0 to 1 at which a published post counts as repeated.")
                .default(DefaultValue::Number(0.8)),
        ),
        CommandSpec::new(
            "length-check",
            "Measure a draft as each channel counts it and flag the channels it does not fit.",
            READ_ONLY,
            length_check,
        )
        .positional(draft_arg())
        .flag(ArgSpec::channel("Only these channels (all when not given).").repeatable()),
        CommandSpec::new(
            "hashtag-check",
            "List a draft's hashtags and flag too many, repeated or banned ones.",
            READ_ONLY,
            hashtag_check,
        )
        .positional(draft_arg())
        .flag(
            ArgSpec::integer("--max-hashtags", 0, 30, "The most hashtags a post may carry.")
                .default(DefaultValue::Integer(3)),
        ),
        CommandSpec::new(
            "link-extract",
            "List the links in a draft with their hosts and tracking parameters, without fetching them.",
            READ_ONLY,
            link_extract,
        )
        .positional(draft_arg()),
        CommandSpec::new(
            "template-render",
            "Fill a template's {{placeholders}} with the given values and report any left unfilled.",
            READ_ONLY,
            template_render,
        )
        .positional(ArgSpec::path("template", "The template file.").required())
        .flag(ArgSpec::string("--var", "A value for a placeholder, written key=value.").repeatable()),
        CommandSpec::new(
            "policy-check",
            "Run every draft policy at once: claims, voice, channel length, hashtags and links.",
            READ_ONLY,
            policy_check,
        )
        .positional(draft_arg())
        .flag(ArgSpec::channel("Only check the length for these channels (all when not given).").repeatable()),
    ]
}

fn read_draft(ctx: &Ctx, args: &Args, name: &str) -> Result<(Value, String), CliError> {
    let given = args.required_path(name)?;
    let text = files::read_text(&ctx.file_arg(&given))?;
    Ok((json!(given), text))
}

fn claims_check(ctx: &Ctx, args: &Args) -> Result<Outcome, CliError> {
    let (file, text) = read_draft(ctx, args, "draft")?;
    let findings = analysis::claims(&text);
    Ok(Outcome::findings_if(
        !findings.is_empty(),
        json!({"file": file, "count": findings.len(), "findings": findings_json(&findings)}),
    ))
}

fn voice_check(ctx: &Ctx, args: &Args) -> Result<Outcome, CliError> {
    let (file, text) = read_draft(ctx, args, "draft")?;
    let brand = ctx.brand()?;
    let findings = analysis::voice(&text, &brand, args.integer("--max-length"));
    Ok(Outcome::findings_if(
        !findings.is_empty(),
        json!({
            "file": file,
            "brand": brand.name,
            "tone": brand.tone,
            "count": findings.len(),
            "findings": findings_json(&findings),
        }),
    ))
}

fn repeat_check(ctx: &Ctx, args: &Args) -> Result<Outcome, CliError> {
    let (file, text) = read_draft(ctx, args, "draft")?;
    let threshold = args.number("--threshold").unwrap_or(0.8);
    let conn = ctx.db_read_only()?;
    let mut stmt = conn.prepare("SELECT id, channel, published_on, body FROM posts ORDER BY id")?;
    let rows = stmt.query_map([], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, String>(2)?,
            r.get::<_, String>(3)?,
        ))
    })?;
    let mut scored = Vec::new();
    for row in rows {
        let (id, channel, published_on, body) = row?;
        let score = analysis::similarity(&text, &body);
        scored.push((score, id, channel, published_on));
    }
    // Highest similarity first; ties by post id so the order never varies.
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let as_json = |(score, id, channel, on): &(f64, String, String, String)| json!({"post": id, "channel": channel, "published_on": on, "similarity": score});
    let matches: Vec<Value> = scored
        .iter()
        .filter(|s| s.0 >= threshold)
        .map(as_json)
        .collect();
    Ok(Outcome::findings_if(
        !matches.is_empty(),
        json!({
            "file": file,
            "threshold": threshold,
            "compared": scored.len(),
            "matches": matches,
            "closest": scored.first().map(as_json),
        }),
    ))
}

fn selected_channels<'a>(args: &'a Args) -> Vec<&'a str> {
    let given = args.texts("--channel");
    if given.is_empty() {
        CHANNEL_LIMITS.iter().map(|c| c.channel).collect()
    } else {
        given
    }
}

fn length_entries(text: &str, channels: &[&str]) -> Vec<(String, usize, usize)> {
    channels
        .iter()
        .filter_map(|ch| channel_limit(ch))
        .map(|limit| {
            (
                limit.channel.to_string(),
                channel_length(text, limit),
                limit.max_chars,
            )
        })
        .collect()
}

fn length_check(ctx: &Ctx, args: &Args) -> Result<Outcome, CliError> {
    let (file, text) = read_draft(ctx, args, "draft")?;
    let entries = length_entries(&text, &selected_channels(args));
    let too_long = entries.iter().filter(|(_, len, max)| len > max).count();
    Ok(Outcome::findings_if(
        too_long > 0,
        json!({
            "file": file,
            "characters": text.trim().chars().count(),
            "channels": entries.iter().map(|(ch, len, max)| json!({
                "channel": ch,
                "length": len,
                "limit": max,
                "fits": len <= max,
                "over_by": len.saturating_sub(*max),
            })).collect::<Vec<_>>(),
            "too_long": too_long,
        }),
    ))
}

fn hashtag_findings(
    text: &str,
    max: i64,
    brand: Option<&Brand>,
) -> (Vec<analysis::Hashtag>, Vec<Finding>) {
    let tags = analysis::hashtags(text);
    let mut findings = Vec::new();
    if tags.len() as i64 > max {
        if let Some(first_extra) = tags.get(usize::try_from(max).unwrap_or(0)) {
            findings.push(Finding {
                rule: "too_many_hashtags",
                text: first_extra.tag.clone(),
                line: first_extra.line,
                column: first_extra.column,
                message: format!("{} hashtags, more than the {max} allowed.", tags.len()),
            });
        }
    }
    let mut seen = BTreeSet::new();
    for tag in &tags {
        let lower = tag.tag.to_lowercase();
        if !seen.insert(lower.clone()) {
            findings.push(Finding {
                rule: "duplicate_hashtag",
                text: tag.tag.clone(),
                line: tag.line,
                column: tag.column,
                message: format!("{} repeats an earlier hashtag.", tag.tag),
            });
        }
        if let Some(brand) = brand {
            if brand
                .banned_hashtags
                .iter()
                .any(|b| b.to_lowercase() == lower)
            {
                findings.push(Finding {
                    rule: "banned_hashtag",
                    text: tag.tag.clone(),
                    line: tag.line,
                    column: tag.column,
                    message: format!("{} is on the brand's list of banned hashtags.", tag.tag),
                });
            }
        }
    }
    findings.sort_by(|a, b| (a.line, a.column, a.rule).cmp(&(b.line, b.column, b.rule)));
    (tags, findings)
}

fn hashtag_check(ctx: &Ctx, args: &Args) -> Result<Outcome, CliError> {
    let (file, text) = read_draft(ctx, args, "draft")?;
    let max = args.integer("--max-hashtags").unwrap_or(3);
    let brand = ctx.brand_if_present()?;
    let (tags, findings) = hashtag_findings(&text, max, brand.as_ref());
    Ok(Outcome::findings_if(
        !findings.is_empty(),
        json!({
            "file": file,
            "hashtags": tags.iter().map(|t| t.tag.clone()).collect::<Vec<_>>(),
            "count": tags.len(),
            "max": max,
            "findings": findings_json(&findings),
        }),
    ))
}

fn link_extract(ctx: &Ctx, args: &Args) -> Result<Outcome, CliError> {
    let (file, text) = read_draft(ctx, args, "draft")?;
    let links = analysis::links(&text);
    let hosts: BTreeSet<&str> = links.iter().map(|l| l.host.as_str()).collect();
    Ok(Outcome::clean(json!({
        "file": file,
        "count": links.len(),
        "links": links.iter().map(analysis::Link::to_json).collect::<Vec<_>>(),
        "hosts": hosts,
    })))
}

/// Placeholders of a template: `{{ name }}` spans, in order of appearance.
fn render(template: &str, vars: &[(String, String)]) -> (String, Vec<String>, Vec<String>) {
    let mut out = String::new();
    let mut placeholders = Vec::new();
    let mut unresolved = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find("{{") {
        let Some(close) = rest[open + 2..].find("}}") else {
            break;
        };
        let name = rest[open + 2..open + 2 + close].trim();
        out.push_str(&rest[..open]);
        if !placeholders.iter().any(|p| p == name) {
            placeholders.push(name.to_string());
        }
        match vars.iter().rev().find(|(k, _)| k == name) {
            Some((_, v)) => out.push_str(v),
            None => {
                out.push_str(&rest[open..open + 4 + close]);
                if !unresolved.iter().any(|u| u == name) {
                    unresolved.push(name.to_string());
                }
            }
        }
        rest = &rest[open + 4 + close..];
    }
    out.push_str(rest);
    (out, placeholders, unresolved)
}

fn template_render(ctx: &Ctx, args: &Args) -> Result<Outcome, CliError> {
    let (file, template) = read_draft(ctx, args, "template")?;
    let mut vars = Vec::new();
    for raw in args.texts("--var") {
        let (key, value) = raw.split_once('=').ok_or_else(|| {
            CliError::bad_argument(format!("--var takes key=value, and {raw:?} has no '='."))
        })?;
        if key.is_empty() {
            return Err(CliError::bad_argument(format!(
                "--var {raw:?} has an empty key."
            )));
        }
        vars.push((key.to_string(), value.to_string()));
    }
    let (text, placeholders, unresolved) = render(&template, &vars);
    let mut unused: Vec<&str> = vars
        .iter()
        .map(|(k, _)| k.as_str())
        .filter(|k| !placeholders.iter().any(|p| p == k))
        .collect();
    unused.dedup();
    Ok(Outcome::findings_if(
        !unresolved.is_empty(),
        json!({
            "file": file,
            "text": text.trim_end(),
            "length": text.trim().chars().count(),
            "placeholders": placeholders,
            "unresolved": unresolved,
            "unused_vars": unused,
        }),
    ))
}

fn tagged(check: &str, finding: &Finding) -> Value {
    let mut v = finding.to_json();
    v["check"] = json!(check);
    v
}

/// Every policy finding for a text: claims, voice (when the brand is known),
/// length on the given channels, hashtags and links.
pub fn policy_findings(
    text: &str,
    channels: &[&str],
    brand: Option<&Brand>,
    max_hashtags: i64,
) -> Vec<Value> {
    let mut out: Vec<Value> = analysis::claims(text)
        .iter()
        .map(|f| tagged("claims", f))
        .collect();
    if let Some(brand) = brand {
        out.extend(
            analysis::voice(text, brand, None)
                .iter()
                .map(|f| tagged("voice", f)),
        );
    }
    for (channel, length, max) in length_entries(text, channels) {
        if length > max {
            out.push(json!({
                "check": "length",
                "rule": "too_long_for_channel",
                "text": channel,
                "line": 1,
                "column": 1,
                "message": format!("{length} characters on {channel}, over its limit of {max}."),
            }));
        }
    }
    out.extend(
        hashtag_findings(text, max_hashtags, brand)
            .1
            .iter()
            .map(|f| tagged("hashtags", f)),
    );
    for link in analysis::links(text) {
        if link.scheme == "http" {
            out.push(json!({
                "check": "links",
                "rule": "insecure_link",
                "text": link.url,
                "line": link.line,
                "column": link.column,
                "message": "The link uses http; use https.",
            }));
        }
        if !link.tracking.is_empty() {
            out.push(json!({
                "check": "links",
                "rule": "tracking_parameters",
                "text": link.url,
                "line": link.line,
                "column": link.column,
                "message": format!("The link carries tracking parameters ({}); the scheduler adds its own.", link.tracking.join(", ")),
            }));
        }
    }
    out
}

fn policy_check(ctx: &Ctx, args: &Args) -> Result<Outcome, CliError> {
    let (file, text) = read_draft(ctx, args, "draft")?;
    let brand = ctx.brand_if_present()?;
    let channels = selected_channels(args);
    let findings = policy_findings(&text, &channels, brand.as_ref(), 3);
    let mut checks = vec!["claims"];
    if brand.is_some() {
        checks.push("voice");
    }
    checks.extend(["length", "hashtags", "links"]);
    Ok(Outcome::findings_if(
        !findings.is_empty(),
        json!({
            "file": file,
            "checks": checks,
            "channels": channels,
            "count": findings.len(),
            "findings": findings,
        }),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_fill_and_report() {
        let vars = vec![("a".to_string(), "1".to_string())];
        let (text, ph, un) = render("x {{a}} y {{ b }} z {{a}}", &vars);
        assert_eq!(text, "x 1 y {{ b }} z 1");
        assert_eq!(ph, vec!["a", "b"]);
        assert_eq!(un, vec!["b"]);
    }
}
