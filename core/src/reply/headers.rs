//! Tool names written before an object of arguments, in formats that put the name outside it:
//!
//! - ReAct (LangChain, CrewAI): `Action: name` then `Action Input:` and the object;
//! - Harmony (gpt-oss): `to=functions.name ... <|message|>` and the object;
//! - LM Studio: `[name]` on the line before the object.
//!
//! Only the 256 bytes before the object are looked at.

use serde_json::Value;

use super::shapes::Reading;
use super::ToolRequest;

const LOOKBEHIND: usize = 256;

/// The request made of the object at `start` (already read as `args`, not itself a request)
/// and a tool named just before it; `None` if no tool is named there.
pub(super) fn named_before(text: &str, start: usize, args: &Value) -> Option<Reading> {
    if !args.is_object() {
        return None;
    }
    let mut from = start.saturating_sub(LOOKBEHIND);
    while !text.is_char_boundary(from) {
        from += 1;
    }
    let before = text[from..start]
        .trim_end()
        .trim_end_matches("```json")
        .trim_end();
    let tool = react(before)
        .or_else(|| harmony(before))
        .or_else(|| bracketed(before))?;
    Some(Reading::Request(ToolRequest {
        tool,
        args: args.clone(),
        thoughts: None,
        headline: None,
    }))
}

fn react(before: &str) -> Option<String> {
    let head = before.strip_suffix("Action Input:")?.trim_end();
    let line = head.lines().last()?.trim();
    word(line.strip_prefix("Action:")?.trim(), true)
}

fn harmony(before: &str) -> Option<String> {
    let head = before.strip_suffix("<|message|>")?;
    let at = head.rfind("to=functions.")?;
    let rest = &head[at + "to=functions.".len()..];
    let end = rest
        .find(|c: char| c.is_whitespace() || c == '<')
        .unwrap_or(rest.len());
    word(&rest[..end], false)
}

fn bracketed(before: &str) -> Option<String> {
    let line = before.lines().last()?.trim();
    word(line.strip_prefix('[')?.strip_suffix(']')?, false)
}

/// A tool name: letters, digits, `_`, `-`, `.`, `:` (and spaces, for ReAct's tool names).
fn word(name: &str, spaces: bool) -> Option<String> {
    let ok = |c: char| c.is_alphanumeric() || "_-.:".contains(c) || (spaces && c == ' ');
    (!name.is_empty() && name.len() <= 64 && name.chars().all(ok)).then(|| name.to_owned())
}
