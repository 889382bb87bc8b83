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
}

/// Legacy state lives per process: the revision the one `initialize` fixed.
#[derive(Debug, Default)]
pub struct Session {
    legacy: Option<Revision>,
}

/// Who answers: the identity reported in `serverInfo`, each revision
/// getting only the fields it defines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub name: String,
    pub version: String,
    /// From 2025-06-18 on.
    pub title: String,
    /// From 2025-11-25 on.
    pub description: String,
}

impl Identity {
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
    pub instructions: String,
    pub identity: Identity,
}

impl ProtocolInput {
    pub fn new<'t>(
        tools: impl IntoIterator<Item = &'t Tool>,
        instructions: impl Into<String>,
        identity: Identity,
    ) -> Self {
        Self {
            lists: ToolLists::new(tools),
            instructions: instructions.into(),
            identity,
        }
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
    crate::log::line(format!(
        "protocol error code={} method={}",
        err.code,
        sanitize(method)
    ));
    Action::Reply(jsonrpc::error(id, &err))
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
        self.input.stamped(rev, r)
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
            return fail(
                &id,
                "tools/call",
                RpcError::new(
                    RpcCode::InvalidParams,
                    format!("Unknown tool: {}", sanitize(&name)),
                ),
            );
        }
        Action::Call(CallJob {
            id,
            tool: name,
            arguments,
            revision: rev,
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
