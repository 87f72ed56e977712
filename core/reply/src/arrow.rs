//! Calls written with `=>` maps, as MiniMax's models write them in text:
//! `[TOOL_CALL] {tool => "name", args => { --key "value" --n 3 }} [/TOOL_CALL]`.
//!
//! The call is an object that starts with `tool =>` and the tool's name (quoted or a bare
//! word), then `args =>` and its arguments in braces (or nothing: no arguments). The arguments
//! are a JSON object (`{"q": "x"}`, read leniently), or a list of `--key value` (a `:` or `=`
//! after the key allowed), or of `key => value`; a value is a quoted string (JSON's escapes),
//! a number, `true`/`false`/`null`, or a bare word (a string); a `--flag` with no value is
//! `true`. Commas between them are optional. A key given twice, a value that cannot be read, or
//! anything else in the braces makes the call unreadable.

use serde_json::{Map, Value};

use super::lenient::{self, Quotes};
use super::shapes::Reading;
use super::ToolRequest;

/// Whether an arrow call starts at `at` (a `{`): `{`, white space, `tool`, white space, `=>`.
pub(super) fn starts_call(text: &str, at: usize) -> bool {
    let mut reader = Reader { text, pos: at + 1 };
    reader.skip_space();
    reader.eat_word("tool") && {
        reader.skip_space();
        reader.eat("=>")
    }
}

/// Reads the call at `at` (where [`starts_call`] holds), and the offset after it.
pub(super) fn read_call(text: &str, at: usize) -> (Reading, usize) {
    let mut reader = Reader { text, pos: at + 1 };
    match reader.call() {
        Ok(request) => (Reading::Request(request), reader.pos),
        Err(seen) => (
            Reading::Unreadable(format!(
                "a call written with `tool =>` that could not be read: {seen}"
            )),
            reader.pos.max(at + 1),
        ),
    }
}

struct Reader<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Reader<'a> {
    fn call(&mut self) -> Result<ToolRequest, String> {
        self.skip_space();
        self.eat_word("tool");
        self.skip_space();
        self.eat("=>");
        self.skip_space();
        let tool = match self.value()? {
            Value::String(tool) if valid_name(&tool) => tool,
            other => return Err(format!("a tool name that is not a name: `{other}`")),
        };
        self.separator();
        let args = if self.eat_word("args") {
            self.skip_space();
            if !self.eat("=>") {
                return Err(format!("`args` without `=>` at `{}`", self.quote()));
            }
            self.skip_space();
            if !self.rest().starts_with('{') {
                return Err(format!(
                    "arguments that are not in braces: `{}`",
                    self.quote()
                ));
            }
            self.arguments()?
        } else {
            Map::new()
        };
        self.separator();
        if !self.eat("}") {
            return Err(format!("expected `}}` at `{}`", self.quote()));
        }
        Ok(ToolRequest::call(tool, Value::Object(args)))
    }

    /// The arguments in braces, from the `{`.
    fn arguments(&mut self) -> Result<Map<String, Value>, String> {
        let start = self.pos;
        self.pos += 1;
        self.skip_space();
        let json = self.rest().starts_with(['"', '\'']) && {
            // A JSON object: its first key is quoted and followed by `:`.
            let mut probe = Reader {
                text: self.text,
                pos: self.pos,
            };
            probe.quoted().is_ok() && {
                probe.skip_space();
                probe.rest().starts_with(':')
            }
        };
        if json {
            for quotes in [Quotes::Strict, Quotes::Lenient] {
                if let Ok((Value::Object(args), end)) =
                    lenient::read_value(self.text, start, quotes, false)
                {
                    self.pos = end;
                    return Ok(args);
                }
            }
            return Err(format!(
                "arguments that could not be read as JSON: `{}`",
                self.quote()
            ));
        }
        let mut args = Map::new();
        loop {
            self.separator();
            if self.eat("}") {
                return Ok(args);
            }
            let key = self.key()?;
            self.skip_inline_space();
            let value = if self.rest().starts_with("--") || self.rest().starts_with(['}', '\n']) {
                Value::Bool(true)
            } else {
                self.value().map_err(|e| format!("argument `{key}`: {e}"))?
            };
            if args.insert(key.clone(), value).is_some() {
                return Err(format!("argument `{key}` given twice"));
            }
        }
    }

    /// `--key` (then `:` or `=`, or nothing) or `key =>`.
    fn key(&mut self) -> Result<String, String> {
        let dashed = self.eat("--");
        let rest = self.rest();
        let end = rest
            .find(|c: char| !(c.is_alphanumeric() || "_-.".contains(c)))
            .unwrap_or(rest.len());
        if end == 0 {
            return Err(format!("expected an argument's name at `{}`", self.quote()));
        }
        let key = rest[..end].to_owned();
        self.pos += end;
        self.skip_inline_space();
        if dashed {
            let _ = self.eat(":") || self.eat("=");
        } else {
            self.skip_space();
            if !self.eat("=>") {
                return Err(format!("expected `=>` after `{key}`"));
            }
        }
        self.skip_inline_space();
        Ok(key)
    }

    /// A quoted string, or a bare word (a number, a boolean, `null`, or else a string).
    fn value(&mut self) -> Result<Value, String> {
        if self.rest().starts_with(['"', '\'']) {
            return self.quoted().map(Value::String);
        }
        if self.rest().starts_with(['{', '[']) {
            for quotes in [Quotes::Strict, Quotes::Lenient] {
                if let Ok((value, end)) = lenient::read_value(self.text, self.pos, quotes, false) {
                    self.pos = end;
                    return Ok(value);
                }
            }
            return Err(format!(
                "a value that could not be read: `{}`",
                self.quote()
            ));
        }
        let rest = self.rest();
        let end = rest
            .find(|c: char| c.is_whitespace() || c == ',' || c == '}')
            .unwrap_or(rest.len());
        if end == 0 {
            return Err(format!("expected a value at `{}`", self.quote()));
        }
        let word = &rest[..end];
        self.pos += end;
        Ok(serde_json::from_str::<Value>(word)
            .ok()
            .filter(|v| !v.is_object() && !v.is_array() && !v.is_string())
            .unwrap_or_else(|| Value::String(word.to_owned())))
    }

    /// A string in double or single quotes, JSON's escapes read (an unknown one kept as written).
    fn quoted(&mut self) -> Result<String, String> {
        let rest = self.rest();
        let quote = rest.chars().next().unwrap_or('"');
        let mut out = String::new();
        let mut chars = rest.char_indices().skip(1);
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some((_, 'n')) => out.push('\n'),
                    Some((_, 't')) => out.push('\t'),
                    Some((_, 'r')) => out.push('\r'),
                    Some((_, e @ ('\\' | '"' | '\'' | '/'))) => out.push(e),
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

    fn rest(&self) -> &'a str {
        &self.text[self.pos..]
    }

    fn eat(&mut self, token: &str) -> bool {
        let found = self.rest().starts_with(token);
        if found {
            self.pos += token.len();
        }
        found
    }

    /// `word` as a whole word (not the start of a longer one).
    fn eat_word(&mut self, word: &str) -> bool {
        let rest = self.rest();
        let whole = rest.starts_with(word)
            && !rest[word.len()..].starts_with(|c: char| c.is_alphanumeric() || c == '_');
        if whole {
            self.pos += word.len();
        }
        whole
    }

    fn skip_space(&mut self) {
        let rest = self.rest();
        self.pos += rest.len() - rest.trim_start().len();
    }

    fn skip_inline_space(&mut self) {
        let rest = self.rest();
        self.pos += rest.len() - rest.trim_start_matches([' ', '\t']).len();
    }

    /// White space and at most one comma.
    fn separator(&mut self) {
        self.skip_space();
        if self.eat(",") {
            self.skip_space();
        }
    }

    fn quote(&self) -> String {
        self.rest().chars().take(40).collect()
    }
}

/// A tool name: letters, digits, `_`, `-`, `.`, `:`.
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_alphanumeric() || "_-.:".contains(c))
}
