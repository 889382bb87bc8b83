//! `--pin FILE` (docs/PINS.md): what the owner approved, kept in a file,
//! and checked at start and before each call: the backend's file (path,
//! SHA-256, reported version), the digest of its canonical `describe`
//! document, and each served tool's whole wire object.
//!
//! `wire.rs` makes the pinned form of a tool, `file.rs` reads and writes
//! the file, `diff.rs` says what changed, `watch.rs` re-identifies the
//! backend before each call.

mod diff;
mod file;
mod watch;
pub(crate) mod wire;

use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use crate::tools::ToolSet;

const SERVER_NAME: &str = env!("CARGO_PKG_NAME");
const SERVER_VERSION: &str = env!("CARGO_PKG_VERSION");

pub(crate) use watch::Watch;

/// The pin file's format (`format`).
pub(crate) const FORMAT: u64 = 1;

/// What a changed start does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum PinMode {
    /// Refuse to start (and refuse calls to a changed backend).
    #[default]
    Refuse,
    /// Serve anyway, and log what changed.
    Warn,
}

/// Why the pins could not be made, read or honoured.
#[derive(Debug)]
pub(crate) enum PinError {
    Wire(wire::WireError),
    File(file::FileError),
    /// The backend's file could not be read to hash it.
    Backend(PathBuf, std::io::Error),
    /// What is offered now differs from the pins (refuse mode).
    Changed {
        path: PathBuf,
        lines: Vec<String>,
    },
    /// `tools --pin FILE --check` with no pin file.
    NoFile(PathBuf),
}

impl std::fmt::Display for PinError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PinError::Wire(e) => write!(f, "--pin: {e}"),
            PinError::File(e) => std::fmt::Display::fmt(e, f),
            PinError::Backend(p, e) => {
                write!(
                    f,
                    "--pin: cannot read the backend {} to hash it: {e}",
                    p.display()
                )
            }
            PinError::Changed { path, lines } => {
                write!(
                    f,
                    "--pin {}: the backend or its tools changed since they were pinned, so they \
                     are not served:",
                    path.display()
                )?;
                for line in lines {
                    write!(f, "\n  {line}")?;
                }
                write!(
                    f,
                    "\nreview the change; `{SERVER_NAME} tools --pin {} --update` (with the same \
                     options) accepts it, --pin-mode warn serves it anyway",
                    path.display()
                )
            }
            PinError::NoFile(p) => write!(
                f,
                "--pin {}: there is no pin file yet; `tools --pin {} --update` writes it",
                p.display(),
                p.display()
            ),
        }
    }
}

impl std::error::Error for PinError {}

impl From<file::FileError> for PinError {
    fn from(e: file::FileError) -> Self {
        PinError::File(e)
    }
}

/// The pin options of `mcp-serve`.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    pub file: Option<PathBuf>,
    pub mode: PinMode,
}

/// What a started server offers, as the pins need it.
pub(crate) struct Offered<'a> {
    pub backend: &'a Path,
    /// The backend file's digest at start (`None`: it could not be read).
    pub backend_sha256: Option<String>,
    /// The version the backend reports.
    pub version: &'a str,
    pub describe_sha256: &'a str,
    pub tools: &'a ToolSet,
}

/// What the backend watch must expect from now on: the pinned digest, and
/// whether a call to a backend without it is refused.
pub(crate) struct Expect {
    pub sha256: String,
    pub refuse: bool,
}

/// The pins of what is offered now, as the file holds them.
fn snapshot(app: &Offered<'_>) -> Result<Value, PinError> {
    let backend_sha256 = app
        .backend_sha256
        .clone()
        .ok_or_else(|| PinError::Backend(app.backend.to_path_buf(), unreadable()))?;
    let objects = wire::tool_objects(app.tools.iter()).map_err(PinError::Wire)?;
    let tools_sha256 = wire::tools_sha256(&objects);
    let mut tools = Map::new();
    for o in objects {
        let name = o["name"].as_str().unwrap_or_default().to_string();
        tools.insert(name, o);
    }
    Ok(json!({
        "format": FORMAT,
        "server": {"name": SERVER_NAME, "version": SERVER_VERSION},
        "backend": {
            "path": app.backend.display().to_string(),
            "sha256": backend_sha256,
            "version": app.version,
        },
        "describe_sha256": app.describe_sha256,
        "tools_sha256": tools_sha256,
        "tools": tools,
    }))
}

fn unreadable() -> std::io::Error {
    std::io::Error::other("it could not be read at start")
}

/// What differs between the pins on file and now, one line each, and the
/// server versions when only the server changed.
struct Comparison {
    lines: Vec<String>,
    /// Set when the server's version differs from the one that pinned.
    server: Option<(String, String)>,
}

fn compare(pinned: &Value, now: &Value) -> Comparison {
    let mut changes = Vec::new();
    diff::walk(
        "backend",
        "",
        pinned.get("backend"),
        now.get("backend"),
        &mut changes,
    );
    diff::walk(
        "backend",
        "describe_sha256",
        pinned.get("describe_sha256"),
        now.get("describe_sha256"),
        &mut changes,
    );
    let empty = Map::new();
    let tools = |v: &Value| {
        v.get("tools")
            .and_then(Value::as_object)
            .unwrap_or(&empty)
            .clone()
    };
    let (before, after) = (tools(pinned), tools(now));
    let mut names: Vec<&String> = before.keys().chain(after.keys()).collect();
    names.sort();
    names.dedup();
    for name in names {
        let subject = format!("tool `{}`", diff::escape(name));
        diff::walk(
            &subject,
            "",
            before.get(name),
            after.get(name),
            &mut changes,
        );
    }
    let version = |v: &Value| {
        v.pointer("/server/version")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let (was, is) = (version(pinned), version(now));
    Comparison {
        lines: changes.iter().map(diff::Change::line).collect(),
        server: (was != is).then_some((was, is)),
    }
}

fn text(pins: &Value) -> String {
    serde_json::to_string_pretty(pins).unwrap_or_default() + "\n"
}

/// `mcp-serve --pin`: write the pins on first start, else compare; a
/// change refuses the start (or, in warn mode, is logged). On success,
/// what the backend watch must expect from then on (`None`: no `--pin`).
pub(crate) fn at_start(app: &Offered<'_>, settings: &Settings) -> Result<Option<Expect>, PinError> {
    let Some(path) = &settings.file else {
        return Ok(None);
    };
    let now = snapshot(app)?;
    let pinned = match file::load(path)? {
        Some(p) => p,
        None if file::create(path, &text(&now))? => {
            eprintln!(
                "{SERVER_NAME}: pins: first start: pinned the backend and its {} tool{} in {}",
                app.tools.len(),
                if app.tools.len() == 1 { "" } else { "s" },
                path.display()
            );
            return pin_watch(&now, settings.mode);
        }
        // Another server wrote it in the meantime: its pins count.
        None => file::load(path)?.ok_or_else(|| PinError::NoFile(path.clone()))?,
    };
    let c = compare(&pinned, &now);
    if c.lines.is_empty() {
        let server = match &c.server {
            Some((was, is)) => {
                format!("; only the server changed ({was} -> {is}), which pins do not cover")
            }
            None => String::new(),
        };
        eprintln!(
            "{SERVER_NAME}: pins: unchanged ({}){server}",
            path.display()
        );
        return pin_watch(&pinned, settings.mode);
    }
    if settings.mode == PinMode::Refuse {
        return Err(PinError::Changed {
            path: path.clone(),
            lines: c.lines,
        });
    }
    for line in &c.lines {
        eprintln!("{SERVER_NAME}: pins: changed: {line}");
    }
    eprintln!(
        "{SERVER_NAME}: pins: {} change{} from {}; serving anyway (--pin-mode warn)",
        c.lines.len(),
        if c.lines.len() == 1 { "" } else { "s" },
        path.display()
    );
    pin_watch(&pinned, settings.mode)
}

fn pin_watch(pins: &Value, mode: PinMode) -> Result<Option<Expect>, PinError> {
    let sha256 = pins
        .pointer("/backend/sha256")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    Ok(Some(Expect {
        sha256,
        refuse: mode == PinMode::Refuse,
    }))
}

/// `tools --pin FILE --check`: 0 unchanged, 1 changed (each change on
/// stdout); an error (no file, unreadable) is exit code 2 from `main`.
pub(crate) fn check(app: &Offered<'_>, path: &Path) -> Result<(u8, String), PinError> {
    let now = snapshot(app)?;
    let pinned = file::load(path)?.ok_or_else(|| PinError::NoFile(path.to_path_buf()))?;
    let c = compare(&pinned, &now);
    let mut out = String::new();
    for line in &c.lines {
        out.push_str(line);
        out.push('\n');
    }
    if let Some((was, is)) = &c.server {
        out.push_str(&format!(
            "note: only the server's version differs ({was} -> {is}); pins do not cover it\n"
        ));
    }
    Ok((u8::from(!c.lines.is_empty()), out))
}

/// `tools --pin FILE --update`: write the pins of what is offered now,
/// and say what changed.
pub(crate) fn update(app: &Offered<'_>, path: &Path) -> Result<String, PinError> {
    let now = snapshot(app)?;
    let before = file::load(path).ok().flatten();
    file::replace(path, &text(&now))?;
    let mut out = match before {
        None => String::new(),
        Some(p) => compare(&p, &now)
            .lines
            .iter()
            .map(|l| format!("updated: {l}\n"))
            .collect(),
    };
    out.push_str(&format!(
        "pinned the backend and its {} tool{} in {}\n",
        app.tools.len(),
        if app.tools.len() == 1 { "" } else { "s" },
        path.display()
    ));
    Ok(out)
}

/// The digest of the served tool set, for `_meta` (`None` when a tool has
/// no pinned form, which `--pin` refuses at start).
pub(crate) fn served_sha256<'t>(
    tools: impl IntoIterator<Item = &'t crate::tools::Tool>,
) -> Option<String> {
    wire::tool_objects(tools)
        .ok()
        .map(|o| wire::tools_sha256(&o))
}

/// For the benchmark (benches/mcp_bench.rs): the check made before each
/// call, on a backend pinned as it is.
#[doc(hidden)]
pub struct BenchWatch(Watch);

impl BenchWatch {
    pub fn open(backend: &Path) -> std::io::Result<BenchWatch> {
        let mut w = Watch::start(backend)?;
        let sha256 = w.start_sha256();
        w.pin(&sha256, true);
        Ok(BenchWatch(w))
    }

    /// One re-identification; `true` when the backend may run.
    pub fn check(&self) -> bool {
        self.0.check().is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pins(version: &str, description: &str, server: &str) -> Value {
        json!({
            "format": FORMAT,
            "server": {"name": "s", "version": server},
            "backend": {"path": "/b", "sha256": "aa", "version": version},
            "describe_sha256": "dd",
            "tools": {"t": {"name": "t", "description": description}}
        })
    }

    #[test]
    fn a_comparison_names_each_change_and_a_server_only_upgrade() {
        let a = pins("1.0", "Count.", "0.1.0");
        let same = compare(&a, &pins("1.0", "Count.", "0.2.0"));
        assert!(same.lines.is_empty());
        assert_eq!(same.server, Some(("0.1.0".into(), "0.2.0".into())));
        let c = compare(&a, &pins("1.1", "Count\u{202E}.", "0.1.0"));
        assert_eq!(
            c.lines,
            [
                "backend: version: \"1.0\" -> \"1.1\"",
                "tool `t`: description: \"Count.\" -> \"Count\\u{202E}.\""
            ]
        );
        assert_eq!(c.server, None);
        let mut b = a.clone();
        b["tools"]["u"] = json!({"name": "u"});
        b["tools"].as_object_mut().unwrap().remove("t");
        let c = compare(&a, &b);
        assert_eq!(c.lines, ["tool `t`: removed", "tool `u`: new tool"]);
    }
}
