//! `usr/mcp-tools.lock`: each MCP server's tool definitions as first seen or last approved
//! (the SHA-256 of the definition, and the definition itself to show what changed).
//!
//! A definition is a tool's name, title, description, input and output schema and
//! annotations: what a model reads and follows. The first time a server's tool is seen its
//! definition is recorded (trust on first use). A definition that differs later (a "rug
//! pull") is held back, with no configuration needed: it is not offered to the model nor
//! callable until `toolhost mcp approve SERVER` records it, and the change is logged.
//! `toolhost mcp diff SERVER` shows the changes.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;

use rmcp::model::Tool;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::audit::{Audit, AuditKey, AuditOptions, AuditRecord, DefinitionEvent, DefinitionRecord};
use crate::config::Config;
use crate::layout::{read_text, write_atomically, Layout, ReadErrorKind};

/// One tool's approved definition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Pinned {
    sha256: String,
    definition: Value,
}

/// The file: tools by server and name, and the changes already audited.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct LockFile {
    servers: BTreeMap<String, BTreeMap<String, Pinned>>,
    /// The SHA-256 of each changed definition whose change is in the audit log already (by
    /// server and tool), so that every host that meets it does not audit it again.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    audited: BTreeMap<String, BTreeMap<String, String>>,
}

/// A tool whose definition changed since it was approved, held back until approved.
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
    /// (the caller then offers none of the server's tools).
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
        // Each change is audited once, by the first host that meets it.
        let audited = lock.audited.entry(server.to_owned()).or_default();
        let mut records = Vec::new();
        for change in &changed {
            let now = hash(&change.now);
            if audited.get(&change.tool) == Some(&now) {
                continue;
            }
            audited.insert(change.tool.clone(), now);
            records.push(record(server, change, DefinitionEvent::Changed));
        }
        lock.audited.retain(|_, tools| !tools.is_empty());
        if first_seen || !records.is_empty() {
            self.write(&lock)?;
        }
        self.audit(&records);
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
        if let Some(audited) = lock.audited.get_mut(server) {
            audited.retain(|tool, _| !changed.iter().any(|c| c.tool == *tool));
        }
        lock.audited.retain(|_, tools| !tools.is_empty());
        self.write(&lock)?;
        let records: Vec<DefinitionRecord> = changed
            .iter()
            .map(|c| record(server, c, DefinitionEvent::Approved))
            .collect();
        self.audit(&records);
        Ok(())
    }

    /// Appends `records` to the audit log (`usr/audit/`, with the settings of
    /// `usr/toolhost.toml`); a failure is logged, the change itself is logged anyway.
    fn audit(&self, records: &[DefinitionRecord]) {
        if records.is_empty() {
            return;
        }
        let appended = (|| -> Result<(), String> {
            let config = Config::load(&self.layout, "default", self.max_text_bytes)
                .map_err(|e| e.to_string())?;
            let dir = self.layout.audit_dir();
            let key = match config.audit_key_env() {
                Some(name) => Some(AuditKey::from_env(name, &dir).map_err(|e| e.to_string())?),
                None => None,
            };
            let fsync = config.audit().fsync;
            let audit =
                Audit::open(&dir, AuditOptions { fsync, key }).map_err(|e| e.to_string())?;
            for record in records {
                audit
                    .append(&AuditRecord::Definition(record.clone()))
                    .map_err(|e| e.to_string())?;
            }
            Ok(())
        })();
        if let Err(e) = appended {
            tracing::warn!("a change of an MCP tool definition was not audited: {e}");
        }
    }
}

/// The audit record of `change` of `server`'s tool.
fn record(server: &str, change: &ChangedTool, event: DefinitionEvent) -> DefinitionRecord {
    let members = |v: &Value| v.as_object().cloned().unwrap_or_default();
    let (old, new) = (members(&change.approved), members(&change.now));
    let mut differ: Vec<String> = old
        .keys()
        .chain(new.keys())
        .filter(|k| old.get(*k) != new.get(*k))
        .cloned()
        .collect();
    differ.sort();
    differ.dedup();
    DefinitionRecord {
        server: server.to_owned(),
        tool: change.tool.clone(),
        event,
        approved_sha256: hash(&change.approved),
        now_sha256: hash(&change.now),
        members: differ,
        // A changed definition is always held back until approved.
        held: event == DefinitionEvent::Changed,
        time_ms: crate::audit::now_ms(),
    }
}
