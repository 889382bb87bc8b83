//! The catalog: its shape, its paths, and which commands a server may offer.

mod common;

use std::collections::BTreeSet;

use common::{catalog_commands, tags, Workspace};
use serde_json::Value;

const TAGS: &[&str] = &[
    "read_only",
    "writes",
    "interactive",
    "owner_only",
    "network",
    "secrets",
];
const TYPES: &[&str] = &["boolean", "string", "integer", "number", "path", "choice"];

fn is_kebab(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

/// The contract's eligibility rules (docs/BACKEND.md, Which commands become
/// tools), applied to the catalog.
fn eligible(command: &Value) -> bool {
    let tags = tags(command);
    let args = command["flags"]
        .as_array()
        .unwrap()
        .iter()
        .chain(command["positionals"].as_array().unwrap());
    tags.iter().any(|t| t == "read_only")
        && !tags.iter().any(|t| {
            ["writes", "interactive", "owner_only", "network", "secrets"].contains(&t.as_str())
        })
        && !args.clone().any(|a| a["owner_only"] == true)
        && command["formats"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f == "json")
        && command["name"] != "mcp-serve"
}

#[test]
fn catalog_has_version_1_and_absolute_paths() {
    let ws = Workspace::new();
    let run = ws.run(&["describe", "--format=json"]);
    assert_eq!(run.code, 0);
    let doc = run.json();
    assert_eq!(doc["catalog"], 1);
    assert_eq!(doc["program"]["name"], "reachweaver");
    assert_eq!(doc["program"]["version"], "1.8.2");
    assert_eq!(doc["format_flag"], "--format");
    assert_eq!(doc["end_of_options"], true);
    let home = ws.home.to_string_lossy().into_owned();
    assert_eq!(doc["paths"]["home"], home.as_str());
    assert_eq!(doc["paths"]["db"], ws.path("data/reachweaver.db").as_str());
    assert_eq!(doc["paths"]["accounts"], ws.path("accounts.yaml").as_str());
    assert_eq!(doc["paths"]["profile"], ws.path("profile.yaml").as_str());
    assert_eq!(
        doc["commands"].as_array().unwrap().len(),
        common::INVOCATIONS.len()
    );
}

#[test]
fn profile_is_null_when_the_workspace_has_none() {
    let ws = Workspace::new();
    std::fs::remove_file(ws.home.join("profile.yaml")).unwrap();
    let doc = ws.run(&["describe", "--format=json"]).json();
    assert_eq!(doc["paths"]["profile"], Value::Null);
}

#[test]
fn every_command_and_argument_is_well_formed() {
    let ws = Workspace::new();
    let commands = catalog_commands(&ws);
    let mut names = BTreeSet::new();
    for command in &commands {
        let name = command["name"].as_str().unwrap();
        assert!(is_kebab(name), "{name}");
        assert!(names.insert(name.to_string()), "duplicate command {name}");
        let summary = command["summary"].as_str().unwrap();
        assert!(
            summary.ends_with('.') && !summary.contains('\n'),
            "{name}: {summary}"
        );
        for tag in tags(command) {
            assert!(TAGS.contains(&tag.as_str()), "{name}: tag {tag}");
        }
        let formats: Vec<&str> = command["formats"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f.as_str().unwrap())
            .collect();
        assert!(
            !formats.is_empty() && formats.iter().all(|f| ["text", "json"].contains(f)),
            "{name}"
        );
        let mut property_names = BTreeSet::new();
        let mut output_format_flags = 0;
        for (kind, list) in [
            ("flags", &command["flags"]),
            ("positionals", &command["positionals"]),
        ] {
            for arg in list.as_array().unwrap() {
                let arg_name = arg["name"].as_str().unwrap();
                if kind == "flags" {
                    let bare = arg_name
                        .strip_prefix("--")
                        .unwrap_or_else(|| panic!("{name}: flag {arg_name}"));
                    assert!(is_kebab(bare), "{name}: {arg_name}");
                } else {
                    assert!(
                        arg_name
                            .chars()
                            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
                        "{name}: positional {arg_name}"
                    );
                }
                let property = arg_name.trim_start_matches('-').replace('-', "_");
                assert!(
                    property_names.insert(property),
                    "{name}: {arg_name} collides"
                );
                let ty = arg["type"].as_str().unwrap();
                assert!(TYPES.contains(&ty), "{name}: {arg_name} type {ty}");
                if ty == "choice" {
                    assert!(
                        !arg["choices"].as_array().unwrap().is_empty(),
                        "{name}: {arg_name}"
                    );
                }
                if ty == "integer" || ty == "number" {
                    assert!(arg["minimum"].as_f64().unwrap() <= arg["maximum"].as_f64().unwrap());
                }
                if let Some(help) = arg.get("help") {
                    assert!(help.as_str().unwrap().ends_with('.'), "{name}: {arg_name}");
                }
                if arg["output_format"] == true {
                    output_format_flags += 1;
                    assert_eq!(arg_name, "--format");
                    assert_eq!(arg["choices"], command["formats"], "{name}");
                }
            }
        }
        assert_eq!(output_format_flags, 1, "{name} has one output-format flag");
    }
}

#[test]
fn thirty_commands_are_eligible_and_the_excluded_kinds_are_there() {
    let ws = Workspace::new();
    let commands = catalog_commands(&ws);
    let eligible_names: BTreeSet<&str> = commands
        .iter()
        .filter(|c| eligible(c))
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(eligible_names.len(), 30, "{eligible_names:?}");
    for required in [
        "context",
        "describe",
        "start",
        "doctor",
        "version",
        "campaign-check",
        "campaign-preview",
        "claims-check",
        "capabilities",
        "distribution-plan",
        "voice-check",
        "repeat-check",
        "ops-summary",
        "trace",
    ] {
        assert!(eligible_names.contains(required), "{required} is eligible");
    }
    let tags_of = |name: &str| -> Vec<String> {
        tags(
            commands
                .iter()
                .find(|c| c["name"] == name)
                .unwrap_or_else(|| panic!("{name} listed")),
        )
    };
    for name in ["list", "show", "check", "init", "draft"] {
        assert_eq!(tags_of(name), vec!["writes"], "{name}");
    }
    assert_eq!(tags_of("credentials-audit"), vec!["read_only", "secrets"]);
    for name in ["link-health", "landing-check", "seo-content-check"] {
        assert_eq!(tags_of(name), vec!["read_only", "network"], "{name}");
    }
    for name in [
        "approve",
        "schedule",
        "publish",
        "pause",
        "resume",
        "reconcile",
        "reconnect",
        "connect",
        "approval-mode",
    ] {
        let t = tags_of(name);
        assert!(t.contains(&"owner_only".to_string()), "{name}");
        assert!(t.contains(&"writes".to_string()), "{name}");
    }
    assert_eq!(tags_of("setup"), vec!["interactive", "writes"]);
    assert_eq!(tags_of("mcp-serve"), vec!["read_only"]);
    let report = commands
        .iter()
        .find(|c| c["name"] == "report-text")
        .unwrap();
    assert_eq!(report["formats"], serde_json::json!(["text"]));
    let contacts = commands
        .iter()
        .find(|c| c["name"] == "contacts-summary")
        .unwrap();
    let show_emails = contacts["flags"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "--show-emails")
        .unwrap();
    assert_eq!(show_emails["owner_only"], true);
    for name in [
        "report-text",
        "contacts-summary",
        "mcp-serve",
        "credentials-audit",
        "link-health",
    ] {
        assert!(!eligible_names.contains(name), "{name} is not eligible");
    }
}

#[test]
fn offered_commands_carry_withheld_arguments() {
    let ws = Workspace::new();
    let commands = catalog_commands(&ws);
    let flag = |command: &str, flag: &str| -> Value {
        let c = commands.iter().find(|c| c["name"] == command).unwrap();
        c["flags"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["name"] == flag)
            .cloned()
            .unwrap_or(Value::Null)
    };
    assert_eq!(
        flag("account-summary", "--with-token-check")["secrets"],
        true
    );
    assert_eq!(
        flag("metrics-summary", "--include-individuals")["type"],
        "boolean"
    );
    assert_eq!(flag("campaign-check", "--online")["network"], true);
    assert_eq!(flag("campaign-check", "--days")["default"], 14);
    assert_eq!(flag("repeat-check", "--threshold")["default"], 0.8);
    assert_eq!(flag("draft", "--channel")["required"], true);
    assert_eq!(flag("draft", "--text")["required"], true);
    assert_eq!(flag("draft", "--reply-to")["type"], "string");
    assert_eq!(flag("draft", "--override-flagged")["type"], "boolean");
    assert_eq!(flag("draft", "--online")["network"], true);
    assert_eq!(flag("context", "--note")["type"], "string");
    let check = commands
        .iter()
        .find(|c| c["name"] == "campaign-check")
        .unwrap();
    assert_eq!(
        check["positionals"],
        serde_json::json!([{"name": "campaign", "type": "path", "required": true, "help": "Campaign file (YAML or JSON)."}])
    );
}

#[test]
fn describe_with_names_lists_only_those_in_order() {
    let ws = Workspace::new();
    let run = ws.run(&["describe", "--format=json", "--", "trace", "version"]);
    assert_eq!(run.code, 0);
    let doc = run.json();
    let names: Vec<&str> = doc["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["trace", "version"]);
    assert_eq!(doc["catalog"], 1);
    assert!(doc["paths"].is_object());
}

#[test]
fn describe_with_an_unknown_name_is_an_error() {
    let ws = Workspace::new();
    let run = ws.run(&[
        "describe",
        "--format=json",
        "--",
        "version",
        "no-such-command",
    ]);
    assert_eq!(run.error_code(), "unknown_command");
}

#[test]
fn describe_in_text_lists_every_command() {
    let ws = Workspace::new();
    let run = ws.run(&["describe"]);
    assert_eq!(run.code, 0);
    assert_eq!(run.stdout.lines().count(), common::INVOCATIONS.len());
    assert!(run
        .stdout
        .lines()
        .any(|l| l.starts_with("campaign-check ") && l.ends_with("[read_only]")));
}

#[test]
fn the_catalog_is_the_same_on_every_run() {
    let ws = Workspace::new();
    let a = ws.run(&["describe", "--format=json"]);
    let b = ws.run(&["describe", "--format=json"]);
    assert_eq!(a.stdout, b.stdout);
}
