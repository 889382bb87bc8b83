//! `mcp-serve --print-config claude-desktop`: the `mcpServers` entry a
//! desktop client needs, with every path made absolute, so an owner can
//! paste it without editing.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};

use crate::cli::{Globals, SandboxMode, ServeArgs};

/// Where Claude Desktop keeps its configuration, per platform.
pub const CONFIG_LOCATIONS: [(&str, &str); 3] = [
    (
        "macOS",
        "~/Library/Application Support/Claude/claude_desktop_config.json",
    ),
    ("Windows", "%APPDATA%\\Claude\\claude_desktop_config.json"),
    ("Linux", "~/.config/Claude/claude_desktop_config.json"),
];

fn absolute(p: &Path) -> Result<PathBuf> {
    let abs = if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir()?.join(p)
    };
    // Existing paths are canonicalized; a database that does not exist yet stays as given.
    Ok(std::fs::canonicalize(&abs).unwrap_or(abs))
}

/// The backend as an absolute path: the given one, or `reachweaver` on PATH.
fn backend_path(given: Option<&Path>) -> Result<PathBuf> {
    if let Some(p) = given {
        if p.components().count() == 1 && !p.exists() {
            return find_on_path(p.as_os_str().to_string_lossy().as_ref());
        }
        return std::fs::canonicalize(p)
            .with_context(|| format!("backend {} not found", p.display()));
    }
    find_on_path("reachweaver")
}

fn find_on_path(name: &str) -> Result<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        let cand = dir.join(name);
        if cand.is_file() {
            return Ok(std::fs::canonicalize(&cand)?);
        }
    }
    bail!("`{name}` is not on PATH; give the backend with --backend /absolute/path")
}

/// The server's argv for a desktop client, equivalent to this invocation.
pub fn server_args(globals: &Globals, serve: &ServeArgs) -> Result<Vec<String>> {
    let mut args = vec![format!(
        "--backend={}",
        backend_path(globals.backend.as_deref())?.display()
    )];
    for (flag, value) in [
        ("--home", &globals.home),
        ("--db", &globals.db),
        ("--accounts", &globals.accounts),
        ("--profile", &globals.profile),
    ] {
        if let Some(v) = value {
            args.push(format!("{flag}={}", absolute(v)?.display()));
        }
    }
    args.push("mcp-serve".into());
    if serve.allow_drafts {
        args.push("--allow-drafts".into());
    }
    if let Some(root) = &serve.root {
        args.push(format!("--root={}", absolute(root)?.display()));
    }
    let defaults = ServeArgs::default_values();
    if serve.max_output_bytes != defaults.max_output_bytes {
        args.push(format!("--max-output-bytes={}", serve.max_output_bytes));
    }
    if serve.max_calls_per_minute != defaults.max_calls_per_minute {
        args.push(format!(
            "--max-calls-per-minute={}",
            serve.max_calls_per_minute
        ));
    }
    if serve.call_timeout != defaults.call_timeout {
        args.push(format!("--call-timeout={}", serve.call_timeout));
    }
    if let Some(n) = serve.max_concurrent_calls {
        args.push(format!("--max-concurrent-calls={n}"));
    }
    if serve.sandbox == SandboxMode::BestEffort {
        args.push("--sandbox=best-effort".into());
    }
    for p in &serve.allow_read {
        args.push(format!("--allow-read={}", absolute(p)?.display()));
    }
    for name in &serve.pass_env {
        args.push(format!("--pass-env={name}"));
    }
    Ok(args)
}

/// The JSON to paste into the client's configuration file.
pub fn claude_desktop(globals: &Globals, serve: &ServeArgs) -> Result<Value> {
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
pub fn print(globals: &Globals, serve: &ServeArgs) -> Result<u8> {
    let entry = claude_desktop(globals, serve)?;
    println!("{}", serde_json::to_string_pretty(&entry)?);
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

    #[test]
    fn args_are_absolute_and_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let backend = dir.path().join("rw");
        std::fs::write(&backend, "#!/bin/sh\n").unwrap();
        let globals = Globals {
            backend: Some(backend.clone()),
            home: Some(dir.path().to_path_buf()),
            ..Globals::default()
        };
        let serve = ServeArgs {
            allow_drafts: true,
            allow_read: vec![dir.path().to_path_buf()],
            pass_env: vec!["LANG".into()],
            ..ServeArgs::default_values()
        };
        let args = server_args(&globals, &serve).unwrap();
        let canon = std::fs::canonicalize(dir.path()).unwrap();
        assert_eq!(
            args,
            vec![
                format!("--backend={}", canon.join("rw").display()),
                format!("--home={}", canon.display()),
                "mcp-serve".to_string(),
                "--allow-drafts".to_string(),
                format!("--allow-read={}", canon.display()),
                "--pass-env=LANG".to_string(),
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
        assert!(err.to_string().contains("not found"), "{err}");
    }
}
