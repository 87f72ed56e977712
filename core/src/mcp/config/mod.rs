//! `usr/mcp.json` and a profile's `usr/agents/<P>/mcp.json`: the MCP servers a profile uses, in
//! the `mcpServers` format other agents read (VS Code's `servers` is read the same way).
//!
//! ```json
//! {"mcpServers": {
//!   "time": {"command": "uvx", "args": ["mcp-server-time"], "env": {"TZ": "UTC"}},
//!   "docs": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer §§secret(DOCS_TOKEN)"}}
//! }}
//! ```
//!
//! A profile's entry is laid over the global entry of the same name key by key, so
//! `{"disabled": true}` alone switches a server off. The file is as strict as `toolhost.toml`:
//! a key this host does not know (`"arg"` for `"args"`) or a value of the wrong type is one
//! [`McpConfigError`] line naming the file, the line and the key; the servers the mistake
//! does not touch keep working. [`ENTRY_KEYS`] lists the keys of a server's entry.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::layout::Layout;

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
        /// The folder it starts in (`cwd`), relative to the root unless absolute; the
        /// host's own when not given.
        cwd: Option<PathBuf>,
    },
    /// A streamable HTTP endpoint.
    Http {
        /// The endpoint's URL.
        url: String,
        /// Headers sent with each request (placeholders filled in when it connects).
        headers: BTreeMap<String, String>,
        /// Its `oauth` settings ([`super::oauth`]): used when it asks to sign in and no
        /// `Authorization` header is given.
        oauth: super::oauth::OAuthSettings,
        /// Its token file (`usr/mcp-tokens/<server>.json`).
        tokens: PathBuf,
    },
}

/// One configured server.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ServerConfig {
    /// Its name: the prefix of its tools' names (`<server>.<tool>`).
    pub name: String,
    /// How it is reached.
    pub transport: Transport,
    /// The folders shared with it as its client's roots (`"roots"` in its entry, each
    /// relative to the folder of the configuration): answered to its `roots/list` (and to a
    /// 2026-07-28 server's roots asked in an `InputRequiredResult`). None by default.
    pub roots: Vec<PathBuf>,
    /// Greeted with 2025-11-25's `initialize` only (`"protocol": "2025-11-25"` in its entry),
    /// for a server whose SDK speaks 2026-07-28 but whose tools still send requests in the
    /// middle of a call, which that version forbids. `false`: `server/discover` first.
    pub initialize_only: bool,
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

/// A mistake in an MCP configuration file: one line naming the file, the line when it is
/// known, and the problem (`usr/mcp.json:4: mcpServers.time: unknown key "arg" ...`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{}: {message}", crate::layout::Escaped(file), line.map(|n| format!(":{n}")).unwrap_or_default())]
pub struct McpConfigError {
    /// The file, relative to the root.
    pub file: PathBuf,
    /// The line (from 1) the mistake is on, when it is known.
    pub line: Option<usize>,
    /// What kind of mistake.
    pub kind: McpConfigErrorKind,
    /// What is wrong, in one line.
    pub message: String,
}

impl McpConfigError {
    fn new(file: &Path, kind: McpConfigErrorKind, message: impl Into<String>) -> Self {
        Self {
            file: file.to_owned(),
            line: None,
            kind,
            message: message.into().replace('\n', " "),
        }
    }

    fn at(mut self, line: usize) -> Self {
        self.line = Some(line);
        self
    }
}

/// The keys of a server's entry: those this host uses, and `type` and `description`, which
/// other agents write (`type` is checked against the transport: `stdio` or `http`).
pub const ENTRY_KEYS: &[&str] = &[
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "headers",
    "type",
    "disabled",
    "description",
    "oauth",
    "roots",
    "protocol",
];

/// The keys of the file itself: the servers by name, as `mcpServers` (Claude, Cursor),
/// `servers` (VS Code) or `context_servers` (Zed); and VS Code's `inputs`.
const FILE_KEYS: &[&str] = &["mcpServers", "servers", "context_servers", "inputs"];

/// The keys that hold the servers by name ([`FILE_KEYS`] but `inputs`).
pub const SERVER_KEYS: &[&str] = &["mcpServers", "servers", "context_servers"];

/// A value VS Code's `inputs` declares (`{"type": "promptString", "id": "api-key",
/// "description": "...", "password": true}`) and `${input:ID}` uses: asked once on the
/// terminal and kept in `usr/secrets.env` as [`input_secret_name`]`(ID)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpInput {
    /// Its id (`${input:ID}`).
    pub id: String,
    /// What to ask.
    pub description: String,
    /// Whether it is typed without echo (a password, a token).
    pub password: bool,
    /// The value an empty answer takes, if any.
    pub default: Option<String>,
}

/// The key of `usr/secrets.env` that keeps the answer to input `id`: `MCP_INPUT_` and the id
/// in capitals, each character that is not a letter or a digit as `_` (`api-key` is
/// `MCP_INPUT_API_KEY`).
pub fn input_secret_name(id: &str) -> String {
    let mut name = String::from("MCP_INPUT_");
    name.extend(id.chars().map(|c| match c.is_ascii_alphanumeric() {
        true => c.to_ascii_uppercase(),
        false => '_',
    }));
    name
}

/// A profile's servers, and the mistakes met reading its files.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct McpConfig {
    /// The servers in use (not switched off), sorted by name.
    pub servers: Vec<ServerConfig>,
    /// The servers switched off with `"disabled": true`.
    pub disabled: Vec<String>,
    /// One line per mistake.
    pub errors: Vec<McpConfigError>,
    /// The inputs the files declare (VS Code's `inputs`), by id; a profile's over the global.
    pub inputs: Vec<McpInput>,
}

/// A value of an entry and where it was written (the file and its line).
#[derive(Debug, Clone)]
struct Placed {
    value: Value,
    file: PathBuf,
    line: usize,
}

/// One server's entry, its keys merged over the layers; the place of the entry itself (the
/// last file that named it).
#[derive(Debug, Default)]
struct Entry {
    keys: BTreeMap<String, Placed>,
    at: Option<(PathBuf, usize)>,
}

impl McpConfig {
    /// Reads `usr/mcp.json`, then the profile's `usr/agents/<profile>/mcp.json` over it; a
    /// missing file is no server. A profile name that is not a safe name
    /// ([`is_safe_name`](crate::is_safe_name)) has no file of its own.
    pub fn load(layout: &Layout, profile: &str, max_text_bytes: u64) -> Self {
        let mut config = Self::default();
        let mut merged: BTreeMap<String, Entry> = BTreeMap::new();
        for path in Self::files(layout, profile) {
            let label = path.strip_prefix(layout.root()).unwrap_or(&path).to_owned();
            match read_servers(&path, &label, max_text_bytes) {
                Ok((entries, inputs, mistakes)) => {
                    config.errors.extend(mistakes);
                    for input in inputs {
                        config.inputs.retain(|i| i.id != input.id);
                        config.inputs.push(input);
                    }
                    for (name, line, keys) in entries {
                        let slot = merged.entry(name).or_default();
                        slot.at = Some((label.clone(), line));
                        slot.keys.extend(keys);
                    }
                }
                Err(Some(e)) => config.errors.push(e),
                Err(None) => {}
            }
        }
        for (name, entry) in merged {
            let (file, line) = entry.at.clone().unwrap_or_default();
            let mistake = |(at, message): (Option<&Placed>, String)| {
                let (file, line) = at.map_or((&file, line), |p| (&p.file, p.line));
                let message = format!("mcpServers.{name}: {message}");
                McpConfigError::new(file, McpConfigErrorKind::Server, message).at(line)
            };
            match entry.keys.get("disabled").map(|p| (&p.value, p)) {
                Some((Value::Bool(true), _)) => {
                    config.disabled.push(name.clone());
                    continue;
                }
                Some((Value::Bool(false), _)) | None => {}
                Some((_, p)) => {
                    let message = "\"disabled\" must be true or false".to_owned();
                    config.errors.push(mistake((Some(p), message)));
                    continue;
                }
            }
            match server(&name, &entry.keys, layout.root()) {
                Ok(server) => config.servers.push(server),
                Err(e) => config.errors.push(mistake(e)),
            }
        }
        config
    }

    /// The files a profile's servers come from, in the order they are laid over each other.
    pub fn files(layout: &Layout, profile: &str) -> Vec<PathBuf> {
        let mut files = vec![layout.root().join("usr").join(MCP_FILE_NAME)];
        if crate::is_safe_name(profile) {
            let dir = layout.root().join("usr/agents").join(profile);
            files.push(dir.join(MCP_FILE_NAME));
        }
        files
    }
}

mod entry;
mod read;

pub(crate) use entry::is_server_name;
use entry::server;
use read::read_servers;

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
            lines[0].starts_with("usr/agents/dev/mcp.json:1: invalid JSON: EOF"),
            "{lines:?}"
        );
        assert_eq!(
            lines[1],
            "usr/mcp.json:1: mcpServers.a: \"command\" must be a string, not 1"
        );
    }

    #[test]
    fn an_unknown_key_or_a_wrong_type_names_the_file_the_line_and_the_key() {
        let text = r#"{
  "mcpServers": {
    "ok": {"command": "x"},
    "typo": {
      "command": "npx",
      "arg": ["-y", "server"]
    },
    "env": {"command": "x",
      "env": {"A": 1}},
    "both": {"command": "x", "type": "http"},
    "old": {"url": "http://h/sse", "type": "sse"}
  }
}"#;
        let dir = root(&[
            ("usr/mcp.json", text),
            (
                "usr/agents/dev/mcp.json",
                "{\"mcpServers\": {\"ok\": {\n\"disabled\": \"yes\"}}}",
            ),
        ]);
        let config = McpConfig::load(&Layout::new(dir.path()), "default", 1 << 20);
        let names: Vec<&str> = config.servers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["ok"], "the good server stays");
        let lines: Vec<String> = config.errors.iter().map(|e| e.to_string()).collect();
        assert_eq!(
            lines,
            [
                "usr/mcp.json:10: mcpServers.both: \"type\" is \"http\" but the server has a \"command\" (stdio)",
                "usr/mcp.json:9: mcpServers.env: \"env.A\" must be a string, not 1",
                "usr/mcp.json:11: mcpServers.old: \"type\": \"sse\" (the SSE transport of 2024-11-05) is not supported: give the server's streamable HTTP endpoint as \"url\"",
                "usr/mcp.json:6: mcpServers.typo: unknown key \"arg\" (did you mean \"args\"?)",
            ]
        );
        let dev = McpConfig::load(&Layout::new(dir.path()), "dev", 1 << 20);
        let lines: Vec<String> = dev.errors.iter().map(|e| e.to_string()).collect();
        assert!(
            lines.contains(
                &"usr/agents/dev/mcp.json:2: mcpServers.ok: \"disabled\" must be true or false"
                    .to_owned()
            ),
            "{lines:?}"
        );
    }

    #[test]
    fn an_unknown_key_of_the_file_is_named_and_vs_code_servers_are_read() {
        let dir = root(&[("usr/mcp.json", "{\n \"mcpservers\": {}}")]);
        let config = McpConfig::load(&Layout::new(dir.path()), "default", 1 << 20);
        let lines: Vec<String> = config.errors.iter().map(|e| e.to_string()).collect();
        assert_eq!(lines.len(), 1);
        assert!(
            lines[0].starts_with("usr/mcp.json:2: unknown key \"mcpservers\""),
            "{lines:?}"
        );
        let vscode = r#"{"servers": {"t": {"type": "stdio", "command": "x", "cwd": "sub"}, "h": {"type": "http", "url": "https://h/mcp"}}}"#;
        let dir = root(&[("usr/mcp.json", vscode)]);
        let config = McpConfig::load(&Layout::new(dir.path()), "default", 1 << 20);
        assert!(config.errors.is_empty(), "{:?}", config.errors);
        assert_eq!(config.servers.len(), 2);
        let Transport::Stdio { cwd, .. } = &config.servers[1].transport else {
            panic!("{:?}", config.servers)
        };
        assert_eq!(cwd.as_deref(), Some(dir.path().join("sub").as_path()));
    }

    #[test]
    fn zed_context_servers_and_vs_code_inputs_are_read() {
        let zed = r#"{"context_servers": {
  "old": {"source": "custom", "command": {"path": "npx", "args": ["-y", "srv"], "env": {"A": "1"}}, "settings": {}},
  "new": {"source": "custom", "command": "uvx", "args": ["mcp-server-time"]},
  "bad": {"command": {"path": "x", "argv": []}}
}}"#;
        let dir = root(&[("usr/mcp.json", zed)]);
        let config = McpConfig::load(&Layout::new(dir.path()), "default", 1 << 20);
        let names: Vec<&str> = config.servers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["new", "old"]);
        let Transport::Stdio {
            command, args, env, ..
        } = &config.servers[1].transport
        else {
            panic!("{:?}", config.servers)
        };
        assert_eq!((command.as_str(), args.len()), ("npx", 2));
        assert_eq!(env["A"], "1");
        let lines: Vec<String> = config.errors.iter().map(|e| e.to_string()).collect();
        assert_eq!(
            lines,
            [
                "usr/mcp.json:4: context_servers.bad: unknown key \"command.argv\" (Zed's command has path, args and env)"
            ]
        );

        let vscode = r#"{"inputs": [{"type": "promptString", "id": "api-key", "description": "API key", "password": true}],
 "servers": {"s": {"type": "stdio", "command": "x", "env": {"KEY": "${input:api-key}"}}}}"#;
        let dir = root(&[("usr/mcp.json", vscode)]);
        let config = McpConfig::load(&Layout::new(dir.path()), "default", 1 << 20);
        assert!(config.errors.is_empty(), "{:?}", config.errors);
        assert_eq!(config.inputs.len(), 1);
        assert!(config.inputs[0].password);
        assert_eq!(input_secret_name(&config.inputs[0].id), "MCP_INPUT_API_KEY");
        let wrong = r#"{"inputs": [{"type": "pickString", "id": "p"}], "servers": {}}"#;
        let dir = root(&[("usr/mcp.json", wrong)]);
        let config = McpConfig::load(&Layout::new(dir.path()), "default", 1 << 20);
        let lines: Vec<String> = config.errors.iter().map(|e| e.to_string()).collect();
        assert_eq!(
            lines,
            [
                "usr/mcp.json:1: inputs.p: \"type\" \"pickString\" is not asked here: only \"promptString\" is"
            ]
        );
    }
}
