//! MCP prompts from the layers: each `<layer>/mcp-prompts/<name>.toml` is the prompt `<name>`,
//! the first layer's winning as for tools. A file says the prompt's description, its
//! arguments (with the values `completion/complete` offers for each) and its messages, whose
//! texts may hold `{{argument}}`:
//!
//! ```toml
//! description = "Plans a trip"
//!
//! [[argument]]
//! name = "city"
//! description = "Where to"
//! required = true
//! values = ["Paris", "Porto", "Prague"]
//!
//! [[message]]
//! role = "user"                      # or "assistant"
//! text = "Plan three days in {{city}}."
//!
//! [[message]]
//! role = "user"
//! image = "map.png"                  # a file beside this one; or `audio = "..."`
//!
//! [[message]]
//! role = "user"
//! resource = { uri = "test://notes/{{city}}", mime_type = "text/plain", text = "..." }
//! ```
//!
//! A file that cannot be read is left out, with one warning naming it and why.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use rmcp::model::{GetPromptRequestParams, GetPromptResult, Prompt};
use rmcp::ErrorData;
use serde::Deserialize;
use serde_json::{json, Value};
use toolhost::Host;

/// The largest prompt file read, and the largest file a message embeds.
const MAX_FILE_BYTES: u64 = 8 << 20;

/// A prompt file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PromptFile {
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default, rename = "argument")]
    arguments: Vec<Argument>,
    #[serde(rename = "message")]
    messages: Vec<Message>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Argument {
    name: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    required: bool,
    /// What `completion/complete` offers, those that start with what was typed.
    #[serde(default)]
    values: Vec<String>,
    /// The question a 2026-07-28 client that leaves the argument out is asked instead
    /// (its `InputRequiredResult`), as a form of one text field.
    #[serde(default)]
    ask: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Message {
    role: Role,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    image: Option<String>,
    #[serde(default)]
    audio: Option<String>,
    #[serde(default)]
    resource: Option<Resource>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Role {
    User,
    Assistant,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Resource {
    uri: String,
    #[serde(default)]
    mime_type: Option<String>,
    #[serde(default)]
    text: Option<String>,
    /// A file beside the prompt file, embedded whole.
    #[serde(default)]
    file: Option<String>,
}

/// Every prompt file of `profile`, by name, the first layer's winning.
fn files(host: &Host, profile: &str) -> BTreeMap<String, PathBuf> {
    let mut found = BTreeMap::new();
    for layer in host.layers(profile).iter() {
        let Ok(entries) = std::fs::read_dir(layer.mcp_prompts_dir()) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = match (path.file_stem(), path.extension()) {
                (Some(stem), Some(ext)) if ext == "toml" => stem.to_string_lossy().into_owned(),
                _ => continue,
            };
            if toolhost::is_safe_name(&name) {
                found.entry(name).or_insert(path);
            }
        }
    }
    found
}

fn read(path: &Path) -> Result<PromptFile, String> {
    let text =
        toolhost::read_text(path, MAX_FILE_BYTES, "prompt file").map_err(|e| e.to_string())?;
    toml::from_str(&text).map_err(|e| format!("{}: {}", path.display(), e.message()))
}

/// Reads `path`, or says why not (once per listing) and gives `None`.
fn read_or_warn(path: &Path) -> Option<PromptFile> {
    match read(path) {
        Ok(file) => Some(file),
        Err(e) => {
            tracing::warn!("skipping MCP prompt {e}");
            None
        }
    }
}

/// The prompts `profile` offers, sorted by name.
pub(crate) fn list(host: &Host, profile: &str) -> Vec<Prompt> {
    files(host, profile)
        .into_iter()
        .filter_map(|(name, path)| {
            let file = read_or_warn(&path)?;
            let arguments: Vec<Value> = file
                .arguments
                .iter()
                .map(|a| json!({"name": a.name, "description": a.description, "required": a.required}))
                .collect();
            let prompt = json!({
                "name": name,
                "title": file.title,
                "description": file.description.unwrap_or_else(|| format!("The prompt {name}")),
                "arguments": arguments,
            });
            serde_json::from_value(without_nulls(prompt)).ok()
        })
        .collect()
}

/// The arguments of the prompt `request.name` that `request` leaves out and that say what
/// to ask instead: each one's name and question.
pub(crate) fn questions(
    host: &Host,
    profile: &str,
    request: &GetPromptRequestParams,
) -> Vec<(String, String)> {
    let Some(file) = files(host, profile)
        .remove(&request.name)
        .and_then(|path| read(&path).ok())
    else {
        return Vec::new();
    };
    let given = request.arguments.clone().unwrap_or_default();
    file.arguments
        .into_iter()
        .filter(|a| !given.contains_key(&a.name))
        .filter_map(|a| Some((a.name, a.ask?)))
        .collect()
}

/// The prompt `request.name` with its arguments filled in.
pub(crate) fn get(
    host: &Host,
    profile: &str,
    request: &GetPromptRequestParams,
) -> Result<GetPromptResult, ErrorData> {
    let Some(path) = files(host, profile).remove(&request.name) else {
        let message = format!("unknown prompt '{}'", request.name);
        return Err(ErrorData::invalid_params(message, None));
    };
    let file = read(&path).map_err(|e| ErrorData::internal_error(e, None))?;
    let given = request.arguments.clone().unwrap_or_default();
    let mut values = BTreeMap::new();
    for argument in &file.arguments {
        match given.get(&argument.name) {
            Some(value) => {
                let text = value
                    .as_str()
                    .map_or_else(|| value.to_string(), str::to_owned);
                values.insert(argument.name.clone(), text);
            }
            None if argument.required => {
                let message = format!(
                    "prompt '{}' needs the argument '{}'",
                    request.name, argument.name
                );
                return Err(ErrorData::invalid_params(message, None));
            }
            None => {
                values.insert(argument.name.clone(), String::new());
            }
        }
    }
    let fill = |text: &str| fill(text, &values);
    let folder = path.parent().unwrap_or(Path::new("."));
    let mut messages = Vec::with_capacity(file.messages.len());
    for message in &file.messages {
        let content = content(message, folder, &fill)
            .map_err(|e| ErrorData::internal_error(format!("{}: {e}", path.display()), None))?;
        let role = match message.role {
            Role::User => "user",
            Role::Assistant => "assistant",
        };
        messages.push(json!({"role": role, "content": content}));
    }
    let result = json!({"description": file.description, "messages": messages});
    serde_json::from_value(without_nulls(result))
        .map_err(|e| ErrorData::internal_error(format!("{}: {e}", path.display()), None))
}

/// A message's one content block.
fn content(
    message: &Message,
    folder: &Path,
    fill: &dyn Fn(&str) -> String,
) -> Result<Value, String> {
    let b64 = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
    match (
        &message.text,
        &message.image,
        &message.audio,
        &message.resource,
    ) {
        (Some(text), None, None, None) => Ok(json!({"type": "text", "text": fill(text)})),
        (None, Some(file), None, None) | (None, None, Some(file), None) => {
            let kind = if message.image.is_some() {
                "image"
            } else {
                "audio"
            };
            let (bytes, mime) = beside(folder, file)?;
            Ok(json!({"type": kind, "data": b64(&bytes), "mimeType": mime}))
        }
        (None, None, None, Some(resource)) => {
            let mut embedded = json!({"uri": fill(&resource.uri)});
            match (&resource.text, &resource.file) {
                (Some(text), None) => embedded["text"] = Value::String(fill(text)),
                (None, Some(file)) => {
                    let (bytes, mime) = beside(folder, file)?;
                    match String::from_utf8(bytes) {
                        Ok(text) => embedded["text"] = Value::String(text),
                        Err(e) => embedded["blob"] = Value::String(b64(e.as_bytes())),
                    }
                    embedded["mimeType"] = Value::String(mime);
                }
                _ => return Err("a resource message needs one of `text` and `file`".to_owned()),
            }
            if let Some(mime) = &resource.mime_type {
                embedded["mimeType"] = Value::String(mime.clone());
            }
            Ok(json!({"type": "resource", "resource": embedded}))
        }
        _ => {
            Err("a message needs exactly one of `text`, `image`, `audio` and `resource`".to_owned())
        }
    }
}

/// A file beside the prompt file (no path out of its folder), and its MIME type.
fn beside(folder: &Path, file: &str) -> Result<(Vec<u8>, String), String> {
    let relative = Path::new(file);
    if relative.is_absolute()
        || relative
            .components()
            .any(|c| c == std::path::Component::ParentDir)
    {
        return Err(format!("`{file}` must be a file beside the prompt file"));
    }
    let path = folder.join(relative);
    let bytes = crate::resources::read_bytes(&path, MAX_FILE_BYTES)?;
    Ok((bytes, crate::resources::mime_type(&path)))
}

/// `text` with each `{{name}}` replaced by the argument's value.
fn fill(text: &str, values: &BTreeMap<String, String>) -> String {
    let mut out = text.to_owned();
    for (name, value) in values {
        out = out.replace(&format!("{{{{{name}}}}}"), value);
    }
    out
}

/// The values of `argument` of prompt `name` that start with `typed` (ignoring case).
pub(crate) fn complete(
    host: &Host,
    profile: &str,
    name: &str,
    argument: &str,
    typed: &str,
) -> Vec<String> {
    let Some(path) = files(host, profile).remove(name) else {
        return Vec::new();
    };
    let Some(file) = read_or_warn(&path) else {
        return Vec::new();
    };
    let typed = typed.to_lowercase();
    file.arguments
        .into_iter()
        .filter(|a| a.name == argument)
        .flat_map(|a| a.values)
        .filter(|v| v.to_lowercase().starts_with(&typed))
        .collect()
}

/// `value` without its `null` members (rmcp's types take absent, not null, for what is not
/// there).
pub(crate) fn without_nulls(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k, without_nulls(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(without_nulls).collect()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_fill_every_placeholder() {
        let values = BTreeMap::from([("a".to_owned(), "x".to_owned())]);
        assert_eq!(fill("{{a}}-{{a}} {{b}}", &values), "x-x {{b}}");
    }

    #[test]
    fn a_message_needs_one_kind_of_content() {
        let message: Message =
            toml::from_str("role = \"user\"\ntext = \"t\"\nimage = \"i.png\"").unwrap();
        let error = content(&message, Path::new("."), &|t| t.to_owned()).unwrap_err();
        assert!(error.contains("exactly one of"), "{error}");
    }
}
