//! Which names look secret: environment variables (the filter for runs
//! and the values scrubbed from results) and keys in documents and text.
//!
//! One list and one rule serve both, so a variable withheld from runs is
//! exactly a key whose value is redacted. A name is split into words (`_`,
//! `-`, `.`, spaces and camelCase humps separate them) and is secret when
//! one of its words is a secret word and every word after it only says how
//! the secret is stored (`SECRET_KEY_BASE`, `client-key-data`). So
//! `token_count`, `session_id`, `max_tokens` and `TOKENIZER_PATH` are not
//! secret while `SMTP_PASS`, `DB_PWD` and `AccountKey` are.

/// Words that make a name secret wherever a secret word may stand.
const SECRET_WORDS: &[&str] = &[
    "token",
    "secret",
    "secrets",
    "password",
    "passwd",
    "pass",
    "passphrase",
    "apikey",
    "credential",
    "credentials",
    "auth",
    "authorization",
    "cookie",
    "cookies",
    "session",
    "dsn",
    "pat",
    "bearer",
    "signing",
    "private",
];

/// A secret word only after another word (`DB_PWD`; the shell's `PWD`
/// alone is the working folder).
const SECRET_AFTER_A_WORD: &[&str] = &["pwd"];

/// Words after a secret word that only say how it is stored.
const STORAGE_WORDS: &[&str] = &[
    "base", "data", "b64", "base64", "value", "hex", "pem", "der", "raw", "str", "string",
];

/// `key` and `keys` are secret after any word but these (a sort key, a
/// public key and an issue key are names, not secrets), and never alone.
const ORDINARY_KEY_QUALIFIERS: &[&str] = &[
    "sort",
    "primary",
    "partition",
    "foreign",
    "cache",
    "public",
    "idempotency",
    "row",
    "object",
    "map",
    "lookup",
    "hash",
    "range",
    "group",
    "dedup",
    "dedupe",
    "unique",
    "composite",
    "index",
    "routing",
    "shard",
    "withheld",
    "issue",
    "project",
    "s3",
    "file",
    "bucket",
    "route",
    "state",
    "event",
    "item",
    "entity",
    "record",
    "node",
    "tag",
    "label",
    "field",
    "column",
    "dict",
    "json",
    "message",
    "translation",
    "i18n",
    "locale",
    "short",
    "shortcut",
    "hot",
    "music",
    "next",
    "prev",
    "previous",
    "start",
    "end",
    "first",
    "last",
    "page",
    "resume",
    "cursor",
    "config",
    "setting",
    "settings",
    "meta",
    "metadata",
    "stream",
    "queue",
    "topic",
    "redis",
    "kms",
    "gpg",
];

/// `keys` (plural) is secret only after one of these (`api_keys`), as a
/// list of keys is more often a list of names.
const SECRET_KEYS_QUALIFIERS: &[&str] = &[
    "api",
    "access",
    "private",
    "signing",
    "secret",
    "client",
    "encryption",
    "master",
    "license",
    "auth",
    "session",
    "shared",
    "webhook",
    "account",
    "app",
    "ssh",
];

/// Whether `words[i]` makes the name secret, given the words before it.
fn is_secret_word(words: &[&str], i: usize) -> bool {
    let w = words[i];
    let is = |list: &[&str]| list.iter().any(|s| w.eq_ignore_ascii_case(s));
    if is(SECRET_WORDS) {
        return true;
    }
    let before = i.checked_sub(1).map(|b| words[b]);
    if is(SECRET_AFTER_A_WORD) {
        return before.is_some();
    }
    let Some(before) = before else {
        return false;
    };
    let before_is = |list: &[&str]| list.iter().any(|s| before.eq_ignore_ascii_case(s));
    if w.eq_ignore_ascii_case("key") {
        return !before_is(ORDINARY_KEY_QUALIFIERS);
    }
    if w.eq_ignore_ascii_case("keys") {
        return before_is(SECRET_KEYS_QUALIFIERS);
    }
    false
}

/// One rule for every name: a secret word followed only by storage words
/// (and, for `ACCESS_KEY`, an `ID`: AWS's key id travels with its secret).
pub fn is_secret_name(name: &str) -> bool {
    // Most names hold no part of a secret word: say so before splitting.
    if !holds_a_hint(name) {
        return false;
    }
    let words: Vec<&str> = words(name).collect();
    let Some(mut i) = words.len().checked_sub(1) else {
        return false;
    };
    loop {
        if is_secret_word(&words, i) {
            return true;
        }
        let w = words[i];
        let storage = STORAGE_WORDS.iter().any(|s| w.eq_ignore_ascii_case(s));
        let access_key_id = w.eq_ignore_ascii_case("id")
            && i >= 2
            && words[i - 1].eq_ignore_ascii_case("key")
            && words[i - 2].eq_ignore_ascii_case("access");
        if !(storage || access_key_id) || i == 0 {
            return false;
        }
        i -= 1;
    }
}

/// Every secret word contains one of these.
pub(super) const HINTS: &[&str] = &[
    "tok", "secret", "pas", "pwd", "key", "auth", "cookie", "session", "dsn", "pat", "bearer",
    "sign", "priv", "cred",
];

/// Does `name` hold one of [`HINTS`], in any case? One pass over the
/// name: a hint is compared only where its first letter stands.
fn holds_a_hint(name: &str) -> bool {
    let b = name.as_bytes();
    (0..b.len()).any(|i| {
        let c = b[i].to_ascii_lowercase();
        HINTS.iter().any(|h| {
            let h = h.as_bytes();
            h[0] == c && b.len() - i >= h.len() && b[i..i + h.len()].eq_ignore_ascii_case(h)
        })
    })
}

/// A key in a document (or in a `key: value` line) whose value is a
/// secret: the same rule as for variables.
pub fn is_secret_key(key: &str) -> bool {
    is_secret_name(key)
}

/// Secret words whose values are often ordinary text (a calendar's
/// `session: Morning keynote`): their value is hidden only when it looks
/// generated, and they do not hide whole objects.
pub fn is_weak_secret_key(key: &str) -> bool {
    words(key)
        .last()
        .is_some_and(|w| w.eq_ignore_ascii_case("session"))
}

/// The words of a name: split at anything not a letter or digit, and
/// where a lower-case letter or digit is followed by an upper-case one
/// (`accessToken`) or a run of capitals ends (`APIKey` -> `API`, `Key`).
fn words(name: &str) -> impl Iterator<Item = &str> {
    name.split(|c: char| !c.is_ascii_alphanumeric())
        .flat_map(camel_words)
        .filter(|w| !w.is_empty())
}

fn camel_words(part: &str) -> impl Iterator<Item = &str> {
    let b = part.as_bytes();
    let mut cuts = vec![0];
    for i in 1..b.len() {
        let (prev, cur) = (b[i - 1], b[i]);
        let next_lower = b.get(i + 1).is_some_and(u8::is_ascii_lowercase);
        if cur.is_ascii_uppercase()
            && (prev.is_ascii_lowercase()
                || prev.is_ascii_digit()
                || (prev.is_ascii_uppercase() && next_lower))
        {
            cuts.push(i);
        }
    }
    cuts.push(b.len());
    // Every cut is at an ASCII byte, so each slice is valid UTF-8.
    (0..cuts.len() - 1).map(move |k| &part[cuts[k]..cuts[k + 1]])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The quick look before splitting: a hint anywhere, in any case, and
    /// only a whole hint (a name ending in part of one holds none).
    #[test]
    fn holds_a_hint_finds_whole_hints_anywhere() {
        for name in ["TOKEN", "my_pwd", "xcookiex", "apikey", "Bearer", "DSN"] {
            assert!(holds_a_hint(name), "{name}");
        }
        for name in ["", "username", "id", "ke", "hostname", "MESSAGE_ID"] {
            assert!(!holds_a_hint(name), "{name}");
        }
    }

    /// `ACCESS_KEY_ID` counts only with `access` right before `key`, at any
    /// depth of the name.
    #[test]
    fn an_access_key_id_needs_access_right_before_key() {
        assert!(is_secret_name("OLD_PROD_AWS_ACCESS_KEY_ID"));
        assert!(is_secret_name("A_B_C_ACCESS_KEY_ID"));
        assert!(!is_secret_name("A_B_ACCESS_C_KEY_ID"));
        assert!(!is_secret_name("ACCESS_KEY_THING_ID"));
    }

    #[test]
    fn words_split_on_separators_and_camel_humps() {
        fn w(s: &str) -> Vec<&str> {
            words(s).collect()
        }
        assert_eq!(w("GIT_AUTHOR_NAME"), ["GIT", "AUTHOR", "NAME"]);
        assert_eq!(w("accessToken"), ["access", "Token"]);
        assert_eq!(w("APIKey"), ["API", "Key"]);
        assert_eq!(w("x-api-key"), ["x", "api", "key"]);
        assert_eq!(w("session.cookie"), ["session", "cookie"]);
        assert_eq!(w("oauth2Token"), ["oauth2", "Token"]);
        assert_eq!(w("__"), Vec::<&str>::new());
    }

    #[test]
    fn secret_environment_names() {
        for name in [
            "GITHUB_TOKEN",
            "DB_PASSWORD",
            "MY_SECRET",
            "SMTP_PASSWD",
            "SERVICE_APIKEY",
            "AWS_CREDENTIALS",
            "GOOGLE_CREDENTIAL",
            "SESSION_COOKIE",
            "OPENAI_API_KEY",
            "SSH_PRIVATE_KEY",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_ACCESS_KEY_ID",
            "X_AUTH_TOKEN",
            "token",
            "REACHWEAVER_SMTP_PASS",
            "REACHWEAVER_SIGNING_KEY",
            "REACHWEAVER_PASSPHRASE",
            "SENTRY_DSN",
            "GITHUB_PAT",
            "STRIPE_KEY",
            "APP_PRIVATE",
            "DESKTOP_SESSION",
            "signingKey",
        ] {
            assert!(is_secret_name(name), "{name}");
        }
        for name in [
            "GIT_AUTHOR_NAME",
            "PATH",
            "HOME",
            "REACHWEAVER_HOME",
            "TOKENIZER_PATH",
            "TOKENIZER",
            "SECRETS_DIR",
            "PASSWORDLESS",
            "LC_ALL",
            "KEYBOARD",
            "KEYMAP",
            "PASSAGE",
            "PATTERN",
            "SESSIONS_DIR",
            "PWD",
            "OLDPWD",
        ] {
            assert!(!is_secret_name(name), "{name}");
        }
    }

    #[test]
    fn secret_document_keys_by_their_last_word() {
        for key in [
            "token",
            "api_key",
            "apiKey",
            "x-api-key",
            "client_secret",
            "clientSecret",
            "password",
            "smtp_password",
            "auth_token",
            "accessToken",
            "passwd",
            "db_pass",
            "passphrase",
            "private_key",
            "signing_key",
            "access_key",
            "credentials",
            "credential",
            "auth",
            "Authorization",
            "cookie",
            "Set-Cookie",
            "session",
            "sentry_dsn",
            "github_pat",
            "bearer",
            "APIKEY",
        ] {
            assert!(is_secret_key(key), "{key}");
        }
        for key in [
            "token_count",
            "public_id",
            "max_tokens",
            "tokens",
            "session_id",
            "key",
            "sort_key",
            "keychain",
            "keyword",
            "author",
            "password_hint",
            "pass_rate",
            "path",
            "pattern",
            "token_looks_usable",
            "withheld_keys",
            "",
            "_",
        ] {
            assert!(!is_secret_key(key), "{key}");
        }
    }

    #[test]
    fn a_lower_case_word_joined_to_capitals_is_two_words() {
        fn w(s: &str) -> Vec<&str> {
            words(s).collect()
        }
        assert_eq!(w("dbPASSWORD"), ["db", "PASSWORD"]);
        assert_eq!(w("clientSECRET"), ["client", "SECRET"]);
        assert_eq!(w("v2TOKEN"), ["v2", "TOKEN"]);
        // A run of capitals ends where the next word starts.
        assert_eq!(w("myAPIKey"), ["my", "API", "Key"]);
        assert_eq!(w("PASSWORD"), ["PASSWORD"]);
        assert_eq!(w("A"), ["A"]);
        assert_eq!(w("aB"), ["a", "B"]);
        assert_eq!(w("Ab"), ["Ab"]);
        assert_eq!(w("ABc"), ["A", "Bc"]);
        assert_eq!(w("é_TOKEN"), ["TOKEN"]);
        assert!(is_secret_name("dbPASSWORD"));
        assert!(is_secret_key("clientSECRET"));
        assert!(is_secret_key("dbPASSWORD"));
        assert!(!is_secret_key("dbPASSWORDHint"));
        assert!(!is_secret_name("PASSWORDLESSmode"));
    }

    #[test]
    fn class6_one_rule_for_variables_and_keys() {
        // Every name is judged the same way as a variable and as a key.
        for name in [
            "AccountKey",
            "APP_KEY",
            "SECRET_KEY_BASE",
            "client-key-data",
            "STRIPE_KEY",
            "REACHWEAVER_SMTP_AUTH",
            "REACHWEAVER_DB_PWD",
            "REACHWEAVER_API_KEYS",
            "DB_PWD",
            "auth",
            "x-api-key",
            "AWS_ACCESS_KEY_ID",
            "Proxy-Authorization",
            "SharedAccessKey",
            "TOKEN_VALUE",
        ] {
            assert!(is_secret_name(name), "{name}");
            assert!(is_secret_key(name), "{name}");
        }
        for name in [
            "key",
            "keys",
            "sort_key",
            "public_key",
            "issue_key",
            "withheld_keys",
            "REACHWEAVER_SORT_KEYS",
            "PWD",
            "session_id",
            "token_count",
            "SECRETS_DIR",
            "REACHWEAVER_TOKEN_FILE",
            "author",
            "AUTHOR_NAME",
            "KEY_ID",
        ] {
            assert!(!is_secret_name(name), "{name}");
            assert!(!is_secret_key(name), "{name}");
        }
        assert!(is_weak_secret_key("session"));
        assert!(is_weak_secret_key("DESKTOP_SESSION"));
        assert!(!is_weak_secret_key("session_token"));
        assert!(!is_weak_secret_key("password"));
    }
}
