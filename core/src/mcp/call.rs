//! One attempt of an MCP tool's call: `tools/call` with a progress token, the server's progress
//! as the call's progress, `notifications/cancelled` at the deadline or an intervention, and
//! the result as a [`Response`] (or a repairable error for `isError`).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientRequest, ContentBlock,
    InputRequest, InputRequiredResult, InputResponses, ProgressToken, ServerResult,
};
use rmcp::service::{PeerRequestOptions, ServiceError};
use serde_json::{Map, Value};

use super::handler::ProgressRoutes;
use super::server::Server;
use super::tool::McpTool;
use crate::secrets::Secrets;
use crate::telemetry;
use plugin_api::Response;
use plugin_api::ToolError;

/// The most progress notifications of one call shown per second: those in between are
/// coalesced (the latest is shown when its turn comes, the others are dropped).
pub(crate) const PROGRESS_PER_SECOND: u32 = 10;

/// The most `InputRequiredResult` rounds of one call (MCP 2026-07-28): a server that keeps
/// asking past them fails the call.
const MAX_INPUT_ROUNDS: usize = 16;

/// Stops routing a call's progress when the attempt ends, however it ends.
struct Route<'a>(&'a ProgressRoutes, ProgressToken);

impl Drop for Route<'_> {
    fn drop(&mut self) {
        self.0.unregister(&self.1);
    }
}

impl McpTool {
    /// One `tools/call` of this tool with `args` (the server started first if it must be):
    /// each progress notification's text goes to `progress`; at `timeout`, or when `interrupt`
    /// completes, the server is told to stop (`notifications/cancelled`) and the call fails. A
    /// form the server asks to fill in meanwhile goes to `asker`.
    pub(crate) async fn call<P: Future<Output = ()>>(
        &self,
        secrets: &Arc<Secrets>,
        args: &Map<String, Value>,
        timeout: Option<Duration>,
        mut progress: impl FnMut(String) -> P,
        interrupt: impl Future<Output = ToolError>,
        asker: super::Asker,
    ) -> Result<Response, ToolError> {
        let server = self.running_server()?;
        let deadline = crate::config::numbers::later(
            tokio::time::Instant::now(),
            timeout.unwrap_or(Duration::MAX),
        );
        let wait = deadline.saturating_duration_since(tokio::time::Instant::now());
        let peer = server.ready(secrets, wait).await?;
        // A form the server sends during the call goes to whoever can answer for it.
        let _asking = server.asking(asker);
        // The request's own span (kind client): the server's span is its child.
        let span = telemetry::McpClientSpan::tools_call(&self.server_name, &self.remote);
        let sent = async {
            // A 2026-07-28 server asks with an `InputRequiredResult`: answered through the same
            // asker as a 2025-11-25 server's requests, then the call is sent again (a new id)
            // with the answers and the exact `requestState` it gave, if any.
            let mut retry: Option<(Option<InputResponses>, Option<String>)> = None;
            let mut interrupt = std::pin::pin!(interrupt);
            for _round in 0..MAX_INPUT_ROUNDS {
                let request = self.request(args, retry.take());
                let options = PeerRequestOptions::no_options();
                let mut handle = match peer.send_cancellable_request(request, options).await {
                    Ok(handle) => handle,
                    Err(e) => return Err(self.lost(&server, &e.to_string())),
                };
                let (to, mut notes) = tokio::sync::watch::channel(String::new());
                notes.mark_unchanged();
                server.progress.register(handle.progress_token.clone(), to);
                let _route = Route(&server.progress, handle.progress_token.clone());
                // After a progress text is shown, the next waits for its turn.
                let gap = Duration::from_secs(1) / PROGRESS_PER_SECOND;
                let mut turn = std::pin::pin!(tokio::time::sleep(Duration::ZERO));
                let mut waiting = false;
                let ended = loop {
                    tokio::select! {
                        answer = &mut handle.rx => break Ok(answer),
                        () = &mut turn, if waiting => waiting = false,
                        Ok(()) = notes.changed(), if !waiting => {
                            let text = notes.borrow_and_update().clone();
                            progress(text).await;
                            turn.as_mut().reset(tokio::time::Instant::now() + gap);
                            waiting = true;
                        }
                        () = tokio::time::sleep_until(deadline) => {
                            let limit = timeout.unwrap_or_default();
                            break Err(crate::governance::timed_out(&self.name, limit));
                        }
                        e = &mut interrupt => break Err(e),
                    }
                };
                match ended {
                    Ok(Ok(Ok(ServerResult::InputRequiredResult(asked)))) => {
                        retry = Some(self.answer_inputs(&server, asked).await?);
                    }
                    Ok(answer) => return self.outcome(&server, answer),
                    Err(e) => {
                        // The server is told to stop working on it.
                        let reason = format!("{} ({})", e.message(), e.kind());
                        let _ = handle.cancel(Some(reason)).await;
                        return Err(e);
                    }
                }
            }
            Err(self.asked_too_often())
        };
        let sent = span.span().run(sent).await;
        span.ended(&sent);
        sent
    }
}

impl McpTool {
    /// The tool's server, unless it was shut down.
    fn running_server(&self) -> Result<Arc<Server>, ToolError> {
        self.server.upgrade().ok_or_else(|| {
            let name = &self.server_name;
            ToolError::dependency(format!("MCP server '{name}' was shut down"))
        })
    }

    /// One round's `tools/call` request: the arguments and, on a retry, the answers and the
    /// exact `requestState` the server gave; the trace goes on at the server
    /// (`_meta.traceparent`), when it is exported.
    fn request(
        &self,
        args: &Map<String, Value>,
        retry: Option<(Option<InputResponses>, Option<String>)>,
    ) -> ClientRequest {
        let mut params =
            CallToolRequestParams::new(self.remote.clone()).with_arguments(args.clone());
        if let Some((responses, state)) = retry {
            params.input_responses = responses;
            params.request_state = state;
        }
        if let Some(traceparent) = telemetry::traceparent() {
            rmcp::model::RequestParamsMeta::set_traceparent(&mut params, &traceparent);
        }
        ClientRequest::CallToolRequest(CallToolRequest::new(params))
    }

    /// A server that kept asking for input past [`MAX_INPUT_ROUNDS`] rounds.
    fn asked_too_often(&self) -> ToolError {
        ToolError::dependency(format!(
            "MCP server '{}' asked for input {MAX_INPUT_ROUNDS} times in the call of {} without answering it",
            self.server_name, self.name
        ))
    }
}

/// What the server's answer channel gave.
type Answer = Result<Result<ServerResult, ServiceError>, tokio::sync::oneshot::error::RecvError>;

impl McpTool {
    /// The answers to a 2026-07-28 server's `InputRequiredResult`, each asked as its
    /// request of 2025-11-25 would be (forms of whoever answers for the call, samplings of the
    /// host's model), and its `requestState` as given.
    async fn answer_inputs(
        &self,
        server: &Server,
        asked: InputRequiredResult,
    ) -> Result<(Option<InputResponses>, Option<String>), ToolError> {
        let name = &server.config.name;
        let mut responses = InputResponses::new();
        for (key, request) in asked.input_requests.unwrap_or_default() {
            let answer = match request {
                InputRequest::Elicitation(request) => {
                    let answer = super::ask::elicit(server.asker(), name, request.params).await;
                    serde_json::to_value(answer)
                }
                InputRequest::CreateMessage(request) => {
                    let answer = super::ask::sample(server.asker(), name, request.params).await;
                    let answer = answer.map_err(|e| {
                        ToolError::dependency(format!(
                            "MCP server '{name}' asked for a completion in the call of {}: {}",
                            self.name, e.message
                        ))
                    })?;
                    serde_json::to_value(answer)
                }
                // The folders the user shares with this server (none by default).
                InputRequest::ListRoots(_) => {
                    let roots = super::handler::shared_roots(&server.config);
                    Ok(serde_json::json!({"roots": roots}))
                }
                _ => {
                    return Err(ToolError::dependency(format!(
                        "MCP server '{name}' asked for input this client does not know in the call of {}: update toolhost",
                        self.name
                    )))
                }
            };
            let answer = answer.map_err(|e| ToolError::internal(format!("an answer: {e}")))?;
            responses.insert(key, answer);
        }
        let responses = (!responses.is_empty()).then_some(responses);
        Ok((responses, asked.request_state))
    }

    /// The call's result from the server's answer.
    fn outcome(&self, server: &Server, answer: Answer) -> Result<Response, ToolError> {
        match answer {
            Ok(Ok(ServerResult::CallToolResult(mut result))) => {
                server.call_succeeded();
                echoes_masked(&mut result);
                into_response(&self.name, result, self.output_schema)
            }
            Ok(Ok(_)) => Err(ToolError::dependency(format!(
                "MCP server '{}' answered the call of {} with something other than a tool result",
                self.server_name, self.name
            ))),
            Ok(Err(ServiceError::McpError(e))) => Err(ToolError::dependency(format!(
                "MCP server '{}' refused the call of {}: {} (code {})",
                self.server_name, self.name, e.message, e.code.0
            ))),
            Ok(Err(e)) => Err(self.lost(server, &e.to_string())),
            Err(_) => Err(self.lost(server, "its connection closed")),
        }
    }

    /// The server went away during a call: it is marked failed (started again at the next
    /// use) and the error names it.
    fn lost(&self, server: &Server, why: &str) -> ToolError {
        // A stdio server's connection ends with its process; an HTTP server's answer may
        // fail alone (too large, cut, not JSON) while the server runs on.
        let (what, again) = match &server.config.transport {
            super::config::Transport::Stdio { .. } => ("exited during", "started"),
            super::config::Transport::Http { .. } => (
                "broke its connection (its answer could not be read) during",
                "connected",
            ),
        };
        let why = crate::package::Shown(why);
        server.failed(format!("the server {what} a call of {} ({why})", self.name));
        ToolError::dependency(format!(
            "MCP server '{}' {what} the call of {} ({why}); it is {again} again at the next call",
            self.server_name, self.name
        ))
    }
}

/// `result` with every value this process masks in its log lines masked (an access token the
/// server echoes, a model's API key): the host's own secrets are masked later, by the call's
/// lifecycle, with the others.
fn echoes_masked(result: &mut CallToolResult) {
    for block in &mut result.content {
        if let ContentBlock::Text(text) = block {
            if let std::borrow::Cow::Owned(masked) = crate::secrets::mask_log_line(&text.text) {
                text.text = masked;
            }
        }
    }
    if let Some(structured) = &mut result.structured_content {
        crate::secrets::mask_value_in_logs(structured);
    }
}

/// How a text block says what the structured content says.
#[derive(PartialEq)]
enum Said {
    /// The same JSON.
    Same,
    /// The structured content only wraps the text in an object of one member
    /// (`{"result": text}` as the Python SDK wraps a plain return value, `{"content": text}` as
    /// the filesystem server gives a file).
    Wrapped,
}

fn says(text: &str, structured: &Value) -> Option<Said> {
    let parsed = serde_json::from_str::<Value>(text).ok();
    if parsed.as_ref() == Some(structured) {
        return Some(Said::Same);
    }
    let object = structured.as_object().filter(|o| o.len() == 1)?;
    object
        .values()
        .any(|inner| inner.as_str() == Some(text) || parsed.as_ref() == Some(inner))
        .then_some(Said::Wrapped)
}

/// A result as the model sees it, once. When a text block says what the structured content
/// says ([`says`]), the model gets one of them: the text when the structured content only
/// wraps it; for the same JSON, the structured content when the tool declares an
/// `outputSchema` (`structured_first`), else the text. Other texts and structured content
/// become the message; images and other blocks become the response's content blocks (a block
/// the contract cannot read goes to `additional.content`), and the structured content (whole)
/// its structured content. `isError` is a
/// repairable error with the text.
///
/// Each text is moved out of the result, never copied (one text block is the message itself):
/// a long answer costs the host its parsed copy and nothing more, and the call's output limit
/// then keeps only its start (`max_output`).
pub(crate) fn into_response(
    name: &str,
    result: CallToolResult,
    structured_first: bool,
) -> Result<Response, ToolError> {
    let mut texts: Vec<String> = Vec::new();
    let mut blocks: Vec<plugin_api::Content> = Vec::new();
    let mut other: Vec<Value> = Vec::new();
    for block in result.content {
        match block {
            ContentBlock::Text(text) => texts.push(text.text),
            block => {
                let json = serde_json::to_value(&block).unwrap_or(Value::Null);
                match serde_json::from_value::<plugin_api::Content>(json.clone()) {
                    Ok(block) => blocks.push(block),
                    Err(_) => other.push(json),
                }
            }
        }
    }
    let whole = result.structured_content;
    let mut structured = whole.as_ref();
    if let Some(value) = structured {
        let said: Vec<Option<Said>> = texts.iter().map(|t| says(t, value)).collect();
        if said.contains(&Some(Said::Wrapped))
            || (!structured_first && said.iter().any(Option::is_some))
        {
            structured = None; // the text says it
        } else if said.contains(&Some(Said::Same)) {
            let mut said = said.into_iter();
            texts.retain(|_| said.next().flatten().is_none()); // the structured form says it
        }
    }
    let mut message = match texts.len() {
        1 => texts.pop().unwrap_or_default(),
        _ => texts.join("\n"),
    };
    drop(texts);
    if let Some(structured) = structured {
        if !message.is_empty() {
            message.push('\n');
        }
        message.push_str(&structured.to_string());
    }
    if result.is_error == Some(true) {
        let message = match message.trim() {
            "" => "(no text)",
            text => text,
        };
        return Err(ToolError::repairable(format!(
            "tool {name} failed: {message}"
        )));
    }
    let mut response = Response::text(message);
    response.content = blocks;
    response.structured_content = whole;
    if !other.is_empty() {
        let mut additional = Map::new();
        additional.insert("content".to_owned(), Value::Array(other));
        response.additional = Some(additional);
    }
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(texts: &[&str], structured: Option<Value>) -> CallToolResult {
        let content = texts.iter().map(|t| ContentBlock::text(*t)).collect();
        let mut result = CallToolResult::success(content);
        result.structured_content = structured;
        result
    }

    #[test]
    fn a_result_said_twice_reaches_the_model_once() {
        let file = "line 1\nline 2\n";
        let wrapped = serde_json::json!({"content": file});
        let text = into_response("t", result(&[file], Some(wrapped.clone())), false);
        assert_eq!(text.unwrap().message, file, "no outputSchema: the text");
        let json = into_response("t", result(&[file], Some(wrapped.clone())), true);
        assert_eq!(json.unwrap().message, file, "only wrapped: the text");
        let same = serde_json::json!({"a": 1, "b": [2]});
        let text = same.to_string();
        let spaced = serde_json::to_string_pretty(&same).unwrap();
        let once = into_response("t", result(&[&spaced], Some(same.clone())), true).unwrap();
        assert_eq!(once.message, text, "outputSchema: the structured form");
        let once = into_response("t", result(&[&spaced], Some(same.clone())), false).unwrap();
        assert_eq!(once.message, spaced, "no outputSchema: the text");
        let other = into_response("t", result(&["note"], Some(same.clone())), true).unwrap();
        assert_eq!(other.message, format!("note\n{same}"), "different: both");
    }
}
