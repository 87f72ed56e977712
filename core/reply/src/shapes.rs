//! The shapes a tool request takes in the replies of Agent Zero and of other frameworks.
//!
//! | shape | tool | arguments |
//! |---|---|---|
//! | Agent Zero | `tool_name` or `tool` | `tool_args`, `args`, `parameters`, `arguments`, `params`, `input`, `tool_input`, `action_input` (or none) |
//! | OpenAI, Hermes, Anthropic | `name`, only next to an arguments key | as above |
//! | OpenAI message | `function: {name, arguments}`, `tool_calls: [{function: ...}]` (the first) | |
//! | AutoGPT | `command: {name, args}` | |
//! | MemGPT / Letta | `function: "name"` | `params` (or any of the above) |
//! | LangChain | `action`, only next to `action_input` | `action_input` |
//!
//! Arguments are an object, `null` or nothing (`{}`), or a string that holds a JSON object
//! (OpenAI's `"arguments": "{\"a\": 1}"`, even encoded twice). Anything else present as the
//! arguments makes the request unreadable: it is never called with arguments left out. So does
//! a request with no arguments key but another key that holds an object (`"tool_inputs": {..}`):
//! those are likely its arguments under a name not known here.
//! A function schema (`name`, `description`, `parameters` with `properties`) is not a call.

use serde_json::{Map, Value};

use super::{lenient, ToolRequest};

const TOOL_KEYS: [&str; 2] = ["tool_name", "tool"];
const ARGS_KEYS: [&str; 8] = [
    "tool_args",
    "args",
    "parameters",
    "arguments",
    "params",
    "input",
    "tool_input",
    "action_input",
];
/// Keys of a request that are not its arguments, even when they hold an object.
const NOT_ARGS: [&str; 3] = ["thoughts", "headline", "id"];
const WRAPPERS: [&str; 3] = ["function", "command", "tool_call"];

/// What an object in a reply is.
#[derive(Debug)]
pub(super) enum Reading {
    /// A tool request.
    Request(ToolRequest),
    /// A tool request whose tool or arguments could not be read: what was seen.
    Unreadable(String),
    /// Not a tool request.
    Nothing,
}

/// Reads an object as a tool request, in any of the shapes above.
pub(super) fn classify(value: Value) -> Reading {
    let Value::Object(mut map) = value else {
        return Reading::Nothing;
    };
    let thoughts = map.remove("thoughts");
    let headline = map
        .get("headline")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let mut reading = request(map);
    if let Reading::Request(r) = &mut reading {
        r.thoughts = r.thoughts.take().or(thoughts);
        r.headline = r.headline.take().or(headline);
    }
    reading
}

/// Whether an object that could not be read to its end had started as a tool request: its
/// tool key was read, or its arguments key next to `name` was being read.
pub(super) fn started_as_request(partial: &Map<String, Value>, pending: Option<&str>) -> bool {
    let keys = || partial.keys().map(String::as_str).chain(pending);
    let mut keys_seen = keys();
    let tool =
        keys_seen.any(|k| TOOL_KEYS.contains(&k) || WRAPPERS.contains(&k) || k == "tool_calls");
    let named = ["name", "action"]
        .iter()
        .any(|k| partial.get(*k).is_some_and(Value::is_string));
    tool || (named && keys().any(|k| ARGS_KEYS.contains(&k)))
}

fn request(mut map: Map<String, Value>) -> Reading {
    if let Some(tool) = TOOL_KEYS.iter().find_map(|k| map.remove(*k)) {
        return with_args(tool, &mut map, true);
    }
    if let Some(Value::Array(calls)) = map.remove("tool_calls") {
        return calls.into_iter().next().map_or(Reading::Nothing, classify);
    }
    if map.contains_key("action_input") {
        if let Some(action @ Value::String(_)) = map.remove("action") {
            return with_args(action, &mut map, false);
        }
    }
    for wrapper in WRAPPERS {
        match map.remove(wrapper) {
            Some(inner @ Value::Object(_)) => return classify(inner),
            Some(name @ Value::String(_)) if wrapper == "function" => {
                return with_args(name, &mut map, true);
            }
            _ => {}
        }
    }
    if map.get("name").is_some_and(Value::is_string) && !is_schema(&map) {
        let name = map.remove("name").unwrap_or_default();
        return with_args(name, &mut map, false);
    }
    Reading::Nothing
}

/// A tool named by `tool`, with the arguments in `map`; `optional` if they may be missing.
fn with_args(tool: Value, map: &mut Map<String, Value>, optional: bool) -> Reading {
    let Value::String(tool) = tool else {
        return Reading::Unreadable(format!(
            "a tool name that is not a string: {}",
            brief(&tool)
        ));
    };
    let tool = tool.trim();
    if tool.is_empty() {
        return Reading::Unreadable("an empty tool name".to_owned());
    }
    let found = ARGS_KEYS.iter().find_map(|k| Some((*k, map.remove(*k)?)));
    let args = match found {
        None if optional => match map
            .iter()
            .find(|(k, v)| v.is_object() && !NOT_ARGS.contains(&k.as_str()))
        {
            Some((key, _)) => {
                return Reading::Unreadable(format!(
                    "a request for tool `{tool}` with no arguments key, but `{key}` holds an object: name the arguments `tool_args`"
                ));
            }
            None => Value::Object(Map::new()),
        },
        None => return Reading::Nothing,
        Some((key, value)) => match arguments(value) {
            Ok(args) => args,
            Err(seen) => {
                return Reading::Unreadable(format!(
                    "a request for tool `{tool}` whose `{key}` could not be read as an object: {seen}"
                ));
            }
        },
    };
    Reading::Request(ToolRequest::call(tool.to_owned(), args))
}

/// The arguments as an object, or a description of what was there instead.
fn arguments(value: Value) -> Result<Value, String> {
    let mut value = value;
    // A string holding JSON, possibly encoded twice.
    for _ in 0..3 {
        match value {
            Value::Object(_) => return Ok(value),
            Value::Null => return Ok(Value::Object(Map::new())),
            Value::String(text) if text.trim().is_empty() => return Ok(Value::Object(Map::new())),
            Value::String(text) => match lenient::read_whole(&text) {
                Some(inner) => value = inner,
                None => return Err(brief(&Value::String(text))),
            },
            other => return Err(brief(&other)),
        }
    }
    Err(brief(&value))
}

/// A function's schema, as a tools list gives it: not a call.
fn is_schema(map: &Map<String, Value>) -> bool {
    let params = ARGS_KEYS.iter().find_map(|k| map.get(*k));
    map.contains_key("description")
        && params.is_some_and(|p| p.get("properties").is_some() && p.get("type").is_some())
}

/// A short quotation of a value, for a warning.
pub(super) fn brief(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(80) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text,
    }
}
