//! What a tool asks during an MCP call, asked of the session's client: a log message as
//! `notifications/message` (at or above the level the client set with `logging/setLevel`), an
//! elicitation as `elicitation/create`, a sampling as `sampling/createMessage`, the client's
//! roots as `roots/list`.

// Logging and sampling are deprecated by SEP-2577 (2026-07-28), and still what clients of
// 2025-06-18 and 2025-11-25 speak.
#![allow(deprecated)]

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use plugin_api::ask::{Ask, ElicitAction, Elicited, LogLevel, SampleRole, Sampled};
use plugin_api::ToolError;
use rmcp::model::{
    CreateMessageRequestParams, ElicitRequestParams, InputRequest, LoggingLevel,
    LoggingMessageNotificationParam,
};
use rmcp::service::{ElicitationMode, Peer, RoleServer};
use serde_json::{json, Value};
use toolhost::{Answering, Asker};

use crate::escalate::Escalation;
use crate::round_trip::{self, RoundTrip};
use crate::tasks::Tasks;

/// How long the user has to answer an elicitation, and the client's model a sampling.
const ASK_TIMEOUT: Duration = Duration::from_secs(300);

/// The least severe level a session's client wants log messages at: `u8::MAX` until it sets
/// one (then every message is sent, as the MCP SDKs do).
#[derive(Debug)]
pub(crate) struct LogThreshold(AtomicU8);

impl Default for LogThreshold {
    fn default() -> Self {
        Self(AtomicU8::new(u8::MAX))
    }
}

impl LogThreshold {
    /// The threshold of one 2026-07-28 request: the `logLevel` of its `_meta`, and without one
    /// no log message at all, as that version says.
    pub(crate) fn of_request(level: Option<LoggingLevel>) -> Self {
        // One above `emergency`: nothing is sent.
        Self(AtomicU8::new(
            level.map_or(rank(LoggingLevel::Emergency) + 1, rank),
        ))
    }

    /// Sets it (`logging/setLevel`).
    pub(crate) fn set(&self, level: LoggingLevel) {
        self.0.store(rank(level), Ordering::SeqCst);
    }

    /// Whether a message at `level` is sent.
    fn sends(&self, level: LoggingLevel) -> bool {
        match self.0.load(Ordering::SeqCst) {
            u8::MAX => true,
            least => rank(level) >= least,
        }
    }
}

fn rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

fn logging_level(level: LogLevel) -> LoggingLevel {
    match level {
        LogLevel::Debug => LoggingLevel::Debug,
        LogLevel::Info => LoggingLevel::Info,
        LogLevel::Notice => LoggingLevel::Notice,
        LogLevel::Warning => LoggingLevel::Warning,
        LogLevel::Error => LoggingLevel::Error,
        LogLevel::Critical => LoggingLevel::Critical,
        LogLevel::Alert => LoggingLevel::Alert,
        _ => LoggingLevel::Emergency,
    }
}

/// Asks one session's client on behalf of the tools it calls.
pub(crate) struct ClientAsker {
    pub(crate) peer: Peer<RoleServer>,
    pub(crate) threshold: Arc<LogThreshold>,
    /// Why the transport cannot carry a request to the client, if it cannot (stateless HTTP).
    pub(crate) unavailable: Option<&'static str>,
    /// A 2026-07-28 client's call: elicitations and samplings are asked through its round
    /// trip ([`crate::round_trip`]) instead of as requests.
    pub(crate) round: Option<Arc<RoundTrip>>,
    /// A call run as a task: elicitations and samplings are asked in the task's
    /// `inputRequests` and answered with `tasks/update` ([`crate::tasks`]).
    pub(crate) task: Option<TaskQuestions>,
    /// A call that becomes a task once it has taken the client's answers
    /// ([`crate::escalate`]): its questions come through the task from then on.
    pub(crate) escalation: Option<Arc<Escalation>>,
}

/// The task a call runs as, whose `inputRequests` carry the tool's questions.
#[derive(Clone)]
pub(crate) struct TaskQuestions {
    pub(crate) tasks: Arc<Tasks>,
    pub(crate) id: String,
}

impl Asker for ClientAsker {
    fn ask(&self, tool: &str, request: Ask) -> Answering {
        let peer = self.peer.clone();
        let tool = tool.to_owned();
        match request {
            Ask::Log { level, message } => {
                let level = logging_level(level);
                if !self.threshold.sends(level) {
                    return Box::pin(async { Ok(Value::Null) });
                }
                let mut param = LoggingMessageNotificationParam::new(level, Value::String(message));
                param.logger = Some(tool);
                Box::pin(async move {
                    #[allow(deprecated)] // still what 2025-11-25 clients read
                    if let Err(e) = peer.notify_logging_message(param).await {
                        tracing::debug!("log notification not sent: {e}");
                    }
                    Ok(Value::Null)
                })
            }
            Ask::Elicit {
                message, schema, ..
            } if self.task().is_some() => {
                let params = json!({"mode": "form", "message": message, "requestedSchema": schema});
                let answer = self.in_task(&tool, "elicit", "elicitation/create", params);
                Box::pin(async move { answer.await.map(|a| elicited(&a)) })
            }
            Ask::Sample(sample) if self.task().is_some() => {
                let params = sample_params(&sample);
                let answer = self.in_task(&tool, "sample", "sampling/createMessage", params);
                Box::pin(async move { answer.await.map(|a| sampled(&a)) })
            }
            Ask::Roots { .. } if self.task().is_some() => {
                let answer = self.in_task(&tool, "roots", "roots/list", json!({}));
                Box::pin(answer)
            }
            Ask::Elicit {
                message,
                schema,
                key,
            } if self.round.is_some() => {
                let params = json!({"mode": "form", "message": message, "requestedSchema": schema});
                let answer = self.round_trip(&tool, "elicit", key, "elicitation/create", params);
                Box::pin(async move { answer.map(|a| elicited(&a)) })
            }
            Ask::Sample(sample) if self.round.is_some() => {
                let params = sample_params(&sample);
                let key = sample.key.clone();
                let answer =
                    self.round_trip(&tool, "sample", key, "sampling/createMessage", params);
                Box::pin(async move { answer.map(|a| sampled(&a)) })
            }
            Ask::Roots { key } if self.round.is_some() => {
                let answer = self.round_trip(&tool, "roots", key, "roots/list", json!({}));
                Box::pin(std::future::ready(answer))
            }
            Ask::Roots { .. } => {
                let unavailable = self.unavailable;
                Box::pin(async move { roots(&peer, &tool, unavailable).await })
            }
            Ask::Elicit {
                message, schema, ..
            } => {
                let unavailable = self.unavailable;
                Box::pin(async move { elicit(&peer, &tool, unavailable, message, schema).await })
            }
            Ask::Sample(sample) => {
                let unavailable = self.unavailable;
                Box::pin(async move { sample_of(&peer, &tool, unavailable, &sample).await })
            }
            _ => Box::pin(async move {
                Err(ToolError::dependency(format!(
                    "tool '{tool}' asked something this server does not know: update toolhost"
                )))
            }),
        }
    }
}

/// `roots/list` of the client (a 2025-11-25 request in the middle of the call).
async fn roots(
    peer: &Peer<RoleServer>,
    tool: &str,
    unavailable: Option<&'static str>,
) -> Result<Value, ToolError> {
    if let Some(why) = unavailable {
        return Err(cannot(tool, "roots", why));
    }
    let supported = peer
        .peer_info()
        .is_some_and(|info| info.capabilities.roots.is_some());
    if !supported {
        let why = "the MCP client does not support roots";
        return Err(cannot(tool, "roots", why));
    }
    let asking = peer.list_roots();
    let result = tokio::time::timeout(ASK_TIMEOUT, asking)
        .await
        .map_err(|_| ToolError::timeout("the MCP client did not list its roots"))?
        .map_err(|e| ToolError::dependency(format!("the MCP client's roots/list failed: {e}")))?;
    Ok(serde_json::to_value(&result).unwrap_or_default())
}

/// `sampling/createMessage` of the client (a 2025-11-25 request in the middle of the call).
async fn sample_of(
    peer: &Peer<RoleServer>,
    tool: &str,
    unavailable: Option<&'static str>,
    sample: &plugin_api::ask::SampleRequest,
) -> Result<Value, ToolError> {
    if let Some(why) = unavailable {
        return Err(cannot(tool, "sampling", why));
    }
    let supported = peer
        .peer_info()
        .is_some_and(|info| info.capabilities.sampling.is_some());
    if !supported {
        let why = "the MCP client does not support sampling";
        return Err(cannot(tool, "sampling", why));
    }
    let params: CreateMessageRequestParams = serde_json::from_value(sample_params(sample))
        .map_err(|e| ToolError::validation(format!("sampling request: {e}")))?;
    #[allow(deprecated)] // still what 2025-11-25 clients answer
    let asking = peer.create_message(params);
    let result = tokio::time::timeout(ASK_TIMEOUT, asking)
        .await
        .map_err(|_| ToolError::timeout("the MCP client's model did not answer"))?
        .map_err(|e| ToolError::dependency(format!("the MCP client's sampling failed: {e}")))?;
    Ok(sampled(&serde_json::to_value(&result).unwrap_or_default()))
}

/// `elicitation/create` in form mode.
async fn elicit(
    peer: &Peer<RoleServer>,
    tool: &str,
    unavailable: Option<&'static str>,
    message: String,
    schema: Value,
) -> Result<Value, ToolError> {
    if let Some(why) = unavailable {
        return Err(cannot(tool, "elicitation", why));
    }
    if !peer
        .supported_elicitation_modes()
        .contains(&ElicitationMode::Form)
    {
        let why = "the MCP client does not support elicitation";
        return Err(cannot(tool, "elicitation", why));
    }
    let params = json!({"mode": "form", "message": message, "requestedSchema": schema});
    let params: ElicitRequestParams = serde_json::from_value(params).map_err(|e| {
        ToolError::validation(format!(
            "tool '{tool}' asked with a schema MCP elicitation cannot carry: {e}"
        ))
    })?;
    let result = peer
        .create_elicitation_with_timeout(params, Some(ASK_TIMEOUT))
        .await
        .map_err(|e| ToolError::dependency(format!("the MCP client's elicitation failed: {e}")))?;
    Ok(elicited(&serde_json::to_value(&result).unwrap_or_default()))
}

/// An `ElicitResult` as the tool reads it.
fn elicited(result: &Value) -> Value {
    let action = match result["action"].as_str() {
        Some("accept") => ElicitAction::Accept,
        Some("decline") => ElicitAction::Decline,
        _ => ElicitAction::Cancel,
    };
    let content = match &result["content"] {
        Value::Object(map) => Some(map.clone()),
        _ => None,
    };
    serde_json::to_value(Elicited::new(action, content)).unwrap_or_default()
}

/// The params of `sampling/createMessage` for `sample`.
fn sample_params(sample: &plugin_api::ask::SampleRequest) -> Value {
    let messages: Vec<Value> = sample
        .messages
        .iter()
        .map(|m| {
            let role = match m.role {
                SampleRole::Assistant => "assistant",
                _ => "user",
            };
            json!({"role": role, "content": {"type": "text", "text": m.text}})
        })
        .collect();
    let mut params = json!({"messages": messages, "maxTokens": sample.max_tokens});
    if let Some(system) = &sample.system_prompt {
        params["systemPrompt"] = Value::String(system.clone());
    }
    params
}

/// A `CreateMessageResult` as the tool reads it.
fn sampled(result: &Value) -> Value {
    let text = match &result["content"] {
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        block => block["text"].as_str().unwrap_or_default().to_owned(),
    };
    let mut sampled = Sampled::new(text, result["model"].as_str().unwrap_or(""));
    sampled.stop_reason = result["stopReason"].as_str().map(str::to_owned);
    serde_json::to_value(sampled).unwrap_or_default()
}

impl ClientAsker {
    /// The client's answer to the tool's next request of `kind` in this call's round trip,
    /// or, without one yet, the request added to the round and an error that ends this run
    /// of the call (its result becomes the `InputRequiredResult`).
    fn round_trip(
        &self,
        tool: &str,
        kind: &'static str,
        key: Option<String>,
        method: &str,
        params: Value,
    ) -> Result<Value, ToolError> {
        let Some(round) = &self.round else {
            return Err(cannot(tool, kind, "no round trip"));
        };
        let id = key.unwrap_or_else(|| round.next_id(kind));
        if let Some(answer) = round.answer(&id).filter(|a| round_trip::fits(method, a)) {
            if let Some(escalation) = &self.escalation {
                escalation.took(&id);
            }
            return Ok(answer.clone());
        }
        let (what, request) = asked(Some(round), tool, kind, method, params)?;
        round.ask(id, request);
        Err(ToolError::dependency(format!(
            "tool '{tool}' waits for the MCP client's answer ({what}): the call is answered with an InputRequiredResult and runs again with the answer"
        )))
    }
}

impl ClientAsker {
    /// The task the call runs as, if it does (from its start, or since it took its answers).
    fn task(&self) -> Option<TaskQuestions> {
        let escalated = || self.escalation.as_ref()?.questions();
        self.task.clone().or_else(escalated)
    }

    /// The client's answer to the tool's question of `kind` in its task: asked in the task's
    /// `inputRequests`, answered by `tasks/update` within [`ASK_TIMEOUT`].
    fn in_task(
        &self,
        tool: &str,
        kind: &'static str,
        method: &str,
        params: Value,
    ) -> impl std::future::Future<Output = Result<Value, ToolError>> + Send + 'static + use<> {
        let asked = self.ask_in_task(tool, kind, method, params);
        let task = self.task();
        async move {
            let (key, answered) = asked?;
            match tokio::time::timeout(ASK_TIMEOUT, answered).await {
                Ok(Ok(answer)) => Ok(answer),
                Ok(Err(_)) => Err(ToolError::dependency(
                    "the task ended before the MCP client answered",
                )),
                Err(_) => {
                    if let Some(task) = task {
                        task.tasks.withdraw(&task.id, &key);
                    }
                    Err(ToolError::timeout(format!(
                        "the MCP client did not answer the task's input request '{key}' within {} s (tasks/update)",
                        ASK_TIMEOUT.as_secs()
                    )))
                }
            }
        }
    }

    /// Puts the question in the task's `inputRequests`: its key, and where its answer comes.
    fn ask_in_task(
        &self,
        tool: &str,
        kind: &'static str,
        method: &str,
        params: Value,
    ) -> Result<(String, tokio::sync::oneshot::Receiver<Value>), ToolError> {
        let Some(task) = self.task() else {
            return Err(cannot(tool, kind, "no task"));
        };
        let (what, request) = asked(self.round.as_deref(), tool, kind, method, params)?;
        task.tasks
            .ask(&task.id, kind, request)
            .ok_or_else(|| cannot(tool, what, "its task has ended"))
    }
}

/// The input request of the tool's question of `kind` (`elicit`, `sample`) with `method` and
/// `params`, and what it is called in messages; refused when the client of `round` did not
/// declare the capability, or when MCP cannot carry it.
fn asked(
    round: Option<&RoundTrip>,
    tool: &str,
    kind: &str,
    method: &str,
    params: Value,
) -> Result<(&'static str, InputRequest), ToolError> {
    let (what, supported) = match kind {
        "elicit" => ("elicitation", round.is_none_or(RoundTrip::elicits)),
        "roots" => ("roots", round.is_none_or(RoundTrip::lists_roots)),
        _ => ("sampling", round.is_none_or(RoundTrip::samples)),
    };
    if !supported {
        if let Some(round) = round {
            round.lacks(what);
        }
        let why = format!("the MCP client does not support {what}");
        return Err(cannot(tool, what, &why));
    }
    let request = round_trip::input_request(method, params).map_err(|e| {
        ToolError::validation(format!(
            "tool '{tool}' asked something MCP cannot carry: {e}"
        ))
    })?;
    Ok((what, request))
}

fn cannot(tool: &str, what: &str, why: &str) -> ToolError {
    ToolError::dependency(format!(
        "tool '{tool}' needs {what}, which this MCP session cannot do: {why}"
    ))
}
