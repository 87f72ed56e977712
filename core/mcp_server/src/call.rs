//! One `tools/call`: the full lifecycle on an agent of its own, with progress notifications,
//! cancellation and the result masked.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use rmcp::model::{CallToolRequestParams, CallToolResult, ContentBlock};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::Value;

use super::approval::{ElicitationApprover, RoundTripApprover};
use super::asker::{ClientAsker, LogThreshold, TaskQuestions};
use super::escalate::Escalation;
use super::progress::Progress;
use super::round_trip::RoundTrip;
use toolhost::Agent;
use toolhost::Host;

/// The name of the agents that run the calls of MCP clients (in the log, the audit and
/// intervention messages).
pub const AGENT_NAME: &str = "mcp";

/// How a session's calls are approved.
pub(crate) struct Approvals<'a> {
    /// The tools approved for the session.
    pub(crate) session: &'a Arc<Mutex<HashSet<String>>>,
    /// Why the client cannot be asked, if it cannot.
    pub(crate) unavailable: Option<&'static str>,
    /// `--yes`: asks for `write` tools are approved.
    pub(crate) yes_to_writes: bool,
    /// The least severe log level the client wants.
    pub(crate) log_threshold: &'a Arc<LogThreshold>,
    /// A 2026-07-28 client's call: its approval and the tool's questions are asked through
    /// this round trip.
    pub(crate) round: Option<Arc<RoundTrip>>,
    /// A call run as a task: the tool's questions are asked in the task.
    pub(crate) task: Option<TaskQuestions>,
    /// A call that becomes a task once it has taken the client's answers.
    pub(crate) escalation: Option<Arc<Escalation>>,
}

/// Runs one call and turns its outcome into a result: the response's message as a text block,
/// then its content blocks in order and its structured content, or the error's kind and
/// message with `isError`. All of it is masked.
///
/// Each call runs on a fresh [`Agent`], dropped when it ends: its history and log never grow
/// past one call, its progress goes to this call's token, and a cancellation stops this call
/// only. What outlives a call (approvals "for this session") is kept by the session.
pub(crate) async fn call(
    host: &Arc<Host>,
    profile: &str,
    approvals: Approvals<'_>,
    request: CallToolRequestParams,
    context: RequestContext<RoleServer>,
) -> Result<CallToolResult, rmcp::ErrorData> {
    let called = call_with_kind(host, profile, approvals, request, context).await;
    called.map(|(result, _)| result)
}

/// [`call`], with the kind of the tool's error when it failed (a task reports an
/// `internal` one, a bug or a crash of plugin code, as a failed task).
pub(crate) async fn call_with_kind(
    host: &Arc<Host>,
    profile: &str,
    approvals: Approvals<'_>,
    request: CallToolRequestParams,
    context: RequestContext<RoleServer>,
) -> Result<(CallToolResult, Option<plugin_api::ErrorKind>), rmcp::ErrorData> {
    let progress = Progress::new(&context.peer, context.meta.get_progress_token());
    let output = progress.output.clone();
    let agent = match Agent::with_output(host.clone(), AGENT_NAME, profile, output) {
        Ok(agent) => agent,
        Err(e) => {
            let result = CallToolResult::error(vec![ContentBlock::text(e.to_string())]);
            return Ok((result, None));
        }
    };
    if !super::tools::offered(&agent, &request.name) {
        let message = format!("Unknown tool: {}", super::echo::echoed(&request.name));
        return Err(rmcp::ErrorData::invalid_params(message, None));
    }
    let session = approvals.session.clone();
    match &approvals.round {
        Some(round) => agent.set_approver(Arc::new(RoundTripApprover::new(round.clone()))),
        None => {
            let peer = context.peer.clone();
            let approver = ElicitationApprover::new(peer, session, approvals.unavailable);
            agent.set_approver(Arc::new(approver));
        }
    }
    agent.serve_mcp_client(true);
    agent.set_asker(Arc::new(ClientAsker {
        peer: context.peer.clone(),
        threshold: approvals.log_threshold.clone(),
        unavailable: approvals.unavailable,
        round: approvals.round.clone(),
        task: approvals.task,
        escalation: approvals.escalation,
    }));
    agent.approve_writes(approvals.yes_to_writes);
    let args = request.arguments.map_or(Value::Null, Value::Object);
    let running = agent.call_tool(&request.name, args);
    tokio::pin!(running);
    let result = tokio::select! {
        result = &mut running => result,
        () = context.ct.cancelled() => {
            // `notifications/cancelled`: the lifecycle's intervention ends the call at once,
            // abandoning plugin code that does not return.
            tracing::info!("tool {}: cancelled by the client", request.name);
            agent.stop();
            running.await
        }
    };
    progress.finish().await;
    let secrets = host.secrets();
    let mut kind = None;
    let mut result = match result {
        Ok(response) => success(&secrets, response),
        Err(e) => {
            let e = secrets.mask_error(&e);
            kind = Some(e.kind());
            let text = format!("{} error: {}", e.kind(), e.message());
            CallToolResult::error(vec![ContentBlock::text(text)])
        }
    };
    // A record of the call that could not be written: the client is told, in the result.
    if let Some(e) = agent.audit_failure() {
        let text = secrets.mask_owned(e.to_string()).into_inner();
        let mut meta = rmcp::model::JsonObject::new();
        meta.insert(AUDIT_ERROR_META.to_owned(), Value::String(text));
        result.meta = Some(rmcp::model::MetaObject(meta));
    }
    Ok((result, kind))
}

/// A response as a result: the message as a text block (left out when empty and followed by
/// blocks), each content block, the structured content; every string masked.
fn success(secrets: &toolhost::Secrets, response: toolhost::Response) -> CallToolResult {
    let mut blocks = Vec::with_capacity(1 + response.content.len());
    if !response.message.is_empty() || response.content.is_empty() {
        let text = secrets.mask_owned(response.message).into_inner();
        blocks.push(ContentBlock::text(text));
    }
    for block in response.content {
        let json = serde_json::to_value(&block).unwrap_or_default();
        let json = secrets.mask_value(json).into_inner();
        match serde_json::from_value::<ContentBlock>(json) {
            Ok(block) => blocks.push(block),
            Err(e) => blocks.push(ContentBlock::text(format!(
                "[a content block MCP cannot carry: {e}]"
            ))),
        }
    }
    let mut result = CallToolResult::success(blocks);
    result.structured_content = response
        .structured_content
        .map(|value| secrets.mask_value(value).into_inner());
    result
}

/// The key of a call result's `_meta` that holds, when the call's audit record could not be
/// written, why (one line).
pub const AUDIT_ERROR_META: &str = "toolhost/audit_error";
