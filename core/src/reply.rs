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
    if nesting(object) > MAX_NESTING {
        return None; // no tool request is that deep, and the parsers below recurse
    }
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

/// The deepest nesting of a reply the reader looks at. serde_json stops at 128 by itself,
/// but the JSON5 fallback turns its result into a `Value` recursively, without a limit: a
/// reply a few thousand levels deep overflowed a 2 MiB stack. A tool request needs a few.
pub const MAX_NESTING: usize = 64;

/// The deepest nesting of `{` and `[` in `text`, read as JSON5 is lexed: brackets inside
/// strings (double or single quoted, with escapes) and comments (`//`, `/* */`) do not count.
/// One pass.
fn nesting(text: &str) -> usize {
    let bytes = text.as_bytes();
    let (mut depth, mut deepest, mut i) = (0usize, 0usize, 0usize);
    while i < bytes.len() {
        match bytes[i] {
            quote @ (b'"' | b'\'') => i = string_end(bytes, i + 1, quote),
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                i = find(bytes, i + 2, b"\n").unwrap_or(bytes.len());
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                i = find(bytes, i + 2, b"*/").map_or(bytes.len(), |end| end + 1);
            }
            b'{' | b'[' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    deepest
}

/// The index of the quote that closes a string starting at `from` (the end if none).
fn string_end(bytes: &[u8], mut from: usize, quote: u8) -> usize {
    while from < bytes.len() {
        match bytes[from] {
            b'\\' => from += 2,
            b if b == quote => return from,
            _ => from += 1,
        }
    }
    bytes.len()
}

/// Where `needle` next starts in `bytes`, at `from` or later.
fn find(bytes: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    bytes
        .get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|at| from + at)
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
    fn no_nesting_overflows_a_small_stack() {
        // A tokio worker's stack; before the guard, ~8 KB of nesting overflowed it.
        let reader = std::thread::Builder::new().stack_size(2 << 20).spawn(|| {
            for depth in [65, 1_000, 20_000, 1_000_000] {
                for (open, close) in [("[", "]"), ("{\"a\":", "}"), ("{'a':", "}")] {
                    let reply = format!(
                        "{{\"tool_name\": \"x\", \"tool_args\": {{\"v\": {}1{}}}}}",
                        open.repeat(depth),
                        close.repeat(depth)
                    );
                    assert_eq!(parse_reply(&reply), None, "depth {depth}");
                }
            }
            let unclosed = format!("{{\"tool_name\": \"x\", \"a\": {}", "[".repeat(100_000));
            assert_eq!(parse_reply(&unclosed), None);
        });
        reader
            .unwrap()
            .join()
            .expect("the reader overflowed or panicked");
        let shallow = format!(
            "{{\"tool_name\": \"x\", \"tool_args\": {{\"v\": {}1{}}}}}",
            "[".repeat(60),
            "]".repeat(60)
        );
        assert!(parse_reply(&shallow).is_some());
        assert_eq!(nesting("{\"a\": \"{[{\", 'b': '\\'{'}"), 1);
        // A comment's apostrophe opens no string: the brackets after it still count.
        assert_eq!(nesting("{ // don't\n \"a\": [[1]] /* [[[ */ }"), 3);
        let sneaky = format!(
            "{{\"tool_name\": \"x\", // don't\n \"tool_args\": {{\"v\": {}1{}}}}}",
            "[".repeat(50_000),
            "]".repeat(50_000)
        );
        let reader = std::thread::Builder::new().stack_size(2 << 20);
        let reader = reader.spawn(move || parse_reply(&sneaky)).unwrap();
        assert_eq!(reader.join().expect("overflowed"), None);
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
