//! macOS: the run is started by `/usr/bin/sandbox-exec` with a profile made
//! of the static deny-by-default base in `sandbox/reachweaver.sb` and one
//! generated rule per granted path. The generated rules refer to `-D`
//! parameters only, so no path the owner chose is ever spliced into profile
//! text (a path with a quote or parenthesis can't change the profile).
//!
//! This module is pure and compiled everywhere, so its golden tests run in
//! every CI job; only `spawn` (the thin part that starts processes) is
//! macOS-only.

#[cfg(target_os = "macos")]
pub mod spawn;

use std::path::{Path, PathBuf};

use super::policy::Policy;

/// The static base profile.
pub const BASE_PROFILE: &str = include_str!("../../sandbox/reachweaver.sb");

/// sandbox-exec, by absolute path so `PATH` can't substitute another.
pub const SANDBOX_EXEC: &str = "/usr/bin/sandbox-exec";

/// macOS spells several system folders through `/private`; the sandbox
/// matches the resolved spelling only.
pub fn canonical(path: &Path) -> PathBuf {
    for short in ["/tmp", "/var", "/etc"] {
        if let Ok(rest) = path.strip_prefix(short) {
            return Path::new("/private")
                .join(short.trim_start_matches('/'))
                .join(rest);
        }
    }
    path.to_path_buf()
}

/// The full profile text and the `-D` parameters for one policy. Pure.
pub fn build_profile(policy: &Policy) -> (String, Vec<(String, PathBuf)>) {
    let mut text = String::from(BASE_PROFILE);
    let mut params: Vec<(String, PathBuf)> = Vec::new();
    let mut add = |prefix: &str, paths: &[PathBuf], rule: &str, text: &mut String| {
        if paths.is_empty() {
            return;
        }
        text.push_str(rule);
        text.push('\n');
        for (i, p) in paths.iter().enumerate() {
            let name = format!("{prefix}_{i}");
            text.push_str(&format!("  (subpath (param \"{name}\"))\n"));
            params.push((name, canonical(p)));
        }
        text.push_str(")\n");
    };
    text.push_str("\n;; Generated: owner paths, each a -D parameter.\n");
    add(
        "EXEC",
        &policy.read_exec,
        "(allow file-read* file-map-executable process-exec",
        &mut text,
    );
    let read: Vec<PathBuf> = policy
        .read
        .iter()
        .filter(|p| !p.starts_with("/dev"))
        .cloned()
        .collect();
    add("READ", &read, "(allow file-read*", &mut text);
    let write: Vec<PathBuf> = policy
        .read_write
        .iter()
        .filter(|p| !p.starts_with("/dev"))
        .cloned()
        .collect();
    add("WRITE", &write, "(allow file-read* file-write*", &mut text);
    (text, params)
}

/// The argv that starts the policy's program under sandbox-exec. Pure.
pub fn build_argv(policy: &Policy) -> Vec<String> {
    let (profile, params) = build_profile(policy);
    let mut argv = vec![SANDBOX_EXEC.to_string(), "-p".to_string(), profile];
    for (name, path) in params {
        argv.push("-D".to_string());
        argv.push(format!("{name}={}", path.display()));
    }
    argv.push("--".to_string());
    argv.push(policy.program.display().to_string());
    argv.extend(policy.argv.iter().skip(1).cloned());
    argv
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::policy::{build, BuildInput, Layers};
    use crate::sandbox::{RunKind, SandboxOptions};

    fn policy(kind: RunKind) -> Policy {
        let opts = SandboxOptions {
            backend: PathBuf::from("/opt/homebrew/bin/reachweaver"),
            root: PathBuf::from("/Users/ann/campaigns"),
            read: vec![
                PathBuf::from("/Users/ann/.reachweaver"),
                PathBuf::from("/Users/ann/.reachweaver/accounts.yaml"),
            ],
            db: Some(PathBuf::from("/Users/ann/.reachweaver/db/reachweaver.db")),
            ..SandboxOptions::default()
        };
        let runtime = vec![PathBuf::from("/opt/homebrew"), PathBuf::from("/usr")];
        let argv = vec![
            "/opt/homebrew/bin/reachweaver".to_string(),
            "--home=/Users/ann/.reachweaver".to_string(),
            "doctor".to_string(),
            "--format=json".to_string(),
        ];
        build(&BuildInput {
            opts: &opts,
            kind,
            runtime: &runtime,
            env: &[],
            layers: Layers::default(),
            tmpdir: Path::new("/tmp/reachweaver-run-1"),
            argv: &argv,
            cwd: Path::new("/Users/ann/campaigns"),
            parent_pid: 1,
        })
    }

    fn golden(name: &str, got: &str) {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("src/sandbox/macos/golden")
            .join(name);
        if std::env::var_os("REACHWEAVER_UPDATE_GOLDEN").is_some() {
            std::fs::write(&path, got).unwrap();
        }
        let want = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e} (set REACHWEAVER_UPDATE_GOLDEN=1 to create)",
                path.display()
            )
        });
        assert_eq!(
            got, want,
            "golden {name} differs (REACHWEAVER_UPDATE_GOLDEN=1 refreshes)"
        );
    }

    fn render(argv: &[String]) -> String {
        // One element per line; the profile's own newlines are kept so the
        // golden file reads like the profile.
        argv.iter().map(|a| format!("{a}\n")).collect()
    }

    #[test]
    fn read_only_argv_matches_golden() {
        golden(
            "read_only.argv",
            &render(&build_argv(&policy(RunKind::ReadOnly))),
        );
    }

    #[test]
    fn draft_argv_matches_golden() {
        golden("draft.argv", &render(&build_argv(&policy(RunKind::Draft))));
    }

    #[test]
    fn profile_is_deny_by_default_without_network_and_without_owner_paths() {
        let (text, params) = build_profile(&policy(RunKind::Draft));
        assert!(text.contains("(deny default)"));
        assert!(
            !text.contains("(allow network"),
            "the profile must not allow the network"
        );
        assert!(!text.contains("(allow default"));
        let generated = &text[BASE_PROFILE.len()..];
        assert!(
            !generated.contains("\"/"),
            "owner paths must be parameters, not text: {generated}"
        );
        assert!(!text.contains("reachweaver-run"));
        assert!(params
            .iter()
            .all(|(n, _)| text.contains(&format!("(param \"{n}\")"))));
    }

    #[test]
    fn writes_are_only_the_temp_folder_and_for_drafts_the_database_folder() {
        let (_, params) = build_profile(&policy(RunKind::ReadOnly));
        let writes: Vec<_> = params
            .iter()
            .filter(|(n, _)| n.starts_with("WRITE"))
            .collect();
        assert_eq!(writes.len(), 1);
        assert_eq!(writes[0].1, PathBuf::from("/private/tmp/reachweaver-run-1"));
        let (_, params) = build_profile(&policy(RunKind::Draft));
        let writes: Vec<_> = params
            .iter()
            .filter(|(n, _)| n.starts_with("WRITE"))
            .map(|(_, p)| p.clone())
            .collect();
        assert_eq!(
            writes,
            vec![
                PathBuf::from("/private/tmp/reachweaver-run-1"),
                PathBuf::from("/Users/ann/.reachweaver/db")
            ]
        );
    }

    #[test]
    fn argv_starts_sandbox_exec_by_absolute_path_and_ends_with_the_program() {
        let argv = build_argv(&policy(RunKind::ReadOnly));
        assert_eq!(argv[0], "/usr/bin/sandbox-exec");
        assert_eq!(argv[1], "-p");
        let dash = argv.iter().position(|a| a == "--").unwrap();
        assert_eq!(
            &argv[dash + 1..],
            &[
                "/opt/homebrew/bin/reachweaver",
                "--home=/Users/ann/.reachweaver",
                "doctor",
                "--format=json"
            ]
        );
        for pair in argv[3..dash].chunks(2) {
            assert_eq!(pair[0], "-D");
            assert!(pair[1].contains('='));
        }
    }

    #[test]
    fn paths_are_canonical_private_spellings() {
        assert_eq!(
            canonical(Path::new("/tmp/x")),
            PathBuf::from("/private/tmp/x")
        );
        assert_eq!(
            canonical(Path::new("/var/folders/ab")),
            PathBuf::from("/private/var/folders/ab")
        );
        assert_eq!(canonical(Path::new("/etc")), PathBuf::from("/private/etc"));
        assert_eq!(canonical(Path::new("/tmpfoo")), PathBuf::from("/tmpfoo"));
        assert_eq!(canonical(Path::new("/Users/a")), PathBuf::from("/Users/a"));
    }

    #[test]
    fn a_hostile_path_stays_a_parameter() {
        let mut p = policy(RunKind::ReadOnly);
        p.read
            .push(PathBuf::from("/Users/ann/x\") (allow network*) (\""));
        let (text, params) = build_profile(&p);
        assert!(!text.contains("allow network"));
        assert!(params
            .iter()
            .any(|(_, v)| v.to_string_lossy().contains("allow network")));
    }
}
