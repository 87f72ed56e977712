//! `usr/mcp-tools/SERVER.lock`: each MCP server's tool definitions as first seen or last
//! approved (the SHA-256 of the definition, and the definition itself to show what changed).
//!
//! A definition is a tool's name, title, description, input and output schema and
//! annotations: what a model reads and follows. The first time a server is seen its tools'
//! definitions are recorded (trust on first use). A definition that differs later (a "rug
//! pull"), and a tool the server did not have then, is held back, with no configuration
//! needed: it is not offered to the model nor callable until `toolhost mcp approve SERVER`
//! records it, and the change is logged. `toolhost mcp diff SERVER` shows the changes and
//! their digest, which `approve` must be given: what is approved is what was shown.
//!
//! Each server has a file of its own, bounded by
//! [`HostOptions::max_text_bytes`](crate::HostOptions::max_text_bytes) for writing as for
//! reading: a server whose definitions do not fit fails its own listing, with a line that
//! says so, and no server's file can stop another's. The definitions are written with the
//! current secrets masked, mode 0600. `usr/mcp-tools.lock`, the one file of versions before
//! 0.9, is still read for a server that has no file of its own yet.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use rmcp::model::Tool;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256}; // the digest of several definitions, streamed

use crate::audit::{Audit, AuditKey, AuditOptions, AuditRecord, DefinitionEvent, DefinitionRecord};
use crate::config::Config;
use crate::layout::{read_text, write_privately, Escaped, Layout, ReadErrorKind};
use crate::secrets::Secrets;

/// One tool's approved definition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Pinned {
    /// The SHA-256 of the definition as the server gave it (secrets not masked).
    sha256: String,
    /// The definition, with the secrets of the time masked.
    definition: Value,
}

/// One server's file: its tools by name, and the changes already audited.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ServerLock {
    tools: BTreeMap<String, Pinned>,
    /// The SHA-256 of each changed definition whose change is in the audit log already (by
    /// tool), so that every host that meets it does not audit it again.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    audited: BTreeMap<String, String>,
}

/// The one file of versions before 0.9: every server's tools, and the changes audited.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct LegacyLock {
    servers: BTreeMap<String, BTreeMap<String, Pinned>>,
    #[serde(default)]
    audited: BTreeMap<String, BTreeMap<String, String>>,
}

/// A tool held back until approved: its definition changed since it was approved, or the
/// server did not have it when it was first seen.
#[derive(Debug, Clone, PartialEq)]
pub struct ChangedTool {
    /// Its name on its server.
    pub tool: String,
    /// The definition approved (first seen, or last approved); `null` for a tool the server
    /// added since.
    pub approved: Value,
    /// The definition the server gives now (with the secrets masked).
    pub now: Value,
    /// The SHA-256 of [`now`](Self::now) as the server gave it: what an approval records.
    pub sha256: String,
}

/// The digest of a server's held-back changes (the first 16 hex digits of the SHA-256 over
/// each tool's name and the hash of its new definition): `toolhost mcp diff` shows it and
/// `toolhost mcp approve` must be given it, so what is approved is what was shown.
pub fn changes_digest(changed: &[ChangedTool]) -> String {
    let mut parts: Vec<(&str, &str)> = changed
        .iter()
        .map(|c| (c.tool.as_str(), c.sha256.as_str()))
        .collect();
    parts.sort_unstable();
    let mut hasher = Sha256::new();
    for (tool, sha256) in parts {
        hasher.update(tool.as_bytes());
        hasher.update([0]);
        hasher.update(sha256.as_bytes());
        hasher.update([b'\n']);
    }
    hex::encode(hasher.finalize())[..16].to_owned()
}

/// One update of the files at a time within the process.
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
    crate::hash::sha256_hex(definition.to_string().as_bytes())
}

/// The locks of a root.
#[derive(Debug, Clone)]
pub(crate) struct ToolPins {
    layout: Layout,
    max_text_bytes: u64,
    /// Masked out of every definition written.
    secrets: Arc<Secrets>,
}

impl ToolPins {
    pub(crate) fn new(layout: &Layout, max_text_bytes: u64, secrets: Arc<Secrets>) -> Self {
        Self {
            layout: layout.clone(),
            max_text_bytes,
            secrets,
        }
    }

    fn path(&self, server: &str) -> PathBuf {
        self.layout.mcp_pins_file_of(server)
    }

    /// The server's lock: its own file, else its part of the file of older versions, else
    /// nothing yet (`None`).
    fn read(&self, server: &str) -> Result<Option<ServerLock>, String> {
        let path = self.path(server);
        match read_text(&path, self.max_text_bytes, "HostOptions::max_text_bytes") {
            Ok(text) => {
                return serde_json::from_str(&text).map(Some).map_err(|e| {
                    format!(
                        "{}: {e}; delete it to trust the server's current tools again",
                        Escaped(&path)
                    )
                })
            }
            Err(e) if e.kind == ReadErrorKind::Missing => {}
            Err(e) => return Err(e.to_string()),
        }
        let legacy = self.layout.mcp_pins_file();
        let text = match read_text(&legacy, self.max_text_bytes, "HostOptions::max_text_bytes") {
            Ok(text) => text,
            Err(e) if e.kind == ReadErrorKind::Missing => return Ok(None),
            Err(e) => return Err(format!("{e} (the lock of older versions: delete it to trust the servers' current tools again)")),
        };
        let mut old: LegacyLock = serde_json::from_str(&text).map_err(|e| {
            format!(
                "{}: {e} (the lock of older versions: delete it to trust the servers' \
                 current tools again)",
                Escaped(&legacy)
            )
        })?;
        Ok(old.servers.remove(server).map(|tools| ServerLock {
            tools,
            audited: old.audited.remove(server).unwrap_or_default(),
        }))
    }

    /// Writes the server's lock, refused (nothing written) over the bound it is read with.
    fn write(&self, server: &str, lock: &ServerLock) -> Result<(), String> {
        let path = self.path(server);
        let mut text = serde_json::to_string_pretty(lock).map_err(|e| e.to_string())?;
        text.push('\n');
        if text.len() as u64 > self.max_text_bytes {
            return Err(format!(
                "they take {} bytes in {}, over the {}-byte bound of a lock \
                 (HostOptions::max_text_bytes): none of its tools is offered; ask its \
                 maintainer to shorten them",
                text.len(),
                Escaped(&path),
                self.max_text_bytes
            ));
        }
        write_privately(&path, text.as_bytes())
            .map_err(|e| format!("cannot write {}: {e}", Escaped(&path)))
    }

    /// `definition` as it is written: the current secrets masked.
    fn kept(&self, definition: Value) -> Value {
        self.secrets.mask_value(definition).into_inner()
    }

    /// Checks `tools` of `server` against its lock. The first time the server is seen, its
    /// tools are recorded; after that, those whose definition changed and those it did not
    /// have are returned (held back). An unusable lock is an error (the caller then offers
    /// none of the server's tools).
    pub(crate) fn check(&self, server: &str, tools: &[Tool]) -> Result<Vec<ChangedTool>, String> {
        let _writing = crate::sync::lock(&WRITING);
        let (mut lock, first_seen) = match self.read(server)? {
            Some(lock) => (lock, false),
            None => (ServerLock::default(), true),
        };
        let mut changed = Vec::new();
        for tool in tools {
            let now = definition(tool);
            let sha256 = hash(&now);
            match lock.tools.get(tool.name.as_ref()) {
                Some(p) if p.sha256 == sha256 => {}
                None if first_seen => {
                    let definition = self.kept(now);
                    lock.tools
                        .insert(tool.name.to_string(), Pinned { sha256, definition });
                }
                pinned => {
                    let approved = pinned.map_or(Value::Null, |p| p.definition.clone());
                    let was = pinned.map(|p| p.sha256.clone()).unwrap_or_default();
                    let now = self.kept(now);
                    let tool = tool.name.to_string();
                    changed.push((
                        ChangedTool {
                            tool,
                            approved,
                            now,
                            sha256,
                        },
                        was,
                    ));
                }
            }
        }
        // Each change is audited once, by the first host that meets it.
        let mut records = Vec::new();
        for (change, was) in &changed {
            if lock.audited.get(&change.tool) == Some(&change.sha256) {
                continue;
            }
            lock.audited
                .insert(change.tool.clone(), change.sha256.clone());
            records.push(record(server, change, was, DefinitionEvent::Changed));
        }
        if first_seen || !records.is_empty() {
            self.write(server, &lock)?;
        }
        self.audit(&records);
        Ok(changed.into_iter().map(|(change, _)| change).collect())
    }

    /// Records `changed` definitions of `server` as approved.
    pub(crate) fn approve(&self, server: &str, changed: &[ChangedTool]) -> Result<(), String> {
        let _writing = crate::sync::lock(&WRITING);
        let mut lock = self.read(server)?.unwrap_or_default();
        let mut records = Vec::new();
        for tool in changed {
            let definition = self.kept(tool.now.clone());
            let sha256 = tool.sha256.clone();
            let was = lock.tools.get(&tool.tool).map(|p| p.sha256.clone());
            records.push(record(
                server,
                tool,
                &was.unwrap_or_default(),
                DefinitionEvent::Approved,
            ));
            lock.tools
                .insert(tool.tool.clone(), Pinned { sha256, definition });
            lock.audited.remove(&tool.tool);
        }
        self.write(server, &lock)?;
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
/// `approved_sha256` is the hash of the definition approved before (empty for a new tool).
fn record(
    server: &str,
    change: &ChangedTool,
    approved_sha256: &str,
    event: DefinitionEvent,
) -> DefinitionRecord {
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
        approved_sha256: approved_sha256.to_owned(),
        now_sha256: change.sha256.clone(),
        members: differ,
        // A changed definition is always held back until approved.
        held: event == DefinitionEvent::Changed,
        time_ms: crate::audit::now_ms(),
    }
}
