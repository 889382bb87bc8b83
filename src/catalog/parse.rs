//! Reading the catalog document: every check, every problem collected as
//! a diagnostic, a command with a problem of its own withheld, a problem
//! with the document refusing it.

use std::collections::HashMap;
use std::path::PathBuf;

use serde_json::{Map, Number, Value};

use super::model::*;
use super::text::{clean_text, is_unsafe_char, one_line, pointer_token, quote};

const KNOWN_TOP: [&str; 6] = [
    "catalog",
    "program",
    "format_flag",
    "end_of_options",
    "paths",
    "commands",
];
const KNOWN_PROGRAM: [&str; 2] = ["name", "version"];
const KNOWN_PATHS: [&str; 4] = ["home", "db", "accounts", "profile"];
const KNOWN_COMMAND: [&str; 6] = ["name", "summary", "tags", "formats", "positionals", "flags"];
const KNOWN_ARGUMENT: [&str; 13] = [
    "name",
    "type",
    "choices",
    "minimum",
    "maximum",
    "default",
    "required",
    "repeatable",
    "help",
    "owner_only",
    "network",
    "secrets",
    "output_format",
];

/// A command name that says it changes something, on a command tagged
/// `read_only`: worth a second look by the backend's author.
const WRITING_VERBS: [&str; 12] = [
    "delete", "remove", "rm", "purge", "drop", "wipe", "destroy", "reset", "publish", "send",
    "post", "write",
];

/// `[a-z][a-z0-9_-]*`, at most 64 characters: what any name must be.
pub fn is_valid_name(s: &str) -> bool {
    s.len() <= MAX_NAME_CHARS
        && s.bytes().next().is_some_and(|b| b.is_ascii_lowercase())
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

/// Lowercase words of letters and digits joined by single `sep`, starting
/// with a letter: the form the contract asks for.
fn is_canonical(s: &str, sep: char) -> bool {
    s.bytes().next().is_some_and(|b| b.is_ascii_lowercase())
        && s.split(sep).all(|word| {
            !word.is_empty()
                && word
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        })
}

/// `--` followed by lowercase words joined by single dashes.
fn is_flag_name(s: &str) -> bool {
    s.strip_prefix("--")
        .is_some_and(|rest| is_canonical(rest, '-'))
}

/// Collects the diagnostics of one part of the catalog.
struct Cx<'a> {
    out: &'a mut Vec<Diagnostic>,
    command: Option<String>,
    errors: usize,
}

impl Cx<'_> {
    fn push(&mut self, pointer: String, problem: Problem, message: impl Into<String>) {
        let severity = problem.severity();
        if severity == Severity::Error {
            self.errors += 1;
        }
        self.out.push(Diagnostic {
            pointer,
            command: self.command.clone(),
            severity,
            problem,
            message: message.into(),
        });
    }

    fn string(&mut self, obj: &Map<String, Value>, key: &str, at: &str) -> Option<String> {
        match obj.get(key) {
            Some(Value::String(s)) => Some(s.clone()),
            None => {
                self.push(
                    format!("{at}/{key}"),
                    Problem::Malformed,
                    format!("`{key}` is missing"),
                );
                None
            }
            Some(_) => {
                self.push(
                    format!("{at}/{key}"),
                    Problem::Malformed,
                    format!("`{key}` must be a string"),
                );
                None
            }
        }
    }

    fn opt_bool(&mut self, obj: &Map<String, Value>, key: &str, at: &str) -> bool {
        match obj.get(key) {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => {
                self.push(
                    format!("{at}/{key}"),
                    Problem::Malformed,
                    format!("`{key}` must be true or false"),
                );
                false
            }
        }
    }

    fn str_list(&mut self, obj: &Map<String, Value>, key: &str, at: &str) -> Vec<String> {
        match obj.get(key) {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => {
                let mut out = Vec::new();
                for (i, v) in items.iter().enumerate() {
                    match v.as_str() {
                        Some(s) => out.push(s.to_string()),
                        None => self.push(
                            format!("{at}/{key}/{i}"),
                            Problem::Malformed,
                            format!("`{key}` must hold strings only"),
                        ),
                    }
                }
                out
            }
            Some(_) => {
                self.push(
                    format!("{at}/{key}"),
                    Problem::Malformed,
                    format!("`{key}` must be an array of strings"),
                );
                Vec::new()
            }
        }
    }

    /// Clean a text for people, noting what was removed or cut.
    fn text(
        &mut self,
        s: &str,
        at: String,
        what: &str,
        max_chars: usize,
        max_bytes: usize,
    ) -> String {
        let c = clean_text(s, max_chars, max_bytes);
        if c.removed > 0 {
            self.push(
                at.clone(),
                Problem::TextCleaned,
                format!(
                    "{what} holds {} control or bidirectional character{}; removed",
                    c.removed,
                    plural(c.removed)
                ),
            );
        }
        if c.cut {
            let limit = if max_bytes == usize::MAX {
                format!("{max_chars} characters")
            } else {
                format!("{max_bytes} bytes")
            };
            self.push(
                at,
                Problem::TextCut,
                format!("{what} is {} bytes long; cut to {limit}", s.len()),
            );
        }
        c.text
    }

    fn unknown_fields(
        &mut self,
        obj: &Map<String, Value>,
        known: &[&str],
        at: &str,
        problem: Problem,
    ) {
        for key in obj.keys().filter(|k| !known.contains(&k.as_str())) {
            let message = match problem {
                Problem::IgnoredField => format!("unknown field {}; ignored", quote(key)),
                _ => format!("unknown field {} (known: {})", quote(key), known.join(", ")),
            };
            self.push(format!("{at}/{}", pointer_token(key)), problem, message);
        }
    }
}

/// Parse and check the output of `describe --format=json`.
///
/// `Ok` holds the commands that passed, the ones withheld and every
/// diagnostic; `Err` means the document itself cannot be used, and still
/// holds every diagnostic found.
pub fn parse(bytes: &[u8]) -> Result<Catalog, CatalogError> {
    let mut diags = Vec::new();
    let refuse = |pointer: &str, problem: Problem, message: String| CatalogError {
        diagnostics: vec![Diagnostic {
            pointer: pointer.to_string(),
            command: None,
            severity: Severity::Error,
            problem,
            message,
        }],
    };
    let value: Value = serde_json::from_slice(bytes).map_err(|e| {
        refuse(
            "",
            Problem::Malformed,
            format!(
                "describe did not print one JSON document ({})",
                one_line(&e.to_string())
            ),
        )
    })?;
    let Some(obj) = value.as_object() else {
        return Err(refuse(
            "",
            Problem::Malformed,
            "the catalog is not a JSON object".into(),
        ));
    };

    // Nothing else can be read with certainty under another version.
    let understood = understood_versions();
    match obj.get("catalog") {
        Some(v) if v.as_u64().is_some_and(|n| CATALOG_VERSIONS.contains(&n)) => {}
        Some(v) if v.as_u64().is_some_and(|n| n > CATALOG_VERSION) => {
            return Err(refuse(
                "/catalog",
                Problem::Version,
                format!(
                    "catalog version {v} is not supported: it is newer than this server understands ({understood}); upgrade reachweaver-mcp"
                ),
            ))
        }
        Some(v) => {
            let shown = quote(&v.to_string());
            return Err(refuse(
                "/catalog",
                Problem::Version,
                format!(
                    "catalog version {} is not supported (this server understands {understood})",
                    if v.is_u64() { v.to_string() } else { shown }
                ),
            ));
        }
        None => {
            return Err(refuse(
                "/catalog",
                Problem::Version,
                format!("the `catalog` version field is missing (this server understands {understood})"),
            ))
        }
    }

    let mut cx = Cx {
        out: &mut diags,
        command: None,
        errors: 0,
    };
    cx.unknown_fields(obj, &KNOWN_TOP, "", Problem::IgnoredField);

    let program = match obj.get("program") {
        Some(Value::Object(p)) => {
            cx.unknown_fields(p, &KNOWN_PROGRAM, "/program", Problem::IgnoredField);
            let name = cx.string(p, "name", "/program").map(|n| {
                cx.text(
                    &n,
                    "/program/name".into(),
                    "the program name",
                    MAX_NAME_CHARS,
                    usize::MAX,
                )
            });
            let version = cx.string(p, "version", "/program").map(|v| {
                cx.text(
                    &v,
                    "/program/version".into(),
                    "the program version",
                    MAX_NAME_CHARS,
                    usize::MAX,
                )
            });
            if name.as_deref().is_some_and(|n| n.trim().is_empty()) {
                cx.push(
                    "/program/name".into(),
                    Problem::Malformed,
                    "`name` is empty",
                );
            }
            name.zip(version)
                .map(|(name, version)| Program { name, version })
        }
        _ => {
            cx.push(
                "/program".into(),
                Problem::Malformed,
                "`program` must be an object with `name` and `version`",
            );
            None
        }
    };

    let format_flag = cx.string(obj, "format_flag", "");
    if let Some(f) = format_flag.as_deref().filter(|f| !is_flag_name(f)) {
        cx.push(
            "/format_flag".into(),
            Problem::BadName,
            format!("format_flag {} is not a `--kebab-case` flag", quote(f)),
        );
    }
    let end_of_options = match obj.get("end_of_options") {
        None | Some(Value::Null) => true,
        Some(Value::Bool(b)) => *b,
        Some(_) => {
            cx.push(
                "/end_of_options".into(),
                Problem::Malformed,
                "`end_of_options` must be true or false",
            );
            true
        }
    };
    let paths = parse_paths(obj.get("paths"), &mut cx);

    let raw_commands: &[Value] = match obj.get("commands") {
        Some(Value::Array(a)) => a,
        _ => {
            cx.push(
                "/commands".into(),
                Problem::Malformed,
                "`commands` must be an array",
            );
            &[]
        }
    };
    let top_errors = cx.errors;

    let mut parsed: Vec<Result<Command, WithheldCommand>> = raw_commands
        .iter()
        .enumerate()
        .map(|(i, raw)| parse_command(i, raw, &mut diags))
        .collect();
    withhold_duplicate_commands(&mut parsed, &mut diags);

    if top_errors > 0 {
        return Err(CatalogError { diagnostics: diags });
    }
    let (Some(program), Some(format_flag)) = (program, format_flag) else {
        // Both are counted in `top_errors` when missing.
        return Err(CatalogError { diagnostics: diags });
    };
    let mut commands = Vec::new();
    let mut withheld = Vec::new();
    for p in parsed {
        match p {
            Ok(c) => commands.push(c),
            Err(w) => withheld.push(w),
        }
    }
    Ok(Catalog {
        program,
        format_flag,
        end_of_options,
        paths,
        commands,
        withheld,
        diagnostics: diags,
    })
}

/// "catalog version 1" or "catalog versions 1, 2".
fn understood_versions() -> String {
    let list: Vec<String> = CATALOG_VERSIONS.iter().map(u64::to_string).collect();
    format!(
        "catalog version{} {}",
        plural(CATALOG_VERSIONS.len()),
        list.join(", ")
    )
}

fn parse_paths(v: Option<&Value>, cx: &mut Cx<'_>) -> CatalogPaths {
    let obj = match v {
        None | Some(Value::Null) => return CatalogPaths::default(),
        Some(Value::Object(o)) => o,
        Some(_) => {
            cx.push(
                "/paths".into(),
                Problem::Malformed,
                "`paths` must be an object",
            );
            return CatalogPaths::default();
        }
    };
    cx.unknown_fields(obj, &KNOWN_PATHS, "/paths", Problem::IgnoredField);
    let mut one = |key: &str| -> Option<PathBuf> {
        match obj.get(key) {
            None | Some(Value::Null) => None,
            // A path is passed and printed as it is, so it cannot be cleaned.
            Some(Value::String(s)) if s.starts_with('/') && !s.chars().any(is_unsafe_char) => {
                Some(PathBuf::from(s))
            }
            Some(_) => {
                cx.push(
                    format!("/paths/{key}"),
                    Problem::Malformed,
                    format!("`paths.{key}` must be an absolute path without control or bidirectional characters, or null"),
                );
                None
            }
        }
    };
    CatalogPaths {
        home: one("home"),
        db: one("db"),
        accounts: one("accounts"),
        profile: one("profile"),
    }
}

/// A command's label for reports: its name when it is a string (made safe
/// to print), else `#N`.
fn command_label(index: usize, raw: &Value) -> String {
    match raw.get("name").and_then(Value::as_str) {
        Some(n) if is_valid_name(n) => n.to_string(),
        Some(n) => quote(n),
        None => format!("#{}", index + 1),
    }
}

fn parse_command(
    index: usize,
    raw: &Value,
    diags: &mut Vec<Diagnostic>,
) -> Result<Command, WithheldCommand> {
    let label = command_label(index, raw);
    let first = diags.len();
    let mut cx = Cx {
        out: diags,
        command: Some(label.clone()),
        errors: 0,
    };
    let at = format!("/commands/{index}");
    let command = check_command(index, raw, &at, &mut cx);
    let errors = cx.errors;
    match command {
        Some(c) if errors == 0 => Ok(c),
        _ => Err(WithheldCommand {
            index,
            command: label,
            problems: diags[first..]
                .iter()
                .filter(|d| d.severity == Severity::Error)
                .cloned()
                .collect(),
        }),
    }
}

fn check_command(index: usize, raw: &Value, at: &str, cx: &mut Cx<'_>) -> Option<Command> {
    let Some(obj) = raw.as_object() else {
        cx.push(
            at.to_string(),
            Problem::Malformed,
            "a command must be a JSON object",
        );
        return None;
    };
    cx.unknown_fields(obj, &KNOWN_COMMAND, at, Problem::UnknownField);

    let name = cx.string(obj, "name", at);
    if let Some(n) = &name {
        if !is_valid_name(n) {
            cx.push(
                format!("{at}/name"),
                Problem::BadName,
                format!(
                    "command name {} must be lowercase letters, digits, `-` and `_`, starting with a letter, at most {MAX_NAME_CHARS} characters",
                    quote(n)
                ),
            );
        } else if !is_canonical(n, '-') {
            cx.push(
                format!("{at}/name"),
                Problem::Suspicious,
                format!(
                    "command name {} is not kebab-case (lowercase words joined by single `-`)",
                    quote(n)
                ),
            );
        }
    }
    let summary = cx.string(obj, "summary", at).map(|s| {
        cx.text(
            &s,
            format!("{at}/summary"),
            "the summary",
            usize::MAX,
            MAX_TEXT_BYTES,
        )
    });

    let mut tags = Vec::new();
    let raw_tags = cx.str_list(obj, "tags", at);
    for (i, t) in raw_tags.iter().enumerate() {
        match Tag::parse(t) {
            Some(tag) if !tags.contains(&tag) => tags.push(tag),
            Some(_) => {}
            None => cx.push(
                format!("{at}/tags/{i}"),
                Problem::UnknownTag,
                format!(
                    "unknown tag {} (known: read_only, writes, interactive, owner_only, network, secrets)",
                    quote(t)
                ),
            ),
        }
    }
    if tags.contains(&Tag::ReadOnly) && tags.contains(&Tag::Writes) {
        cx.push(
            format!("{at}/tags"),
            Problem::Suspicious,
            "tagged both read_only and writes; it is treated as writing",
        );
    }
    if let Some(n) = &name {
        let first_word = n.split(['-', '_']).next().unwrap_or_default();
        if tags.contains(&Tag::ReadOnly) && WRITING_VERBS.contains(&first_word) {
            cx.push(
                format!("{at}/name"),
                Problem::Suspicious,
                format!(
                    "command {} is tagged read_only, but its name says it changes something",
                    quote(n)
                ),
            );
        }
    }
    let formats = cx.str_list(obj, "formats", at);

    let positionals = arg_list(obj, "positionals", at, true, cx);
    let flags = arg_list(obj, "flags", at, false, cx);

    // Positionals are passed in order, so only the last may take many values.
    let count = positionals.len();
    for (i, p) in positionals.iter().enumerate() {
        if p.arg.repeatable && i + 1 < count {
            cx.push(
                format!("{at}/positionals/{}/repeatable", p.index),
                Problem::Malformed,
                format!(
                    "only the last positional may be repeatable, not {}",
                    quote(&p.arg.name)
                ),
            );
        }
    }
    let mut optional_seen = false;
    for p in &positionals {
        if p.arg.required && optional_seen {
            cx.push(
                format!("{at}/positionals/{}/required", p.index),
                Problem::Malformed,
                format!(
                    "the required positional {} cannot follow an optional one",
                    quote(&p.arg.name)
                ),
            );
        }
        optional_seen |= !p.arg.required;
    }

    let mut props: HashMap<String, String> = HashMap::new();
    for (kind, list) in [("positionals", &positionals), ("flags", &flags)] {
        for a in list {
            let prop = a.arg.property();
            if let Some(other) = props.get(&prop) {
                cx.push(
                    format!("{at}/{kind}/{}/name", a.index),
                    Problem::Duplicate,
                    format!(
                        "argument {} maps to the property `{prop}`, as {} does",
                        quote(&a.arg.name),
                        quote(other)
                    ),
                );
            } else {
                props.insert(prop, a.arg.name.clone());
            }
        }
    }
    Some(Command {
        index,
        name: name?,
        summary: summary?,
        tags,
        formats,
        positionals: positionals.into_iter().map(|p| p.arg).collect(),
        flags: flags.into_iter().map(|p| p.arg).collect(),
    })
}

/// An argument and its position in its array.
struct Indexed {
    index: usize,
    arg: Argument,
}

fn arg_list(
    obj: &Map<String, Value>,
    key: &str,
    at: &str,
    positional: bool,
    cx: &mut Cx<'_>,
) -> Vec<Indexed> {
    match obj.get(key) {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .filter_map(|(i, v)| {
                parse_argument(v, &format!("{at}/{key}/{i}"), positional, cx)
                    .map(|arg| Indexed { index: i, arg })
            })
            .collect(),
        Some(_) => {
            cx.push(
                format!("{at}/{key}"),
                Problem::Malformed,
                format!("`{key}` must be an array"),
            );
            Vec::new()
        }
    }
}

fn parse_argument(raw: &Value, at: &str, positional: bool, cx: &mut Cx<'_>) -> Option<Argument> {
    let Some(obj) = raw.as_object() else {
        cx.push(
            at.to_string(),
            Problem::Malformed,
            "an argument must be a JSON object",
        );
        return None;
    };
    cx.unknown_fields(obj, &KNOWN_ARGUMENT, at, Problem::UnknownField);
    let errors_before = cx.errors;

    let name = cx.string(obj, "name", at);
    if let Some(n) = &name {
        check_argument_name(n, positional, &format!("{at}/name"), cx);
    }

    let ty = match cx.string(obj, "type", at) {
        Some(t) => {
            let ty = ArgType::parse(&t);
            if ty.is_none() {
                cx.push(
                    format!("{at}/type"),
                    Problem::UnknownType,
                    format!(
                        "unknown type {} (known: boolean, string, integer, number, path, choice)",
                        quote(&t)
                    ),
                );
            }
            ty
        }
        None => None,
    };

    let required = cx.opt_bool(obj, "required", at);
    let repeatable = cx.opt_bool(obj, "repeatable", at);
    let owner_only = cx.opt_bool(obj, "owner_only", at);
    let network = cx.opt_bool(obj, "network", at);
    let secrets = cx.opt_bool(obj, "secrets", at);
    let output_format = cx.opt_bool(obj, "output_format", at);
    let help = match obj.get("help") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(cx.text(
            s,
            format!("{at}/help"),
            "the help text",
            usize::MAX,
            MAX_TEXT_BYTES,
        )),
        Some(_) => {
            cx.push(
                format!("{at}/help"),
                Problem::Malformed,
                "`help` must be a string",
            );
            None
        }
    };

    let choices = check_choices(obj, ty, at, cx);
    let minimum = ty.and_then(|ty| bound(obj, "minimum", ty, at, cx));
    let maximum = ty.and_then(|ty| bound(obj, "maximum", ty, at, cx));
    if let (Some(lo), Some(hi)) = (&minimum, &maximum) {
        if lo.as_f64() > hi.as_f64() {
            cx.push(
                format!("{at}/minimum"),
                Problem::Malformed,
                "`minimum` is greater than `maximum`",
            );
        }
    }
    if ty == Some(ArgType::Boolean) && positional {
        cx.push(
            format!("{at}/type"),
            Problem::Malformed,
            "a positional cannot be a boolean",
        );
    }
    if ty == Some(ArgType::Boolean) && repeatable {
        cx.push(
            format!("{at}/repeatable"),
            Problem::Malformed,
            "a boolean flag cannot be repeatable",
        );
    }
    let default = check_default(obj.get("default"), at, cx);

    if cx.errors > errors_before {
        return None;
    }
    Some(Argument {
        name: name?,
        positional,
        ty: ty?,
        choices,
        minimum,
        maximum,
        default,
        required,
        repeatable,
        help,
        owner_only,
        network,
        secrets,
        output_format,
    })
}

/// The one rule for argument names, the same in docs/BACKEND.md and
/// docs/catalog.schema.json (its `flagName` and positional `name`
/// patterns): flags `--kebab-case`, positionals `snake_case`, lowercase
/// words of letters and digits starting with a letter. Anything else (an
/// `_` in a flag, a `-` in a positional, a doubled or trailing separator)
/// withholds the command: the property a name maps to must be the same
/// for every reader of the catalog.
pub const FLAG_NAME_PATTERN: &str = "^--[a-z][a-z0-9]*(-[a-z0-9]+)*$";
pub const POSITIONAL_NAME_PATTERN: &str = "^[a-z][a-z0-9]*(_[a-z0-9]+)*$";

fn check_argument_name(n: &str, positional: bool, at: &str, cx: &mut Cx<'_>) {
    let (bare, form) = if positional {
        (Some(n), "a positional name must be snake_case: lowercase words of letters and digits joined by single `_`, starting with a letter")
    } else {
        (
            n.strip_prefix("--"),
            "a flag name must be --kebab-case: `--`, then lowercase words of letters and digits joined by single `-`, starting with a letter",
        )
    };
    let sep = if positional { '_' } else { '-' };
    if !bare.is_some_and(|b| b.len() <= MAX_NAME_CHARS && is_canonical(b, sep)) {
        cx.push(
            at.to_string(),
            Problem::BadName,
            format!("{}: {form}, at most {MAX_NAME_CHARS} characters", quote(n)),
        );
    }
}

fn check_choices(
    obj: &Map<String, Value>,
    ty: Option<ArgType>,
    at: &str,
    cx: &mut Cx<'_>,
) -> Vec<String> {
    let raw = obj.get("choices");
    match (ty, raw) {
        (Some(ArgType::Choice), Some(Value::Array(items))) if !items.is_empty() => {
            let mut out: Vec<String> = Vec::with_capacity(items.len());
            for (i, c) in items.iter().enumerate() {
                let here = format!("{at}/choices/{i}");
                match c.as_str() {
                    // A choice is sent to the backend as it is, so it cannot be cleaned.
                    Some(s) if s.is_empty() || s.chars().any(is_unsafe_char) || s.len() > MAX_TEXT_BYTES => cx.push(
                        here,
                        Problem::Malformed,
                        format!("choice {} is empty, too long or holds control or bidirectional characters", quote(s)),
                    ),
                    Some(s) if out.iter().any(|o| o == s) => cx.push(
                        here,
                        Problem::Duplicate,
                        format!("choice {} is listed twice", quote(s)),
                    ),
                    Some(s) => out.push(s.to_string()),
                    None => cx.push(here, Problem::Malformed, "`choices` must be strings"),
                }
            }
            out
        }
        (Some(ArgType::Choice), _) => {
            cx.push(
                format!("{at}/choices"),
                Problem::Malformed,
                "a `choice` argument needs a non-empty `choices` array",
            );
            Vec::new()
        }
        (_, None | Some(Value::Null)) | (None, _) => Vec::new(),
        (Some(_), Some(_)) => {
            cx.push(
                format!("{at}/choices"),
                Problem::Malformed,
                "`choices` is only for arguments of type `choice`",
            );
            Vec::new()
        }
    }
}

/// `default` is informational; a default whose text would need cleaning is
/// left out rather than shown changed.
fn check_default(v: Option<&Value>, at: &str, cx: &mut Cx<'_>) -> Option<Value> {
    let v = v.filter(|v| !v.is_null())?;
    fn clean(v: &Value) -> bool {
        match v {
            Value::String(s) => s.len() <= MAX_TEXT_BYTES && !s.chars().any(is_unsafe_char),
            Value::Array(a) => a.len() <= 64 && a.iter().all(|x| !x.is_array() && clean(x)),
            Value::Object(_) => false,
            _ => true,
        }
    }
    if clean(v) {
        return Some(v.clone());
    }
    fn has_unsafe(v: &Value) -> bool {
        match v {
            Value::String(s) => s.chars().any(is_unsafe_char),
            Value::Array(a) => a.iter().any(has_unsafe),
            _ => false,
        }
    }
    let (problem, message) = if has_unsafe(v) {
        (
            Problem::TextCleaned,
            "`default` holds control or bidirectional characters; it is not shown",
        )
    } else {
        (
            Problem::Suspicious,
            "`default` is too long or not a plain value; it is not shown",
        )
    };
    cx.push(format!("{at}/default"), problem, message);
    None
}

fn bound(
    obj: &Map<String, Value>,
    key: &str,
    ty: ArgType,
    at: &str,
    cx: &mut Cx<'_>,
) -> Option<Number> {
    let here = format!("{at}/{key}");
    let n = match obj.get(key) {
        None | Some(Value::Null) => return None,
        Some(Value::Number(n)) => n,
        Some(_) => {
            cx.push(
                here,
                Problem::Malformed,
                format!("`{key}` must be a number"),
            );
            return None;
        }
    };
    let message = match ty {
        ArgType::Integer if n.as_i64().is_some() => return Some(n.clone()),
        ArgType::Integer => format!("`{key}` of an integer argument must be a whole number"),
        ArgType::Number if n.as_f64().is_some_and(f64::is_finite) => return Some(n.clone()),
        ArgType::Number => format!("`{key}` is not a finite number"),
        _ => format!("`{key}` is only for integer and number arguments"),
    };
    cx.push(here, Problem::Malformed, message);
    None
}

/// Two commands that would be one tool (the same name, or names equal after
/// `-` -> `_`) are both withheld: neither can be offered unambiguously.
fn withhold_duplicate_commands(
    parsed: &mut [Result<Command, WithheldCommand>],
    diags: &mut Vec<Diagnostic>,
) {
    let mut by_tool: HashMap<String, Vec<usize>> = HashMap::new();
    for (i, p) in parsed.iter().enumerate() {
        let name = match p {
            Ok(c) => c.name.clone(),
            Err(w) if is_valid_name(&w.command) => w.command.clone(),
            Err(_) => continue,
        };
        by_tool.entry(name.replace('-', "_")).or_default().push(i);
    }
    let mut clashes: Vec<(usize, String)> = Vec::new();
    for indices in by_tool.values().filter(|v| v.len() > 1) {
        for &i in indices {
            let others: Vec<String> = indices
                .iter()
                .filter(|&&j| j != i)
                .map(|j| format!("/commands/{j}"))
                .collect();
            clashes.push((i, others.join(", ")));
        }
    }
    clashes.sort();
    for (i, others) in clashes {
        let (name, index) = match &parsed[i] {
            Ok(c) => (c.name.clone(), c.index),
            Err(w) => (w.command.clone(), w.index),
        };
        let d = Diagnostic {
            pointer: format!("/commands/{index}/name"),
            command: Some(name.clone()),
            severity: Severity::Error,
            problem: Problem::Duplicate,
            message: format!(
                "command {} would be the same tool as {others}",
                quote(&name)
            ),
        };
        diags.push(d.clone());
        match &mut parsed[i] {
            Err(w) => w.problems.push(d),
            Ok(_) => {
                parsed[i] = Err(WithheldCommand {
                    index,
                    command: name,
                    problems: vec![d],
                });
            }
        }
    }
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

    /// The catalog is accepted, but its first command is withheld; its errors.
    fn withheld(v: &Value) -> Vec<Diagnostic> {
        let c = parse_value(v).unwrap_or_else(|e| panic!("catalog refused: {e}"));
        assert!(c.commands.is_empty(), "offered: {:?}", c.commands);
        assert_eq!(c.withheld.len(), 1, "{:?}", c.withheld);
        c.withheld[0].problems.clone()
    }

    fn problems(d: &[Diagnostic]) -> Vec<Problem> {
        d.iter().map(|d| d.problem).collect()
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
        assert!(c.diagnostics.is_empty(), "{:?}", c.diagnostics);
        assert!(c.withheld.is_empty() && c.notes().is_empty());
    }

    #[test]
    fn end_of_options_false_is_read() {
        let mut v = sample();
        v["end_of_options"] = json!(false);
        assert!(!parse_value(&v).unwrap().end_of_options);
    }

    #[test]
    fn understood_versions_are_exposed() {
        assert_eq!(CATALOG_VERSIONS, &[1]);
        assert_eq!(CATALOG_VERSIONS.last(), Some(&CATALOG_VERSION));
    }

    #[test]
    fn a_newer_version_is_refused_naming_both_versions() {
        let mut v = sample();
        v["catalog"] = json!(2);
        // Even a catalog whose commands would all be refused says only this:
        // under another version nothing else can be read with certainty.
        first_command(&mut v)["tags"] = json!(["shiny"]);
        let e = refused(&v);
        assert_eq!(e.problem(), Problem::Version);
        assert_eq!(e.diagnostics().len(), 1);
        assert_eq!(e.diagnostics()[0].pointer, "/catalog");
        let msg = e.to_string();
        assert!(
            msg.contains("catalog version 2 is not supported")
                && msg.contains("newer than this server understands (catalog version 1)"),
            "{msg}"
        );
    }

    #[test]
    fn other_versions_are_refused() {
        for version in [json!(0), json!("1"), json!(1.5)] {
            let mut v = sample();
            v["catalog"] = version;
            let e = refused(&v);
            assert_eq!(e.problem(), Problem::Version);
            assert!(
                e.to_string()
                    .contains("this server understands catalog version 1"),
                "{e}"
            );
        }
        let mut v = sample();
        v.as_object_mut().unwrap().remove("catalog");
        assert_eq!(refused(&v).problem(), Problem::Version);
    }

    #[test]
    fn refuses_non_json_and_non_objects() {
        assert_eq!(
            parse(b"not json").unwrap_err().problem(),
            Problem::Malformed
        );
        assert_eq!(parse(b"[1]").unwrap_err().problem(), Problem::Malformed);
        assert_eq!(parse(b"{} {}").unwrap_err().problem(), Problem::Malformed);
    }

    #[test]
    fn an_unknown_type_withholds_only_that_command() {
        let mut v = sample();
        first_command(&mut v)["flags"][1]["type"] = json!("colour");
        v["commands"].as_array_mut().unwrap().push(json!({
            "name": "other", "summary": "s", "tags": ["read_only"], "formats": ["json"]
        }));
        let c = parse_value(&v).unwrap();
        assert_eq!(
            c.commands
                .iter()
                .map(|c| c.name.as_str())
                .collect::<Vec<_>>(),
            vec!["other"]
        );
        assert_eq!(c.commands[0].index, 1);
        let w = &c.withheld[0];
        assert_eq!((w.index, w.command.as_str()), (0, "campaign-check"));
        assert_eq!(w.problems.len(), 1);
        let d = &w.problems[0];
        assert_eq!(d.problem, Problem::UnknownType);
        assert_eq!(d.command.as_deref(), Some("campaign-check"));
        assert_eq!(
            d.to_string(),
            "/commands/0/flags/1/type: unknown type \"colour\" (known: boolean, string, integer, number, path, choice)"
        );
        assert_eq!(
            c.notes(),
            vec!["1 command withheld for problems in the catalog (`tools` says why)"]
        );
    }

    #[test]
    fn an_unknown_tag_withholds_the_command() {
        let mut v = sample();
        first_command(&mut v)["tags"] = json!(["read_only", "experimental"]);
        let d = withheld(&v);
        assert_eq!(problems(&d), vec![Problem::UnknownTag]);
        assert_eq!(d[0].pointer, "/commands/0/tags/1");
        assert!(d[0].message.contains("\"experimental\""), "{}", d[0]);
    }

    #[test]
    fn unknown_fields_on_commands_and_arguments_withhold_the_command() {
        let mut v = sample();
        first_command(&mut v)["cache_for"] = json!(60);
        let d = withheld(&v);
        assert_eq!(problems(&d), vec![Problem::UnknownField]);
        assert_eq!(d[0].pointer, "/commands/0/cache_for");

        let mut v = sample();
        first_command(&mut v)["flags"][0]["hidden"] = json!(true);
        let d = withheld(&v);
        assert_eq!(problems(&d), vec![Problem::UnknownField]);
        assert_eq!(d[0].pointer, "/commands/0/flags/0/hidden");
    }

    #[test]
    fn unknown_top_level_fields_are_ignored_and_noted() {
        let mut v = sample();
        v["homepage"] = json!("https://example.org");
        v["program"]["build"] = json!("abc");
        v["paths"]["cache"] = json!("/srv/tw/cache");
        v["a/b~c"] = json!(1);
        let c = parse_value(&v).unwrap();
        assert_eq!(c.commands.len(), 1);
        assert!(c.withheld.is_empty());
        let ignored: Vec<&str> = c
            .diagnostics
            .iter()
            .filter(|d| d.problem == Problem::IgnoredField)
            .map(|d| d.pointer.as_str())
            .collect();
        assert_eq!(
            ignored,
            vec!["/homepage", "/a~1b~0c", "/program/build", "/paths/cache"]
        );
        assert!(c
            .diagnostics
            .iter()
            .all(|d| d.severity == Severity::Warning));
        assert_eq!(
            c.notes(),
            vec![
                "unknown catalog fields ignored: /homepage, /a~1b~0c, /program/build, /paths/cache"
            ]
        );
    }

    #[test]
    fn every_problem_is_collected_not_only_the_first() {
        let mut v = sample();
        v["commands"] = json!([
            {"name": "ok", "summary": "s", "tags": ["read_only"], "formats": ["json"]},
            {"name": "many", "summary": "s", "tags": ["read_only", "shiny", "new"], "formats": ["json"],
             "positionals": [{"name": "Where", "type": "path"}],
             "flags": [{"name": "--paint", "type": "colour"}, {"name": "--n", "type": "integer", "minimum": 0.5},
                       {"name": "--x", "type": "string", "extra": 1}]},
            {"name": "Bad Name", "summary": "s"},
            "not an object"
        ]);
        let c = parse_value(&v).unwrap();
        assert_eq!(c.commands.len(), 1);
        assert_eq!(c.withheld.len(), 3);
        let pointers: Vec<&str> = c.withheld[0]
            .problems
            .iter()
            .map(|d| d.pointer.as_str())
            .collect();
        assert_eq!(
            pointers,
            vec![
                "/commands/1/tags/1",
                "/commands/1/tags/2",
                "/commands/1/positionals/0/name",
                "/commands/1/flags/0/type",
                "/commands/1/flags/1/minimum",
                "/commands/1/flags/2/extra",
            ]
        );
        assert_eq!(c.withheld[1].command, "\"Bad Name\"");
        assert_eq!(problems(&c.withheld[1].problems), vec![Problem::BadName]);
        assert_eq!(c.withheld[2].command, "#4");
        assert_eq!(c.withheld[2].problems[0].pointer, "/commands/3");
    }

    #[test]
    fn document_errors_refuse_the_catalog_and_keep_every_finding() {
        let mut v = sample();
        v.as_object_mut().unwrap().remove("format_flag");
        v["program"] = json!({"name": 3, "version": "1"});
        first_command(&mut v)["tags"] = json!(["shiny"]);
        let e = refused(&v);
        let d = e.diagnostics();
        assert_eq!(
            d.iter()
                .map(|d| (d.pointer.as_str(), d.is_fatal()))
                .collect::<Vec<_>>(),
            vec![
                ("/program/name", true),
                ("/format_flag", true),
                ("/commands/0/tags/0", false)
            ]
        );
        let msg = e.to_string();
        assert!(
            msg.starts_with("the backend's catalog is refused: /program/name: `name` must be a string; /format_flag: `format_flag` is missing"),
            "{msg}"
        );
        assert!(msg.contains("and 1 more finding"), "{msg}");
        assert!(!msg.contains('\n'));
    }

    #[test]
    fn duplicates_withhold_every_command_involved() {
        let mut v = sample();
        first_command(&mut v)["positionals"] = json!([{"name": "dry_run", "type": "string"}]);
        first_command(&mut v)["flags"] = json!([{"name": "--dry-run", "type": "boolean"}]);
        let d = withheld(&v);
        assert_eq!(problems(&d), vec![Problem::Duplicate]);
        assert_eq!(d[0].pointer, "/commands/0/flags/0/name");
        assert!(
            d[0].message.contains("\"--dry-run\"") && d[0].message.contains("\"dry_run\""),
            "{}",
            d[0]
        );

        let mut v = sample();
        first_command(&mut v)["flags"] =
            json!([{"name": "--level", "type": "choice", "choices": ["a", "a"]}]);
        assert_eq!(problems(&withheld(&v)), vec![Problem::Duplicate]);

        let mut v = sample();
        let cmd = v["commands"][0].clone();
        let mut twin = cmd.clone();
        twin["name"] = json!("campaign_check");
        v["commands"] = json!([cmd.clone(), cmd, twin, {"name": "fine", "summary": "s"}]);
        let c = parse_value(&v).unwrap();
        assert_eq!(
            c.commands
                .iter()
                .map(|c| c.name.as_str())
                .collect::<Vec<_>>(),
            vec!["fine"]
        );
        assert_eq!(
            c.withheld.iter().map(|w| w.index).collect::<Vec<_>>(),
            vec![0, 1, 2]
        );
        assert!(c.withheld[2].problems[0]
            .message
            .contains("same tool as /commands/0, /commands/1"));
    }

    #[test]
    fn names_must_have_the_safe_form() {
        let long = "x".repeat(65);
        for name in [
            "Campaign",
            "-x",
            "",
            "1st",
            "camp check",
            "camp\ncheck",
            long.as_str(),
        ] {
            let mut v = sample();
            first_command(&mut v)["name"] = json!(name);
            assert_eq!(problems(&withheld(&v)), vec![Problem::BadName], "{name:?}");
        }
        let long_flag = format!("--{long}");
        for flag in [
            "days",
            "-d",
            "--Days",
            "---x",
            "--",
            "--1x",
            "--a\u{202e}b",
            long_flag.as_str(),
        ] {
            let mut v = sample();
            first_command(&mut v)["flags"] = json!([{"name": flag, "type": "string"}]);
            assert_eq!(problems(&withheld(&v)), vec![Problem::BadName], "{flag}");
        }
        for pos in ["--campaign", "Campaign", "1st", "a b"] {
            let mut v = sample();
            first_command(&mut v)["positionals"] = json!([{"name": pos, "type": "string"}]);
            assert_eq!(problems(&withheld(&v)), vec![Problem::BadName], "{pos}");
        }
        let mut v = sample();
        v["format_flag"] = json!("format");
        assert_eq!(refused(&v).problem(), Problem::BadName);
    }

    #[test]
    fn argument_names_follow_one_rule_and_anything_else_withholds_the_command() {
        let mut v = sample();
        first_command(&mut v)["name"] = json!("camp_check");
        let c = parse_value(&v).unwrap();
        assert_eq!(c.commands.len(), 1, "{:?}", c.withheld);
        assert_eq!(c.diagnostics[0].problem, Problem::Suspicious);
        for (flag, ok) in [
            ("--max-len", true),
            ("--a", true),
            ("--x2-y3", true),
            ("--max_len", false),
            ("--x-", false),
            ("--x--y", false),
            ("--2fa", false),
            ("--Max", false),
        ] {
            let mut v = sample();
            first_command(&mut v)["flags"] = json!([{"name": flag, "type": "string"}]);
            let c = parse_value(&v).unwrap();
            assert_eq!(c.commands.len() == 1, ok, "{flag}: {:?}", c.diagnostics);
            if !ok {
                assert_eq!(problems(&withheld(&v)), vec![Problem::BadName], "{flag}");
            }
        }
        for (pos, ok) in [
            ("camp_file", true),
            ("a1", true),
            ("camp-file", false),
            ("camp__file", false),
            ("camp_", false),
            ("_camp", false),
        ] {
            let mut v = sample();
            first_command(&mut v)["positionals"] = json!([{"name": pos, "type": "string"}]);
            let c = parse_value(&v).unwrap();
            assert_eq!(c.commands.len() == 1, ok, "{pos}: {:?}", c.diagnostics);
        }
    }

    /// docs/catalog.schema.json holds the same patterns the checker uses,
    /// and they agree with it name by name.
    #[test]
    fn the_schema_patterns_are_the_checker_rule() {
        let schema: Value =
            serde_json::from_str(include_str!("../../docs/catalog.schema.json")).unwrap();
        let flag = schema["$defs"]["flagName"]["pattern"].as_str().unwrap();
        let pos = schema["$defs"]["positional"]["properties"]["name"]["pattern"]
            .as_str()
            .unwrap();
        assert_eq!(flag, FLAG_NAME_PATTERN);
        assert_eq!(pos, POSITIONAL_NAME_PATTERN);
        let flag_re = regex::Regex::new(flag).unwrap();
        let pos_re = regex::Regex::new(pos).unwrap();
        for name in [
            "--max-len",
            "--max_len",
            "--x-",
            "--2fa",
            "--a",
            "--x--y",
            "--",
            "-x",
            "--é",
        ] {
            let bare = name.strip_prefix("--");
            assert_eq!(
                flag_re.is_match(name),
                bare.is_some_and(|b| is_canonical(b, '-')),
                "{name}"
            );
        }
        for name in ["a_b", "a-b", "a__b", "a_", "_a", "1a", "ab1_c2", ""] {
            assert_eq!(pos_re.is_match(name), is_canonical(name, '_'), "{name}");
        }
    }

    #[test]
    fn read_only_commands_named_like_writers_and_contradictory_tags_are_warned() {
        let mut v = sample();
        first_command(&mut v)["name"] = json!("purge-cache");
        first_command(&mut v)["tags"] = json!(["read_only", "writes"]);
        let c = parse_value(&v).unwrap();
        let got: Vec<(&str, Problem)> = c
            .diagnostics
            .iter()
            .map(|d| (d.pointer.as_str(), d.problem))
            .collect();
        assert_eq!(
            got,
            vec![
                ("/commands/0/tags", Problem::Suspicious),
                ("/commands/0/name", Problem::Suspicious)
            ]
        );
    }

    #[test]
    fn malformed_arguments_withhold_the_command() {
        let bad_args = [
            json!({"name": "--level", "type": "choice"}),
            json!({"name": "--level", "type": "choice", "choices": []}),
            json!({"name": "--level", "type": "choice", "choices": ["a\u{1b}[2J"]}),
            json!({"name": "--level", "type": "string", "choices": ["a"]}),
            json!({"name": "--n", "type": "integer", "minimum": 1.5}),
            json!({"name": "--n", "type": "integer", "minimum": 5, "maximum": 1}),
            json!({"name": "--n", "type": "string", "maximum": 3}),
            json!({"name": "--n", "type": "integer", "required": "yes"}),
            json!({"name": "--b", "type": "boolean", "repeatable": true}),
            json!({"name": "--h", "type": "string", "help": 3}),
            json!({"type": "string"}),
            json!({"name": "--t"}),
        ];
        for arg in bad_args {
            let mut v = sample();
            first_command(&mut v)["flags"] = json!([arg.clone()]);
            let d = withheld(&v);
            assert_eq!(problems(&d), vec![Problem::Malformed], "{arg}");
            assert_eq!(d[0].command.as_deref(), Some("campaign-check"));
            assert!(d[0].pointer.starts_with("/commands/0/flags/0"), "{}", d[0]);
        }
    }

    #[test]
    fn positional_shapes_that_cannot_be_passed_in_order_are_withheld() {
        let mut v = sample();
        first_command(&mut v)["positionals"] = json!([
            {"name": "a", "type": "string", "repeatable": true}, {"name": "b", "type": "string"}
        ]);
        assert!(withheld(&v)[0].message.contains("last positional"));

        let mut v = sample();
        first_command(&mut v)["positionals"] = json!([
            {"name": "a", "type": "string"}, {"name": "b", "type": "string", "required": true}
        ]);
        assert!(withheld(&v)[0].message.contains("cannot follow"));

        let mut v = sample();
        first_command(&mut v)["positionals"] = json!([{"name": "on", "type": "boolean"}]);
        assert!(withheld(&v)[0].message.contains("boolean"));
    }

    #[test]
    fn bad_paths_program_or_commands_refuse_the_catalog() {
        let mut v = sample();
        v["paths"]["db"] = json!("rw.db");
        assert!(refused(&v).to_string().contains("paths.db"));

        let mut v = sample();
        v["paths"]["home"] = json!("/srv/tw\nreachweaver-mcp: forged");
        let e = refused(&v);
        assert_eq!(e.diagnostics()[0].pointer, "/paths/home");
        assert!(!e.to_string().contains('\n'), "{e}");

        let mut v = sample();
        v.as_object_mut().unwrap().remove("program");
        assert_eq!(refused(&v).problem(), Problem::Malformed);

        let mut v = sample();
        v["program"]["name"] = json!("\u{7}\u{202e} ");
        assert!(refused(&v).to_string().contains("`name` is empty"));

        let mut v = sample();
        v.as_object_mut().unwrap().remove("format_flag");
        assert!(refused(&v).to_string().contains("format_flag"));

        let mut v = sample();
        v["commands"] = json!({"campaign-check": {}});
        assert!(refused(&v)
            .to_string()
            .contains("`commands` must be an array"));
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

    #[test]
    fn program_name_and_texts_are_cleaned() {
        let mut v = sample();
        v["program"]["name"] = json!("testweaver\nreachweaver-mcp: serving /bin/sh");
        v["program"]["version"] = json!("2.0\u{1b}[31m\u{0}");
        first_command(&mut v)["summary"] =
            json!("Check\u{202e}txt.exe\u{202c} a \u{2066}campaign\u{2069}\u{200f}\u{61c}\u{200e} file.\r\n\u{85}\u{9b}Done\u{7f}.");
        first_command(&mut v)["flags"][0]["help"] = json!("Treat\twarnings\u{2028}as findings.");
        let c = parse_value(&v).unwrap();
        assert_eq!(
            c.program.name,
            "testweaver reachweaver-mcp: serving /bin/sh"
        );
        assert_eq!(c.program.version, "2.0[31m");
        let cmd = &c.commands[0];
        assert_eq!(cmd.summary, "Checktxt.exe a campaign file. Done.");
        assert_eq!(
            cmd.flags[0].help.as_deref(),
            Some("Treat warnings as findings.")
        );
        let cleaned: Vec<&str> = c
            .diagnostics
            .iter()
            .filter(|d| d.problem == Problem::TextCleaned)
            .map(|d| d.pointer.as_str())
            .collect();
        assert_eq!(
            cleaned,
            vec![
                "/program/name",
                "/program/version",
                "/commands/0/summary",
                "/commands/0/flags/0/help"
            ]
        );
        assert_eq!(
            c.notes(),
            vec!["control or bidirectional characters removed from 4 catalog texts"]
        );
    }

    #[test]
    fn long_texts_are_cut_on_a_char_boundary_and_noted() {
        let mut v = sample();
        first_command(&mut v)["summary"] = json!("é".repeat(100_000));
        first_command(&mut v)["flags"][0]["help"] = json!("h".repeat(1024));
        v["program"]["name"] = json!("ü".repeat(65));
        let c = parse_value(&v).unwrap();
        let s = &c.commands[0].summary;
        assert!(
            s.len() <= MAX_TEXT_BYTES && s.len() > MAX_TEXT_BYTES - 8,
            "{}",
            s.len()
        );
        assert!(s.ends_with('…'));
        assert_eq!(
            c.commands[0].flags[0].help.as_ref().unwrap().len(),
            1024,
            "exactly the cap is kept"
        );
        assert_eq!(c.program.name.chars().count(), MAX_NAME_CHARS);
        assert!(c.program.name.ends_with("ü…"));
        let cut: Vec<&str> = c
            .diagnostics
            .iter()
            .filter(|d| d.problem == Problem::TextCut)
            .map(|d| d.pointer.as_str())
            .collect();
        assert_eq!(cut, vec!["/program/name", "/commands/0/summary"]);
        assert_eq!(
            c.notes(),
            vec!["2 catalog texts cut to fit (`tools --check` lists them)"]
        );
    }

    #[test]
    fn a_default_that_needs_cleaning_is_not_shown() {
        let mut v = sample();
        first_command(&mut v)["flags"][1]["type"] = json!("string");
        first_command(&mut v)["flags"][1]
            .as_object_mut()
            .unwrap()
            .remove("minimum");
        first_command(&mut v)["flags"][1]
            .as_object_mut()
            .unwrap()
            .remove("maximum");
        first_command(&mut v)["flags"][1]["default"] = json!("a\u{1b}]0;owned\u{7}");
        let c = parse_value(&v).unwrap();
        assert_eq!(c.commands[0].flags[1].default, None);
        assert_eq!(c.diagnostics[0].pointer, "/commands/0/flags/1/default");
        assert_eq!(c.diagnostics[0].problem, Problem::TextCleaned);

        first_command(&mut v)["flags"][1]["default"] = json!({"a": 1});
        let c = parse_value(&v).unwrap();
        assert_eq!(c.commands[0].flags[1].default, None);
        assert_eq!(c.diagnostics[0].problem, Problem::Suspicious);
    }
}
