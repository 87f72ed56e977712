//! What a tool returns.

use abi_stable::std_types::{ROption, RString};
use serde_json::{Map, Value};

use crate::abi::FfiResponse;

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
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Response {
    /// The text returned to the model (or to the user, when the loop ends).
    pub message: String,
    /// Ends the agent's message loop and returns `message` as the final answer.
    pub break_loop: bool,
    /// Extra data passed along into the history entry of the tool result.
    pub additional: Option<Map<String, Value>>,
}

impl Response {
    /// A message that lets the loop go on.
    pub fn text(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            break_loop: false,
            additional: None,
        }
    }
    /// A message that ends the loop as the final answer.
    pub fn final_answer(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            break_loop: true,
            additional: None,
        }
    }
    /// Adds one entry to [`additional`](Self::additional).
    pub fn with_additional(mut self, key: impl Into<String>, value: Value) -> Self {
        self.additional
            .get_or_insert_with(Map::new)
            .insert(key.into(), value);
        self
    }
    /// Converts into the wire form.
    pub fn into_ffi(self) -> FfiResponse {
        FfiResponse {
            message: RString::from(self.message),
            break_loop: self.break_loop,
            additional: match self.additional {
                Some(map) => ROption::RSome(RString::from(
                    serde_json::to_string(&map).unwrap_or_default(),
                )),
                None => ROption::RNone,
            },
        }
    }
    /// Converts from the wire form. `additional` that is not a JSON object is kept under the key
    /// `"value"` so that nothing is lost.
    pub fn from_ffi(r: FfiResponse) -> Self {
        let additional =
            r.additional
                .into_option()
                .map(|text| match serde_json::from_str::<Value>(&text) {
                    Ok(Value::Object(map)) => map,
                    Ok(other) => Map::from_iter([("value".to_owned(), other)]),
                    Err(_) => {
                        Map::from_iter([("value".to_owned(), Value::String(text.into_string()))])
                    }
                });
        Self {
            message: r.message.into_string(),
            break_loop: r.break_loop,
            additional,
        }
    }
}
