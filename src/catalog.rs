//! The backend's catalog (CONTRACT.md §2), parsed once at start and checked
//! strictly.
//!
//! Everything the server offers is derived from this one document, so a
//! catalog the server misreads would become tools that run the wrong thing.
//! Nothing here guesses: an unknown type or tag, a malformed name, or two
//! arguments that would map to the same property is a start-up error that
//! names the command and the argument, for the owner to fix in the backend.

use std::collections::HashSet;
use std::fmt;
use std::path::PathBuf;

use serde_json::{Map, Number, Value};

/// The only catalog version this server understands.
pub const CATALOG_VERSION: u64 = 1;

#[derive(Debug, Clone, PartialEq)]
pub struct Catalog {
    pub program: Program,
    /// The flag that selects the output format, e.g. `--format`.
    pub format_flag: String,
    /// Whether the backend's parser treats a literal `--` as the end of options.
    pub end_of_options: bool,
    pub paths: CatalogPaths,
    pub commands: Vec<Command>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Program {
    pub name: String,
    pub version: String,
}

/// The absolute locations the backend resolved for the global options.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CatalogPaths {
    pub home: Option<PathBuf>,
    pub db: Option<PathBuf>,
    pub accounts: Option<PathBuf>,
    pub profile: Option<PathBuf>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Command {
    pub name: String,
    pub summary: String,
    pub tags: Vec<Tag>,
    pub formats: Vec<String>,
    pub positionals: Vec<Argument>,
    pub flags: Vec<Argument>,
}

impl Command {
    pub fn has_tag(&self, tag: Tag) -> bool {
        self.tags.contains(&tag)
    }

    /// Positionals first, then flags, each in catalog order.
    pub fn arguments(&self) -> impl Iterator<Item = &Argument> {
        self.positionals.iter().chain(self.flags.iter())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Tag {
    ReadOnly,
    Writes,
    Interactive,
    OwnerOnly,
    Network,
    Secrets,
}

impl Tag {
    fn parse(s: &str) -> Option<Tag> {
        Some(match s {
            "read_only" => Tag::ReadOnly,
            "writes" => Tag::Writes,
            "interactive" => Tag::Interactive,
            "owner_only" => Tag::OwnerOnly,
            "network" => Tag::Network,
            "secrets" => Tag::Secrets,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Tag::ReadOnly => "read_only",
            Tag::Writes => "writes",
            Tag::Interactive => "interactive",
            Tag::OwnerOnly => "owner_only",
            Tag::Network => "network",
            Tag::Secrets => "secrets",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgType {
    Boolean,
    String,
    Integer,
    Number,
    Path,
    Choice,
}

impl ArgType {
    fn parse(s: &str) -> Option<ArgType> {
        Some(match s {
            "boolean" => ArgType::Boolean,
            "string" => ArgType::String,
            "integer" => ArgType::Integer,
            "number" => ArgType::Number,
            "path" => ArgType::Path,
            "choice" => ArgType::Choice,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Argument {
    /// As in the catalog: `--kebab-case` for flags, `snake_case` for positionals.
    pub name: String,
    pub positional: bool,
    pub ty: ArgType,
    pub choices: Vec<String>,
    pub minimum: Option<Number>,
    pub maximum: Option<Number>,
    pub default: Option<Value>,
    pub required: bool,
    pub repeatable: bool,
    pub help: Option<String>,
    pub owner_only: bool,
    pub network: bool,
    pub secrets: bool,
    pub output_format: bool,
}

impl Argument {
    /// The tool property this argument becomes (CONTRACT.md §4).
    pub fn property(&self) -> String {
        property_name(&self.name)
    }
}

/// Leading dashes dropped, `-` mapped to `_`.
pub fn property_name(argument: &str) -> String {
    argument.trim_start_matches('-').replace('-', "_")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CatalogErrorKind {
    /// Not JSON, or a field of the wrong shape.
    Malformed,
    /// `catalog` is not 1.
    Version,
    UnknownTag,
    UnknownType,
    /// A name that doesn't have its required form.
    BadName,
    /// Two commands, or two arguments of one command, with the same name
    /// (after the `-` -> `_` mapping for arguments).
    Duplicate,
}

/// Why the catalog was refused, and where in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogError {
    kind: CatalogErrorKind,
    at: String,
    problem: String,
}

impl CatalogError {
    fn new(kind: CatalogErrorKind, at: &Place<'_>, problem: impl Into<String>) -> Self {
        Self {
            kind,
            at: at.to_string(),
            problem: problem.into(),
        }
    }

    #[cfg(test)]
    pub fn kind(&self) -> CatalogErrorKind {
        self.kind
    }
}

impl fmt::Display for CatalogError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the backend's catalog is refused: {}: {}",
            self.at, self.problem
        )
    }
}

impl std::error::Error for CatalogError {}

/// Where a problem is, for the error message.
#[derive(Clone, Copy)]
enum Place<'a> {
    Top,
    Command(&'a str),
    Argument(&'a str, &'a str),
}

impl fmt::Display for Place<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Place::Top => write!(f, "top level"),
            Place::Command(c) => write!(f, "command `{c}`"),
            Place::Argument(c, a) => write!(f, "command `{c}`, argument `{a}`"),
        }
    }
}

use CatalogErrorKind as K;

/// Parse and check the output of `describe --format=json`.
pub fn parse(bytes: &[u8]) -> Result<Catalog, CatalogError> {
    let top = Place::Top;
    let value: Value = serde_json::from_slice(bytes).map_err(|e| {
        CatalogError::new(
            K::Malformed,
            &top,
            format!("describe did not print one JSON document ({e})"),
        )
    })?;
    let obj = value
        .as_object()
        .ok_or_else(|| CatalogError::new(K::Malformed, &top, "the catalog is not a JSON object"))?;

    match obj.get("catalog") {
        Some(v) if v.as_u64() == Some(CATALOG_VERSION) => {}
        Some(v) => {
            return Err(CatalogError::new(
                K::Version,
                &top,
                format!("catalog version {v} is not supported (this server reads version {CATALOG_VERSION})"),
            ))
        }
        None => {
            return Err(CatalogError::new(
                K::Version,
                &top,
                "the `catalog` version field is missing",
            ))
        }
    }

    let program = match obj.get("program") {
        Some(Value::Object(p)) => Program {
            name: req_str(p, "name", &top, "program.name")?,
            version: req_str(p, "version", &top, "program.version")?,
        },
        _ => {
            return Err(CatalogError::new(
                K::Malformed,
                &top,
                "`program` must be an object with `name` and `version`",
            ))
        }
    };
    if program.name.is_empty() {
        return Err(CatalogError::new(
            K::Malformed,
            &top,
            "`program.name` is empty",
        ));
    }

    let format_flag = req_str(obj, "format_flag", &top, "format_flag")?;
    if !is_flag_name(&format_flag) {
        return Err(CatalogError::new(
            K::BadName,
            &top,
            format!("format_flag `{format_flag}` is not a `--kebab-case` flag"),
        ));
    }
    let end_of_options = opt_bool(obj, "end_of_options", &top)?.unwrap_or(true);
    let paths = parse_paths(obj.get("paths"))?;

    let raw_commands = match obj.get("commands") {
        Some(Value::Array(a)) => a,
        _ => {
            return Err(CatalogError::new(
                K::Malformed,
                &top,
                "`commands` must be an array",
            ))
        }
    };
    let mut seen = HashSet::new();
    let mut commands = Vec::with_capacity(raw_commands.len());
    for (i, raw) in raw_commands.iter().enumerate() {
        let cmd = parse_command(i, raw)?;
        if !seen.insert(cmd.name.clone()) {
            return Err(CatalogError::new(
                K::Duplicate,
                &Place::Command(&cmd.name),
                "the command is listed twice",
            ));
        }
        commands.push(cmd);
    }

    Ok(Catalog {
        program,
        format_flag,
        end_of_options,
        paths,
        commands,
    })
}

fn parse_paths(v: Option<&Value>) -> Result<CatalogPaths, CatalogError> {
    let top = Place::Top;
    let obj = match v {
        None | Some(Value::Null) => return Ok(CatalogPaths::default()),
        Some(Value::Object(o)) => o,
        Some(_) => {
            return Err(CatalogError::new(
                K::Malformed,
                &top,
                "`paths` must be an object",
            ))
        }
    };
    let one = |key: &str| -> Result<Option<PathBuf>, CatalogError> {
        match obj.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if s.starts_with('/') && !s.contains('\0') => {
                Ok(Some(PathBuf::from(s)))
            }
            Some(_) => Err(CatalogError::new(
                K::Malformed,
                &top,
                format!("`paths.{key}` must be an absolute path or null"),
            )),
        }
    };
    Ok(CatalogPaths {
        home: one("home")?,
        db: one("db")?,
        accounts: one("accounts")?,
        profile: one("profile")?,
    })
}

fn parse_command(index: usize, raw: &Value) -> Result<Command, CatalogError> {
    let label = format!("#{}", index + 1);
    let obj = raw.as_object().ok_or_else(|| {
        CatalogError::new(
            K::Malformed,
            &Place::Command(&label),
            "a command must be a JSON object",
        )
    })?;
    let name = req_str(obj, "name", &Place::Command(&label), "name")?;
    let here = Place::Command(&name);
    if !is_command_name(&name) {
        return Err(CatalogError::new(
            K::BadName,
            &here,
            "a command name must be lowercase letters, digits and `-`, starting with a letter or digit",
        ));
    }
    let summary = req_str(obj, "summary", &here, "summary")?;

    let mut tags = Vec::new();
    for t in str_list(obj, "tags", &here)? {
        let tag = Tag::parse(&t).ok_or_else(|| {
            CatalogError::new(
                K::UnknownTag,
                &here,
                format!("unknown tag `{t}` (known: read_only, writes, interactive, owner_only, network, secrets)"),
            )
        })?;
        if !tags.contains(&tag) {
            tags.push(tag);
        }
    }
    let formats = str_list(obj, "formats", &here)?;

    let positionals = arg_list(obj, "positionals", &name, true)?;
    let flags = arg_list(obj, "flags", &name, false)?;

    // Positionals are passed in order, so only the last may take many values.
    if let Some(p) = positionals.iter().rev().skip(1).find(|p| p.repeatable) {
        return Err(CatalogError::new(
            K::Malformed,
            &Place::Argument(&name, &p.name),
            "only the last positional may be repeatable",
        ));
    }
    let mut optional_seen = false;
    for p in &positionals {
        if p.required && optional_seen {
            return Err(CatalogError::new(
                K::Malformed,
                &Place::Argument(&name, &p.name),
                "a required positional cannot follow an optional one",
            ));
        }
        optional_seen |= !p.required;
    }

    let mut props = HashSet::new();
    for a in positionals.iter().chain(flags.iter()) {
        if !props.insert(a.property()) {
            return Err(CatalogError::new(
                K::Duplicate,
                &Place::Argument(&name, &a.name),
                format!(
                    "another argument of this command also maps to the property `{}`",
                    a.property()
                ),
            ));
        }
    }

    Ok(Command {
        name,
        summary,
        tags,
        formats,
        positionals,
        flags,
    })
}

fn arg_list(
    obj: &Map<String, Value>,
    key: &str,
    command: &str,
    positional: bool,
) -> Result<Vec<Argument>, CatalogError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, v)| parse_argument(command, i, v, positional))
            .collect(),
        Some(_) => Err(CatalogError::new(
            K::Malformed,
            &Place::Command(command),
            format!("`{key}` must be an array"),
        )),
    }
}

fn parse_argument(
    command: &str,
    index: usize,
    raw: &Value,
    positional: bool,
) -> Result<Argument, CatalogError> {
    let label = format!(
        "{} #{}",
        if positional { "positional" } else { "flag" },
        index + 1
    );
    let obj = raw.as_object().ok_or_else(|| {
        CatalogError::new(
            K::Malformed,
            &Place::Argument(command, &label),
            "an argument must be a JSON object",
        )
    })?;
    let name = req_str(obj, "name", &Place::Argument(command, &label), "name")?;
    let here = Place::Argument(command, &name);
    if positional && !is_positional_name(&name) {
        return Err(CatalogError::new(
            K::BadName,
            &here,
            "a positional name must be snake_case (lowercase letters, digits, `_`, starting with a letter)",
        ));
    }
    if !positional && !is_flag_name(&name) {
        return Err(CatalogError::new(
            K::BadName,
            &here,
            "a flag name must be `--kebab-case`",
        ));
    }

    let type_name = req_str(obj, "type", &here, "type")?;
    let ty = ArgType::parse(&type_name).ok_or_else(|| {
        CatalogError::new(
            K::UnknownType,
            &here,
            format!("unknown type `{type_name}` (known: boolean, string, integer, number, path, choice)"),
        )
    })?;

    let required = opt_bool(obj, "required", &here)?.unwrap_or(false);
    let repeatable = opt_bool(obj, "repeatable", &here)?.unwrap_or(false);
    let owner_only = opt_bool(obj, "owner_only", &here)?.unwrap_or(false);
    let network = opt_bool(obj, "network", &here)?.unwrap_or(false);
    let secrets = opt_bool(obj, "secrets", &here)?.unwrap_or(false);
    let output_format = opt_bool(obj, "output_format", &here)?.unwrap_or(false);
    let help = match obj.get("help") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => {
            return Err(CatalogError::new(
                K::Malformed,
                &here,
                "`help` must be a string",
            ))
        }
    };

    let choices = match (ty, obj.get("choices")) {
        (ArgType::Choice, Some(Value::Array(items))) if !items.is_empty() => {
            let mut out: Vec<String> = Vec::with_capacity(items.len());
            for c in items {
                match c.as_str() {
                    Some(s) if !out.iter().any(|o| o == s) => out.push(s.to_string()),
                    Some(s) => {
                        return Err(CatalogError::new(
                            K::Duplicate,
                            &here,
                            format!("choice `{s}` is listed twice"),
                        ))
                    }
                    None => {
                        return Err(CatalogError::new(
                            K::Malformed,
                            &here,
                            "`choices` must be strings",
                        ))
                    }
                }
            }
            out
        }
        (ArgType::Choice, _) => {
            return Err(CatalogError::new(
                K::Malformed,
                &here,
                "a `choice` argument needs a non-empty `choices` array",
            ))
        }
        (_, None | Some(Value::Null)) => Vec::new(),
        (_, Some(_)) => {
            return Err(CatalogError::new(
                K::Malformed,
                &here,
                "`choices` is only for arguments of type `choice`",
            ))
        }
    };

    let minimum = bound(obj, "minimum", ty, &here)?;
    let maximum = bound(obj, "maximum", ty, &here)?;
    if let (Some(lo), Some(hi)) = (&minimum, &maximum) {
        if lo.as_f64() > hi.as_f64() {
            return Err(CatalogError::new(
                K::Malformed,
                &here,
                "`minimum` is greater than `maximum`",
            ));
        }
    }

    if ty == ArgType::Boolean && positional {
        return Err(CatalogError::new(
            K::Malformed,
            &here,
            "a positional cannot be a boolean",
        ));
    }
    if ty == ArgType::Boolean && repeatable {
        return Err(CatalogError::new(
            K::Malformed,
            &here,
            "a boolean flag cannot be repeatable",
        ));
    }

    Ok(Argument {
        name,
        positional,
        ty,
        choices,
        minimum,
        maximum,
        default: obj.get("default").filter(|v| !v.is_null()).cloned(),
        required,
        repeatable,
        help,
        owner_only,
        network,
        secrets,
        output_format,
    })
}

fn bound(
    obj: &Map<String, Value>,
    key: &str,
    ty: ArgType,
    here: &Place<'_>,
) -> Result<Option<Number>, CatalogError> {
    let n = match obj.get(key) {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Number(n)) => n,
        Some(_) => {
            return Err(CatalogError::new(
                K::Malformed,
                here,
                format!("`{key}` must be a number"),
            ))
        }
    };
    match ty {
        ArgType::Integer if n.as_i64().is_some() => Ok(Some(n.clone())),
        ArgType::Integer => Err(CatalogError::new(
            K::Malformed,
            here,
            format!("`{key}` of an integer argument must be a whole number"),
        )),
        ArgType::Number if n.as_f64().is_some_and(f64::is_finite) => Ok(Some(n.clone())),
        ArgType::Number => Err(CatalogError::new(
            K::Malformed,
            here,
            format!("`{key}` is not a finite number"),
        )),
        _ => Err(CatalogError::new(
            K::Malformed,
            here,
            format!("`{key}` is only for integer and number arguments"),
        )),
    }
}

fn req_str(
    obj: &Map<String, Value>,
    key: &str,
    here: &Place<'_>,
    label: &str,
) -> Result<String, CatalogError> {
    match obj.get(key) {
        Some(Value::String(s)) => Ok(s.clone()),
        _ => Err(CatalogError::new(
            K::Malformed,
            here,
            format!("`{label}` must be a string"),
        )),
    }
}

fn opt_bool(
    obj: &Map<String, Value>,
    key: &str,
    here: &Place<'_>,
) -> Result<Option<bool>, CatalogError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(CatalogError::new(
            K::Malformed,
            here,
            format!("`{key}` must be true or false"),
        )),
    }
}

fn str_list(
    obj: &Map<String, Value>,
    key: &str,
    here: &Place<'_>,
) -> Result<Vec<String>, CatalogError> {
    let bad = || {
        CatalogError::new(
            K::Malformed,
            here,
            format!("`{key}` must be an array of strings"),
        )
    };
    match obj.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().map(str::to_string).ok_or_else(bad))
            .collect(),
        Some(_) => Err(bad()),
    }
}

fn is_command_name(s: &str) -> bool {
    s.bytes()
        .next()
        .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

fn is_positional_name(s: &str) -> bool {
    s.bytes().next().is_some_and(|b| b.is_ascii_lowercase())
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// `--` followed by lowercase words joined by single dashes.
fn is_flag_name(s: &str) -> bool {
    let Some(rest) = s.strip_prefix("--") else {
        return false;
    };
    !rest.is_empty()
        && rest.split('-').all(|word| {
            !word.is_empty()
                && word
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    /// A small valid catalog that tests elsewhere in the crate build on.
    pub(crate) fn sample() -> Value {
        json!({
            "catalog": 1,
            "program": {"name": "testweaver", "version": "2.0.0"},
            "format_flag": "--format",
            "paths": {"home": "/srv/tw", "db": null},
            "commands": [
                {
                    "name": "campaign-check",
                    "summary": "Check a campaign file.",
                    "tags": ["read_only"],
                    "formats": ["text", "json"],
                    "positionals": [
                        {"name": "campaign", "type": "path", "required": true, "help": "Campaign file."}
                    ],
                    "flags": [
                        {"name": "--strict", "type": "boolean", "help": "Treat warnings as findings."},
                        {"name": "--days", "type": "integer", "minimum": 1, "maximum": 365, "default": 14,
                         "help": "How far ahead to look."},
                        {"name": "--channel", "type": "choice", "choices": ["x", "linkedin"],
                         "repeatable": true, "help": "Only these channels."},
                        {"name": "--online", "type": "boolean", "network": true, "help": "Fetch links."},
                        {"name": "--format", "type": "choice", "choices": ["text", "json"], "output_format": true}
                    ]
                }
            ]
        })
    }

    fn parse_value(v: &Value) -> Result<Catalog, CatalogError> {
        parse(v.to_string().as_bytes())
    }

    fn refused(v: &Value) -> CatalogError {
        match parse_value(v) {
            Ok(c) => panic!("catalog accepted: {c:?}"),
            Err(e) => e,
        }
    }

    fn first_command(v: &mut Value) -> &mut Value {
        &mut v["commands"][0]
    }

    #[test]
    fn sample_parses_into_typed_fields() {
        let c = parse_value(&sample()).unwrap();
        assert_eq!(c.program.name, "testweaver");
        assert_eq!(c.format_flag, "--format");
        assert!(c.end_of_options, "end_of_options defaults to true");
        assert_eq!(c.paths.home, Some(PathBuf::from("/srv/tw")));
        assert_eq!(c.paths.db, None);
        let cmd = &c.commands[0];
        assert_eq!(cmd.tags, vec![Tag::ReadOnly]);
        assert_eq!(cmd.positionals[0].ty, ArgType::Path);
        assert!(cmd.positionals[0].required);
        assert_eq!(
            cmd.flags[1].minimum.as_ref().and_then(Number::as_i64),
            Some(1)
        );
        assert_eq!(cmd.flags[2].choices, vec!["x", "linkedin"]);
        assert!(cmd.flags[3].network);
        assert!(cmd.flags[4].output_format);
        assert_eq!(cmd.flags[1].property(), "days");
    }

    #[test]
    fn end_of_options_false_is_read() {
        let mut v = sample();
        v["end_of_options"] = json!(false);
        assert!(!parse_value(&v).unwrap().end_of_options);
    }

    #[test]
    fn refuses_other_versions() {
        for version in [json!(2), json!(0), json!("1"), json!(1.5)] {
            let mut v = sample();
            v["catalog"] = version;
            let e = refused(&v);
            assert_eq!(e.kind(), K::Version);
            assert!(e.to_string().contains("version"), "{e}");
        }
        let mut v = sample();
        v.as_object_mut().unwrap().remove("catalog");
        assert_eq!(refused(&v).kind(), K::Version);
    }

    #[test]
    fn refuses_non_json_and_non_objects() {
        assert_eq!(parse(b"not json").unwrap_err().kind(), K::Malformed);
        assert_eq!(parse(b"[1]").unwrap_err().kind(), K::Malformed);
        assert_eq!(parse(b"{} {}").unwrap_err().kind(), K::Malformed);
    }

    #[test]
    fn refuses_unknown_type_naming_command_and_argument() {
        let mut v = sample();
        first_command(&mut v)["flags"][1]["type"] = json!("date");
        let e = refused(&v);
        assert_eq!(e.kind(), K::UnknownType);
        let msg = e.to_string();
        assert!(
            msg.contains("`campaign-check`") && msg.contains("`--days`") && msg.contains("`date`"),
            "{msg}"
        );
    }

    #[test]
    fn refuses_unknown_tag() {
        let mut v = sample();
        first_command(&mut v)["tags"] = json!(["read_only", "harmless"]);
        let e = refused(&v);
        assert_eq!(e.kind(), K::UnknownTag);
        assert!(e.to_string().contains("`harmless`"));
    }

    #[test]
    fn refuses_duplicate_after_dash_mapping() {
        let mut v = sample();
        first_command(&mut v)["positionals"] = json!([{"name": "dry_run", "type": "string"}]);
        first_command(&mut v)["flags"] = json!([{"name": "--dry-run", "type": "boolean"}]);
        let e = refused(&v);
        assert_eq!(e.kind(), K::Duplicate);
        let msg = e.to_string();
        assert!(
            msg.contains("`--dry-run`") && msg.contains("`dry_run`"),
            "{msg}"
        );
    }

    #[test]
    fn refuses_duplicate_flag_and_duplicate_command() {
        let mut v = sample();
        first_command(&mut v)["flags"] = json!([
            {"name": "--days", "type": "integer"}, {"name": "--days", "type": "integer"}
        ]);
        assert_eq!(refused(&v).kind(), K::Duplicate);

        let mut v = sample();
        first_command(&mut v)["flags"] =
            json!([{"name": "--level", "type": "choice", "choices": ["a", "a"]}]);
        assert_eq!(refused(&v).kind(), K::Duplicate);

        let mut v = sample();
        let cmd = v["commands"][0].clone();
        v["commands"].as_array_mut().unwrap().push(cmd);
        let e = refused(&v);
        assert_eq!(e.kind(), K::Duplicate);
        assert!(e.to_string().contains("listed twice"));
    }

    #[test]
    fn refuses_names_of_the_wrong_form() {
        let cases: &[(&str, Value)] = &[
            ("command", json!("Campaign")),
            ("command", json!("-x")),
            ("command", json!("camp_check")),
            ("command", json!("")),
        ];
        for (_, name) in cases {
            let mut v = sample();
            first_command(&mut v)["name"] = name.clone();
            assert_eq!(refused(&v).kind(), K::BadName, "{name}");
        }
        for flag in ["days", "-d", "--Days", "--max_len", "---x", "--x-", "--"] {
            let mut v = sample();
            first_command(&mut v)["flags"] = json!([{"name": flag, "type": "string"}]);
            assert_eq!(refused(&v).kind(), K::BadName, "{flag}");
        }
        for pos in ["--campaign", "Campaign", "camp-file", "1st"] {
            let mut v = sample();
            first_command(&mut v)["positionals"] = json!([{"name": pos, "type": "string"}]);
            assert_eq!(refused(&v).kind(), K::BadName, "{pos}");
        }
        let mut v = sample();
        v["format_flag"] = json!("format");
        assert_eq!(refused(&v).kind(), K::BadName);
    }

    #[test]
    fn refuses_malformed_arguments() {
        let bad_args = [
            json!({"name": "--level", "type": "choice"}),
            json!({"name": "--level", "type": "choice", "choices": []}),
            json!({"name": "--level", "type": "string", "choices": ["a"]}),
            json!({"name": "--n", "type": "integer", "minimum": 1.5}),
            json!({"name": "--n", "type": "integer", "minimum": 5, "maximum": 1}),
            json!({"name": "--n", "type": "string", "maximum": 3}),
            json!({"name": "--n", "type": "integer", "required": "yes"}),
            json!({"name": "--b", "type": "boolean", "repeatable": true}),
            json!({"name": "--h", "type": "string", "help": 3}),
        ];
        for arg in bad_args {
            let mut v = sample();
            first_command(&mut v)["flags"] = json!([arg.clone()]);
            let e = refused(&v);
            assert_eq!(e.kind(), K::Malformed, "{arg}");
            assert!(e.to_string().contains("campaign-check"), "{e}");
        }
    }

    #[test]
    fn refuses_positional_shapes_that_cannot_be_passed_in_order() {
        let mut v = sample();
        first_command(&mut v)["positionals"] = json!([
            {"name": "a", "type": "string", "repeatable": true}, {"name": "b", "type": "string"}
        ]);
        assert!(refused(&v).to_string().contains("last positional"));

        let mut v = sample();
        first_command(&mut v)["positionals"] = json!([
            {"name": "a", "type": "string"}, {"name": "b", "type": "string", "required": true}
        ]);
        assert!(refused(&v).to_string().contains("cannot follow"));

        let mut v = sample();
        first_command(&mut v)["positionals"] = json!([{"name": "on", "type": "boolean"}]);
        assert!(refused(&v).to_string().contains("boolean"));
    }

    #[test]
    fn refuses_relative_paths_and_bad_program() {
        let mut v = sample();
        v["paths"]["db"] = json!("rw.db");
        assert!(refused(&v).to_string().contains("paths.db"));

        let mut v = sample();
        v.as_object_mut().unwrap().remove("program");
        assert_eq!(refused(&v).kind(), K::Malformed);

        let mut v = sample();
        v.as_object_mut().unwrap().remove("format_flag");
        assert!(refused(&v).to_string().contains("format_flag"));
    }

    #[test]
    fn missing_optional_fields_default_to_empty() {
        let v = json!({
            "catalog": 1,
            "program": {"name": "p", "version": "1"},
            "format_flag": "--output-format",
            "commands": [{"name": "version", "summary": "Print the version."}]
        });
        let c = parse_value(&v).unwrap();
        assert_eq!(c.paths, CatalogPaths::default());
        assert!(c.commands[0].tags.is_empty());
        assert!(c.commands[0].formats.is_empty());
        assert!(c.commands[0].arguments().next().is_none());
    }
}
