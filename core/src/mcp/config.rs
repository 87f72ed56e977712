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

/// The entries of one file: each server's name, the line of its name, and its keys.
type Entries = Vec<(String, usize, BTreeMap<String, Placed>)>;

/// The line (from 1) of byte `offset` in `text`.
fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// The byte offset in `text` of each key of the object that starts at `start` (its own keys,
/// not those of objects inside it), in order. `text` is valid JSON.
fn key_offsets(text: &str, start: usize) -> Vec<(String, usize)> {
    let bytes = text.as_bytes();
    let mut keys = Vec::new();
    let (mut depth, mut i) = (0usize, start);
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                let begin = i;
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                let after = text[i.min(text.len() - 1) + 1..].trim_start();
                if depth == 1 && after.starts_with(':') {
                    let raw = &text[begin..=i.min(text.len() - 1)];
                    if let Ok(key) = serde_json::from_str::<String>(raw) {
                        keys.push((key, begin));
                    }
                }
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            }
            _ => {}
        }
        i += 1;
    }
    keys
}

/// The byte offset of the value of the key whose opening quote is at `key` (the first byte
/// after its `:` that is not a space).
fn value_offset(text: &str, key: usize) -> usize {
    let bytes = text.as_bytes();
    let mut i = key + 1;
    while i < bytes.len() && bytes[i] != b'"' {
        i += if bytes[i] == b'\\' { 2 } else { 1 };
    }
    i += 1;
    while let Some(b) = text.as_bytes().get(i) {
        if !b.is_ascii_whitespace() && *b != b':' {
            break;
        }
        i += 1;
    }
    i
}

/// The entries, the inputs and the entries left out with their mistake (one line each) of
/// one file; `Err(None)` for a missing file.
fn read_servers(
    path: &Path,
    label: &Path,
    cap: u64,
) -> Result<(Entries, Vec<McpInput>, Vec<McpConfigError>), Option<McpConfigError>> {
    let text = match read_text(path, cap, "HostOptions::max_text_bytes") {
        Ok(text) => text,
        Err(e) if e.kind == ReadErrorKind::Missing => return Err(None),
        Err(e) => {
            let kind = McpConfigErrorKind::Unreadable;
            return Err(Some(McpConfigError::new(label, kind, e.to_string())));
        }
    };
    let shape = |message: String, line: usize| {
        Some(McpConfigError::new(label, McpConfigErrorKind::Shape, message).at(line))
    };
    let value: Value = serde_json::from_str(&text).map_err(|e| {
        let message = e.to_string();
        let message = message.rsplit_once(" at line ").map_or(&*message, |m| m.0);
        let kind = McpConfigErrorKind::Syntax;
        let error = McpConfigError::new(label, kind, format!("invalid JSON: {message}"));
        Some(error.at(e.line()))
    })?;
    let Value::Object(mut top) = value else {
        let message = "expected a JSON object with an \"mcpServers\" object".to_owned();
        return Err(shape(message, 1));
    };
    let top_start = text.find('{').unwrap_or_default();
    let top_keys = key_offsets(&text, top_start);
    let line_of_key = |keys: &[(String, usize)], key: &str| {
        let at = keys.iter().find(|(k, _)| k == key).map_or(0, |k| k.1);
        line_of(&text, at)
    };
    if let Some(key) = top.keys().find(|k| !FILE_KEYS.contains(&k.as_str())) {
        let message = format!(
            "unknown key {key:?} (the servers go in \"mcpServers\"; VS Code's \"servers\" and \
             Zed's \"context_servers\" are read too)"
        );
        return Err(shape(message, line_of_key(&top_keys, key)));
    }
    let inputs = match top.remove("inputs") {
        Some(value) => read_inputs(value)
            .map_err(|message| shape(message, line_of_key(&top_keys, "inputs")))?,
        None => Vec::new(),
    };
    if top.len() > 1 {
        let names: Vec<String> = top.keys().map(|k| format!("{k:?}")).collect();
        let last = top.keys().next_back().cloned().unwrap_or_default();
        let message = format!("has {}: keep one", names.join(" and "));
        return Err(shape(message, line_of_key(&top_keys, &last)));
    }
    let Some(key) = top.keys().next().cloned() else {
        return Ok((Vec::new(), inputs, Vec::new()));
    };
    let zed = key == "context_servers";
    let servers = top.remove(&key).unwrap_or_default();
    let Value::Object(servers) = servers else {
        let message = format!("\"{key}\" must be an object of servers by name");
        return Err(shape(message, line_of_key(&top_keys, &key)));
    };
    let servers_start = top_keys
        .iter()
        .find(|(k, _)| *k == key)
        .map_or(0, |(_, at)| value_offset(&text, *at));
    let server_keys = key_offsets(&text, servers_start);
    let mut entries = Vec::new();
    let mut mistakes = Vec::new();
    for (name, entry) in servers {
        let at = server_keys
            .iter()
            .rev() // JSON keeps the last of duplicate keys
            .find(|(k, _)| *k == name)
            .map_or(servers_start, |k| k.1);
        let line = line_of(&text, at);
        let Value::Object(entry) = entry else {
            // This entry is left out; the others are read.
            let given = match entry {
                Value::Array(_) => "an array",
                Value::String(_) => "a string",
                Value::Number(_) => "a number",
                Value::Bool(_) => "true or false",
                _ => "null",
            };
            let message = format!("mcpServers.{name}: expected an object, not {given}");
            let kind = McpConfigErrorKind::Server;
            mistakes.push(McpConfigError::new(label, kind, message).at(line));
            continue;
        };
        let entry_keys = key_offsets(&text, value_offset(&text, at));
        let entry = match zed {
            true => match zed_entry(entry) {
                Ok(entry) => entry,
                Err(message) => {
                    let message = format!("context_servers.{name}: {message}");
                    let kind = McpConfigErrorKind::Server;
                    mistakes.push(McpConfigError::new(label, kind, message).at(line));
                    continue;
                }
            },
            false => entry,
        };
        let keys = entry
            .into_iter()
            .map(|(key, value)| {
                let line = line_of_key(&entry_keys, &key);
                let placed = Placed {
                    value,
                    file: label.to_owned(),
                    line,
                };
                (key, placed)
            })
            .collect();
        entries.push((name, line, keys));
    }
    Ok((entries, inputs, mistakes))
}

/// A Zed `context_servers` entry in this file's shape: `"command": {"path", "args", "env"}`
/// (Zed's older form) becomes `command`, `args` and `env`; `source` (`"custom"`) and
/// `settings` (what an extension's server reads) are left out.
fn zed_entry(
    mut entry: serde_json::Map<String, Value>,
) -> Result<serde_json::Map<String, Value>, String> {
    match entry.remove("source") {
        None | Some(Value::String(_)) => {}
        Some(other) => return Err(format!("\"source\" must be a string, not {other}")),
    }
    match entry.remove("settings") {
        None | Some(Value::Object(_)) => {}
        Some(other) => return Err(format!("\"settings\" must be an object, not {other}")),
    }
    if let Some(Value::Object(command)) = entry.get("command").cloned() {
        for (key, value) in command {
            let key = match key.as_str() {
                "path" => "command",
                "args" | "env" => key.as_str(),
                other => {
                    return Err(format!(
                        "unknown key \"command.{other}\" (Zed's command has path, args and env)"
                    ));
                }
            };
            if key != "command" && entry.contains_key(key) {
                return Err(format!(
                    "\"{key}\" is given twice: in \"command\" and beside it"
                ));
            }
            entry.insert(key.to_owned(), value);
        }
    }
    Ok(entry)
}

/// VS Code's `inputs`: `promptString` entries (`id`, `description`, `password`, `default`).
fn read_inputs(value: Value) -> Result<Vec<McpInput>, String> {
    let Value::Array(items) = value else {
        return Err(format!("\"inputs\" must be an array, not {value}"));
    };
    let mut inputs = Vec::new();
    for item in items {
        let Value::Object(item) = item else {
            return Err(format!("inputs: each input must be an object, not {item}"));
        };
        let text = |key: &str| match item.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(format!("inputs: \"{key}\" must be a string, not {other}")),
        };
        let id = text("id")?.filter(|id| !id.is_empty());
        let id = id.ok_or("inputs: an input needs an \"id\"")?;
        if let Some(key) = item
            .keys()
            .find(|k| !["type", "id", "description", "password", "default"].contains(&k.as_str()))
        {
            return Err(format!(
                "inputs.{id}: unknown key {key:?} (known: type, id, description, password, default)"
            ));
        }
        match text("type")?.as_deref() {
            Some("promptString") => {}
            other => {
                return Err(format!(
                    "inputs.{id}: \"type\" {} is not asked here: only \"promptString\" is",
                    other.map_or("missing".to_owned(), |t| format!("{t:?}"))
                ));
            }
        }
        let password = match item.get("password") {
            None => false,
            Some(Value::Bool(b)) => *b,
            Some(other) => {
                return Err(format!(
                    "inputs.{id}: \"password\" must be true or false, not {other}"
                ));
            }
        };
        inputs.push(McpInput {
            description: text("description")?.unwrap_or_else(|| id.clone()),
            default: text("default")?,
            id,
            password,
        });
    }
    Ok(inputs)
}

/// Whether `name` may name a server: letters, digits, `_` and `-` (a `.` would make its tools'
/// names ambiguous).
pub(crate) fn is_server_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'))
}

/// What is wrong with an entry: where (the key's place, or the entry's when `None`) and what.
type Mistake<'a> = (Option<&'a Placed>, String);

/// One merged entry, checked.
fn server<'a>(
    name: &str,
    entry: &'a BTreeMap<String, Placed>,
    root: &Path,
) -> Result<ServerConfig, Mistake<'a>> {
    if !is_server_name(name) {
        let message = "a server name may use letters, digits, '_' and '-' only";
        return Err((None, message.to_owned()));
    }
    if let Some((key, placed)) = entry
        .iter()
        .find(|(k, _)| !ENTRY_KEYS.contains(&k.as_str()))
    {
        let known = ENTRY_KEYS.join(", ");
        let hint = match close_key(key) {
            Some(close) => format!(" (did you mean \"{close}\"?)"),
            None => format!(" (known keys: {known})"),
        };
        return Err((Some(placed), format!("unknown key {key:?}{hint}")));
    }
    let get = |key: &str| entry.get(key);
    let string = |key: &str| -> Result<Option<&'a str>, Mistake<'a>> {
        match entry.get(key) {
            None => Ok(None),
            Some(Placed {
                value: Value::String(s),
                ..
            }) => Ok(Some(s.as_str())),
            Some(p) => Err((
                Some(p),
                format!("\"{key}\" must be a string, not {}", p.value),
            )),
        }
    };
    string("description")?;
    let kind = string("type")?;
    let transport = match (get("command"), get("url")) {
        (Some(_), Some(p)) => {
            return Err((
                Some(p),
                "has both \"command\" and \"url\": keep one".to_owned(),
            ));
        }
        (Some(p), None) => {
            let command = string("command")?.unwrap_or_default();
            if command.is_empty() {
                let message = "\"command\" must be a non-empty string".to_owned();
                return Err((Some(p), message));
            }
            for key in ["headers", "oauth"] {
                if let Some(p) = get(key) {
                    let message =
                        format!("\"{key}\" is for a server with a \"url\", not a \"command\"");
                    return Err((Some(p), message));
                }
            }
            Transport::Stdio {
                command: command.to_owned(),
                args: strings(get("args"), "args")?,
                env: string_map(get("env"), "env")?,
                cwd: string("cwd")?.map(|dir| root.join(dir)),
            }
        }
        (None, Some(p)) => {
            let url = string("url")?.unwrap_or_default();
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                let message = "\"url\" must be an http:// or https:// URL".to_owned();
                return Err((Some(p), message));
            }
            for key in ["args", "env", "cwd"] {
                if let Some(p) = get(key) {
                    let message =
                        format!("\"{key}\" is for a server with a \"command\", not a \"url\"");
                    return Err((Some(p), message));
                }
            }
            let oauth = match get("oauth") {
                None => Default::default(),
                Some(p) => {
                    super::oauth::OAuthSettings::parse(&p.value).map_err(|e| (Some(p), e))?
                }
            };
            Transport::Http {
                url: url.to_owned(),
                headers: string_map(get("headers"), "headers")?,
                oauth,
                tokens: root
                    .join(super::oauth::TOKENS_DIR)
                    .join(format!("{name}.json")),
            }
        }
        (None, None) => {
            let message = "needs \"command\" (stdio) or \"url\" (streamable HTTP)".to_owned();
            return Err((None, message));
        }
    };
    let stdio = matches!(transport, Transport::Stdio { .. });
    match (kind, stdio) {
        (None | Some("stdio"), true) | (None | Some("http" | "streamable-http"), false) => {}
        (Some("sse"), _) => {
            let message = "\"type\": \"sse\" (the SSE transport of 2024-11-05) is not supported: \
                           give the server's streamable HTTP endpoint as \"url\""
                .to_owned();
            return Err((get("type"), message));
        }
        (Some(kind), _) => {
            let message = match stdio {
                true => format!("\"type\" is {kind:?} but the server has a \"command\" (stdio)"),
                false => format!("\"type\" is {kind:?} but the server has a \"url\" (http)"),
            };
            return Err((get("type"), message));
        }
    }
    Ok(ServerConfig {
        name: name.to_owned(),
        transport,
    })
}

/// The known key `key` is probably a typo of: one letter added, left out or changed, or
/// another case.
fn close_key(key: &str) -> Option<&'static str> {
    ENTRY_KEYS.iter().copied().find(|known| {
        let (a, b) = (key.to_ascii_lowercase(), known.to_ascii_lowercase());
        if a == b {
            return true;
        }
        let (short, long) = if a.len() < b.len() {
            (&a, &b)
        } else {
            (&b, &a)
        };
        match long.len() - short.len() {
            0 => a.bytes().zip(b.bytes()).filter(|(x, y)| x != y).count() == 1,
            1 => (0..long.len()).any(|i| {
                let mut cut = long.clone();
                cut.remove(i);
                cut == *short
            }),
            _ => false,
        }
    })
}

fn strings<'a>(value: Option<&'a Placed>, key: &str) -> Result<Vec<String>, Mistake<'a>> {
    let Some(placed) = value else {
        return Ok(Vec::new());
    };
    let wrong = |what: String| (Some(placed), what);
    let items = placed.value.as_array().ok_or_else(|| {
        wrong(format!(
            "\"{key}\" must be an array of strings, not {}",
            placed.value
        ))
    })?;
    items
        .iter()
        .map(|item| {
            item.as_str()
                .map(str::to_owned)
                .ok_or_else(|| wrong(format!("\"{key}\" must be an array of strings, not {item}")))
        })
        .collect()
}

fn string_map<'a>(
    value: Option<&'a Placed>,
    key: &str,
) -> Result<BTreeMap<String, String>, Mistake<'a>> {
    let Some(placed) = value else {
        return Ok(BTreeMap::new());
    };
    let wrong = |what: String| (Some(placed), what);
    let map = placed.value.as_object().ok_or_else(|| {
        wrong(format!(
            "\"{key}\" must be an object of strings, not {}",
            placed.value
        ))
    })?;
    map.iter()
        .map(|(k, v)| match v {
            Value::String(s) => Ok((k.clone(), s.clone())),
            other => Err(wrong(format!(
                "\"{key}.{k}\" must be a string, not {other}"
            ))),
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
