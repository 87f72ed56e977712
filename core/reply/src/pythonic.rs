//! Calls written as Python, as LFM2 and Llama 3.2 ("pythonic" tool calls) write them:
//! `[name(key="value", n=3)]`, or `name(key="value")` alone.
//!
//! A reply is read this way only when the call is all there is: the whole reply (a code fence
//! around it aside), or what stands between `<|tool_call_start|>` and `<|tool_call_end|>`, or
//! after `<|python_tag|>`. A list of calls gives its first. Arguments are by keyword; a value
//! is a Python literal: a string in single or double quotes (an unknown escape keeps its
//! backslash, as in Python), a number, `True`/`False`/`None`, or a list or dict (read as
//! lenient JSON). A positional argument or a value that cannot be read makes the call
//! unreadable, never a call without it.

use serde_json::{Map, Value};

use super::lenient::{self, Quotes};
use super::shapes::Reading;
use super::ToolRequest;

/// Markers around a call, and the marker that ends it (if any).
const MARKERS: [(&str, &str); 2] = [
    ("<|tool_call_start|>", "<|tool_call_end|>"),
    ("<|python_tag|>", "<|eom_id|>"),
];

/// The call in `text`, if the text (or its marked part) is one; `None` if it is not Python.
pub(super) fn read(text: &str) -> Option<Reading> {
    let segment = segment(text);
    let (inner, listed) = match segment.strip_prefix('[') {
        Some(rest) => (rest.strip_suffix(']')?.trim_start(), true),
        None if segment.ends_with(')') => (segment, false),
        None => return None,
    };
    let name_end = inner
        .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.'))
        .filter(|&i| i > 0 && inner[i..].starts_with('('))?;
    if inner.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    let tool = &inner[..name_end];
    let mut reader = Reader {
        text: inner,
        pos: name_end + 1,
    };
    let reading = match reader.arguments() {
        Ok(args) if listed || reader.pos == inner.len() => {
            Reading::Request(ToolRequest::call(tool.to_owned(), Value::Object(args)))
        }
        Ok(_) => return None,
        Err(seen) => Reading::Unreadable(format!(
            "a call of tool `{tool}` written as Python whose arguments could not be read: {seen}"
        )),
    };
    Some(reading)
}

/// The part of the text that may hold the call.
fn segment(text: &str) -> &str {
    for (open, close) in MARKERS {
        if let Some(at) = text.find(open) {
            let rest = &text[at + open.len()..];
            return rest.find(close).map_or(rest, |end| &rest[..end]).trim();
        }
    }
    let text = text.trim();
    let fenced = text
        .strip_prefix("```python")
        .or_else(|| text.strip_prefix("```"))
        .and_then(|rest| rest.strip_suffix("```"));
    fenced.map_or(text, str::trim)
}

struct Reader<'a> {
    text: &'a str,
    pos: usize,
}

impl Reader<'_> {
    /// The keyword arguments up to and including the closing parenthesis.
    fn arguments(&mut self) -> Result<Map<String, Value>, String> {
        let mut args = Map::new();
        loop {
            self.skip_space();
            if self.eat(')') {
                return Ok(args);
            }
            let key = self.key()?;
            self.skip_space();
            let value = self.value().map_err(|e| format!("argument `{key}`: {e}"))?;
            args.insert(key, value);
            self.skip_space();
            if !self.eat(',') && !self.rest().starts_with(')') {
                return Err(format!("expected `,` or `)` at `{}`", self.quote()));
            }
        }
    }

    fn key(&mut self) -> Result<String, String> {
        let rest = self.rest();
        let end = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        let after = rest[end..].trim_start();
        if end == 0 || !after.starts_with('=') || after.starts_with("==") {
            return Err(format!("a positional argument at `{}`", self.quote()));
        }
        let key = rest[..end].to_owned();
        self.pos += rest.len() - after.len() + 1;
        Ok(key)
    }

    fn value(&mut self) -> Result<Value, String> {
        let rest = self.rest();
        match rest.chars().next() {
            Some(quote @ ('"' | '\'')) => self.string(quote).map(Value::String),
            Some('[' | '{') => {
                let start = self.pos;
                for quotes in [Quotes::Strict, Quotes::Lenient] {
                    if let Ok((value, end)) = lenient::read_value(self.text, start, quotes, false) {
                        self.pos = end;
                        return Ok(value);
                    }
                }
                Err(format!(
                    "a list or dict that could not be read: `{}`",
                    self.quote()
                ))
            }
            _ => {
                let end = rest
                    .find(|c: char| !(c.is_alphanumeric() || "+-._".contains(c)))
                    .unwrap_or(rest.len());
                let value = literal(&rest[..end])
                    .ok_or_else(|| format!("a value that could not be read: `{}`", self.quote()))?;
                self.pos += end;
                Ok(value)
            }
        }
    }

    /// A Python string; `\n`, `\t`, `\\` and the quotes are escapes, others keep their backslash.
    fn string(&mut self, quote: char) -> Result<String, String> {
        let mut out = String::new();
        let mut chars = self.rest().char_indices().skip(1);
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some((_, 'n')) => out.push('\n'),
                    Some((_, 't')) => out.push('\t'),
                    Some((_, 'r')) => out.push('\r'),
                    Some((_, e @ ('\\' | '"' | '\''))) => out.push(e),
                    Some((_, other)) => {
                        out.push('\\');
                        out.push(other);
                    }
                    None => break,
                },
                _ if c == quote => {
                    self.pos += i + 1;
                    return Ok(out);
                }
                _ => out.push(c),
            }
        }
        Err("a string that is never closed".to_owned())
    }

    fn rest(&self) -> &str {
        &self.text[self.pos..]
    }

    fn eat(&mut self, c: char) -> bool {
        let found = self.rest().starts_with(c);
        if found {
            self.pos += 1;
        }
        found
    }

    fn skip_space(&mut self) {
        let rest = self.rest();
        self.pos += rest.len() - rest.trim_start().len();
    }

    /// A short quotation of the text from the current position.
    fn quote(&self) -> String {
        self.rest().chars().take(40).collect()
    }
}

/// A number or `True`/`False`/`None` (JSON's spellings too).
fn literal(word: &str) -> Option<Value> {
    match word {
        "True" | "true" => Some(Value::Bool(true)),
        "False" | "false" => Some(Value::Bool(false)),
        "None" | "null" => Some(Value::Null),
        _ => serde_json::from_str::<serde_json::Number>(word.strip_prefix('+').unwrap_or(word))
            .ok()
            .map(Value::Number),
    }
}
