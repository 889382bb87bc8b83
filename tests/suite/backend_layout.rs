//! Where a backend may read (docs/BACKEND.md): a script that is not laid
//! out as `PREFIX/bin/NAME` gets its own file only, so a `catalog.json`
//! beside it is not there in the run. The start-up line says which case
//! applies, and a `describe` that fails says what to try.

use std::path::Path;
use std::process::{Command, Output};

use crate::support::{server_bin, write_executable};

const CATALOG: &str = r#"{"catalog": 1, "program": {"name": "beside", "version": "1"},
 "format_flag": "--format",
 "commands": [{"name": "hello", "summary": "Say hello.", "tags": ["read_only"], "formats": ["json"]}]}"#;

/// Prints the `catalog.json` found at `REL` from its own folder.
fn script(rel: &str) -> String {
    format!(
        "#!/bin/sh\nhere=$(dirname \"$0\")\nfor a in \"$@\"; do\n  case \"$a\" in describe) exec cat \"$here/{rel}\";; esac\ndone\necho '{{\"hello\": true}}'\n"
    )
}

fn tools(backend: &Path, home: &Path, extra: &[&str]) -> Output {
    Command::new(server_bin())
        .arg(format!("--backend={}", backend.display()))
        .arg(format!("--home={}", home.display()))
        .arg("tools")
        .args(extra)
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn a_script_beside_its_catalog_reads_only_its_own_file_and_is_told_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let tool = dir.path().join("tool");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&tool).unwrap();
    std::fs::write(tool.join("catalog.json"), CATALOG).unwrap();
    let backend = tool.join("backend.sh");
    write_executable(&backend, &script("catalog.json"));

    // At the owner's terminal the backend works: the sandbox is the difference.
    let plain = Command::new(&backend)
        .args(["describe", "--format=json"])
        .output()
        .unwrap();
    assert!(plain.status.success(), "{}", text(&plain.stderr));

    let out = tools(&backend, &home, &[]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("describe --format=json` failed"), "{err}");
    assert!(
        err.contains("hint: in the sandbox the backend may read only its own file"),
        "{err}"
    );
    assert!(err.contains("--allow-read DIR"), "{err}");
    assert!(
        err.contains(&format!(
            "sandbox run --allow-read DIR -- {} describe --format=json",
            backend.display()
        )),
        "{err}"
    );

    // Granting the folder is the fix the hint names; the line says the
    // backend itself still has only its file.
    let tool_arg = format!("--allow-read={}", tool.display());
    let out = tools(&backend, &home, &[&tool_arg]);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("backend: its own file only"), "{err}");
    assert!(
        err.contains(&format!("allow-read {}", tool.display())),
        "{err}"
    );
}

#[test]
fn a_prefix_bin_layout_reads_its_prefix_and_the_line_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let prefix = dir.path().join("pfx");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(prefix.join("bin")).unwrap();
    std::fs::write(prefix.join("catalog.json"), CATALOG).unwrap();
    let backend = prefix.join("bin/backend");
    write_executable(&backend, &script("../catalog.json"));

    let out = tools(&backend, &home, &[]);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(&format!("backend folder {}", prefix.display())),
        "{err}"
    );
    assert!(!err.contains("its own file only"), "{err}");
    assert!(text(&out.stdout).contains("hello"), "{}", text(&out.stdout));
}

/// Node prints where it failed (`node:fs:573`) before what failed: the
/// start-up message quotes the `Error:` line.
#[test]
fn a_node_backend_that_cannot_read_its_catalog_is_quoted_by_its_error_line() {
    let node = std::path::PathBuf::from("/usr/bin/node");
    assert!(
        node.exists(),
        "this test needs Node.js at /usr/bin/node (the examples' interpreter); install it"
    );
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let tool = dir.path().join("tool");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&tool).unwrap();
    std::fs::write(tool.join("catalog.json"), CATALOG).unwrap();
    let backend = tool.join("backend.js");
    write_executable(
        &backend,
        "#!/usr/bin/node\nconst fs = require('fs');\nconst path = require('path');\n\
         process.stdout.write(fs.readFileSync(path.join(__dirname, 'catalog.json'), 'utf8'));\n",
    );
    let out = tools(&backend, &home, &[]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("failed (exit code 1): Error: ENOENT: no such file or directory, open '"),
        "{err}"
    );
    assert!(!err.contains("failed (exit code 1): node:"), "{err}");
    assert!(err.contains("read only its own file"), "{err}");
}
