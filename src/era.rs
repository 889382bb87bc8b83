//! Protocol revisions and eras. A message is *modern* (2026-07-28: no
//! handshake, a `_meta` envelope on every request) or *legacy* (the
//! `initialize` handshake of 2024-11-05 .. 2025-11-25), decided per message,
//! so both eras are served by one process.

use serde_json::{json, Map, Value};

use crate::error::{RpcCode, RpcError};

pub const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
pub const META_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
pub const META_LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

const LOG_LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Revision {
    V2024_11_05,
    V2025_03_26,
    V2025_06_18,
    V2025_11_25,
    V2026_07_28,
}

impl Revision {
    /// The newest handshake revision: the answer to an unknown request.
    pub const NEWEST_LEGACY: Revision = Revision::V2025_11_25;
    /// Every served revision, modern first, then newest to oldest.
    pub const SERVED: [Revision; 5] = [
        Revision::V2026_07_28,
        Revision::V2025_11_25,
        Revision::V2025_06_18,
        Revision::V2025_03_26,
        Revision::V2024_11_05,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Revision::V2024_11_05 => "2024-11-05",
            Revision::V2025_03_26 => "2025-03-26",
            Revision::V2025_06_18 => "2025-06-18",
            Revision::V2025_11_25 => "2025-11-25",
            Revision::V2026_07_28 => "2026-07-28",
        }
    }

    pub fn parse(s: &str) -> Option<Revision> {
        Revision::SERVED.into_iter().find(|r| r.as_str() == s)
    }

    /// No `initialize`: every request carries the `_meta` envelope naming
    /// its revision, and every result says who answered. A property of the
    /// revision, so a later handshake-less revision is one more `true` here.
    pub fn is_handshakeless(self) -> bool {
        match self {
            Revision::V2026_07_28 => true,
            Revision::V2024_11_05
            | Revision::V2025_03_26
            | Revision::V2025_06_18
            | Revision::V2025_11_25 => false,
        }
    }

    /// The served handshake-less revisions, newest first.
    pub fn handshakeless() -> impl Iterator<Item = Revision> {
        Revision::SERVED
            .into_iter()
            .filter(|r| r.is_handshakeless())
    }

    /// Tool `annotations` exist from 2025-03-26 on.
    pub fn has_annotations(self) -> bool {
        self >= Revision::V2025_03_26
    }

    /// Tool `title`, `outputSchema`, result `structuredContent` and
    /// `serverInfo.title` exist from 2025-06-18 on.
    pub fn has_structured(self) -> bool {
        self >= Revision::V2025_06_18
    }

    /// `serverInfo.description` and `websiteUrl` exist from 2025-11-25 on.
    pub fn has_rich_server_info(self) -> bool {
        self >= Revision::V2025_11_25
    }

    pub fn supported_strings() -> Vec<&'static str> {
        Revision::SERVED.iter().map(|r| r.as_str()).collect()
    }
}

/// Legacy version negotiation: a served handshake revision is echoed; any
/// other request (unknown, future, or 2026-07-28, which has no handshake)
/// gets the newest handshake revision.
pub fn negotiate(requested: &str) -> Revision {
    match Revision::parse(requested) {
        Some(r) if !r.is_handshakeless() => r,
        _ => Revision::NEWEST_LEGACY,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    Modern,
    Legacy,
}

/// Per-message era: `server/discover` and `subscriptions/listen` are modern;
/// so is any request other than `initialize` whose `_meta` holds the
/// protocol-version key. Everything else is legacy. (Having `_meta` alone
/// is no signal: legacy requests carry `_meta.progressToken`.)
pub fn classify(method: &str, params: &Map<String, Value>) -> Era {
    if method == "server/discover" || method == "subscriptions/listen" {
        return Era::Modern;
    }
    if method == "initialize" {
        return Era::Legacy;
    }
    match params.get("_meta") {
        Some(Value::Object(meta)) if meta.contains_key(META_VERSION) => Era::Modern,
        _ => Era::Legacy,
    }
}

/// Check a modern request's envelope, in the fixed order: shape first, then
/// the version. Returns the handshake-less revision the request names.
pub fn check_envelope(params: &Map<String, Value>) -> Result<Revision, RpcError> {
    let missing = || {
        let names: Vec<&str> = Revision::handshakeless().map(Revision::as_str).collect();
        RpcError::detailed(
            RpcCode::InvalidParams,
            format_args!(
                "a {} request needs params._meta with \"{META_VERSION}\" (a string) \
                 and \"{META_CAPABILITIES}\" (an object).",
                names.join(" or ")
            ),
        )
    };
    let Some(Value::Object(meta)) = params.get("_meta") else {
        return Err(missing());
    };
    let (Some(version), Some(caps)) = (meta.get(META_VERSION), meta.get(META_CAPABILITIES)) else {
        return Err(missing());
    };
    let (Value::String(version), Value::Object(_)) = (version, caps) else {
        return Err(missing());
    };
    let Some(revision) = Revision::parse(version).filter(|r| r.is_handshakeless()) else {
        return Err(RpcError::new(
            RpcCode::UnsupportedProtocolVersion,
            "Unsupported protocol version.",
        )
        .with_data(json!({"supported": Revision::supported_strings(), "requested": version})));
    };
    if let Some(level) = meta.get(META_LOG_LEVEL) {
        if !level.as_str().is_some_and(|l| LOG_LEVELS.contains(&l)) {
            return Err(RpcError::detailed(
                RpcCode::InvalidParams,
                format_args!("{META_LOG_LEVEL} must be one of {}.", LOG_LEVELS.join(", ")),
            ));
        }
    }
    Ok(revision)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    fn env() -> Value {
        json!({META_VERSION: "2026-07-28", META_CAPABILITIES: {}})
    }

    #[test]
    fn negotiation() {
        assert_eq!(negotiate("2024-11-05"), Revision::V2024_11_05);
        assert_eq!(negotiate("2025-03-26"), Revision::V2025_03_26);
        assert_eq!(negotiate("2025-06-18"), Revision::V2025_06_18);
        assert_eq!(negotiate("2025-11-25"), Revision::V2025_11_25);
        assert_eq!(negotiate("2026-07-28"), Revision::V2025_11_25);
        assert_eq!(negotiate("2099-01-01"), Revision::V2025_11_25);
        assert_eq!(negotiate("2024-10-07"), Revision::V2025_11_25);
        assert_eq!(negotiate(""), Revision::V2025_11_25);
    }

    #[test]
    fn supported_lists_modern_first() {
        assert_eq!(
            Revision::supported_strings(),
            [
                "2026-07-28",
                "2025-11-25",
                "2025-06-18",
                "2025-03-26",
                "2024-11-05"
            ]
        );
    }

    #[test]
    fn classification() {
        assert_eq!(classify("server/discover", &Map::new()), Era::Modern);
        assert_eq!(classify("subscriptions/listen", &Map::new()), Era::Modern);
        assert_eq!(
            classify("tools/list", &params(json!({"_meta": env()}))),
            Era::Modern
        );
        assert_eq!(
            classify("tools/list", &params(json!({"_meta": {META_VERSION: 5}}))),
            Era::Modern
        );
        assert_eq!(
            classify("initialize", &params(json!({"_meta": env()}))),
            Era::Legacy
        );
        assert_eq!(
            classify(
                "tools/list",
                &params(json!({"_meta": {"progressToken": 1}}))
            ),
            Era::Legacy
        );
        assert_eq!(classify("tools/list", &Map::new()), Era::Legacy);
    }

    #[test]
    fn envelope_checks_in_order() {
        let code = |v: Value| check_envelope(&params(v)).err().map(|e| e.code);
        assert_eq!(code(json!({"_meta": env()})), None);
        assert_eq!(
            check_envelope(&params(json!({"_meta": env()}))),
            Ok(Revision::V2026_07_28)
        );
        assert_eq!(code(json!({})), Some(RpcCode::InvalidParams));
        assert_eq!(code(json!({"_meta": 1})), Some(RpcCode::InvalidParams));
        assert_eq!(
            code(json!({"_meta": {META_VERSION: "2026-07-28"}})),
            Some(RpcCode::InvalidParams)
        );
        assert_eq!(
            code(json!({"_meta": {META_VERSION: 2026, META_CAPABILITIES: {}}})),
            Some(RpcCode::InvalidParams)
        );
        assert_eq!(
            code(json!({"_meta": {META_VERSION: "2026-07-28", META_CAPABILITIES: []}})),
            Some(RpcCode::InvalidParams)
        );
        assert_eq!(
            code(json!({"_meta": {META_VERSION: "2025-11-25", META_CAPABILITIES: {}}})),
            Some(RpcCode::UnsupportedProtocolVersion)
        );
        assert_eq!(
            code(
                json!({"_meta": {META_VERSION: "2026-07-28", META_CAPABILITIES: {}, META_LOG_LEVEL: "verbose"}})
            ),
            Some(RpcCode::InvalidParams)
        );
        assert_eq!(
            code(
                json!({"_meta": {META_VERSION: "2026-07-28", META_CAPABILITIES: {}, META_LOG_LEVEL: "debug"}})
            ),
            None
        );
    }

    #[test]
    fn unsupported_version_data() {
        let e = check_envelope(&params(
            json!({"_meta": {META_VERSION: "1900-01-01", META_CAPABILITIES: {}}}),
        ))
        .unwrap_err();
        assert_eq!(e.data.unwrap()["requested"], "1900-01-01");
    }

    #[test]
    fn handshakeless_is_a_property_of_the_revision() {
        let flags: Vec<(&str, bool)> = Revision::SERVED
            .iter()
            .map(|r| (r.as_str(), r.is_handshakeless()))
            .collect();
        assert_eq!(
            flags,
            [
                ("2026-07-28", true),
                ("2025-11-25", false),
                ("2025-06-18", false),
                ("2025-03-26", false),
                ("2024-11-05", false)
            ]
        );
        assert_eq!(
            Revision::handshakeless().collect::<Vec<_>>(),
            [Revision::V2026_07_28]
        );
        // Every handshake-less revision passes the envelope check and none
        // is ever negotiated by a handshake.
        for rev in Revision::handshakeless() {
            let p = params(json!({"_meta": {META_VERSION: rev.as_str(), META_CAPABILITIES: {}}}));
            assert_eq!(check_envelope(&p), Ok(rev));
            assert_eq!(negotiate(rev.as_str()), Revision::NEWEST_LEGACY);
        }
        // A handshake revision named in the envelope is unsupported there.
        for rev in Revision::SERVED.iter().filter(|r| !r.is_handshakeless()) {
            let p = params(json!({"_meta": {META_VERSION: rev.as_str(), META_CAPABILITIES: {}}}));
            assert_eq!(
                check_envelope(&p).unwrap_err().code,
                RpcCode::UnsupportedProtocolVersion
            );
            assert_eq!(negotiate(rev.as_str()), *rev);
        }
        assert!(!Revision::NEWEST_LEGACY.is_handshakeless());
    }

    #[test]
    fn the_missing_envelope_message_names_the_handshakeless_revisions() {
        let e = check_envelope(&Map::new()).unwrap_err();
        assert_eq!(
            e.message,
            format!(
                "Invalid params: a 2026-07-28 request needs params._meta with \"{META_VERSION}\" (a string) \
                 and \"{META_CAPABILITIES}\" (an object)."
            )
        );
    }
}
