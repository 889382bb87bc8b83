//! The subcommands: each one a short function over the start-up
//! ([`crate::startup`]) and the per-call pipeline ([`crate::call`]).
//! `main` only maps [`run`] to an exit code.

use anyhow::bail;
use serde_json::{json, Map, Value};

use crate::cancel::Cancel;
use crate::cli::{Cli, CliCommand, ServeArgs};
use crate::protect::Protected;
use crate::tools::{self, Offering};

use crate::call::CallOutcome;
use crate::output::print_stdout;
use crate::startup::{App, SERVER_NAME};

pub fn run(cli: Cli) -> anyhow::Result<u8> {
    match cli.command {
        CliCommand::McpServe(args) => {
            if args.print_config.is_some() {
                return crate::client_config::print(&cli.globals, &args);
            }
            let mut app = App::start_quiet(&cli.globals, &args)?;
            app.pin(&args.pins.settings())?;
            let protocol = app.protocol_input();
            // As many calls as the process limits hold; a call that would
            // pass them fails as the server's own shortage, not the backend's.
            let fit =
                crate::limits::fit(app.max_concurrent, &crate::limits::ProcessLimits::measure());
            crate::audit::start(&args.audit.settings(), &app.redactor, &app.config.backend)?;
            let line = app.startup_line.clone();
            crate::serve::serve(
                protocol,
                std::sync::Arc::new(app),
                fit.calls,
                |pool, bounds| {
                    let mut line = format!("{line}; {}", pool.describe(bounds));
                    for note in &fit.notes {
                        line.push_str(&format!("; note: {note}"));
                    }
                    eprintln!("{line}");
                },
            )?;
            crate::audit::stop();
            Ok(0)
        }
        CliCommand::Sandbox(cmd) => crate::sandbox_cli::cli(&cli.globals, cmd),
        CliCommand::Audit(crate::cli::AuditCommand::Verify { files, audit_key }) => {
            crate::audit::verify::cli(files, audit_key)
        }
        CliCommand::ProbeAttempt { name, args } => Ok(crate::sandbox::probe_attempt(&name, &args)),
        CliCommand::Tools {
            json,
            check,
            pin,
            update,
            start,
        } => {
            let serve = ServeArgs::for_subcommand(start, None);
            if let Some(pin) = pin {
                return pins_subcommand(&cli.globals, &serve, &pin, check, update);
            }
            if check {
                return crate::check::run(&cli.globals, &serve, json);
            }
            let app = App::start(&cli.globals, &serve)?;
            let text = if json {
                serde_json::to_string_pretty(&tools_json(&app))? + "\n"
            } else {
                tools_text(&app)
            };
            print_stdout(&text)?;
            Ok(0)
        }
        CliCommand::Call {
            tool,
            arg,
            args_json,
            start,
            limits,
        } => {
            let args = call_arguments(&arg, args_json.as_deref())?;
            let app = App::start(
                &cli.globals,
                &ServeArgs::for_subcommand(start, Some(limits)),
            )?;
            let Some(t) = app.tools.get(&tool) else {
                eprintln!("{SERVER_NAME}: {}", unknown_tool(&app, &tool));
                return Ok(2);
            };
            match app.call(t, &args, &Cancel::new()) {
                CallOutcome::Done(envelope) => {
                    print_stdout(&(envelope.to_text() + "\n"))?;
                    Ok(u8::try_from(envelope.exit_code).unwrap_or(2))
                }
                CallOutcome::Cancelled => {
                    eprintln!("{SERVER_NAME}: the call was cancelled");
                    Ok(2)
                }
                CallOutcome::UnknownTool => {
                    eprintln!("{SERVER_NAME}: {}", unknown_tool(&app, &tool));
                    Ok(2)
                }
            }
        }
    }
}

/// `tools --pin FILE --check | --update` (docs/PINS.md, "Exit codes").
fn pins_subcommand(
    globals: &crate::cli::Globals,
    serve: &ServeArgs,
    pin: &std::path::Path,
    check: bool,
    update: bool,
) -> anyhow::Result<u8> {
    if !check && !update {
        bail!("--pin FILE goes with --check (compare) or --update (rewrite the pins)");
    }
    let app = App::start(globals, serve)?;
    if update {
        print_stdout(&crate::pins::update(&app.offered(), pin)?)?;
        return Ok(0);
    }
    let (code, text) = crate::pins::check(&app.offered(), pin)?;
    print_stdout(&text)?;
    Ok(code)
}

/// `tools --json`: stable machine form.
fn tools_json(app: &App) -> Value {
    json!({
        "backend": {
            "path": app.config.backend.display().to_string(),
            "name": app.program.name,
            "version": app.program.version,
        },
        "root": app.root.path().display().to_string(),
        "globals": app.invocation.globals(),
        "tool_count": app.tools.len(),
        "protected": protected_json(app),
        "commands": app.report.to_json(&app.tools),
    })
}

/// The protected patterns and fixed files, as `tools --json` shows them.
fn protected_json(app: &App) -> Value {
    let p = &app.protected;
    let mut fixed: Vec<Value> = Vec::new();
    for f in p.fixed_files.iter().filter(|f| f.primary) {
        let path = f.path.display().to_string();
        if !fixed.iter().any(|v| v["path"] == path.as_str()) {
            fixed.push(json!({"file": f.what, "path": path}));
        }
    }
    json!({
        "patterns": p.patterns.iter().map(|p| p.as_str()).collect::<Vec<_>>(),
        "fixed_files": fixed,
        "hidden_in_runs": app.masked,
        "hidden_hard_links": app.masked_links,
        "hidden_scan_truncated": app.mask_note.is_some(),
    })
}

/// `; and the fixed accounts, profile and database files` when there are any.
fn fixed_files_text(p: &Protected) -> String {
    let mut kinds: Vec<&str> = Vec::new();
    for f in &p.fixed_files {
        if !kinds.contains(&f.what) {
            kinds.push(f.what);
        }
    }
    match kinds.as_slice() {
        [] => String::new(),
        [one] => format!("; and the fixed {one} file"),
        [init @ .., last] => format!("; and the fixed {} and {last} files", init.join(", ")),
    }
}

/// `; and other names (hard links) of ...`: what the argument check also
/// refuses by device and inode.
fn other_names_text(p: &Protected) -> String {
    let found = match p.remembered() {
        0 => None,
        1 => Some("the 1 protected file the start-up scan found".to_string()),
        n => Some(format!("the {n} protected files the start-up scan found")),
    };
    let fixed = (!p.fixed_files.is_empty()).then(|| "the fixed files".to_string());
    match (fixed, found) {
        (None, None) => String::new(),
        (Some(a), None) | (None, Some(a)) => format!("; and other names (hard links) of {a}"),
        (Some(a), Some(b)) => format!("; and other names (hard links) of {a} and of {b}"),
    }
}

/// `tools`: for people.
fn tools_text(app: &App) -> String {
    let mut out = format!(
        "backend: {} ({} {})\nroot: {}\n",
        app.config.backend.display(),
        app.program.name,
        app.program.version,
        app.root.path().display()
    );
    if !app.invocation.globals().is_empty() {
        out.push_str(&format!(
            "globals: {}\n",
            app.invocation.globals().join(" ")
        ));
    }
    out.push_str(&format!(
        "protected (no path argument may name these): {}{}{}\n",
        app.protected.patterns_line(),
        fixed_files_text(&app.protected),
        other_names_text(&app.protected),
    ));
    if cfg!(target_os = "linux") {
        out.push_str(&format!(
            "hidden in every run by its mount namespace (found at start): {} protected entr{} under the root and home{}\n",
            app.masked,
            if app.masked == 1 { "y" } else { "ies" },
            match app.masked_links {
                0 => String::new(),
                n => format!(
                    ", {n} of them only as another name (hard link) of a protected or fixed file"
                ),
            }
        ));
    } else {
        out.push_str("hidden in runs: nothing (only Linux runs have a mount namespace to hide protected files in)\n");
    }
    if let Some(note) = &app.mask_note {
        out.push_str(&format!("note: {note}\n"));
    }
    out.push_str(&format!(
        "{} of {} commands offered as tools\n\n",
        app.tools.len(),
        app.report.commands.len()
    ));
    out.push_str(&app.report.to_text());
    out
}

/// `--arg KEY=VALUE ...` or `--args-json '{...}'` -> the arguments object.
fn call_arguments(pairs: &[String], json_text: Option<&str>) -> anyhow::Result<Map<String, Value>> {
    if let Some(text) = json_text {
        return match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(m)) => Ok(m),
            Ok(_) => bail!("--args-json must be a JSON object"),
            Err(e) => bail!("--args-json is not valid JSON: {e}"),
        };
    }
    let mut grouped: Vec<(String, Vec<Value>)> = Vec::new();
    for pair in pairs {
        let Some((key, raw)) = pair.split_once('=') else {
            bail!("--arg `{pair}` has no `=`; write --arg KEY=VALUE");
        };
        if key.is_empty() {
            bail!("--arg `{pair}` has an empty key");
        }
        let value =
            serde_json::from_str::<Value>(raw).unwrap_or_else(|_| Value::String(raw.to_string()));
        match grouped.iter_mut().find(|(k, _)| k == key) {
            Some((_, values)) => values.push(value),
            None => grouped.push((key.to_string(), vec![value])),
        }
    }
    Ok(grouped
        .into_iter()
        .map(|(k, mut values)| {
            let v = if values.len() == 1 {
                values.remove(0)
            } else {
                Value::Array(values)
            };
            (k, v)
        })
        .collect())
}

/// Say why `name` is not a tool: withheld (and why), or unknown.
fn unknown_tool(app: &App, name: &str) -> String {
    let withheld = app.report.get(name).or_else(|| {
        app.report
            .commands
            .iter()
            .find(|c| tools::tool_name(&c.command) == name)
    });
    match withheld.map(|c| (&c.command, &c.verdict)) {
        Some((command, Offering::Withheld { reasons })) => {
            let list: Vec<String> = reasons.iter().map(ToString::to_string).collect();
            format!(
                "the backend command `{command}` is not offered as a tool: {}",
                list.join("; ")
            )
        }
        Some((command, Offering::Offered { tool, .. })) => {
            format!("the backend command `{command}` is offered as the tool `{tool}`; call that")
        }
        None => format!("no tool named `{name}`; `{SERVER_NAME} tools` lists what is offered"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arg_pairs_parse_as_json_or_string_and_repeat_into_arrays() {
        let pairs: Vec<String> = [
            "days=14",
            "strict=true",
            "name=q3 plan",
            "ch=x",
            "ch=linkedin",
            "label=\"14\"",
            "eq=a=b",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let m = call_arguments(&pairs, None).unwrap();
        assert_eq!(
            Value::Object(m),
            json!({"days": 14, "strict": true, "name": "q3 plan", "ch": ["x", "linkedin"], "label": "14", "eq": "a=b"})
        );
    }

    #[test]
    fn arg_pairs_and_json_errors() {
        assert!(call_arguments(&["nokey".to_string()], None).is_err());
        assert!(call_arguments(&["=v".to_string()], None).is_err());
        assert!(call_arguments(&[], Some("[1]")).is_err());
        assert!(call_arguments(&[], Some("{")).is_err());
        assert_eq!(
            call_arguments(&[], Some(r#"{"a": [1]}"#)).unwrap()["a"],
            json!([1])
        );
        assert!(call_arguments(&[], None).unwrap().is_empty());
    }

    #[test]
    fn the_fixed_files_are_named_by_kind_once_each() {
        let text = |fixed: &[(&'static str, &std::path::Path)]| {
            fixed_files_text(&Protected::new(&[], fixed).unwrap())
        };
        let p = std::path::Path::new;
        assert_eq!(text(&[]), "");
        assert_eq!(
            text(&[("accounts", p("/w/accounts.yaml"))]),
            "; and the fixed accounts file"
        );
        // A database comes with its journal files, of the same kind.
        assert_eq!(
            text(&[
                ("accounts", p("/w/accounts.yaml")),
                ("profile", p("/w/profile.yaml")),
                ("database", p("/w/rw.db")),
            ]),
            "; and the fixed accounts, profile and database files"
        );
        assert_eq!(
            text(&[("profile", p("/w/a.yaml")), ("database", p("/w/rw.db"))]),
            "; and the fixed profile and database files"
        );
    }
}
