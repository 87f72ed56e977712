//! Reading a model's reply: the tool request in it, read leniently.

use serde_json::{Map, Value};

/// The tool call a model's reply asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolRequest {
    /// `name` or `name:method`.
    pub tool: String,
    /// The arguments (an object).
    pub args: Value,
    /// The model's `thoughts`, if it gave any.
    pub thoughts: Option<Value>,
    /// The model's `headline`, if it gave one.
    pub headline: Option<String>,
}

/// Finds the tool request in a model's reply, as Agent Zero does but more forgiving.
///
/// The JSON object is taken from the first `{` to the last `}` (so code fences and text around
/// it do not matter) and read as JSON5: comments, trailing commas, single quotes and unquoted
/// keys are fine. The tool is `tool_name`, `tool` or `name`; its arguments are `tool_args`,
/// `args` or `parameters` (missing means `{}`). `None` when there is no usable request.
///
/// ```
/// let reply = "Sure!\n```json\n{'tool': 'greet:shout', args: {name: 'Ada',}, // hi\n}\n```";
/// let request = toolhost::parse_reply(reply).unwrap();
/// assert_eq!(request.tool, "greet:shout");
/// assert_eq!(request.args, serde_json::json!({"name": "Ada"}));
/// ```
pub fn parse_reply(text: &str) -> Option<ToolRequest> {
    let start = text.find('{')?;
    let end = text.rfind('}')?;
    if end < start {
        return None;
    }
    let object = &text[start..=end];
    let value: Value = serde_json::from_str(object)
        .or_else(|_| json5::from_str(object))
        .ok()?;
    let Value::Object(mut map) = value else {
        return None;
    };
    let tool = take_first(&mut map, &["tool_name", "tool", "name"])?;
    let Value::String(tool) = tool else {
        return None;
    };
    let tool = tool.trim().to_owned();
    if tool.is_empty() {
        return None;
    }
    let args = match take_first(&mut map, &["tool_args", "args", "parameters"]) {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(args @ Value::Object(_)) => args,
        Some(_) => return None,
    };
    Some(ToolRequest {
        tool,
        args,
        thoughts: map.remove("thoughts"),
        headline: map
            .remove("headline")
            .and_then(|h| h.as_str().map(str::to_owned)),
    })
}

fn take_first(map: &mut Map<String, Value>, keys: &[&str]) -> Option<Value> {
    keys.iter().find_map(|k| map.remove(*k))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strict_json_with_agent_zero_fields() {
        let r = parse_reply(
            r#"{"thoughts": ["a"], "headline": "Greeting", "tool_name": "greet", "tool_args": {"name": "Ada"}}"#,
        )
        .unwrap();
        assert_eq!(r.tool, "greet");
        assert_eq!(r.args, json!({"name": "Ada"}));
        assert_eq!(r.thoughts, Some(json!(["a"])));
        assert_eq!(r.headline.as_deref(), Some("Greeting"));
    }

    #[test]
    fn lenient_forms() {
        for text in [
            "~~~json\n{\"tool_name\": \"x\", \"tool_args\": {\"a\": 1,},}\n~~~",
            "Here you go: {'name': 'x', 'parameters': {'a': 1}} thanks",
            "{ /* c */ tool: \"x\", args: { a: 1 } // end\n }",
        ] {
            let r = parse_reply(text).unwrap_or_else(|| panic!("{text}"));
            assert_eq!((r.tool.as_str(), r.args), ("x", json!({"a": 1})), "{text}");
        }
    }

    #[test]
    fn unusable_replies() {
        for text in [
            "no json here",
            "} backwards {",
            "{\"tool_args\": {}}",
            "{\"tool_name\": 3}",
            "{\"tool_name\": \"x\", \"tool_args\": [1]}",
            "{\"tool_name\": \"  \"}",
            "{broken",
        ] {
            assert_eq!(parse_reply(text), None, "{text}");
        }
    }
}
