//! One match on the method name, per era. Everything here is answered at
//! once except `tools/call`, which becomes a `CallJob` for a worker thread.

use serde_json::{json, Map, Value};

use crate::envelope::Envelope;
use crate::era::{self, Era, Revision, META_SERVER_INFO};
use crate::error::RpcError;
use crate::jsonrpc::{self, Incoming, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND};
use crate::startup::{App, SERVER_NAME, SERVER_VERSION};
use crate::tools::Tool;

/// How long a client may cache discover and tools/list answers: the tool
/// list never changes while the server runs.
pub const TTL_MS: u64 = 3_600_000;
const SERVER_TITLE: &str = "ReachWeaver (read-only, sandboxed)";
const SERVER_DESCRIPTION: &str =
    "Read-only ReachWeaver tools; every call runs in a kernel-confined child process.";

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

/// Tool definitions rendered and serialized once per revision: the list
/// never changes while the server runs, so `tools/list` only splices text.
pub struct ToolLists {
    by_revision: Vec<(Revision, String)>,
}

impl ToolLists {
    pub fn new(app: &App) -> Self {
        let by_revision = Revision::SERVED
            .iter()
            .map(|&rev| {
                let tools = Value::Array(app.tools.iter().map(|t| tool_json(t, rev)).collect());
                (rev, jsonrpc::to_line(&tools))
            })
            .collect();
        Self { by_revision }
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

fn server_info(rev: Revision) -> Value {
    let mut info = json!({"name": SERVER_NAME, "version": SERVER_VERSION});
    if rev.has_structured() {
        info["title"] = json!(SERVER_TITLE);
    }
    if rev.has_rich_server_info() {
        info["description"] = json!(SERVER_DESCRIPTION);
    }
    info
}

/// Stamp a modern result: `resultType` and the server's identity in `_meta`.
fn modern(mut result: Map<String, Value>) -> Value {
    stamp_modern(&mut result);
    Value::Object(result)
}

fn stamp_modern(result: &mut Map<String, Value>) {
    result.insert("resultType".into(), json!("complete"));
    result.insert(
        "_meta".into(),
        json!({META_SERVER_INFO: server_info(Revision::MODERN)}),
    );
}

/// The `tools/call` result for an envelope, shaped for the revision.
pub fn call_result(rev: Revision, envelope: &Envelope) -> Value {
    let mut r = Map::new();
    r.insert(
        "content".into(),
        json!([{"type": "text", "text": envelope.to_text()}]),
    );
    if rev.has_structured() {
        r.insert("structuredContent".into(), envelope.to_value());
    }
    r.insert("isError".into(), json!(envelope.is_error()));
    if rev.is_modern() {
        stamp_modern(&mut r);
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

pub struct Dispatcher<'a> {
    pub app: &'a App,
    pub lists: &'a ToolLists,
    pub session: Session,
}

impl<'a> Dispatcher<'a> {
    pub fn new(app: &'a App, lists: &'a ToolLists) -> Self {
        Self {
            app,
            lists,
            session: Session::default(),
        }
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
        if let Err(e) = era::check_envelope(&params) {
            return fail(&id, method, e);
        }
        match method {
            "server/discover" => Action::Reply(jsonrpc::result(&id, self.discover())),
            "tools/list" => self.tools_list(&id, &params, Revision::MODERN),
            "tools/call" => self.tools_call(id, params, Revision::MODERN),
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
                        RpcError::new(
                            INVALID_PARAMS,
                            "Invalid params: not initialized; send initialize first, or stamp the request \
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

    fn discover(&self) -> Value {
        let mut r = Map::new();
        r.insert(
            "supportedVersions".into(),
            json!(Revision::supported_strings()),
        );
        r.insert(
            "capabilities".into(),
            json!({"tools": {"listChanged": false}}),
        );
        r.insert("instructions".into(), json!(self.app.instructions));
        r.insert("ttlMs".into(), json!(TTL_MS));
        r.insert("cacheScope".into(), json!("public"));
        modern(r)
    }

    fn initialize(&mut self, params: &Map<String, Value>) -> Result<Value, RpcError> {
        if self.session.legacy.is_some() {
            return Err(RpcError::new(
                INVALID_REQUEST,
                "Invalid Request: already initialized; this process keeps its first handshake.",
            ));
        }
        let version = params.get("protocolVersion").and_then(Value::as_str);
        let caps_ok = params.get("capabilities").is_some_and(Value::is_object);
        let client_ok = params.get("clientInfo").is_some_and(|c| {
            c.get("name").is_some_and(Value::is_string)
                && c.get("version").is_some_and(Value::is_string)
        });
        let (Some(version), true, true) = (version, caps_ok, client_ok) else {
            return Err(RpcError::new(
                INVALID_PARAMS,
                "Invalid params: initialize needs protocolVersion (a string), capabilities (an object) \
                 and clientInfo {name, version}.",
            ));
        };
        let rev = era::negotiate(version);
        self.session.legacy = Some(rev);
        Ok(json!({
            "protocolVersion": rev.as_str(),
            "capabilities": {"tools": {"listChanged": false}},
            "serverInfo": server_info(rev),
            "instructions": self.app.instructions,
        }))
    }

    fn tools_list(&self, id: &Value, params: &Map<String, Value>, rev: Revision) -> Action {
        if params.contains_key("cursor") {
            return fail(
                id,
                "tools/list",
                RpcError::new(
                    INVALID_PARAMS,
                    "Invalid cursor: this server never hands out cursors.",
                ),
            );
        }
        let mut rest = Map::new();
        if rev.is_modern() {
            rest.insert("ttlMs".into(), json!(TTL_MS));
            rest.insert("cacheScope".into(), json!("public"));
            stamp_modern(&mut rest);
        }
        Action::ReplyLine(self.lists.response_line(id, rev, &rest))
    }

    fn tools_call(&self, id: Value, mut params: Map<String, Value>, rev: Revision) -> Action {
        let name = match params.get("name") {
            Some(Value::String(n)) => n.clone(),
            _ => {
                return fail(
                    &id,
                    "tools/call",
                    RpcError::new(
                        INVALID_PARAMS,
                        "Invalid params: tools/call needs name (a string).",
                    ),
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
                    RpcError::new(
                        INVALID_PARAMS,
                        "Invalid params: arguments must be an object.",
                    ),
                )
            }
        };
        if self.app.tools.get(&name).is_none() {
            return fail(
                &id,
                "tools/call",
                RpcError::new(INVALID_PARAMS, format!("Unknown tool: {}", sanitize(&name))),
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
    RpcError::new(
        METHOD_NOT_FOUND,
        format!("Method not found: {}", sanitize(method)),
    )
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
