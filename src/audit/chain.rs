//! The chain: each line carries the SHA-256 of the line before it in the
//! same file (`prev`), and, under an owner's key, an HMAC-SHA-256 of
//! itself (`hmac`, always the last member), so a writer without the key
//! cannot rebuild the chain after an edit.

use std::path::Path;

use hmac::{Hmac, Mac};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// `prev` of a file's genesis record when the line before is not known.
pub(crate) const GENESIS_PREV: &str =
    "0000000000000000000000000000000000000000000000000000000000000000";

/// Domain prefixes: a line's HMAC and an arguments HMAC never share an input.
const LINE_DOMAIN: &[u8] = b"reachweaver-mcp audit line\n";
const ARGS_DOMAIN: &[u8] = b"reachweaver-mcp audit arguments\n";

/// The shortest key accepted, in bytes.
pub(crate) const MIN_KEY_BYTES: usize = 16;

pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The owner's HMAC key: the bytes of `--audit-key FILE`.
#[derive(Clone)]
pub(crate) struct Key(Vec<u8>);

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key(..)")
    }
}

/// Why a key file is refused.
#[derive(Debug)]
pub(crate) enum KeyError {
    Read(std::io::Error),
    Short(usize),
    Readable(u32),
    InsideLogFolder,
}

impl std::fmt::Display for KeyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeyError::Read(e) => write!(f, "cannot read the key file: {e}"),
            KeyError::Short(n) => write!(
                f,
                "the key file holds {n} bytes; at least {MIN_KEY_BYTES} are needed \
                 (for example: head -c 32 /dev/urandom > FILE)"
            ),
            KeyError::Readable(mode) => write!(
                f,
                "the key file is open to other users (mode {mode:o}); make it readable by its \
                 owner only (chmod 600 FILE)"
            ),
            KeyError::InsideLogFolder => write!(
                f,
                "the key file is in the audit log's folder; keep it elsewhere, so whoever may \
                 rewrite the log's folder does not get the key with it"
            ),
        }
    }
}

impl std::error::Error for KeyError {}

impl Key {
    pub(crate) fn from_bytes(bytes: Vec<u8>) -> Result<Key, KeyError> {
        if bytes.len() < MIN_KEY_BYTES {
            return Err(KeyError::Short(bytes.len()));
        }
        Ok(Key(bytes))
    }

    /// Read a key file: not in the log's folder (`log`, when given), not
    /// open to other users, at least [`MIN_KEY_BYTES`] long.
    pub(crate) fn load(path: &Path, log: Option<&Path>) -> Result<Key, KeyError> {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(path).map_err(KeyError::Read)?;
        if meta.mode() & 0o007 != 0 {
            return Err(KeyError::Readable(meta.mode() & 0o777));
        }
        if let Some(log) = log {
            let folder = |p: &Path| {
                let abs = std::path::absolute(p).ok()?;
                let parent = abs.parent()?.to_path_buf();
                Some(std::fs::canonicalize(&parent).unwrap_or(parent))
            };
            if folder(path).is_some() && folder(path) == folder(log) {
                return Err(KeyError::InsideLogFolder);
            }
        }
        Key::from_bytes(std::fs::read(path).map_err(KeyError::Read)?)
    }

    fn mac(&self, domain: &[u8], data: &[u8]) -> String {
        // Any key length is valid for HMAC.
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(&self.0) else {
            return String::new();
        };
        mac.update(domain);
        mac.update(data);
        hex(&mac.finalize().into_bytes())
    }

    /// HMAC of the canonical (RFC 8785) arguments.
    pub(crate) fn arguments(&self, canonical: &str) -> String {
        self.mac(ARGS_DOMAIN, canonical.as_bytes())
    }

    fn line(&self, unsigned: &str) -> String {
        self.mac(LINE_DOMAIN, unsigned.as_bytes())
    }

    /// Does `hmac` sign `unsigned` under this key? (constant time)
    fn verifies(&self, unsigned: &str, hmac: &str) -> bool {
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(&self.0) else {
            return false;
        };
        mac.update(LINE_DOMAIN);
        mac.update(unsigned.as_bytes());
        let Some(want) = unhex(hmac) else {
            return false;
        };
        mac.verify_slice(&want).is_ok()
    }
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The line for `body` after the line whose hash is `prev`: `prev` joins
/// the body, and under a key the line ends with its `hmac`.
pub(crate) fn seal(mut body: Map<String, Value>, prev: &str, key: Option<&Key>) -> String {
    body.insert("prev".into(), Value::String(prev.into()));
    body.remove("hmac");
    let unsigned = Value::Object(body).to_string();
    match key {
        None => unsigned,
        Some(key) => sign(&unsigned, key),
    }
}

fn sign(unsigned: &str, key: &Key) -> String {
    let mac = key.line(unsigned);
    let open = &unsigned[..unsigned.len() - 1];
    format!("{open},\"hmac\":\"{mac}\"}}")
}

/// Split a signed line into the text its HMAC signs and the HMAC.
pub(crate) fn split_hmac(line: &str) -> Option<(String, &str)> {
    const TAIL: usize = ",\"hmac\":\"".len() + 64 + "\"}".len();
    if line.len() < TAIL + 1 || !line.is_char_boundary(line.len() - TAIL) {
        return None;
    }
    let (head, tail) = line.split_at(line.len() - TAIL);
    let mac = tail.strip_prefix(",\"hmac\":\"")?.strip_suffix("\"}")?;
    mac.bytes()
        .all(|b| b.is_ascii_hexdigit())
        .then(|| (format!("{head}}}"), mac))
}

/// Does this line carry a valid HMAC under `key`?
pub(crate) fn hmac_ok(line: &str, key: &Key) -> bool {
    split_hmac(line).is_some_and(|(unsigned, mac)| key.verifies(&unsigned, mac))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key(b: u8) -> Key {
        Key::from_bytes(vec![b; 32]).unwrap()
    }

    fn body(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn a_line_names_the_hash_of_the_line_before() {
        let first = seal(body(json!({"type": "genesis"})), GENESIS_PREV, None);
        let second = seal(
            body(json!({"type": "stop"})),
            &sha256_hex(first.as_bytes()),
            None,
        );
        let v: Value = serde_json::from_str(&second).unwrap();
        assert_eq!(v["prev"], sha256_hex(first.as_bytes()));
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn the_hmac_is_the_last_member_and_signs_the_rest() {
        let line = seal(
            body(json!({"type": "call", "n": 1})),
            GENESIS_PREV,
            Some(&key(1)),
        );
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v.as_object().unwrap().keys().next_back().unwrap(), "hmac");
        assert!(hmac_ok(&line, &key(1)));
        assert!(!hmac_ok(&line, &key(2)));
        let edited = line.replace("\"n\":1", "\"n\":2");
        assert!(!hmac_ok(&edited, &key(1)));
        let unsigned = seal(body(json!({"type": "call"})), GENESIS_PREV, None);
        assert!(!hmac_ok(&unsigned, &key(1)));
    }

    #[test]
    fn hmac_sha256_matches_rfc_4231_case_2_without_a_domain() {
        let mut mac = Hmac::<Sha256>::new_from_slice(b"Jefe").unwrap();
        mac.update(b"what do ya want for nothing?");
        assert_eq!(
            hex(&mac.finalize().into_bytes()),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn argument_and_line_macs_differ_for_the_same_text() {
        let k = key(3);
        assert_ne!(k.arguments("{}"), k.line("{}"));
        assert_eq!(k.arguments("{}").len(), 64);
    }

    #[test]
    fn short_keys_are_refused_at_the_boundary() {
        assert!(matches!(
            Key::from_bytes(vec![0; MIN_KEY_BYTES - 1]),
            Err(KeyError::Short(15))
        ));
        assert!(Key::from_bytes(vec![0; MIN_KEY_BYTES]).is_ok());
    }

    #[test]
    fn key_files_open_to_others_or_beside_the_log_are_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let other = tempfile::tempdir().unwrap();
        let k = dir.path().join("key");
        std::fs::write(&k, [7u8; 32]).unwrap();
        std::fs::set_permissions(&k, std::fs::Permissions::from_mode(0o604)).unwrap();
        assert!(matches!(
            Key::load(&k, None),
            Err(KeyError::Readable(0o604))
        ));
        std::fs::set_permissions(&k, std::fs::Permissions::from_mode(0o640)).unwrap();
        assert!(Key::load(&k, None).is_ok());
        assert!(matches!(
            Key::load(&k, Some(&dir.path().join("audit.log"))),
            Err(KeyError::InsideLogFolder)
        ));
        assert!(matches!(
            Key::load(&k, Some(&k)),
            Err(KeyError::InsideLogFolder)
        ));
        assert!(Key::load(&k, Some(&other.path().join("audit.log"))).is_ok());
    }
}
