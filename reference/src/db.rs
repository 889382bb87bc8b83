//! The SQLite database: opened read-only by every read-only command, read-write
//! without creation by `draft`, and created only by `init` and the commands
//! tagged `writes`.
//!
//! The journal mode is DELETE, never WAL: a WAL database needs a `-shm` file
//! even to be read, and a read-only command must not create anything.

use std::path::Path;

use rusqlite::{Connection, OpenFlags};
use serde_json::{json, Map, Value};

use crate::error::CliError;

const SCHEMA: &str = include_str!("../schema.sql");
const SEED: &str = include_str!("../seed.sql");

/// The tables, in the order `init` reports them.
pub const TABLES: &[&str] = &[
    "campaigns",
    "drafts",
    "events",
    "approvals",
    "schedule",
    "posts",
    "metrics",
    "engagers",
    "contacts",
];

fn missing(path: &Path) -> CliError {
    CliError::new(
        "database_missing",
        format!(
            "There is no database at {} yet; no tool can create it: the owner creates it with \
             `reachweaver init` at their terminal.",
            path.display()
        ),
    )
}

fn open_error(path: &Path, err: &rusqlite::Error) -> CliError {
    CliError::new(
        "database_error",
        format!(
            "The database at {} could not be opened: {err}.",
            path.display()
        ),
    )
}

/// Opens an existing database for reading only; it is never created.
pub fn open_read_only(path: &Path) -> Result<Connection, CliError> {
    if !path.is_file() {
        return Err(missing(path));
    }
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| open_error(path, &e))?;
    // A second guard beside the open flags: any statement that would write fails.
    conn.pragma_update(None, "query_only", true)
        .map_err(|e| open_error(path, &e))?;
    Ok(conn)
}

/// Opens an existing database for writing, refusing to create a missing one.
pub fn open_existing_read_write(path: &Path) -> Result<Connection, CliError> {
    if !path.is_file() {
        return Err(missing(path));
    }
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| open_error(path, &e))?;
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .map_err(|e| open_error(path, &e))?;
    Ok(conn)
}

/// Opens the database the way the older commands do: creating it, with an
/// empty layout, when it is missing. This is why those commands are `writes`.
pub fn open_or_create(path: &Path) -> Result<Connection, CliError> {
    let conn = Connection::open(path).map_err(|e| open_error(path, &e))?;
    conn.pragma_update(None, "journal_mode", "DELETE")
        .map_err(|e| open_error(path, &e))?;
    let tables: i64 = conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table'",
        [],
        |r| r.get(0),
    )?;
    if tables == 0 {
        conn.execute_batch(SCHEMA)?;
    }
    Ok(conn)
}

/// Creates the database from the built-in layout and example data.
pub fn init(path: &Path, force: bool) -> Result<Value, CliError> {
    if path.exists() {
        if !force {
            return Err(CliError::new(
                "already_exists",
                format!(
                    "A database already exists at {}; give --force to replace it with the example data.",
                    path.display()
                ),
            ));
        }
        std::fs::remove_file(path).map_err(|e| CliError::unreadable(path, &e))?;
        let journal = journal_path(path);
        if journal.exists() {
            std::fs::remove_file(&journal).map_err(|e| CliError::unreadable(&journal, &e))?;
        }
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| {
            CliError::new(
                "io_error",
                format!("The folder {} could not be created: {e}.", parent.display()),
            )
        })?;
    }
    let mut conn = Connection::open(path).map_err(|e| open_error(path, &e))?;
    conn.pragma_update(None, "journal_mode", "DELETE")
        .map_err(|e| open_error(path, &e))?;
    let tx = conn.transaction()?;
    tx.execute_batch(SCHEMA)?;
    tx.execute_batch(SEED)?;
    tx.commit()?;
    let mut counts = Map::new();
    for table in TABLES {
        counts.insert((*table).to_string(), json!(count(&conn, table)?));
    }
    Ok(Value::Object(counts))
}

fn journal_path(path: &Path) -> std::path::PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push("-journal");
    name.into()
}

/// Row count of one of the known tables.
pub fn count(conn: &Connection, table: &str) -> Result<i64, CliError> {
    if !TABLES.contains(&table) {
        return Err(CliError::new(
            "database_error",
            format!("{table} is not a known table."),
        ));
    }
    Ok(conn.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))?)
}

pub fn schema_version(conn: &Connection) -> Result<Option<String>, CliError> {
    use rusqlite::OptionalExtension;
    Ok(conn
        .query_row(
            "SELECT value FROM meta WHERE key = 'schema_version'",
            [],
            |r| r.get(0),
        )
        .optional()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_only_connection_refuses_every_write() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data").join("reachweaver.db");
        init(&path, false).unwrap();
        let before = std::fs::read(&path).unwrap();
        let conn = open_read_only(&path).unwrap();
        let err = conn
            .execute("UPDATE drafts SET status = 'published'", [])
            .unwrap_err();
        assert!(
            err.to_string().contains("readonly") || err.to_string().contains("read-only"),
            "{err}"
        );
        assert!(conn
            .execute_batch("PRAGMA query_only = OFF; DELETE FROM drafts;")
            .is_err());
        drop(conn);
        assert_eq!(std::fs::read(&path).unwrap(), before);
        let names: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("reachweaver.db")]);
    }

    #[test]
    fn init_uses_the_delete_journal_and_refuses_to_replace() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("reachweaver.db");
        let counts = init(&path, false).unwrap();
        assert_eq!(counts["drafts"], 12);
        let conn = open_read_only(&path).unwrap();
        let mode: String = conn
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "delete");
        drop(conn);
        assert_eq!(init(&path, false).unwrap_err().code(), "already_exists");
        assert!(init(&path, true).is_ok());
    }

    #[test]
    fn missing_databases_are_not_created() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("reachweaver.db");
        assert_eq!(
            open_read_only(&path).unwrap_err().code(),
            "database_missing"
        );
        assert_eq!(
            open_existing_read_write(&path).unwrap_err().code(),
            "database_missing"
        );
        assert!(!path.exists());
    }
}
