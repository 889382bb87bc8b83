//! Catalog -> tools: eligibility (CONTRACT.md §4), naming, withheld
//! arguments, and input schemas (DESIGN.md §3).
//!
//! INTERFACE (used by dispatch.rs; keep these fields and methods):
//! `Tool { name, title, description, input_schema, annotations, .. }`,
//! `ToolSet::get(name)`, `ToolSet::iter()` in a deterministic order.

use serde_json::Value;

/// The four behaviour hints, always set explicitly (PROTOCOL.md E7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Annotations {
    pub read_only_hint: bool,
    pub destructive_hint: bool,
    pub idempotent_hint: bool,
    pub open_world_hint: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolKind {
    /// Changes nothing the owner keeps.
    ReadOnly,
    /// The `draft` tool: may write inside the database's folder only.
    Draft,
}

#[derive(Debug, Clone)]
pub struct Tool {
    /// `[a-z0-9_]`, at most 64 characters.
    pub name: String,
    /// Human display name.
    pub title: String,
    pub description: String,
    /// The JSON Schema of the arguments; root `type: object`.
    pub input_schema: Value,
    pub annotations: Annotations,
    pub kind: ToolKind,
    /// The backend command this tool runs.
    pub command: String,
}

/// The offered tools, fixed at start, in a deterministic order.
#[derive(Debug, Clone, Default)]
pub struct ToolSet {
    tools: Vec<Tool>,
}

impl ToolSet {
    pub fn new(mut tools: Vec<Tool>) -> Self {
        tools.sort_by(|a, b| a.name.cmp(&b.name));
        Self { tools }
    }

    pub fn get(&self, name: &str) -> Option<&Tool> {
        self.tools.iter().find(|t| t.name == name)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Tool> {
        self.tools.iter()
    }

    pub fn len(&self) -> usize {
        self.tools.len()
    }
}
