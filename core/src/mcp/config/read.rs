//! One `mcp.json` file read: its servers' entries with the line of each key, its `inputs`,
//! and the entries left out with their mistake (VS Code's and Zed's forms too).

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use super::{McpConfigError, McpConfigErrorKind, McpInput, Placed, FILE_KEYS};
use crate::layout::{line_of, read_text, ReadErrorKind};

/// The entries of one file: each server's name, the line of its name, and its keys.
pub(super) type Entries = Vec<(String, usize, BTreeMap<String, Placed>)>;

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
pub(super) fn read_servers(
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
    let line_of_key = |keys: &[(String, usize)], key: &str| key_line(&text, keys, key);
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
    let (entries, mistakes) = entries_of(&text, label, servers, servers_start, zed);
    Ok((entries, inputs, mistakes))
}

/// The entries of a file's servers object (which starts at `servers_start` in `text`), each
/// with its line and its keys placed; an entry that is not an object (or a Zed entry that
/// cannot be read) is a mistake of its own, and the others are read.
fn entries_of(
    text: &str,
    label: &Path,
    servers: serde_json::Map<String, Value>,
    servers_start: usize,
    zed: bool,
) -> (Entries, Vec<McpConfigError>) {
    let server_keys = key_offsets(text, servers_start);
    let mut entries = Vec::new();
    let mut mistakes = Vec::new();
    for (name, entry) in servers {
        let at = server_keys
            .iter()
            .rev() // JSON keeps the last of duplicate keys
            .find(|(k, _)| *k == name)
            .map_or(servers_start, |k| k.1);
        let line = line_of(text, at);
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
        let entry_keys = key_offsets(text, value_offset(text, at));
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
                let line = key_line(text, &entry_keys, &key);
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
    (entries, mistakes)
}

/// The line of `key` among `keys` (a key's offset in `text`), the file's first if it is not
/// there.
fn key_line(text: &str, keys: &[(String, usize)], key: &str) -> usize {
    let at = keys.iter().find(|(k, _)| k == key).map_or(0, |k| k.1);
    line_of(text, at)
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
