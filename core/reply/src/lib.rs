//! # toolhost-reply: reading a model's reply
//!
//! The tool request in a model's reply, read leniently. It depends on nothing of the host, so
//! a reply can be read (and fuzzed) without one.
//!
//! - `candidates.rs`: where the request is in a reply (the first block-level one wins);
//! - `lenient.rs`, `strings.rs`: reading a JSON object that may be broken, without recursion;
//! - `shapes.rs`: the shapes a request takes in Agent Zero and other frameworks;
//! - `xml.rs`: calls written as XML (DeepSeek's DSML markup among them);
//! - `named.rs`: a call written as an XML element named after a known tool;
//! - `pythonic.rs`: calls written as Python (`[name(key="value")]`);
//! - `arrow.rs`: calls written with `=>` maps (`{tool => "x", args => { --key "v" }}`);
//! - `headless.rs`: a request whose head (its opening brace) was cut off;
//! - `typed.rs`: arguments typed by the tool's JSON Schema;
//! - `depth.rs`: the nesting bound, checked before anything is parsed.
#![deny(missing_docs)]
// Library code handles its errors, or says with `expect` why a value cannot be missing.
#![cfg_attr(not(test), warn(clippy::unwrap_used))]

mod arrow;
mod candidates;
mod depth;
mod headers;
mod headless;
mod lenient;
mod named;
mod pythonic;
mod shapes;
mod strings;
#[cfg(test)]
mod tests;
mod typed;
mod xml;

use std::fmt;

use serde_json::Value;

use shapes::Reading;

/// The deepest nesting of brackets a reply may have (serde_json's own limit): deeper, it is a
/// misformat. Nothing that reads a reply recurses deeper than this, on any stack.
pub const MAX_REPLY_DEPTH: usize = 128;

/// The tool call a model's reply asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolRequest {
    /// `name` or `name:method`.
    pub tool: String,
    /// The arguments (an object).
    pub args: Value,
    /// The model's `thoughts`, if it gave any.
    pub thoughts: Option<Value>,
    /// The model's `headline`, if it gave one.
    pub headline: Option<String>,
}

impl ToolRequest {
    /// A request for `tool` with `args`, without thoughts or headline.
    pub(crate) fn call(tool: impl Into<String>, args: Value) -> Self {
        Self {
            tool: tool.into(),
            args,
            thoughts: None,
            headline: None,
        }
    }
}

/// Why a reply holds no usable tool request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Misformat {
    /// Nothing in the reply is a tool request.
    NoRequest,
    /// The reply nests brackets deeper than [`MAX_REPLY_DEPTH`].
    TooDeep,
    /// A tool request is there, but its tool or arguments could not be read: what was seen.
    Unreadable(String),
}

impl fmt::Display for Misformat {
    fn fmt(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Misformat::NoRequest => write!(out, "no tool request was found"),
            Misformat::TooDeep => {
                write!(out, "the reply nests deeper than {MAX_REPLY_DEPTH} levels")
            }
            Misformat::Unreadable(seen) => write!(out, "what was seen: {seen}"),
        }
    }
}

impl std::error::Error for Misformat {}

/// Finds the tool request in a model's reply, as Agent Zero does but more forgiving.
///
/// **Where.** The request is the first *block-level* object or XML call that is a tool
/// request: one that starts its line (after white space, `[`, or a tag like `<tool_call>` or
/// `[TOOL_CALLS]`), for example inside a code fence. Only if there is none, the first object
/// written inside a sentence is taken. So an example in the prose never wins over the real call
/// after it. Objects that are not requests are skipped; a request that is broken is not (the
/// reply is then a misformat, never a later call).
///
/// **Which objects are requests.** One with a tool key (`tool_name`, `tool`; `function` as a
/// name or an object; `command: {name, args}`; `tool_calls: [...]`, the first), or with `name`
/// next to an arguments key (`tool_args`, `args`, `parameters`, `arguments`, `params`,
/// `input`). `{"name": "Ada", "age": 36}` is not a call. Arguments are an object, or a string
/// holding one (OpenAI); missing or `null` means `{}`; anything else present as arguments is
/// [`Misformat::Unreadable`], never a call without them. XML calls (`<invoke name="x">
/// <parameter name="p">v</parameter></invoke>`, `<function=x><parameter=p>`) are read too, and
/// so is an object of arguments after a tool named before it (ReAct's `Action: x` /
/// `Action Input:`, Harmony's `to=functions.x ... <|message|>`, LM Studio's `[x]` line,
/// Mistral's `[TOOL_CALLS]x[ARGS]`, Kimi's and DeepSeek's special tokens). GLM's
/// `<tool_call>x<arg_key>k</arg_key><arg_value>v</arg_value>` is read too, and so is a reply
/// that is nothing but a call written as Python (`[x(key="value")]`, LFM2's and Llama's
/// pythonic format). DeepSeek's DSML markup is read with its marker as models write it (one
/// or two full-width or ASCII bars on each side, a space after it or not), `string="true"`
/// values as text and `string="false"` ones as JSON (one that is not JSON is unreadable); an
/// XML call's body ends at its closing tag or where the next call opens, and a call with
/// nothing in it before the next one opens is unreadable. `<function><name>x</name>` and its
/// parameters is a call, and so is MiniMax's `=>` map (`{tool => "x", args => { --key "v" }}`,
/// see `arrow.rs`). Only when nothing else is a request: a request whose head was cut off (its
/// `"tool_name"` key starting a line after a comma, the rest read as an object). A request
/// broken off after its tool's name and begun again in full where its next key was due is the
/// inner request, if it names the same tool; otherwise unreadable.
///
/// **How leniently.** JSON5 (comments, trailing commas, single quotes, unquoted keys), raw line
/// breaks and tabs in strings, an object never closed at the end of the reply, text around it,
/// and unescaped quotes inside a string where they pair up and the object goes on after the
/// closing one. An invalid escape keeps its backslash (`C:\Users` stays `C:\Users`). A reply
/// nested deeper than [`MAX_REPLY_DEPTH`] is [`Misformat::TooDeep`]. The work is linear in the
/// reply's length, and nothing recurses deeper than [`MAX_REPLY_DEPTH`].
///
/// ```
/// let reply = "Sure!\n```json\n{'tool': 'greet:shout', args: {name: 'Ada',}, // hi\n}\n```";
/// let request = toolhost_reply::read_reply(reply).unwrap();
/// assert_eq!(request.tool, "greet:shout");
/// assert_eq!(request.args, serde_json::json!({"name": "Ada"}));
///
/// let reply = r#"{"name": "terminal", "arguments": "{\"command\": \"dir C:\\Users\"}"}"#;
/// let request = toolhost_reply::read_reply(reply).unwrap();
/// assert_eq!(request.args, serde_json::json!({"command": "dir C:\\Users"}));
/// ```
pub fn read_reply(text: &str) -> Result<ToolRequest, Misformat> {
    if depth::exceeds(text, MAX_REPLY_DEPTH) {
        return Err(Misformat::TooDeep);
    }
    let text = without_dsml(text);
    let text = text.as_ref();
    let reading = whole(text)
        .or_else(|| pythonic::read(text))
        .unwrap_or_else(|| match candidates::choose(text) {
            Reading::Nothing => headless::read(text).unwrap_or(Reading::Nothing),
            reading => reading,
        });
    match reading {
        Reading::Request(request) => Ok(request),
        Reading::Unreadable(seen) => Err(Misformat::Unreadable(seen)),
        Reading::Nothing => Err(Misformat::NoRequest),
    }
}

/// [`read_reply`], knowing the names of the tools there are: a reply in which it finds no
/// request may hold a call written as an XML element named after one of `tools`, each argument
/// a child element (`<read_file><path>src/app.ts</path></read_file>`, as Cline's and Roo Code's
/// models write) or an attribute of the element (which may close itself: `<list_files
/// path="src"/>`). A child's text is its value (XML's entities decoded, CDATA as written; child
/// elements of its own stay text, as Roo Code reads them, unless a schema asks otherwise:
/// [`read_reply_typed`]); an argument given twice is unreadable. XML that names none of
/// `tools`, or an element with text outside its children (a sentence that mentions
/// `<read_file>`), is never a call.
///
/// ```
/// let tools = ["read_file", "response"];
/// let reply = "I will read it.\n<read_file>\n<path>src/a&amp;b.ts</path>\n</read_file>";
/// let request = toolhost_reply::read_reply_with(reply, &tools).unwrap();
/// assert_eq!(request.tool, "read_file");
/// assert_eq!(request.args, serde_json::json!({"path": "src/a&b.ts"}));
/// assert!(toolhost_reply::read_reply_with("<b><i>hi</i></b>", &tools).is_err());
/// assert!(toolhost_reply::read_reply_with("Use <read_file> to read.", &tools).is_err());
/// ```
pub fn read_reply_with(text: &str, tools: &[&str]) -> Result<ToolRequest, Misformat> {
    match read_reply(text) {
        Err(Misformat::NoRequest) => match named::read(&without_dsml(text), tools) {
            Reading::Request(request) => Ok(request),
            Reading::Unreadable(seen) => Err(Misformat::Unreadable(seen)),
            Reading::Nothing => Err(Misformat::NoRequest),
        },
        other => other,
    }
}

/// [`read_reply_with`], knowing each tool's JSON Schema as well (name and schema pairs): the
/// request's arguments are typed by its tool's schema. What XML and the other text forms
/// write as text becomes what the schema asks for: `"15"` an integer, `"true"` a boolean, a
/// string holding JSON or child elements (`<file><path>a</path></file>`) an object or list,
/// one object where a list is asked for a list of it; a number where a string is asked for
/// its text. A schema that allows a string leaves strings as they are, and a value that does
/// not convert stays as it was, for the tool's validation to name.
///
/// ```
/// let schema = serde_json::json!({"type": "object", "properties": {
///     "path": {"type": "string"}, "limit": {"type": "integer"}}});
/// let tools = [("read", &schema)];
/// let reply = "<invoke name=\"read\"><parameter name=\"path\">7</parameter>\
///              <parameter name=\"limit\">15</parameter></invoke>";
/// let request = toolhost_reply::read_reply_typed(reply, &tools).unwrap();
/// assert_eq!(request.args, serde_json::json!({"path": "7", "limit": 15}));
/// ```
pub fn read_reply_typed(text: &str, tools: &[(&str, &Value)]) -> Result<ToolRequest, Misformat> {
    let names: Vec<&str> = tools.iter().map(|(name, _)| *name).collect();
    let mut request = read_reply_with(text, &names)?;
    if let Some((_, schema)) = tools.iter().find(|(name, _)| *name == request.tool) {
        typed::type_args(&mut request.args, schema);
    }
    Ok(request)
}

/// [`read_reply`], without the reason when there is no request.
///
/// ```
/// assert!(toolhost_reply::parse_reply(r#"{"name": "Ada", "age": 36}"#).is_none());
/// ```
pub fn parse_reply(text: &str) -> Option<ToolRequest> {
    read_reply(text).ok()
}

/// DeepSeek's DSML markup as the XML it is (a marker in each tag taken out).
fn without_dsml(text: &str) -> std::borrow::Cow<'_, str> {
    match text.contains(xml::DSML) {
        true => std::borrow::Cow::Owned(xml::without_dsml(text)),
        false => std::borrow::Cow::Borrowed(text),
    }
}

/// A reply that is one valid JSON object and nothing else, read by serde_json alone.
fn whole(text: &str) -> Option<Reading> {
    let trimmed = text.trim();
    if !trimmed.starts_with('{') {
        return None;
    }
    serde_json::from_str(trimmed).ok().map(shapes::classify)
}
