//! `usr/mcp-tools.lock`: each MCP server's tool definitions as first seen or last approved
//! (the SHA-256 of the definition, and the definition itself to show what changed).
//!
//! A definition is a tool's name, title, description, input and output schema and
//! annotations: what a model reads and follows. The first time a server's tool is seen its
//! definition is recorded (trust on first use). A definition that differs later (a "rug
//! pull") is not offered to the model while pinning is on (`pinning = true`, as for
//! libraries) until `toolhost mcp approve SERVER` records it; with pinning off it is offered
//! and the change is logged. `toolhost mcp diff SERVER` shows the changes.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;

use rmcp::model::Tool;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::layout::{read_text, write_atomically, Layout, ReadErrorKind};

/// One tool's approved definition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Pinned {
    sha256: String,
    definition: Value,
}

/// The file: tools by server and name.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct LockFile {
    servers: BTreeMap<String, BTreeMap<String, Pinned>>,
}

/// A tool whose definition changed since it was approved, held back while pinning is on.
#[derive(Debug, Clone, PartialEq)]
pub struct ChangedTool {
    /// Its name on its server.
    pub tool: String,
    /// The definition approved (first seen, or last approved).
    pub approved: Value,
    /// The definition the server gives now.
    pub now: Value,
}

/// One update of the file at a time within the process.
static WRITING: Mutex<()> = Mutex::new(());

/// The definition of `tool` that is pinned: its name, title, description, input and output
/// schema and annotations (absent members left out), keys sorted.
pub(crate) fn definition(tool: &Tool) -> Value {
    let full = serde_json::to_value(tool).unwrap_or(Value::Null);
    let mut picked = Map::new();
    for key in [
        "name",
        "title",
        "description",
        "inputSchema",
        "outputSchema",
        "annotations",
    ] {
        if let Some(value) = full.get(key).filter(|v| !v.is_null()) {
            picked.insert(key.to_owned(), sorted(value.clone()));
        }
    }
    Value::Object(picked)
}

/// `value` with the keys of every object sorted (so the hash does not depend on their order).
fn sorted(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let by_key: BTreeMap<String, Value> =
                map.into_iter().map(|(k, v)| (k, sorted(v))).collect();
            Value::Object(by_key.into_iter().collect())
        }
        Value::Array(items) => Value::Array(items.into_iter().map(sorted).collect()),
        other => other,
    }
}

fn hash(definition: &Value) -> String {
    hex::encode(Sha256::digest(definition.to_string().as_bytes()))
}

/// The lock of a root.
#[derive(Debug, Clone)]
pub(crate) struct ToolPins {
    path: PathBuf,
    layout: Layout,
    max_text_bytes: u64,
}

impl ToolPins {
    pub(crate) fn new(layout: &Layout, max_text_bytes: u64) -> Self {
        Self {
            path: layout.mcp_pins_file(),
            layout: layout.clone(),
            max_text_bytes,
        }
    }

    /// Whether a changed definition is held back: pinning is on, or the configuration hides
    /// whether it is (pinning fails closed).
    pub(crate) fn enforced(&self) -> bool {
        use crate::config::pinning::Pinning;
        match Pinning::read(&self.layout, self.max_text_bytes) {
            Ok(Pinning::Off) | Err((Pinning::Off, _)) => false,
            Ok(_) | Err(_) => true,
        }
    }

    fn read(&self) -> Result<LockFile, String> {
        match read_text(
            &self.path,
            self.max_text_bytes,
            "HostOptions::max_text_bytes",
        ) {
            Ok(text) => serde_json::from_str(&text)
                .map_err(|e| format!("{}: {e}", crate::layout::Escaped(&self.path))),
            Err(e) if e.kind == ReadErrorKind::Missing => Ok(LockFile::default()),
            Err(e) => Err(e.to_string()),
        }
    }

    fn write(&self, lock: &LockFile) -> Result<(), String> {
        let mut text = serde_json::to_string_pretty(lock).map_err(|e| e.to_string())?;
        text.push('\n');
        write_atomically(&self.path, text.as_bytes())
            .map_err(|e| format!("cannot write {}: {e}", crate::layout::Escaped(&self.path)))
    }

    /// Checks `tools` of `server` against the lock: those seen for the first time are
    /// recorded; those whose definition changed are returned. An unusable lock is an error
    /// (every tool is then held back by the caller while pinning is on).
    pub(crate) fn check(&self, server: &str, tools: &[Tool]) -> Result<Vec<ChangedTool>, String> {
        let _writing = crate::sync::lock(&WRITING);
        let mut lock = self.read()?;
        let pinned = lock.servers.entry(server.to_owned()).or_default();
        let mut changed = Vec::new();
        let mut first_seen = false;
        for tool in tools {
            let now = definition(tool);
            let sha256 = hash(&now);
            match pinned.get(tool.name.as_ref()) {
                Some(p) if p.sha256 == sha256 => {}
                Some(p) => changed.push(ChangedTool {
                    tool: tool.name.to_string(),
                    approved: p.definition.clone(),
                    now,
                }),
                None => {
                    first_seen = true;
                    let definition = now;
                    pinned.insert(tool.name.to_string(), Pinned { sha256, definition });
                }
            }
        }
        if first_seen {
            self.write(&lock)?;
        }
        Ok(changed)
    }

    /// Records `changed` definitions of `server` as approved.
    pub(crate) fn approve(&self, server: &str, changed: &[ChangedTool]) -> Result<(), String> {
        let _writing = crate::sync::lock(&WRITING);
        let mut lock = self.read()?;
        let pinned = lock.servers.entry(server.to_owned()).or_default();
        for tool in changed {
            let sha256 = hash(&tool.now);
            let definition = tool.now.clone();
            pinned.insert(tool.tool.clone(), Pinned { sha256, definition });
        }
        self.write(&lock)
    }
}
