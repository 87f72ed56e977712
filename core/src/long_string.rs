//! A long JSON string in a line of JSON, decoded in place: the line's own memory becomes the
//! string. A message of 15 MB that is mostly one string (a tool's answer, a call's argument),
//! parsed as it is, holds the line and the parsed string at once: twice the message. With
//! [`LongString`], the rest of the line is parsed with a marker standing for the string (a
//! small copy), and the string's escapes are decoded in the line's buffer, which becomes the
//! `String` put where the marker landed: the message costs its size once.
//!
//! Used by the MCP client for a server's long answer and by `serve-mcp` for a client's long
//! argument; each says where the string may land.

use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;

/// Lines shorter than this are parsed the usual way ([`LongString::find`] gives `None`).
pub const LONG_LINE: usize = 1 << 20;

/// A line's longest string, set apart from the rest of the line.
#[derive(Debug)]
pub struct LongString {
    /// Where the string's escaped bytes (between its quotes) start and end in the line.
    start: usize,
    end: usize,
    /// What stands for it in `rest`.
    mark: String,
    /// The line with `mark` in the string's place.
    rest: Vec<u8>,
}

impl LongString {
    /// The longest string of `line`, when the line is at least [`LONG_LINE`] bytes and the
    /// string is at least half of it.
    pub fn find(line: &[u8]) -> Option<Self> {
        if line.len() < LONG_LINE {
            return None;
        }
        let (start, end) = longest_string(line)?;
        if (end - start) * 2 < line.len() {
            return None;
        }
        let mark = marker();
        let mut rest = Vec::with_capacity(line.len() - (end - start) + mark.len());
        rest.extend_from_slice(&line[..start]);
        rest.extend_from_slice(mark.as_bytes());
        rest.extend_from_slice(&line[end..]);
        Some(Self {
            start,
            end,
            mark,
            rest,
        })
    }

    /// The line with a marker in the string's place, to parse: small.
    pub fn rest(&self) -> &[u8] {
        &self.rest
    }

    /// What stands for the string in [`rest`](Self::rest): a text no peer sends (it holds a
    /// per-process counter and an address), with nothing to escape.
    pub fn mark(&self) -> &str {
        &self.mark
    }

    /// The string, decoded into the buffer of `line` (the line [`find`](Self::find) was given):
    /// no copy of it is made. The line back, unchanged, when the string is not valid JSON text
    /// (a raw control character, a bad escape, a lone surrogate, not UTF-8): parse it the usual
    /// way for the usual error.
    pub fn decode(self, line: Vec<u8>) -> Result<String, Vec<u8>> {
        drop(self.rest);
        decoded_in_place(line, self.start, self.end)
    }
}

/// The string of `value` (at any depth) that is `mark`, if one is.
pub fn marked<'a>(value: &'a mut Value, mark: &str) -> Option<&'a mut String> {
    match value {
        Value::String(text) if text == mark => Some(text),
        Value::Array(items) => items.iter_mut().find_map(|v| marked(v, mark)),
        Value::Object(members) => members.values_mut().find_map(|v| marked(v, mark)),
        _ => None,
    }
}

/// A text no peer sends: what stands for the long string while the rest is parsed.
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

    #[test]
    fn a_long_string_with_every_escape_decodes_as_serde_json_does() {
        let text = "line\n\"quoted\" \\ tab\t é 😀 \u{1} end ".repeat(60_000);
        let line =
            serde_json::to_vec(&serde_json::json!({"a": [1, {"b": text}], "c": "d"})).unwrap();
        let long = LongString::find(&line).expect("most of the line");
        let mut rest: Value = serde_json::from_slice(long.rest()).unwrap();
        let mark = long.mark().to_owned();
        let slot = marked(&mut rest, &mark).expect("the marker is in the rest");
        *slot = long.decode(line.clone()).unwrap();
        assert_eq!(rest, serde_json::from_slice::<Value>(&line).unwrap());
    }

    #[test]
    fn short_lines_and_small_strings_are_left_alone() {
        assert!(LongString::find(br#"{"a": "b"}"#).is_none());
        let many = serde_json::to_vec(&vec!["x".repeat(1000); 2000]).unwrap();
        assert!(many.len() > LONG_LINE && LongString::find(&many).is_none());
    }

    #[test]
    fn an_invalid_string_gives_the_line_back_unchanged() {
        let long = "x".repeat(LONG_LINE);
        for bad in ["\\ud800", "\u{1}", "\\x"] {
            let line = format!(r#"{{"a":"{long}{bad}"}}"#).into_bytes();
            let found = LongString::find(&line).expect("long");
            assert_eq!(found.decode(line.clone()).unwrap_err(), line, "{bad}");
        }
    }
}
