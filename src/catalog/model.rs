//! What a parsed catalog is: the program, its paths, the commands the
//! server offers and those it withholds, and every problem found, each with
//! the JSON pointer of where it is.

use std::fmt;
use std::path::PathBuf;

use serde_json::{Number, Value};

/// The newest catalog version this server understands.
pub const CATALOG_VERSION: u64 = 1;

/// Every catalog version this server understands, oldest first.
pub const CATALOG_VERSIONS: &[u64] = &[CATALOG_VERSION];

/// Longest command or argument name (without a flag's `--`), and longest
/// program name or version, in characters.
pub const MAX_NAME_CHARS: usize = 64;

/// Longest summary or argument help, in bytes, after cleaning.
pub const MAX_TEXT_BYTES: usize = 1024;

#[derive(Debug, Clone, PartialEq)]
pub struct Catalog {
    pub program: Program,
    /// The flag that selects the output format, e.g. `--format`.
    pub format_flag: String,
    /// Whether the backend's parser treats a literal `--` as the end of options.
    pub end_of_options: bool,
    pub paths: CatalogPaths,
    /// The commands that passed every check, in catalog order.
    pub commands: Vec<Command>,
    /// The commands withheld for a problem in their own entry, in catalog order.
    pub withheld: Vec<WithheldCommand>,
    /// Every problem and warning found.
    pub diagnostics: Vec<Diagnostic>,
}

impl Catalog {
    /// Short notes for the start-up line: what was ignored, cut, cleaned or
    /// withheld because of the catalog itself. Each is one line of plain text.
    pub fn notes(&self) -> Vec<String> {
        let count = |p: Problem| self.diagnostics.iter().filter(|d| d.problem == p).count();
        let mut notes = Vec::new();
        let ignored: Vec<&str> = self
            .diagnostics
            .iter()
            .filter(|d| d.problem == Problem::IgnoredField)
            .map(|d| d.pointer.as_str())
            .collect();
        if !ignored.is_empty() {
            let shown: Vec<&str> = ignored.iter().take(5).copied().collect();
            let more = ignored.len() - shown.len();
            notes.push(format!(
                "unknown catalog field{} ignored: {}{}",
                plural(ignored.len()),
                shown.join(", "),
                if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                }
            ));
        }
        let cut = count(Problem::TextCut);
        if cut > 0 {
            notes.push(format!(
                "{cut} catalog text{} cut to fit (`tools --check` lists them)",
                plural(cut)
            ));
        }
        let cleaned = count(Problem::TextCleaned);
        if cleaned > 0 {
            notes.push(format!(
                "control or bidirectional characters removed from {cleaned} catalog text{}",
                plural(cleaned)
            ));
        }
        if !self.withheld.is_empty() {
            notes.push(format!(
                "{} command{} withheld for problems in the catalog (`tools` says why)",
                self.withheld.len(),
                plural(self.withheld.len())
            ));
        }
        notes
    }
}

pub(super) fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
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
    /// Position in the catalog's `commands` array.
    pub index: usize,
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

/// A command not offered because its own entry has a problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WithheldCommand {
    /// Position in the catalog's `commands` array.
    pub index: usize,
    /// The name, made safe to print, or `#N` when it has none.
    pub command: String,
    /// The errors that withhold it (at least one).
    pub problems: Vec<Diagnostic>,
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
    pub(super) fn parse(s: &str) -> Option<Tag> {
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
    pub(super) fn parse(s: &str) -> Option<ArgType> {
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

    /// The type as the catalog spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            ArgType::Boolean => "boolean",
            ArgType::String => "string",
            ArgType::Integer => "integer",
            ArgType::Number => "number",
            ArgType::Path => "path",
            ArgType::Choice => "choice",
        }
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
    /// Cleaned and capped.
    pub help: Option<String>,
    pub owner_only: bool,
    pub network: bool,
    pub secrets: bool,
    pub output_format: bool,
}

impl Argument {
    /// The tool property this argument becomes (docs/BACKEND.md, Arguments and JSON Schema).
    pub fn property(&self) -> String {
        property_name(&self.name)
    }
}

/// Leading dashes dropped, `-` mapped to `_`.
pub fn property_name(argument: &str) -> String {
    argument.trim_start_matches('-').replace('-', "_")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    Warning,
    Error,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

/// What kind of problem a diagnostic is; its `code` is stable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Problem {
    /// Not JSON, or a field of the wrong shape.
    Malformed,
    /// A `catalog` version this server does not understand.
    Version,
    UnknownTag,
    UnknownType,
    /// A field this server does not know, on a command or an argument.
    UnknownField,
    /// A name that doesn't have its required form.
    BadName,
    /// Two commands, or two arguments of one command, with the same name
    /// (after the `-` -> `_` mapping).
    Duplicate,
    /// A field this server does not know, where ignoring it is safe.
    IgnoredField,
    /// Control or bidirectional characters removed from a text.
    TextCleaned,
    /// A text longer than the cap, cut.
    TextCut,
    /// Allowed, but probably not what the backend's author meant.
    Suspicious,
}

impl Problem {
    pub fn code(self) -> &'static str {
        match self {
            Problem::Malformed => "malformed",
            Problem::Version => "unsupported_version",
            Problem::UnknownTag => "unknown_tag",
            Problem::UnknownType => "unknown_type",
            Problem::UnknownField => "unknown_field",
            Problem::BadName => "bad_name",
            Problem::Duplicate => "duplicate",
            Problem::IgnoredField => "ignored_field",
            Problem::TextCleaned => "text_cleaned",
            Problem::TextCut => "text_cut",
            Problem::Suspicious => "suspicious",
        }
    }

    pub(super) fn severity(self) -> Severity {
        match self {
            Problem::IgnoredField
            | Problem::TextCleaned
            | Problem::TextCut
            | Problem::Suspicious => Severity::Warning,
            _ => Severity::Error,
        }
    }
}

/// One finding about the catalog, located by a JSON pointer (RFC 6901).
///
/// Every string in it is safe to print on one line: whatever the backend
/// wrote is quoted and escaped before it gets here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// `/commands/7/flags/0/type`; empty for the document as a whole.
    pub pointer: String,
    /// The command it is about (its name, or `#N` when it has none); `None`
    /// for the document's own fields.
    pub command: Option<String>,
    pub severity: Severity,
    pub problem: Problem,
    pub message: String,
}

impl Diagnostic {
    /// An error that refuses the whole catalog.
    pub fn is_fatal(&self) -> bool {
        self.severity == Severity::Error && self.command.is_none()
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.pointer.is_empty() {
            write!(f, "{}", self.message)
        } else {
            write!(f, "{}: {}", self.pointer, self.message)
        }
    }
}

/// Why the catalog was refused as a whole. It carries every diagnostic
/// found, not only the fatal ones, for `tools --check`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogError {
    pub(super) diagnostics: Vec<Diagnostic>,
}

impl CatalogError {
    pub fn diagnostics(&self) -> &[Diagnostic] {
        &self.diagnostics
    }

    fn fatal(&self) -> impl Iterator<Item = &Diagnostic> {
        self.diagnostics.iter().filter(|d| d.is_fatal())
    }

    /// The kind of the first fatal problem.
    pub fn problem(&self) -> Problem {
        self.fatal()
            .next()
            .map_or(Problem::Malformed, |d| d.problem)
    }
}

impl fmt::Display for CatalogError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const SHOWN: usize = 3;
        let fatal: Vec<&Diagnostic> = self.fatal().collect();
        let list: Vec<String> = fatal.iter().take(SHOWN).map(ToString::to_string).collect();
        write!(f, "the backend's catalog is refused: {}", list.join("; "))?;
        let more = self.diagnostics.len() - list.len();
        if more > 0 {
            write!(
                f,
                " (and {more} more finding{}; `tools --check` lists every one)",
                plural(more)
            )?;
        }
        Ok(())
    }
}

impl std::error::Error for CatalogError {}
