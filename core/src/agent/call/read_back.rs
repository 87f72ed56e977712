//! What the host reads back from a point's data after its extensions ran: the fields that the
//! point lets an extension change (see each type in [`plugin_api::points`]), each only where
//! the extension left it present and of the right type. Everything else keeps the value the
//! host sent, so an extension that drops or garbles a field cannot blank a tool's answer or a
//! history message, and a read-only point's data is never read back at all.

use plugin_api::points::{
    AgentInit, BeforeMainLlmCall, CallMessage, ErrorFormat, HistAddBefore, HistAddToolResult,
    MessageLoopEnd, MessageLoopPromptsAfter, MessageLoopPromptsBefore, MessageLoopStart,
    MonologueEnd, MonologueStart, Point, ProcessChainEnd, ReasoningStream, ReasoningStreamChunk,
    ReasoningStreamEnd, ResponseStream, ResponseStreamChunk, ResponseStreamEnd, SystemPrompt,
    ToolExecuteAfter, ToolExecuteBefore, ToolExecuteError, ToolOutputUpdate, UtilModelCallBefore,
    TOOL_EXECUTE_BEFORE,
};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use plugin_api::ToolError;

/// A built-in point's data, as the host reads it back.
pub(crate) trait ReadBack: Point {
    /// `self` (the data sent) with the changes in `changed` (the data the extensions left)
    /// that this point allows.
    fn read_back(self, changed: Value) -> Result<Self, ToolError>;
}

/// The field `name` of `data`, if it is there and of type `T`.
fn field<T: DeserializeOwned>(data: &mut Value, name: &str) -> Option<T> {
    T::deserialize(data.get_mut(name)?.take()).ok()
}

/// Read-only points: what an extension leaves is not read.
macro_rules! read_only {
    ($($point:ty),+) => {$(
        impl ReadBack for $point {
            fn read_back(self, _changed: Value) -> Result<Self, ToolError> {
                Ok(self)
            }
        }
    )+};
}

read_only!(
    AgentInit,
    MonologueStart,
    MonologueEnd,
    MessageLoopStart,
    MessageLoopEnd,
    HistAddToolResult,
    ToolExecuteError,
    ProcessChainEnd,
    ResponseStream,
    ResponseStreamEnd,
    ReasoningStream,
    ReasoningStreamEnd
);

/// Text parts: the strings of a list, in order (anything else in it is left out); no list
/// leaves `old`.
fn texts(changed: &mut Value, name: &str, old: Vec<String>) -> Vec<String> {
    match field::<Vec<Value>>(changed, name) {
        Some(parts) => parts
            .into_iter()
            .filter_map(|part| match part {
                Value::String(text) => Some(text),
                _ => None,
            })
            .collect(),
        None => old,
    }
}

impl ReadBack for MessageLoopPromptsBefore {
    fn read_back(mut self, mut changed: Value) -> Result<Self, ToolError> {
        self.extras = texts(&mut changed, "extras", self.extras);
        Ok(self)
    }
}

impl ReadBack for MessageLoopPromptsAfter {
    fn read_back(mut self, mut changed: Value) -> Result<Self, ToolError> {
        self.system = field(&mut changed, "system").unwrap_or(self.system);
        self.extras = texts(&mut changed, "extras", self.extras);
        Ok(self)
    }
}

impl ReadBack for BeforeMainLlmCall {
    fn read_back(mut self, mut changed: Value) -> Result<Self, ToolError> {
        self.system = field(&mut changed, "system").unwrap_or(self.system);
        Ok(self)
    }
}

impl ReadBack for UtilModelCallBefore {
    /// `system`, and the messages only if there are as many as were sent, each with its
    /// text (a message left without text keeps the one sent).
    fn read_back(mut self, mut changed: Value) -> Result<Self, ToolError> {
        self.system = field(&mut changed, "system").unwrap_or(self.system);
        if let Some(messages) = field::<Vec<Value>>(&mut changed, "messages") {
            if messages.len() == self.messages.len() {
                for (message, mut new) in self.messages.iter_mut().zip(messages) {
                    let role: Option<String> = field(&mut new, "role");
                    let content: Option<String> = field(&mut new, "content");
                    if let (Some(role), Some(content)) = (role, content) {
                        *message = CallMessage::new(role, content);
                    }
                }
            }
        }
        Ok(self)
    }
}

impl ReadBack for ResponseStreamChunk {
    fn read_back(mut self, mut changed: Value) -> Result<Self, ToolError> {
        self.chunk = field(&mut changed, "chunk").unwrap_or(self.chunk);
        Ok(self)
    }
}

impl ReadBack for ReasoningStreamChunk {
    fn read_back(mut self, mut changed: Value) -> Result<Self, ToolError> {
        self.chunk = field(&mut changed, "chunk").unwrap_or(self.chunk);
        Ok(self)
    }
}

impl ReadBack for HistAddBefore {
    fn read_back(mut self, mut changed: Value) -> Result<Self, ToolError> {
        self.content = field(&mut changed, "content").unwrap_or(self.content);
        Ok(self)
    }
}

impl ReadBack for ErrorFormat {
    fn read_back(mut self, mut changed: Value) -> Result<Self, ToolError> {
        self.text = field(&mut changed, "text").unwrap_or(self.text);
        Ok(self)
    }
}

impl ReadBack for SystemPrompt {
    /// The text parts, in order; anything but a list leaves no parts.
    fn read_back(mut self, mut changed: Value) -> Result<Self, ToolError> {
        let parts: Vec<Value> = field(&mut changed, "parts").unwrap_or_default();
        self.parts = parts
            .into_iter()
            .filter_map(|part| match part {
                Value::String(text) => Some(text),
                _ => None,
            })
            .collect();
        Ok(self)
    }
}

impl ReadBack for ToolOutputUpdate {
    /// The progress text; anything but text leaves none.
    fn read_back(mut self, mut changed: Value) -> Result<Self, ToolError> {
        self.progress = field(&mut changed, "progress").unwrap_or_default();
        Ok(self)
    }
}

impl ReadBack for ToolExecuteBefore {
    /// The arguments, which must stay an object.
    fn read_back(mut self, mut changed: Value) -> Result<Self, ToolError> {
        self.args = field::<Map<String, Value>>(&mut changed, "args").ok_or_else(|| {
            ToolError::internal(format!(
                "the {TOOL_EXECUTE_BEFORE} extensions left no 'args' object for tool '{}': an \
                 extension must keep 'args' a JSON object",
                self.tool_name
            ))
        })?;
        Ok(self)
    }
}

impl ReadBack for ToolExecuteAfter {
    /// The response's `message` (text) and `additional` (an object, or `null` for none);
    /// never `break_loop`.
    fn read_back(mut self, mut changed: Value) -> Result<Self, ToolError> {
        let Some(mut response) = field::<Value>(&mut changed, "response") else {
            return Ok(self);
        };
        if let Some(message) = field(&mut response, "message") {
            self.response.message = message;
        }
        if let Some(additional) = field(&mut response, "additional") {
            self.response.additional = additional;
        }
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use plugin_api::Response;
    use serde_json::json;

    fn after(message: &str) -> ToolExecuteAfter {
        let response = Response::text(message).with_additional("k", json!(1));
        ToolExecuteAfter::new("t".to_owned(), response)
    }

    #[test]
    fn only_what_a_point_allows_and_only_when_well_formed() {
        let kept = after("old").read_back(json!({"response": {"break_loop": true}}));
        assert_eq!(kept.unwrap(), after("old"));
        let garbled = after("old").read_back(json!({"response": {"message": 3, "additional": 4}}));
        assert_eq!(garbled.unwrap(), after("old"));
        let changed = after("old")
            .read_back(json!({"response": {"message": "new", "additional": null}}))
            .unwrap();
        assert_eq!(changed.response, Response::text("new"));
        let hist = HistAddBefore::new("user".into(), "hi".into());
        assert_eq!(hist.clone().read_back(json!({})).unwrap(), hist);
        let loop_start = MessageLoopStart::new(3);
        assert_eq!(
            loop_start
                .read_back(json!({"iteration": "x"}))
                .unwrap()
                .iteration,
            3
        );
    }

    #[test]
    fn arguments_must_stay_an_object() {
        let before = ToolExecuteBefore::new("t".into(), Map::new());
        let e = before.read_back(json!({"args": [1]})).unwrap_err();
        assert!(
            e.message().contains("must keep 'args' a JSON object"),
            "{e}"
        );
    }
}
