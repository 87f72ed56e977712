//! Finding the tool request among the objects and XML calls of a reply.
//!
//! A candidate starts at each `{`, `<invoke` or `<function=` outside the candidates already
//! read. A candidate is *block-level* if it starts its line (after white space, `[`, or a
//! tag or marker ending in `>` or `]`, such as `<tool_call>` or `[TOOL_CALLS]`) or is an XML
//! call; otherwise it is *inline*, written inside a sentence or in backticks. The reply's
//! request is the first block-level candidate that is a request (or a broken one); only when
//! there is none, the first inline one. So an example quoted in a sentence never wins over the
//! call below it, and a broken request is never passed over for a later one. Several different
//! inline requests and no block-level one are examples, not a call: unreadable.
//!
//! Each candidate is read in JSON's quote mode, then, if that fails, in the lenient one. The
//! work is bounded by four times the reply's length: linear in any reply.

use serde_json::Value;

use super::lenient::{self, Quotes};
use super::shapes::{self, Reading};
use super::{arrow, headers, xml};

/// How far back the start of a line is looked for.
const LINE_LOOKBEHIND: usize = 256;

/// The reply's request, by the rule above.
pub(super) fn choose(text: &str) -> Reading {
    let budget = text.len().saturating_mul(4).saturating_add(4096);
    let mut spent = 0usize;
    let mut inline: Vec<Reading> = Vec::new();
    let mut at = 0;
    while let Some(start) = next_start(text, at) {
        if spent > budget {
            break;
        }
        let (reading, next, cost) = read_candidate(text, start);
        spent += cost;
        at = next;
        if matches!(reading, Reading::Nothing) {
            continue;
        }
        if is_block(text, start) {
            return reading;
        }
        inline.push(reading);
    }
    only_inline(inline)
}

/// Requests written inside sentences: one is taken; several different ones are examples.
fn only_inline(mut inline: Vec<Reading>) -> Reading {
    let Some(first) = inline.first() else {
        return Reading::Nothing;
    };
    let same = |r: &Reading| match (r, first) {
        (Reading::Request(a), Reading::Request(b)) => a.tool == b.tool && a.args == b.args,
        _ => false,
    };
    if inline.len() > 1 && !inline[1..].iter().all(same) {
        let tools: Vec<String> = inline.iter().map(describe).collect();
        return Reading::Unreadable(format!(
            "several calls written inside sentences, none on its own line ({}): which one is meant?",
            tools.join(", ")
        ));
    }
    inline.swap_remove(0)
}

fn describe(reading: &Reading) -> String {
    match reading {
        Reading::Request(r) => format!("`{}`", r.tool),
        _ => "a broken one".to_owned(),
    }
}

/// The next `{` or XML call from `at` on.
fn next_start(text: &str, mut at: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    loop {
        let i = at
            + bytes
                .get(at..)?
                .iter()
                .position(|&b| b == b'{' || b == b'<')?;
        if bytes[i] == b'{' || xml::starts_call(text, i) {
            return Some(i);
        }
        at = i + 1;
    }
}

/// The candidate at `start`: what it is, where to look next, and the work it took.
fn read_candidate(text: &str, start: usize) -> (Reading, usize, usize) {
    if text.as_bytes()[start] == b'<' {
        let (reading, end) = xml::read_call(text, start);
        return (reading, end, end - start);
    }
    if arrow::starts_call(text, start) {
        let (reading, end) = arrow::read_call(text, start);
        return (reading, end, end - start);
    }
    let mut cost = 0;
    let mut broken_request = None;
    for quotes in [Quotes::Strict, Quotes::Lenient] {
        match lenient::read_value(text, start, quotes, true) {
            Ok((value, end)) => {
                let reading = headers::named_before(text, start, &value)
                    .filter(|_| !looks_like_request(&value))
                    .unwrap_or_else(|| shapes::classify(value));
                return (reading, end, cost + end - start);
            }
            Err(failure) => {
                cost += failure.at.saturating_sub(start).max(1);
                if let Some((reading, end)) = repeated_prefix(text, &failure) {
                    return (reading, end, cost + end - failure.at);
                }
                if shapes::started_as_request(&failure.partial, failure.pending.as_deref()) {
                    broken_request.get_or_insert((failure.at, failure.reason, failure.partial));
                }
            }
        }
    }
    let reading = match broken_request {
        Some((at, reason, partial)) => Reading::Unreadable(format!(
            "a request that could not be read ({reason}, {} bytes into it): {}",
            at - start,
            shapes::brief(&Value::Object(partial)),
        )),
        None => Reading::Nothing,
    };
    (reading, start + 1, cost)
}

/// A request begun, broken off after its tool's name, and begun again in full where its next
/// key was due (`{"function": "x",{"function": "x", "params": {...}}`): the complete inner
/// request, if it names the same tool and the broken one holds nothing else.
fn repeated_prefix(text: &str, failure: &lenient::Failure) -> Option<(Reading, usize)> {
    const TOOL_NAMES: [&str; 4] = ["function", "tool_name", "tool", "name"];
    let mut keys = failure.partial.iter();
    let (key, Value::String(tool)) = keys.next()? else {
        return None;
    };
    if failure.partial.len() != 1
        || !TOOL_NAMES.contains(&key.as_str())
        || failure.pending.is_some()
    {
        return None;
    }
    let inner = failure.at + text.get(failure.at..)?.len() - text[failure.at..].trim_start().len();
    if !text[inner..].starts_with('{') {
        return None;
    }
    for quotes in [Quotes::Strict, Quotes::Lenient] {
        if let Ok((value, end)) = lenient::read_value(text, inner, quotes, true) {
            return match shapes::classify(value) {
                Reading::Request(request) if request.tool == *tool => {
                    Some((Reading::Request(request), end))
                }
                _ => None,
            };
        }
    }
    None
}

/// Whether an object is a request in itself (a name before it does not then matter).
fn looks_like_request(value: &Value) -> bool {
    !matches!(shapes::classify(value.clone()), Reading::Nothing)
}

/// Whether the candidate at `start` is block-level (see the module's documentation).
fn is_block(text: &str, start: usize) -> bool {
    if xml::starts_call(text, start) {
        return true;
    }
    for &b in text.as_bytes()[..start].iter().rev().take(LINE_LOOKBEHIND) {
        match b {
            b' ' | b'\t' | b'[' => {}
            b'\n' | b'\r' | b'>' | b']' => return true,
            _ => return false,
        }
    }
    true
}
