//! Which names look secret: environment variables (the filter for runs
//! and the values scrubbed from results) and keys in documents.
//!
//! Both split a name into words (`_`, `-`, `.`, spaces and camelCase
//! humps separate them) and compare whole words, so `KEYBOARD`,
//! `TOKENIZER_PATH` and `GIT_AUTHOR_NAME` are not secret while `SMTP_PASS`
//! is. They differ in how much of the name must be secret: a variable is
//! withheld when any word is (withholding one costs little), while a
//! document key is redacted only when its last word names a secret, so
//! `token_count`, `session_id` and `max_tokens` stay readable.

/// A word of a variable name that makes the whole variable secret.
const ENV_WORDS: &[&str] = &[
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "PASS",
    "PASSPHRASE",
    "SIGNING",
    "PRIVATE",
    "KEY",
    "APIKEY",
    "DSN",
    "PAT",
    "COOKIE",
    "SESSION",
    "CREDENTIAL",
    "CREDENTIALS",
];

/// A last word that makes a document key secret on its own.
const KEY_LAST_WORDS: &[&str] = &[
    "token",
    "secret",
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
    "session",
    "dsn",
    "pat",
    "bearer",
];

/// Words that make a following `key` secret (`api_key`, `x-api-key`, `signingKey`).
const KEY_QUALIFIERS: &[&str] = &[
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
];

/// One rule for the environment: any whole word is a secret word.
pub fn is_secret_name(name: &str) -> bool {
    words(name).any(|w| ENV_WORDS.iter().any(|s| w.eq_ignore_ascii_case(s)))
}

/// A key in a document (or in a `key: value` line) whose value is a secret.
pub fn is_secret_key(key: &str) -> bool {
    let mut last = None;
    let mut before = None;
    for w in words(key) {
        before = last;
        last = Some(w);
    }
    let Some(last) = last else {
        return false;
    };
    if KEY_LAST_WORDS.iter().any(|s| last.eq_ignore_ascii_case(s)) {
        return true;
    }
    last.eq_ignore_ascii_case("key")
        && before.is_some_and(|b| KEY_QUALIFIERS.iter().any(|q| b.eq_ignore_ascii_case(q)))
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
}
