//! A fully checked call -> the backend's argv (docs/BACKEND.md, Invocation).
//!
//! The spelling rules are what keep a value from becoming an option: flags
//! are one element each (`--name=value`), positionals follow a literal `--`,
//! and the globals are fixed at start. This module is pure so that every
//! rule is pinned by a golden vector.

use crate::confine::ConfinedPath;
use crate::error::{ErrorCode, ToolError};
// Kept reachable here for callers of the argv step; it lives with validation.
pub use crate::validate::plain_decimal;
use crate::validate::{FlagValue, Scalar, ValidatedCall};

/// What every run's argv starts with and how it is spelled, fixed at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    backend: String,
    globals: Vec<String>,
    format_flag: String,
    end_of_options: bool,
}

impl Invocation {
    /// `globals` are complete elements such as `--home=/abs`, in contract order.
    pub fn new(
        backend: String,
        globals: Vec<String>,
        format_flag: String,
        end_of_options: bool,
    ) -> Self {
        Self {
            backend,
            globals,
            format_flag,
            end_of_options,
        }
    }

    /// The catalog request: always this literal spelling (docs/BACKEND.md, Catalog).
    pub fn describe(backend: &str, globals: &[String]) -> Vec<String> {
        let mut argv = Vec::with_capacity(globals.len() + 3);
        argv.push(backend.to_string());
        argv.extend(globals.iter().cloned());
        argv.push("describe".to_string());
        argv.push("--format=json".to_string());
        argv
    }

    pub fn globals(&self) -> &[String] {
        &self.globals
    }

    /// `[backend, globals.., command, flags.., FORMAT_FLAG=json, --, positionals..]`.
    pub fn build(&self, call: &ValidatedCall<ConfinedPath>) -> Result<Vec<String>, ToolError> {
        let mut argv = Vec::new();
        argv.push(self.backend.clone());
        argv.extend(self.globals.iter().cloned());
        argv.push(call.command().to_string());
        for (name, value) in call.flags() {
            argv.push(match value {
                FlagValue::Present => name.clone(),
                FlagValue::Value(s) => format!("{name}={}", spell(s)),
            });
        }
        argv.push(format!("{}=json", self.format_flag));
        if !call.positionals().is_empty() {
            if self.end_of_options {
                argv.push("--".to_string());
            }
            for p in call.positionals() {
                let s = spell(p);
                if !self.end_of_options && s.starts_with('-') {
                    return Err(ToolError::new(
                        ErrorCode::InvalidArgument,
                        format!("The value \"{s}\" starts with `-`, which this backend would read as an option; give a value that doesn't start with `-`."),
                    ));
                }
                argv.push(s);
            }
        }
        if argv.iter().any(|a| a.contains('\0')) {
            return Err(ToolError::new(
                ErrorCode::InvalidArgument,
                "A value contains a NUL byte, which cannot be passed to a command; remove it.",
            ));
        }
        Ok(argv)
    }
}

fn spell(s: &Scalar<ConfinedPath>) -> String {
    match s {
        Scalar::Text(t) => t.clone(),
        Scalar::Integer(i) => i.to_string(),
        Scalar::Decimal(d) => d.clone(),
        Scalar::Path(p) => p.as_str().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{catalog, tools, validate};
    use serde_json::{json, Value};

    fn sample_call(args: Value) -> ValidatedCall<ConfinedPath> {
        let mut v = catalog::tests::sample();
        v["commands"] = json!([{
            "name": "campaign-check", "summary": "s", "tags": ["read_only"], "formats": ["json"],
            "positionals": [{"name": "campaign", "type": "path"}, {"name": "note", "type": "string"}],
            "flags": [
                {"name": "--strict", "type": "boolean"},
                {"name": "--days", "type": "integer"},
                {"name": "--threshold", "type": "number"},
                {"name": "--channel", "type": "choice", "choices": ["x", "linkedin"], "repeatable": true},
                {"name": "--label", "type": "string"}
            ]
        }]);
        let c = catalog::parse(v.to_string().as_bytes()).unwrap();
        let (set, _) = tools::build(&c, false);
        let tool = set.get("campaign_check").unwrap();
        let raw = validate::validate(tool, args.as_object().unwrap()).unwrap();
        // Real confinement is tested in confine.rs; here only spelling matters.
        raw.confine_for_test("/root")
    }

    fn inv(end_of_options: bool) -> Invocation {
        Invocation::new(
            "/usr/bin/rw".into(),
            vec!["--home=/h".into(), "--db=/h/rw.db".into()],
            "--format".into(),
            end_of_options,
        )
    }

    fn argv(args: Value) -> Vec<String> {
        inv(true).build(&sample_call(args)).unwrap()
    }

    #[test]
    fn golden_full_call() {
        let args: Value = serde_json::from_str(
            r#"{"campaign": "plans/q3.yaml", "note": "-rf", "strict": true, "days": 14,
                "threshold": 2.5e-1, "channel": ["x", "linkedin"], "label": "--db=/elsewhere"}"#,
        )
        .unwrap();
        assert_eq!(
            argv(args),
            vec![
                "/usr/bin/rw",
                "--home=/h",
                "--db=/h/rw.db",
                "campaign-check",
                "--strict",
                "--days=14",
                "--threshold=0.25",
                "--channel=x",
                "--channel=linkedin",
                "--label=--db=/elsewhere",
                "--format=json",
                "--",
                "/root/plans/q3.yaml",
                "-rf",
            ]
        );
    }

    #[test]
    fn golden_no_positionals_no_separator_and_false_boolean_omitted() {
        assert_eq!(
            argv(json!({"strict": false, "days": 3})),
            vec![
                "/usr/bin/rw",
                "--home=/h",
                "--db=/h/rw.db",
                "campaign-check",
                "--days=3",
                "--format=json"
            ]
        );
    }

    #[test]
    fn golden_without_end_of_options() {
        let call = sample_call(json!({"campaign": "a.yaml", "note": "fine"}));
        assert_eq!(
            inv(false).build(&call).unwrap(),
            vec![
                "/usr/bin/rw",
                "--home=/h",
                "--db=/h/rw.db",
                "campaign-check",
                "--format=json",
                "/root/a.yaml",
                "fine"
            ]
        );
        let call = sample_call(json!({"campaign": "a.yaml", "note": "-x"}));
        let e = inv(false).build(&call).unwrap_err();
        assert_eq!(e.code(), "invalid_argument");
        assert!(e.message().contains("starts with `-`"));
    }

    #[test]
    fn describe_is_literal() {
        assert_eq!(
            Invocation::describe("/b", &["--home=/h".into()]),
            vec!["/b", "--home=/h", "describe", "--format=json"]
        );
    }

    #[test]
    fn plain_decimal_vectors() {
        let cases = [
            ("0.25", "0.25"),
            ("2.5e-1", "0.25"),
            ("2.5E-1", "0.25"),
            ("1e3", "1000"),
            ("1E+3", "1000"),
            ("-1.250e2", "-125"),
            ("0.50", "0.5"),
            ("3", "3"),
            ("-0.0", "0"),
            ("0", "0"),
            ("1e-7", "0.0000001"),
            ("12.345e1", "123.45"),
            ("007", "7"),
        ];
        for (input, want) in cases {
            assert_eq!(plain_decimal(input).as_deref(), Some(want), "{input}");
        }
        for bad in ["", "e5", "1e", "abc", "1.2.3", "1e999999", "--1", ".5"] {
            assert_eq!(plain_decimal(bad), None, "{bad}");
        }
        assert_eq!(plain_decimal("1e-500"), None);
    }

    #[test]
    fn globals_are_kept_as_given_in_order() {
        assert_eq!(inv(true).globals(), ["--home=/h", "--db=/h/rw.db"]);
        let none = Invocation::new("/b".into(), Vec::new(), "--format".into(), true);
        assert!(none.globals().is_empty());
        assert_eq!(
            none.build(&sample_call(json!({}))).unwrap(),
            vec!["/b", "campaign-check", "--format=json"]
        );
    }

    #[test]
    fn a_nul_byte_never_reaches_the_argv() {
        let nul_global = Invocation::new(
            "/b".into(),
            vec!["--home=/h\0x".into()],
            "--format".into(),
            true,
        );
        let e = nul_global.build(&sample_call(json!({}))).unwrap_err();
        assert_eq!(e.code(), "invalid_argument");
        assert!(e.message().contains("NUL byte"), "{}", e.message());
    }
}
