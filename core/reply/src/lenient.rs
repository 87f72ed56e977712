//! A tolerant JSON reader: one value from a given position, without recursion.
//!
//! Hand-written rather than a JSON-repair crate: `llm_json` and `jsonrepair` (ports of Python's
//! `json_repair`) are recursive descent parsers with no depth bound, and they complete missing
//! values, which would turn unreadable arguments into a call; `json5` drops the backslash of an
//! invalid escape and its `Value` conversion recurses without limit. This reader keeps an
//! explicit stack (refusing more than [`MAX_REPLY_DEPTH`] levels, so the `Value` it builds is safe to
//! drop and print), reads strict JSON exactly as serde_json does, and accepts besides:
//! comments, trailing commas, single quotes, unquoted keys, `True`/`False`/`None`, JSON5
//! numbers, raw control characters in strings, invalid escapes (kept with their backslash),
//! unescaped inner quotes ([`Quotes::Lenient`], see `strings.rs`) and, with `at_end`, objects
//! left open at the end of the text or where, after a complete member, a line starts with a
//! word (text after an object that was never closed).

use serde_json::{Map, Number, Value};

use super::MAX_REPLY_DEPTH;

/// How a quote inside a string is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Quotes {
    /// Every unescaped quote ends its string, as in JSON.
    Strict,
    /// A quote ends its string only where the text after it goes on with the object.
    Lenient,
}

/// Why a value could not be read, and what had been read of the outermost object.
#[derive(Debug)]
pub(super) struct Failure {
    /// Byte offset where reading stopped.
    pub at: usize,
    /// What was wrong there.
    pub reason: &'static str,
    /// The outermost object's members read completely before the failure.
    pub partial: Map<String, Value>,
    /// The outermost object's key whose value was being read when it failed.
    pub pending: Option<String>,
}

enum Frame {
    Object(Map<String, Value>, Option<String>),
    Array(Vec<Value>),
}

pub(super) struct Parser<'a> {
    pub(super) text: &'a str,
    pub(super) bytes: &'a [u8],
    pub(super) pos: usize,
    pub(super) quotes: Quotes,
    at_end: bool,
    stack: Vec<Frame>,
}

/// Reads one value starting at `start` (a `{` or `[`). Returns it and the offset after it.
/// With `at_end`, containers still open at the end of the text are closed.
pub(super) fn read_value(
    text: &str,
    start: usize,
    quotes: Quotes,
    at_end: bool,
) -> Result<(Value, usize), Failure> {
    let mut parser = Parser {
        text,
        bytes: text.as_bytes(),
        pos: start,
        quotes,
        at_end,
        stack: Vec::new(),
    };
    match parser.run() {
        Ok(value) => Ok((value, parser.pos)),
        Err(reason) => Err(parser.failure(reason)),
    }
}

/// Reads a whole text as one value, leniently (quotes strict first), nothing but space around.
pub(super) fn read_whole(text: &str) -> Option<Value> {
    let start = text.len() - text.trim_start().len();
    [Quotes::Strict, Quotes::Lenient].into_iter().find_map(|q| {
        let (value, end) = read_value(text, start, q, false).ok()?;
        text[end..].trim().is_empty().then_some(value)
    })
}

impl Parser<'_> {
    fn run(&mut self) -> Result<Value, &'static str> {
        loop {
            let Some(mut value) = self.item()? else {
                continue;
            };
            loop {
                match self.stack.last_mut() {
                    None => return Ok(value),
                    Some(Frame::Array(items)) => items.push(value),
                    Some(Frame::Object(map, key)) => {
                        map.insert(key.take().unwrap_or_default(), value);
                    }
                }
                self.skip_space();
                match self.bytes.get(self.pos) {
                    Some(b',') => {
                        self.pos += 1;
                        break;
                    }
                    Some(b'}') if matches!(self.stack.last(), Some(Frame::Object(..))) => {}
                    Some(b']') if matches!(self.stack.last(), Some(Frame::Array(_))) => {}
                    None if self.at_end => return Ok(self.close_all()),
                    None => return Err("the text ends inside an object"),
                    Some(b)
                        if self.at_end && b.is_ascii_alphabetic() && self.after_line_break() =>
                    {
                        return Ok(self.close_all());
                    }
                    Some(_) => return Err("expected `,` or the end of the object"),
                }
                self.pos += 1;
                value = self.pop();
            }
        }
    }

    /// The next item: a complete value, or `None` after opening a container or reading a key.
    fn item(&mut self) -> Result<Option<Value>, &'static str> {
        self.skip_space();
        let byte = self.bytes.get(self.pos).copied();
        match (self.stack.last(), byte) {
            (Some(Frame::Object(_, None)), Some(b'}')) | (Some(Frame::Array(_)), Some(b']')) => {
                self.pos += 1;
                Ok(Some(self.pop()))
            }
            (Some(Frame::Object(_, None)) | Some(Frame::Array(_)), None) if self.at_end => {
                Ok(Some(self.close_all()))
            }
            (Some(Frame::Object(_, None)), _) => {
                let key = self.key()?;
                if let Some(Frame::Object(_, pending)) = self.stack.last_mut() {
                    *pending = Some(key);
                }
                Ok(None)
            }
            (_, Some(b'{')) => self.open(Frame::Object(Map::new(), None)),
            (_, Some(b'[')) => self.open(Frame::Array(Vec::new())),
            (_, Some(quote @ (b'"' | b'\''))) => {
                self.string(quote, false).map(Value::String).map(Some)
            }
            (_, Some(_)) => self.scalar().map(Some),
            (_, None) => Err("the text ends where a value was expected"),
        }
    }

    fn open(&mut self, frame: Frame) -> Result<Option<Value>, &'static str> {
        if self.stack.len() >= MAX_REPLY_DEPTH {
            return Err("nested deeper than 128 levels");
        }
        self.pos += 1;
        self.stack.push(frame);
        Ok(None)
    }

    /// Whether a line break comes between the last non-blank character and the current one.
    fn after_line_break(&self) -> bool {
        let before = &self.bytes[..self.pos];
        let blank = before.iter().rev().take_while(|b| b.is_ascii_whitespace());
        blank.clone().any(|&b| b == b'\n')
    }

    /// Whether the innermost open container is an array.
    pub(super) fn in_array(&self) -> bool {
        matches!(self.stack.last(), Some(Frame::Array(_)))
    }

    fn pop(&mut self) -> Value {
        match self.stack.pop() {
            Some(Frame::Object(map, _)) => Value::Object(map),
            Some(Frame::Array(items)) => Value::Array(items),
            None => Value::Null,
        }
    }

    /// The end of the text closes every open container (an object never closed).
    fn close_all(&mut self) -> Value {
        let mut value = self.pop();
        while let Some(frame) = self.stack.last_mut() {
            match frame {
                Frame::Array(items) => items.push(value),
                Frame::Object(map, key) => {
                    map.insert(key.take().unwrap_or_default(), value);
                }
            }
            value = self.pop();
        }
        value
    }

    /// An object key (quoted or a bare identifier) and its colon.
    fn key(&mut self) -> Result<String, &'static str> {
        let key = match self.bytes.get(self.pos) {
            Some(&quote @ (b'"' | b'\'')) => self.string(quote, true)?,
            Some(_) => {
                let word = self.word();
                let ident = !word.is_empty()
                    && !word.starts_with(|c: char| c.is_ascii_digit())
                    && word
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'$');
                if !ident {
                    return Err("expected a key");
                }
                word.to_owned()
            }
            None => return Err("the text ends where a key was expected"),
        };
        self.skip_space();
        if self.bytes.get(self.pos) != Some(&b':') {
            return Err("expected `:` after a key");
        }
        self.pos += 1;
        Ok(key)
    }

    /// The run of characters that can make up a number or a bare word.
    fn word(&mut self) -> &str {
        let start = self.pos;
        while let Some(&b) = self.bytes.get(self.pos) {
            if !(b.is_ascii_alphanumeric() || matches!(b, b'_' | b'$' | b'.' | b'+' | b'-')) {
                break;
            }
            self.pos += 1;
        }
        &self.text[start..self.pos]
    }

    /// A number or a literal.
    fn scalar(&mut self) -> Result<Value, &'static str> {
        let word = self.word();
        match word {
            "true" | "True" => return Ok(Value::Bool(true)),
            "false" | "False" => return Ok(Value::Bool(false)),
            "null" | "None" => return Ok(Value::Null),
            "" => return Err("expected a value"),
            _ => {}
        }
        number(word).map(Value::Number).ok_or("expected a value")
    }

    /// Skips white space and comments.
    pub(super) fn skip_space(&mut self) {
        while let Some(&b) = self.bytes.get(self.pos) {
            match b {
                b' ' | b'\t' | b'\n' | b'\r' => self.pos += 1,
                b'/' if self.bytes.get(self.pos + 1) == Some(&b'/') => {
                    let rest = &self.bytes[self.pos..];
                    self.pos += rest.iter().position(|&c| c == b'\n').unwrap_or(rest.len());
                }
                b'/' if self.bytes.get(self.pos + 1) == Some(&b'*') => {
                    let rest = &self.text[self.pos + 2..];
                    self.pos = rest
                        .find("*/")
                        .map_or(self.text.len(), |i| self.pos + 2 + i + 2);
                }
                _ => return,
            }
        }
    }

    fn failure(mut self, reason: &'static str) -> Failure {
        let at = self.pos;
        let (partial, pending) = match self.stack.drain(..).next() {
            Some(Frame::Object(map, key)) => (map, key),
            _ => (Map::new(), None),
        };
        Failure {
            at,
            reason,
            partial,
            pending,
        }
    }
}

/// A JSON or JSON5 number (`+1`, `.5`, `5.`, `0x1F`); never NaN or infinite.
fn number(word: &str) -> Option<Number> {
    if let Ok(Value::Number(n)) = serde_json::from_str::<Value>(word) {
        return Some(n);
    }
    let (negative, digits) = match word.as_bytes().first()? {
        b'-' => (true, &word[1..]),
        b'+' => (false, &word[1..]),
        _ => (false, word),
    };
    if let Ok(Value::Number(n)) = serde_json::from_str::<Value>(digits) {
        if !negative {
            return Some(n);
        }
    }
    if let Some(hex) = digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        let n = i64::from_str_radix(hex, 16).ok()?;
        return Some(Number::from(if negative { -n } else { n }));
    }
    if !digits
        .bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'))
    {
        return None;
    }
    let n: f64 = digits.parse().ok()?;
    Number::from_f64(if negative { -n } else { n })
}
