//! The pinned form of a served tool: its whole wire object as the
//! catalog decides it (not as one protocol revision renders it), every
//! `$ref` replaced by what it points at, keys sorted (RFC 8785), and the
//! digest of the served set.

use serde_json::{json, Map, Value};

use crate::audit::chain::sha256_hex;
use crate::canonical;
use crate::tools::Tool;

/// Why a tool has no pinned form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum WireError {
    /// A `$ref` that does not point into the same schema (`#...`).
    NotLocal { tool: String, reference: String },
    /// A local `$ref` that points at nothing.
    Missing { tool: String, reference: String },
    /// A `$ref` that reaches itself again; the chain, in order.
    Cyclic { tool: String, chain: Vec<String> },
    /// A value with no canonical form (a number beyond the double range).
    NotCanonical { tool: String, why: String },
}

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WireError::NotLocal { tool, reference } => write!(
                f,
                "tool `{tool}`: $ref {reference:?} does not point into the tool's own schema \
                 (only \"#...\" references can be pinned)"
            ),
            WireError::Missing { tool, reference } => write!(
                f,
                "tool `{tool}`: $ref {reference:?} points at nothing in the tool's schema"
            ),
            WireError::Cyclic { tool, chain } => write!(
                f,
                "tool `{tool}`: $ref is cyclic ({}), so it has no resolved form",
                chain.join(" -> ")
            ),
            WireError::NotCanonical { tool, why } => write!(f, "tool `{tool}`: {why}"),
        }
    }
}

impl std::error::Error for WireError {}

/// A `$ref` failure before the tool's name is known.
enum RefFault {
    NotLocal(String),
    Missing(String),
    Cyclic(Vec<String>),
}

impl RefFault {
    fn named(self, tool: &str) -> WireError {
        let tool = tool.to_string();
        match self {
            RefFault::NotLocal(reference) => WireError::NotLocal { tool, reference },
            RefFault::Missing(reference) => WireError::Missing { tool, reference },
            RefFault::Cyclic(chain) => WireError::Cyclic { tool, chain },
        }
    }
}

/// `schema` with every `$ref` replaced by the value it points at, itself
/// resolved. A `$ref` with sibling keywords becomes `{"allOf": [target,
/// siblings]}`, which keeps both and means the same.
fn resolve(root: &Value) -> Result<Value, RefFault> {
    resolve_in(root, root, &mut Vec::new())
}

fn resolve_in(root: &Value, value: &Value, stack: &mut Vec<String>) -> Result<Value, RefFault> {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(reference)) = map.get("$ref") {
                let target = follow(root, reference, stack)?;
                let mut siblings = map.clone();
                siblings.remove("$ref");
                if siblings.is_empty() {
                    return Ok(target);
                }
                let siblings = resolve_in(root, &Value::Object(siblings), stack)?;
                return Ok(json!({"allOf": [target, siblings]}));
            }
            let mut out = Map::new();
            for (k, v) in map {
                out.insert(k.clone(), resolve_in(root, v, stack)?);
            }
            Ok(Value::Object(out))
        }
        Value::Array(items) => items
            .iter()
            .map(|v| resolve_in(root, v, stack))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array),
        other => Ok(other.clone()),
    }
}

fn follow(root: &Value, reference: &str, stack: &mut Vec<String>) -> Result<Value, RefFault> {
    let Some(pointer) = reference.strip_prefix('#') else {
        return Err(RefFault::NotLocal(reference.to_string()));
    };
    if stack.iter().any(|r| r == reference) {
        let mut chain = stack.clone();
        chain.push(reference.to_string());
        return Err(RefFault::Cyclic(chain));
    }
    let target = root
        .pointer(pointer)
        .ok_or_else(|| RefFault::Missing(reference.to_string()))?;
    stack.push(reference.to_string());
    let resolved = resolve_in(root, target, stack);
    stack.pop();
    resolved
}

/// The tool's wire object as pinned: every member any revision serves.
pub(crate) fn tool_object(tool: &Tool) -> Result<Value, WireError> {
    let input = resolve(&tool.input_schema).map_err(|f| f.named(&tool.name))?;
    let output = resolve(&crate::dispatch::output_schema()).map_err(|f| f.named(&tool.name))?;
    let a = tool.annotations;
    let object = json!({
        "name": tool.name,
        "title": tool.title,
        "description": tool.description,
        "inputSchema": input,
        "outputSchema": output,
        "annotations": {
            "title": tool.title,
            "readOnlyHint": a.read_only_hint,
            "destructiveHint": a.destructive_hint,
            "idempotentHint": a.idempotent_hint,
            "openWorldHint": a.open_world_hint,
        },
    });
    sorted(&object).map_err(|why| WireError::NotCanonical {
        tool: tool.name.clone(),
        why,
    })
}

/// `value` with its keys in canonical order (serde_json keeps insertion
/// order here, so the re-read canonical text is sorted).
pub(crate) fn sorted(value: &Value) -> Result<Value, String> {
    let text = canonical::to_string(value).map_err(|e| e.to_string())?;
    serde_json::from_str(&text).map_err(|e| e.to_string())
}

/// The pinned objects of the served tools, in the order they are served.
pub(crate) fn tool_objects<'t>(
    tools: impl IntoIterator<Item = &'t Tool>,
) -> Result<Vec<Value>, WireError> {
    tools.into_iter().map(tool_object).collect()
}

/// The SHA-256 of the canonical array of the served tools' objects.
pub(crate) fn tools_sha256(objects: &[Value]) -> String {
    // The objects came from `sorted`, so they have a canonical form.
    let text = canonical::to_string(&Value::Array(objects.to_vec())).unwrap_or_default();
    sha256_hex(text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(v: Value) -> Value {
        resolve(&v).ok().unwrap()
    }

    #[test]
    fn local_refs_are_replaced_by_their_targets() {
        let schema = json!({
            "type": "object",
            "$defs": {"n": {"type": "integer", "minimum": 1}, "m": {"$ref": "#/$defs/n"}},
            "properties": {"a": {"$ref": "#/$defs/m"}, "b": {"$ref": "#/$defs/n", "maximum": 9}}
        });
        let r = ok(schema);
        assert_eq!(
            r["properties"]["a"],
            json!({"type": "integer", "minimum": 1})
        );
        assert_eq!(
            r["properties"]["b"],
            json!({"allOf": [{"type": "integer", "minimum": 1}, {"maximum": 9}]})
        );
        // A pointer with escaped characters (~1 is "/").
        let r = ok(json!({"$defs": {"a/b": {"const": 1}}, "x": {"$ref": "#/$defs/a~1b"}}));
        assert_eq!(r["x"], json!({"const": 1}));
        // A property named "$ref" whose value is a schema is not a reference.
        let r = ok(json!({"properties": {"$ref": {"type": "string"}}}));
        assert_eq!(r["properties"]["$ref"], json!({"type": "string"}));
    }

    #[test]
    fn missing_remote_and_cyclic_refs_are_refused() {
        let missing = resolve(&json!({"properties": {"a": {"$ref": "#/$defs/nope"}}}));
        assert!(matches!(missing, Err(RefFault::Missing(r)) if r == "#/$defs/nope"));
        for remote in ["https://example.com/s.json", "other.json#/a", ""] {
            let r = resolve(&json!({"a": {"$ref": remote}}));
            assert!(matches!(r, Err(RefFault::NotLocal(ref x)) if x == remote));
        }
        let cyclic = resolve(&json!({
            "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"items": {"$ref": "#/$defs/a"}}},
            "properties": {"x": {"$ref": "#/$defs/a"}}
        }));
        match cyclic {
            Err(RefFault::Cyclic(chain)) => {
                assert_eq!(chain, ["#/$defs/b", "#/$defs/a", "#/$defs/b"])
            }
            _ => panic!("a cycle must be refused"),
        }
        // The whole document referring to itself is a cycle too.
        assert!(matches!(
            resolve(&json!({"items": {"$ref": "#"}})),
            Err(RefFault::Cyclic(_))
        ));
        let e = RefFault::Cyclic(vec!["#/a".into(), "#/a".into()]).named("t");
        assert_eq!(
            e.to_string(),
            "tool `t`: $ref is cyclic (#/a -> #/a), so it has no resolved form"
        );
    }

    #[test]
    fn the_same_target_twice_is_not_a_cycle() {
        let r = ok(json!({
            "$defs": {"n": {"type": "integer"}},
            "properties": {"a": {"$ref": "#/$defs/n"}, "b": {"$ref": "#/$defs/n"}}
        }));
        assert_eq!(r["properties"]["a"], r["properties"]["b"]);
    }

    #[test]
    fn the_pinned_object_has_every_member_with_sorted_keys() {
        let catalog = crate::catalog::parse(
            br#"{"catalog":1,"program":{"name":"p","version":"1"},"format_flag":"--format",
                "commands":[{"name":"stock-count","summary":"Count.","tags":["read_only"],"formats":["json"],
                "flags":[{"name":"--limit","type":"integer","help":"How many."},
                         {"name":"--format","type":"choice","choices":["json"],"output_format":true}]}]}"#,
        )
        .unwrap();
        let (tools, _) = crate::tools::build(&catalog, false);
        let o = tool_object(tools.iter().next().unwrap()).unwrap();
        let keys: Vec<&String> = o.as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            [
                "annotations",
                "description",
                "inputSchema",
                "name",
                "outputSchema",
                "title"
            ]
        );
        assert_eq!(o["name"], "stock_count");
        assert_eq!(o["title"], "Stock count");
        assert_eq!(o["annotations"]["readOnlyHint"], true);
        assert_eq!(o["outputSchema"], crate::dispatch::output_schema());
        let text = canonical::to_string(&o).unwrap();
        assert_eq!(serde_json::to_string(&o).unwrap(), text);
        let digest = tools_sha256(std::slice::from_ref(&o));
        assert_eq!(digest, sha256_hex(format!("[{text}]").as_bytes()));
    }
}
