//! A stdio server's message, parsed from its line with the line's memory reused for its one
//! long text ([`LongString`]): a tool that answers 15 MB of text costs its size once, not twice.
//!
//! Only a tool result's text block or a string in its structured content takes the text so;
//! a long string anywhere else (a key, a request's parameters) is parsed the usual way.

use rmcp::model::{ContentBlock, JsonRpcMessage, JsonRpcResponse, ServerResult};
use rmcp::service::{RoleClient, RxJsonRpcMessage};

use crate::long_string::{marked, LongString};

/// A message of a line: the line's memory reused for its longest string (see the module).
pub(crate) fn parse(line: Vec<u8>) -> serde_json::Result<RxJsonRpcMessage<RoleClient>> {
    let Some(long) = LongString::find(&line) else {
        return serde_json::from_slice(&line);
    };
    let mut message: RxJsonRpcMessage<RoleClient> = match serde_json::from_slice(long.rest()) {
        Ok(message) => message,
        Err(_) => return serde_json::from_slice(&line), // the usual error
    };
    let Some(slot) = slot(&mut message, long.mark()) else {
        return serde_json::from_slice(&line);
    };
    match long.decode(line) {
        Ok(text) => {
            *slot = text;
            Ok(message)
        }
        Err(line) => serde_json::from_slice(&line), // not valid JSON text: the usual error
    }
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
        .and_then(|v| marked(v, mark))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::long_string::LONG_LINE;
    use serde_json::{json, Value};

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
