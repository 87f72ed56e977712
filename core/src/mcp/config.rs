//! `usr/mcp.json` and a profile's `usr/agents/<P>/mcp.json`: the MCP servers a profile uses, in
//! the `mcpServers` format other agents read.
//!
//! ```json
//! {"mcpServers": {
//!   "time": {"command": "uvx", "args": ["mcp-server-time"], "env": {"TZ": "UTC"}},
//!   "docs": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer §§secret(DOCS_TOKEN)"}}
//! }}
//! ```
//!
//! A profile's entry is laid over the global entry of the same name key by key, so
//! `{"disabled": true}` alone switches a server off. Keys this host does not use are ignored
//! (other agents write `type`, `description`, ...). A mistake is one [`McpConfigError`] line
//! naming the file; the servers the mistake does not touch keep working.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::layout::{read_text, Layout, ReadErrorKind};

/// The file name of the MCP server lists: `usr/mcp.json`, `usr/agents/<P>/mcp.json`.
pub const MCP_FILE_NAME: &str = "mcp.json";

/// How a server is reached.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Transport {
    /// A child process speaking JSON-RPC on its standard input and output.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Variables added to its environment (`§§secret(NAME)` placeholders filled in when
        /// it starts).
        env: BTreeMap<String, String>,
    },
    /// A streamable HTTP endpoint.
    Http {
        /// The endpoint's URL.
        url: String,
        /// Headers sent with each request (placeholders filled in when it connects).
        headers: BTreeMap<String, String>,
    },
}

/// One configured server.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ServerConfig {
    /// Its name: the prefix of its tools' names (`<server>.<tool>`).
    pub name: String,
    /// How it is reached.
    pub transport: Transport,
}

/// What kind of mistake an MCP configuration file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum McpConfigErrorKind {
    /// The file cannot be read (not a regular file, too large, no permission).
    Unreadable,
    /// The file is not valid JSON.
    Syntax,
    /// The JSON does not have the `mcpServers` shape.
    Shape,
    /// One server's entry is wrong; the other servers are used.
    Server,
}

/// A mistake in an MCP configuration file: one line naming the file and the problem.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {message}", crate::layout::Escaped(file))]
pub struct McpConfigError {
    /// The file, relative to the root.
    pub file: PathBuf,
    /// What kind of mistake.
    pub kind: McpConfigErrorKind,
    /// What is wrong, in one line.
    pub message: String,
}

impl McpConfigError {
    fn new(file: &Path, kind: McpConfigErrorKind, message: impl Into<String>) -> Self {
        Self {
            file: file.to_owned(),
            kind,
            message: message.into().replace('\n', " "),
        }
    }
}

/// A profile's servers, and the mistakes met reading its files.
#[derive(Debug, Clone, Default)]
pub struct McpConfig {
    /// The servers in use (not switched off), sorted by name.
    pub servers: Vec<ServerConfig>,
    /// The servers switched off with `"disabled": true`.
    pub disabled: Vec<String>,
    /// One line per mistake.
    pub errors: Vec<McpConfigError>,
}

impl McpConfig {
    /// Reads `usr/mcp.json`, then the profile's `usr/agents/<profile>/mcp.json` over it; a
    /// missing file is no server. A profile name that is not a safe name
    /// ([`is_safe_name`](crate::is_safe_name)) has no file of its own.
    pub fn load(layout: &Layout, profile: &str, max_text_bytes: u64) -> Self {
        let mut config = Self::default();
        let mut merged: BTreeMap<String, (PathBuf, Map<String, Value>)> = BTreeMap::new();
        let mut files = vec![layout.root().join("usr").join(MCP_FILE_NAME)];
        if crate::is_safe_name(profile) {
            let dir = layout.root().join("usr/agents").join(profile);
            files.push(dir.join(MCP_FILE_NAME));
        }
        for path in files {
            let label = path.strip_prefix(layout.root()).unwrap_or(&path).to_owned();
            match read_servers(&path, &label, max_text_bytes) {
                Ok(entries) => {
                    for (name, entry) in entries {
                        let slot = merged.entry(name).or_default();
                        slot.0 = label.clone();
                        slot.1.extend(entry);
                    }
                }
                Err(Some(e)) => config.errors.push(e),
                Err(None) => {}
            }
        }
        for (name, (file, entry)) in merged {
            if entry.get("disabled").and_then(Value::as_bool) == Some(true) {
                config.disabled.push(name);
                continue;
            }
            match server(&name, &entry) {
                Ok(server) => config.servers.push(server),
                Err(message) => {
                    let message = format!("mcpServers.{name}: {message}");
                    config.errors.push(McpConfigError::new(
                        &file,
                        McpConfigErrorKind::Server,
                        message,
                    ));
                }
            }
        }
        config
    }
}

/// The `mcpServers` entries of one file, by server name.
type Entries = Vec<(String, Map<String, Value>)>;

/// The `mcpServers` entries of one file; `Err(None)` for a missing file.
fn read_servers(path: &Path, label: &Path, cap: u64) -> Result<Entries, Option<McpConfigError>> {
    let text = match read_text(path, cap, "HostOptions::max_text_bytes") {
        Ok(text) => text,
        Err(e) if e.kind == ReadErrorKind::Missing => return Err(None),
        Err(e) => {
            let kind = McpConfigErrorKind::Unreadable;
            return Err(Some(McpConfigError::new(label, kind, e.to_string())));
        }
    };
    let shape = |message: &str| {
        Some(McpConfigError::new(
            label,
            McpConfigErrorKind::Shape,
            message,
        ))
    };
    let value: Value = serde_json::from_str(&text).map_err(|e| {
        let kind = McpConfigErrorKind::Syntax;
        Some(McpConfigError::new(
            label,
            kind,
            format!("invalid JSON: {e}"),
        ))
    })?;
    let Value::Object(mut top) = value else {
        return Err(shape(
            "expected a JSON object with an \"mcpServers\" object",
        ));
    };
    let servers = match top.remove("mcpServers") {
        None => return Ok(Vec::new()),
        Some(Value::Object(servers)) => servers,
        Some(_) => return Err(shape("\"mcpServers\" must be an object of servers by name")),
    };
    let mut entries = Vec::new();
    for (name, entry) in servers {
        match entry {
            Value::Object(entry) => entries.push((name, entry)),
            _ => {
                let message = format!("mcpServers.{name}: expected an object");
                let kind = McpConfigErrorKind::Server;
                return Err(Some(McpConfigError::new(label, kind, message)));
            }
        }
    }
    Ok(entries)
}

/// Whether `name` may name a server: letters, digits, `_` and `-` (a `.` would make its tools'
/// names ambiguous).
pub(crate) fn is_server_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'))
}

/// One merged entry, checked.
fn server(name: &str, entry: &Map<String, Value>) -> Result<ServerConfig, String> {
    if !is_server_name(name) {
        return Err("a server name may use letters, digits, '_' and '-' only".to_owned());
    }
    let transport = match (entry.get("command"), entry.get("url")) {
        (Some(_), Some(_)) => return Err("has both \"command\" and \"url\": keep one".to_owned()),
        (Some(Value::String(command)), None) if !command.is_empty() => Transport::Stdio {
            command: command.clone(),
            args: strings(entry.get("args"), "args")?,
            env: string_map(entry.get("env"), "env")?,
        },
        (None, Some(Value::String(url))) if url.starts_with("http") => Transport::Http {
            url: url.clone(),
            headers: string_map(entry.get("headers"), "headers")?,
        },
        (Some(_), None) => return Err("\"command\" must be a non-empty string".to_owned()),
        (None, Some(_)) => return Err("\"url\" must be an http:// or https:// URL".to_owned()),
        (None, None) => {
            return Err("needs \"command\" (stdio) or \"url\" (streamable HTTP)".to_owned())
        }
    };
    Ok(ServerConfig {
        name: name.to_owned(),
        transport,
    })
}

fn strings(value: Option<&Value>, key: &str) -> Result<Vec<String>, String> {
    let Some(value) = value else {
        return Ok(Vec::new());
    };
    let items = value
        .as_array()
        .ok_or(format!("\"{key}\" must be an array of strings"))?;
    items
        .iter()
        .map(|item| {
            item.as_str()
                .map(str::to_owned)
                .ok_or(format!("\"{key}\" must be an array of strings, not {item}"))
        })
        .collect()
}

fn string_map(value: Option<&Value>, key: &str) -> Result<BTreeMap<String, String>, String> {
    let Some(value) = value else {
        return Ok(BTreeMap::new());
    };
    let map = value
        .as_object()
        .ok_or(format!("\"{key}\" must be an object of strings"))?;
    map.iter()
        .map(|(k, v)| match v {
            Value::String(s) => Ok((k.clone(), s.clone())),
            other => Err(format!("\"{key}.{k}\" must be a string, not {other}")),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (rel, text) in files {
            let path = dir.path().join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        dir
    }

    #[test]
    fn a_profile_adds_and_switches_off_servers() {
        let dir = root(&[
            (
                "usr/mcp.json",
                r#"{"mcpServers": {"a": {"command": "x", "args": ["1"]}, "b": {"command": "y"}}}"#,
            ),
            (
                "usr/agents/dev/mcp.json",
                r#"{"mcpServers": {"b": {"disabled": true}, "c": {"url": "http://h/mcp"}}}"#,
            ),
        ]);
        let config = McpConfig::load(&Layout::new(dir.path()), "dev", 1 << 20);
        let names: Vec<&str> = config.servers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["a", "c"]);
        assert_eq!(config.disabled, ["b"]);
        assert!(config.errors.is_empty(), "{:?}", config.errors);
        let all = McpConfig::load(&Layout::new(dir.path()), "default", 1 << 20);
        assert_eq!(all.servers.len(), 2);
    }

    #[test]
    fn a_mistake_is_one_line_naming_the_file() {
        let dir = root(&[
            (
                "usr/mcp.json",
                "{\"mcpServers\": {\"a\": {\"command\": 1},\n \"ok\": {\"command\": \"x\"}}}",
            ),
            ("usr/agents/dev/mcp.json", "{\"mcpServers\": "),
        ]);
        let config = McpConfig::load(&Layout::new(dir.path()), "dev", 1 << 20);
        assert_eq!(config.servers.len(), 1, "the good server stays");
        let lines: Vec<String> = config.errors.iter().map(|e| e.to_string()).collect();
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines.iter().all(|l| !l.contains('\n')));
        assert!(
            lines[0].starts_with("usr/agents/dev/mcp.json: invalid JSON"),
            "{lines:?}"
        );
        assert!(
            lines[1].contains("usr/mcp.json: mcpServers.a: \"command\""),
            "{lines:?}"
        );
    }
}
