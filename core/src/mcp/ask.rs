//! A server that asks, during the call of one of its tools:
//!
//! - a form (`elicitation/create`) goes to the person behind the call (the form code of
//!   `agent/call/form.rs`: the agent's [`Approver`](crate::governance::Approver), on the
//!   terminal for `call`, `watch` and `chat`; fields left out get their defaults, SEP-1034).
//!   Where no one can answer, it is declined with the reason logged. The values answered are
//!   never logged.
//! - a completion (`sampling/createMessage`) is answered by the host's configured model after
//!   the policy's approval, the server named (`agent/call/sample.rs`); where nobody can
//!   approve or no model is configured, it is refused with an error that says why.

// Sampling is deprecated by SEP-2577 (2026-07-28), and still what servers of 2025-06-18 and
// 2025-11-25 ask.
#![allow(deprecated)]

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use plugin_api::ask::{ElicitAction, Elicited, SampleMessage, SampleRequest, SampleRole, Sampled};
use plugin_api::ToolError;
use rmcp::model::{
    CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams, ElicitResult,
    ElicitationAction, ErrorCode, ErrorData,
};
use serde_json::{json, Value};

/// A boxed future of an answer.
pub(crate) type Answer<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// Shows a form of the server (its name, the message, the schema) to the person behind the
/// call; `Err`: nobody can answer, and why.
pub(crate) type FormFn =
    Arc<dyn Fn(String, String, Value) -> Answer<Result<Elicited, String>> + Send + Sync>;

/// Asks the host's model for a completion on behalf of the server (its name).
pub(crate) type SampleFn =
    Arc<dyn Fn(String, SampleRequest) -> Answer<Result<Sampled, ToolError>> + Send + Sync>;

/// Who can answer for one running call (the agent making it sets both up).
#[derive(Clone)]
pub(crate) struct Asker {
    /// The person behind the call (forms).
    pub(crate) form: FormFn,
    /// The host's model, under the agent's policy.
    pub(crate) sample: SampleFn,
}

fn declined() -> ElicitResult {
    ElicitResult::new(ElicitationAction::Decline)
}

/// The answer to `params` from server `server`, asked during the call of `asker` (`None`:
/// no call of that server runs, so no one asked for it).
pub(crate) async fn elicit(
    asker: Option<Asker>,
    server: &str,
    params: ElicitRequestParams,
) -> ElicitResult {
    let (message, schema) = match params {
        ElicitRequestParams::FormElicitationParams {
            message,
            requested_schema,
            ..
        } => (
            message,
            serde_json::to_value(requested_schema).unwrap_or(Value::Null),
        ),
        _ => {
            tracing::warn!(
                "MCP server {server} asked the user to open a URL (elicitation): declined, this \
                 host answers forms only"
            );
            return declined();
        }
    };
    let Some(asker) = asker else {
        tracing::warn!(
            "MCP server {server} asked for input while none of its tools was being called: \
             declined (no one to ask)"
        );
        return declined();
    };
    match (asker.form)(server.to_owned(), message, schema).await {
        Ok(answer) => match answer.action {
            ElicitAction::Accept => ElicitResult::new(ElicitationAction::Accept)
                .with_content(Value::Object(answer.content.unwrap_or_default())),
            ElicitAction::Cancel => ElicitResult::new(ElicitationAction::Cancel),
            _ => declined(),
        },
        Err(why) => {
            tracing::warn!("MCP server {server} asked for input: declined, {why}");
            declined()
        }
    }
}

/// The answer to a `sampling/createMessage` of server `server`, asked during the call of
/// `asker`: the host's model's completion, or an error that says why not.
pub(crate) async fn sample(
    asker: Option<Asker>,
    server: &str,
    params: CreateMessageRequestParams,
) -> Result<CreateMessageResult, ErrorData> {
    let refused = |message: String| {
        tracing::warn!("{message}");
        ErrorData::new(ErrorCode(-1), message, None)
    };
    let Some(asker) = asker else {
        return Err(refused(format!(
            "MCP server '{server}' asked for a model's completion (sampling) while none of its \
             tools was being called: declined (no one to approve it)"
        )));
    };
    let request = sample_request(&params).map_err(|why| {
        refused(format!(
            "MCP server '{server}' asked for a completion this host cannot give: {why}"
        ))
    })?;
    let sampled = (asker.sample)(server.to_owned(), request)
        .await
        .map_err(|e| ErrorData::new(ErrorCode(-1), e.message().to_owned(), None))?;
    let result = json!({
        "role": "assistant",
        "content": {"type": "text", "text": sampled.text},
        "model": sampled.model,
        "stopReason": sampled.stop_reason.unwrap_or_else(|| "endTurn".to_owned()),
    });
    serde_json::from_value(result)
        .map_err(|e| ErrorData::internal_error(format!("sampling result: {e}"), None))
}

/// The conversation of `params` as a plugin's [`SampleRequest`]: text only (an image, audio
/// or a tool use is refused, the host's model is asked in text).
fn sample_request(params: &CreateMessageRequestParams) -> Result<SampleRequest, String> {
    let value = serde_json::to_value(params).map_err(|e| e.to_string())?;
    let mut messages = Vec::new();
    for message in value["messages"].as_array().into_iter().flatten() {
        let blocks = match &message["content"] {
            Value::Array(blocks) => blocks.clone(),
            block => vec![block.clone()],
        };
        let mut text = Vec::new();
        for block in blocks {
            match (block["type"].as_str(), block["text"].as_str()) {
                (Some("text"), Some(t)) => text.push(t.to_owned()),
                (kind, _) => {
                    return Err(format!(
                        "a message holds {} content; only text is sent to the model",
                        kind.unwrap_or("unknown")
                    ));
                }
            }
        }
        let mut one = SampleMessage::user(text.join("\n"));
        if message["role"] == "assistant" {
            one.role = SampleRole::Assistant;
        }
        messages.push(one);
    }
    if messages.is_empty() {
        return Err("no message".to_owned());
    }
    let mut request = SampleRequest::new(String::new(), params.max_tokens);
    request.messages = messages;
    request.system_prompt = params.system_prompt.clone();
    Ok(request)
}
