//! `tools --check`: the backend's catalog as its author needs to see it.
//!
//! It starts exactly as `mcp-serve` would (the same backend resolution,
//! sandbox and `describe` run), so what it reports is what a server would
//! get, then lists every finding, not only the first: errors (the catalog
//! refused, or a command withheld for a problem in its entry), warnings
//! (text cut or cleaned, unknown top-level fields, unusual names), and every
//! command not offered, with why. Exit 0 clean, 1 warnings only, 2 errors.

use serde_json::{json, Value};

use crate::catalog::{Diagnostic, Problem, Severity};
use crate::cli::{Globals, ServeArgs};
use crate::config::{Owner, OwnerInput};
use crate::sandbox::RunKind;
use crate::startup::{App, StartError};
use crate::tools::{Offering, ToolReport, ToolSet};

/// What checking found.
pub(crate) struct Findings {
    pub diagnostics: Vec<Diagnostic>,
    /// `None` when the catalog was refused as a whole.
    pub served: Option<(ToolReport, ToolSet)>,
    /// The backend's path, for the line that validates its catalog
    /// against the schema.
    pub backend: String,
}

impl Findings {
    fn count(&self, severity: Severity) -> usize {
        self.diagnostics
            .iter()
            .filter(|d| d.severity == severity)
            .count()
    }

    /// 0 clean, 1 warnings only, 2 errors.
    pub(crate) fn exit_code(&self) -> u8 {
        if self.served.is_none() || self.count(Severity::Error) > 0 {
            2
        } else if self.count(Severity::Warning) > 0 {
            1
        } else {
            0
        }
    }

    pub(crate) fn to_text(&self) -> String {
        let errors = self.count(Severity::Error);
        let warnings = self.count(Severity::Warning);
        let mut out = String::new();
        if self.served.is_none() {
            out.push_str("the catalog is refused: a server would not start\n");
        }
        out.push_str(&format!(
            "{errors} error{}, {warnings} warning{}\n",
            plural(errors),
            plural(warnings)
        ));
        // Errors first, each kind in the order found.
        for severity in [Severity::Error, Severity::Warning] {
            for d in self.diagnostics.iter().filter(|d| d.severity == severity) {
                let line = format!("{:<8} {d}", severity.as_str());
                out.push_str(&match &d.command {
                    Some(c) => format!("{line}  [command {c}]\n"),
                    None => format!("{line}\n"),
                });
            }
        }
        if let Some((report, tools)) = &self.served {
            let withheld: Vec<(&str, String)> = report
                .commands
                .iter()
                .filter_map(|c| match &c.verdict {
                    Offering::Withheld { reasons } => {
                        let list: Vec<String> = reasons.iter().map(ToString::to_string).collect();
                        Some((c.command.as_str(), list.join("; ")))
                    }
                    Offering::Offered { .. } => None,
                })
                .collect();
            out.push_str(&format!(
                "\n{} command{}: {} offered as tools, {} withheld\n",
                report.commands.len(),
                plural(report.commands.len()),
                tools.len(),
                withheld.len()
            ));
            let width = withheld.iter().map(|(c, _)| c.len()).max().unwrap_or(0);
            for (command, why) in withheld {
                out.push_str(&format!("  withheld {command:<width$}  {why}\n"));
            }
        }
        out.push_str(&format!(
            "\nto validate the catalog against docs/catalog.schema.json (from the source tree; \
             needs Python's jsonschema package):\n  {}\n",
            schema_check_line(&self.backend)
        ));
        out.push_str(match self.exit_code() {
            0 => "result: clean\n",
            1 => "result: warnings only (exit 1)\n",
            _ => "result: errors (exit 2)\n",
        });
        out
    }

    pub(crate) fn to_json(&self) -> Value {
        let diagnostics: Vec<Value> = self
            .diagnostics
            .iter()
            .map(|d| {
                json!({
                    "severity": d.severity.as_str(),
                    "code": d.problem.code(),
                    "pointer": d.pointer,
                    "command": d.command,
                    "message": d.message,
                })
            })
            .collect();
        json!({
            "exit_code": self.exit_code(),
            "refused": self.served.is_none(),
            "errors": self.count(Severity::Error),
            "warnings": self.count(Severity::Warning),
            "diagnostics": diagnostics,
            "commands": self.served.as_ref().map(|(r, t)| r.to_json(t)),
            "schema_check": schema_check_line(&self.backend),
        })
    }
}

/// One shell line that validates what `describe` prints against the
/// schema, run from the source tree's top folder.
pub(crate) fn schema_check_line(backend: &str) -> String {
    format!(
        "{} describe --format=json | python3 -c 'import json, sys, jsonschema; \
         jsonschema.Draft202012Validator(json.load(open(\"docs/catalog.schema.json\"))).validate(json.load(sys.stdin)); \
         print(\"valid\")'",
        shell_quote(backend)
    )
}

/// `s` as one shell word.
fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+=:,@".contains(&b))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// `draft` writes the database: offered while there is none, its first
/// call creates it (or fails, when the backend will not), which is rarely
/// what the owner meant to allow.
fn draft_without_database(app: &App) -> Option<Diagnostic> {
    let draft = app.tools.iter().any(|t| t.kind == RunKind::Draft);
    let db = app.config.db.as_ref();
    if !draft || db.is_some_and(|d| d.exists) {
        return None;
    }
    let message = match db {
        Some(d) => format!(
            "`draft` is offered but the database {} does not exist yet: create it (`init`) before \
             serving, or leave out --allow-drafts",
            d.path.display()
        ),
        None => "`draft` is offered but the backend names no database (pass --db or give \
                 `paths.db` in the catalog)"
            .to_string(),
    };
    Some(Diagnostic {
        pointer: String::new(),
        command: Some("draft".to_string()),
        severity: Severity::Warning,
        problem: Problem::Suspicious,
        message,
    })
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// Start as the server would and report on the catalog.
pub(crate) fn run(globals: &Globals, serve: &ServeArgs, json: bool) -> anyhow::Result<u8> {
    let backend = Owner::resolve(&OwnerInput {
        globals,
        backend_option: "--backend",
        root: serve.start.root.as_deref(),
        allow_read: &serve.start.allow_read,
    })
    .map(|o| o.backend.display().to_string())
    .unwrap_or_else(|_| "BACKEND".to_string());
    let findings = match App::start(globals, serve) {
        Ok(app) => {
            let mut diagnostics = app.report().diagnostics.clone();
            diagnostics.extend(draft_without_database(&app));
            Findings {
                diagnostics,
                served: Some((app.report().clone(), app.tools.clone())),
                backend,
            }
        }
        Err(StartError::Catalog(refused)) => Findings {
            diagnostics: refused.diagnostics().to_vec(),
            served: None,
            backend,
        },
        // Not the catalog's fault (no backend, describe failed, sandbox):
        // reported like any start-up failure.
        Err(e) => return Err(e.into()),
    };
    let text = if json {
        serde_json::to_string_pretty(&findings.to_json())? + "\n"
    } else {
        findings.to_text()
    };
    // A reader that closed the pipe early ends the program quietly (`main`).
    crate::output::print_stdout(&text)?;
    Ok(findings.exit_code())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog;
    use crate::tools;

    fn findings(v: &Value) -> Findings {
        match catalog::parse(v.to_string().as_bytes()) {
            Ok(c) => {
                let (set, report) = tools::build(&c, false);
                Findings {
                    diagnostics: report.diagnostics.clone(),
                    served: Some((report, set)),
                    backend: "/opt/rw/bin/rw".to_string(),
                }
            }
            Err(e) => Findings {
                diagnostics: e.diagnostics().to_vec(),
                served: None,
                backend: "/opt/rw/bin/rw".to_string(),
            },
        }
    }

    #[test]
    fn a_clean_catalog_exits_0() {
        let f = findings(&catalog::tests::sample());
        assert_eq!(f.exit_code(), 0);
        let text = f.to_text();
        assert!(text.starts_with("0 errors, 0 warnings\n"), "{text}");
        assert!(
            text.contains("1 command: 1 offered as tools, 0 withheld"),
            "{text}"
        );
        assert!(text.ends_with("result: clean\n"), "{text}");
    }

    #[test]
    fn the_schema_check_line_is_one_shell_line_naming_the_backend() {
        let line = schema_check_line("/opt/rw/bin/rw");
        assert!(
            line.starts_with("/opt/rw/bin/rw describe --format=json | python3 -c 'import json, sys, jsonschema; "),
            "{line}"
        );
        assert!(
            line.contains("Draft202012Validator(json.load(open(\"docs/catalog.schema.json\")))")
        );
        assert!(!line.contains('\n'));
        assert_eq!(shell_quote("/a b/it's"), "'/a b/it'\\''s'");
        let text = findings(&catalog::tests::sample()).to_text();
        assert!(
            text.contains(&format!("docs/catalog.schema.json (from the source tree; needs Python's jsonschema package):\n  {line}\n")),
            "{text}"
        );
    }

    #[test]
    fn warnings_only_exit_1() {
        let mut v = catalog::tests::sample();
        v["homepage"] = json!("x");
        let f = findings(&v);
        assert_eq!(f.exit_code(), 1);
        assert!(f
            .to_text()
            .contains("warning  /homepage: unknown field \"homepage\"; ignored\n"));
    }

    #[test]
    fn every_error_is_listed_with_pointer_and_command_and_exits_2() {
        let mut v = catalog::tests::sample();
        v["commands"][0]["flags"][0]["type"] = json!("colour");
        v["commands"][0]["tags"] = json!(["read_only", "experimental"]);
        v["commands"].as_array_mut().unwrap().push(
            json!({"name": "restock", "summary": "s", "tags": ["writes"], "formats": ["json"]}),
        );
        let f = findings(&v);
        assert_eq!(f.exit_code(), 2);
        let text = f.to_text();
        for want in [
            "2 errors, 0 warnings\n",
            "error    /commands/0/tags/1: unknown tag \"experimental\"",
            "error    /commands/0/flags/0/type: unknown type \"colour\"",
            "[command campaign-check]\n",
            "2 commands: 0 offered as tools, 2 withheld\n",
            "  withheld restock         not tagged read_only; tagged writes\n",
            "result: errors (exit 2)\n",
        ] {
            assert!(text.contains(want), "missing {want:?} in:\n{text}");
        }
        let j = f.to_json();
        assert_eq!(j["exit_code"], 2);
        assert_eq!(j["errors"], 2);
        assert_eq!(j["diagnostics"][1]["pointer"], "/commands/0/flags/0/type");
        assert_eq!(j["diagnostics"][1]["code"], "unknown_type");
        assert_eq!(j["diagnostics"][1]["command"], "campaign-check");
        assert_eq!(j["commands"][0]["reasons"][0]["code"], "unknown_tag");
    }

    #[test]
    fn a_refused_catalog_lists_everything_and_exits_2() {
        let mut v = catalog::tests::sample();
        v["commands"][0]["tags"] = json!(["shiny"]);
        v.as_object_mut().unwrap().remove("format_flag");
        let f = findings(&v);
        assert_eq!(f.exit_code(), 2);
        let text = f.to_text();
        assert!(text.starts_with("the catalog is refused"), "{text}");
        assert!(
            text.contains("error    /format_flag: `format_flag` is missing\n"),
            "{text}"
        );
        assert!(
            text.contains("error    /commands/0/tags/0: unknown tag \"shiny\""),
            "{text}"
        );
        assert_eq!(f.to_json()["refused"], true);
        assert_eq!(f.to_json()["commands"], Value::Null);
    }
}
