//! `toolhost mcp`: the profile's MCP servers, each with its state, its tools and its last
//! error; exit 1 when a file has a mistake or a server is not ready.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use serde_json::{json, Value};
use toolhost::mcp::{McpServerStatus, McpState};
use toolhost::Host;

use crate::approve::shown;
use crate::check_profile;

/// How long a command that shows the servers waits for those still starting.
pub(crate) const SETTLE: Duration = Duration::from_secs(20);

/// Waits (at most [`SETTLE`]) until none of the profile's servers is still starting.
pub(crate) fn settle(host: &Host, profile: &str) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(host.wait_for_mcp(profile, SETTLE));
    Ok(())
}

pub(crate) fn mcp(host: &Host, profile: &str, json: bool) -> Result<ExitCode> {
    check_profile(host, profile)?;
    settle(host, profile)?;
    let servers = host.mcp_servers(profile);
    let errors = host.mcp_config_errors(profile);
    if json {
        let value = json!({
            "servers": servers.iter().map(server_json).collect::<Vec<_>>(),
            "config_errors": errors.iter().map(|e| e.to_string()).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&value)?);
        return Ok(outcome(&servers, errors.len()));
    }
    for e in &errors {
        println!("config error: {}", toolhost::mask_log_line(&e.to_string()));
    }
    if servers.is_empty() {
        println!("No MCP servers for profile '{profile}' (list them in usr/mcp.json).");
    }
    for server in &servers {
        let state = match &server.state {
            McpState::Ready => format!("ready with {} tools", server.tools.len()),
            McpState::Failed(why) => format!("failed: {why}"),
            McpState::Starting => format!("still starting after {} s", SETTLE.as_secs()),
            other => other.name().to_owned(),
        };
        println!("{}: {state}", server.name);
        for tool in &server.tools {
            let info = tool.info();
            let line = shown(info.description.lines().next().unwrap_or_default());
            println!(
                "  {:<32} {:<5} {line}",
                tool.name(),
                info.risk_level.as_str()
            );
        }
        if !server.changed.is_empty() {
            let tools: Vec<&str> = server.changed.iter().map(|c| c.tool.as_str()).collect();
            println!(
                "  definition changed since approved: {} (`toolhost mcp diff {}`)",
                shown(&tools.join(", ")),
                server.name
            );
        }
        match (&server.last_error, &server.state) {
            (Some(error), McpState::Failed(why)) if error == why => {}
            (Some(error), _) => println!("  last error: {error}"),
            (None, _) => {}
        }
    }
    Ok(outcome(&servers, errors.len()))
}

/// Success when every file is right and every server ready; else 1, with the count on
/// standard error.
fn outcome(servers: &[McpServerStatus], config_errors: usize) -> ExitCode {
    let down = servers
        .iter()
        .filter(|s| s.state != McpState::Ready)
        .count();
    if down == 0 && config_errors == 0 {
        return ExitCode::SUCCESS;
    }
    let mut problems = Vec::new();
    if config_errors > 0 {
        problems.push(format!("{config_errors} mistake(s) in mcp.json"));
    }
    if down > 0 {
        problems.push(format!("{down} server(s) not ready"));
    }
    eprintln!("error: {}", problems.join(", "));
    ExitCode::FAILURE
}

fn server_json(server: &McpServerStatus) -> Value {
    json!({
        "name": server.name,
        "state": server.state.name(),
        "reason": match &server.state {
            toolhost::mcp::McpState::Failed(why) => Some(why.as_str()),
            _ => None,
        },
        "tools": server.tools.iter().map(|t| json!({
            "name": t.name(),
            "description": t.info().description,
            "risk_level": t.info().risk_level.as_str(),
            "capabilities": t.info().capabilities,
            "input_schema": t.info().parameters,
            "breaker": t.breaker_state().name(),
        })).collect::<Vec<_>>(),
        "last_error": server.last_error,
        "changed_tools": server.changed.iter().map(|c| &c.tool).collect::<Vec<_>>(),
    })
}

/// The server `name` of the profile, once it has settled.
fn settled_server(host: &Host, profile: &str, name: &str) -> Result<McpServerStatus> {
    check_profile(host, profile)?;
    settle(host, profile)?;
    match host
        .mcp_servers(profile)
        .into_iter()
        .find(|s| s.name == name)
    {
        Some(server) => Ok(server),
        None => crate::exit::usage!(
            "profile '{profile}' has no MCP server '{name}' (see `toolhost mcp`)"
        ),
    }
}

/// `toolhost mcp diff SERVER`: each changed definition, member by member (`-` approved,
/// `+` now); exit 1 if anything changed.
pub(crate) fn diff(host: &Host, profile: &str, name: &str) -> Result<ExitCode> {
    let server = settled_server(host, profile, name)?;
    if let McpState::Failed(why) = &server.state {
        println!("{name}: failed: {}", shown(why));
    }
    if server.changed.is_empty() {
        println!("{name}: no tool definition changed since approved");
        return Ok(ExitCode::SUCCESS);
    }
    for change in &server.changed {
        match change.approved.is_null() {
            true => println!(
                "{name}.{}: (a tool added since the server was first seen)",
                shown(&change.tool)
            ),
            false => println!("{name}.{}:", shown(&change.tool)),
        }
        let members = |v: &Value| v.as_object().cloned().unwrap_or_default();
        let (old, new) = (members(&change.approved), members(&change.now));
        let mut keys: Vec<&String> = old.keys().chain(new.keys()).collect();
        keys.sort();
        keys.dedup();
        for key in keys {
            let (was, is) = (old.get(key), new.get(key));
            if was == is {
                continue;
            }
            println!("  {key}:");
            let text = |v: &Value| match v {
                Value::String(s) => s.clone(),
                other => serde_json::to_string_pretty(other).unwrap_or_default(),
            };
            for (sign, value) in [("-", was), ("+", is)] {
                if let Some(value) = value {
                    for line in text(value).lines() {
                        println!("    {sign} {}", shown(line));
                    }
                }
            }
        }
    }
    let digest = toolhost::mcp::changes_digest(&server.changed);
    println!("digest: {digest}");
    println!("approve exactly these with `toolhost mcp approve {name} --digest {digest}`");
    Ok(ExitCode::FAILURE)
}

/// `toolhost mcp approve SERVER --digest DIGEST`.
pub(crate) fn approve(host: &Host, profile: &str, name: &str, digest: &str) -> Result<ExitCode> {
    settled_server(host, profile, name)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let approved = runtime
        .block_on(host.approve_mcp_tools(profile, name, digest, SETTLE))
        .map_err(anyhow::Error::msg)?;
    match approved.is_empty() {
        true => println!("{name}: nothing to approve"),
        false => println!(
            "{name}: approved the new definition of {}",
            shown(&approved.join(", "))
        ),
    }
    Ok(ExitCode::SUCCESS)
}

/// `toolhost mcp login SERVER`: signs in anew; says what was granted, never the tokens.
pub(crate) fn login(
    host: &Host,
    profile: &str,
    name: &str,
    no_browser: bool,
    fetch: bool,
) -> Result<ExitCode> {
    check_profile(host, profile)?;
    use toolhost::mcp::oauth::BrowserStep;
    let step = match (fetch, no_browser) {
        (true, _) => BrowserStep::Fetch,
        (false, _) if BrowserStep::from_env().is_some() => BrowserStep::Fetch,
        (false, true) => BrowserStep::Print,
        (false, false) => BrowserStep::Open,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let secrets = host.secrets();
    let signed = runtime.block_on(toolhost::mcp::oauth::login(
        host.layout(),
        profile,
        name,
        &secrets,
        host.options().max_text_bytes,
        step,
    ));
    let signed = match signed {
        Ok(signed) => signed,
        Err(e) => {
            eprintln!("error: {name}: {}", shown(&toolhost::mask_log_line(&e)));
            return Ok(ExitCode::FAILURE);
        }
    };
    if !signed.asked {
        println!("{name}: answered without asking to sign in; nothing stored");
        return Ok(ExitCode::SUCCESS);
    }
    let scopes = match signed.scopes.is_empty() {
        true => "no scopes named".to_owned(),
        false => format!("scopes: {}", signed.scopes.join(" ")),
    };
    let file = signed
        .file
        .strip_prefix(host.root())
        .unwrap_or(&signed.file);
    println!(
        "{name}: signed in ({}); the tokens are in {} (mode 0600)",
        shown(&scopes),
        file.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// Asks, on a terminal, for each VS Code input (`inputs`, `${input:ID}`) of the profile's
/// `mcp.json` files that has no answer yet, and keeps the answers in `usr/secrets.env`
/// (as `MCP_INPUT_<ID>`, a secret: masked everywhere, a password typed without echo). Off a
/// terminal nothing is asked: a server that uses an unanswered input fails, naming its key.
/// Call it before the profile's servers start.
pub(crate) fn ask_inputs(host: &Host, profile: &str) -> Result<()> {
    use std::io::{IsTerminal, Write};
    let config = toolhost::mcp::config::McpConfig::load(
        host.layout(),
        profile,
        toolhost::DEFAULT_MAX_TEXT_BYTES,
    );
    let secrets = host.secrets();
    let missing: Vec<_> = config
        .inputs
        .iter()
        .filter(|i| {
            secrets
                .get(&toolhost::mcp::config::input_secret_name(&i.id))
                .is_none()
        })
        .collect();
    if missing.is_empty() || !std::io::stdin().is_terminal() {
        return Ok(());
    }
    let file = host.layout().secrets_file();
    let mut lines = String::new();
    for input in missing {
        let name = toolhost::mcp::config::input_secret_name(&input.id);
        let default = match (&input.default, input.password) {
            (Some(_), true) => " [empty for its default]".to_owned(),
            (Some(d), false) => format!(" [empty for {}]", shown(d)),
            (None, _) => String::new(),
        };
        let prompt = format!(
            "MCP input '{}': {}{default} (kept in usr/secrets.env as {name}): ",
            shown(&input.id),
            shown(&input.description)
        );
        let typed = match input.password {
            true => rpassword::prompt_password(&prompt)?,
            false => {
                eprint!("{prompt}");
                std::io::stderr().flush()?;
                let mut line = String::new();
                std::io::stdin().read_line(&mut line)?;
                line
            }
        };
        let typed = typed.trim_end_matches(['\r', '\n']).to_owned();
        let value = match (typed.is_empty(), &input.default) {
            (true, Some(default)) => default.clone(),
            _ => typed,
        };
        if value.contains('\n') {
            anyhow::bail!("input '{}': one line only", input.id);
        }
        lines.push_str(&format!("{name}={value}\n"));
    }
    let mut text = std::fs::read_to_string(&file).unwrap_or_default();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&lines);
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)?;
    }
    write_private(&file, text.as_bytes())?;
    host.files_changed(std::slice::from_ref(&file));
    eprintln!("saved in {}", toolhost::Escaped(&file));
    Ok(())
}

/// Writes `bytes` to `file`, readable by its owner only.
fn write_private(file: &std::path::Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(file)?;
    out.write_all(bytes)?;
    Ok(())
}

/// `toolhost mcp import FILE`: the servers (and VS Code inputs) of a Cursor, Claude, VS Code
/// or Zed file merged into `usr/mcp.json`. A server name already there refuses the import,
/// one line; so does an entry this host would refuse (each mistake one line).
pub(crate) fn import(root: &std::path::Path, from: &std::path::Path) -> Result<ExitCode> {
    let shown_from = toolhost::Escaped(from).to_string();
    let text = match std::fs::read_to_string(from) {
        Ok(text) => text,
        Err(e) => crate::exit::usage!("cannot read {shown_from}: {e}"),
    };
    let value: Value = match serde_json::from_str(&without_comments(&text)) {
        Ok(value) => value,
        Err(e) => crate::exit::usage!("{shown_from}: not JSON (with comments): {e}"),
    };
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
    let mut file: Value = match std::fs::read_to_string(&target) {
        Ok(text) => serde_json::from_str(&text)
            .map_err(|e| anyhow::anyhow!("usr/mcp.json: invalid JSON: {e}; fix it first"))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => json!({}),
        Err(e) => anyhow::bail!("cannot read usr/mcp.json: {e}"),
    };
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
    if let Some(Value::Array(inputs)) = value.get("inputs") {
        let mut all = file["inputs"].as_array().cloned().unwrap_or_default();
        for input in inputs {
            if !all.iter().any(|i| i["id"] == input["id"]) {
                all.push(input.clone());
            }
        }
        file["inputs"] = Value::Array(all);
    }
    let mut text = serde_json::to_string_pretty(&file)?;
    text.push('\n');
    // Checked as the host reads it before it is written: an entry it would refuse is not.
    let check = tempfile_root(&text)?;
    let config = toolhost::mcp::config::McpConfig::load(
        &toolhost::Layout::new(check.path()),
        "default",
        toolhost::DEFAULT_MAX_TEXT_BYTES,
    );
    if !config.errors.is_empty() {
        for e in &config.errors {
            eprintln!("error: {shown_from}: {}", e.message);
        }
        eprintln!(
            "error: nothing was imported; fix the entries above in {shown_from} or import by hand"
        );
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
