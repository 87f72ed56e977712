//! What a model's reply asks for: the JSON tool request in its text (the JSON protocol), or its
//! native tool calls, one call or several run as one `parallel` request.

use serde_json::{json, Value};

use crate::model::{ModelReply, ToolProtocol};
use crate::transcript::ToolCall;
use toolhost_reply::{read_reply, read_reply_typed, Misformat, ToolRequest};

/// The tool request of `reply`, knowing the profile's `tools` (each name with its arguments'
/// JSON Schema, which types the arguments read from text).
///
/// With native tool calls: one call is that tool's request; several are one `parallel`
/// request, in order. Without: the request in the text, as the JSON protocol reads it (an XML
/// element named after one of `tools` included); under the native protocol, text that holds
/// no request is the final answer (the `response` tool with that text), since that is how such
/// models answer.
pub(crate) fn request_of(
    reply: &ModelReply,
    protocol: ToolProtocol,
    tools: &[(&str, &Value)],
) -> Result<ToolRequest, Misformat> {
    match reply.tool_calls.as_slice() {
        [] => match read_reply_typed(&reply.text, tools) {
            Err(Misformat::NoRequest)
                if protocol == ToolProtocol::Native && !reply.text.trim().is_empty() =>
            {
                Ok(plain(
                    "response".to_owned(),
                    json!({"text": reply.text.trim()}),
                ))
            }
            other => other,
        },
        [call] => Ok(plain(call.name.clone(), arguments(call)?)),
        calls => {
            let calls = calls
                .iter()
                .map(|call| Ok(json!({"tool_name": call.name, "tool_args": arguments(call)?})))
                .collect::<Result<Vec<Value>, Misformat>>()?;
            Ok(plain("parallel".to_owned(), json!({ "calls": calls })))
        }
    }
}

fn plain(tool: String, args: Value) -> ToolRequest {
    ToolRequest {
        tool,
        args,
        thoughts: None,
        headline: None,
    }
}

/// A call's arguments: its JSON text, read strictly, else repaired as the reply reader repairs
/// a request (an empty text is no arguments).
fn arguments(call: &ToolCall) -> Result<Value, Misformat> {
    let raw = call.arguments.trim();
    if raw.is_empty() {
        return Ok(json!({}));
    }
    if let Ok(value) = serde_json::from_str::<Value>(raw) {
        return Ok(value);
    }
    let wrapped = format!(
        "{{\"tool_name\": {}, \"tool_args\": {raw}}}",
        Value::from(call.name.as_str())
    );
    match read_reply(&wrapped) {
        Ok(request) if request.tool == call.name => Ok(request.args),
        _ => {
            let seen: String = raw.chars().take(80).collect();
            Err(Misformat::Unreadable(format!(
                "the arguments of the call of '{}' are not JSON ({seen})",
                call.name
            )))
        }
    }
}

/// What two replies must share to count as the same reply: the text and the calls (not their
/// ids, which differ every time), as the SHA-256 of them (a copy of a long reply would be
/// kept until the next one).
pub(crate) fn signature(reply: &ModelReply) -> String {
    use sha2::{Digest, Sha256};
    let mut hash = Sha256::new();
    hash.update(reply.text.as_bytes());
    for call in &reply.tool_calls {
        hash.update(b"\0");
        hash.update(call.name.as_bytes());
        hash.update(b"\0");
        hash.update(call.arguments.as_bytes());
    }
    hex::encode(hash.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str, arguments: &str) -> ToolCall {
        ToolCall {
            id: format!("call_{name}"),
            name: name.to_owned(),
            arguments: arguments.to_owned(),
        }
    }

    fn reply(calls: Vec<ToolCall>) -> ModelReply {
        ModelReply {
            tool_calls: calls,
            ..ModelReply::default()
        }
    }

    #[test]
    fn one_call_is_its_tool_and_several_are_one_parallel_request() {
        let one = request_of(
            &reply(vec![call("greet", r#"{"name":"Ada"}"#)]),
            ToolProtocol::Native,
            &[],
        );
        let one = one.unwrap();
        assert_eq!(
            (one.tool.as_str(), &one.args),
            ("greet", &json!({"name": "Ada"}))
        );
        let two = vec![call("greet", r#"{"name":"Ada"}"#), call("noop", "")];
        let two = request_of(&reply(two), ToolProtocol::Native, &[]).unwrap();
        assert_eq!(two.tool, "parallel");
        assert_eq!(
            two.args,
            json!({"calls": [
                {"tool_name": "greet", "tool_args": {"name": "Ada"}},
                {"tool_name": "noop", "tool_args": {}}
            ]})
        );
    }

    #[test]
    fn broken_arguments_are_repaired_or_named() {
        let repaired = request_of(
            &reply(vec![call("greet", "{'name': 'Ada',}")]),
            ToolProtocol::Native,
            &[],
        );
        assert_eq!(repaired.unwrap().args, json!({"name": "Ada"}));
        let bad = request_of(
            &reply(vec![call("greet", "name=Ada")]),
            ToolProtocol::Native,
            &[],
        );
        assert!(
            matches!(bad, Err(Misformat::Unreadable(ref s)) if s.contains("'greet'")),
            "{bad:?}"
        );
    }

    #[test]
    fn text_arguments_are_typed_by_the_tool_schema() {
        let schema = json!({"type": "object", "properties": {
            "path": {"type": "string"}, "limit": {"type": "integer"}}});
        let text = ModelReply::text("<read>\n<path>42</path>\n<limit>15</limit>\n</read>");
        let request = request_of(&text, ToolProtocol::Json, &[("read", &schema)]).unwrap();
        assert_eq!(request.args, json!({"path": "42", "limit": 15}));
    }

    #[test]
    fn plain_text_is_the_answer_only_under_the_native_protocol() {
        let text = ModelReply::text("Paris.");
        let native = request_of(&text, ToolProtocol::Native, &[]).unwrap();
        assert_eq!(
            (native.tool.as_str(), &native.args),
            ("response", &json!({"text": "Paris."}))
        );
        assert_eq!(
            request_of(&text, ToolProtocol::Json, &[]).unwrap_err(),
            Misformat::NoRequest
        );
        let empty = request_of(&ModelReply::text(" "), ToolProtocol::Native, &[]);
        assert_eq!(empty.unwrap_err(), Misformat::NoRequest);
    }
}
