//! A stdio server's message, parsed from its line with the line's memory reused for its one
//! long text. A tool that answers 15 MB of text sends a line of 15 MB; parsing it as it is
//! holds the line and the parsed text at once, twice the answer. Here, when one string of a
//! long line is most of it, the message is parsed without it (a copy of the rest, small), and
//! the string's escapes are decoded in place in the line's own buffer, which becomes the
//! text: the answer costs its size once.
//!
//! Only a tool result's text block or a string in its structured content takes the text so;
//! a long string anywhere else (a key, a request's parameters) is parsed the usual way.

use std::sync::atomic::{AtomicU64, Ordering};

use rmcp::model::{ContentBlock, JsonRpcMessage, JsonRpcResponse, ServerResult};
use rmcp::service::{RoleClient, RxJsonRpcMessage};
use serde_json::Value;

/// Lines shorter than this are parsed the usual way.
const LONG_LINE: usize = 1 << 20;

/// A message of a line: the line's memory reused for its longest string (see the module).
pub(crate) fn parse(line: Vec<u8>) -> serde_json::Result<RxJsonRpcMessage<RoleClient>> {
    let Some((start, end)) = longest_string(&line).filter(|_| line.len() >= LONG_LINE) else {
        return serde_json::from_slice(&line);
    };
    if (end - start) * 2 < line.len() {
        return serde_json::from_slice(&line);
    }
    let mark = marker();
    let mut rest = Vec::with_capacity(line.len() - (end - start) + mark.len());
    rest.extend_from_slice(&line[..start]);
    rest.extend_from_slice(mark.as_bytes());
    rest.extend_from_slice(&line[end..]);
    let mut message: RxJsonRpcMessage<RoleClient> = match serde_json::from_slice(&rest) {
        Ok(message) => message,
        Err(_) => return serde_json::from_slice(&line), // the usual error
    };
    drop(rest);
    let Some(slot) = slot(&mut message, &mark) else {
        return serde_json::from_slice(&line);
    };
    match decoded_in_place(line, start, end) {
        Ok(text) => {
            *slot = text;
            Ok(message)
        }
        Err(line) => serde_json::from_slice(&line), // not valid JSON text: the usual error
    }
}

/// A text no server sends: what stands for the long string while the rest is parsed.
fn marker() -> String {
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let nonce = COUNT.fetch_add(1, Ordering::Relaxed) ^ (std::process::id() as u64) << 32;
    format!("toolhost large string {nonce:x} {:p}", &COUNT)
}

/// The bytes between the quotes of the line's longest string (its escapes as sent).
fn longest_string(line: &[u8]) -> Option<(usize, usize)> {
    let mut longest: Option<(usize, usize)> = None;
    let mut at = 0;
    while let Some(open) = memchr::memchr(b'"', &line[at..]).map(|i| at + i) {
        let start = open + 1;
        let mut i = start;
        let end = loop {
            let quote_or_escape = memchr::memchr2(b'"', b'\\', &line[i..])?;
            i += quote_or_escape;
            match line[i] {
                b'\\' => i += 2,
                _ => break i,
            }
        };
        if longest.is_none_or(|(s, e)| e - s < end - start) {
            longest = Some((start, end));
        }
        at = end + 1;
    }
    longest
}

/// Where `mark` landed in a tool result, if it did there: a text block's text or a string of
/// the structured content.
fn slot<'a>(message: &'a mut RxJsonRpcMessage<RoleClient>, mark: &str) -> Option<&'a mut String> {
    let JsonRpcMessage::Response(JsonRpcResponse {
        result: ServerResult::CallToolResult(result),
        ..
    }) = message
    else {
        return None;
    };
    let mut texts = result.content.iter_mut().filter_map(|block| match block {
        ContentBlock::Text(text) => Some(&mut text.text),
        _ => None,
    });
    if let Some(text) = texts.find(|text| *text == mark) {
        return Some(text);
    }
    result
        .structured_content
        .as_mut()
        .and_then(|v| in_value(v, mark))
}

fn in_value<'a>(value: &'a mut Value, mark: &str) -> Option<&'a mut String> {
    match value {
        Value::String(text) if text == mark => Some(text),
        Value::Array(items) => items.iter_mut().find_map(|v| in_value(v, mark)),
        Value::Object(members) => members.values_mut().find_map(|v| in_value(v, mark)),
        _ => None,
    }
}

/// The JSON string whose escaped bytes are `line[start..end]`, decoded into the line's own
/// buffer (a decoded string is never longer than its escaped form); the line back, as it
/// was, if it is not a valid JSON string.
fn decoded_in_place(mut line: Vec<u8>, start: usize, end: usize) -> Result<String, Vec<u8>> {
    // Checked first, so that the line is still whole when it is not valid.
    if !valid(&line[start..end]) {
        return Err(line);
    }
    let (mut read, mut write) = (start, 0);
    while read < end {
        let byte = line[read];
        if byte != b'\\' {
            line[write] = byte;
            (read, write) = (read + 1, write + 1);
            continue;
        }
        let decoded = match line[read + 1] {
            b'u' => {
                let (c, used) = unicode_escape(&line[read..end]).unwrap_or(('\u{fffd}', 6));
                read += used;
                let mut utf8 = [0; 4];
                let utf8 = c.encode_utf8(&mut utf8).as_bytes();
                line[write..write + utf8.len()].copy_from_slice(utf8);
                write += utf8.len();
                continue;
            }
            b'b' => 0x08,
            b'f' => 0x0c,
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            other => other, // `"`, `\`, `/` (checked above)
        };
        line[write] = decoded;
        (read, write) = (read + 2, write + 1);
    }
    line.truncate(write);
    line.shrink_to_fit();
    String::from_utf8(line).map_err(|e| e.into_bytes())
}

/// Whether `escaped` is the inside of a JSON string: no raw control character, every escape
/// one of JSON's, every `\u` surrogate in a pair, and UTF-8.
fn valid(escaped: &[u8]) -> bool {
    if std::str::from_utf8(escaped).is_err() {
        return false;
    }
    let mut i = 0;
    while i < escaped.len() {
        match escaped[i] {
            0..=0x1f => return false,
            b'\\' => match escaped.get(i + 1) {
                Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => i += 2,
                Some(b'u') => match unicode_escape(&escaped[i..]) {
                    Some((_, used)) => i += used,
                    None => return false,
                },
                _ => return false,
            },
            _ => i += 1,
        }
    }
    true
}

/// The character of the `\uXXXX` escape (or surrogate pair of two) `at` starts with, and how
/// many bytes it took.
fn unicode_escape(at: &[u8]) -> Option<(char, usize)> {
    let unit = |at: &[u8]| -> Option<u32> {
        let hex = at.get(2..6).filter(|_| at.starts_with(b"\\u"))?;
        u32::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()
    };
    let first = unit(at)?;
    match first {
        0xD800..=0xDBFF => {
            let second = unit(at.get(6..)?).filter(|s| (0xDC00..=0xDFFF).contains(s))?;
            let c = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00);
            Some((char::from_u32(c)?, 12))
        }
        0xDC00..=0xDFFF => None,
        c => Some((char::from_u32(c)?, 6)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn line(result: Value) -> Vec<u8> {
        serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 7, "result": result})).unwrap()
    }

    /// What the usual parse gives, serialized, for comparing.
    fn usual(line: &[u8]) -> Value {
        let message: RxJsonRpcMessage<RoleClient> = serde_json::from_slice(line).unwrap();
        serde_json::to_value(message).unwrap()
    }

    #[test]
    fn a_long_text_with_every_escape_reads_as_the_usual_parse_does() {
        let text = "line\n\"quoted\" \\ tab\t é 😀 \u{1} end ".repeat(60_000);
        for result in [
            json!({"content": [{"type": "text", "text": text}]}),
            json!({"content": [{"type": "text", "text": "short"}], "structuredContent": {"a": [1, {"b": text}]}}),
        ] {
            let line = line(result);
            assert!(line.len() > LONG_LINE);
            let message = parse(line.clone()).unwrap();
            assert_eq!(serde_json::to_value(message).unwrap(), usual(&line));
        }
    }

    #[test]
    fn a_long_string_elsewhere_or_broken_is_left_to_the_usual_parse() {
        let long = "x".repeat(LONG_LINE);
        // In a result that is not a tool's: parsed the usual way, the same.
        let other = line(json!({"tools": [], "nextCursor": long}));
        assert_eq!(
            serde_json::to_value(parse(other.clone()).unwrap()).unwrap(),
            usual(&other)
        );
        // A lone surrogate, a raw control character, a bad escape: the usual error.
        for bad in ["\\ud800", "\u{1}", "\\x"] {
            let text = format!("{long}{bad}");
            let raw = format!(
                r#"{{"jsonrpc":"2.0","id":1,"result":{{"content":[{{"type":"text","text":"{text}"}}]}}}}"#
            );
            let raw = raw.replace('\u{1}', "\u{1}");
            assert!(parse(raw.clone().into_bytes()).is_err(), "{bad}");
            assert!(
                serde_json::from_slice::<RxJsonRpcMessage<RoleClient>>(raw.as_bytes()).is_err()
            );
        }
    }
}
