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

/// One merged entry, checked.
pub(super) fn server<'a>(
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
                Some(p) => crate::mcp::oauth::OAuthSettings::parse(&p.value)
                    .map_err(|e| (Some(p), e.message))?,
            };
            Transport::Http {
                url: url.to_owned(),
                headers: string_map(get("headers"), "headers")?,
                oauth,
                tokens: root
                    .join(crate::mcp::oauth::TOKENS_DIR)
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
