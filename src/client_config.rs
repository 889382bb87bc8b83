//! `mcp-serve --print-config claude-desktop`: the `mcpServers` entry a
//! desktop client needs, with every path made absolute, so an owner can
//! paste it without editing.

use anyhow::{Context, Result};
use serde_json::{json, Value};

use crate::cli::{Globals, SandboxMode, ServeArgs};
use crate::config::{Owner, OwnerInput};

/// Where Claude Desktop keeps its configuration, on the platforms this
/// server runs on (Windows is not one: the server does not build there).
pub(crate) const CONFIG_LOCATIONS: [(&str, &str); 2] = [
    (
        "macOS",
        "~/Library/Application Support/Claude/claude_desktop_config.json",
    ),
    ("Linux", "~/.config/Claude/claude_desktop_config.json"),
];

/// The server's argv for a desktop client, equivalent to this invocation:
/// every path resolved by the same code, with the same checks, as the
/// server itself uses, so the entry names the backend the server would run.
pub(crate) fn server_args(globals: &Globals, serve: &ServeArgs) -> Result<Vec<String>> {
    let owner = Owner::resolve(&OwnerInput {
        globals,
        backend_option: "--backend",
        root: serve.start.root.as_deref(),
        allow_read: &serve.start.allow_read,
    })?;
    server_args_for(&owner, serve)
}

fn server_args_for(owner: &Owner, serve: &ServeArgs) -> Result<Vec<String>> {
    let mut args = vec![format!("--backend={}", owner.backend.display())];
    for (flag, value) in [
        ("--home", &owner.home),
        ("--db", &owner.db),
        ("--accounts", &owner.accounts),
        ("--profile", &owner.profile),
    ] {
        if let Some(v) = value {
            args.push(format!("{flag}={}", v.path.display()));
        }
    }
    args.push("mcp-serve".into());
    let start = &serve.start;
    if start.allow_drafts {
        // An entry the server would start without its draft tool is no
        // entry to paste: say so now, not in a log the client hides.
        if owner.db.is_none() {
            anyhow::bail!(
                "--allow-drafts needs the database named with --db: a draft writes only \
                 the database you name, never one the backend's catalog proposes"
            );
        }
        args.push("--allow-drafts".into());
    }
    if let Some(root) = &owner.root {
        args.push(format!("--root={}", root.display()));
    }
    let defaults = ServeArgs::default_values();
    if serve.limits.max_output_bytes != defaults.limits.max_output_bytes {
        args.push(format!(
            "--max-output-bytes={}",
            serve.limits.max_output_bytes
        ));
    }
    if serve.max_calls_per_minute != defaults.max_calls_per_minute {
        args.push(format!(
            "--max-calls-per-minute={}",
            serve.max_calls_per_minute
        ));
    }
    if serve.limits.call_timeout != defaults.limits.call_timeout {
        args.push(format!("--call-timeout={}", serve.limits.call_timeout));
    }
    if let Some(n) = serve.max_concurrent_calls {
        args.push(format!("--max-concurrent-calls={n}"));
    }
    if start.sandbox == SandboxMode::BestEffort {
        args.push("--sandbox=best-effort".into());
    }
    for p in &owner.allow_read {
        args.push(format!("--allow-read={}", p.display()));
    }
    for pattern in &start.protect {
        args.push(format!("--protect={pattern}"));
    }
    for name in &start.pass_env {
        args.push(format!("--pass-env={name}"));
    }
    args.extend(audit_args(&serve.audit)?);
    args.extend(pin_args(&serve.pins)?);
    Ok(args)
}

/// The audit options, their files made absolute (the log need not exist yet).
fn audit_args(audit: &crate::cli::AuditArgs) -> Result<Vec<String>> {
    let mut args = Vec::new();
    for (flag, path) in [
        ("--audit-log", &audit.audit_log),
        ("--audit-key", &audit.audit_key),
    ] {
        if let Some(p) = path {
            let abs = std::path::absolute(p).with_context(|| format!("{flag} {}", p.display()))?;
            args.push(format!("{flag}={}", abs.display()));
        }
    }
    if audit.audit_sync {
        args.push("--audit-sync".into());
    }
    if audit.audit_required {
        args.push("--audit-required".into());
    }
    Ok(args)
}

/// The pin options, the file made absolute (it need not exist yet).
fn pin_args(pins: &crate::cli::PinArgs) -> Result<Vec<String>> {
    let mut args = Vec::new();
    if let Some(p) = &pins.pin {
        let abs = std::path::absolute(p).with_context(|| format!("--pin {}", p.display()))?;
        args.push(format!("--pin={}", abs.display()));
        if pins.pin_mode == crate::pins::PinMode::Warn {
            args.push("--pin-mode=warn".into());
        }
    }
    Ok(args)
}

/// The JSON to paste into the client's configuration file.
pub(crate) fn claude_desktop(globals: &Globals, serve: &ServeArgs) -> Result<Value> {
    let exe = std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .context("cannot find this program's own path")?;
    Ok(json!({
        "mcpServers": {
            "reachweaver": {
                "command": exe.display().to_string(),
                "args": server_args(globals, serve)?,
            }
        }
    }))
}

/// Print the entry on stdout (pure JSON) and where it goes on stderr.
pub(crate) fn print(globals: &Globals, serve: &ServeArgs) -> Result<u8> {
    let entry = claude_desktop(globals, serve)?;
    // A reader that closed the pipe early ends the program quietly (`main`).
    crate::output::print_stdout(&(serde_json::to_string_pretty(&entry)? + "\n"))?;
    eprintln!("Merge the \"mcpServers\" entry above into Claude Desktop's configuration file:");
    for (os, path) in CONFIG_LOCATIONS {
        eprintln!("  {os:<8} {path}");
    }
    eprintln!("then restart Claude Desktop.");
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::path::PathBuf;

    #[test]
    fn args_are_absolute_and_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let backend = dir.path().join("rw");
        std::fs::write(&backend, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&backend, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::create_dir(dir.path().join("lib")).unwrap();
        std::fs::create_dir(dir.path().join("data")).unwrap();
        let mut globals = Globals {
            backend: Some(backend.clone()),
            home: Some(dir.path().to_path_buf()),
            ..Globals::default()
        };
        let mut serve = ServeArgs::default_values();
        serve.start.allow_drafts = true;
        let e = server_args(&globals, &serve).unwrap_err().to_string();
        assert!(
            e.contains("--allow-drafts needs the database named with --db"),
            "{e}"
        );
        globals.db = Some(dir.path().join("data/rw.db"));
        serve.start.allow_read = vec![dir.path().join("lib")];
        serve.start.pass_env = vec!["LANG".into()];
        serve.start.protect = vec!["*.sqlite".into()];
        let args = server_args(&globals, &serve).unwrap();
        let canon = std::fs::canonicalize(dir.path()).unwrap();
        assert_eq!(
            args,
            vec![
                format!("--backend={}", canon.join("rw").display()),
                format!("--home={}", canon.display()),
                format!("--db={}", canon.join("data/rw.db").display()),
                "mcp-serve".to_string(),
                "--allow-drafts".to_string(),
                format!("--allow-read={}", canon.join("lib").display()),
                "--protect=*.sqlite".to_string(),
                "--pass-env=LANG".to_string(),
            ]
        );
    }

    #[test]
    fn pin_options_are_offered_with_an_absolute_path() {
        let mut serve = ServeArgs::default_values();
        assert!(pin_args(&serve.pins).unwrap().is_empty());
        serve.pins.pin = Some(PathBuf::from("rw/pins.json"));
        let cwd = std::env::current_dir().unwrap();
        let pinned = format!("--pin={}", cwd.join("rw/pins.json").display());
        assert_eq!(
            pin_args(&serve.pins).unwrap(),
            std::slice::from_ref(&pinned)
        );
        serve.pins.pin_mode = crate::pins::PinMode::Warn;
        assert_eq!(
            pin_args(&serve.pins).unwrap(),
            [pinned, "--pin-mode=warn".to_string()]
        );
    }

    #[test]
    fn audit_options_are_offered_with_absolute_paths() {
        let mut serve = ServeArgs::default_values();
        assert!(audit_args(&serve.audit).unwrap().is_empty());
        serve.audit.audit_log = Some(PathBuf::from("/var/log/rw/audit.log"));
        serve.audit.audit_key = Some(PathBuf::from("k/audit.key"));
        serve.audit.audit_sync = true;
        serve.audit.audit_required = true;
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(
            audit_args(&serve.audit).unwrap(),
            vec![
                "--audit-log=/var/log/rw/audit.log".to_string(),
                format!("--audit-key={}", cwd.join("k/audit.key").display()),
                "--audit-sync".to_string(),
                "--audit-required".to_string(),
            ]
        );
    }

    #[test]
    fn missing_backend_is_a_clear_error() {
        let globals = Globals {
            backend: Some(PathBuf::from("/nonexistent/rw")),
            ..Globals::default()
        };
        let err = server_args(&globals, &ServeArgs::default_values()).unwrap_err();
        assert_eq!(err.to_string(), "--backend /nonexistent/rw: no such file");
    }
}
