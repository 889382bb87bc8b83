//! Command and argument descriptions, the single source of both the parser and
//! the catalog.
//!
//! Because the catalog is what a server trusts to build its tools, the parser
//! reads the very same descriptions: an argument the catalog announces is one
//! the command line accepts, with the same type, range and choices, and nothing
//! else is accepted.

use serde_json::{json, Map, Value};

use crate::args::Args;
use crate::commands::{Ctx, Outcome};
use crate::error::CliError;

pub const CHANNELS: &[&str] = &["x", "linkedin", "bluesky", "mastodon"];

/// The type of one argument, with what the type needs to be checked.
#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    Boolean,
    String,
    Integer { min: i64, max: i64 },
    Number { min: f64, max: f64 },
    Path,
    Choice(&'static [&'static str]),
}

impl Kind {
    fn type_name(&self) -> &'static str {
        match self {
            Kind::Boolean => "boolean",
            Kind::String => "string",
            Kind::Integer { .. } => "integer",
            Kind::Number { .. } => "number",
            Kind::Path => "path",
            Kind::Choice(_) => "choice",
        }
    }
}

/// A default value, shown in the catalog and used when the argument is absent.
#[derive(Debug, Clone, PartialEq)]
pub enum DefaultValue {
    Integer(i64),
    Number(f64),
    Text(&'static str),
}

#[derive(Debug, Clone)]
pub struct ArgSpec {
    pub name: &'static str,
    pub kind: Kind,
    pub help: &'static str,
    pub required: bool,
    pub repeatable: bool,
    pub default: Option<DefaultValue>,
    pub owner_only: bool,
    pub network: bool,
    pub secrets: bool,
    pub output_format: bool,
}

impl ArgSpec {
    pub fn new(name: &'static str, kind: Kind, help: &'static str) -> Self {
        ArgSpec {
            name,
            kind,
            help,
            required: false,
            repeatable: false,
            default: None,
            owner_only: false,
            network: false,
            secrets: false,
            output_format: false,
        }
    }

    pub fn boolean(name: &'static str, help: &'static str) -> Self {
        ArgSpec::new(name, Kind::Boolean, help)
    }

    pub fn string(name: &'static str, help: &'static str) -> Self {
        ArgSpec::new(name, Kind::String, help)
    }

    pub fn path(name: &'static str, help: &'static str) -> Self {
        ArgSpec::new(name, Kind::Path, help)
    }

    pub fn integer(name: &'static str, min: i64, max: i64, help: &'static str) -> Self {
        ArgSpec::new(name, Kind::Integer { min, max }, help)
    }

    pub fn number(name: &'static str, min: f64, max: f64, help: &'static str) -> Self {
        ArgSpec::new(name, Kind::Number { min, max }, help)
    }

    pub fn choice(
        name: &'static str,
        choices: &'static [&'static str],
        help: &'static str,
    ) -> Self {
        ArgSpec::new(name, Kind::Choice(choices), help)
    }

    pub fn channel(help: &'static str) -> Self {
        ArgSpec::choice("--channel", CHANNELS, help)
    }

    pub fn required(mut self) -> Self {
        self.required = true;
        self
    }

    pub fn repeatable(mut self) -> Self {
        self.repeatable = true;
        self
    }

    pub fn default(mut self, value: DefaultValue) -> Self {
        self.default = Some(value);
        self
    }

    pub fn owner_only(mut self) -> Self {
        self.owner_only = true;
        self
    }

    pub fn network(mut self) -> Self {
        self.network = true;
        self
    }

    pub fn secrets(mut self) -> Self {
        self.secrets = true;
        self
    }

    fn to_json(&self) -> Value {
        let mut obj = Map::new();
        obj.insert("name".into(), json!(self.name));
        obj.insert("type".into(), json!(self.kind.type_name()));
        match &self.kind {
            Kind::Choice(choices) => {
                obj.insert("choices".into(), json!(choices));
            }
            Kind::Integer { min, max } => {
                obj.insert("minimum".into(), json!(min));
                obj.insert("maximum".into(), json!(max));
            }
            Kind::Number { min, max } => {
                obj.insert("minimum".into(), json!(min));
                obj.insert("maximum".into(), json!(max));
            }
            _ => {}
        }
        match &self.default {
            Some(DefaultValue::Integer(v)) => {
                obj.insert("default".into(), json!(v));
            }
            Some(DefaultValue::Number(v)) => {
                obj.insert("default".into(), json!(v));
            }
            Some(DefaultValue::Text(v)) => {
                obj.insert("default".into(), json!(v));
            }
            None => {}
        }
        if self.required {
            obj.insert("required".into(), json!(true));
        }
        if self.repeatable {
            obj.insert("repeatable".into(), json!(true));
        }
        for (set, key) in [
            (self.owner_only, "owner_only"),
            (self.network, "network"),
            (self.secrets, "secrets"),
            (self.output_format, "output_format"),
        ] {
            if set {
                obj.insert(key.into(), json!(true));
            }
        }
        if !self.help.is_empty() {
            obj.insert("help".into(), json!(self.help));
        }
        Value::Object(obj)
    }
}

pub type Handler = fn(&Ctx, &Args) -> Result<Outcome, CliError>;

pub struct CommandSpec {
    pub name: &'static str,
    pub summary: &'static str,
    pub tags: &'static [&'static str],
    pub formats: &'static [&'static str],
    pub positionals: Vec<ArgSpec>,
    pub flags: Vec<ArgSpec>,
    pub run: Handler,
}

pub const TEXT_AND_JSON: &[&str] = &["text", "json"];
pub const TEXT_ONLY: &[&str] = &["text"];

impl CommandSpec {
    /// A command printing text and JSON; the `--format` flag is added last so
    /// every command selects its output the same way.
    pub fn new(
        name: &'static str,
        summary: &'static str,
        tags: &'static [&'static str],
        run: Handler,
    ) -> Self {
        CommandSpec {
            name,
            summary,
            tags,
            formats: TEXT_AND_JSON,
            positionals: Vec::new(),
            flags: Vec::new(),
            run,
        }
    }

    pub fn formats(mut self, formats: &'static [&'static str]) -> Self {
        self.formats = formats;
        self
    }

    pub fn positional(mut self, arg: ArgSpec) -> Self {
        self.positionals.push(arg);
        self
    }

    pub fn flag(mut self, arg: ArgSpec) -> Self {
        self.flags.push(arg);
        self
    }

    /// Appends the output-format flag; called once by the registry.
    pub fn with_format_flag(mut self) -> Self {
        let mut format = ArgSpec::choice("--format", self.formats, "Output format.")
            .default(DefaultValue::Text("text"));
        format.output_format = true;
        self.flags.push(format);
        self
    }

    pub fn find_flag(&self, name: &str) -> Option<&ArgSpec> {
        self.flags.iter().find(|f| f.name == name)
    }

    pub fn find_arg(&self, name: &str) -> Option<&ArgSpec> {
        self.flags
            .iter()
            .chain(self.positionals.iter())
            .find(|a| a.name == name)
    }

    pub fn to_json(&self) -> Value {
        json!({
            "name": self.name,
            "summary": self.summary,
            "tags": self.tags,
            "formats": self.formats,
            "positionals": self.positionals.iter().map(ArgSpec::to_json).collect::<Vec<_>>(),
            "flags": self.flags.iter().map(ArgSpec::to_json).collect::<Vec<_>>(),
        })
    }
}
