//! Catalog -> tools -> argument validation -> confinement -> argv, with
//! catalogs and arguments built from the fuzz input.
//!
//! Catalogs are assembled from structured pieces (so most of them pass the
//! catalog check and reach the later steps) or taken as raw bytes. For every
//! tool the server would offer, fuzzed arguments go through the same steps as
//! a real call, and each outcome is checked against an independent reading
//! of the tool's published input schema:
//! - an accepted call conforms to the schema, and its argv spells every
//!   flag as one `--name[=value]` element, the format selection once, and
//!   the positionals after `--`;
//! - arguments that conform to the schema (and avoid the few refusals the
//!   schema cannot express) are accepted;
//! - every refusal has one of the documented error codes;
//! - no withheld or ineligible argument or command ever becomes a tool.

#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use reachweaver_mcp::argv::Invocation;
use reachweaver_mcp::catalog::{self, Catalog, Tag};
use reachweaver_mcp::confine::Root;
use reachweaver_mcp::sandbox::RunKind;
use reachweaver_mcp::tools::{self, Tool, MAX_TOOL_NAME};
use reachweaver_mcp::validate::{self, MAX_VALUE_BYTES};
use serde_json::{json, Map, Number, Value};

/// Names the contract treats specially, so the fuzzer meets them often.
const WORDS: [&str; 24] = [
    "online",
    "allow-origin",
    "reply-to",
    "override-flagged",
    "owner-authorized",
    "include-individuals",
    "format",
    "json",
    "output",
    "home",
    "db",
    "accounts",
    "profile",
    "dry-run",
    "dry_run",
    "days",
    "channel",
    "campaign",
    "draft",
    "mcp-serve",
    "a",
    "b",
    "x-y",
    "x_y",
];

const TAGS: [&str; 7] = [
    "read_only",
    "writes",
    "interactive",
    "owner_only",
    "network",
    "secrets",
    "bogus",
];

const TYPES: [&str; 7] = [
    "boolean", "string", "integer", "number", "path", "choice", "date",
];

/// Withheld whatever the catalog says (docs/BACKEND.md, Which commands become tools).
const NEVER: [&str; 13] = [
    "--online",
    "--allow-origin",
    "--reply-to",
    "--override-flagged",
    "--owner-authorized",
    "--include-individuals",
    "--format",
    "--json",
    "--output",
    "--home",
    "--db",
    "--accounts",
    "--profile",
];

#[derive(Arbitrary, Debug)]
enum Name {
    Word(u8),
    Free(String),
}

impl Name {
    fn text(&self) -> String {
        match self {
            Name::Word(i) => WORDS[usize::from(*i) % WORDS.len()].to_string(),
            Name::Free(s) => s.chars().take(80).collect(),
        }
    }
}

#[derive(Arbitrary, Debug)]
enum Num {
    Int(i64),
    Float(f64),
    Small(i8),
    Literal(String),
}

impl Num {
    fn value(&self) -> Value {
        match self {
            Num::Int(i) => json!(i),
            Num::Small(i) => json!(i),
            Num::Float(f) => Number::from_f64(*f).map_or(Value::Null, Value::Number),
            Num::Literal(s) => serde_json::from_str::<Number>(s).map_or(json!(s), Value::Number),
        }
    }
}

#[derive(Arbitrary, Debug)]
struct ArgSpec {
    name: Name,
    /// Spell the name as the contract wants (`--kebab` / `snake`) or as given.
    conform: bool,
    ty: u8,
    choices: Vec<Name>,
    minimum: Option<Num>,
    maximum: Option<Num>,
    default: Option<Val>,
    required: bool,
    repeatable: bool,
    owner_only: bool,
    network: bool,
    secrets: bool,
    output_format: bool,
}

impl ArgSpec {
    fn json(&self, positional: bool) -> Value {
        let raw = self.name.text();
        let name = match (self.conform, positional) {
            (false, _) => raw,
            (true, true) => raw.replace('-', "_"),
            (true, false) => format!("--{}", raw.replace('_', "-")),
        };
        let mut o = Map::new();
        o.insert("name".into(), json!(name));
        o.insert(
            "type".into(),
            json!(TYPES[usize::from(self.ty) % TYPES.len()]),
        );
        if !self.choices.is_empty() {
            o.insert(
                "choices".into(),
                Value::Array(self.choices.iter().map(|c| json!(c.text())).collect()),
            );
        }
        if let Some(n) = &self.minimum {
            o.insert("minimum".into(), n.value());
        }
        if let Some(n) = &self.maximum {
            o.insert("maximum".into(), n.value());
        }
        if let Some(d) = &self.default {
            o.insert("default".into(), d.value(&[], &Value::Null));
        }
        for (k, v) in [
            ("required", self.required),
            ("repeatable", self.repeatable),
            ("owner_only", self.owner_only),
            ("network", self.network),
            ("secrets", self.secrets),
            ("output_format", self.output_format),
        ] {
            if v {
                o.insert(k.into(), json!(true));
            }
        }
        Value::Object(o)
    }
}

#[derive(Arbitrary, Debug)]
struct CommandSpec {
    name: Name,
    tags: Vec<u8>,
    json_format: bool,
    positionals: Vec<ArgSpec>,
    flags: Vec<ArgSpec>,
}

#[derive(Arbitrary, Debug)]
enum CatalogSpec {
    Raw(Vec<u8>),
    Built {
        commands: Vec<CommandSpec>,
        end_of_options: bool,
        /// The `--format` flag, or a fuzzed one.
        format_flag: Option<Name>,
    },
}

impl CatalogSpec {
    fn bytes(&self) -> Vec<u8> {
        match self {
            CatalogSpec::Raw(b) => b.clone(),
            CatalogSpec::Built {
                commands,
                end_of_options,
                format_flag,
            } => {
                let cmds: Vec<Value> = commands
                    .iter()
                    .map(|c| {
                        let mut formats = vec![json!("text")];
                        if c.json_format {
                            formats.push(json!("json"));
                        }
                        json!({
                            "name": c.name.text(),
                            "summary": "A command.",
                            "tags": c.tags.iter().map(|t| TAGS[usize::from(*t) % TAGS.len()]).collect::<Vec<_>>(),
                            "formats": formats,
                            "positionals": c.positionals.iter().map(|a| a.json(true)).collect::<Vec<_>>(),
                            "flags": c.flags.iter().map(|a| a.json(false)).collect::<Vec<_>>(),
                        })
                    })
                    .collect();
                let flag = format_flag
                    .as_ref()
                    .map_or_else(|| "--format".to_string(), |n| format!("--{}", n.text()));
                json!({
                    "catalog": 1,
                    "program": {"name": "fuzzed", "version": "1"},
                    "format_flag": flag,
                    "end_of_options": end_of_options,
                    "commands": cmds,
                })
                .to_string()
                .into_bytes()
            }
        }
    }
}

#[derive(Arbitrary, Debug)]
enum Val {
    Null,
    Bool(bool),
    Num(Num),
    Str(String),
    /// The n-th choice (or known path) of whatever property receives it.
    Pick(u8),
    /// A value built to fit the receiving property's schema.
    Fit(u8),
    Path(u8),
    Nul,
    Long,
    Array(Vec<Val>),
    Object(Vec<(String, Val)>),
}

/// Paths for path arguments, relative to the fuzz root.
const PATHS: [&str; 7] = [
    "a.txt",
    "dir/b.txt",
    "dir",
    "../a.txt",
    "/etc/passwd",
    "~x",
    "-",
];

/// A value that fits `schema`, varied by `n`.
fn fit(schema: &Value, n: u8) -> Value {
    match schema["type"].as_str() {
        Some("array") => Value::Array(
            (0..n % 3)
                .map(|i| fit(&schema["items"], n.wrapping_add(i)))
                .collect(),
        ),
        Some("boolean") => json!(n.is_multiple_of(2)),
        Some("integer") | Some("number") => {
            let lo = schema.get("minimum").cloned();
            let hi = schema.get("maximum").cloned();
            match (n % 3, lo, hi) {
                (0, Some(lo), _) => lo,
                (1, _, Some(hi)) => hi,
                (_, None, None) => json!(i64::from(n) - 100),
                (_, Some(lo), _) => lo,
                (_, None, Some(hi)) => hi,
            }
        }
        Some("string") => match schema.get("enum").and_then(Value::as_array) {
            Some(e) if !e.is_empty() => e[usize::from(n) % e.len()].clone(),
            _ if schema
                .get("description")
                .and_then(Value::as_str)
                .is_some_and(|d| d.contains("path inside the root")) =>
            {
                json!(PATHS[usize::from(n) % PATHS.len()])
            }
            _ => json!(["plain", "-dash", "--flag=x", "a b", ""][usize::from(n) % 5]),
        },
        _ => Value::Null,
    }
}

impl Val {
    fn value(&self, choices: &[String], schema: &Value) -> Value {
        match self {
            Val::Fit(n) => fit(schema, *n),
            Val::Null => Value::Null,
            Val::Bool(b) => json!(b),
            Val::Num(n) => n.value(),
            Val::Str(s) => json!(s),
            Val::Pick(i) => choices
                .get(usize::from(*i) % choices.len().max(1))
                .map_or(json!("?"), |c| json!(c)),
            Val::Path(i) => json!(PATHS[usize::from(*i) % PATHS.len()]),
            Val::Nul => json!("a\0b"),
            Val::Long => json!("x".repeat(MAX_VALUE_BYTES + 1)),
            Val::Array(items) => Value::Array(
                items
                    .iter()
                    .take(8)
                    .map(|v| v.value(choices, &schema["items"]))
                    .collect(),
            ),
            Val::Object(items) => Value::Object(
                items
                    .iter()
                    .take(4)
                    .map(|(k, v)| (k.clone(), v.value(choices, &Value::Null)))
                    .collect(),
            ),
        }
    }
}

#[derive(Arbitrary, Debug)]
enum Key {
    /// The n-th property of the tool's schema.
    Known(u8),
    Free(String),
    Word(u8),
}

#[derive(Arbitrary, Debug)]
struct CallSpec {
    tool: u8,
    /// Properties (by bit) first given a value that fits their schema, so
    /// that most calls reach confinement and argv.
    fill: u32,
    seed: u8,
    args: Vec<(Key, Val)>,
}

#[derive(Arbitrary, Debug)]
struct Input {
    catalog: CatalogSpec,
    allow_drafts: bool,
    calls: Vec<CallSpec>,
}

/// A fixed root with a file, a folder and a file inside it.
fn root() -> &'static Root {
    static ROOT: OnceLock<(tempfile::TempDir, Root)> = OnceLock::new();
    &ROOT
        .get_or_init(|| {
            let dir = tempfile::tempdir().expect("temp dir");
            std::fs::write(dir.path().join("a.txt"), "a").expect("file");
            std::fs::create_dir(dir.path().join("dir")).expect("folder");
            std::fs::write(dir.path().join("dir/b.txt"), "b").expect("file");
            let root = Root::new(dir.path()).expect("root");
            (dir, root)
        })
        .1
}

/// The tool's eligibility, re-derived from the contract's rules.
fn check_tool(tool: &Tool, cat: &Catalog, allow_drafts: bool) {
    assert!(tool.name.len() <= MAX_TOOL_NAME, "tool name too long");
    assert!(
        tool.name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
        "tool name {}",
        tool.name
    );
    let cmd = cat
        .commands
        .iter()
        .find(|c| c.name == tool.command)
        .expect("a tool runs a catalog command");
    assert_eq!(tool.name, tool.command.replace('-', "_"));
    assert_ne!(cmd.name, "mcp-serve");
    assert!(cmd.formats.iter().any(|f| f == "json"));
    for t in [Tag::Interactive, Tag::OwnerOnly, Tag::Network, Tag::Secrets] {
        assert!(!cmd.has_tag(t), "{} has an excluding tag", cmd.name);
    }
    match tool.kind {
        RunKind::ReadOnly => {
            assert!(cmd.has_tag(Tag::ReadOnly) && !cmd.has_tag(Tag::Writes));
        }
        RunKind::Draft => {
            assert!(allow_drafts && cmd.name == "draft" && cmd.has_tag(Tag::Writes));
        }
    }
    assert!(cmd.arguments().all(|a| !a.owner_only));

    let schema = &tool.input_schema;
    assert_eq!(schema["type"], "object");
    assert_eq!(schema["additionalProperties"], false);
    let props = schema["properties"].as_object().expect("properties");
    for prop in props.keys() {
        let arg = cmd
            .arguments()
            .find(|a| &a.property() == prop)
            .expect("a property maps to an argument");
        assert!(
            !(arg.network || arg.secrets || arg.output_format || arg.owner_only),
            "withheld argument {} offered",
            arg.name
        );
        if !arg.positional {
            assert!(!NEVER.contains(&arg.name.as_str()), "{} offered", arg.name);
            assert_ne!(arg.name, cat.format_flag, "the format flag offered");
        }
    }
    if let Some(req) = schema.get("required") {
        for r in req.as_array().expect("required list") {
            assert!(props.contains_key(r.as_str().expect("name")));
        }
    }
}

/// Whether a JSON number is a whole number the validator can hold.
fn whole(n: &Number) -> Option<i64> {
    if let Some(i) = n.as_i64() {
        return Some(i);
    }
    let f = n.as_f64()?;
    (f.is_finite() && f.fract() == 0.0 && f.abs() < 9.0e18).then_some(f as i64)
}

fn within(v: &Number, schema: &Value) -> bool {
    let as_f = |x: &Value| x.as_number().and_then(Number::as_f64);
    let f = match v.as_f64() {
        Some(f) if f.is_finite() => f,
        _ => return false,
    };
    let lo_ok = match schema.get("minimum") {
        None => true,
        Some(m) => match (whole(v), m.as_i64()) {
            (Some(i), Some(lo)) if schema["type"] == "integer" => i >= lo,
            _ => as_f(m).is_some_and(|lo| f >= lo),
        },
    };
    let hi_ok = match schema.get("maximum") {
        None => true,
        Some(m) => match (whole(v), m.as_i64()) {
            (Some(i), Some(hi)) if schema["type"] == "integer" => i <= hi,
            _ => as_f(m).is_some_and(|hi| f <= hi),
        },
    };
    lo_ok && hi_ok
}

/// The value against one property schema (the subset the server emits).
fn conforms(v: &Value, schema: &Value) -> bool {
    match schema["type"].as_str() {
        Some("array") => v.as_array().is_some_and(|items| {
            let min = schema.get("minItems").and_then(Value::as_u64).unwrap_or(0);
            items.len() as u64 >= min && items.iter().all(|i| conforms(i, &schema["items"]))
        }),
        Some("boolean") => v.is_boolean(),
        Some("string") => match (v.as_str(), schema.get("enum")) {
            (None, _) => false,
            (Some(s), Some(Value::Array(e))) => e.iter().any(|c| c == s),
            (Some(_), _) => true,
        },
        Some("integer") => v
            .as_number()
            .is_some_and(|n| whole(n).is_some() && within(n, schema)),
        Some("number") => v.as_number().is_some_and(|n| within(n, schema)),
        other => panic!("a property type the server does not emit: {other:?}"),
    }
}

/// Refusals that the schema cannot express: NUL bytes, over-long values,
/// numbers whose plain spelling is unreasonably long.
fn schema_blind_spot(v: &Value) -> bool {
    match v {
        Value::String(s) => s.contains('\0') || s.len() > MAX_VALUE_BYTES,
        Value::Number(n) => {
            let t = n.to_string();
            t.len() > 30 || t.contains(['e', 'E'])
        }
        Value::Array(a) => a.iter().any(schema_blind_spot),
        _ => false,
    }
}

/// Positionals are given in order: a later one without an earlier one is refused.
fn positional_gap(tool: &Tool, cat: &Catalog, args: &Map<String, Value>) -> bool {
    let Some(cmd) = cat.commands.iter().find(|c| c.name == tool.command) else {
        return false;
    };
    let given = |p: &str| match args.get(p) {
        None => false,
        Some(Value::Array(a)) => !a.is_empty(),
        Some(_) => true,
    };
    let props = tool.input_schema["properties"].as_object();
    let mut missing = false;
    for p in cmd.positionals.iter() {
        let prop = p.property();
        if !props.is_some_and(|m| m.contains_key(&prop)) {
            continue;
        }
        if given(&prop) {
            if missing {
                return true;
            }
        } else {
            missing = true;
        }
    }
    false
}

fn check_call(tool: &Tool, cat: &Catalog, args: &Map<String, Value>) {
    let schema = &tool.input_schema;
    let props = schema["properties"].as_object().expect("properties");
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let schema_ok = args
        .iter()
        .all(|(k, v)| props.get(k).is_some_and(|s| conforms(v, s)))
        && required.iter().all(|r| args.contains_key(*r));
    let blind = args.values().any(schema_blind_spot) || positional_gap(tool, cat, args);

    match validate::validate(tool, args) {
        Err(e) => {
            assert!(
                ["invalid_argument", "unknown_argument", "missing_argument"].contains(&e.code()),
                "validation code {}",
                e.code()
            );
            assert!(!e.message().is_empty());
            assert!(
                !schema_ok || blind,
                "schema-valid arguments refused: {args:?} by {schema} with {e}"
            );
        }
        Ok(call) => {
            assert!(
                schema_ok,
                "accepted arguments break the schema: {args:?} vs {schema}"
            );
            let protected = reachweaver_mcp::protect::Protected::new(&[], &[]).expect("patterns");
            match call.confine(root(), &protected) {
                Err(e) => assert!(
                    [
                        "invalid_argument",
                        "path_outside_root",
                        "path_not_found",
                        "path_protected"
                    ]
                    .contains(&e.code()),
                    "confine code {}",
                    e.code()
                ),
                Ok(call) => check_argv(tool, cat, &call),
            }
        }
    }
}

fn check_argv(
    tool: &Tool,
    cat: &Catalog,
    call: &validate::ValidatedCall<reachweaver_mcp::confine::ConfinedPath>,
) {
    let inv = Invocation::new(
        "/opt/rw/bin/reachweaver".into(),
        vec!["--home=/srv/home".into()],
        cat.format_flag.clone(),
        cat.end_of_options,
    );
    let argv = match inv.build(call) {
        Ok(a) => a,
        Err(e) => {
            assert_eq!(e.code(), "invalid_argument");
            return;
        }
    };
    assert!(argv.iter().all(|a| !a.contains('\0')));
    assert_eq!(argv[0], "/opt/rw/bin/reachweaver");
    assert_eq!(argv[1], "--home=/srv/home");
    assert_eq!(argv[2], tool.command);
    let format = format!("{}=json", cat.format_flag);
    let at = argv
        .iter()
        .position(|a| *a == format)
        .expect("the format selection");
    let cmd = cat
        .commands
        .iter()
        .find(|c| c.name == tool.command)
        .expect("command");
    for flag in &argv[3..at] {
        let name = flag.split_once('=').map_or(flag.as_str(), |(n, _)| n);
        assert!(
            cmd.flags.iter().any(|f| f.name == name),
            "argv element {flag} is not one of the command's flags"
        );
    }
    let rest = &argv[at + 1..];
    let positionals = call.positionals().len();
    if positionals == 0 {
        assert!(rest.is_empty(), "trailing argv {rest:?}");
    } else if cat.end_of_options {
        assert_eq!(rest[0], "--");
        assert_eq!(rest.len(), positionals + 1);
    } else {
        assert_eq!(rest.len(), positionals);
        assert!(rest.iter().all(|p| !p.starts_with('-')));
    }
    for (_, v) in call.flags() {
        if let validate::FlagValue::Value(validate::Scalar::Path(p)) = v {
            assert!(PathBuf::from(p.as_str()).starts_with(root().path()));
        }
    }
    for v in call.positionals() {
        if let validate::Scalar::Path(p) = v {
            assert!(PathBuf::from(p.as_str()).starts_with(root().path()));
        }
    }
}

fuzz_target!(|input: Input| {
    let bytes = input.catalog.bytes();
    let Ok(cat) = catalog::parse(&bytes) else {
        return;
    };
    let (set, _report) = tools::build(&cat, input.allow_drafts);
    let tools: Vec<&Tool> = set.iter().collect();
    for t in &tools {
        check_tool(t, &cat, input.allow_drafts);
    }
    if tools.is_empty() {
        return;
    }
    for call in input.calls.iter().take(8) {
        let tool = tools[usize::from(call.tool) % tools.len()];
        let props: Vec<(String, Vec<String>, Value)> = tool.input_schema["properties"]
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, s)| {
                        let e = s.get("enum").or_else(|| s["items"].get("enum"));
                        let choices = e
                            .and_then(Value::as_array)
                            .map(|a| {
                                a.iter()
                                    .filter_map(Value::as_str)
                                    .map(str::to_string)
                                    .collect()
                            })
                            .unwrap_or_default();
                        (k.clone(), choices, s.clone())
                    })
                    .collect()
            })
            .unwrap_or_default();
        let mut args = Map::new();
        for (i, (k, _, schema)) in props.iter().enumerate().take(32) {
            if call.fill & (1 << i) != 0 {
                args.insert(k.clone(), fit(schema, call.seed.wrapping_add(i as u8)));
            }
        }
        for (key, val) in call.args.iter().take(12) {
            let (k, choices, schema) = match key {
                Key::Known(i) if !props.is_empty() => props[usize::from(*i) % props.len()].clone(),
                Key::Known(_) => ("none".to_string(), Vec::new(), Value::Null),
                Key::Free(s) => (s.clone(), Vec::new(), Value::Null),
                Key::Word(i) => (
                    WORDS[usize::from(*i) % WORDS.len()].replace('-', "_"),
                    Vec::new(),
                    Value::Null,
                ),
            };
            args.insert(k, val.value(&choices, &schema));
        }
        check_call(tool, &cat, &args);
    }
});
