//! `sandbox apparmor-profile`: the real binary prints the profile for its
//! own canonical path (or for `--exe PATH`), exactly as the golden file
//! shows it, and refuses paths AppArmor would read as a pattern.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use crate::support::repo_root;
use crate::support::sandbox::{output_within, text, Who, World};

/// The path the golden profile was printed for.
const GOLDEN_PATH: &str = "/usr/local/bin/reachweaver-mcp";

fn apparmor_profile(w: &World, who: Who, program: Option<&Path>, args: &[&str]) -> Output {
    let mut cmd = w.cmd(who, w.path());
    if let Some(p) = program {
        // Started through another name for the same file.
        cmd = std::process::Command::new(p);
        cmd.current_dir(w.path());
    }
    cmd.args(["sandbox", "apparmor-profile"]).args(args);
    output_within(cmd, Duration::from_secs(30))
}

/// The golden profile, printed for `path` (already escaped for AppArmor).
fn golden_for(quoted_path: &str) -> String {
    golden_file_for("apparmor-profile", quoted_path)
}

fn golden_file_for(name: &str, quoted_path: &str) -> String {
    let golden =
        std::fs::read_to_string(repo_root().join("src/sandbox/linux/golden").join(name)).unwrap();
    let from = format!("\"{GOLDEN_PATH}\"");
    assert_eq!(golden.matches(&from).count(), 1, "{golden}");
    golden.replace(&from, &format!("\"{quoted_path}\""))
}

fn canonical(p: &Path) -> String {
    std::fs::canonicalize(p)
        .unwrap()
        .to_str()
        .expect("a UTF-8 temp path")
        .to_string()
}

fn assert_refused(out: &Output, wants: &str) {
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
    let err = text(&out.stderr);
    assert!(err.contains(wants), "{err}");
}

#[test]
fn prints_the_profile_for_its_own_canonical_path() {
    let w = World::new();
    let out = apparmor_profile(&w, Who::Me, None, &["--abi", "4.0"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(out.stderr.is_empty(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), golden_for(&canonical(&w.exe)));
}

#[test]
fn started_through_a_link_it_names_the_file_itself() {
    let w = World::new();
    let link = w.path().join("linked-name");
    std::os::unix::fs::symlink(&w.exe, &link).unwrap();
    let out = apparmor_profile(&w, Who::Me, Some(&link), &["--abi", "4.0"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let printed = text(&out.stdout);
    assert_eq!(printed, golden_for(&canonical(&w.exe)));
    assert!(!printed.contains("linked-name"), "{printed}");
}

#[test]
fn an_unprivileged_user_gets_the_same_profile() {
    let w = World::new();
    let out = apparmor_profile(&w, Who::Unprivileged, None, &["--abi", "4.0"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), golden_for(&canonical(&w.exe)));
}

#[test]
fn exe_names_another_binary_by_its_canonical_path_quoted_and_escaped() {
    let w = World::new();
    let dir = w.folder("my tools/a\"b\\c");
    let exe = dir.join("reachweaver-mcp");
    std::fs::write(&exe, b"").unwrap();
    let link: PathBuf = w.path().join("packaged");
    std::os::unix::fs::symlink(&exe, &link).unwrap();
    let out = apparmor_profile(
        &w,
        Who::Me,
        None,
        &["--exe", link.to_str().unwrap(), "--abi", "4.0"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let want = canonical(&exe).replace('\\', "\\\\").replace('"', "\\\"");
    assert!(want.contains("my tools/a\\\"b\\\\c/"), "{want}");
    assert_eq!(text(&out.stdout), golden_for(&want));
}

#[test]
fn exe_with_a_pattern_character_is_refused_by_name() {
    let w = World::new();
    for (n, ch) in ['*', '?', '[', ']', '{', '}', '^'].into_iter().enumerate() {
        let dir = w.folder(&format!("{n}a{ch}b"));
        let exe = dir.join("reachweaver-mcp");
        std::fs::write(&exe, b"").unwrap();
        let out = apparmor_profile(&w, Who::Me, None, &["--exe", exe.to_str().unwrap()]);
        assert_refused(
            &out,
            &format!("contains '{ch}', which AppArmor reads as a pattern"),
        );
    }
}

#[test]
fn exe_that_is_missing_or_a_folder_is_refused() {
    let w = World::new();
    let missing = w.path().join("no-such-binary");
    let out = apparmor_profile(&w, Who::Me, None, &["--exe", missing.to_str().unwrap()]);
    assert_refused(&out, &format!("--exe {}: ", missing.display()));
    let folder = w.folder("a-folder");
    let out = apparmor_profile(&w, Who::Me, None, &["--exe", folder.to_str().unwrap()]);
    assert_refused(&out, "is not a file");
}

/// The installed parser's major version, asked as an owner would.
fn parser_major() -> Option<u32> {
    let path = std::env::var("PATH").unwrap_or_default();
    let parser = path
        .split(':')
        .chain(["/usr/sbin", "/sbin"])
        .map(|d| Path::new(d).join("apparmor_parser"))
        .find(|p| p.is_file())?;
    let out = std::process::Command::new(parser)
        .arg("--version")
        .output()
        .unwrap();
    let first = String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .unwrap_or("")
        .to_string();
    let v = first.strip_prefix("AppArmor parser version ").unwrap();
    Some(v.split('.').next().unwrap().parse().unwrap())
}

#[test]
fn without_abi_it_writes_the_installed_parsers_abi_and_says_why() {
    let w = World::new();
    let out = apparmor_profile(&w, Who::Me, None, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let userns_create =
        Path::new("/sys/kernel/security/apparmor/features/namespaces/userns_create").exists();
    let four = match parser_major() {
        Some(m) => m >= 4,
        None => userns_create,
    };
    let (golden, why) = if four {
        ("apparmor-profile", "abi 4.0 with the userns rule: ")
    } else {
        ("apparmor-profile-abi3", "abi 3.0 without the userns rule: ")
    };
    assert_eq!(
        text(&out.stdout),
        golden_file_for(golden, &canonical(&w.exe))
    );
    let err = text(&out.stderr);
    assert!(err.starts_with(why), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn abi_3_0_is_written_without_the_userns_rule() {
    let w = World::new();
    let out = apparmor_profile(&w, Who::Me, None, &["--abi", "3.0"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(out.stderr.is_empty(), "{}", text(&out.stderr));
    let printed = text(&out.stdout);
    assert_eq!(
        printed,
        golden_file_for("apparmor-profile-abi3", &canonical(&w.exe))
    );
    assert!(printed.contains("\nabi <abi/3.0>,\n"), "{printed}");
    assert!(!printed.contains("userns,"), "{printed}");
}

#[test]
fn an_abi_it_does_not_know_is_refused() {
    let w = World::new();
    for bad in ["4.1", "3", "abi/4.0"] {
        let out = apparmor_profile(&w, Who::Me, None, &["--abi", bad]);
        assert_eq!(out.status.code(), Some(2), "{bad}: {}", text(&out.stderr));
        assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
        assert!(text(&out.stderr).contains(bad), "{}", text(&out.stderr));
    }
}
