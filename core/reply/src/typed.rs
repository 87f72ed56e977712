//! Arguments typed by the tool's JSON Schema: what XML and other text forms write as text
//! becomes the number, boolean, object or list the schema asks for.
//!
//! For each argument the schema's `properties` describe (in nested objects and lists too): a
//! string is a number (`"integer"`, `"number"`) or a boolean (`"boolean"`) if it is exactly one
//! (`"15"`, `"true"`); a string holding JSON, or child elements (`<file><path>a</path></file>`),
//! is the object or list an `"object"` or `"array"` argument asks for, and one object where a
//! list is asked for is a list of it; a number or boolean where the schema asks for a
//! `"string"` is its text. A schema that allows a string leaves strings alone. A value that
//! does not convert stays as it is, for the tool's validation to name.

use serde_json::Value;

use super::{lenient, named, MAX_REPLY_DEPTH};

/// `args` typed by `schema` (an object schema).
pub(super) fn type_args(args: &mut Value, schema: &Value) {
    convert(args, schema, 0);
}

fn convert(value: &mut Value, schema: &Value, depth: usize) {
    if depth >= MAX_REPLY_DEPTH {
        return;
    }
    let types = types(schema);
    let allows = |t: &str| types.iter().any(|x| x == t);
    if !allows("string") {
        // Not a let chain: the Windows build's Rust (1.85) has none.
        let typed = match value {
            Value::String(text) => from_text(text, &types),
            _ => None,
        };
        if let Some(typed) = typed {
            *value = typed;
        }
    } else if types.len() == 1 && matches!(value, Value::Number(_) | Value::Bool(_)) {
        *value = Value::String(value.to_string());
    }
    if allows("array") && value.is_object() && !allows("object") {
        *value = Value::Array(vec![value.take()]);
    }
    match value {
        Value::Object(map) => {
            if let Some(Value::Object(properties)) = schema.get("properties") {
                for (key, property) in properties {
                    if let Some(inner) = map.get_mut(key) {
                        convert(inner, property, depth + 1);
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = schema.get("items") {
                for inner in items {
                    convert(inner, item, depth + 1);
                }
            }
        }
        _ => {}
    }
}

/// The schema's `type`, one name or a list of them.
fn types(schema: &Value) -> Vec<String> {
    match schema.get("type") {
        Some(Value::String(t)) => vec![t.clone()],
        Some(Value::Array(list)) => list
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    }
}

/// A text as the first of `types` it is exactly.
fn from_text(text: &str, types: &[String]) -> Option<Value> {
    let trimmed = text.trim();
    types.iter().find_map(|t| match t.as_str() {
        "integer" | "number" => serde_json::from_str::<serde_json::Number>(trimmed)
            .ok()
            .filter(|n| t == "number" || n.is_i64() || n.is_u64())
            .map(Value::Number),
        "boolean" => match trimmed {
            "true" => Some(Value::Bool(true)),
            "false" => Some(Value::Bool(false)),
            _ => None,
        },
        "object" | "array" if trimmed.starts_with(['{', '[']) => {
            lenient::read_whole(trimmed).filter(|v| v.is_object() == (t == "object"))
        }
        "object" | "array" if trimmed.starts_with('<') => match named::children(trimmed) {
            Some(Ok(map)) if !map.is_empty() => Some(Value::Object(map)),
            _ => None,
        },
        _ => None,
    })
}
