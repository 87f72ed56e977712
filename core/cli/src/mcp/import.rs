//! `toolhost mcp import FILE`: another agent's MCP server list (Claude, Cursor, VS Code,
//! Zed) taken into usr/mcp.json, checked before it is written.

use super::*;

/// `toolhost mcp import FILE`: the servers (and VS Code inputs) of a Cursor, Claude, VS Code
/// or Zed file merged into `usr/mcp.json`. A server name already there refuses the import,
/// one line; so does an entry this host would refuse (each mistake one line).
pub(crate) fn import(root: &std::path::Path, from: &std::path::Path) -> Result<ExitCode> {
    let shown_from = toolhost::Escaped(from).to_string();
    let value = read_other(from, &shown_from)?;
    let Some((key, servers)) = toolhost::mcp::config::SERVER_KEYS
        .iter()
        .find_map(|k| value.get(*k).map(|v| (*k, v)))
    else {
        crate::exit::usage!(
            "{shown_from}: no \"mcpServers\", \"servers\" or \"context_servers\" object"
        );
    };
    let Some(servers) = servers.as_object() else {
        crate::exit::usage!("{shown_from}: \"{key}\" is not an object of servers by name");
    };
    let target = root.join("usr").join(toolhost::mcp::MCP_FILE_NAME);
    let mut file = read_ours(&target)?;
    let ours = toolhost::mcp::config::SERVER_KEYS
        .iter()
        .find(|k| file.get(**k).is_some())
        .copied()
        .unwrap_or("mcpServers");
    let existing = file[ours].as_object().cloned().unwrap_or_default();
    if let Some(name) = servers.keys().find(|name| existing.contains_key(*name)) {
        crate::exit::usage!(
            "usr/mcp.json already has a server '{}' and {shown_from} has one too: rename one \
             of them (nothing was imported)",
            shown(name)
        );
    }
    let mut merged = existing;
    for (name, entry) in servers {
        merged.insert(name.clone(), converted(key, entry.clone()));
    }
    file[ours] = Value::Object(merged);
    merge_inputs(&mut file, &value);
    let mut text = serde_json::to_string_pretty(&file)?;
    text.push('\n');
    // Checked as the host reads it before it is written: an entry it would refuse is not.
    if !accepted(&text, &shown_from)? {
        return Ok(ExitCode::FAILURE);
    }
    if let Some(dir) = target.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&target, text)?;
    let names: Vec<String> = servers.keys().map(|n| shown(n)).collect();
    println!(
        "imported {} server(s) from {shown_from} into usr/mcp.json: {}",
        names.len(),
        names.join(", ")
    );
    Ok(ExitCode::SUCCESS)
}

/// The other agent's file `from`, JSON with comments.
fn read_other(from: &std::path::Path, shown_from: &str) -> Result<Value> {
    let text = match std::fs::read_to_string(from) {
        Ok(text) => text,
        Err(e) => crate::exit::usage!("cannot read {shown_from}: {e}"),
    };
    match serde_json::from_str(&without_comments(&text)) {
        Ok(value) => Ok(value),
        Err(e) => crate::exit::usage!("{shown_from}: not JSON (with comments): {e}"),
    }
}

/// usr/mcp.json as it is (`{}` if there is none).
fn read_ours(target: &std::path::Path) -> Result<Value> {
    match std::fs::read_to_string(target) {
        Ok(text) => serde_json::from_str(&text)
            .map_err(|e| anyhow::anyhow!("usr/mcp.json: invalid JSON: {e}; fix it first")),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(json!({})),
        Err(e) => anyhow::bail!("cannot read usr/mcp.json: {e}"),
    }
}

/// VS Code's `inputs` of `value` added to those of `file`, but ids it has already.
fn merge_inputs(file: &mut Value, value: &Value) {
    if let Some(Value::Array(inputs)) = value.get("inputs") {
        let mut all = file["inputs"].as_array().cloned().unwrap_or_default();
        for input in inputs {
            if !all.iter().any(|i| i["id"] == input["id"]) {
                all.push(input.clone());
            }
        }
        file["inputs"] = Value::Array(all);
    }
}

/// Whether the host accepts the merged file `text` as it reads it (else each mistake is said,
/// one line each, and nothing is written).
fn accepted(text: &str, shown_from: &str) -> Result<bool> {
    let check = tempfile_root(text)?;
    let config = toolhost::mcp::config::McpConfig::load(
        &toolhost::Layout::new(check.path()),
        "default",
        toolhost::DEFAULT_MAX_TEXT_BYTES,
    );
    if config.errors.is_empty() {
        return Ok(true);
    }
    for e in &config.errors {
        eprintln!("error: {shown_from}: {}", e.message);
    }
    eprintln!(
        "error: nothing was imported; fix the entries above in {shown_from} or import by hand"
    );
    Ok(false)
}

/// A Zed entry in this file's shape (`command: {path, args, env}` made flat; `source` and
/// `settings` left out); other entries as they are.
fn converted(key: &str, entry: Value) -> Value {
    let Value::Object(mut entry) = entry else {
        return entry;
    };
    if key == "context_servers" {
        entry.remove("source");
        entry.remove("settings");
        if let Some(Value::Object(command)) = entry.get("command").cloned() {
            entry.remove("command");
            for (k, v) in command {
                let k = if k == "path" { "command".to_owned() } else { k };
                entry.insert(k, v);
            }
        }
    }
    Value::Object(entry)
}

/// A temporary root whose `usr/mcp.json` is `text`, removed when dropped.
struct CheckRoot(std::path::PathBuf);

impl CheckRoot {
    fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for CheckRoot {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn tempfile_root(text: &str) -> Result<CheckRoot> {
    let dir = std::env::temp_dir().join(format!("toolhost-mcp-import-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("usr"))?;
    std::fs::write(dir.join("usr").join(toolhost::mcp::MCP_FILE_NAME), text)?;
    Ok(CheckRoot(dir))
}

/// `text` (JSON with comments, as VS Code and Zed write their settings) without its `//` and
/// `/* */` comments and trailing commas; strings are kept as they are.
fn without_comments(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let mut in_string = false;
    while i < bytes.len() {
        let c = bytes[i];
        if in_string {
            let len = utf8_len(c);
            out.push_str(&text[i..i + len]);
            if c == b'\\' && i + 1 < bytes.len() {
                out.push(bytes[i + 1] as char);
                i += 2;
                continue;
            }
            in_string = c != b'"';
            i += len;
            continue;
        }
        match (c, bytes.get(i + 1)) {
            (b'"', _) => {
                in_string = true;
                out.push('"');
                i += 1;
            }
            (b'/', Some(b'/')) => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            (b'/', Some(b'*')) => {
                i += 2;
                while i + 1 < bytes.len() && !(bytes[i] == b'*' && bytes[i + 1] == b'/') {
                    i += 1;
                }
                i += 2;
            }
            (b',', _) => {
                let rest = text[i + 1..].trim_start();
                if !(rest.starts_with('}') || rest.starts_with(']')) {
                    out.push(',');
                }
                i += 1;
            }
            _ => {
                let len = utf8_len(c);
                out.push_str(&text[i..i + len]);
                i += len;
            }
        }
    }
    out
}

/// The length of the UTF-8 character that starts with `first`.
fn utf8_len(first: u8) -> usize {
    match first {
        0xF0..=0xFF => 4,
        0xE0..=0xEF => 3,
        0xC0..=0xDF => 2,
        _ => 1,
    }
}
