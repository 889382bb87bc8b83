//! Reading the owner's workspace files: campaigns, brand, accounts, profile,
//! drafts, logs and templates.
//!
//! Campaign, brand, accounts and profile files may be YAML or JSON; both are
//! turned into one JSON value so every command works on a single shape.
//! YAML is read with `yaml-rust2`, a maintained pure-Rust parser.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::{Map, Number, Value};
use yaml_rust2::{Yaml, YamlLoader};

use crate::error::CliError;

/// Workspace files are small; a larger one is a mistake, not something to read.
const MAX_FILE_BYTES: u64 = 8 * 1024 * 1024;

pub fn read_text(path: &Path) -> Result<String, CliError> {
    let file = fs::File::open(path).map_err(|e| CliError::unreadable(path, &e))?;
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| CliError::unreadable(path, &e))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(CliError::new(
            "file_too_large",
            format!(
                "{} is larger than {} bytes; give a smaller file.",
                path.display(),
                MAX_FILE_BYTES
            ),
        ));
    }
    String::from_utf8(bytes).map_err(|_| CliError::invalid_file(path, "it is not UTF-8 text"))
}

/// Loads a YAML or JSON document (chosen by the `.json` extension).
pub fn load_document(path: &Path) -> Result<Value, CliError> {
    let text = read_text(path)?;
    let is_json = path.extension().is_some_and(|e| e == "json");
    if is_json {
        return serde_json::from_str(&text).map_err(|e| CliError::invalid_file(path, e));
    }
    let docs = YamlLoader::load_from_str(&text).map_err(|e| CliError::invalid_file(path, e))?;
    match docs.into_iter().next() {
        Some(doc) => yaml_to_json(&doc).map_err(|why| CliError::invalid_file(path, why)),
        None => Ok(Value::Null),
    }
}

fn yaml_to_json(yaml: &Yaml) -> Result<Value, String> {
    Ok(match yaml {
        Yaml::Null => Value::Null,
        Yaml::Boolean(b) => Value::Bool(*b),
        Yaml::Integer(i) => Value::Number(Number::from(*i)),
        Yaml::Real(text) => {
            let f: f64 = text
                .parse()
                .map_err(|_| format!("{text} is not a number this backend understands"))?;
            Number::from_f64(f)
                .map(Value::Number)
                .ok_or_else(|| format!("{text} is not a finite number"))?
        }
        Yaml::String(s) => Value::String(s.clone()),
        Yaml::Array(items) => {
            Value::Array(items.iter().map(yaml_to_json).collect::<Result<_, _>>()?)
        }
        Yaml::Hash(hash) => {
            let mut map = Map::new();
            for (k, v) in hash {
                let key = match k {
                    Yaml::String(s) => s.clone(),
                    Yaml::Integer(i) => i.to_string(),
                    Yaml::Boolean(b) => b.to_string(),
                    _ => return Err("a mapping key is not a plain scalar".into()),
                };
                map.insert(key, yaml_to_json(v)?);
            }
            Value::Object(map)
        }
        Yaml::Alias(_) => return Err("YAML aliases are not supported".into()),
        Yaml::BadValue => return Err("the document holds a value that cannot be read".into()),
    })
}

/// Regular files directly in `dir` whose name ends with one of `suffixes`,
/// sorted by name so every listing is stable. A missing folder is empty.
pub fn list_files(dir: &Path, suffixes: &[&str]) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            !name.starts_with('.') && suffixes.iter().any(|s| name.ends_with(s))
        })
        .collect();
    files.sort();
    files
}

/// A file's path relative to the home folder when it lies beneath it, for
/// output that does not depend on where the workspace sits.
pub fn display_relative(path: &Path, home: &Path) -> String {
    path.strip_prefix(home)
        .unwrap_or(path)
        .to_string_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_becomes_json_in_order() {
        let docs =
            YamlLoader::load_from_str("b: 1\na: [x, 2.5, true, null]\nc: '09:00'\n").unwrap();
        let v = yaml_to_json(&docs[0]).unwrap();
        assert_eq!(
            serde_json::to_string(&v).unwrap(),
            r#"{"b":1,"a":["x",2.5,true,null],"c":"09:00"}"#
        );
    }
}
