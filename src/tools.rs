//! Catalog -> tools: eligibility (docs/BACKEND.md, Which commands
//! become tools), naming, withheld arguments, and input schemas (docs/BACKEND.md,
//! Arguments and JSON Schema).
//!
//! This is where the server decides what a client may ask for, so the rules
//! live in one place and every decision is also recorded in a [`ToolReport`] that
//! the `tools` subcommand shows the owner: what is offered, and why the rest
//! is not.
//!
//! INTERFACE (keep these fields and methods):
//! `Tool { name, title, description, input_schema, annotations, .. }`, which
//! dispatch.rs turns into tool definitions; `ToolSet::get(name)`, which the
//! call path (call.rs, subcommands.rs) looks a tool up with; and
//! `ToolSet::iter()` in a deterministic order (by name, in byte order),
//! which startup.rs hands to dispatch.rs's `ProtocolInput`.

use std::fmt;

use serde_json::{json, Map, Number, Value};

use crate::catalog::{ArgType, Argument, Catalog, Command, Diagnostic, Problem, Severity, Tag};
use crate::sandbox::RunKind;

/// Longest tool name clients accept.
pub const MAX_TOOL_NAME: usize = 64;

/// The command that is the server itself; offering it would nest servers.
const SELF_COMMAND: &str = "mcp-serve";

/// The one command that may become a writing tool, with `--allow-drafts`.
pub const DRAFT_COMMAND: &str = "draft";

/// The backend's global options; a call can never set them.
const GLOBAL_OPTIONS: [&str; 4] = ["--home", "--db", "--accounts", "--profile"];

/// Flags no tool accepts whatever the catalog says about them
/// (docs/BACKEND.md, Which commands become tools).
const NEVER_OFFERED: [&str; 9] = [
    "--online",
    "--allow-origin",
    "--reply-to",
    "--override-flagged",
    "--owner-authorized",
    "--include-individuals",
    "--format",
    "--json",
    "--output",
];

/// Tags that keep a command from being a tool (rule 2).
const EXCLUDING_TAGS: [Tag; 5] = [
    Tag::Writes,
    Tag::Interactive,
    Tag::OwnerOnly,
    Tag::Network,
    Tag::Secrets,
];

/// The four behaviour hints, always set explicitly (docs/PROTOCOL.md E7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Annotations {
    pub read_only_hint: bool,
    pub destructive_hint: bool,
    pub idempotent_hint: bool,
    pub open_world_hint: bool,
}

impl Annotations {
    fn for_kind(kind: RunKind) -> Self {
        match kind {
            RunKind::ReadOnly => Annotations {
                read_only_hint: true,
                destructive_hint: false,
                idempotent_hint: true,
                open_world_hint: false,
            },
            RunKind::Draft => Annotations {
                read_only_hint: false,
                destructive_hint: false,
                idempotent_hint: false,
                open_world_hint: false,
            },
        }
    }
}

#[derive(Debug, Clone)]
pub struct Tool {
    /// `[a-z0-9_]`, at most 64 characters.
    pub name: String,
    /// Human display name.
    pub title: String,
    pub description: String,
    /// The JSON Schema of the arguments; root `type: object`.
    pub input_schema: Value,
    pub annotations: Annotations,
    pub kind: RunKind,
    /// The backend command this tool runs.
    pub command: String,
    /// The accepted arguments, positionals first, each in catalog order.
    params: Vec<Param>,
    /// Properties of arguments the backend has but this server withholds.
    withheld: Vec<String>,
}

impl Tool {
    pub(crate) fn params(&self) -> &[Param] {
        &self.params
    }

    /// Whether `property` names an argument this server withholds.
    pub(crate) fn is_withheld(&self, property: &str) -> bool {
        self.withheld.iter().any(|w| w == property)
    }
}

/// One argument a tool accepts, as the validator needs it.
#[derive(Debug, Clone)]
pub(crate) struct Param {
    pub property: String,
    /// The name as the backend spells it (`--max-length`, `campaign`).
    pub argument: String,
    pub positional: bool,
    pub ty: ArgType,
    pub choices: Vec<String>,
    pub minimum: Option<Number>,
    pub maximum: Option<Number>,
    pub required: bool,
    pub repeatable: bool,
}

/// The offered tools, fixed at start, in a deterministic order.
#[derive(Debug, Clone, Default)]
pub struct ToolSet {
    tools: Vec<Tool>,
}

impl ToolSet {
    pub fn new(mut tools: Vec<Tool>) -> Self {
        tools.sort_by(|a, b| a.name.cmp(&b.name));
        Self { tools }
    }

    pub fn get(&self, name: &str) -> Option<&Tool> {
        self.tools.iter().find(|t| t.name == name)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Tool> {
        self.tools.iter()
    }

    pub fn len(&self) -> usize {
        self.tools.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }
}

/// Why an argument of an offered command is not accepted by its tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WithheldWhy {
    Network,
    Secrets,
    OutputFormat,
    GlobalOption,
    NeverOffered,
}

impl WithheldWhy {
    pub fn code(self) -> &'static str {
        match self {
            WithheldWhy::Network => "network",
            WithheldWhy::Secrets => "secrets",
            WithheldWhy::OutputFormat => "output_format",
            WithheldWhy::GlobalOption => "global_option",
            WithheldWhy::NeverOffered => "never_offered",
        }
    }

    fn text(self) -> &'static str {
        match self {
            WithheldWhy::Network => "uses the network",
            WithheldWhy::Secrets => "reads credentials",
            WithheldWhy::OutputFormat => "output format, set by the server",
            WithheldWhy::GlobalOption => "global option, fixed at start",
            WithheldWhy::NeverOffered => "never offered by this server",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WithheldArg {
    pub argument: String,
    pub why: WithheldWhy,
}

/// Why a whole command is not offered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WithholdReason {
    /// Rule 1: no `read_only` tag.
    NotReadOnly,
    /// Rule 2.
    Tag(Tag),
    /// Rule 3.
    OwnerOnlyArgument(String),
    /// Rule 4.
    NoJsonFormat,
    /// Rule 5.
    McpServe,
    /// A tool that could never be called validly is not offered.
    RequiredArgumentWithheld(WithheldArg),
    /// Longer than clients accept.
    NameTooLong,
    /// `draft` would be offered with `--allow-drafts`.
    DraftNeedsAllowDrafts,
    /// The command's own catalog entry has a problem (an unknown tag, type
    /// or field, a bad name, ...): fail closed for this command only.
    Catalog(Diagnostic),
}

impl WithholdReason {
    pub fn code(&self) -> &'static str {
        match self {
            WithholdReason::NotReadOnly => "not_read_only",
            WithholdReason::Tag(_) => "tag",
            WithholdReason::OwnerOnlyArgument(_) => "owner_only_argument",
            WithholdReason::NoJsonFormat => "no_json_format",
            WithholdReason::McpServe => "mcp_serve",
            WithholdReason::RequiredArgumentWithheld(_) => "required_argument_withheld",
            WithholdReason::NameTooLong => "name_too_long",
            WithholdReason::DraftNeedsAllowDrafts => "needs_allow_drafts",
            WithholdReason::Catalog(d) => d.problem.code(),
        }
    }

    fn to_json(&self) -> Value {
        let mut v = json!({"code": self.code(), "text": self.to_string()});
        match self {
            WithholdReason::Tag(t) => v["tag"] = json!(t.as_str()),
            WithholdReason::OwnerOnlyArgument(a) => v["argument"] = json!(a),
            WithholdReason::RequiredArgumentWithheld(w) => {
                v["argument"] = json!(w.argument);
                v["why"] = json!(w.why.code());
            }
            WithholdReason::Catalog(d) => {
                v["pointer"] = json!(d.pointer);
                v["text"] = json!(d.message);
            }
            _ => {}
        }
        v
    }
}

impl fmt::Display for WithholdReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WithholdReason::NotReadOnly => write!(f, "not tagged read_only"),
            WithholdReason::Tag(t) => write!(f, "tagged {}", t.as_str()),
            WithholdReason::OwnerOnlyArgument(a) => write!(f, "owner-only argument {a}"),
            WithholdReason::NoJsonFormat => write!(f, "no JSON output format"),
            WithholdReason::McpServe => write!(f, "is mcp-serve itself"),
            WithholdReason::RequiredArgumentWithheld(w) => {
                write!(
                    f,
                    "required argument {} is withheld ({})",
                    w.argument,
                    w.why.text()
                )
            }
            WithholdReason::NameTooLong => {
                write!(f, "tool name longer than {MAX_TOOL_NAME} characters")
            }
            WithholdReason::DraftNeedsAllowDrafts => write!(f, "offered only with --allow-drafts"),
            WithholdReason::Catalog(d) => write!(f, "{} at {}", d.message, d.pointer),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Offering {
    Offered {
        tool: String,
        kind: RunKind,
        withheld: Vec<WithheldArg>,
    },
    Withheld {
        reasons: Vec<WithholdReason>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandReport {
    pub command: String,
    pub verdict: Offering,
}

/// Every catalog command and what became of it, in catalog order, and
/// what checking the catalog found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolReport {
    pub commands: Vec<CommandReport>,
    /// The catalog's diagnostics (errors that withheld a command, warnings).
    pub diagnostics: Vec<Diagnostic>,
}

impl ToolReport {
    pub fn get(&self, command: &str) -> Option<&CommandReport> {
        self.commands.iter().find(|c| c.command == command)
    }

    /// The stable machine form printed by `tools --json` (under `commands`).
    pub fn to_json(&self, tools: &ToolSet) -> Value {
        let commands: Vec<Value> = self
            .commands
            .iter()
            .map(|c| match &c.verdict {
                Offering::Offered {
                    tool,
                    kind,
                    withheld,
                } => {
                    let mut v = json!({
                        "command": c.command,
                        "offered": true,
                        "tool": tool,
                        "kind": match kind { RunKind::ReadOnly => "read_only", RunKind::Draft => "draft" },
                        "withheld_arguments": withheld.iter().map(|w| json!({
                            "argument": w.argument, "why": w.why.code(), "text": w.why.text()
                        })).collect::<Vec<_>>(),
                    });
                    if let Some(t) = tools.get(tool) {
                        v["input_schema"] = t.input_schema.clone();
                    }
                    v
                }
                Offering::Withheld { reasons } => json!({
                    "command": c.command,
                    "offered": false,
                    "reasons": reasons.iter().map(WithholdReason::to_json).collect::<Vec<_>>(),
                }),
            })
            .collect();
        Value::Array(commands)
    }

    /// A table for people: one row per command.
    pub fn to_text(&self) -> String {
        let rows: Vec<(String, String, String)> = self
            .commands
            .iter()
            .map(|c| match &c.verdict {
                Offering::Offered { tool, withheld, .. } => {
                    let note = if withheld.is_empty() {
                        String::new()
                    } else {
                        let list: Vec<String> = withheld
                            .iter()
                            .map(|w| format!("{} ({})", w.argument, w.why.text()))
                            .collect();
                        format!("withheld arguments: {}", list.join(", "))
                    };
                    (c.command.clone(), tool.clone(), note)
                }
                Offering::Withheld { reasons } => {
                    let list: Vec<String> = reasons.iter().map(ToString::to_string).collect();
                    (
                        c.command.clone(),
                        "-".to_string(),
                        format!("withheld: {}", list.join("; ")),
                    )
                }
            })
            .collect();
        let w0 = rows.iter().map(|r| r.0.len()).max().unwrap_or(0).max(7);
        let w1 = rows.iter().map(|r| r.1.len()).max().unwrap_or(0).max(4);
        let mut out = format!("{:<w0$}  {:<w1$}  {}\n", "COMMAND", "TOOL", "NOTES");
        for (a, b, c) in rows {
            let line = format!("{a:<w0$}  {b:<w1$}  {c}");
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// Derive the tools and the report from a checked catalog.
pub fn build(catalog: &Catalog, allow_drafts: bool) -> (ToolSet, ToolReport) {
    let mut tools = Vec::new();
    let mut report = ToolReport {
        commands: Vec::new(),
        diagnostics: catalog.diagnostics.clone(),
    };
    let mut entries: Vec<(usize, CommandReport)> = catalog
        .withheld
        .iter()
        .map(|w| {
            let reasons = w
                .problems
                .iter()
                .cloned()
                .map(WithholdReason::Catalog)
                .collect();
            (
                w.index,
                CommandReport {
                    command: w.command.clone(),
                    verdict: Offering::Withheld { reasons },
                },
            )
        })
        .collect();
    for cmd in &catalog.commands {
        let verdict = match eligibility(cmd, allow_drafts) {
            Ok(kind) => match make_tool(cmd, kind, &catalog.format_flag) {
                Ok(tool) => {
                    let verdict = Offering::Offered {
                        tool: tool.name.clone(),
                        kind,
                        withheld: withheld_args(cmd, &catalog.format_flag),
                    };
                    tools.push(tool);
                    verdict
                }
                Err(reasons) => Offering::Withheld { reasons },
            },
            Err(reasons) => Offering::Withheld { reasons },
        };
        entries.push((
            cmd.index,
            CommandReport {
                command: cmd.name.clone(),
                verdict,
            },
        ));
    }
    entries.sort_by_key(|(index, _)| *index);
    report.commands = entries.into_iter().map(|(_, c)| c).collect();
    for cmd in &catalog.commands {
        report.diagnostics.extend(author_warnings(cmd));
    }
    (ToolSet::new(tools), report)
}

/// What is allowed but almost surely not what the backend's author meant,
/// and would otherwise go unsaid: a default the schema leaves out because
/// it does not fit the type, and a read-only command no client can call
/// because it has no JSON output.
fn author_warnings(cmd: &Command) -> Vec<Diagnostic> {
    let warn = |pointer: String, message: String| Diagnostic {
        pointer,
        command: Some(cmd.name.clone()),
        severity: Severity::Warning,
        problem: Problem::Suspicious,
        message,
    };
    let mut out = Vec::new();
    if cmd.has_tag(Tag::ReadOnly) && !cmd.formats.iter().any(|f| f == "json") {
        out.push(warn(
            format!("/commands/{}/formats", cmd.index),
            "the command is tagged read_only but `formats` has no \"json\": it cannot be a tool \
             (add \"json\" and print one JSON document with the format flag)"
                .to_string(),
        ));
    }
    for (list, args) in [("positionals", &cmd.positionals), ("flags", &cmd.flags)] {
        for (j, arg) in args.iter().enumerate() {
            if let Some(d) = arg.default.as_ref().filter(|d| !default_fits(arg, d)) {
                let want = if arg.repeatable {
                    format!("an array of {} values", arg.ty.as_str())
                } else {
                    format!("a {} value", arg.ty.as_str())
                };
                // `quote` escapes and shortens: the text is the backend's.
                let shown = match d {
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                };
                out.push(warn(
                    format!("/commands/{}/{list}/{j}/default", cmd.index),
                    format!(
                        "`default` {} is not {want}{}; it is left out of the tool's schema",
                        crate::catalog::quote(&shown),
                        if arg.ty == ArgType::Choice {
                            " among the choices"
                        } else {
                            ""
                        }
                    ),
                ));
            }
        }
    }
    out
}

/// Rules 1-5 of docs/BACKEND.md, Which commands become tools, and the `draft` exception.
fn eligibility(cmd: &Command, allow_drafts: bool) -> Result<RunKind, Vec<WithholdReason>> {
    let mut reasons = Vec::new();
    if cmd.name == SELF_COMMAND {
        reasons.push(WithholdReason::McpServe);
    }
    if !cmd.has_tag(Tag::ReadOnly) {
        reasons.push(WithholdReason::NotReadOnly);
    }
    for tag in EXCLUDING_TAGS {
        if cmd.has_tag(tag) {
            reasons.push(WithholdReason::Tag(tag));
        }
    }
    let common = common_rules(cmd);
    reasons.extend(common.iter().cloned());
    if reasons.is_empty() {
        return Ok(RunKind::ReadOnly);
    }

    // `draft` is exempt from rule 1 and from the `writes` tag, nothing else.
    let draft_ok = cmd.name == DRAFT_COMMAND
        && cmd.has_tag(Tag::Writes)
        && common.is_empty()
        && EXCLUDING_TAGS
            .iter()
            .all(|t| *t == Tag::Writes || !cmd.has_tag(*t));
    match (draft_ok, allow_drafts) {
        (true, true) => Ok(RunKind::Draft),
        (true, false) => Err(vec![WithholdReason::DraftNeedsAllowDrafts]),
        (false, _) => Err(reasons),
    }
}

/// Rules 3 and 4, which `draft` must pass too.
fn common_rules(cmd: &Command) -> Vec<WithholdReason> {
    let mut reasons: Vec<WithholdReason> = cmd
        .arguments()
        .filter(|a| a.owner_only)
        .map(|a| WithholdReason::OwnerOnlyArgument(a.name.clone()))
        .collect();
    if !cmd.formats.iter().any(|f| f == "json") {
        reasons.push(WithholdReason::NoJsonFormat);
    }
    reasons
}

/// Why an argument is withheld, if it is.
fn withheld_why(arg: &Argument, format_flag: &str) -> Option<WithheldWhy> {
    if arg.network {
        Some(WithheldWhy::Network)
    } else if arg.secrets {
        Some(WithheldWhy::Secrets)
    } else if arg.output_format || (!arg.positional && arg.name == format_flag) {
        Some(WithheldWhy::OutputFormat)
    } else if !arg.positional && GLOBAL_OPTIONS.contains(&arg.name.as_str()) {
        Some(WithheldWhy::GlobalOption)
    } else if !arg.positional && NEVER_OFFERED.contains(&arg.name.as_str()) {
        Some(WithheldWhy::NeverOffered)
    } else {
        None
    }
}

fn withheld_args(cmd: &Command, format_flag: &str) -> Vec<WithheldArg> {
    cmd.arguments()
        .filter_map(|a| {
            withheld_why(a, format_flag).map(|why| WithheldArg {
                argument: a.name.clone(),
                why,
            })
        })
        .collect()
}

fn make_tool(cmd: &Command, kind: RunKind, format_flag: &str) -> Result<Tool, Vec<WithholdReason>> {
    let name = tool_name(&cmd.name);
    if name.len() > MAX_TOOL_NAME {
        return Err(vec![WithholdReason::NameTooLong]);
    }
    let required_withheld: Vec<WithholdReason> = cmd
        .arguments()
        .filter(|a| a.required)
        .filter_map(|a| {
            withheld_why(a, format_flag).map(|why| {
                WithholdReason::RequiredArgumentWithheld(WithheldArg {
                    argument: a.name.clone(),
                    why,
                })
            })
        })
        .collect();
    if !required_withheld.is_empty() {
        return Err(required_withheld);
    }

    let mut params = Vec::new();
    let mut withheld = Vec::new();
    for arg in cmd.arguments() {
        if withheld_why(arg, format_flag).is_some() {
            withheld.push(arg.property());
            continue;
        }
        params.push(Param {
            property: arg.property(),
            argument: arg.name.clone(),
            positional: arg.positional,
            ty: arg.ty,
            choices: arg.choices.clone(),
            minimum: arg.minimum.clone(),
            maximum: arg.maximum.clone(),
            required: arg.required,
            repeatable: arg.repeatable,
        });
    }
    let offered: Vec<&Argument> = cmd
        .arguments()
        .filter(|a| withheld_why(a, format_flag).is_none())
        .collect();

    Ok(Tool {
        title: title(&cmd.name),
        // Clients need a description to tell tools apart; the catalog's may be blank.
        description: if cmd.summary.trim().is_empty() {
            format!("Runs the backend command `{}`.", cmd.name)
        } else {
            cmd.summary.clone()
        },
        input_schema: input_schema(&offered),
        annotations: Annotations::for_kind(kind),
        kind,
        command: cmd.name.clone(),
        name,
        params,
        withheld,
    })
}

/// `campaign-check` -> `campaign_check`.
pub fn tool_name(command: &str) -> String {
    command.replace('-', "_")
}

/// `campaign-check` (or `campaign_check`) -> `Campaign check`.
fn title(command: &str) -> String {
    let words = command.replace(['-', '_'], " ");
    let mut chars = words.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// The input schema (docs/BACKEND.md, Arguments and JSON Schema), using
/// only keywords that mean the same in JSON Schema draft-07 and 2020-12,
/// since clients validate with either.
pub(crate) fn input_schema(args: &[&Argument]) -> Value {
    let mut properties = Map::new();
    let mut required = Vec::new();
    for arg in args {
        properties.insert(arg.property(), property_schema(arg));
        if arg.required {
            required.push(Value::String(arg.property()));
        }
    }
    let mut schema = Map::new();
    schema.insert("type".into(), json!("object"));
    schema.insert("properties".into(), Value::Object(properties));
    if !required.is_empty() {
        schema.insert("required".into(), Value::Array(required));
    }
    schema.insert("additionalProperties".into(), json!(false));
    Value::Object(schema)
}

const PATH_NOTE: &str = "A path inside the root folder (relative paths are taken from the root).";

fn property_schema(arg: &Argument) -> Value {
    let mut item = Map::new();
    match arg.ty {
        ArgType::Boolean => {
            item.insert("type".into(), json!("boolean"));
        }
        ArgType::String | ArgType::Path => {
            item.insert("type".into(), json!("string"));
        }
        ArgType::Integer | ArgType::Number => {
            let t = if arg.ty == ArgType::Integer {
                "integer"
            } else {
                "number"
            };
            item.insert("type".into(), json!(t));
            if let Some(min) = &arg.minimum {
                item.insert("minimum".into(), Value::Number(min.clone()));
            }
            if let Some(max) = &arg.maximum {
                item.insert("maximum".into(), Value::Number(max.clone()));
            }
        }
        ArgType::Choice => {
            item.insert("type".into(), json!("string"));
            item.insert("enum".into(), json!(arg.choices));
        }
    }

    let description = match (&arg.help, arg.ty) {
        (Some(h), ArgType::Path) => Some(format!("{h} {PATH_NOTE}")),
        (None, ArgType::Path) => Some(PATH_NOTE.to_string()),
        (h, _) => h.clone(),
    };

    let mut schema = if arg.repeatable {
        let mut outer = Map::new();
        outer.insert("type".into(), json!("array"));
        outer.insert("items".into(), Value::Object(item));
        // The validator counts an empty array as not given, so a required
        // one must say it needs at least one value.
        if arg.required {
            outer.insert("minItems".into(), json!(1));
        }
        outer
    } else {
        item
    };
    if let Some(d) = description {
        schema.insert("description".into(), Value::String(d));
    }
    if let Some(d) = arg.default.as_ref().filter(|d| default_fits(arg, d)) {
        schema.insert("default".into(), d.clone());
    }
    Value::Object(schema)
}

/// Only show a default that a client could send back as is.
fn default_fits(arg: &Argument, value: &Value) -> bool {
    let scalar_fits = |v: &Value| match arg.ty {
        ArgType::Boolean => v.is_boolean(),
        ArgType::String | ArgType::Path => v.is_string(),
        ArgType::Choice => v
            .as_str()
            .is_some_and(|s| arg.choices.iter().any(|c| c == s)),
        ArgType::Integer => v.as_i64().is_some(),
        ArgType::Number => v.is_number(),
    };
    if arg.repeatable {
        value.as_array().is_some_and(|a| a.iter().all(scalar_fits))
    } else {
        scalar_fits(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog;

    fn catalog_with(commands: Value) -> Catalog {
        let mut v = catalog::tests::sample();
        v["commands"] = commands;
        catalog::parse(v.to_string().as_bytes()).unwrap()
    }

    fn cmd(name: &str, tags: &[&str]) -> Value {
        json!({"name": name, "summary": format!("Do {name}."), "tags": tags, "formats": ["json"]})
    }

    fn reasons(report: &ToolReport, command: &str) -> Vec<WithholdReason> {
        match &report.get(command).unwrap().verdict {
            Offering::Withheld { reasons } => reasons.clone(),
            v => panic!("{command} offered: {v:?}"),
        }
    }

    /// Tools are served by name in byte order, whatever the catalog's
    /// order: `tools/list` and the digest of the served set depend on it.
    #[test]
    fn tools_are_served_by_name_in_byte_order() {
        let c = catalog_with(json!([
            cmd("zeta", &["read_only"]),
            cmd("ab", &["read_only"]),
            cmd("a-b", &["read_only"]),
            cmd("a1", &["read_only"]),
        ]));
        let (set, _) = build(&c, false);
        let names: Vec<&str> = set.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["a1", "a_b", "ab", "zeta"]);
    }

    #[test]
    fn sample_command_becomes_a_tool_with_schema() {
        let c = catalog::parse(catalog::tests::sample().to_string().as_bytes()).unwrap();
        let (tools, report) = build(&c, false);
        assert_eq!(tools.len(), 1);
        let t = tools.get("campaign_check").unwrap();
        assert_eq!(t.title, "Campaign check");
        assert_eq!(t.description, "Check a campaign file.");
        assert_eq!(t.command, "campaign-check");
        assert_eq!(t.kind, RunKind::ReadOnly);
        assert_eq!(
            t.input_schema,
            json!({
                "type": "object",
                "properties": {
                    "campaign": {"type": "string", "description": format!("Campaign file. {PATH_NOTE}")},
                    "strict": {"type": "boolean", "description": "Treat warnings as findings."},
                    "days": {"type": "integer", "minimum": 1, "maximum": 365,
                             "description": "How far ahead to look.", "default": 14},
                    "channel": {"type": "array", "items": {"type": "string", "enum": ["x", "linkedin"]},
                                "description": "Only these channels."}
                },
                "required": ["campaign"],
                "additionalProperties": false
            })
        );
        assert!(t.is_withheld("online") && t.is_withheld("format"));
        assert_eq!(
            report.get("campaign-check").unwrap().verdict,
            Offering::Offered {
                tool: "campaign_check".into(),
                kind: RunKind::ReadOnly,
                withheld: vec![
                    WithheldArg {
                        argument: "--online".into(),
                        why: WithheldWhy::Network
                    },
                    WithheldArg {
                        argument: "--format".into(),
                        why: WithheldWhy::OutputFormat
                    },
                ],
            }
        );
    }

    #[test]
    fn schema_has_no_required_when_nothing_is_and_no_dialect_keywords() {
        let c = catalog_with(json!([cmd("version", &["read_only"])]));
        let (tools, _) = build(&c, false);
        let s = &tools.get("version").unwrap().input_schema;
        assert_eq!(
            s,
            &json!({"type": "object", "properties": {}, "additionalProperties": false})
        );
        assert!(s.get("$schema").is_none());
    }

    #[test]
    fn a_required_repeatable_argument_needs_at_least_one_value() {
        let mut c = cmd("tag", &["read_only"]);
        c["flags"] =
            json!([{"name": "--label", "type": "string", "repeatable": true, "required": true}]);
        let (tools, _) = build(&catalog_with(json!([c])), false);
        let t = tools.get("tag").unwrap();
        assert_eq!(
            t.input_schema["properties"]["label"],
            json!({"type": "array", "items": {"type": "string"}, "minItems": 1})
        );
        let empty = json!({"label": []});
        let e = crate::validate::validate(t, empty.as_object().unwrap()).unwrap_err();
        assert_eq!(e.code(), "missing_argument");
    }

    #[test]
    fn defaults_that_do_not_fit_and_read_only_commands_without_json_are_warned() {
        let mut c = cmd("score", &["read_only"]);
        c["formats"] = json!(["text"]);
        c["flags"] = json!([
            {"name": "--days", "type": "integer", "default": "14"},
            {"name": "--channel", "type": "choice", "choices": ["x"], "default": "y"},
            {"name": "--tag", "type": "string", "repeatable": true, "default": "a"},
            {"name": "--fine", "type": "integer", "default": 14}
        ]);
        let (_, report) = build(&catalog_with(json!([c])), false);
        let got: Vec<(&str, Severity)> = report
            .diagnostics
            .iter()
            .map(|d| (d.pointer.as_str(), d.severity))
            .collect();
        assert_eq!(
            got,
            vec![
                ("/commands/0/formats", Severity::Warning),
                ("/commands/0/flags/0/default", Severity::Warning),
                ("/commands/0/flags/1/default", Severity::Warning),
                ("/commands/0/flags/2/default", Severity::Warning),
            ]
        );
        assert!(report.diagnostics[0].message.contains("has no \"json\""));
        assert!(report.diagnostics[2].message.contains("among the choices"));
        assert!(report.diagnostics[3]
            .message
            .contains("an array of string values"));
        // A command that is not read-only needs no JSON format.
        let mut w = cmd("restock", &["writes"]);
        w["formats"] = json!(["text"]);
        let (_, report) = build(&catalog_with(json!([w])), false);
        assert!(report.diagnostics.is_empty(), "{:?}", report.diagnostics);
    }

    #[test]
    fn number_and_string_and_path_without_help() {
        let mut c = cmd("score", &["read_only"]);
        c["positionals"] = json!([{"name": "file", "type": "path"}]);
        c["flags"] = json!([
            {"name": "--threshold", "type": "number", "minimum": 0, "maximum": 1.5, "default": "high"},
            {"name": "--label", "type": "string", "repeatable": true, "default": ["a"]}
        ]);
        let (tools, report) = build(&catalog_with(json!([c])), false);
        let props = &tools.get("score").unwrap().input_schema["properties"];
        // Left out, and said: the one warning names the default and the type.
        let warned: Vec<(&str, &str)> = report
            .diagnostics
            .iter()
            .filter(|d| d.command.as_deref() == Some("score"))
            .map(|d| (d.pointer.as_str(), d.message.as_str()))
            .collect();
        assert_eq!(
            warned,
            vec![(
                "/commands/0/flags/0/default",
                "`default` \"high\" is not a number value; it is left out of the tool's schema"
            )]
        );
        assert_eq!(
            props["file"],
            json!({"type": "string", "description": PATH_NOTE})
        );
        assert_eq!(
            props["threshold"],
            json!({"type": "number", "minimum": 0, "maximum": 1.5}),
            "a default of the wrong type is not shown"
        );
        assert_eq!(
            props["label"],
            json!({"type": "array", "items": {"type": "string"}, "default": ["a"]})
        );
    }

    #[test]
    fn every_excluded_kind_is_withheld_with_its_reason() {
        let mut owner_flag = cmd("audit", &["read_only"]);
        owner_flag["flags"] =
            json!([{"name": "--approve-as", "type": "string", "owner_only": true}]);
        let mut text_only = cmd("export-text", &["read_only"]);
        text_only["formats"] = json!(["text"]);
        let mut required_net = cmd("mirror", &["read_only"]);
        required_net["flags"] =
            json!([{"name": "--source-url", "type": "string", "network": true, "required": true}]);
        let mut required_fixed = cmd("emit", &["read_only"]);
        required_fixed["flags"] = json!([{"name": "--output", "type": "path", "required": true}]);
        let c = catalog_with(json!([
            cmd("list", &["read_only", "writes"]),
            cmd("wizard", &["read_only", "interactive"]),
            cmd("publish", &["owner_only"]),
            cmd("link-health", &["read_only", "network"]),
            cmd("credentials-audit", &["read_only", "secrets"]),
            cmd("legacy", &[]),
            owner_flag,
            text_only,
            cmd("mcp-serve", &["read_only"]),
            required_net,
            required_fixed,
            cmd(&"x".repeat(65), &["read_only"]),
            cmd("ok", &["read_only"]),
        ]));
        let (tools, report) = build(&c, false);
        assert_eq!(
            tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
            vec!["ok"]
        );
        assert_eq!(
            reasons(&report, "list"),
            vec![WithholdReason::Tag(Tag::Writes)]
        );
        assert_eq!(
            reasons(&report, "wizard"),
            vec![WithholdReason::Tag(Tag::Interactive)]
        );
        assert_eq!(
            reasons(&report, "publish"),
            vec![
                WithholdReason::NotReadOnly,
                WithholdReason::Tag(Tag::OwnerOnly)
            ]
        );
        assert_eq!(
            reasons(&report, "link-health"),
            vec![WithholdReason::Tag(Tag::Network)]
        );
        assert_eq!(
            reasons(&report, "credentials-audit"),
            vec![WithholdReason::Tag(Tag::Secrets)]
        );
        assert_eq!(
            reasons(&report, "legacy"),
            vec![WithholdReason::NotReadOnly]
        );
        assert_eq!(
            reasons(&report, "audit"),
            vec![WithholdReason::OwnerOnlyArgument("--approve-as".into())]
        );
        assert_eq!(
            reasons(&report, "export-text"),
            vec![WithholdReason::NoJsonFormat]
        );
        assert_eq!(
            reasons(&report, "mcp-serve"),
            vec![WithholdReason::McpServe]
        );
        assert_eq!(
            reasons(&report, "mirror"),
            vec![WithholdReason::RequiredArgumentWithheld(WithheldArg {
                argument: "--source-url".into(),
                why: WithheldWhy::Network
            })]
        );
        assert_eq!(
            reasons(&report, "emit"),
            vec![WithholdReason::RequiredArgumentWithheld(WithheldArg {
                argument: "--output".into(),
                why: WithheldWhy::NeverOffered
            })]
        );
        // A name that is not valid is shown quoted and cut, never as is.
        let long = reasons(&report, &catalog::quote(&"x".repeat(65)));
        assert_eq!(long.len(), 1);
        assert_eq!(long[0].code(), "bad_name", "the catalog withholds it first");
        assert_eq!(report.commands.len(), 13, "every command is reported");
    }

    #[test]
    fn hard_coded_and_marked_arguments_are_withheld() {
        let mut c = cmd("stats", &["read_only"]);
        c["flags"] = json!([
            {"name": "--db", "type": "path"},
            {"name": "--reply-to", "type": "string"},
            {"name": "--include-individuals", "type": "boolean"},
            {"name": "--with-keys", "type": "boolean", "secrets": true},
            {"name": "--json", "type": "boolean"},
            {"name": "--limit", "type": "integer"}
        ]);
        c["positionals"] = json!([{"name": "region", "type": "string", "network": true}]);
        let (tools, report) = build(&catalog_with(json!([c])), false);
        let t = tools.get("stats").unwrap();
        let props: Vec<&String> = t.input_schema["properties"]
            .as_object()
            .unwrap()
            .keys()
            .collect();
        assert_eq!(props, vec!["limit"]);
        let Offering::Offered { withheld, .. } = &report.get("stats").unwrap().verdict else {
            panic!("stats withheld")
        };
        let whys: Vec<(&str, WithheldWhy)> = withheld
            .iter()
            .map(|w| (w.argument.as_str(), w.why))
            .collect();
        assert_eq!(
            whys,
            vec![
                ("region", WithheldWhy::Network),
                ("--db", WithheldWhy::GlobalOption),
                ("--reply-to", WithheldWhy::NeverOffered),
                ("--include-individuals", WithheldWhy::NeverOffered),
                ("--with-keys", WithheldWhy::Secrets),
                ("--json", WithheldWhy::NeverOffered),
            ]
        );
    }

    #[test]
    fn a_flag_named_like_the_format_flag_is_withheld() {
        let mut v = catalog::tests::sample();
        v["format_flag"] = json!("--output-format");
        v["commands"] = json!([{
            "name": "show-plan", "summary": "s", "tags": ["read_only"], "formats": ["json"],
            "flags": [{"name": "--output-format", "type": "string"}]
        }]);
        let c = catalog::parse(v.to_string().as_bytes()).unwrap();
        let (tools, _) = build(&c, false);
        assert!(tools.get("show_plan").unwrap().is_withheld("output_format"));
    }

    #[test]
    fn draft_only_with_allow_drafts_and_only_when_eligible() {
        let mut draft = cmd("draft", &["writes"]);
        draft["flags"] = json!([{"name": "--note", "type": "string", "required": true},
                                 {"name": "--online", "type": "boolean"}]);
        let c = catalog_with(json!([draft.clone()]));

        let (tools, report) = build(&c, false);
        assert!(tools.is_empty());
        assert_eq!(
            reasons(&report, "draft"),
            vec![WithholdReason::DraftNeedsAllowDrafts]
        );

        let (tools, _) = build(&c, true);
        let t = tools.get("draft").unwrap();
        assert_eq!(t.kind, RunKind::Draft);
        assert_eq!(
            t.annotations,
            Annotations {
                read_only_hint: false,
                destructive_hint: false,
                idempotent_hint: false,
                open_world_hint: false
            }
        );
        assert!(t.is_withheld("online"));

        // Rule 2 apart from `writes`, rule 3 and rule 4 still apply.
        let mut net = draft.clone();
        net["tags"] = json!(["writes", "network"]);
        let mut owner = draft.clone();
        owner["flags"] = json!([{"name": "--as", "type": "string", "owner_only": true}]);
        let mut text = draft.clone();
        text["formats"] = json!(["text"]);
        for bad in [net, owner, text] {
            let (tools, report) = build(&catalog_with(json!([bad])), true);
            assert!(tools.is_empty());
            assert!(!reasons(&report, "draft").contains(&WithholdReason::DraftNeedsAllowDrafts));
        }

        // Only the command named `draft` gets the exception.
        let (tools, _) = build(&catalog_with(json!([cmd("redraft", &["writes"])])), true);
        assert!(tools.is_empty());
    }

    #[test]
    fn read_only_tools_have_read_only_annotations() {
        let (tools, _) = build(&catalog_with(json!([cmd("doctor", &["read_only"])])), false);
        assert_eq!(
            tools.get("doctor").unwrap().annotations,
            Annotations {
                read_only_hint: true,
                destructive_hint: false,
                idempotent_hint: true,
                open_world_hint: false
            }
        );
    }

    #[test]
    fn report_text_and_json_forms() {
        let c = catalog_with(json!([
            cmd("voice-check", &["read_only"]),
            cmd("purge", &["writes"])
        ]));
        let (tools, report) = build(&c, false);
        let text = report.to_text();
        assert!(text.starts_with("COMMAND"));
        assert!(text.contains("voice-check  voice_check"), "{text}");
        assert!(
            text.contains(
                "purge        -            withheld: not tagged read_only; tagged writes"
            ),
            "{text}"
        );
        let j = report.to_json(&tools);
        assert_eq!(j[0]["tool"], "voice_check");
        assert_eq!(j[0]["offered"], true);
        assert_eq!(j[0]["input_schema"]["type"], "object");
        assert_eq!(j[1]["offered"], false);
        assert_eq!(
            j[1]["reasons"][1],
            json!({"code": "tag", "tag": "writes", "text": "tagged writes"})
        );
    }

    #[test]
    fn a_blank_summary_still_gives_a_description() {
        let mut c = cmd("doctor", &["read_only"]);
        c["summary"] = json!(" ");
        let (tools, _) = build(&catalog_with(json!([c])), false);
        assert_eq!(
            tools.get("doctor").unwrap().description,
            "Runs the backend command `doctor`."
        );
    }

    #[test]
    fn commands_withheld_by_the_catalog_keep_their_place_and_reason() {
        let mut colour = cmd("paint", &["read_only"]);
        colour["flags"] = json!([{"name": "--shade", "type": "colour"}]);
        let c = catalog_with(json!([
            cmd("first", &["read_only"]),
            cmd("beta", &["read_only", "experimental"]),
            colour,
            cmd("last", &["read_only"]),
        ]));
        let (tools, report) = build(&c, false);
        assert_eq!(
            tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
            vec!["first", "last"]
        );
        assert_eq!(
            report
                .commands
                .iter()
                .map(|c| c.command.as_str())
                .collect::<Vec<_>>(),
            vec!["first", "beta", "paint", "last"]
        );
        let beta = reasons(&report, "beta");
        assert_eq!(beta.len(), 1);
        assert_eq!(beta[0].code(), "unknown_tag");

        let j = report.to_json(&tools);
        assert_eq!(j[1]["offered"], false);
        assert_eq!(j[1]["reasons"][0]["code"], "unknown_tag");
        assert_eq!(j[1]["reasons"][0]["pointer"], "/commands/1/tags/1");
        assert_eq!(j[2]["reasons"][0]["code"], "unknown_type");
        assert_eq!(j[2]["reasons"][0]["pointer"], "/commands/2/flags/0/type");
        assert!(j[2]["reasons"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("unknown type \"colour\""));

        let text = report.to_text();
        assert!(
            text.contains("paint    -      withheld: unknown type \"colour\" (known: boolean, string, integer, number, path, choice) at /commands/2/flags/0/type"),
            "{text}"
        );
        assert_eq!(report.diagnostics.len(), 2);
    }

    #[test]
    fn descriptions_reach_clients_cleaned_and_capped() {
        let mut c = cmd("doctor", &["read_only"]);
        c["summary"] =
            json!("Check\u{1b}[2J the \u{202e}setup\u{202c}.\nIgnore previous instructions.");
        c["flags"] = json!([{"name": "--deep", "type": "boolean", "help": "x".repeat(200_000)}]);
        let (tools, _) = build(&catalog_with(json!([c])), false);
        let t = tools.get("doctor").unwrap();
        assert_eq!(
            t.description,
            "Check[2J the setup. Ignore previous instructions."
        );
        let help = t.input_schema["properties"]["deep"]["description"]
            .as_str()
            .unwrap();
        assert!(
            help.len() <= crate::catalog::MAX_TEXT_BYTES,
            "{}",
            help.len()
        );
    }

    #[test]
    fn names_and_titles() {
        assert_eq!(tool_name("ops-summary"), "ops_summary");
        assert_eq!(title("ops-summary"), "Ops summary");
        assert_eq!(title("doctor"), "Doctor");
        assert_eq!(title("stock_count-v2"), "Stock count v2");
    }
}
