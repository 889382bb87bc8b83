//! The command set: where each command is described and what it runs.
//!
//! Commands are grouped by what they read: the workspace as a whole, campaign
//! files, draft texts, the database, and the commands a server must never offer
//! (writes, owner-only, network, secrets, interactive), which exist here so the
//! catalog is as varied as a real ReachWeaver's.

mod campaigns;
mod database;
mod drafts;
mod restricted;
mod workspace;

use std::path::{Path, PathBuf};

use rusqlite::Connection;
use serde_json::Value;

use crate::analysis::Brand;
use crate::args::Globals;
use crate::error::CliError;
use crate::files;
use crate::spec::CommandSpec;

/// Every command, in catalog order, each with its `--format` flag.
pub fn registry() -> Vec<CommandSpec> {
    let mut all = Vec::new();
    all.extend(workspace::specs());
    all.extend(campaigns::specs());
    all.extend(drafts::specs());
    all.extend(database::specs());
    all.extend(restricted::specs());
    all.into_iter().map(CommandSpec::with_format_flag).collect()
}

/// What a command produced: its document, and whether it found something.
#[derive(Debug)]
pub struct Outcome {
    pub doc: Value,
    pub findings: bool,
    /// Text output when the generic layout of `doc` is not what a person wants.
    pub text: Option<String>,
}

impl Outcome {
    pub fn clean(doc: Value) -> Self {
        Outcome {
            doc,
            findings: false,
            text: None,
        }
    }

    pub fn findings_if(findings: bool, doc: Value) -> Self {
        Outcome {
            doc,
            findings,
            text: None,
        }
    }

    pub fn with_text(mut self, text: String) -> Self {
        self.text = Some(text);
        self
    }
}

/// Where the workspace's files are, resolved once from the global options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paths {
    pub home: PathBuf,
    pub db: PathBuf,
    pub accounts: PathBuf,
    pub profile: Option<PathBuf>,
}

/// A path made absolute against `cwd`, with `.` parts dropped; nothing is
/// resolved on disk, so a path that does not exist yet still has one spelling.
pub fn absolute(path: &Path, cwd: &Path) -> PathBuf {
    let joined = if path.is_absolute() {
        path.to_path_buf()
    } else {
        cwd.join(path)
    };
    joined
        .components()
        .filter(|c| !matches!(c, std::path::Component::CurDir))
        .collect()
}

impl Paths {
    pub fn resolve(globals: &Globals, env_home: Option<&str>, cwd: &Path) -> Paths {
        let home = match (&globals.home, env_home.filter(|h| !h.is_empty())) {
            (Some(h), _) => absolute(Path::new(h), cwd),
            (None, Some(h)) => absolute(Path::new(h), cwd),
            (None, None) => absolute(Path::new("."), cwd),
        };
        let db = globals
            .db
            .as_ref()
            .map(|d| absolute(Path::new(d), cwd))
            .unwrap_or_else(|| home.join("data").join("reachweaver.db"));
        let accounts = globals
            .accounts
            .as_ref()
            .map(|a| absolute(Path::new(a), cwd))
            .unwrap_or_else(|| home.join("accounts.yaml"));
        let profile = match &globals.profile {
            Some(p) => Some(absolute(Path::new(p), cwd)),
            None => Some(home.join("profile.yaml")).filter(|p| p.is_file()),
        };
        Paths {
            home,
            db,
            accounts,
            profile,
        }
    }
}

/// What every command may consult: the resolved paths, the working folder for
/// relative file arguments, and the catalog itself (for `describe`).
pub struct Ctx<'a> {
    pub paths: Paths,
    pub cwd: PathBuf,
    pub commands: &'a [CommandSpec],
}

impl Ctx<'_> {
    pub fn db_read_only(&self) -> Result<Connection, CliError> {
        crate::db::open_read_only(&self.paths.db)
    }

    /// A file argument as the command line gave it, made absolute.
    pub fn file_arg(&self, path: &Path) -> PathBuf {
        absolute(path, &self.cwd)
    }

    pub fn brand_path(&self) -> PathBuf {
        self.paths.home.join("brand").join("voice.yaml")
    }

    pub fn brand(&self) -> Result<Brand, CliError> {
        let path = self.brand_path();
        if !path.is_file() {
            return Err(CliError::new(
                "file_not_found",
                format!(
                    "There is no brand file at {}; create brand/voice.yaml in the workspace.",
                    path.display()
                ),
            ));
        }
        Brand::from_value(&files::load_document(&path)?, &path)
    }

    /// The brand rules when the workspace has a brand file, else none.
    pub fn brand_if_present(&self) -> Result<Option<Brand>, CliError> {
        if self.brand_path().is_file() {
            self.brand().map(Some)
        } else {
            Ok(None)
        }
    }

    pub fn accounts(&self) -> Result<Vec<Account>, CliError> {
        let path = &self.paths.accounts;
        let doc = files::load_document(path)?;
        let list = match doc.get("accounts") {
            Some(Value::Array(items)) => items.clone(),
            None | Some(Value::Null) => Vec::new(),
            Some(_) => return Err(CliError::invalid_file(path, "accounts must be a list")),
        };
        list.iter()
            .map(|item| {
                let field = |k: &str| item.get(k).and_then(Value::as_str).map(str::to_string);
                let channel = field("channel")
                    .ok_or_else(|| CliError::invalid_file(path, "every account needs a channel"))?;
                let handle = field("handle")
                    .ok_or_else(|| CliError::invalid_file(path, "every account needs a handle"))?;
                let secret_keys = item
                    .as_object()
                    .map(|m| {
                        m.keys()
                            .filter(|k| crate::commands::workspace::looks_secret(k))
                            .cloned()
                            .collect()
                    })
                    .unwrap_or_default();
                Ok(Account {
                    channel,
                    handle,
                    display_name: field("display_name"),
                    keychain: field("keychain"),
                    secret_keys,
                })
            })
            .collect()
    }

    /// Accounts when the accounts file exists, else none.
    pub fn accounts_if_present(&self) -> Result<Vec<Account>, CliError> {
        if self.paths.accounts.is_file() {
            self.accounts()
        } else {
            Ok(Vec::new())
        }
    }
}

/// One account from the accounts file. Secret values are never kept: only
/// the names of the keys that hold them.
#[derive(Debug, Clone)]
pub struct Account {
    pub channel: String,
    pub handle: String,
    pub display_name: Option<String>,
    pub keychain: Option<String>,
    pub secret_keys: Vec<String>,
}

/// Runs one parsed command line.
pub fn dispatch(
    ctx: &Ctx,
    spec: &CommandSpec,
    args: &crate::args::Args,
) -> Result<Outcome, CliError> {
    (spec.run)(ctx, args)
}
