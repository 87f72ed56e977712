//! Tool names written before an object of arguments, in formats that put the name outside it:
//!
//! - ReAct (LangChain, CrewAI): `Action: name` then `Action Input:` and the object;
//! - Harmony (gpt-oss): `to=functions.name ... <|message|>` and the object;
//! - LM Studio: `[name]` on the line before the object;
//! - Mistral: `[TOOL_CALLS]name[ARGS]` and the object;
//! - Kimi K2: `functions.name:0<|tool_call_argument_begin|>` and the object;
//! - DeepSeek: `<｜tool▁sep｜>name` on the line before the object (in a code fence).
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
        .or_else(|| mistral(before))
        .or_else(|| kimi(before))
        .or_else(|| deepseek(before))
        .or_else(|| bracketed(before))?;
    Some(Reading::Request(ToolRequest::call(tool, args.clone())))
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

fn mistral(before: &str) -> Option<String> {
    let head = before.strip_suffix("[ARGS]")?;
    let name = head.rsplit(['\n', ']']).next()?;
    word(name.trim(), false)
}

fn kimi(before: &str) -> Option<String> {
    let head = before.strip_suffix("<|tool_call_argument_begin|>")?;
    let name = head.rsplit(['\n', '>', ' ']).next()?;
    // The call's index after the name: `name:0`.
    let name = match name.rsplit_once(':') {
        Some((name, index)) if index.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => name,
    };
    word(name.strip_prefix("functions.").unwrap_or(name), false)
}

fn deepseek(before: &str) -> Option<String> {
    let line = before.lines().last()?;
    let at = line.rfind("<｜tool▁sep｜>")?;
    word(line[at + "<｜tool▁sep｜>".len()..].trim(), false)
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
