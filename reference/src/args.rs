//! The command line, parsed in two stages: the global options and the command
//! name first, then the command's own arguments against its description.
//!
//! The contract promises a server that every flag arrives as one
//! `--name=value` element and every positional after `--`; the parser holds
//! the other side of that promise by never reading a value from the next
//! element, so a value that starts with `-` can never turn into a flag.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::error::CliError;
use crate::spec::{ArgSpec, CommandSpec, DefaultValue, Kind};

/// The global options as typed, before any default is applied.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Globals {
    pub home: Option<String>,
    pub db: Option<String>,
    pub accounts: Option<String>,
    pub profile: Option<String>,
}

/// The command line split into globals, the command name and its arguments.
#[derive(Debug)]
pub struct Invocation<'a> {
    pub globals: Globals,
    pub command: &'a str,
    pub rest: &'a [String],
}

/// Whether JSON output was asked for, looked up before anything is parsed so
/// that even a malformed command line gets its error as a JSON document.
pub fn wants_json(argv: &[String]) -> bool {
    argv.iter()
        .take_while(|a| a.as_str() != "--")
        .any(|a| a == "--format=json")
}

pub fn split(argv: &[String]) -> Result<Invocation<'_>, CliError> {
    let mut globals = Globals::default();
    let mut index = 0;
    while let Some(arg) = argv.get(index) {
        let Some(option) = arg.strip_prefix("--") else {
            break;
        };
        let (name, value) = option.split_once('=').ok_or_else(|| {
            CliError::bad_argument(format!(
                "The global option {arg} needs a value written as one argument, like --{option}=VALUE, before the command."
            ))
        })?;
        let slot = match name {
            "home" => &mut globals.home,
            "db" => &mut globals.db,
            "accounts" => &mut globals.accounts,
            "profile" => &mut globals.profile,
            _ => {
                return Err(CliError::bad_argument(format!(
                    "--{name} is not a global option; the global options are --home, --db, --accounts and --profile, and they come before the command."
                )))
            }
        };
        if value.is_empty() {
            return Err(CliError::bad_argument(format!(
                "The global option --{name} needs a non-empty value."
            )));
        }
        if slot.is_some() {
            return Err(CliError::bad_argument(format!(
                "The global option --{name} is given more than once."
            )));
        }
        *slot = Some(value.to_string());
        index += 1;
    }
    let command = argv.get(index).ok_or_else(|| {
        CliError::bad_argument("No command given; run `describe` to list the commands.")
    })?;
    Ok(Invocation {
        globals,
        command,
        rest: &argv[index + 1..],
    })
}

/// One checked argument value.
#[derive(Debug, Clone, PartialEq)]
enum Parsed {
    Switch,
    Text(String),
    Integer(i64),
    Number(f64),
}

/// A command's arguments after checking: every value here has the type, range
/// and choices its description asks for.
pub struct Args<'a> {
    spec: &'a CommandSpec,
    values: BTreeMap<&'static str, Vec<Parsed>>,
}

impl<'a> Args<'a> {
    pub fn parse(spec: &'a CommandSpec, rest: &[String]) -> Result<Self, CliError> {
        let mut values: BTreeMap<&'static str, Vec<Parsed>> = BTreeMap::new();
        let mut positionals: Vec<&str> = Vec::new();
        let mut only_positionals = false;
        for arg in rest {
            if only_positionals {
                positionals.push(arg);
            } else if arg == "--" {
                only_positionals = true;
            } else if arg.starts_with("--") {
                let (name, value) = match arg.split_once('=') {
                    Some((name, value)) => (name, Some(value)),
                    None => (arg.as_str(), None),
                };
                let flag = spec.find_flag(name).ok_or_else(|| {
                    CliError::bad_argument(format!(
                        "{name} is not a flag of `{}`; run `describe {}` to see its flags.",
                        spec.name, spec.name
                    ))
                })?;
                let parsed = match (&flag.kind, value) {
                    (Kind::Boolean, None) => Parsed::Switch,
                    (Kind::Boolean, Some(_)) => {
                        return Err(CliError::bad_argument(format!(
                        "{name} is a switch and takes no value; give {name} alone to turn it on."
                    )))
                    }
                    (_, None) => {
                        return Err(CliError::bad_argument(format!(
                            "{name} needs a value written as one argument, like {name}=VALUE."
                        )))
                    }
                    (_, Some(raw)) => check_value(flag, raw)?,
                };
                let entry = values.entry(flag.name).or_default();
                if !entry.is_empty() && !flag.repeatable {
                    return Err(CliError::bad_argument(format!(
                        "{name} may be given only once."
                    )));
                }
                entry.push(parsed);
            } else if arg.starts_with('-') && arg.len() > 1 {
                return Err(CliError::bad_argument(format!(
                    "{arg} is not a flag of `{}`; flags are written --name=value, and a positional starting with - goes after --.",
                    spec.name
                )));
            } else {
                positionals.push(arg);
            }
        }
        let mut given = positionals.into_iter();
        for (index, spec_arg) in spec.positionals.iter().enumerate() {
            let last = index + 1 == spec.positionals.len();
            let take: Vec<&str> = if last && spec_arg.repeatable {
                given.by_ref().collect()
            } else {
                given.next().into_iter().collect()
            };
            for raw in take {
                let parsed = check_value(spec_arg, raw)?;
                values.entry(spec_arg.name).or_default().push(parsed);
            }
        }
        if given.next().is_some() {
            return Err(CliError::bad_argument(format!(
                "`{}` takes at most {} positional argument(s).",
                spec.name,
                spec.positionals.len()
            )));
        }
        for arg in spec.positionals.iter().chain(spec.flags.iter()) {
            if arg.required && !values.contains_key(arg.name) {
                return Err(CliError::bad_argument(format!(
                    "`{}` needs the {} argument.",
                    spec.name, arg.name
                )));
            }
        }
        Ok(Args { spec, values })
    }

    /// The name of the command these arguments belong to.
    pub fn command_name(&self) -> &'static str {
        self.spec.name
    }

    fn first(&self, name: &str) -> Option<&Parsed> {
        self.values.get(name).and_then(|v| v.first())
    }

    fn default_of(&self, name: &str) -> Option<&DefaultValue> {
        self.spec.find_arg(name).and_then(|a| a.default.as_ref())
    }

    /// Whether a switch was given.
    pub fn switch(&self, name: &str) -> bool {
        matches!(self.first(name), Some(Parsed::Switch))
    }

    pub fn integer(&self, name: &str) -> Option<i64> {
        match self.first(name) {
            Some(Parsed::Integer(v)) => Some(*v),
            _ => match self.default_of(name) {
                Some(DefaultValue::Integer(v)) => Some(*v),
                _ => None,
            },
        }
    }

    pub fn number(&self, name: &str) -> Option<f64> {
        match self.first(name) {
            Some(Parsed::Number(v)) => Some(*v),
            _ => match self.default_of(name) {
                Some(DefaultValue::Number(v)) => Some(*v),
                _ => None,
            },
        }
    }

    pub fn text(&self, name: &str) -> Option<&str> {
        match self.first(name) {
            Some(Parsed::Text(v)) => Some(v.as_str()),
            _ => match self.default_of(name) {
                Some(DefaultValue::Text(v)) => Some(v),
                _ => None,
            },
        }
    }

    /// Every value of a repeatable argument, in the order given.
    pub fn texts(&self, name: &str) -> Vec<&str> {
        self.values
            .get(name)
            .map(|vs| {
                vs.iter()
                    .filter_map(|v| match v {
                        Parsed::Text(t) => Some(t.as_str()),
                        _ => None,
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    pub fn path(&self, name: &str) -> Option<PathBuf> {
        self.text(name).map(PathBuf::from)
    }

    /// A required path argument; the parser already refused its absence.
    pub fn required_path(&self, name: &str) -> Result<PathBuf, CliError> {
        self.path(name)
            .ok_or_else(|| CliError::bad_argument(format!("The {name} argument is missing.")))
    }

    pub fn required_text(&self, name: &str) -> Result<&str, CliError> {
        self.text(name)
            .ok_or_else(|| CliError::bad_argument(format!("The {name} argument is missing.")))
    }
}

fn check_value(arg: &ArgSpec, raw: &str) -> Result<Parsed, CliError> {
    let name = arg.name;
    match &arg.kind {
        Kind::Boolean => Ok(Parsed::Switch),
        Kind::String => Ok(Parsed::Text(raw.to_string())),
        Kind::Path => {
            if raw.is_empty() {
                Err(CliError::bad_argument(format!(
                    "{name} needs a file path, not an empty value."
                )))
            } else {
                Ok(Parsed::Text(raw.to_string()))
            }
        }
        Kind::Choice(choices) => {
            if choices.contains(&raw) {
                Ok(Parsed::Text(raw.to_string()))
            } else {
                Err(CliError::bad_argument(format!(
                    "{name} must be one of {}, not {raw:?}.",
                    choices.join(", ")
                )))
            }
        }
        Kind::Integer { min, max } => {
            let value = parse_integer(raw).ok_or_else(|| {
                CliError::bad_argument(format!("{name} must be a whole number, not {raw:?}."))
            })?;
            if value < *min || value > *max {
                return Err(CliError::bad_argument(format!(
                    "{name} must be between {min} and {max}, not {value}."
                )));
            }
            Ok(Parsed::Integer(value))
        }
        Kind::Number { min, max } => {
            let value = parse_decimal(raw).ok_or_else(|| {
                CliError::bad_argument(format!(
                    "{name} must be a plain decimal number like 0.25, not {raw:?}."
                ))
            })?;
            if value < *min || value > *max {
                return Err(CliError::bad_argument(format!(
                    "{name} must be between {min} and {max}, not {raw}."
                )));
            }
            Ok(Parsed::Number(value))
        }
    }
}

fn parse_integer(raw: &str) -> Option<i64> {
    let digits = raw.strip_prefix('-').unwrap_or(raw);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    raw.parse().ok()
}

/// Plain decimal notation only: digits, at most one point, an optional minus.
/// Exponents, `inf` and `nan` are refused so a value means what it says.
fn parse_decimal(raw: &str) -> Option<f64> {
    let body = raw.strip_prefix('-').unwrap_or(raw);
    let (whole, fraction) = match body.split_once('.') {
        Some((w, f)) => (w, Some(f)),
        None => (body, None),
    };
    let digits_ok = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || !digits_ok(whole) {
        return None;
    }
    if let Some(f) = fraction {
        if f.is_empty() || !digits_ok(f) {
            return None;
        }
    }
    raw.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_are_plain() {
        assert_eq!(parse_decimal("0.25"), Some(0.25));
        assert_eq!(parse_decimal("1"), Some(1.0));
        assert_eq!(parse_decimal("-3.5"), Some(-3.5));
        assert_eq!(parse_decimal("2.5e-1"), None);
        assert_eq!(parse_decimal(".5"), None);
        assert_eq!(parse_decimal("1."), None);
        assert_eq!(parse_decimal("nan"), None);
        assert_eq!(parse_decimal("inf"), None);
    }

    #[test]
    fn integers_are_plain() {
        assert_eq!(parse_integer("14"), Some(14));
        assert_eq!(parse_integer("-2"), Some(-2));
        assert_eq!(parse_integer("+2"), None);
        assert_eq!(parse_integer("1.0"), None);
        assert_eq!(parse_integer(""), None);
        assert_eq!(parse_integer("99999999999999999999"), None);
    }

    #[test]
    fn globals_come_before_the_command() {
        let argv: Vec<String> = [
            "--home=/w",
            "--db=/w/x.db",
            "ops-summary",
            "--since=2026-01-01",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let inv = split(&argv).unwrap();
        assert_eq!(inv.globals.home.as_deref(), Some("/w"));
        assert_eq!(inv.globals.db.as_deref(), Some("/w/x.db"));
        assert_eq!(inv.command, "ops-summary");
        assert_eq!(inv.rest, &argv[3..]);
    }

    #[test]
    fn a_global_without_value_is_refused() {
        let argv: Vec<String> = ["--home", "/w", "version"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(split(&argv).unwrap_err().code(), "bad_argument");
    }

    #[test]
    fn json_is_detected_only_before_the_separator() {
        let argv: Vec<String> = ["x", "--", "--format=json"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert!(!wants_json(&argv));
        let argv: Vec<String> = ["x", "--format=json"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert!(wants_json(&argv));
    }
}
