//! Golden files for the four kinds of backend, each described as the data
//! discovery finds on a Mac (so they are made and checked on any system),
//! and discovery itself on a fake layout of symlinks.

use std::path::Path;

use super::discover::too_wide;
use super::*;
use crate::sandbox::policy::Policy;
use crate::sandbox::policy::{build, BuildInput, Layers};
use crate::sandbox::{RunKind, SandboxOptions};

fn p(s: &str) -> PathBuf {
    PathBuf::from(s)
}

fn ps(v: &[&str]) -> Vec<PathBuf> {
    v.iter().map(|s| p(s)).collect()
}

const HOME: &str = "/Users/ann";
const DB: &str = "/Users/ann/.reachweaver/db/reachweaver.db";
/// A fixed token, so the golden files stay the same from run to run.
const TAG: RunTag = RunTag(0x0123_4567_89ab_cdef);

fn policy_for(backend: &str, kind: RunKind) -> Policy {
    let opts = SandboxOptions {
        backend: p(backend),
        root: p("/Users/ann/campaigns"),
        read: ps(&[
            "/Users/ann/.reachweaver",
            "/Users/ann/.reachweaver/accounts.yaml",
        ]),
        db: Some(p(DB)),
        ..SandboxOptions::default()
    };
    let argv = vec![
        backend.to_string(),
        "--home=/Users/ann/.reachweaver".to_string(),
        "doctor".to_string(),
        "--format=json".to_string(),
    ];
    build(&BuildInput {
        opts: &opts,
        kind,
        // As spawn does: the chain carries the runtime, `--allow-read` the rest.
        runtime: &[],
        env: &[],
        layers: Layers::default(),
        tmpdir: Path::new(
            "/var/folders/xy/abc/T/reachweaver-run-0011223344556677-8899aabbccddeeff",
        ),
        argv: &argv,
        cwd: Path::new("/Users/ann/campaigns"),
        parent_pid: 1,
    })
}

/// A python.org installer's framework Python, the backend pip-installed
/// into it (its `#!` names `bin/python3`, a link to `python3.12`).
fn framework_python() -> (&'static str, ExecChain) {
    let v = "/Library/Frameworks/Python.framework/Versions/3.12";
    (
        "/Library/Frameworks/Python.framework/Versions/3.12/bin/reachweaver",
        ExecChain {
            exec_trees: ps(&[v]),
            exec_files: ps(&[
                "/Library/Frameworks/Python.framework/Versions/3.12/bin/reachweaver",
                "/Library/Frameworks/Python.framework/Versions/3.12/bin/python3.12",
            ]),
            hops: ps(&["/Library/Frameworks/Python.framework/Versions/3.12/bin/python3"]),
            lib_trees: vec![],
            launcher: vec![],
        },
    )
}

/// A venv in the home made from Homebrew's python@3.12 on Apple silicon.
fn homebrew_venv() -> (&'static str, ExecChain) {
    let fw = "/opt/homebrew/Cellar/python@3.12/3.12.7_1/Frameworks/Python.framework/Versions/3.12";
    (
        "/Users/ann/.venvs/rw/bin/reachweaver",
        ExecChain {
            exec_trees: vec![p("/Users/ann/.venvs/rw"), p(fw)],
            exec_files: vec![
                p("/Users/ann/.venvs/rw/bin/reachweaver"),
                p(&format!("{fw}/bin/python3.12")),
            ],
            hops: ps(&[
                "/Users/ann/.venvs/rw/bin/python3",
                "/Users/ann/.venvs/rw/bin/python",
                "/opt/homebrew/opt/python@3.12",
                "/opt/homebrew/Cellar/python@3.12/3.12.7_1/bin/python3.12",
                &format!("{fw}/lib/python3.12/site-packages"),
                "/opt/homebrew/opt/openssl@3",
                "/opt/homebrew/opt/sqlite",
                "/opt/homebrew/opt/xz",
                "/opt/homebrew/opt/mpdecimal",
            ]),
            lib_trees: ps(&[
                "/opt/homebrew/lib/python3.12/site-packages",
                "/opt/homebrew/Cellar/openssl@3/3.4.0/lib",
                "/opt/homebrew/Cellar/sqlite/3.47.0/lib",
                "/opt/homebrew/Cellar/xz/5.6.3/lib",
                "/opt/homebrew/Cellar/mpdecimal/4.0.0/lib",
            ]),
            launcher: vec![],
        },
    )
}

/// Homebrew's python@3.12 on Apple silicon with no venv: a script whose
/// `#!` is `/opt/homebrew/bin/python3`. The chain never crosses
/// `opt/python@3.12`, but Homebrew's install names load the framework
/// library through it, so discovery adds that link too.
fn homebrew_python() -> (&'static str, ExecChain) {
    let keg = "/opt/homebrew/Cellar/python@3.12/3.12.7_1";
    let fw = "/opt/homebrew/Cellar/python@3.12/3.12.7_1/Frameworks/Python.framework/Versions/3.12";
    (
        "/Users/ann/tools/reachweaver",
        ExecChain {
            exec_trees: vec![p(fw)],
            exec_files: vec![
                p("/Users/ann/tools/reachweaver"),
                p(&format!("{fw}/bin/python3.12")),
            ],
            hops: vec![
                p("/opt/homebrew/bin/python3"),
                p(&format!("{keg}/bin/python3")),
                p(&format!("{fw}/bin/python3")),
                p(&format!("{fw}/lib/python3.12/site-packages")),
                p("/opt/homebrew/opt/python@3.12"),
                p("/opt/homebrew/opt/openssl@3"),
                p("/opt/homebrew/opt/sqlite"),
                p("/opt/homebrew/opt/xz"),
                p("/opt/homebrew/opt/mpdecimal"),
            ],
            lib_trees: ps(&[
                "/opt/homebrew/lib/python3.12/site-packages",
                "/opt/homebrew/Cellar/openssl@3/3.4.0/lib",
                "/opt/homebrew/Cellar/sqlite/3.47.0/lib",
                "/opt/homebrew/Cellar/xz/5.6.3/lib",
                "/opt/homebrew/Cellar/mpdecimal/4.0.0/lib",
            ]),
            launcher: vec![],
        },
    )
}

/// `uv tool install`: the tool's venv under ~/.local/share/uv/tools, its
/// python linking to a uv-managed CPython under ~/.local/share/uv/python
/// through uv's versionless folder link (`cpython-3.12-…` →
/// `cpython-3.12.7-…`), the hop a public report found denied when only the
/// resolved installation was granted.
fn uv_python() -> (&'static str, ExecChain) {
    let tool = "/Users/ann/.local/share/uv/tools/reachweaver";
    let py = "/Users/ann/.local/share/uv/python/cpython-3.12.7-macos-aarch64-none";
    (
        "/Users/ann/.local/share/uv/tools/reachweaver/bin/reachweaver",
        ExecChain {
            exec_trees: vec![p(tool), p(py)],
            exec_files: vec![
                p(&format!("{tool}/bin/reachweaver")),
                p(&format!("{py}/bin/python3.12")),
            ],
            hops: vec![
                p(&format!("{tool}/bin/python3")),
                p(&format!("{tool}/bin/python")),
                p("/Users/ann/.local/share/uv/python/cpython-3.12-macos-aarch64-none"),
            ],
            lib_trees: vec![],
            launcher: vec![],
        },
    )
}

/// A compiled backend installed with `cargo install`: only the executable
/// is granted, never `~/.cargo` (whose credentials.toml sits beside `bin`).
fn compiled_in_cargo_home() -> (&'static str, ExecChain) {
    (
        "/Users/ann/.cargo/bin/reachweaver-reference",
        ExecChain {
            exec_files: ps(&["/Users/ann/.cargo/bin/reachweaver-reference"]),
            ..ExecChain::default()
        },
    )
}

/// A script with `#!/usr/bin/env python3`, resolved at start on `PATH`.
fn env_script() -> (&'static str, ExecChain) {
    let (_, mut chain) = homebrew_venv();
    chain.exec_files[0] = p("/Users/ann/bin-rw/reachweaver");
    chain.launcher = vec!["/Users/ann/.venvs/rw/bin/python3".into(), "-I".into()];
    ("/Users/ann/bin-rw/reachweaver", chain)
}

fn run(backend: &str, chain: &ExecChain, kind: RunKind) -> Vec<String> {
    let policy = policy_for(backend, kind);
    build_argv(&RunProfile {
        policy: &policy,
        chain,
        backend: Path::new(backend),
        db: Some(Path::new(DB)),
        draft: kind == RunKind::Draft,
        tag: TAG,
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
fn framework_python_matches_golden() {
    let (b, c) = framework_python();
    golden(
        "framework_python.argv",
        &render(&run(b, &c, RunKind::ReadOnly)),
    );
}

#[test]
fn homebrew_venv_matches_golden() {
    let (b, c) = homebrew_venv();
    golden(
        "homebrew_venv.argv",
        &render(&run(b, &c, RunKind::ReadOnly)),
    );
}

#[test]
fn homebrew_venv_draft_matches_golden() {
    let (b, c) = homebrew_venv();
    golden(
        "homebrew_venv_draft.argv",
        &render(&run(b, &c, RunKind::Draft)),
    );
}

#[test]
fn homebrew_python_without_a_venv_matches_golden() {
    let (b, c) = homebrew_python();
    let argv = run(b, &c, RunKind::ReadOnly);
    golden("homebrew_python.argv", &render(&argv));
    assert!(values(&params_of(&argv), "HOP")
        .iter()
        .any(|h| h == "/opt/homebrew/opt/python@3.12"));
}

#[test]
fn uv_python_matches_golden() {
    let (b, c) = uv_python();
    golden("uv_python.argv", &render(&run(b, &c, RunKind::ReadOnly)));
}

#[test]
fn compiled_backend_matches_golden() {
    let (b, c) = compiled_in_cargo_home();
    golden(
        "compiled_cargo.argv",
        &render(&run(b, &c, RunKind::ReadOnly)),
    );
}

#[test]
fn env_script_runs_the_interpreter_found_at_start() {
    let (b, c) = env_script();
    let argv = run(b, &c, RunKind::ReadOnly);
    golden("env_script.argv", &render(&argv));
    let dash = argv.iter().position(|a| a == "--").unwrap();
    assert_eq!(
        &argv[dash + 1..dash + 4],
        &[
            "/Users/ann/.venvs/rw/bin/python3",
            "-I",
            "/Users/ann/bin-rw/reachweaver"
        ]
    );
}

fn params_of(argv: &[String]) -> Vec<(String, String)> {
    let dash = argv.iter().position(|a| a == "--").unwrap();
    argv[3..dash]
        .chunks(2)
        .map(|pair| {
            assert_eq!(pair[0], "-D");
            let (k, v) = pair[1].split_once('=').unwrap();
            (k.to_string(), v.to_string())
        })
        .collect()
}

fn values(params: &[(String, String)], prefix: &str) -> Vec<String> {
    params
        .iter()
        .filter(|(k, _)| k.strip_prefix(prefix).is_some_and(|r| r.starts_with('_')))
        .map(|(_, v)| v.clone())
        .collect()
}

#[test]
fn every_kind_is_deny_by_default_with_strict_network_and_services() {
    for (b, c) in [
        framework_python(),
        homebrew_venv(),
        homebrew_python(),
        uv_python(),
        compiled_in_cargo_home(),
        env_script(),
    ] {
        for kind in [RunKind::ReadOnly, RunKind::Draft] {
            let argv = run(b, &c, kind);
            let text = &argv[2];
            // The rules, without the comments that explain them.
            let rules: String = text
                .lines()
                .filter(|l| !l.trim_start().starts_with(";;"))
                .map(|l| format!("{l}\n"))
                .collect();
            let full = &argv[2];
            let text = &rules;
            // Every top-level denial carries the run's token into the log.
            assert!(text.contains(&format!("(deny default (with message \"{TAG}\"))")));
            assert!(!text.contains("(deny default)"));
            assert!(text.contains(&format!("(deny process-info* (with message \"{TAG}\"))")));
            assert!(!text.contains("(allow default"));
            assert!(!text.contains("(allow network"), "{b}");
            assert!(!text.contains("system-socket"));
            assert!(!text.contains("(import"), "never import system profiles");
            // The only service lookup.
            assert_eq!(text.matches("mach-lookup").count(), 1);
            assert!(text.contains("(global-name \"com.apple.system.opendirectoryd.libinfo\")"));
            // No unfiltered sysctl read, nothing about other processes' argv.
            assert!(!text.contains("(allow sysctl-read)"));
            assert!(!text.contains("kern.proc"));
            assert!(!text.contains("procargs"));
            // Explicit denials, first the ones (deny default) may not cover…
            let early = text.find("(deny process-info* (with").unwrap();
            assert!(text.contains("(if (defined? 'nvram*) (deny nvram*))"));
            // Guarded as Firefox does: a release without the name would
            // otherwise refuse the whole profile.
            assert!(
                text.contains("(if (defined? 'iokit-get-properties) (deny iokit-get-properties))")
            );
            assert!(!text.contains("(deny process-info* iokit-get-properties)"));
            assert!(early < text.find("(allow process-info* (target self))").unwrap());
            // isatty() on stdin: an ioctl on the null device only.
            assert!(text.contains(
                "(allow file-ioctl\n  (require-all (literal \"/dev/null\") (vnode-type CHARACTER-DEVICE)))"
            ));
            assert_eq!(
                text.matches("file-ioctl").count(),
                2,
                "null and dtracehelper only"
            );
            // …and last the ones nothing may reopen.
            let tail = text.trim_end();
            assert!(
                tail.ends_with(&format!(
                    "(deny file-link (with message \"{TAG}\"))\n(deny network* (with message \"{TAG}\"))"
                )),
                "{tail}"
            );
            // process-exec*, never the plain form that misses #! interpreters.
            assert!(!text.contains("process-exec "));
            assert!(!text.contains("process-exec\n"));
            // Owner paths are parameters, never text.
            let generated = &full[full.find(";; Generated:").unwrap()..];
            assert!(!generated.contains("\"/"), "{generated}");
            for (k, _) in params_of(&argv) {
                assert!(full.contains(&format!("(param \"{k}\")")), "{k}");
            }
        }
    }
}

#[test]
fn the_base_profile_names_no_owner_location() {
    for wide in [
        "\"/usr\")",
        "/usr/local",
        "/opt",
        "/Users",
        "/Library/Frameworks",
        "(subpath \"/private/var\")",
        "(subpath \"/private/tmp\")",
        "(subpath \"/private/etc\")",
        "(subpath \"/Library\")",
    ] {
        let allowed_lines: Vec<&str> = BASE_PROFILE
            .lines()
            .filter(|l| !l.trim_start().starts_with(";;"))
            .filter(|l| l.contains(wide))
            .collect();
        // "/usr" appears as a metadata literal only.
        let ok = allowed_lines
            .iter()
            .all(|l| l.trim() == "(literal \"/usr\"))" || l.trim() == "(literal \"/usr\")");
        assert!(ok, "{wide}: {allowed_lines:?}");
    }
    for needed in [
        "/System/Volumes/Preboot/Cryptexes",
        "/System/Cryptexes",
        "/usr/libexec/rosetta",
        "/Library/Apple/usr/libexec/oah",
        "/private/var/db/oah",
        "(subpath \"/dev/fd\")",
        "/dev/dtracehelper",
        "(allow ipc-posix-sem\n  (ipc-posix-name-prefix \"/mp-\")",
        "(literal \"/private/var/select/sh\")",
    ] {
        assert!(BASE_PROFILE.contains(needed), "{needed}");
    }
    // Semaphores are shared by name machine-wide: never unfiltered.
    assert!(!BASE_PROFILE.contains("(allow ipc-posix-sem)"));
}

#[test]
fn writes_are_the_temp_folder_and_for_drafts_the_database_files_only() {
    let (b, c) = homebrew_venv();
    let ro = params_of(&run(b, &c, RunKind::ReadOnly));
    assert_eq!(
        values(&ro, "TMP"),
        vec!["/private/var/folders/xy/abc/T/reachweaver-run-0011223344556677-8899aabbccddeeff"]
    );
    assert!(values(&ro, "DB").is_empty());
    // Companions are readable for SQLite's checks in every run.
    assert_eq!(
        values(&ro, "DBX"),
        vec![
            format!("{DB}-journal"),
            format!("{DB}-wal"),
            format!("{DB}-shm")
        ]
    );
    let draft = params_of(&run(b, &c, RunKind::Draft));
    assert_eq!(
        values(&draft, "DB"),
        vec![
            DB.to_string(),
            format!("{DB}-journal"),
            format!("{DB}-wal"),
            format!("{DB}-shm")
        ]
    );
    // Never the database's folder or anything above it.
    for (_, v) in draft
        .iter()
        .filter(|(k, _)| k.starts_with("DB_") || k.starts_with("TMP_"))
    {
        assert!(v != "/Users/ann/.reachweaver/db" && v != HOME, "{v}");
    }
    let text = &run(b, &c, RunKind::Draft)[2];
    let db_rule = text.find("(literal (param \"DB_0\"))").unwrap();
    let rule_head = text[..db_rule].rfind("(allow").unwrap();
    assert_eq!(
        &text[rule_head..text[rule_head..].find('\n').unwrap() + rule_head],
        "(allow file-read* file-test-existence file-write*"
    );
}

#[test]
fn ancestors_of_every_grant_get_metadata_and_nothing_more() {
    let (b, c) = homebrew_venv();
    let params = params_of(&run(b, &c, RunKind::ReadOnly));
    let meta = values(&params, "META");
    for a in [
        "/",
        "/Users",
        "/Users/ann",
        "/Users/ann/.reachweaver",
        "/Users/ann/.reachweaver/db",
        "/opt",
        "/opt/homebrew",
        "/opt/homebrew/opt",
        "/opt/homebrew/Cellar/python@3.12/3.12.7_1/Frameworks/Python.framework/Versions",
        "/private/var/folders/xy/abc/T",
    ] {
        assert!(meta.iter().any(|m| m == a), "{a} missing from {meta:?}");
    }
    let text = &run(b, &c, RunKind::ReadOnly)[2];
    let meta_rule_start = text
        .find("(allow file-read-metadata file-test-existence\n  (literal (param \"META_0\"))")
        .unwrap();
    let meta_rule = &text[meta_rule_start..];
    let meta_rule = &meta_rule[..meta_rule.find(")\n;;").unwrap()];
    assert!(!meta_rule.contains("subpath"));
    // The home itself is a metadata literal only, never a read grant.
    for prefix in ["EXEC", "READ", "LIB", "TMP", "HOP"] {
        assert!(
            !values(&params, prefix).iter().any(|v| v == HOME),
            "{prefix}"
        );
    }
}

#[test]
fn hops_and_libraries_are_granted_as_discovered() {
    let (b, c) = homebrew_venv();
    let params = params_of(&run(b, &c, RunKind::ReadOnly));
    assert_eq!(
        values(&params, "HOP"),
        c.hops
            .iter()
            .map(|h| h.display().to_string())
            .collect::<Vec<_>>()
    );
    assert_eq!(
        values(&params, "LIB"),
        c.lib_trees
            .iter()
            .map(|h| h.display().to_string())
            .collect::<Vec<_>>()
    );
    let text = &run(b, &c, RunKind::ReadOnly)[2];
    assert!(text.contains(
        "(allow file-read* file-test-existence process-exec*\n  (literal (param \"HOP_0\"))"
    ));
    assert!(text.contains(
        "(allow file-read* file-test-existence file-map-executable\n  (subpath (param \"LIB_0\"))"
    ));
    // No Homebrew etc or var, no whole prefix.
    for (_, v) in &params {
        assert!(!v.starts_with("/opt/homebrew/etc") && !v.starts_with("/opt/homebrew/var"));
    }
    assert!(!values(&params, "EXEC").iter().any(|v| v == "/opt/homebrew"));
    assert!(!values(&params, "LIB").iter().any(|v| v == "/opt/homebrew"));
}

#[test]
fn a_cargo_installed_backend_gets_its_file_not_cargo_home() {
    let (b, c) = compiled_in_cargo_home();
    let params = params_of(&run(b, &c, RunKind::ReadOnly));
    let exec = values(&params, "EXEC");
    assert_eq!(exec, vec!["/Users/ann/.cargo/bin/reachweaver-reference"]);
    assert!(!params
        .iter()
        .any(|(k, v)| !k.starts_with("META") && v == "/Users/ann/.cargo"));
}

#[test]
fn a_hostile_path_stays_a_parameter() {
    let (b, c) = compiled_in_cargo_home();
    let mut policy = policy_for(b, RunKind::ReadOnly);
    policy.read.push(p("/Users/ann/x\") (allow network*) (\""));
    let (text, params) = build_profile(&RunProfile {
        policy: &policy,
        chain: &c,
        backend: Path::new(b),
        db: None,
        draft: false,
        tag: TAG,
    });
    assert!(!text.contains("allow network"));
    assert!(params
        .iter()
        .any(|(_, v)| v.to_string_lossy().contains("allow network")));
}

#[test]
fn paths_are_canonical_private_spellings() {
    assert_eq!(canonical(Path::new("/tmp/x")), p("/private/tmp/x"));
    assert_eq!(
        canonical(Path::new("/var/folders/ab")),
        p("/private/var/folders/ab")
    );
    assert_eq!(canonical(Path::new("/etc")), p("/private/etc"));
    assert_eq!(canonical(Path::new("/tmpfoo")), p("/tmpfoo"));
    assert_eq!(canonical(Path::new("/Users/a")), p("/Users/a"));
}

#[test]
fn sandbox_exec_refusals_are_told_from_backend_exits() {
    let r = sandbox_exec_refusal(
        71,
        b"sandbox-exec: sandbox_apply: Operation not permitted\n",
    );
    assert_eq!(
        r.as_deref(),
        Some("sandbox-exec: sandbox_apply: Operation not permitted")
    );
    assert!(sandbox_exec_refusal(
        71,
        b"sandbox-exec: execvp() of '/Users/ann/.venvs/rw/bin/reachweaver' failed: Operation not permitted\n"
    )
    .is_some());
    assert!(sandbox_exec_refusal(65, b"\nsandbox-exec: unbound variable: foo\n").is_some());
    // The backend's own failures stay the backend's.
    assert_eq!(
        sandbox_exec_refusal(1, b"sandbox-exec: looks the same\n"),
        None
    );
    assert_eq!(sandbox_exec_refusal(2, b"sandbox-exec: x\n"), None);
    assert_eq!(
        sandbox_exec_refusal(71, b"Traceback (most recent call last):\n"),
        None
    );
    assert_eq!(sandbox_exec_refusal(71, b""), None);
}

// ---------------------------------------------------------------------
// Discovery on a fake layout (the same symlinks a Mac has, in a temp dir).
// ---------------------------------------------------------------------

fn symlink(target: &str, link: &Path) {
    std::fs::create_dir_all(link.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(target, link).unwrap();
}

fn file(path: &Path, content: &[u8]) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn discovery_follows_a_homebrew_venv_hop_by_hop() {
    let top = tempfile::tempdir().unwrap();
    let t = std::fs::canonicalize(top.path()).unwrap();
    let brew = t.join("opt/homebrew");
    let keg = brew.join("Cellar/python@3.12/3.12.7_1");
    let fw = keg.join("Frameworks/Python.framework/Versions/3.12");
    file(&fw.join("bin/python3.12"), b"\xcf\xfa\xed\xfe");
    std::fs::create_dir_all(fw.join("lib/python3.12")).unwrap();
    std::fs::create_dir_all(brew.join("lib/python3.12/site-packages")).unwrap();
    symlink(
        "../../../../../../../../../lib/python3.12/site-packages",
        &fw.join("lib/python3.12/site-packages"),
    );
    symlink(
        "../Frameworks/Python.framework/Versions/3.12/bin/python3.12",
        &keg.join("bin/python3.12"),
    );
    symlink(
        "../Cellar/python@3.12/3.12.7_1",
        &brew.join("opt/python@3.12"),
    );
    for (k, v) in [
        ("openssl@3", "3.4.0"),
        ("sqlite", "3.47.0"),
        ("xz", "5.6.3"),
    ] {
        std::fs::create_dir_all(brew.join(format!("Cellar/{k}/{v}/lib"))).unwrap();
        std::fs::create_dir_all(brew.join(format!("Cellar/{k}/{v}/etc"))).unwrap();
        symlink(
            &format!("../Cellar/{k}/{v}"),
            &brew.join(format!("opt/{k}")),
        );
    }
    let home = t.join("Users/ann");
    let venv = home.join(".venvs/rw");
    file(&venv.join("pyvenv.cfg"), b"home = x\n");
    symlink(
        &brew
            .join("opt/python@3.12/bin/python3.12")
            .display()
            .to_string(),
        &venv.join("bin/python"),
    );
    symlink("python", &venv.join("bin/python3"));
    let backend = venv.join("bin/reachweaver");
    file(
        &backend,
        format!("#!{}\nimport sys\n", venv.join("bin/python3").display()).as_bytes(),
    );
    // Credentials beside an unrelated prefix in the home must not appear.
    file(&home.join(".cargo/credentials.toml"), b"token");

    let chain = discover(&backend, Some(&home), Some("/usr/bin")).unwrap();
    assert_eq!(
        chain.exec_files,
        vec![backend.clone(), fw.join("bin/python3.12")]
    );
    assert_eq!(chain.exec_trees, vec![venv.clone(), fw.clone()]);
    assert_eq!(
        chain.hops,
        vec![
            venv.join("bin/python3"),
            venv.join("bin/python"),
            brew.join("opt/python@3.12"),
            keg.join("bin/python3.12"),
            fw.join("lib/python3.12/site-packages"),
            brew.join("opt/openssl@3"),
            brew.join("opt/sqlite"),
            brew.join("opt/xz"),
        ]
    );
    assert_eq!(
        chain.lib_trees,
        vec![
            brew.join("lib/python3.12/site-packages"),
            brew.join("Cellar/openssl@3/3.4.0/lib"),
            brew.join("Cellar/sqlite/3.47.0/lib"),
            brew.join("Cellar/xz/5.6.3/lib"),
        ]
    );
    assert!(chain.launcher.is_empty());
}

#[test]
fn discovery_resolves_env_shebangs_on_path_and_keeps_cargo_home_out() {
    let top = tempfile::tempdir().unwrap();
    let t = std::fs::canonicalize(top.path()).unwrap();
    let home = t.join("Users/ann");
    let py = home.join(".local/share/uv/python/cpython-3.12.7-macos-aarch64-none");
    file(&py.join("bin/python3.12"), b"\xcf\xfa\xed\xfe");
    std::fs::create_dir_all(py.join("lib/python3.12")).unwrap();
    // uv's versionless folder link in front of the installation.
    let versionless = home.join(".local/share/uv/python/cpython-3.12-macos-aarch64-none");
    symlink("cpython-3.12.7-macos-aarch64-none", &versionless);
    let bin = home.join("pybin");
    symlink(
        &versionless.join("bin/python3.12").display().to_string(),
        &bin.join("python3"),
    );
    let script = home.join("tools/rw");
    file(&script, b"#!/usr/bin/env -S python3 -I\n");
    let path_env = format!("/nonexistent:{}", bin.display());
    let chain = discover(&script, Some(&home), Some(&path_env)).unwrap();
    assert_eq!(
        chain.launcher,
        vec![bin.join("python3").display().to_string(), "-I".to_string()]
    );
    assert_eq!(chain.hops, vec![bin.join("python3"), versionless.clone()]);
    assert_eq!(chain.exec_trees, vec![py.clone()]);
    assert_eq!(
        chain.exec_files,
        vec![script.clone(), py.join("bin/python3.12")]
    );

    // A compiled backend in ~/.cargo/bin: the file alone.
    let cargo_bin = home.join(".cargo/bin/reachweaver-reference");
    file(&cargo_bin, b"\xcf\xfa\xed\xfe");
    file(&home.join(".cargo/credentials.toml"), b"token");
    let chain = discover(&cargo_bin, Some(&home), None).unwrap();
    assert_eq!(chain.exec_files, vec![cargo_bin.clone()]);
    assert!(chain.exec_trees.is_empty(), "{:?}", chain.exec_trees);
}

#[test]
fn shared_prefixes_and_the_home_are_never_trees() {
    let home = Some(Path::new("/Users/ann"));
    for exe in [
        "/usr/local/bin/rw",
        "/opt/homebrew/bin/rw",
        "/opt/local/bin/rw",
        "/usr/bin/rw",
        "/Users/ann/bin/rw",
        "/Users/bin/rw",
        "/bin/rw",
        "/tmp/bin/rw",
        "/opt/bin/rw",
    ] {
        assert_eq!(tree_for(Path::new(exe), home), None, "{exe}");
    }
    assert_eq!(
        tree_for(Path::new("/opt/homebrew/Cellar/rw/1.0/bin/rw"), home),
        Some(p("/opt/homebrew/Cellar/rw/1.0"))
    );
    assert_eq!(
        tree_for(
            Path::new("/Library/Frameworks/Python.framework/Versions/3.12/bin/python3.12"),
            home
        ),
        Some(p("/Library/Frameworks/Python.framework/Versions/3.12"))
    );
}

#[test]
fn resolve_recording_refuses_loops_and_relative_paths() {
    let top = tempfile::tempdir().unwrap();
    let t = std::fs::canonicalize(top.path()).unwrap();
    symlink("b", &t.join("a"));
    symlink("a", &t.join("b"));
    assert!(resolve_recording(&t.join("a")).is_err());
    assert!(resolve_recording(Path::new("relative/x")).is_err());
    file(&t.join("d/f"), b"");
    symlink("d", &t.join("dl"));
    let (r, hops) = resolve_recording(&t.join("dl/../d/f")).unwrap();
    assert_eq!(r, t.join("d/f"));
    assert_eq!(hops, vec![t.join("dl")]);
}

/// No Mac compiles the profile here, so at least its shape is checked: the
/// parentheses balance outside strings and comments, and every top-level
/// form is one Seatbelt knows.
#[test]
fn every_profile_is_well_formed() {
    for (b, c) in [
        framework_python(),
        homebrew_venv(),
        homebrew_python(),
        uv_python(),
        compiled_in_cargo_home(),
        env_script(),
    ] {
        for kind in [RunKind::ReadOnly, RunKind::Draft] {
            let text = &run(b, &c, kind)[2];
            let mut depth: i32 = 0;
            let mut in_string = false;
            let mut forms: Vec<String> = Vec::new();
            let mut current = String::new();
            for line in text.lines() {
                let mut chars = line.chars().peekable();
                while let Some(ch) = chars.next() {
                    if in_string {
                        if ch == '\\' {
                            chars.next();
                        } else if ch == '"' {
                            in_string = false;
                        }
                        if depth > 0 {
                            current.push(ch);
                        }
                        continue;
                    }
                    match ch {
                        ';' => break,
                        '"' => in_string = true,
                        '(' => depth += 1,
                        ')' => depth -= 1,
                        _ => {}
                    }
                    assert!(depth >= 0, "{b}: unbalanced ')' in {line}");
                    if depth > 0 || ch == ')' {
                        current.push(ch);
                    }
                    if depth == 0 && ch == ')' {
                        forms.push(std::mem::take(&mut current));
                    }
                }
                if depth > 0 {
                    current.push(' ');
                }
            }
            assert_eq!(depth, 0, "{b}: unbalanced '('");
            assert!(!in_string, "{b}: unterminated string");
            assert_eq!(forms.first().map(String::as_str), Some("(version 1)"));
            for f in &forms {
                assert!(
                    ["(version ", "(deny ", "(allow ", "(if "]
                        .iter()
                        .any(|head| f.starts_with(head)),
                    "{b}: unexpected top-level form {f}"
                );
            }
        }
    }
}

#[test]
fn no_allowed_sysctl_reaches_other_processes() {
    let block = &BASE_PROFILE[BASE_PROFILE.find("(allow sysctl-read").unwrap()..];
    let block = &block[..block.find("))\n").unwrap()];
    let allowed: Vec<&str> = block
        .lines()
        .filter_map(|l| l.trim().strip_prefix("(sysctl-name-prefix \""))
        .filter_map(|l| l.split('"').next())
        .collect();
    assert!(allowed.len() > 10, "{allowed:?}");
    assert!(
        !block.contains("(sysctl-name \""),
        "exact names may miss calls by number"
    );
    for secret in [
        "kern.procargs2",
        "kern.procargs",
        "kern.proc.pid.1",
        "kern.proc.all",
        "kern.proc.uid.501",
        "kern.bootargs",
        "security.mac.sandbox.sentinel",
    ] {
        for p in &allowed {
            assert!(!secret.starts_with(p), "{p} admits {secret}");
        }
    }
    for needed in [
        "hw.pagesize",
        "hw.ncpu",
        "kern.ostype",
        "kern.osrelease",
        "sysctl.proc_translated",
    ] {
        assert!(allowed.iter().any(|p| needed.starts_with(p)), "{needed}");
    }
}

#[test]
fn discovered_trees_pass_the_path_guard() {
    let home = Some(Path::new("/Users/ann"));
    for wide in [
        "/",
        "/Users",
        "/Users/ann",
        "/Users/Shared",
        "/Library",
        "/System",
        "/Volumes",
        "/private",
        "/private/var/folders/xy/abc/T",
        "/var/folders/xy/abc",
        "/tmp",
        "/opt/homebrew",
        "/usr/local",
        "/System/Volumes/Data/Users/ann",
    ] {
        assert!(too_wide(Path::new(wide), home), "{wide}");
    }
    for fine in [
        "/opt/homebrew/lib/python3.12/site-packages",
        "/opt/homebrew/Cellar/sqlite/3.47.0/lib",
        "/Library/Frameworks/Python.framework/Versions/3.12",
        "/Users/ann/.venvs/rw",
    ] {
        assert!(!too_wide(Path::new(fine), home), "{fine}");
    }
}

#[test]
fn a_site_packages_link_to_the_home_or_root_grants_nothing() {
    let top = tempfile::tempdir().unwrap();
    let t = std::fs::canonicalize(top.path()).unwrap();
    let home = t.join("Users/ann");
    std::fs::create_dir_all(&home).unwrap();
    let py = t.join("opt/python");
    file(&py.join("bin/python3.12"), b"\xcf\xfa\xed\xfe");
    // Two versions' site-packages: one linked to the home, one to /.
    symlink(
        &home.display().to_string(),
        &py.join("lib/python3.12/site-packages"),
    );
    symlink("/", &py.join("lib/python3.13/site-packages"));
    let good = t.join("opt/site");
    std::fs::create_dir_all(&good).unwrap();
    symlink(
        &good.display().to_string(),
        &py.join("lib/python3.14/site-packages"),
    );
    let backend = t.join("opt/rw/bin/rw");
    file(
        &backend,
        format!("#!{}\n", py.join("bin/python3.12").display()).as_bytes(),
    );
    let chain = discover(&backend, Some(&home), None).unwrap();
    assert_eq!(chain.lib_trees, vec![good.clone()], "{chain:?}");
    for grant in chain
        .exec_trees
        .iter()
        .chain(&chain.lib_trees)
        .chain(&chain.hops)
        .chain(&chain.exec_files)
    {
        assert!(grant != &home && grant != Path::new("/"), "{grant:?}");
    }
    // The interpreter's own tree is still granted.
    assert!(chain.exec_trees.contains(&py), "{chain:?}");
}

#[test]
fn discovery_adds_homebrew_pythons_own_opt_link_without_a_venv() {
    let top = tempfile::tempdir().unwrap();
    let t = std::fs::canonicalize(top.path()).unwrap();
    let brew = t.join("opt/homebrew");
    let keg = brew.join("Cellar/python@3.12/3.12.7_1");
    let fw = keg.join("Frameworks/Python.framework/Versions/3.12");
    file(&fw.join("bin/python3.12"), b"\xcf\xfa\xed\xfe");
    std::fs::create_dir_all(fw.join("lib/python3.12")).unwrap();
    symlink("python3.12", &fw.join("bin/python3"));
    symlink(
        "../Frameworks/Python.framework/Versions/3.12/bin/python3",
        &keg.join("bin/python3"),
    );
    symlink(
        "../Cellar/python@3.12/3.12.7_1/bin/python3",
        &brew.join("bin/python3"),
    );
    symlink(
        "../Cellar/python@3.12/3.12.7_1",
        &brew.join("opt/python@3.12"),
    );
    // An older version's keg link that leads elsewhere is not this Python's.
    std::fs::create_dir_all(brew.join("Cellar/python@3.11/3.11.9")).unwrap();
    symlink(
        "../Cellar/python@3.11/3.11.9",
        &brew.join("opt/python@3.11"),
    );
    let home = t.join("Users/ann");
    let backend = home.join("tools/reachweaver");
    file(
        &backend,
        format!("#!{}\nimport sys\n", brew.join("bin/python3").display()).as_bytes(),
    );
    let chain = discover(&backend, Some(&home), None).unwrap();
    assert_eq!(
        chain.hops,
        vec![
            brew.join("bin/python3"),
            keg.join("bin/python3"),
            fw.join("bin/python3"),
            brew.join("opt/python@3.12"),
        ]
    );
    assert_eq!(chain.exec_trees, vec![fw.clone()]);
    assert_eq!(
        chain.exec_files,
        vec![backend.clone(), fw.join("bin/python3.12")]
    );
    // Never the whole Homebrew prefix, wherever it is installed.
    assert!(!chain.exec_trees.contains(&brew));
    assert!(too_wide(&brew, Some(&home)));
}

#[test]
fn an_env_line_whose_program_is_not_on_path_stops_the_start() {
    let top = tempfile::tempdir().unwrap();
    let t = std::fs::canonicalize(top.path()).unwrap();
    let home = t.join("Users/ann");
    let bin = home.join("pybin");
    std::fs::create_dir_all(&bin).unwrap();
    // Present but not executable: env would not run it either.
    std::fs::write(bin.join("python3"), b"").unwrap();
    let script = home.join("tools/rw");
    file(&script, b"#!/usr/bin/env -S python3 -I\nprint(1)\n");
    let path_env = format!("/nonexistent:{}", bin.display());
    let err = discover(&script, Some(&home), Some(&path_env)).unwrap_err();
    assert_eq!(
        err,
        DiscoverError::EnvNotFound {
            script: script.clone(),
            line: "#!/usr/bin/env -S python3 -I".into(),
            name: "python3".into(),
            path: Some(path_env.clone()),
        }
    );
    let msg = err.to_string();
    for part in [
        script.display().to_string(),
        "#!/usr/bin/env -S python3 -I".to_string(),
        "`python3`".to_string(),
        path_env.clone(),
    ] {
        assert!(msg.contains(&part), "{part} missing from {msg}");
    }
    // PATH unset: said so.
    let err = discover(&script, Some(&home), None).unwrap_err();
    assert!(matches!(err, DiscoverError::EnvNotFound { path: None, .. }));
    assert!(err.to_string().contains("PATH is not set"), "{err}");
    // An env line with no program at all.
    let bare = home.join("tools/bare");
    file(&bare, b"#!/usr/bin/env\n");
    assert!(matches!(
        discover(&bare, Some(&home), Some("/usr/bin")),
        Err(DiscoverError::EnvWithoutProgram { .. })
    ));
    // Once the program is executable on PATH, the run has its launcher.
    file(&bin.join("python3"), b"\xcf\xfa\xed\xfe");
    let chain = discover(&script, Some(&home), Some(&path_env)).unwrap();
    assert_eq!(
        chain.launcher,
        vec![bin.join("python3").display().to_string(), "-I".to_string()]
    );
}

/// Each folder above a path the base profile grants is a metadata literal:
/// dyld and Python's launcher stat each folder of a path on the way down.
#[test]
fn the_base_profile_gives_metadata_above_every_system_grant() {
    let meta_start = BASE_PROFILE
        .find("(allow file-read-metadata file-test-existence\n")
        .unwrap();
    let meta_block = &BASE_PROFILE[meta_start..];
    let meta_block = &meta_block[..meta_block.find("))\n").unwrap() + 2];
    let quoted = |text: &str, head: &str| -> Vec<String> {
        text.lines()
            .filter(|l| !l.trim_start().starts_with(";;"))
            .filter_map(|l| l.split_once(head).map(|(_, r)| r))
            .filter_map(|r| r.split('"').next())
            .map(str::to_string)
            .collect()
    };
    let meta = quoted(meta_block, "(literal \"");
    assert!(meta.len() > 10, "{meta:?}");
    let rest = BASE_PROFILE.replace(meta_block, "");
    let mut grants = quoted(&rest, "(subpath \"");
    grants.extend(quoted(&rest, "(literal \""));
    assert!(grants.iter().any(|g| g == "/private/var/db/oah"));
    for g in &grants {
        for a in Path::new(g).ancestors().skip(1) {
            let a = a.display().to_string();
            assert!(meta.contains(&a), "{a} (above {g}) has no metadata literal");
        }
    }
    for needed in [
        "/Library/Apple/System",
        "/Library/Apple/usr",
        "/Library/Apple/usr/libexec",
        "/usr/libexec",
        "/private/var/db",
    ] {
        assert!(meta.iter().any(|m| m == needed), "{needed}");
    }
}

#[test]
fn the_descriptor_sweep_reaches_the_real_limit() {
    // Above the 65536 the sweep used to stop at.
    assert_eq!(fd_sweep_limit(1 << 20, 245_760), 245_760);
    assert_eq!(fd_sweep_limit(256, 245_760), 256);
    // A soft limit of RLIM_INFINITY is capped by the per-process maximum.
    assert_eq!(fd_sweep_limit(u64::MAX, 122_880), 122_880);
    assert_eq!(fd_sweep_limit(u64::MAX, u64::MAX), i32::MAX);
}

#[test]
fn a_descriptor_list_that_may_be_cut_short_is_not_trusted() {
    // 3 entries of 8 bytes in a buffer of 10: complete.
    assert_eq!(listed_fd_count(24, 8, 10), Some(3));
    assert_eq!(listed_fd_count(0, 8, 10), Some(0));
    // The buffer filled: more may exist, so sweep instead.
    assert_eq!(listed_fd_count(80, 8, 10), None);
    // The call failed.
    assert_eq!(listed_fd_count(-1, 8, 10), None);
    assert_eq!(listed_fd_count(24, 0, 10), None);
}

/// macOS 26's dyld reads `/` itself before it loads anything: the literal
/// root is readable, and nothing grants a read of the whole tree under it.
#[test]
fn the_root_folder_itself_is_readable_and_nothing_under_it() {
    let rules: String = BASE_PROFILE
        .lines()
        .filter(|l| !l.trim_start().starts_with(";;"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(
        rules.contains("(allow file-read-data file-test-existence (literal \"/\"))"),
        "{rules}"
    );
    for (b, c) in [
        framework_python(),
        homebrew_venv(),
        homebrew_python(),
        uv_python(),
        compiled_in_cargo_home(),
        env_script(),
    ] {
        for kind in [RunKind::ReadOnly, RunKind::Draft] {
            let argv = run(b, &c, kind);
            let text = &argv[2];
            let squeezed: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
            assert!(!squeezed.contains("(subpath \"/\")"), "{b}");
            assert!(!squeezed.contains("(prefix \"/\")"), "{b}");
            assert!(!squeezed.contains("(regex"), "{b}");
            // No parameter is the root either, but for the metadata literal.
            for (k, v) in params_of(&argv) {
                assert!(v != "/" || k.starts_with("META_"), "{k}");
            }
        }
    }
}

#[test]
fn a_program_stopped_before_main_is_the_sandboxs_failure() {
    // dyld's abort on macOS 26: SIGABRT, nothing printed.
    let why = died_at_start(Ended::Signal(libc::SIGABRT), b"", b"").unwrap();
    assert!(why.contains("signal 6"), "{why}");
    assert!(why.contains("printing nothing"), "{why}");
    // The same through a shell, and with dyld's own message.
    assert!(died_at_start(Ended::Code(134), b"\n", b"").is_some());
    let why = died_at_start(
        Ended::Signal(libc::SIGABRT),
        b"",
        b"dyld[123]: Library not loaded: /opt/homebrew/opt/libpq/lib/libpq.5.dylib\n",
    )
    .unwrap();
    assert!(why.contains("libpq"), "{why}");
    assert!(died_at_start(Ended::Signal(libc::SIGKILL), b"", b"").is_some());
    assert!(died_at_start(Ended::Signal(libc::SIGTRAP), b"", b"").is_some());
    // sandbox-exec's refusals stay refusals.
    assert!(died_at_start(
        Ended::Code(71),
        b"",
        b"sandbox-exec: sandbox_apply: Operation not permitted\n"
    )
    .is_some());
    // A backend that printed anything had started: its crash is its own.
    assert_eq!(died_at_start(Ended::Signal(libc::SIGABRT), b"{", b""), None);
    assert_eq!(
        died_at_start(Ended::Signal(libc::SIGABRT), b"", b"Fatal Python error\n"),
        None
    );
    assert_eq!(
        died_at_start(Ended::Signal(libc::SIGABRT), b"", b"dyld: x\nTraceback\n"),
        None
    );
    // Other signals and exits are the backend's.
    assert_eq!(died_at_start(Ended::Signal(libc::SIGSEGV), b"", b""), None);
    assert_eq!(died_at_start(Ended::Signal(libc::SIGTERM), b"", b""), None);
    assert_eq!(died_at_start(Ended::Code(133), b"", b""), None);
    assert_eq!(died_at_start(Ended::Code(135), b"", b""), None);
    assert_eq!(died_at_start(Ended::Code(1), b"", b""), None);
    assert_eq!(died_at_start(Ended::Code(0), b"", b""), None);
}

#[test]
fn firmlinked_spellings_are_brought_to_the_short_one() {
    assert_eq!(
        canonical(Path::new("/System/Volumes/Data/Users/ann/x")),
        p("/Users/ann/x")
    );
    assert_eq!(
        canonical(Path::new("/System/Volumes/Data/private/var/folders/ab")),
        p("/private/var/folders/ab")
    );
    assert_eq!(
        canonical(Path::new("/System/Volumes/Data/tmp")),
        p("/private/tmp")
    );
    assert_eq!(
        canonical(Path::new("/System/Volumes/Preboot")),
        p("/System/Volumes/Preboot")
    );
}

#[test]
fn version_manager_shims_are_named() {
    let same = |s: &str| shim_manager(Path::new(s), Path::new(s));
    assert_eq!(same("/Users/ann/.pyenv/shims/python3"), Some("pyenv"));
    assert_eq!(same("/Users/ann/.asdf/shims/python3"), Some("asdf"));
    assert_eq!(
        same("/Users/ann/.local/share/mise/shims/python3"),
        Some("mise")
    );
    assert_eq!(same("/opt/tools/shims/python3"), Some("version manager"));
    // mise's shims are links to mise itself, wherever they live.
    assert_eq!(
        shim_manager(
            Path::new("/Users/ann/bin/python3"),
            Path::new("/opt/homebrew/Cellar/mise/2025.1.0/bin/mise")
        ),
        Some("mise")
    );
    // Real interpreters are not shims, even inside a manager's tree.
    assert_eq!(
        same("/Users/ann/.pyenv/versions/3.12.7/bin/python3.12"),
        None
    );
    assert_eq!(same("/opt/homebrew/bin/python3"), None);
    assert_eq!(same("/usr/bin/python3"), None);
}

#[test]
fn a_pip_user_install_reads_its_own_site_folder() {
    let home = Path::new("/Users/ann");
    assert_eq!(
        user_site_for(
            Path::new("/Users/ann/Library/Python/3.12/bin/reachweaver"),
            home
        ),
        Some(p("/Users/ann/Library/Python/3.12/lib/python/site-packages"))
    );
    assert_eq!(
        user_site_for(
            Path::new("/Users/ann/Library/Python/3.9/bin/reachweaver"),
            home
        ),
        Some(p("/Users/ann/Library/Python/3.9/lib/python/site-packages"))
    );
    for not in [
        "/Users/ann/Library/Python/3.12/reachweaver",
        "/Users/ann/Library/Python/3.12/bin/sub/reachweaver",
        "/Users/ann/Library/Python/2.7/bin/reachweaver",
        "/Users/ann/Library/Python/3.x/bin/reachweaver",
        "/Users/ann/Library/Python/3./bin/reachweaver",
        "/Users/bob/Library/Python/3.12/bin/reachweaver",
        "/Library/Python/3.12/bin/reachweaver",
    ] {
        assert_eq!(user_site_for(Path::new(not), home), None, "{not}");
    }
}

#[test]
fn kegs_an_extension_module_links_are_read_from_its_load_commands() {
    let brew = Path::new("/opt/homebrew");
    let mut module = b"\xcf\xfa\xed\xfe\x00\x00".to_vec();
    module.extend_from_slice(b"/opt/homebrew/opt/libpq/lib/libpq.5.dylib\0");
    module.extend_from_slice(b"\0\0/usr/lib/libSystem.B.dylib\0");
    module.extend_from_slice(b"/opt/homebrew/opt/openssl@3/lib/libssl.3.dylib\0");
    module.extend_from_slice(b"/opt/homebrew/opt/libpq/lib/libpq.5.dylib\0");
    assert_eq!(
        opt_kegs_named(&module, brew),
        vec!["libpq".to_string(), "openssl@3".to_string()]
    );
    // Another prefix's paths, a name without its folder, and odd names are not kegs.
    assert!(opt_kegs_named(b"/usr/local/opt/libpq/lib/x\0", brew).is_empty());
    assert!(opt_kegs_named(b"/opt/homebrew/opt/libpq\0", brew).is_empty());
    assert!(opt_kegs_named(b"/opt/homebrew/opt/../lib/x\0", brew).is_empty());
    assert!(opt_kegs_named(b"/opt/homebrew/opt//lib/x\0", brew).is_empty());
    assert!(opt_kegs_named(b"/opt/homebrew/opt/a b/lib\0", brew).is_empty());
    assert_eq!(
        opt_kegs_named(b"/usr/local/opt/libpq/lib/x\0", Path::new("/usr/local")),
        vec!["libpq".to_string()]
    );
}

#[test]
fn discovery_refuses_a_pyenv_shim_and_names_the_fix() {
    let top = tempfile::tempdir().unwrap();
    let t = std::fs::canonicalize(top.path()).unwrap();
    let home = t.join("Users/ann");
    let shim = home.join(".pyenv/shims/python3");
    file(&shim, b"#!/usr/bin/env bash\nexec pyenv exec \"$@\"\n");
    let script = home.join("tools/rw");
    file(&script, format!("#!{}\n", shim.display()).as_bytes());
    let e = discover(&script, Some(&home), Some("/usr/bin")).unwrap_err();
    assert_eq!(
        e,
        DiscoverError::Shim {
            script: script.clone(),
            shim: shim.clone(),
            manager: "pyenv",
        }
    );
    let msg = e.to_string();
    assert!(msg.contains("pyenv shim"), "{msg}");
    assert!(msg.contains("`pyenv which python3`"), "{msg}");
    // The same shim found on PATH for an env line.
    let env_script = home.join("tools/rw-env");
    file(&env_script, b"#!/usr/bin/env python3\n");
    let path_env = shim.parent().unwrap().display().to_string();
    assert!(matches!(
        discover(&env_script, Some(&home), Some(&path_env)),
        Err(DiscoverError::Shim {
            manager: "pyenv",
            ..
        })
    ));
    // mise: a link to the mise binary.
    let mise = home.join(".local/bin/mise");
    file(&mise, b"\xcf\xfa\xed\xfe");
    let link = home.join("bin/python3");
    symlink(&mise.display().to_string(), &link);
    let s2 = home.join("tools/rw2");
    file(&s2, format!("#!{}\n", link.display()).as_bytes());
    assert!(matches!(
        discover(&s2, Some(&home), None),
        Err(DiscoverError::Shim {
            manager: "mise",
            ..
        })
    ));
}

#[test]
fn discovery_grants_a_pip_user_site_and_the_kegs_its_modules_link() {
    let top = tempfile::tempdir().unwrap();
    let t = std::fs::canonicalize(top.path()).unwrap();
    let home = t.join("Users/ann");
    // A Homebrew-style Python under a prefix of its own.
    let brew = t.join("brew");
    std::fs::create_dir_all(brew.join("Cellar")).unwrap();
    let fw = brew.join("Cellar/python@3.12/3.12.7_1/Frameworks/Python.framework/Versions/3.12");
    file(&fw.join("bin/python3.12"), b"\xcf\xfa\xed\xfe");
    std::fs::create_dir_all(fw.join("lib/python3.12")).unwrap();
    // libpq's keg and its opt link.
    let libpq = brew.join("Cellar/libpq/17.2/lib");
    file(&libpq.join("libpq.5.dylib"), b"\xcf\xfa\xed\xfe");
    symlink("../Cellar/libpq/17.2", &brew.join("opt/libpq"));
    // A pip --user install: the backend and a module that links libpq.
    let backend = home.join("Library/Python/3.12/bin/reachweaver");
    file(
        &backend,
        format!("#!{}\n", fw.join("bin/python3.12").display()).as_bytes(),
    );
    let site = home.join("Library/Python/3.12/lib/python/site-packages");
    let mut module = b"\xcf\xfa\xed\xfe".to_vec();
    module
        .extend_from_slice(format!("{}/opt/libpq/lib/libpq.5.dylib\0", brew.display()).as_bytes());
    file(
        &site.join("psycopg2/_psycopg.cpython-312-darwin.so"),
        &module,
    );
    let chain = discover(&backend, Some(&home), None).unwrap();
    assert!(chain.lib_trees.contains(&site), "{:?}", chain.lib_trees);
    assert!(
        chain
            .lib_trees
            .contains(&brew.join("Cellar/libpq/17.2/lib")),
        "{:?}",
        chain.lib_trees
    );
    assert!(
        chain.hops.contains(&brew.join("opt/libpq")),
        "{:?}",
        chain.hops
    );
    // Not the user's other Library folders, nor the home.
    assert!(!chain.lib_trees.iter().any(|l| l == &home.join("Library")));
    assert!(!chain
        .exec_trees
        .iter()
        .any(|l| l.starts_with(home.join("Library"))));
}

/// The trial run starts `/usr/bin/true` in the backend's sandbox: an `env`
/// line's interpreter is the backend's launcher, never put in front of it
/// (python3 would be asked to run /usr/bin/true as a script).
#[test]
fn the_launcher_goes_in_front_of_the_backend_only() {
    let (b, chain) = env_script();
    assert!(!chain.launcher.is_empty());
    let mut policy = policy_for(b, RunKind::ReadOnly);
    policy.program = p("/usr/bin/true");
    policy.argv = vec!["/usr/bin/true".to_string()];
    let argv = build_argv(&RunProfile {
        policy: &policy,
        chain: &chain,
        backend: Path::new(b),
        db: Some(Path::new(DB)),
        draft: false,
        tag: TAG,
    });
    let dashes = argv.iter().position(|a| a == "--").unwrap();
    assert_eq!(&argv[dashes + 1..], &["/usr/bin/true".to_string()]);
    // The backend itself still gets it.
    let argv = run(b, &chain, RunKind::ReadOnly);
    let dashes = argv.iter().position(|a| a == "--").unwrap();
    assert_eq!(
        argv[dashes + 1..dashes + 4],
        [
            "/Users/ann/.venvs/rw/bin/python3".to_string(),
            "-I".to_string(),
            b.to_string()
        ]
    );
}

#[test]
fn a_name_looked_up_in_another_case_takes_its_stored_spelling() {
    let names: Vec<std::ffi::OsString> = ["Ann", "Shared", "bob", "Dup", "dup"]
        .iter()
        .map(Into::into)
        .collect();
    let os = std::ffi::OsStr::new;
    assert_eq!(stored_spelling(&names, os("ann")), Some("Ann".into()));
    assert_eq!(stored_spelling(&names, os("SHARED")), Some("Shared".into()));
    // Stored as given: nothing to change.
    assert_eq!(stored_spelling(&names, os("Ann")), None);
    assert_eq!(stored_spelling(&names, os("bob")), None);
    // Two stored names match (a case-sensitive volume): left as given.
    assert_eq!(stored_spelling(&names, os("DUP")), None);
    assert_eq!(stored_spelling(&names, os("nobody")), None);
}

#[test]
fn every_top_level_denial_and_only_those_carry_the_runs_token() {
    let (b, c) = homebrew_venv();
    let argv = run(b, &c, RunKind::ReadOnly);
    let text = &argv[2];
    let mark = "(with message \"reachweaver-run:0123456789abcdef\")";
    let tagged: Vec<&str> = text.lines().filter(|l| l.contains(mark)).collect();
    assert_eq!(
        tagged,
        [
            "(deny default (with message \"reachweaver-run:0123456789abcdef\"))",
            "(deny process-info* (with message \"reachweaver-run:0123456789abcdef\"))",
            "(deny file-link (with message \"reachweaver-run:0123456789abcdef\"))",
            "(deny network* (with message \"reachweaver-run:0123456789abcdef\"))",
        ]
    );
    // The guarded denials stay as they were: a modifier inside `if` is not
    // worth a release refusing the profile.
    assert!(text.contains("(if (defined? 'nvram*) (deny nvram*))"));
    // Untagged, no line starts a denial.
    let bare: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("(deny ") && !l.contains(mark))
        .collect();
    assert!(bare.is_empty(), "{bare:?}");
    // Another run's profile differs in its token only.
    let policy = policy_for(b, RunKind::ReadOnly);
    let other = build_argv(&RunProfile {
        policy: &policy,
        chain: &c,
        backend: Path::new(b),
        db: Some(Path::new(DB)),
        draft: false,
        tag: RunTag(1),
    });
    assert_eq!(
        other[2],
        text.replace(
            "reachweaver-run:0123456789abcdef",
            "reachweaver-run:0000000000000001"
        )
    );
}
