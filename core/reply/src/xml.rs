//! Tool calls written as XML: Anthropic's `<invoke name="x"><parameter name="p">v</parameter>
//! </invoke>` (and DeepSeek's DSML, the same with `｜DSML｜` in each tag), Qwen's `<function=x><parameter=p>v</parameter></function>` and GLM's
//! `<tool_call>x<arg_key>p</arg_key><arg_value>v</arg_value></tool_call>`.
//!
//! A parameter's value is its text, without one line break at each end. A value that starts
//! with `{` or `[` and reads whole as JSON is that JSON; anything else stays a string (`5` is
//! the string "5", as the model wrote it). A call with no closing tag runs to the end of the
//! reply; a parameter with no closing tag makes the call unreadable.

use serde_json::{Map, Value};

use super::lenient::{self, Quotes};
use super::shapes::{self, Reading};
use super::ToolRequest;

/// What marks DeepSeek's DSML markup (`<｜DSML｜invoke name="x">`,
/// `<｜DSML｜parameter name="p" string="true">v</｜DSML｜parameter>`).
pub(super) const DSML: &str = "DSML";

/// DSML as the XML it is: the marker taken out of each tag. The marker is `DSML` between bars,
/// full-width or ASCII, one or more on each side, with white space after it or not, as models
/// write it (`<｜DSML｜invoke`, `<｜｜DSML｜｜ invoke`, `</|DSML|parameter>`). One pass.
pub(super) fn without_dsml(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('<') {
        out.push_str(&rest[..=at]);
        rest = &rest[at + 1..];
        if let Some(slash) = rest.strip_prefix('/') {
            out.push('/');
            rest = slash;
        }
        if let Some(after) = dsml_marker(rest) {
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// The text after a DSML marker at the start of `text`, if one is there.
fn dsml_marker(text: &str) -> Option<&str> {
    let bars = |s: &str| s.trim_start_matches(['｜', '|']).len();
    let before = text.len() - bars(text);
    let rest = text[before..].strip_prefix("DSML")?;
    let after = rest.len() - bars(rest);
    (before > 0 && after > 0).then(|| rest[after..].trim_start_matches([' ', '\t']))
}

/// The two openings of a call, and the closing tag of each.
const FORMS: [(&str, &str); 2] = [("<invoke", "</invoke>"), ("<function=", "</function>")];

/// GLM's opening, closing, and the tags around a parameter's key and value.
const GLM: (&str, &str) = ("<tool_call>", "</tool_call>");
const GLM_KEY: (&str, &str) = ("<arg_key>", "</arg_key>");
const GLM_VALUE: (&str, &str) = ("<arg_value>", "</arg_value>");

/// A call written as `<function>` with its name in a `<name>` element, then parameters.
const NAMED_FUNCTION: (&str, &str) = ("<function>", "<name>");

/// Whether a call in XML starts at `at`.
pub(super) fn starts_call(text: &str, at: usize) -> bool {
    FORMS.iter().any(|(open, _)| text[at..].starts_with(open))
        || glm_name(text, at).is_some()
        || function_name(text, at).is_some()
}

/// The tool's name if `<function>` starts at `at` and a `<name>x</name>` element follows it
/// (DeepSeek's element-style calls), and the offset after that element.
fn function_name(text: &str, at: usize) -> Option<(&str, usize)> {
    let rest = text[at..].strip_prefix(NAMED_FUNCTION.0)?;
    let after = rest.trim_start();
    let inner = after.strip_prefix(NAMED_FUNCTION.1)?;
    let end = inner.bytes().take(128).position(|b| b == b'<')?;
    let name = inner[..end].trim();
    let closes = inner[end..].starts_with("</name>");
    let valid = !name.is_empty() && !name.contains(char::is_whitespace);
    let body_start = text.len() - inner[end..].len() + "</name>".len();
    (closes && valid).then_some((name, body_start))
}

/// The tool's name if a GLM call starts at `at`: `<tool_call>`, a name, then `<arg_key>` or
/// the closing tag.
fn glm_name(text: &str, at: usize) -> Option<(&str, usize)> {
    let rest = text[at..].strip_prefix(GLM.0)?;
    let name_len = rest.find(|c: char| !(c.is_alphanumeric() || "_-.:".contains(c)))?;
    let after = rest[name_len..].trim_start();
    let opens = after.starts_with(GLM_KEY.0) || after.starts_with(GLM.1);
    (name_len > 0 && opens).then(|| (&rest[..name_len], at + GLM.0.len() + name_len))
}

/// Reads the call that starts at `at` and the offset after it.
pub(super) fn read_call(text: &str, at: usize) -> (Reading, usize) {
    if let Some((tool, body_start)) = glm_name(text, at) {
        return read_glm(text, tool, body_start);
    }
    if let Some((tool, body_start)) = function_name(text, at) {
        let (body, end) = body_until(text, body_start, "</function>", "<function>");
        return (call_reading(tool, parameters(body)), end);
    }
    let Some(&(open, close)) = FORMS.iter().find(|(open, _)| text[at..].starts_with(open)) else {
        return (Reading::Nothing, at + 1);
    };
    let rest = &text[at + open.len()..];
    let Some(head_end) = tag_end(rest) else {
        return (Reading::Nothing, at + 1);
    };
    let Some(tool) = name(&rest[..head_end]) else {
        return (Reading::Nothing, at + 1);
    };
    let (body, end) = body_until(text, at + open.len() + head_end + 1, close, open);
    let cut = !text[..end].ends_with(close) && end < text.len();
    let parameters = parameters(body).and_then(|args| match args.is_empty() && cut {
        // A call with nothing in it before the next one opens: the next may be its
        // parameter written as a call, or the closing tag may be missing; not a call of
        // nothing.
        true => Err(format!(
            "the call is followed by another before it closes: `{}`",
            brief(&text[end..])
        )),
        false => Ok(args),
    });
    (call_reading(&tool, parameters), end)
}

/// A call's body from `start`: to its closing tag `close`, or to the next call's opening
/// `open` (a closing tag left out between two calls), or to the end of the reply. With the
/// offset after it.
fn body_until<'a>(text: &'a str, start: usize, close: &str, open: &str) -> (&'a str, usize) {
    let rest = &text[start..];
    match (rest.find(close), rest.find(open)) {
        (Some(c), Some(o)) if o < c => (&rest[..o], start + o),
        (Some(c), _) => (&rest[..c], start + c + close.len()),
        (None, Some(o)) => (&rest[..o], start + o),
        (None, None) => (rest, text.len()),
    }
}

/// A call of `tool` in XML, or what could not be read of its parameters.
fn call_reading(tool: &str, parameters: Result<Map<String, Value>, String>) -> Reading {
    match parameters {
        Ok(args) => Reading::Request(ToolRequest::call(tool, Value::Object(args))),
        Err(seen) => Reading::Unreadable(format!(
            "a call of tool `{tool}` in XML whose parameter could not be read: {seen}"
        )),
    }
}

/// A GLM call's parameters, from `body_start` to its closing tag (or the end of the reply).
fn read_glm(text: &str, tool: &str, body_start: usize) -> (Reading, usize) {
    let rest = &text[body_start..];
    let (body, end) = match rest.find(GLM.1) {
        Some(i) => (&rest[..i], body_start + i + GLM.1.len()),
        None => (rest, text.len()),
    };
    (call_reading(tool, glm_parameters(body)), end)
}

fn glm_parameters(body: &str) -> Result<Map<String, Value>, String> {
    let mut args = Map::new();
    let mut rest = body.trim_start();
    while !rest.is_empty() {
        let (key, after) = element(rest, GLM_KEY).ok_or_else(|| format!("`{}`", brief(rest)))?;
        let (value_text, after) = element(after.trim_start(), GLM_VALUE)
            .ok_or_else(|| format!("parameter `{key}` has no `<arg_value>…</arg_value>`"))?;
        args.insert(key.trim().to_owned(), value(value_text));
        rest = after.trim_start();
    }
    Ok(args)
}

/// The text of the element `tags` at the start of `text`, and the text after it.
fn element<'a>(text: &'a str, (open, close): (&str, &str)) -> Option<(&'a str, &'a str)> {
    let rest = text.strip_prefix(open)?;
    let end = rest.find(close)?;
    Some((&rest[..end], &rest[end + close.len()..]))
}

/// The end (`>`) of a tag's head, looked for in its first 256 bytes only.
fn tag_end(rest: &str) -> Option<usize> {
    rest.bytes().take(256).position(|b| b == b'>')
}

/// The name in `name="x"` (or `'x'`, among other attributes), or after `<function=`.
fn name(head: &str) -> Option<String> {
    let head = head.trim();
    let value = match head.find("name=") {
        Some(i) if i == 0 || head[..i].ends_with(char::is_whitespace) => &head[i + 5..],
        _ if !head.contains(['=', ' ']) => head,
        _ => return None,
    };
    let value = match value.chars().next()? {
        quote @ ('"' | '\'') => value[1..].split(quote).next()?,
        // Typographic quotes, as a model that was writing prose may put them.
        '“' => value['“'.len_utf8()..].split('”').next()?,
        _ => value.split_whitespace().next()?,
    };
    let value = value.trim();
    (!value.is_empty() && !value.contains(char::is_whitespace)).then(|| value.to_owned())
}

/// The parameters in a call's body.
fn parameters(body: &str) -> Result<Map<String, Value>, String> {
    if !body.contains("<parameter") {
        return json_body(body);
    }
    let mut args = Map::new();
    let mut rest = body;
    while let Some(start) = rest.find("<parameter") {
        rest = &rest[start + "<parameter".len()..];
        let Some(head_end) = tag_end(rest) else {
            return Err("a `<parameter` tag that is never closed".to_owned());
        };
        let head = rest[..head_end].trim_start_matches('=');
        let Some(key) = name(head) else {
            return Err(format!(
                "a parameter without a name: `<parameter{}>`",
                &rest[..head_end]
            ));
        };
        // DSML's `string="false"`: the value is JSON (a number, a boolean, ...), and one that
        // is not cannot be read.
        // `string="true"`: the value is text, even if it looks like JSON.
        let json = head.contains("string=\"false\"") || head.contains("string=“false”");
        let text = head.contains("string=\"true\"") || head.contains("string=“true”");
        rest = &rest[head_end + 1..];
        let Some(end) = rest.find("</parameter>") else {
            return Err(format!("parameter `{key}` has no `</parameter>`"));
        };
        let raw = &rest[..end];
        let read = match json {
            true => serde_json::from_str(raw.trim())
                .ok()
                .or_else(|| {
                    lenient::read_whole(raw.trim()).filter(|_| raw.trim().starts_with(['{', '[']))
                })
                .ok_or_else(|| {
                    format!(
                        "parameter `{key}` is marked `string=\"false\"` but is not JSON: `{}`",
                        brief(raw.trim())
                    )
                })?,
            false if text => Value::String(without_line_breaks(raw).to_owned()),
            false => value(raw),
        };
        args.insert(key, read);
        rest = &rest[end + "</parameter>".len()..];
    }
    Ok(args)
}

/// A body without parameters: nothing (no arguments), or a JSON object in it (MiniMax's
/// `<tool_args>{...}</tool_args>`).
fn json_body(body: &str) -> Result<Map<String, Value>, String> {
    let trimmed = body.trim();
    if trimmed.is_empty() || trimmed.starts_with("</") {
        return Ok(Map::new());
    }
    let Some(start) = body.find('{') else {
        return Err(format!("no parameters, but `{}`", brief(trimmed)));
    };
    for quotes in [Quotes::Strict, Quotes::Lenient] {
        if let Ok((Value::Object(args), _)) = lenient::read_value(body, start, quotes, false) {
            return Ok(args);
        }
    }
    Err(format!(
        "arguments that could not be read: `{}`",
        brief(&body[start..])
    ))
}

fn brief(text: &str) -> String {
    shapes::brief(&Value::String(text.to_owned()))
}

/// A value without one line break at each end.
fn without_line_breaks(raw: &str) -> &str {
    let raw = raw.strip_prefix('\n').unwrap_or(raw);
    raw.strip_suffix('\n').unwrap_or(raw)
}

fn value(raw: &str) -> Value {
    let raw = without_line_breaks(raw);
    let trimmed = raw.trim();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        if let Some(value) = lenient::read_whole(trimmed) {
            return value;
        }
    }
    Value::String(raw.to_owned())
}
