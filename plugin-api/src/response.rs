//! What a tool returns.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A tool's answer: the message for the model, whether the loop ends, and extra data.
///
/// ```
/// use plugin_api::Response;
/// use serde_json::json;
///
/// let r = Response::text("42").with_additional("source", json!("calculator"));
/// assert_eq!(r.message, "42");
/// assert!(!r.break_loop);
/// assert_eq!(r.additional.unwrap()["source"], "calculator");
///
/// let last = Response::final_answer("done");
/// assert!(last.break_loop);
/// ```
///
/// As JSON (in the data of the `tool_execute_after` point) it is
/// `{"message": str, "break_loop": bool, "additional": object | null}`; missing fields read as
/// their defaults.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Response {
    /// The text returned to the model (or to the user, when the loop ends).
    pub message: String,
    /// Ends the agent's message loop and returns `message` as the final answer.
    pub break_loop: bool,
    /// Extra data passed along into the history entry of the tool result.
    pub additional: Option<Map<String, Value>>,
    /// Structured data about the call (counts, ids, timings) for the log and the audit; it
    /// never reaches the model. Absent from the JSON when `None`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

impl Response {
    /// A message that lets the loop go on.
    pub fn text(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            break_loop: false,
            additional: None,
            metadata: None,
        }
    }
    /// A message that ends the loop as the final answer.
    pub fn final_answer(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            break_loop: true,
            additional: None,
            metadata: None,
        }
    }
    /// Adds one entry to [`metadata`](Self::metadata): for the log and the audit, never the
    /// model.
    ///
    /// ```
    /// let r = plugin_api::Response::text("3 files").with_metadata("files", 3.into());
    /// assert_eq!(r.metadata.unwrap()["files"], 3);
    /// ```
    pub fn with_metadata(mut self, key: impl Into<String>, value: Value) -> Self {
        self.metadata
            .get_or_insert_with(Map::new)
            .insert(key.into(), value);
        self
    }

    /// Adds one entry to [`additional`](Self::additional).
    pub fn with_additional(mut self, key: impl Into<String>, value: Value) -> Self {
        self.additional
            .get_or_insert_with(Map::new)
            .insert(key.into(), value);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_shape_is_what_the_host_sends() {
        let r = Response::text("hi");
        assert_eq!(
            serde_json::to_value(&r).unwrap(),
            json!({"message": "hi", "break_loop": false, "additional": null})
        );
        let r = Response::final_answer("x").with_additional("k", json!(1));
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(
            v,
            json!({"message": "x", "break_loop": true, "additional": {"k": 1}})
        );
        assert_eq!(serde_json::from_value::<Response>(v).unwrap(), r);
        let partial: Response = serde_json::from_value(json!({"message": "m"})).unwrap();
        assert_eq!(partial, Response::text("m"));
    }
}
