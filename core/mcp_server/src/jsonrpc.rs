//! JSON-RPC 2.0 as its specification says, checked before a message reaches rmcp: a message
//! that is not JSON is a parse error (`-32700`), one that is not a request, notification or
//! response is an invalid request (`-32600`), a known method with parameters of the wrong
//! shape is invalid params (`-32602`), and each is answered (with the request's `id` when it
//! has a usable one, else `null`) instead of being dropped or mistaken for an unknown method.
//! Batches are refused as one invalid request: MCP removed them in 2025-06-18.

use rmcp::model::{self as m, ClientJsonRpcMessage, ClientRequest, JsonRpcMessage};
use serde::Deserialize;
use serde_json::{json, Value};

/// JSON-RPC's error codes this check gives.
pub(crate) const PARSE_ERROR: i64 = -32700;
/// The message is not a valid request object.
pub(crate) const INVALID_REQUEST: i64 = -32600;
/// The method's parameters do not have its shape.
pub(crate) const INVALID_PARAMS: i64 = -32602;
/// Method not found: also what a 2026-07-28 request of a method that version removed gets
/// (over HTTP with status 404).
pub(crate) const METHOD_NOT_FOUND: i64 = -32601;

/// The methods MCP 2026-07-28 removed (`ping` is refused by rmcp itself): a request of one
/// that declares that version in its `_meta` is not found, as the specification answers it.
const REMOVED_IN_2026: [&str; 4] = [
    "initialize",
    "logging/setLevel",
    "resources/subscribe",
    "resources/unsubscribe",
];

/// The longest method name read (the protocol's longest is 40 bytes); a longer one is not
/// found, and is not repeated whole.
const MAX_METHOD_BYTES: usize = 256;

/// Why a message was refused: the error response it gets.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Refusal {
    pub(crate) code: i64,
    pub(crate) message: String,
    /// The request's id if it had a usable one (a string or a number), else `null`.
    pub(crate) id: Value,
    /// Whether the message was a notification (no `id`): it gets no answer where the
    /// transport can stay silent (stdio), as JSON-RPC says.
    pub(crate) notification: bool,
}

impl Refusal {
    fn new(code: i64, message: impl Into<String>, id: Value, notification: bool) -> Self {
        Self {
            code,
            message: message.into(),
            id,
            notification,
        }
    }

    /// The error response, as one line of JSON.
    pub(crate) fn to_json(&self) -> String {
        json!({
            "jsonrpc": "2.0",
            "id": self.id,
            "error": {"code": self.code, "message": self.message},
        })
        .to_string()
    }
}

/// What kind of JSON value a member holds, read without building it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    Object,
    Array,
    /// A string, number, boolean or null: what it is.
    Scalar(&'static str),
}

impl<'de> Deserialize<'de> for Shape {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Kind;
        impl<'de> serde::de::Visitor<'de> for Kind {
            type Value = Shape;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Shape, A::Error> {
                while map
                    .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
                    .is_some()
                {}
                Ok(Shape::Object)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Shape, A::Error> {
                while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(Shape::Array)
            }
            fn visit_str<E>(self, _: &str) -> Result<Shape, E> {
                Ok(Shape::Scalar("a string"))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Shape, E> {
                Ok(Shape::Scalar("a boolean"))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Shape, E> {
                Ok(Shape::Scalar("a number"))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Shape, E> {
                Ok(Shape::Scalar("a number"))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Shape, E> {
                Ok(Shape::Scalar("a number"))
            }
            fn visit_unit<E>(self) -> Result<Shape, E> {
                Ok(Shape::Scalar("null"))
            }
        }
        d.deserialize_any(Kind)
    }
}

/// The top-level members, read without building the parameters (only their shape is kept).
#[derive(Deserialize)]
struct Envelope {
    jsonrpc: Option<Value>,
    /// `Some(Value::Null)` for `"id": null`, which is not a usable id.
    #[serde(default, deserialize_with = "present")]
    id: Option<Value>,
    method: Option<Value>,
    params: Option<Shape>,
    result: Option<Shape>,
    error: Option<Shape>,
}

/// A member that is there, whatever its value (`null` included).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// Checks one message; `Ok` when rmcp can take it as it is.
pub(crate) fn check(message: &[u8]) -> Result<(), Refusal> {
    checked(message).map(drop)
}

/// [`check`], with the message when checking it parsed it (a request or a notification:
/// parsed as rmcp's message, so that its parameters are checked against its method), so
/// that it need not be parsed again.
pub(crate) fn checked(message: &[u8]) -> Result<Option<ClientJsonRpcMessage>, Refusal> {
    refuse_batch(message)?;
    let envelope: Envelope = serde_json::from_slice(message).map_err(|e| match e.classify() {
        serde_json::error::Category::Data => Refusal::new(
            INVALID_REQUEST,
            format!("not a JSON-RPC message: {e}"),
            Value::Null,
            false,
        ),
        _ => parse_error(e),
    })?;
    let id = match &envelope.id {
        None => None,
        Some(id @ (Value::String(_) | Value::Number(_))) => Some(id.clone()),
        Some(other) => {
            let message = format!("the id must be a string or a number, not {other}");
            return Err(Refusal::new(INVALID_REQUEST, message, Value::Null, false));
        }
    };
    let notification = id.is_none();
    let refuse = |(code, message): (i64, String)| {
        Refusal::new(
            code,
            message,
            id.clone().unwrap_or(Value::Null),
            notification,
        )
    };
    if envelope.jsonrpc.as_ref().and_then(Value::as_str) != Some("2.0") {
        let given = envelope
            .jsonrpc
            .map_or("none".to_owned(), |v| v.to_string());
        let message = format!("\"jsonrpc\" must be \"2.0\" (given: {given})");
        return Err(refuse((INVALID_REQUEST, message)));
    }
    let Some(method) = envelope.method else {
        // A response to one of the server's requests (an elicitation, a ping).
        if id.is_none() || (envelope.result.is_some() == envelope.error.is_some()) {
            let message = "a message needs a \"method\" (a request or a notification), or an \"id\" and one of \"result\" and \"error\" (a response)";
            return Err(refuse((INVALID_REQUEST, message.to_owned())));
        }
        return Ok(None);
    };
    let method = method_checked(message, method, envelope.params).map_err(refuse)?;
    parsed(message, &method).map_err(|refusal| match refusal {
        Ok(refusal) => refusal,
        Err(said) => refuse(said),
    })
}

/// A batch is refused (after it is parsed, so that one that is not even JSON is a parse
/// error).
fn refuse_batch(message: &[u8]) -> Result<(), Refusal> {
    let first = message.iter().find(|b| !b.is_ascii_whitespace());
    if first != Some(&b'[') {
        return Ok(());
    }
    serde_json::from_slice::<serde::de::IgnoredAny>(message).map_err(parse_error)?;
    Err(Refusal::new(
        INVALID_REQUEST,
        "batches are not supported: send one JSON-RPC message at a time (MCP removed batching in 2025-06-18)",
        Value::Null,
        false,
    ))
}

/// The method of a request or notification, echoed safely, once its name, its parameters'
/// shape and its protocol version are checked; the code and message to answer otherwise.
fn method_checked(
    message: &[u8],
    method: Value,
    params: Option<Shape>,
) -> Result<String, (i64, String)> {
    let Value::String(method) = method else {
        let method = super::echo::echoed(&method.to_string());
        let message = format!("\"method\" must be a string, not {method}");
        return Err((INVALID_REQUEST, message));
    };
    if method.len() > MAX_METHOD_BYTES {
        let message = format!(
            "no method is named {} (a method name has at most {MAX_METHOD_BYTES} bytes)",
            super::echo::echoed(&method)
        );
        return Err((METHOD_NOT_FOUND, message));
    }
    let method = super::echo::echoed(&method);
    if let Some(Shape::Scalar(given)) = params {
        let message = format!("\"params\" of {method} must be an object, not {given}");
        return Err((INVALID_REQUEST, message));
    }
    if REMOVED_IN_2026.contains(&method.as_str()) && declares_2026(message) {
        let text = format!(
            "method not found: {method} was removed in MCP 2026-07-28 (the protocol version this request declares); send it with protocol 2025-11-25, or see server/discover"
        );
        return Err((METHOD_NOT_FOUND, text));
    }
    Ok(method)
}

/// The request or notification as rmcp's message. rmcp reads a request whose parameters do
/// not fit its method as a custom request, which it answers with "method not found": a known
/// method is tried with its own type. The error is a refusal as it is (`Ok`) or the code and
/// message to answer with the request's id (`Err`).
fn parsed(
    message: &[u8],
    method: &str,
) -> Result<Option<ClientJsonRpcMessage>, Result<Refusal, (i64, String)>> {
    let parsed = match serde_json::from_slice::<ClientJsonRpcMessage>(message) {
        // Nested too deep to be read: not JSON this server can parse.
        Err(e) if e.classify() != serde_json::error::Category::Data => {
            return Err(Ok(parse_error(e)))
        }
        Err(e) => {
            return Err(Err((
                INVALID_PARAMS,
                format!("invalid params for {method}: {e}"),
            )))
        }
        Ok(parsed) => parsed,
    };
    if let JsonRpcMessage::Request(request) = &parsed {
        if let ClientRequest::CustomRequest(custom) = &request.request {
            if let Err(e) = known_shape(method, custom.params.clone()) {
                return Err(Err((
                    INVALID_PARAMS,
                    format!("invalid params for {method}: {e}"),
                )));
            }
        }
    }
    Ok(Some(parsed))
}

/// Whether the request `message` declares protocol 2026-07-28 or later in its
/// `params._meta["io.modelcontextprotocol/protocolVersion"]`.
fn declares_2026(message: &[u8]) -> bool {
    #[derive(Deserialize)]
    struct Request {
        params: Option<Params>,
    }
    #[derive(Deserialize)]
    struct Params {
        #[serde(rename = "_meta")]
        meta: Option<Meta>,
    }
    #[derive(Deserialize)]
    struct Meta {
        #[serde(rename = "io.modelcontextprotocol/protocolVersion")]
        version: Option<Value>,
    }
    let request = serde_json::from_slice::<Request>(message).ok();
    let version = request.and_then(|r| r.params?.meta?.version);
    // ISO dates compare as strings.
    matches!(version, Some(Value::String(v)) if v.as_str() >= "2026-07-28")
}

/// Whether `params` fit the request `method` if it is one the server answers (any parameters
/// fit a method it does not know: rmcp says it is not found).
fn known_shape(method: &str, params: Option<Value>) -> Result<(), serde_json::Error> {
    fn fits<T: serde::de::DeserializeOwned>(
        method: &str,
        params: Option<Value>,
    ) -> Result<(), serde_json::Error> {
        let mut request = serde_json::Map::new();
        request.insert("method".to_owned(), Value::String(method.to_owned()));
        if let Some(params) = params {
            request.insert("params".to_owned(), params);
        }
        serde_json::from_value::<T>(Value::Object(request)).map(drop)
    }
    match method {
        "initialize" => fits::<m::InitializeRequest>(method, params),
        "ping" => fits::<m::PingRequest>(method, params),
        "tools/list" => fits::<m::ListToolsRequest>(method, params),
        "tools/call" => fits::<m::CallToolRequest>(method, params),
        "prompts/list" => fits::<m::ListPromptsRequest>(method, params),
        "prompts/get" => fits::<m::GetPromptRequest>(method, params),
        "resources/list" => fits::<m::ListResourcesRequest>(method, params),
        "resources/templates/list" => fits::<m::ListResourceTemplatesRequest>(method, params),
        "resources/read" => fits::<m::ReadResourceRequest>(method, params),
        "completion/complete" => fits::<m::CompleteRequest>(method, params),
        // Deprecated in 2026-07-28, and still what clients of earlier versions send.
        #[allow(deprecated)]
        "resources/subscribe" => fits::<m::SubscribeRequest>(method, params),
        #[allow(deprecated)]
        "resources/unsubscribe" => fits::<m::UnsubscribeRequest>(method, params),
        #[allow(deprecated)]
        "logging/setLevel" => fits::<m::SetLevelRequest>(method, params),
        _ => Ok(()),
    }
}

fn parse_error(e: serde_json::Error) -> Refusal {
    Refusal::new(PARSE_ERROR, format!("parse error: {e}"), Value::Null, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(message: &str) -> Option<(i64, Value)> {
        check(message.as_bytes()).err().map(|r| (r.code, r.id))
    }

    #[test]
    fn each_kind_of_bad_message_gets_its_code_and_the_id_when_usable() {
        let cases = [
            ("not json", Some((PARSE_ERROR, Value::Null))),
            (
                "{\"jsonrpc\": \"2.0\", \"id\": 1",
                Some((PARSE_ERROR, Value::Null)),
            ),
            ("[1, 2", Some((PARSE_ERROR, Value::Null))),
            (
                "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]",
                Some((INVALID_REQUEST, Value::Null)),
            ),
            ("5", Some((INVALID_REQUEST, Value::Null))),
            (
                "{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"ping\"}",
                Some((INVALID_REQUEST, json!(1))),
            ),
            (
                "{\"id\":\"a\",\"method\":\"ping\"}",
                Some((INVALID_REQUEST, json!("a"))),
            ),
            (
                "{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}",
                Some((INVALID_REQUEST, Value::Null)),
            ),
            (
                "{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"ping\"}",
                Some((INVALID_REQUEST, Value::Null)),
            ),
            (
                "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":5}",
                Some((INVALID_REQUEST, json!(2))),
            ),
            (
                "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\",\"params\":5}",
                Some((INVALID_REQUEST, json!(2))),
            ),
            (
                "{\"jsonrpc\":\"2.0\",\"id\":3}",
                Some((INVALID_REQUEST, json!(3))),
            ),
            (
                "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":5}}",
                Some((INVALID_PARAMS, json!(4))),
            ),
            (
                "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"arguments\":{}}}",
                None,
            ),
            (
                "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"no/such\"}",
                None,
            ),
            (
                "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}",
                None,
            ),
            ("{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}", None),
            (
                "{\"jsonrpc\":\"2.0\",\"id\":8,\"result\":{},\"error\":{}}",
                Some((INVALID_REQUEST, json!(8))),
            ),
        ];
        for (message, expected) in cases {
            assert_eq!(code(message), expected, "{message}");
        }
    }

    #[test]
    fn a_deep_nesting_is_a_parse_error_not_a_stack_overflow() {
        let deep = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{}{}}}",
            "[".repeat(1_000_000),
            "]".repeat(1_000_000)
        );
        assert_eq!(code(&deep), Some((PARSE_ERROR, Value::Null)));
    }

    #[test]
    fn a_refusal_is_one_line_of_json_rpc_with_an_explicit_null_id() {
        let refusal = check(b"nope").unwrap_err();
        let line = refusal.to_json();
        assert!(!line.contains('\n'));
        let value: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(value["jsonrpc"], "2.0");
        assert_eq!(value["id"], Value::Null);
        assert!(value.as_object().unwrap().contains_key("id"));
        assert_eq!(value["error"]["code"], PARSE_ERROR);
    }
}
