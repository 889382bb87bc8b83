//! Token shapes: what a credential looks like whatever it is called.
//!
//! Each pattern's `secret` group (or the whole match) is replaced, so text
//! around it, such as `Bearer ` or a URL's user and host, stays readable.
//! Word boundaries are ASCII (`(?-u:\b)`), which keeps every pattern
//! inside the regex crate's fast automata on text that is not ASCII.
//! Shapes loose enough to hit ordinary words are marked `random`: the
//! candidate must also contain a digit or a capital after its first
//! character, as generated tokens do and words rarely do.

/// What a match must also pass before it is replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ShapeCheck {
    /// Nothing: the shape is specific enough.
    None,
    /// The candidate must look generated ([`looks_random`]).
    Random,
    /// A Discord token: its first part is a user id in base64
    /// ([`is_base64_snowflake`]) and the other two look generated. A dotted
    /// name (`Service.v1beta.MethodName`) can look generated in every part,
    /// but its first part does not decode to digits.
    DiscordToken,
    /// The `flag` group must be a secret name (`--password v`).
    SecretFlag,
    /// `<key>v</key>`: open and close tags agree and name a secret.
    SecretElement,
    /// A `.netrc` line: only in text that names a `machine`.
    Netrc,
    /// Base64 that decodes to a PEM private key (kubeconfig `*-key-data`).
    Base64PrivateKey,
    /// Never replaced: it only arms a neighbour rule (a Twilio account SID).
    Arm,
}

/// What every match of a shape contains, for the first pass over the text
/// ([`super::anchors`]): a shape is applied only to the lines where its
/// anchor is found. (Whole shapes in one automaton would make it track
/// every counted repetition at once and fall back to a slow engine on
/// long text.)
#[derive(Debug, Clone, Copy)]
pub(super) enum Anchor {
    /// One of these literals, in this case.
    Exact(&'static [&'static str]),
    /// One of these literals, in any ASCII case.
    AnyCase(&'static [&'static str]),
    /// One of these literals, in this case, then a space or a tab.
    Blank(&'static [&'static str]),
    /// `sig=` after `?`, `&` or `;`.
    SasSignature,
    /// `://`, then `user:` and a `@` before the next `/` or white space.
    UrlUserinfo,
    /// `--`, then a name holding a secret word ([`super::names::HINTS`])
    /// and a space or a tab.
    FlagWord,
    /// `>` after an element name holding a secret word.
    ElementWord,
    /// A `.`, 6 or 7 token characters, a `.` and 27 token characters (the
    /// middle of a Discord token; found by a scan for dots, not a literal).
    DottedToken,
}

pub(super) struct Shape {
    pub anchor: Anchor,
    pub pattern: &'static str,
    pub check: ShapeCheck,
}

const fn strict(anchor: Anchor, pattern: &'static str) -> Shape {
    checked(anchor, pattern, ShapeCheck::None)
}

const fn loose(anchor: Anchor, pattern: &'static str) -> Shape {
    checked(anchor, pattern, ShapeCheck::Random)
}

const fn checked(anchor: Anchor, pattern: &'static str, check: ShapeCheck) -> Shape {
    Shape {
        anchor,
        pattern,
        check,
    }
}

/// Index of the private-key block shape, the one shape that spans lines.
pub(super) const PRIVATE_KEY: usize = 0;
/// Index of the AWS access key id shape, which also arms [`AWS_SECRET`].
pub(super) const AWS_ID: usize = 1;
/// Index of the Twilio account SID shape, which arms [`TWILIO_SECRET`].
pub(super) const TWILIO_SID: usize = 2;

/// The MySQL and MariaDB clients that take `-pPASSWORD`, as the shape's
/// pattern names them.
const MYSQL_CLIENTS: &[&str] = &[
    "mysql",
    "mysqldump",
    "mysqladmin",
    "mysqlimport",
    "mysqlcheck",
    "mysqlshow",
    "mysqlslap",
    "mysqlpump",
    "mysqlbinlog",
    "mysql_upgrade",
    "mysqlsh",
    "mariadb",
    "mariadb-dump",
    "mariadb-admin",
    "mariadb-import",
    "mariadb-check",
    "mariadb-show",
    "mariadb-slap",
    "mariadb-binlog",
    "mariadb-upgrade",
    "mariadb-backup",
    "mariabackup",
];

pub(super) const SHAPES: &[Shape] = &[
    // PEM and PGP private-key blocks, also when cut off before the END line.
    strict(
        Anchor::Exact(&["-----BEGIN "]),
        r"(?s)-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\z)",
    ),
    // AWS access key ids (long-term, temporary, and the older prefixes).
    strict(
        Anchor::Exact(&["AKIA", "ASIA", "ABIA", "ACCA", "A3T"]),
        r"(?-u:\b)(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}(?-u:\b)",
    ),
    // Twilio account SIDs: not secret, but the 32 hex digits beside one are its auth token.
    checked(
        Anchor::Exact(&["AC"]),
        r"(?-u:\b)AC[0-9a-f]{32}(?-u:\b)",
        ShapeCheck::Arm,
    ),
    // GitHub: personal, OAuth, user-to-server, server-to-server, refresh; fine-grained.
    strict(
        Anchor::Exact(&["ghp_", "gho_", "ghu_", "ghs_", "ghr_"]),
        r"(?-u:\b)gh[pousr]_[A-Za-z0-9]{30,}",
    ),
    strict(
        Anchor::Exact(&["github_pat_"]),
        r"(?-u:\b)github_pat_[A-Za-z0-9_]{20,}",
    ),
    // GitLab personal, deploy, runner, trigger, feed and other tokens.
    strict(
        Anchor::Exact(&[
            "glpat-", "gldt-", "glrt-", "glptt-", "glft-", "glsoat-", "gloas-", "glcbt-", "glimt-",
        ]),
        r"(?-u:\b)gl(?:pat|dt|rt|ptt|ft|soat|oas|cbt|imt)-[A-Za-z0-9_\-]{20,}",
    ),
    // Slack tokens and incoming webhooks.
    strict(
        Anchor::Exact(&["xox"]),
        r"(?-u:\b)xox[a-z]-[A-Za-z0-9\-]{10,}",
    ),
    strict(
        Anchor::Exact(&["hooks.slack.com/"]),
        r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<secret>[A-Za-z0-9_/\-]{20,})",
    ),
    // Stripe secret and restricted keys, webhook secrets.
    strict(
        Anchor::Exact(&["sk_live_", "sk_test_", "rk_live_", "rk_test_"]),
        r"(?-u:\b)(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}",
    ),
    strict(
        Anchor::Exact(&["whsec_"]),
        r"(?-u:\b)whsec_[A-Za-z0-9]{24,}",
    ),
    // Google API keys, OAuth client secrets and access tokens.
    strict(Anchor::Exact(&["AIza"]), r"(?-u:\b)AIza[0-9A-Za-z_\-]{35}"),
    strict(
        Anchor::Exact(&["GOCSPX-"]),
        r"(?-u:\b)GOCSPX-[A-Za-z0-9_\-]{20,}",
    ),
    loose(
        Anchor::Exact(&["ya29."]),
        r"(?-u:\b)ya29\.[0-9A-Za-z_\-]{20,}",
    ),
    // Anthropic (`sk-ant-`) and OpenAI (`sk-`, `sk-proj-`, ...) keys.
    loose(
        Anchor::Exact(&["sk-"]),
        r"(?-u:\b)sk-(?:ant-|proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}",
    ),
    // npm, PyPI and Hugging Face tokens.
    loose(Anchor::Exact(&["npm_"]), r"(?-u:\b)npm_[A-Za-z0-9]{36}"),
    strict(
        Anchor::Exact(&["pypi-"]),
        r"(?-u:\b)pypi-[A-Za-z0-9_\-]{50,}",
    ),
    loose(Anchor::Exact(&["hf_"]), r"(?-u:\b)hf_[A-Za-z0-9]{30,}"),
    // SendGrid API keys.
    strict(
        Anchor::Exact(&["SG."]),
        r"(?-u:\b)SG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}",
    ),
    // Twilio API key SIDs, with the key's secret when it follows as
    // `SID:secret` (HTTP basic credentials, decoded): the pair goes whole.
    strict(
        Anchor::Exact(&["SK"]),
        r"(?-u:\b)SK[0-9a-fA-F]{32}(?::[A-Za-z0-9]{32,})?(?-u:\b)",
    ),
    // Discord bot tokens and webhooks.
    checked(
        Anchor::DottedToken,
        r"(?-u:\b)[MNO][A-Za-z0-9_\-]{22,26}\.[A-Za-z0-9_\-]{6,7}\.[A-Za-z0-9_\-]{27,40}",
        ShapeCheck::DiscordToken,
    ),
    strict(
        Anchor::Exact(&["/api/webhooks/"]),
        r"discord(?:app)?\.com/api/webhooks/(?P<secret>[0-9]{5,}/[A-Za-z0-9_\-]{30,})",
    ),
    // Telegram bot tokens: the bot's number, a colon, 35 characters (after `bot` in URLs).
    strict(
        Anchor::Exact(&[":AA"]),
        r"(?-u:\b)(?:bot)?(?P<secret>[0-9]{5,16}:AA[A-Za-z0-9_\-]{33})",
    ),
    // Any `<word>_live_<20+ characters>` (live keys of many services).
    loose(
        Anchor::Exact(&["_live_"]),
        r"(?-u:\b)[A-Za-z][A-Za-z0-9]*_live_[A-Za-z0-9]{20,}",
    ),
    // JWTs: header and payload are base64url JSON objects.
    strict(
        Anchor::Exact(&["eyJ"]),
        r"(?-u:\b)eyJ[A-Za-z0-9_\-]{4,}\.eyJ[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]*",
    ),
    // Bearer tokens in headers and logs.
    loose(
        Anchor::AnyCase(&["bearer"]),
        r"(?-u:\b)(?i:bearer)[ \t]+(?P<secret>[A-Za-z0-9._~+/=\-]{8,})",
    ),
    // Passwords in URLs: scheme://user:password@host, up to the last `@`
    // of the authority (a password may hold one).
    strict(
        Anchor::UrlUserinfo,
        r"(?-u:\b)[A-Za-z][A-Za-z0-9+.\-]*://[^/\s:@]*:(?P<secret>[^/?#\s]+)@",
    ),
    // Oracle connect strings, `jdbc:oracle:thin:user/password@host…`: the
    // password up to the last `@` before the host (it may hold one).
    strict(
        Anchor::Exact(&["jdbc:oracle:"]),
        r#"jdbc:oracle:(?:thin|oci8?|kprb):[^/\s@:"']+/(?P<secret>"[^"\n]*"|[^\s"']+)@"#,
    ),
    // Mailgun API keys.
    strict(
        Anchor::Exact(&["key-"]),
        r"(?-u:\b)key-[0-9a-f]{32}(?-u:\b)",
    ),
    // DigitalOcean personal, OAuth and refresh tokens.
    strict(
        Anchor::Exact(&["doo_v1_", "dop_v1_", "dor_v1_"]),
        r"(?-u:\b)do[opr]_v1_[0-9a-f]{64}",
    ),
    // Shopify access, custom-app, private-app tokens and shared secrets.
    strict(
        Anchor::Exact(&["shpat_", "shpca_", "shppa_", "shpss_"]),
        r"(?-u:\b)shp(?:at|ca|pa|ss)_[0-9a-fA-F]{32}",
    ),
    // Heroku API keys (the current form).
    strict(
        Anchor::Exact(&["HRKU-"]),
        r"(?-u:\b)HRKU-[A-Za-z0-9_\-]{20,}",
    ),
    // Databricks personal access tokens.
    strict(
        Anchor::Exact(&["dapi"]),
        r"(?-u:\b)dapi[0-9a-f]{32}(?:-[0-9]+)?",
    ),
    // Azure shared access signatures: the `sig=` of a SAS URL or connection string.
    strict(
        Anchor::SasSignature,
        r"[?&;]sig=(?P<secret>[A-Za-z0-9%+/=]{16,})",
    ),
    // S3 (and other SigV4) presigned URLs: the signature.
    strict(
        Anchor::Exact(&["X-Amz-Signature=", "x-amz-signature="]),
        r"(?:X-Amz-Signature=|x-amz-signature=)(?P<secret>[0-9a-fA-F]{64})",
    ),
    // kubeconfig `client-key-data` and the like: a base64 PEM private key.
    checked(
        Anchor::Exact(&["LS0tLS1CRUdJTi"]),
        r"LS0tLS1CRUdJTi[A-Za-z0-9+/]{20,}={0,2}",
        ShapeCheck::Base64PrivateKey,
    ),
    // Command-line flags with a secret name and a separate value.
    checked(
        Anchor::FlagWord,
        r#"--(?P<flag>[A-Za-z][A-Za-z0-9_\-]{0,63})[ \t]+(?P<secret>"[^"\n]*"|'[^'\n]*'|[^\s"'\-][^\s"']*)"#,
        ShapeCheck::SecretFlag,
    ),
    // The MySQL and MariaDB clients' `-pPASSWORD` (attached; `-p` alone
    // asks for it). Only after one of their names, with no `;`, `|` or `&`
    // between, since `-p` elsewhere is a port (`ssh -p2222`) or a flag
    // (`mkdir -p`).
    strict(
        Anchor::Blank(MYSQL_CLIENTS),
        r#"(?-u:\b)(?:mysql(?:dump|admin|import|check|show|slap|pump|binlog|_upgrade|sh)?|mariadb(?:-(?:dump|admin|import|check|show|slap|binlog|upgrade|backup))?|mariabackup)[ \t](?:[^;|&\n]*?[ \t])?-p(?P<secret>"[^"\n]*"|'[^'\n]*'|[^\s"']+)"#,
    ),
    // curl's `-u user:password`.
    strict(
        Anchor::Blank(&["-u", "--user"]),
        r#"(?:(?m:^)|[ \t])(?:-u|--user)[ \t]+["']?[^\s:"']*:(?P<secret>[^\s"']+)"#,
    ),
    // `.netrc`: `machine h login u password p`, on one line or several.
    checked(
        Anchor::Blank(&["password"]),
        r"(?m)(?:(?-u:\b)login[ \t]+\S+[ \t]+|^[ \t]*)password[ \t]+(?P<secret>\S+)",
        ShapeCheck::Netrc,
    ),
    // XML elements named like a secret (Maven's `<password>`).
    checked(
        Anchor::ElementWord,
        r"<(?P<flag>[A-Za-z_][A-Za-z0-9_.:\-]{0,63})>(?P<secret>[^<\n]+)</(?P<close>[A-Za-z_][A-Za-z0-9_.:\-]{0,63})>",
        ShapeCheck::SecretElement,
    ),
    // Slack app-level tokens.
    strict(
        Anchor::Exact(&["xapp-"]),
        r"(?-u:\b)xapp-[0-9]-[A-Za-z0-9]+-[0-9]+-[A-Za-z0-9]{20,}",
    ),
    // age file-encryption secret keys (Bech32, upper case).
    strict(
        Anchor::Exact(&["AGE-SECRET-KEY-1"]),
        r"AGE-SECRET-KEY-1[0-9A-Z]{58}",
    ),
    // Grafana Cloud API tokens and service-account tokens.
    strict(
        Anchor::Exact(&["glc_", "glsa_"]),
        r"(?-u:\b)(?:glc_[A-Za-z0-9+/]{32,}={0,2}|glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8})",
    ),
    // Docker Hub personal and organisation access tokens.
    strict(
        Anchor::Exact(&["dckr_pat_", "dckr_oat_"]),
        r"(?-u:\b)dckr_(?:pat|oat)_[A-Za-z0-9_\-]{24,}",
    ),
    // HashiCorp Vault service, batch and recovery tokens.
    loose(
        Anchor::Exact(&["hvs.", "hvb.", "hvr."]),
        r"(?-u:\b)hv[sbr]\.[A-Za-z0-9_\-]{24,}",
    ),
    // Doppler personal, service, service-account, CLI, SCIM and audit tokens.
    strict(
        Anchor::Exact(&[
            "dp.pt.",
            "dp.st.",
            "dp.sa.",
            "dp.ct.",
            "dp.scim.",
            "dp.audit.",
        ]),
        r"(?-u:\b)dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9._\-]{40,}",
    ),
    // Postman API keys.
    strict(
        Anchor::Exact(&["PMAK-"]),
        r"(?-u:\b)PMAK-[A-Fa-f0-9]{24}-[A-Fa-f0-9]{34}(?-u:\b)",
    ),
    // New Relic user API keys.
    strict(
        Anchor::Exact(&["NRAK-"]),
        r"(?-u:\b)NRAK-[A-Z0-9]{27}(?-u:\b)",
    ),
    // PlanetScale service tokens, passwords and OAuth tokens.
    strict(
        Anchor::Exact(&["pscale_tkn_", "pscale_pw_", "pscale_oauth_"]),
        r"(?-u:\b)pscale_(?:tkn|pw|oauth)_[A-Za-z0-9_.=\-]{32,64}",
    ),
    // Sentry organisation and user auth tokens.
    strict(
        Anchor::Exact(&["sntrys_", "sntryu_"]),
        r"(?-u:\b)sntry[su]_[A-Za-z0-9+/=_]{40,}",
    ),
    // Groq API keys.
    strict(
        Anchor::Exact(&["gsk_"]),
        r"(?-u:\b)gsk_[A-Za-z0-9]{52}(?-u:\b)",
    ),
];

/// A key and its separator inside text; the value is read by hand after it.
/// Keys may be quoted (also escaped, as in JSON inside a JSON string, and
/// with spaces: `"API Key"`), a Ruby symbol (`:password =>`), or bare.
pub(super) const KEY_VALUE: &str = r#"(?P<key>\\?"[A-Za-z0-9_.\- ]{1,64}\\?"|'[A-Za-z0-9_.\- ]{1,64}'|:?[A-Za-z_][A-Za-z0-9_.\-]{0,63})[ \t]*(?P<sep>=>|[:=])[ \t]*"#;

/// Where a `name`, `key` or `header` field names the secret that a
/// following `value` field holds (`{"name": "DB_PASSWORD", "value": ...}`,
/// the same in YAML, NuGet's `<add key="..." value="..."/>`).
pub(super) const NAMING_FIELD: &str =
    r#"(?i:name|key|header)\\?["']?[ \t]*[:=][ \t]*\\?["']?(?P<name>[A-Za-z0-9_.\- ]{1,64})"#;

/// A 32-hex-digit Twilio auth token, looked for only in text that also holds an account SID.
pub(super) const TWILIO_SECRET: &str = r"(?-u:\b)(?P<secret>[0-9a-f]{32})(?-u:\b)";

/// A 40-character AWS secret access key, looked for only in text that
/// holds an access key id. The characters around it are part of the match
/// (the regex crate has no look-around), so only `secret` is replaced.
pub(super) const AWS_SECRET: &str =
    r"(?:^|[^A-Za-z0-9/+=])(?P<secret>[A-Za-z0-9/+]{40})(?:$|[^A-Za-z0-9/+=])";

/// A generated token, not a word: a digit, or a capital after the first character.
pub(super) fn looks_random(s: &str) -> bool {
    s.bytes().any(|b| b.is_ascii_digit()) || s.bytes().skip(1).any(|b| b.is_ascii_uppercase())
}

/// Does base64 `s` (from its start) decode to a PEM private key's first line?
pub(super) fn is_base64_private_key(s: &str) -> bool {
    let head = &s.as_bytes()[..s.len().min(64)];
    let mut bytes = Vec::with_capacity(48);
    let (mut acc, mut bits) = (0u32, 0u32);
    for &c in head {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => break,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            bytes.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    String::from_utf8_lossy(&bytes).contains("PRIVATE KEY")
}

/// Does base64 `s` (unpadded, as a Discord token's first part) decode to
/// 17 to 20 ASCII digits, a Discord user id (a snowflake)?
pub(super) fn is_base64_snowflake(s: &str) -> bool {
    let mut digits = 0usize;
    let (mut acc, mut bits) = (0u32, 0u32);
    for &c in s.as_bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            _ => return false,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            if !((acc >> bits) as u8).is_ascii_digit() {
                return false;
            }
            acc &= (1 << bits) - 1;
            digits += 1;
        }
    }
    (17..=20).contains(&digits)
}

/// A Discord token's three parts: a user id, then a timestamp and a
/// signature that look generated.
pub(super) fn is_discord_token(s: &str) -> bool {
    let mut parts = s.split('.');
    parts.next().is_some_and(is_base64_snowflake) && parts.all(looks_random)
}

/// An AWS secret key mixes cases; a SHA-1 in hex (also 40 characters) does not.
pub(super) fn looks_like_aws_secret(s: &str) -> bool {
    s.bytes().any(|b| b.is_ascii_uppercase()) && s.bytes().any(|b| b.is_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Standard base64 with padding, enough for the tests' inputs.
    fn b64(data: &[u8]) -> String {
        const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut out = String::new();
        for chunk in data.chunks(3) {
            let n = chunk
                .iter()
                .enumerate()
                .fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
            for i in 0..=chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            }
        }
        while out.len() % 4 != 0 {
            out.push('=');
        }
        out
    }

    #[test]
    fn the_tests_encoder_is_base64() {
        assert_eq!(b64(b"Man"), "TWFu");
        assert_eq!(b64(b"Ma"), "TWE=");
        assert_eq!(b64(&[0xfb, 0xef, 0xbe, 0xff, 0xff, 0xff]), "++++////");
    }

    #[test]
    fn a_pem_private_keys_first_line_is_seen_in_base64() {
        for pem in [
            "-----BEGIN PRIVATE KEY-----\nMIIEvQ",
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEpA",
            "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk",
        ] {
            assert!(is_base64_private_key(&b64(pem.as_bytes())), "{pem}");
        }
        for other in [
            "-----BEGIN PUBLIC KEY-----\nMIIBIj",
            "-----BEGIN CERTIFICATE-----\nMIIDdz",
            "just some ordinary text, not a key at all",
        ] {
            assert!(!is_base64_private_key(&b64(other.as_bytes())), "{other}");
        }
        assert!(!is_base64_private_key(""));
    }

    /// Every letter of the alphabet decodes to its own value: a prefix made
    /// of one class of characters (`AAAA` is three zero bytes, `////` three
    /// 0xff) must be read through for the key's line to be found, and a
    /// character outside the alphabet stops the reading.
    #[test]
    fn each_class_of_the_alphabet_is_decoded() {
        let line = b"-----BEGIN PRIVATE KEY-----";
        for prefix in [
            [0x00, 0x00, 0x00],
            [0x69, 0xa6, 0x9a],
            [0xd3, 0x4d, 0x34],
            [0xfb, 0xef, 0xbe],
            [0xff, 0xff, 0xff],
        ] {
            let mut data = prefix.to_vec();
            data.extend_from_slice(line);
            let text = b64(&data);
            assert!(is_base64_private_key(&text), "{text}");
        }
        assert_eq!(&b64(&[0x00, 0x00, 0x00]), "AAAA");
        assert_eq!(&b64(&[0x69, 0xa6, 0x9a]), "aaaa");
        assert_eq!(&b64(&[0xd3, 0x4d, 0x34]), "0000");
        let encoded = b64(line);
        assert!(!is_base64_private_key(&format!("LS0t!{encoded}")));
        assert!(is_base64_private_key(&format!("{encoded}!LS0t")));
    }

    /// Only the first 64 characters (48 bytes) are read: a key line that
    /// ends within them is found, one that ends beyond them is not.
    #[test]
    fn only_the_first_48_bytes_are_decoded() {
        let line = b"-----BEGIN PRIVATE KEY-----";
        // "PRIVATE KEY" ends 5 bytes before the line's end.
        let ends_at = |pad: usize| pad + line.len() - 5;
        let with = |pad: usize| {
            let mut data = vec![b'x'; pad];
            data.extend_from_slice(line);
            b64(&data)
        };
        assert_eq!(ends_at(27), 49);
        // 48 bytes read: the match must end at byte 48 at the latest.
        assert!(is_base64_private_key(&with(26)));
        assert!(!is_base64_private_key(&with(27)));
    }

    /// A user id of 17 to 20 digits, unpadded as in a token; one digit
    /// fewer or more, a byte that is no digit, or a character outside the
    /// alphabet (`-` and `_` never encode digits) is none.
    #[test]
    fn a_snowflake_is_17_to_20_digits_in_base64() {
        let id = |digits: &str| b64(digits.as_bytes()).trim_end_matches('=').to_string();
        let twenty = "12345678901234567890";
        for n in 17..=20 {
            assert!(is_base64_snowflake(&id(&twenty[..n])), "{n}");
        }
        assert_eq!(id(&twenty[..17]).len(), 23);
        assert_eq!(id(twenty).len(), 27);
        assert!(!is_base64_snowflake(&id(&twenty[..16])));
        assert!(!is_base64_snowflake(&id(&format!("{twenty}1"))));
        assert!(!is_base64_snowflake(&id("1234567890123456x")));
        assert!(!is_base64_snowflake(&id("x2345678901234567")));
        assert!(!is_base64_snowflake(""));
        let good = id("198622483471925248");
        assert_eq!(good, "MTk4NjIyNDgzNDcxOTI1MjQ4");
        assert!(!is_base64_snowflake(&format!("{}-", &good[..23])));
        assert!(!is_base64_snowflake(&format!("{good}=")));
        // Each class of the alphabet: upper (`M`), lower (`j`), digits (`0`).
        assert!(is_base64_snowflake(&id("10000000000000000")));
        assert_eq!(id("10000000000000000"), "MTAwMDAwMDAwMDAwMDAwMDA");
    }

    #[test]
    fn a_discord_token_is_a_user_id_then_two_generated_parts() {
        let (id, stamp, sig) = (
            "MTk4NjIyNDgzNDcxOTI1MjQ4",
            "Cl2FMQ",
            "ZnCjm1XVW7vRze4b7Cq4se7kKWs",
        );
        assert!(is_discord_token(&format!("{id}.{stamp}.{sig}")));
        // Words in the later parts, as in a span name under a real id.
        assert!(!is_discord_token(&format!("{id}.handler.{sig}")));
        assert!(!is_discord_token(&format!(
            "{id}.{stamp}.process_incoming_request_batch"
        )));
        // A service name first, however generated the rest looks.
        assert!(!is_discord_token(&format!(
            "OrderFulfillmentServiceV2.{stamp}.{sig}"
        )));
        assert!(!is_discord_token(""));
    }
}
