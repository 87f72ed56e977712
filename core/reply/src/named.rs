//! Calls written as an XML element named after a known tool, each argument a child element, as
//! Cline's and Roo Code's models write them:
//! `<read_file><path>src/app.ts</path></read_file>`.
//!
//! Only the names of tools the host has are looked for, so XML in a reply that names none of
//! them is never a call. The element's body must be child elements alone (white space between
//! them): `<read_file>` inside a sentence is prose. A child's text is its value, XML entities
//! (`&lt; &gt; &amp; &quot; &apos;` and numeric) decoded, CDATA sections taken as written,
//! without one line break at each end; a value that starts with `{` or `[` and reads whole as
//! JSON is that JSON. The element's attributes (`key="value"`) are arguments too, and an
//! element that closes itself (`<list_files path="src"/>`) has no others. An element with no
//! closing tag runs to the end of the reply; a child with no closing tag, or an argument given
//! twice, makes the call unreadable.

use serde_json::{Map, Value};

use super::lenient;
use super::shapes::Reading;
use super::ToolRequest;

/// The first call in `text` of one of `tools` written as an element, or nothing.
pub(super) fn read(text: &str, tools: &[&str]) -> Reading {
    let mut at = 0;
    while let Some(found) = text[at..].find('<') {
        let start = at + found;
        at = start + 1;
        let rest = &text[start + 1..];
        let Some(tool) = tools.iter().filter(|t| !t.is_empty()).find(|t| {
            rest.starts_with(**t) && rest[t.len()..].starts_with(['>', '/', ' ', '\n', '\t'])
        }) else {
            continue;
        };
        let Some((attributes, self_closing, body_start)) = head(&rest[tool.len()..]) else {
            continue;
        };
        let mut args = attributes;
        if !self_closing {
            let body = &rest[tool.len() + body_start..];
            let close = format!("</{tool}>");
            let body = find_close(body, &close).map_or(body, |end| &body[..end]);
            match children(body) {
                Some(Ok(children)) => {
                    for (key, value) in children {
                        if args.insert(key.clone(), value).is_some() {
                            return Reading::Unreadable(format!(
                                "a call of tool `{tool}` written as XML with `{key}` given twice"
                            ));
                        }
                    }
                }
                Some(Err(seen)) => {
                    return Reading::Unreadable(format!(
                        "a call of tool `{tool}` written as XML whose argument could not be read: {seen}"
                    ));
                }
                None => continue,
            }
        }
        return Reading::Request(ToolRequest::call(*tool, Value::Object(args)));
    }
    Reading::Nothing
}

/// A tag's attributes (`key="value"`, entities decoded), whether it closes itself (`/>`), and
/// the offset after it; `None` if it is not a tag of that form.
fn head(tag: &str) -> Option<(Map<String, Value>, bool, usize)> {
    let end = tag.bytes().take(1024).position(|b| b == b'>')?;
    let inner = &tag[..end];
    let (inner, self_closing) = match inner.trim_end().strip_suffix('/') {
        Some(inner) => (inner, true),
        None => (inner, false),
    };
    let mut attributes = Map::new();
    let mut rest = inner.trim_start();
    while !rest.is_empty() {
        let eq = rest.find('=')?;
        let key = rest[..eq].trim();
        if key.is_empty()
            || !key
                .chars()
                .all(|c| c.is_alphanumeric() || "_-.:".contains(c))
        {
            return None;
        }
        let after = rest[eq + 1..].trim_start();
        let quote = after.chars().next().filter(|c| *c == '"' || *c == '\'')?;
        let close = after[1..].find(quote)?;
        let value = Value::String(decode_entities(&after[1..=close]));
        if attributes.insert(key.to_owned(), value).is_some() {
            return None;
        }
        rest = after[close + 2..].trim_start();
    }
    Some((attributes, self_closing, end + 1))
}

/// Where `close` is in `text`, outside CDATA sections.
fn find_close(text: &str, close: &str) -> Option<usize> {
    let (mut at, mut next_close) = (0, text.find(close)?);
    loop {
        match text[at..next_close].find(CDATA.0) {
            Some(i) => {
                at = at + i + text[at + i..].find(CDATA.1)? + CDATA.1.len();
                if at > next_close {
                    next_close = at + text[at..].find(close)?;
                }
            }
            None => return Some(next_close),
        }
    }
}

/// The opening and closing of a CDATA section, whose text is taken as written.
const CDATA: (&str, &str) = ("<![CDATA[", "]]>");

/// The child elements of a body as arguments; `None` if the body holds text outside elements
/// (prose, not a call); an error for a child that is never closed.
pub(super) fn children(body: &str) -> Option<Result<Map<String, Value>, String>> {
    let mut args = Map::new();
    let mut rest = body.trim_start();
    while !rest.is_empty() {
        let after_open = rest.strip_prefix('<')?;
        let name_len = after_open.find('>')?;
        let name = &after_open[..name_len];
        let valid = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_alphanumeric() || "_-.:".contains(c));
        if !valid {
            return None;
        }
        let inner = &after_open[name_len + 1..];
        let close = format!("</{name}>");
        let Some(end) = find_close(inner, &close) else {
            return Some(Err(format!("`<{name}>` has no `{close}`")));
        };
        if args.insert(name.to_owned(), value(&inner[..end])).is_some() {
            return Some(Err(format!("`<{name}>` given twice")));
        }
        rest = inner[end + close.len()..].trim_start();
    }
    Some(Ok(args))
}

/// A child's value: JSON if it reads whole as an object or array, else its decoded text.
fn value(raw: &str) -> Value {
    let raw = raw.strip_prefix('\n').unwrap_or(raw);
    let raw = raw.strip_suffix('\n').unwrap_or(raw);
    let text = without_cdata(raw);
    let trimmed = text.trim();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        if let Some(value) = lenient::read_whole(trimmed) {
            return value;
        }
    }
    Value::String(text)
}

/// A value's text: CDATA sections as written, XML's entities decoded outside them.
fn without_cdata(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut rest = raw;
    while let Some(at) = rest.find(CDATA.0) {
        let inner = &rest[at + CDATA.0.len()..];
        let Some(end) = inner.find(CDATA.1) else {
            break;
        };
        out.push_str(&decode_entities(&rest[..at]));
        out.push_str(&inner[..end]);
        rest = &inner[end + CDATA.1.len()..];
    }
    out.push_str(&decode_entities(rest));
    out
}

/// `text` with XML's entities decoded; an `&` that starts none stays as written.
pub(super) fn decode_entities(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        let entity = rest[1..]
            .find(';')
            .filter(|&end| end <= 10)
            .map(|end| &rest[1..=end]);
        let decoded = entity.and_then(|e| match e {
            "lt" => Some('<'),
            "gt" => Some('>'),
            "amp" => Some('&'),
            "quot" => Some('"'),
            "apos" => Some('\''),
            _ => {
                let number = e.strip_prefix('#')?;
                let code = match number.strip_prefix(['x', 'X']) {
                    Some(hex) => u32::from_str_radix(hex, 16).ok()?,
                    None => number.parse().ok()?,
                };
                char::from_u32(code)
            }
        });
        match (decoded, entity) {
            (Some(c), Some(e)) => {
                out.push(c);
                rest = &rest[e.len() + 2..];
            }
            _ => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}
