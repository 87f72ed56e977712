//! One server's entry, its keys merged over the layers, checked and made a [`ServerConfig`].

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use super::{Placed, ServerConfig, Transport, ENTRY_KEYS};

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

/// The entry's keys, by name.
type Entry = BTreeMap<String, Placed>;

/// One merged entry, checked.
pub(super) fn server<'a>(
    name: &str,
    entry: &'a Entry,
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
    string(entry, "description")?;
    let transport = match (entry.get("command"), entry.get("url")) {
        (Some(_), Some(p)) => {
            let message = "has both \"command\" and \"url\": keep one".to_owned();
            return Err((Some(p), message));
        }
        (Some(p), None) => stdio(entry, p, root)?,
        (None, Some(p)) => http(name, entry, p, root)?,
        (None, None) => {
            let message = "needs \"command\" (stdio) or \"url\" (streamable HTTP)".to_owned();
            return Err((None, message));
        }
    };
    check_type(entry, &transport)?;
    let roots = strings(entry.get("roots"), "roots")?;
    let initialize_only = match string(entry, "protocol")? {
        None | Some("2026-07-28") => false,
        Some("2025-11-25") => true,
        Some(other) => {
            let message = format!("\"protocol\" is {other:?}: give \"2025-11-25\" (greeted with initialize only) or leave it out");
            return Err((entry.get("protocol"), message));
        }
    };
    Ok(ServerConfig {
        name: name.to_owned(),
        transport,
        roots: roots.iter().map(|folder| root.join(folder)).collect(),
        initialize_only,
    })
}

/// The entry's string `key`, if it has one.
fn string<'a>(entry: &'a Entry, key: &str) -> Result<Option<&'a str>, Mistake<'a>> {
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
}

/// A stdio server's transport (`command`, `args`, `env`, `cwd`).
fn stdio<'a>(entry: &'a Entry, command: &'a Placed, root: &Path) -> Result<Transport, Mistake<'a>> {
    let program = string(entry, "command")?.unwrap_or_default();
    if program.is_empty() {
        let message = "\"command\" must be a non-empty string".to_owned();
        return Err((Some(command), message));
    }
    for key in ["headers", "oauth"] {
        if let Some(p) = entry.get(key) {
            let message = format!("\"{key}\" is for a server with a \"url\", not a \"command\"");
            return Err((Some(p), message));
        }
    }
    Ok(Transport::Stdio {
        command: program.to_owned(),
        args: strings(entry.get("args"), "args")?,
        env: string_map(entry.get("env"), "env")?,
        cwd: string(entry, "cwd")?.map(|dir| root.join(dir)),
    })
}

/// A streamable HTTP server's transport (`url`, `headers`, `oauth`).
fn http<'a>(
    name: &str,
    entry: &'a Entry,
    placed: &'a Placed,
    root: &Path,
) -> Result<Transport, Mistake<'a>> {
    let url = string(entry, "url")?.unwrap_or_default();
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        let message = "\"url\" must be an http:// or https:// URL".to_owned();
        return Err((Some(placed), message));
    }
    for key in ["args", "env", "cwd"] {
        if let Some(p) = entry.get(key) {
            let message = format!("\"{key}\" is for a server with a \"command\", not a \"url\"");
            return Err((Some(p), message));
        }
    }
    let oauth = match entry.get("oauth") {
        None => Default::default(),
        Some(p) => {
            crate::mcp::oauth::OAuthSettings::parse(&p.value).map_err(|e| (Some(p), e.message))?
        }
    };
    Ok(Transport::Http {
        url: url.to_owned(),
        headers: string_map(entry.get("headers"), "headers")?,
        oauth,
        tokens: root
            .join(crate::mcp::oauth::TOKENS_DIR)
            .join(format!("{name}.json")),
    })
}

/// The entry's `type`, if it has one, checked against its transport.
fn check_type<'a>(entry: &'a Entry, transport: &Transport) -> Result<(), Mistake<'a>> {
    let stdio = matches!(transport, Transport::Stdio { .. });
    match (string(entry, "type")?, stdio) {
        (None | Some("stdio"), true) | (None | Some("http" | "streamable-http"), false) => Ok(()),
        (Some("sse"), _) => {
            let message = "\"type\": \"sse\" (the SSE transport of 2024-11-05) is not supported: \
                           give the server's streamable HTTP endpoint as \"url\""
                .to_owned();
            Err((entry.get("type"), message))
        }
        (Some(kind), _) => {
            let message = match stdio {
                true => format!("\"type\" is {kind:?} but the server has a \"command\" (stdio)"),
                false => format!("\"type\" is {kind:?} but the server has a \"url\" (http)"),
            };
            Err((entry.get("type"), message))
        }
    }
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
