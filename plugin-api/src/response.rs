//! What a tool returns.

use abi_stable::std_types::{ROption, RString};
use plugin_abi::FfiResponse;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::Content;

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
/// The type is `#[non_exhaustive]`, so that a later release can add a field without breaking
/// your code: build one with [`text`](Self::text) or [`final_answer`](Self::final_answer) and
/// the `with_*` methods; the fields stay public to read and to change.
///
/// As JSON (in the data of the `tool_execute_after` point) it is
/// `{"message": str, "break_loop": bool, "additional": object | null}`; missing fields read as
/// their defaults.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
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
    /// Blocks that follow the message, in order: images, audio, resources, links, more text
    /// ([`Content`]). Over MCP they follow the message's text block; a model reads each as
    /// [`Content::describe`] says. Absent from the JSON when empty.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub content: Vec<Content>,
    /// The result as data, for clients that read it as such (MCP's `structuredContent`). A
    /// tool that declares an [output schema](crate::ToolInfo::output_schema_for) must return
    /// data that matches it: the host checks, and a mismatch fails the call. Absent from the
    /// JSON when `None`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub structured_content: Option<Value>,
}

impl Response {
    /// A message that lets the loop go on.
    pub fn text(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            break_loop: false,
            additional: None,
            metadata: None,
            content: Vec::new(),
            structured_content: None,
        }
    }
    /// A message that ends the loop as the final answer.
    pub fn final_answer(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            break_loop: true,
            additional: None,
            metadata: None,
            content: Vec::new(),
            structured_content: None,
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

    /// Sets [`break_loop`](Self::break_loop).
    ///
    /// ```
    /// let r = plugin_api::Response::text("done").with_break_loop(true);
    /// assert_eq!(r, plugin_api::Response::final_answer("done"));
    /// ```
    pub fn with_break_loop(mut self, break_loop: bool) -> Self {
        self.break_loop = break_loop;
        self
    }

    /// Replaces [`additional`](Self::additional) with `additional`.
    pub fn with_additional_map(mut self, additional: Option<Map<String, Value>>) -> Self {
        self.additional = additional;
        self
    }

    /// Adds a block after the message (and the blocks added before it).
    pub fn with_content(mut self, block: Content) -> Self {
        self.content.push(block);
        self
    }

    /// Sets [`structured_content`](Self::structured_content) to `value` as JSON.
    ///
    /// ```
    /// #[derive(serde::Serialize)]
    /// struct Sum { total: i64 }
    /// let r = plugin_api::Response::text("5").with_structured(&Sum { total: 5 }).unwrap();
    /// assert_eq!(r.structured_content.unwrap()["total"], 5);
    /// ```
    pub fn with_structured<T: Serialize>(mut self, value: &T) -> Result<Self, serde_json::Error> {
        self.structured_content = Some(serde_json::to_value(value)?);
        Ok(self)
    }

    /// Replaces [`metadata`](Self::metadata) with `metadata`.
    pub fn with_metadata_map(mut self, metadata: Option<Map<String, Value>>) -> Self {
        self.metadata = metadata;
        self
    }
}

/// The response in its wire form.
impl From<Response> for FfiResponse {
    fn from(response: Response) -> Self {
        FfiResponse {
            message: RString::from(response.message),
            break_loop: response.break_loop,
            additional: map_to_ffi(response.additional),
            metadata: map_to_ffi(response.metadata),
            content: match response.content.is_empty() {
                true => ROption::RNone,
                false => ROption::RSome(RString::from(
                    serde_json::to_string(&response.content).unwrap_or_default(),
                )),
            },
            structured_content: match response.structured_content {
                Some(value) => ROption::RSome(RString::from(value.to_string())),
                None => ROption::RNone,
            },
        }
    }
}

/// The response from its wire form. `additional` or `metadata` that is not a JSON object is
/// kept under the key `"value"`, so that nothing is lost; content blocks that cannot be read
/// become one text block saying why, structured content that is not JSON a JSON string.
impl From<FfiResponse> for Response {
    fn from(response: FfiResponse) -> Self {
        Response {
            message: response.message.into_string(),
            break_loop: response.break_loop,
            additional: map_from_ffi(response.additional),
            metadata: map_from_ffi(response.metadata),
            content: content_from_ffi(response.content),
            structured_content: response.structured_content.into_option().map(|text| {
                serde_json::from_str(&text).unwrap_or(Value::String(text.into_string()))
            }),
        }
    }
}

fn content_from_ffi(text: ROption<RString>) -> Vec<Content> {
    let Some(text) = text.into_option() else {
        return Vec::new();
    };
    serde_json::from_str(&text).unwrap_or_else(|e| {
        vec![Content::text(format!(
            "[the tool's content blocks could not be read: {e}]"
        ))]
    })
}

fn map_to_ffi(map: Option<Map<String, Value>>) -> ROption<RString> {
    match map {
        Some(map) => ROption::RSome(RString::from(
            serde_json::to_string(&map).unwrap_or_default(),
        )),
        None => ROption::RNone,
    }
}

fn map_from_ffi(text: ROption<RString>) -> Option<Map<String, Value>> {
    text.into_option()
        .map(|text| match serde_json::from_str::<Value>(&text) {
            Ok(Value::Object(map)) => map,
            Ok(other) => Map::from_iter([("value".to_owned(), other)]),
            Err(_) => Map::from_iter([("value".to_owned(), Value::String(text.into_string()))]),
        })
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

    #[test]
    fn wire_round_trip_keeps_non_object_additional() {
        let r = Response::text("hi").with_additional("k", Value::from(1));
        assert_eq!(Response::from(FfiResponse::from(r.clone())), r);
        let odd = FfiResponse {
            message: "m".into(),
            break_loop: true,
            additional: ROption::RSome("[1]".into()),
            metadata: ROption::RNone,
            content: ROption::RNone,
            structured_content: ROption::RNone,
        };
        let back = Response::from(odd);
        assert_eq!(back.additional.unwrap()["value"], json!([1]));
    }

    #[test]
    fn blocks_and_structured_content_cross_the_wire_in_order() {
        let r = Response::text("m")
            .with_content(Content::image(vec![1, 2], "image/png"))
            .with_content(Content::text("after"))
            .with_structured(&json!({"n": 1}))
            .unwrap();
        assert_eq!(Response::from(FfiResponse::from(r.clone())), r);
        let plain = FfiResponse::from(Response::text("m"));
        assert!(plain.content.is_none() && plain.structured_content.is_none());
    }
}
