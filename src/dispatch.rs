//! One match on the method name, per era. Everything here is answered at
//! once except `tools/call`, which becomes a `CallJob` for a worker thread.

use serde_json::{json, Map, Value};

use crate::envelope::Envelope;
use crate::era::{self, Era, Revision, META_SERVER_INFO};
use crate::error::{RpcCode, RpcError};
use crate::jsonrpc::{self, Incoming};
use crate::tools::Tool;

/// How long a client may cache discover and tools/list answers: the tool
/// list never changes while the server runs.
pub const TTL_MS: u64 = 3_600_000;

/// The `_meta` member of `tools/list` and `server/discover` results that
/// carries the SHA-256 of the served tool set (docs/PINS.md).
pub const META_TOOLS_SHA256: &str = "io.reachweaver/tools-sha256";

/// What the serve loop does with one incoming message.
#[derive(Debug)]
pub enum Action {
    /// Write this message.
    Reply(Value),
    /// Write this line, already serialized (the cached `tools/list` answer).
    ReplyLine(String),
    /// Write nothing.
    Nothing,
    /// Run a tool call on a worker; answer when it finishes.
    Call(CallJob),
    /// Cancel the in-flight request with this id.
    Cancel(Value),
}

#[derive(Debug)]
pub struct CallJob {
    pub id: Value,
    pub tool: String,
    pub arguments: Map<String, Value>,
    pub revision: Revision,
    /// The request's `_meta` (for the audit log: client, trace context).
    pub meta: Option<Value>,
}

impl CallJob {
    /// What the audit log records of this call.
    pub(crate) fn audit_request(&self) -> crate::audit::Request<'_> {
        crate::audit::Request {
            id: &self.id,
            tool: &self.tool,
            arguments: &self.arguments,
            meta: self.meta.as_ref(),
        }
    }
}

/// Legacy state lives per process: the revision the one `initialize` fixed.
#[derive(Debug, Default)]
pub struct Session {
    legacy: Option<Revision>,
}

/// Who answers: the identity reported in `serverInfo`, each revision
/// getting only the fields it defines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerIdentity {
    pub name: String,
    pub version: String,
    /// From 2025-06-18 on.
    pub title: String,
    /// From 2025-11-25 on.
    pub description: String,
}

impl ServerIdentity {
    fn for_revision(&self, rev: Revision) -> Value {
        let mut info = json!({"name": self.name, "version": self.version});
        if rev.has_structured() {
            info["title"] = json!(self.title);
        }
        if rev.has_rich_server_info() {
            info["description"] = json!(self.description);
        }
        info
    }
}

/// Everything the protocol layer knows about the server, fixed at start:
/// the tool lists, the instructions and the identity. Running a call is
/// not in here: `handle` only turns a `tools/call` into a [`CallJob`], so
/// the layer can be driven line by line without a backend or a process.
pub struct ProtocolInput {
    lists: ToolLists,
    /// The digest of the served tool set (docs/PINS.md), in `_meta`.
    tools_sha256: Option<String>,
    pub instructions: String,
    pub identity: ServerIdentity,
}

impl ProtocolInput {
    pub fn new<'t>(
        tools: impl IntoIterator<Item = &'t Tool>,
        instructions: impl Into<String>,
        identity: ServerIdentity,
    ) -> Self {
        Self {
            tools_sha256: None,
            lists: ToolLists::new(tools),
            instructions: instructions.into(),
            identity,
        }
    }

    /// Carry `digest`, the SHA-256 of the served tool set, in the `_meta`
    /// of `tools/list` and `server/discover` (`None`: carry none).
    pub fn with_tools_sha256(mut self, digest: Option<String>) -> Self {
        self.tools_sha256 = digest;
        self
    }

    /// The `tools/call` result for an envelope, shaped for the revision.
    pub fn call_result(&self, rev: Revision, envelope: &Envelope) -> Value {
        let mut r = Map::new();
        r.insert(
            "content".into(),
            json!([{"type": "text", "text": envelope.to_text()}]),
        );
        if rev.has_structured() {
            r.insert("structuredContent".into(), envelope.to_value());
        }
        r.insert("isError".into(), json!(envelope.is_error()));
        if rev.is_handshakeless() {
            self.stamp(rev, &mut r);
        }
        if !envelope.meta.is_empty() {
            let meta = r
                .entry("_meta")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(m) = meta {
                for (k, v) in &envelope.meta {
                    m.insert(k.clone(), v.clone());
                }
            }
        }
        Value::Object(r)
    }

    /// Stamp a handshake-less result: `resultType` and the server's identity in `_meta`.
    fn stamp(&self, rev: Revision, result: &mut Map<String, Value>) {
        result.insert("resultType".into(), json!("complete"));
        result.insert(
            "_meta".into(),
            json!({META_SERVER_INFO: self.identity.for_revision(rev)}),
        );
    }

    fn stamped(&self, rev: Revision, mut result: Map<String, Value>) -> Value {
        self.stamp(rev, &mut result);
        Value::Object(result)
    }

    /// Add the served tool set's digest to the result's `_meta`.
    fn stamp_tools_sha256(&self, result: &mut Map<String, Value>) {
        let Some(digest) = &self.tools_sha256 else {
            return;
        };
        let meta = result
            .entry("_meta")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(m) = meta {
            m.insert(META_TOOLS_SHA256.into(), json!(digest));
        }
    }
}

/// Tool definitions rendered and serialized once per revision: the list
/// never changes while the server runs, so `tools/list` only splices text.
struct ToolLists {
    by_revision: Vec<(Revision, String)>,
    names: Vec<String>,
}

impl ToolLists {
    fn new<'t>(tools: impl IntoIterator<Item = &'t Tool>) -> Self {
        let tools: Vec<&Tool> = tools.into_iter().collect();
        let by_revision = Revision::SERVED
            .iter()
            .map(|&rev| {
                let list = Value::Array(tools.iter().map(|t| tool_json(t, rev)).collect());
                (rev, jsonrpc::to_line(&list))
            })
            .collect();
        Self {
            by_revision,
            names: tools.iter().map(|t| t.name.clone()).collect(),
        }
    }

    fn has(&self, name: &str) -> bool {
        self.names.iter().any(|n| n == name)
    }

    fn get(&self, rev: Revision) -> &str {
        self.by_revision
            .iter()
            .find(|(r, _)| *r == rev)
            .map(|(_, v)| v.as_str())
            .unwrap_or("[]")
    }

    /// The whole response line: `{"jsonrpc","id","result":{"tools":[..],..rest}}`.
    fn response_line(&self, id: &Value, rev: Revision, rest: &Map<String, Value>) -> String {
        let rest = if rest.is_empty() {
            String::new()
        } else {
            let text = jsonrpc::to_line(&Value::Object(rest.clone()));
            format!(",{}", &text[1..text.len() - 1])
        };
        format!(
            r#"{{"jsonrpc":"2.0","id":{},"result":{{"tools":{}{rest}}}}}"#,
            jsonrpc::to_line(id),
            self.get(rev)
        )
    }
}

/// The schema of the envelope every tool returns (docs/BACKEND.md, What the client receives).
pub fn output_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "exit_code": {"type": "integer", "description": "0: done; 1: done with findings; 2: error."},
            "output": {"description": "The command's JSON document, or an error document {\"error\": {\"code\", \"message\"}}."}
        },
        "required": ["exit_code", "output"]
    })
}

/// A tool's definition with only the fields the revision defines.
pub fn tool_json(tool: &Tool, rev: Revision) -> Value {
    let mut t = Map::new();
    t.insert("name".into(), json!(tool.name));
    if rev.has_structured() {
        t.insert("title".into(), json!(tool.title));
    }
    t.insert("description".into(), json!(tool.description));
    t.insert("inputSchema".into(), tool.input_schema.clone());
    if rev.has_structured() {
        t.insert("outputSchema".into(), output_schema());
    }
    if rev.has_annotations() {
        let a = tool.annotations;
        t.insert(
            "annotations".into(),
            json!({
                "title": tool.title,
                "readOnlyHint": a.read_only_hint,
                "destructiveHint": a.destructive_hint,
                "idempotentHint": a.idempotent_hint,
                "openWorldHint": a.open_world_hint,
            }),
        );
    }
    Value::Object(t)
}

fn fail(id: &Value, method: &str, err: RpcError) -> Action {
    Action::Reply(protocol_error(id, method, &err))
}

/// The logged error answer to a request.
fn protocol_error(id: &Value, method: &str, err: &RpcError) -> Value {
    crate::log::line(format!(
        "protocol error code={} method={}",
        err.code,
        sanitize(method)
    ));
    jsonrpc::error(id, err)
}

/// The answer to a `tools/call` naming no tool this server serves, both
/// where the request is read and where a worker finds no such tool.
pub(crate) fn unknown_tool(id: &Value, name: &str) -> Value {
    let err = RpcError::new(
        RpcCode::InvalidParams,
        format!("Unknown tool: {}", sanitize(name)),
    );
    protocol_error(id, "tools/call", &err)
}

/// Method names come from the client: keep log lines short and printable.
fn sanitize(s: &str) -> String {
    s.chars()
        .take(64)
        .map(|c| if c.is_ascii_graphic() { c } else { '?' })
        .collect()
}

/// One client's protocol state over the fixed [`ProtocolInput`].
pub struct Dispatcher<'a> {
    input: &'a ProtocolInput,
    session: Session,
}

impl<'a> Dispatcher<'a> {
    pub fn new(input: &'a ProtocolInput) -> Self {
        Self {
            input,
            session: Session::default(),
        }
    }

    /// `handle` for one raw line (without its LF).
    pub fn handle_line(&mut self, line: &[u8]) -> Action {
        self.handle(jsonrpc::parse_line(line))
    }

    pub fn handle(&mut self, msg: Incoming) -> Action {
        match msg {
            Incoming::Invalid { id, error } => {
                crate::log::line(format!("protocol error code={}", error.code));
                Action::Reply(jsonrpc::error(&id, &error))
            }
            Incoming::Response => {
                crate::log::line("ignored a response sent by the client");
                Action::Nothing
            }
            Incoming::Notification { method, params } => notification(&method, &params),
            Incoming::Request { id, method, params } => match era::classify(&method, &params) {
                Era::Modern => self.modern(id, &method, params),
                Era::Legacy => self.legacy(id, &method, params),
            },
        }
    }

    fn modern(&self, id: Value, method: &str, params: Map<String, Value>) -> Action {
        let rev = match era::check_envelope(&params) {
            Ok(rev) => rev,
            Err(e) => return fail(&id, method, e),
        };
        match method {
            "server/discover" => Action::Reply(jsonrpc::result(&id, self.discover(rev))),
            "tools/list" => self.tools_list(&id, &params, rev),
            "tools/call" => self.tools_call(id, params, rev),
            _ => fail(&id, method, not_found(method)),
        }
    }

    fn legacy(&mut self, id: Value, method: &str, params: Map<String, Value>) -> Action {
        match method {
            "initialize" => match self.initialize(&params) {
                Ok(v) => Action::Reply(jsonrpc::result(&id, v)),
                Err(e) => fail(&id, method, e),
            },
            "ping" => Action::Reply(jsonrpc::result(&id, json!({}))),
            "tools/list" | "tools/call" => {
                let Some(rev) = self.session.legacy else {
                    return fail(
                        &id,
                        method,
                        RpcError::detailed(
                            RpcCode::InvalidParams,
                            "not initialized; send initialize first, or stamp the request \
                             with the 2026-07-28 _meta envelope.",
                        ),
                    );
                };
                if method == "tools/list" {
                    self.tools_list(&id, &params, rev)
                } else {
                    self.tools_call(id, params, rev)
                }
            }
            _ => fail(&id, method, not_found(method)),
        }
    }

    fn discover(&self, rev: Revision) -> Value {
        let mut r = Map::new();
        r.insert(
            "supportedVersions".into(),
            json!(Revision::supported_strings()),
        );
        r.insert(
            "capabilities".into(),
            json!({"tools": {"listChanged": false}}),
        );
        r.insert("instructions".into(), json!(self.input.instructions));
        r.insert("ttlMs".into(), json!(TTL_MS));
        r.insert("cacheScope".into(), json!("public"));
        let mut r = self.input.stamped(rev, r);
        if let Value::Object(m) = &mut r {
            self.input.stamp_tools_sha256(m);
        }
        r
    }

    fn initialize(&mut self, params: &Map<String, Value>) -> Result<Value, RpcError> {
        if self.session.legacy.is_some() {
            return Err(RpcError::detailed(
                RpcCode::InvalidRequest,
                "already initialized; this process keeps its first handshake.",
            ));
        }
        let version = params.get("protocolVersion").and_then(Value::as_str);
        let caps_ok = params.get("capabilities").is_some_and(Value::is_object);
        let client_ok = params.get("clientInfo").is_some_and(|c| {
            c.get("name").is_some_and(Value::is_string)
                && c.get("version").is_some_and(Value::is_string)
        });
        let (Some(version), true, true) = (version, caps_ok, client_ok) else {
            return Err(RpcError::detailed(
                RpcCode::InvalidParams,
                "initialize needs protocolVersion (a string), capabilities (an object) \
                 and clientInfo {name, version}.",
            ));
        };
        let rev = era::negotiate(version);
        self.session.legacy = Some(rev);
        crate::audit::client_info(params.get("clientInfo"));
        Ok(json!({
            "protocolVersion": rev.as_str(),
            "capabilities": {"tools": {"listChanged": false}},
            "serverInfo": self.input.identity.for_revision(rev),
            "instructions": self.input.instructions,
        }))
    }

    fn tools_list(&self, id: &Value, params: &Map<String, Value>, rev: Revision) -> Action {
        if params.contains_key("cursor") {
            return fail(
                id,
                "tools/list",
                RpcError::new(
                    RpcCode::InvalidParams,
                    "Invalid cursor: this server never hands out cursors.",
                ),
            );
        }
        let mut rest = Map::new();
        if rev.is_handshakeless() {
            rest.insert("ttlMs".into(), json!(TTL_MS));
            rest.insert("cacheScope".into(), json!("public"));
            self.input.stamp(rev, &mut rest);
        }
        self.input.stamp_tools_sha256(&mut rest);
        crate::audit::tools_list(id, params.get("_meta"));
        Action::ReplyLine(self.input.lists.response_line(id, rev, &rest))
    }

    fn tools_call(&self, id: Value, mut params: Map<String, Value>, rev: Revision) -> Action {
        let name = match params.get("name") {
            Some(Value::String(n)) => n.clone(),
            _ => {
                return fail(
                    &id,
                    "tools/call",
                    RpcError::detailed(RpcCode::InvalidParams, "tools/call needs name (a string)."),
                )
            }
        };
        let arguments = match params.remove("arguments") {
            None => Map::new(),
            Some(Value::Object(a)) => a,
            Some(_) => {
                return fail(
                    &id,
                    "tools/call",
                    RpcError::detailed(RpcCode::InvalidParams, "arguments must be an object."),
                )
            }
        };
        if !self.input.lists.has(&name) {
            let request = crate::audit::Request {
                id: &id,
                tool: &name,
                arguments: &arguments,
                meta: params.get("_meta"),
            };
            crate::audit::not_run(&request, crate::audit::Ended::UnknownTool);
            return Action::Reply(unknown_tool(&id, &name));
        }
        Action::Call(CallJob {
            id,
            tool: name,
            arguments,
            revision: rev,
            meta: params.remove("_meta"),
        })
    }
}

fn not_found(method: &str) -> RpcError {
    RpcError::detailed(RpcCode::MethodNotFound, sanitize(method))
}

fn notification(method: &str, params: &Value) -> Action {
    if method == "notifications/cancelled" {
        if let Some(id) = params.get("requestId") {
            if jsonrpc::is_valid_id(id) {
                return Action::Cancel(id.clone());
            }
        }
    }
    Action::Nothing
}

#[cfg(test)]
pub(crate) mod tests {
    //! The protocol layer fed one line at a time, answers compared whole or
    //! by the members each revision defines. The binary-level tests in
    //! tests/suite/protocol_*.rs cover what only a process shows (framing on a
    //! pipe, concurrency, shutdown).

    use super::*;
    use crate::catalog;
    use crate::era::{META_CAPABILITIES, META_LOG_LEVEL, META_VERSION};
    use crate::error::{ErrorCode, ToolError};
    use crate::tools;

    pub(crate) fn identity() -> ServerIdentity {
        ServerIdentity {
            name: "test-server".into(),
            version: "9.8.7".into(),
            title: "Test server".into(),
            description: "A server for tests.".into(),
        }
    }

    /// The digest `input()` is given to carry (pins/wire.rs computes it
    /// for a real server).
    fn served_digest() -> String {
        "5e".repeat(32)
    }

    /// Two tools: `campaign_check` (arguments) and `version` (none).
    pub(crate) fn input() -> ProtocolInput {
        let mut v = catalog::tests::sample();
        v["commands"].as_array_mut().unwrap().push(json!({
            "name": "version", "summary": "Print the version.", "tags": ["read_only"],
            "formats": ["text", "json"],
            "flags": [{"name": "--format", "type": "choice", "choices": ["text", "json"], "output_format": true}]
        }));
        let c = catalog::parse(v.to_string().as_bytes()).unwrap();
        let (set, _) = tools::build(&c, false);
        ProtocolInput::new(set.iter(), "Use the tools.", identity())
            .with_tools_sha256(Some(served_digest()))
    }

    pub(crate) fn req(id: Value, method: &str, params: Value) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
    }

    pub(crate) fn envelope() -> Value {
        json!({META_VERSION: "2026-07-28", META_CAPABILITIES: {}})
    }

    /// A request stamped with the 2026-07-28 envelope.
    pub(crate) fn modern(id: Value, method: &str, mut params: Value) -> Value {
        params["_meta"] = envelope();
        req(id, method, params)
    }

    fn init_params(rev: &str) -> Value {
        json!({"protocolVersion": rev, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}})
    }

    fn send(d: &mut Dispatcher, msg: &Value) -> Action {
        d.handle_line(msg.to_string().as_bytes())
    }

    /// The written answer, parsed; `None` when nothing is written.
    fn answer(action: Action) -> Option<Value> {
        match action {
            Action::Reply(v) => Some(v),
            Action::ReplyLine(line) => Some(serde_json::from_str(&line).unwrap()),
            Action::Nothing => None,
            other => panic!("not an answer: {other:?}"),
        }
    }

    fn ask(d: &mut Dispatcher, msg: &Value) -> Value {
        answer(send(d, msg)).unwrap_or_else(|| panic!("no answer to {msg}"))
    }

    fn initialize(d: &mut Dispatcher, rev: &str) -> Value {
        ask(d, &req(json!("init"), "initialize", init_params(rev)))
    }

    fn keys(v: &Value) -> Vec<&str> {
        v.as_object().unwrap().keys().map(String::as_str).collect()
    }

    /// `(code, message)` of an error answer.
    fn error_of(v: &Value) -> (i64, String) {
        (
            v["error"]["code"].as_i64().unwrap_or_else(|| panic!("{v}")),
            v["error"]["message"].as_str().unwrap().to_string(),
        )
    }

    const NOT_INITIALIZED: &str =
        "Invalid params: not initialized; send initialize first, or stamp \
        the request with the 2026-07-28 _meta envelope.";
    const BAD_INITIALIZE: &str = "Invalid params: initialize needs protocolVersion (a string), \
        capabilities (an object) and clientInfo {name, version}.";

    fn bad_envelope() -> String {
        format!(
            "Invalid params: a 2026-07-28 request needs params._meta with \"{META_VERSION}\" \
             (a string) and \"{META_CAPABILITIES}\" (an object)."
        )
    }

    /// What is sent, whether an `initialize` went first, and the answer's
    /// id, code and message.
    type ErrorCase = (&'static str, bool, Vec<u8>, Value, i64, String);

    /// Every JSON-RPC error the protocol layer sends: the line, whether it
    /// follows an `initialize`, and the answer's id, code and message.
    #[test]
    fn every_json_rpc_error_code_with_its_id_and_message() {
        let deep = format!("{}{}", "[".repeat(70), "]".repeat(70));
        let long_method = format!("a\u{7}b{}", "x".repeat(100));
        let cases: Vec<ErrorCase> = vec![
            ("not JSON", false, b"{\"jsonrpc\":".to_vec(), Value::Null, -32700,
             "Parse error: the line is not valid JSON.".into()),
            ("not UTF-8", false, b"\xff{}".to_vec(), Value::Null, -32700,
             "Parse error: the line is not valid UTF-8.".into()),
            ("a batch", false, br#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#.to_vec(), Value::Null, -32600,
             "Invalid Request: batches are not supported; send one message per line.".into()),
            ("a scalar", false, b"42".to_vec(), Value::Null, -32600,
             "Invalid Request: a message must be a JSON object.".into()),
            ("too deep", false, deep.into_bytes(), Value::Null, -32600,
             "Invalid Request: the message nests deeper than 64 levels.".into()),
            ("jsonrpc 1.0", false, br#"{"jsonrpc":"1.0","id":5,"method":"ping"}"#.to_vec(), json!(5), -32600,
             "Invalid Request: jsonrpc must be \"2.0\".".into()),
            ("null id", false, br#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#.to_vec(), Value::Null, -32600,
             "Invalid Request: id must be a string or an integer.".into()),
            ("fraction id", false, br#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#.to_vec(), Value::Null, -32600,
             "Invalid Request: id must be a string or an integer.".into()),
            ("method not a string", false, br#"{"jsonrpc":"2.0","id":"m","method":7}"#.to_vec(), json!("m"), -32600,
             "Invalid Request: method must be a string.".into()),
            ("params an array", false, br#"{"jsonrpc":"2.0","id":4,"method":"ping","params":[1]}"#.to_vec(), json!(4), -32602,
             "Invalid params: params must be an object, not an array.".into()),
            ("params null", false, br#"{"jsonrpc":"2.0","id":4,"method":"ping","params":null}"#.to_vec(), json!(4), -32600,
             "Invalid Request: params must be an object when present.".into()),
            ("unknown method", false, req(json!(1), "nope", json!({})).to_string().into_bytes(), json!(1), -32601,
             "Method not found: nope".into()),
            ("unknown method, control characters and length sanitized", false,
             req(json!(1), &long_method, json!({})).to_string().into_bytes(), json!(1), -32601,
             format!("Method not found: a?b{}", "x".repeat(61))),
            ("tools/list before initialize", false, req(json!(2), "tools/list", json!({})).to_string().into_bytes(),
             json!(2), -32602, NOT_INITIALIZED.into()),
            ("tools/call before initialize", false,
             req(json!(3), "tools/call", json!({"name": "version"})).to_string().into_bytes(),
             json!(3), -32602, NOT_INITIALIZED.into()),
            ("progressToken _meta is still legacy", false,
             req(json!(3), "tools/list", json!({"_meta": {"progressToken": 1}})).to_string().into_bytes(),
             json!(3), -32602, NOT_INITIALIZED.into()),
            ("second initialize", true, req(json!(9), "initialize", init_params("2024-11-05")).to_string().into_bytes(),
             json!(9), -32600, "Invalid Request: already initialized; this process keeps its first handshake.".into()),
            ("initialize without protocolVersion", false,
             req(json!(1), "initialize", json!({"capabilities": {}, "clientInfo": {"name": "t", "version": "1"}})).to_string().into_bytes(),
             json!(1), -32602, BAD_INITIALIZE.into()),
            ("initialize with a numeric protocolVersion", false,
             req(json!(1), "initialize", json!({"protocolVersion": 5, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}})).to_string().into_bytes(),
             json!(1), -32602, BAD_INITIALIZE.into()),
            ("initialize without capabilities", false,
             req(json!(1), "initialize", json!({"protocolVersion": "2025-11-25", "clientInfo": {"name": "t", "version": "1"}})).to_string().into_bytes(),
             json!(1), -32602, BAD_INITIALIZE.into()),
            ("initialize with clientInfo lacking version", false,
             req(json!(1), "initialize", json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t"}})).to_string().into_bytes(),
             json!(1), -32602, BAD_INITIALIZE.into()),
            ("legacy tools/list with a cursor", true, req(json!(3), "tools/list", json!({"cursor": "x"})).to_string().into_bytes(),
             json!(3), -32602, "Invalid cursor: this server never hands out cursors.".into()),
            ("legacy removed-in-no-revision method", true,
             req(json!(1), "logging/setLevel", json!({"level": "info"})).to_string().into_bytes(),
             json!(1), -32601, "Method not found: logging/setLevel".into()),
            ("envelope without capabilities", false,
             req(json!(1), "tools/list", json!({"_meta": {META_VERSION: "2026-07-28"}})).to_string().into_bytes(),
             json!(1), -32602, bad_envelope()),
            ("envelope version not a string", false,
             req(json!(1), "tools/list", json!({"_meta": {META_VERSION: 2026, META_CAPABILITIES: {}}})).to_string().into_bytes(),
             json!(1), -32602, bad_envelope()),
            ("server/discover without an envelope", false,
             req(json!("d"), "server/discover", json!({})).to_string().into_bytes(),
             json!("d"), -32602, bad_envelope()),
            ("envelope naming a handshake revision", false,
             req(json!(3), "tools/list", json!({"_meta": {META_VERSION: "2025-11-25", META_CAPABILITIES: {}}})).to_string().into_bytes(),
             json!(3), -32022, "Unsupported protocol version.".into()),
            ("envelope naming an unknown revision", false,
             req(json!(3), "server/discover", json!({"_meta": {META_VERSION: "1900-01-01", META_CAPABILITIES: {}}})).to_string().into_bytes(),
             json!(3), -32022, "Unsupported protocol version.".into()),
            ("envelope with a bad log level", false,
             req(json!(1), "tools/list", json!({"_meta": {META_VERSION: "2026-07-28", META_CAPABILITIES: {}, META_LOG_LEVEL: "verbose"}})).to_string().into_bytes(),
             json!(1), -32602,
             format!("Invalid params: {META_LOG_LEVEL} must be one of debug, info, notice, warning, error, critical, alert, emergency.")),
            ("modern ping was removed", false, modern(json!(6), "ping", json!({})).to_string().into_bytes(),
             json!(6), -32601, "Method not found: ping".into()),
            ("modern logging/setLevel was removed", false, modern(json!(6), "logging/setLevel", json!({})).to_string().into_bytes(),
             json!(6), -32601, "Method not found: logging/setLevel".into()),
            ("modern tasks/get was removed", false, modern(json!(6), "tasks/get", json!({})).to_string().into_bytes(),
             json!(6), -32601, "Method not found: tasks/get".into()),
            ("subscriptions/listen is not served", false,
             modern(json!(9), "subscriptions/listen", json!({"notifications": {"toolsListChanged": true}})).to_string().into_bytes(),
             json!(9), -32601, "Method not found: subscriptions/listen".into()),
            ("modern tools/list with a cursor", false, modern(json!(9), "tools/list", json!({"cursor": ""})).to_string().into_bytes(),
             json!(9), -32602, "Invalid cursor: this server never hands out cursors.".into()),
            ("tools/call without a name", false, modern(json!(1), "tools/call", json!({})).to_string().into_bytes(),
             json!(1), -32602, "Invalid params: tools/call needs name (a string).".into()),
            ("tools/call with a numeric name", true, req(json!(1), "tools/call", json!({"name": 3})).to_string().into_bytes(),
             json!(1), -32602, "Invalid params: tools/call needs name (a string).".into()),
            ("tools/call with array arguments", false,
             modern(json!(1), "tools/call", json!({"name": "version", "arguments": [1]})).to_string().into_bytes(),
             json!(1), -32602, "Invalid params: arguments must be an object.".into()),
            ("tools/call of an unknown tool", true,
             req(json!("u"), "tools/call", json!({"name": "campaign-check"})).to_string().into_bytes(),
             json!("u"), -32602, "Unknown tool: campaign-check".into()),
            ("tools/call of an unknown tool, name sanitized", false,
             modern(json!(1), "tools/call", json!({"name": "bad\nname"})).to_string().into_bytes(),
             json!(1), -32602, "Unknown tool: bad?name".into()),
        ];
        let input = input();
        for (what, initialized, line, id, code, message) in cases {
            let mut d = Dispatcher::new(&input);
            if initialized {
                initialize(&mut d, "2025-11-25");
            }
            let got = answer(d.handle_line(&line)).unwrap_or_else(|| panic!("{what}: no answer"));
            assert_eq!(got["jsonrpc"], "2.0", "{what}");
            assert_eq!(got["id"], id, "{what}: {got}");
            assert_eq!(error_of(&got), (code, message), "{what}");
            assert!(got.get("result").is_none(), "{what}");
        }
    }

    #[test]
    fn every_code_sent_is_an_rpc_code() {
        // The numbers the table above expects are exactly the enum's.
        let mut sent: Vec<i64> = crate::error::RpcCode::ALL
            .iter()
            .map(|c| c.as_i64())
            .collect();
        sent.sort_unstable();
        assert_eq!(sent, [-32700, -32603, -32602, -32601, -32600, -32022]);
    }

    #[test]
    fn unsupported_version_data_lists_what_is_served() {
        let input = input();
        let mut d = Dispatcher::new(&input);
        let r = ask(
            &mut d,
            &req(
                json!(3),
                "tools/list",
                json!({"_meta": {META_VERSION: "2099-01-01", META_CAPABILITIES: {}}}),
            ),
        );
        assert_eq!(
            r["error"]["data"],
            json!({"supported": ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"],
                   "requested": "2099-01-01"})
        );
    }

    #[test]
    fn initialize_negotiates_and_reports_identity_per_revision() {
        let full = ["name", "version", "title", "description"];
        let cases: [(&str, &str, &[&str]); 8] = [
            ("2024-11-05", "2024-11-05", &full[..2]),
            ("2025-03-26", "2025-03-26", &full[..2]),
            ("2025-06-18", "2025-06-18", &full[..3]),
            ("2025-11-25", "2025-11-25", &full),
            ("2099-01-01", "2025-11-25", &full),
            ("2026-07-28", "2025-11-25", &full),
            ("2024-10-07", "2025-11-25", &full),
            ("", "2025-11-25", &full),
        ];
        let input = input();
        for (asked, got, info) in cases {
            let mut d = Dispatcher::new(&input);
            let r = initialize(&mut d, asked);
            let res = &r["result"];
            assert_eq!(r["id"], "init");
            assert_eq!(res["protocolVersion"], got, "asked {asked}");
            assert_eq!(keys(&res["serverInfo"]), info, "asked {asked}");
            assert_eq!(res["serverInfo"]["name"], "test-server");
            assert_eq!(res["serverInfo"]["version"], "9.8.7");
            assert_eq!(
                keys(res),
                [
                    "protocolVersion",
                    "capabilities",
                    "serverInfo",
                    "instructions"
                ]
            );
            assert_eq!(
                res["capabilities"],
                json!({"tools": {"listChanged": false}})
            );
            assert_eq!(res["instructions"], "Use the tools.");
        }
    }

    /// Tool members and result members of `tools/list`, revision by revision.
    #[test]
    fn tools_list_shapes_per_revision() {
        let structured: &[&str] = &[
            "name",
            "title",
            "description",
            "inputSchema",
            "outputSchema",
            "annotations",
        ];
        let cases: [(&str, &[&str], &[&str]); 5] = [
            (
                "2024-11-05",
                &["name", "description", "inputSchema"],
                &["tools", "_meta"],
            ),
            (
                "2025-03-26",
                &["name", "description", "inputSchema", "annotations"],
                &["tools", "_meta"],
            ),
            ("2025-06-18", structured, &["tools", "_meta"]),
            ("2025-11-25", structured, &["tools", "_meta"]),
            (
                "2026-07-28",
                structured,
                &["tools", "ttlMs", "cacheScope", "resultType", "_meta"],
            ),
        ];
        let input = input();
        for (rev, tool_keys, result_keys) in cases {
            let mut d = Dispatcher::new(&input);
            let r = if Revision::parse(rev).unwrap().is_handshakeless() {
                ask(&mut d, &modern(json!(1), "tools/list", json!({})))
            } else {
                initialize(&mut d, rev);
                ask(&mut d, &req(json!(1), "tools/list", json!({})))
            };
            let res = &r["result"];
            assert_eq!(keys(res), result_keys, "{rev}");
            assert_eq!(res["_meta"][META_TOOLS_SHA256], served_digest(), "{rev}");
            let names: Vec<&str> = res["tools"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["name"].as_str().unwrap())
                .collect();
            assert_eq!(names, ["campaign_check", "version"], "{rev}");
            for t in res["tools"].as_array().unwrap() {
                assert_eq!(keys(t), tool_keys, "{rev}: {t}");
                assert_eq!(t["inputSchema"]["type"], "object");
            }
        }
    }

    #[test]
    fn modern_tools_list_is_stamped_and_cacheable() {
        let input = input();
        let mut d = Dispatcher::new(&input);
        let r = ask(&mut d, &modern(json!(1), "tools/list", json!({})));
        let res = &r["result"];
        assert_eq!(res["ttlMs"], TTL_MS);
        assert_eq!(res["cacheScope"], "public");
        assert_eq!(res["resultType"], "complete");
        assert_eq!(
            res["_meta"],
            json!({META_SERVER_INFO: {"name": "test-server", "version": "9.8.7",
                "title": "Test server", "description": "A server for tests."},
                META_TOOLS_SHA256: served_digest()})
        );
        assert_eq!(res["tools"][0]["annotations"]["readOnlyHint"], true);
        assert_eq!(res["tools"][0]["outputSchema"], output_schema());
    }

    #[test]
    fn tools_list_line_keeps_the_id_digit_for_digit() {
        let input = input();
        let mut d = Dispatcher::new(&input);
        initialize(&mut d, "2024-11-05");
        let line =
            br#"{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"tools/list"}"#;
        let Action::ReplyLine(text) = d.handle_line(line) else {
            panic!("tools/list is answered from the cached line")
        };
        assert!(
            text.starts_with(
                r#"{"jsonrpc":"2.0","id":123456789012345678901234567890,"result":{"tools":[{"name":"campaign_check","description":"#
            ),
            "{text}"
        );
        assert!(!text.contains('\n'));
    }

    #[test]
    fn server_discover_answers_without_a_handshake() {
        let input = input();
        let mut d = Dispatcher::new(&input);
        let r = ask(&mut d, &modern(json!("d1"), "server/discover", json!({})));
        assert_eq!(r["id"], "d1");
        assert_eq!(
            r["result"],
            json!({
                "supportedVersions": ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"],
                "capabilities": {"tools": {"listChanged": false}},
                "instructions": "Use the tools.",
                "ttlMs": TTL_MS,
                "cacheScope": "public",
                "resultType": "complete",
                "_meta": {META_SERVER_INFO: {"name": "test-server", "version": "9.8.7",
                    "title": "Test server", "description": "A server for tests."},
                    META_TOOLS_SHA256: served_digest()},
            })
        );
        // Discover fixes no legacy state.
        let r = ask(&mut d, &req(json!(2), "tools/list", json!({})));
        assert_eq!(error_of(&r), (-32602, NOT_INITIALIZED.to_string()));
    }

    #[test]
    fn modern_requests_are_stateless_and_identical() {
        let input = input();
        let mut d = Dispatcher::new(&input);
        let a = ask(&mut d, &modern(json!(1), "tools/list", json!({})));
        let b = ask(&mut d, &modern(json!(1), "tools/list", json!({})));
        assert_eq!(a, b);
        let mut fresh = Dispatcher::new(&input);
        assert_eq!(
            ask(&mut fresh, &modern(json!(1), "tools/list", json!({}))),
            a
        );
    }

    #[test]
    fn eras_mix_on_one_dispatcher() {
        let input = input();
        let mut d = Dispatcher::new(&input);
        initialize(&mut d, "2024-11-05");
        let m = ask(&mut d, &modern(json!(1), "tools/list", json!({})));
        assert!(m["result"]["tools"][0].get("title").is_some());
        assert_eq!(m["result"]["resultType"], "complete");
        let l = ask(&mut d, &req(json!(2), "tools/list", json!({})));
        assert_eq!(keys(&l["result"]), ["tools", "_meta"]);
        assert!(l["result"]["tools"][0].get("annotations").is_none());
        // `initialize` is legacy even with an envelope, and still refused the second time.
        let again = ask(
            &mut d,
            &modern(json!(3), "initialize", init_params("2025-11-25")),
        );
        assert_eq!(again["error"]["code"], -32600);
    }

    #[test]
    fn a_refused_second_initialize_keeps_the_first_revision() {
        let input = input();
        let mut d = Dispatcher::new(&input);
        initialize(&mut d, "2025-11-25");
        let r = initialize(&mut d, "2024-11-05");
        assert_eq!(r["error"]["code"], -32600);
        let tools = ask(&mut d, &req(json!(2), "tools/list", json!({})));
        assert!(tools["result"]["tools"][0].get("title").is_some());
    }

    #[test]
    fn a_failed_initialize_can_be_retried() {
        let input = input();
        let mut d = Dispatcher::new(&input);
        let r = ask(&mut d, &req(json!(1), "initialize", json!({})));
        assert_eq!(r["error"]["code"], -32602);
        assert_eq!(
            initialize(&mut d, "2025-03-26")["result"]["protocolVersion"],
            "2025-03-26"
        );
    }

    #[test]
    fn ping_is_legacy_and_needs_no_handshake() {
        let input = input();
        let mut d = Dispatcher::new(&input);
        assert_eq!(
            ask(&mut d, &req(json!("123"), "ping", json!({}))),
            json!({"jsonrpc": "2.0", "id": "123", "result": {}})
        );
        let line =
            br#"{"jsonrpc":"2.0","id":5,"method":"ping","params":{"_meta":{"progressToken":2}}}"#;
        assert_eq!(
            answer(d.handle_line(line)).unwrap(),
            json!({"jsonrpc": "2.0", "id": 5, "result": {}})
        );
        initialize(&mut d, "2024-11-05");
        assert_eq!(
            ask(&mut d, &req(json!(0), "ping", json!({})))["result"],
            json!({})
        );
    }

    #[test]
    fn notifications_and_responses_are_never_answered() {
        let input = input();
        let mut d = Dispatcher::new(&input);
        for line in [
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {}}),
            json!({"jsonrpc": "2.0", "method": "tools/list"}),
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1.5}}),
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {}}),
            json!({"jsonrpc": "2.0", "id": 99, "result": {}}),
            json!({"jsonrpc": "2.0", "id": 99, "error": {"code": 1, "message": "x"}}),
        ] {
            assert!(matches!(send(&mut d, &line), Action::Nothing), "{line}");
        }
        // Nothing above initialized the session.
        let r = ask(&mut d, &req(json!(1), "tools/list", json!({})));
        assert_eq!(r["error"]["code"], -32602);
    }

    #[test]
    fn a_cancel_names_the_request_by_its_exact_id() {
        let input = input();
        let mut d = Dispatcher::new(&input);
        for id in [json!(7), json!("7"), json!(-1)] {
            let n = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                "params": {"requestId": id, "reason": "x"}});
            match send(&mut d, &n) {
                Action::Cancel(got) => assert_eq!(got, id),
                other => panic!("{other:?}"),
            }
        }
    }

    fn job(action: Action) -> CallJob {
        match action {
            Action::Call(job) => job,
            other => panic!("not a call: {other:?}"),
        }
    }

    #[test]
    fn tools_call_becomes_a_job_for_the_request_revision() {
        let input = input();
        let cases = [
            ("2024-11-05", Revision::V2024_11_05),
            ("2025-03-26", Revision::V2025_03_26),
            ("2025-06-18", Revision::V2025_06_18),
            ("2025-11-25", Revision::V2025_11_25),
        ];
        for (rev, want) in cases {
            let mut d = Dispatcher::new(&input);
            initialize(&mut d, rev);
            let j = job(send(
                &mut d,
                &req(json!(4), "tools/call", json!({"name": "version"})),
            ));
            assert_eq!(
                (j.id, j.tool.as_str(), j.revision),
                (json!(4), "version", want)
            );
            assert!(j.arguments.is_empty());
        }
        let mut d = Dispatcher::new(&input);
        let j = job(send(
            &mut d,
            &modern(
                json!("c"),
                "tools/call",
                json!({"name": "campaign_check", "arguments": {"campaign": "a.md", "days": 3},
                    "task": {"ttl": 1000}, "inputResponses": {}, "requestState": "abc"}),
            ),
        ));
        assert_eq!(j.revision, Revision::V2026_07_28);
        assert_eq!(j.id, json!("c"));
        assert_eq!(
            Value::Object(j.arguments),
            json!({"campaign": "a.md", "days": 3})
        );
    }

    /// A tool error of every code, at every revision: an `isError` result
    /// carrying the envelope, never a JSON-RPC error.
    #[test]
    fn call_results_for_every_error_code_at_every_revision() {
        let input = input();
        for rev in Revision::SERVED {
            for code in ErrorCode::ALL {
                let e = Envelope::from_error(&ToolError::of(code));
                let r = input.call_result(rev, &e);
                let want_text = format!(
                    r#"{{"exit_code":2,"output":{{"error":{{"code":"{}","message":"{}"}}}}}}"#,
                    code.as_str(),
                    code.hint()
                );
                assert_eq!(r["isError"], true, "{rev:?} {code}");
                assert_eq!(r["content"], json!([{"type": "text", "text": want_text}]));
                assert_eq!(
                    r.get("structuredContent").is_some(),
                    rev.has_structured(),
                    "{rev:?}"
                );
                if rev.has_structured() {
                    assert_eq!(
                        r["structuredContent"]["output"]["error"]["code"],
                        code.as_str()
                    );
                    assert_eq!(r["structuredContent"]["exit_code"], 2);
                }
                assert_eq!(
                    r.get("resultType").is_some(),
                    rev.is_handshakeless(),
                    "{rev:?}"
                );
                assert_eq!(r.get("_meta").is_some(), rev.is_handshakeless(), "{rev:?}");
            }
        }
    }

    #[test]
    fn call_results_for_answers_and_findings_are_not_errors() {
        let input = input();
        for (exit, is_error) in [(0, false), (1, false), (2, true)] {
            let e = Envelope::from_run(exit, json!({"n": exit}));
            let r = input.call_result(Revision::V2025_11_25, &e);
            assert_eq!(r["isError"], is_error, "{exit}");
            assert_eq!(keys(&r), ["content", "structuredContent", "isError"]);
            assert_eq!(
                r["structuredContent"],
                json!({"exit_code": exit, "output": {"n": exit}})
            );
        }
    }

    #[test]
    fn call_meta_joins_the_identity_without_replacing_it() {
        let input = input();
        let mut e = Envelope::from_run(0, json!({}));
        e.meta.insert("io.reachweaver/redacted".into(), json!(2));
        let r = input.call_result(Revision::V2026_07_28, &e);
        assert_eq!(r["_meta"]["io.reachweaver/redacted"], 2);
        assert_eq!(r["_meta"][META_SERVER_INFO]["name"], "test-server");
        let r = input.call_result(Revision::V2024_11_05, &e);
        assert_eq!(r["_meta"], json!({"io.reachweaver/redacted": 2}));
        assert!(r.get("resultType").is_none());
    }
}
