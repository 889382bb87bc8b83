//! What the suite's modules share, and the one place that says where the
//! programs under test are: the server binary Cargo built for this test
//! target, the reference backend built beside it, and the fixtures.
//!
//! - `mcp`: a server on the reference backend spoken to in JSON lines.
//! - `faults`: a server on the misbehaving backend, and /proc scans.
//! - `sandbox`: runs as the current user and as an unprivileged one.
//! - `tools`: the binary's one-shot subcommands on the `shelfcheck` backend.

pub mod faults;
pub mod mcp;
pub mod sandbox;
pub mod tools;

use std::path::{Path, PathBuf};
use std::process::Command;

/// The server binary Cargo built for this test target.
pub fn server_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_reachweaver-mcp"))
}

/// The reference backend, built by the same `cargo test` (it is a default
/// member of the workspace) next to the server binary.
pub fn reference_bin() -> PathBuf {
    let p = server_bin().with_file_name("reachweaver-reference");
    assert!(
        p.exists(),
        "the reference backend is missing at {}: run `cargo build --workspace` first",
        p.display()
    );
    p
}

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A file of `tests/fixtures`, which must exist.
pub fn fixture(name: &str) -> PathBuf {
    let p = repo_root().join("tests/fixtures").join(name);
    assert!(p.exists(), "fixture missing: {}", p.display());
    p
}

/// Puts an executable file at `dest` (mode 0755) without ever holding it
/// open for writing in this process: the suite is one multi-threaded
/// process, and a child another test forks in that moment would inherit
/// the descriptor and make every exec of the file fail with ETXTBSY until
/// it execs itself. `install` writes it from a process of its own.
pub fn install_executable(from: &Path, dest: &Path) {
    let out = Command::new("install")
        .arg("-m")
        .arg("0755")
        .arg(from)
        .arg(dest)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "install {} {}: {}",
        from.display(),
        dest.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Like [`install_executable`], for a script given as text (written first
/// to a file beside `dest` that is never run).
pub fn write_executable(dest: &Path, contents: &str) {
    let mut source = dest.as_os_str().to_owned();
    source.push(".source");
    let source = PathBuf::from(source);
    std::fs::write(&source, contents).unwrap();
    install_executable(&source, dest);
}
