//! Agent Zero's message loop: ask the model, read the tool request in its reply, run the tool,
//! and go on until a tool ends the loop (design section 5).

use std::sync::Arc;

use plugin_api::points::{
    AGENT_INIT, ERROR_FORMAT, HIST_ADD_BEFORE, HIST_ADD_TOOL_RESULT, MESSAGE_LOOP_END,
    MESSAGE_LOOP_START, MONOLOGUE_END, MONOLOGUE_START, SYSTEM_PROMPT,
};
use serde_json::{json, Map, Value};

use crate::agent::{HistoryMessage, Role};
use crate::context::CallContext;
use crate::model::{Model, ModelError, ModelRequest};
use crate::output::OutputKind;
use crate::reply::parse_reply;
use crate::{Agent, ErrorKind, ToolError};

/// Limits of one monologue.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LoopOptions {
    /// Iterations (model replies) before the loop gives up. Default 25.
    pub max_iterations: usize,
    /// Unusable replies in a row (no tool request, or the same reply again) before the loop
    /// gives up. Default 3.
    pub max_unusable: usize,
}

impl Default for LoopOptions {
    fn default() -> Self {
        Self {
            max_iterations: 25,
            max_unusable: 3,
        }
    }
}

impl LoopOptions {
    /// Sets [`max_iterations`](Self::max_iterations).
    pub fn with_max_iterations(mut self, n: usize) -> Self {
        self.max_iterations = n.max(1);
        self
    }

    /// Sets [`max_unusable`](Self::max_unusable).
    pub fn with_max_unusable(mut self, n: usize) -> Self {
        self.max_unusable = n.max(1);
        self
    }
}

/// Why a monologue ended without a final answer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoopError {
    /// Too many unusable replies in a row.
    #[error("the model gave {0} unusable replies in a row (no tool request it could read, or the same reply again); stopping")]
    Unusable(usize),
    /// No final answer within the iteration limit.
    #[error(
        "no final answer after {0} iterations; stopping (raise the limit with --max-iterations)"
    )]
    IterationLimit(usize),
    /// The model gave no reply.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// A tool failed with an error the model cannot repair.
    #[error("tool '{tool}' failed ({} error): {}", .error.kind(), .error.message())]
    Tool {
        /// The request (`name[:method]`).
        tool: String,
        /// The error.
        error: ToolError,
    },
    /// An extension failed.
    #[error("extension point {point}: {}", .error.message())]
    Extension {
        /// The point.
        point: &'static str,
        /// The error.
        error: ToolError,
    },
    /// The user stopped the agent.
    #[error("stopped by the user")]
    Stopped,
}

/// Marks a monologue as running while it lives, even if its future is dropped mid-way.
struct Running<'a>(Option<&'a Agent>);

impl<'a> Running<'a> {
    fn start(agent: &'a Agent) -> Self {
        agent.set_running(true);
        Self(Some(agent))
    }

    /// Ends it; returns the messages still queued.
    fn end(mut self) -> Vec<String> {
        self.0
            .take()
            .map(|a| a.set_running(false))
            .unwrap_or_default()
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        if let Some(agent) = self.0.take() {
            agent.cancel_running(); // cancelled: the queued messages wait for the next one
        }
    }
}

/// The warning for a reply without a readable tool request.
pub const MISFORMAT_WARNING: &str = "Your reply was not a valid tool request. Reply with exactly one JSON object: {\"thoughts\": [...], \"headline\": \"...\", \"tool_name\": \"...\", \"tool_args\": {...}}";

/// The warning for a reply identical to the previous one.
pub const REPEAT_WARNING: &str = "You repeated your previous reply. Do something else: use the result you already have, call another tool, or answer with the response tool.";

impl Agent {
    /// Runs one monologue: `message` from the user, then model replies and tool calls until a
    /// tool ends the loop (`break_loop`, normally the `response` tool); returns that message.
    ///
    /// Each iteration: checkpoint (waits while paused; messages sent with
    /// [`interject`](Self::interject) join the history), `message_loop_start`, the system prompt
    /// (`system_prompt`), the model's reply (streamed, secrets masked), the reply in the
    /// history, then the tool request: a reply without one is answered with a "misformat"
    /// warning, the same reply twice with a "repeat" warning; after
    /// [`max_unusable`](LoopOptions::max_unusable) of those in a row the loop gives up. A
    /// repairable or validation error goes back to the model as a warning (through
    /// `error_format`) and the loop goes on; an intervention ends the iteration (an interrupted
    /// tool's progress is kept as its result); any other error ends the loop.
    pub async fn monologue(
        self: &Arc<Self>,
        model: &dyn Model,
        message: &str,
        options: &LoopOptions,
    ) -> Result<String, LoopError> {
        if self.first_init() {
            self.fire(
                AGENT_INIT,
                json!({"agent": self.name(), "profile": self.profile()}),
            )
            .await?;
        }
        let shown = self.host.secrets().mask(message).into_owned();
        self.fire(MONOLOGUE_START, json!({ "message": shown }))
            .await?;
        self.add_log(
            "user",
            "User message".to_owned(),
            message.to_owned(),
            Map::new(),
            true,
        );
        self.print(OutputKind::User, || format!("User: {message}"));
        let running = Running::start(self);
        let result = match self.hist_add(Role::User, message.to_owned()).await {
            Ok(()) => self.iterate(model, options).await,
            Err(e) => Err(e),
        };
        // Messages that arrived after the last checkpoint are kept, not lost.
        for late in running.end() {
            self.add_log(
                "user",
                "User message (arrived after the loop ended)".to_owned(),
                late.clone(),
                Map::new(),
                true,
            );
            self.add_history(HistoryMessage {
                role: Role::User,
                content: late,
                tool_name: None,
                additional: None,
            });
        }
        self.flush_session_log();
        let end = json!({"result": result.as_ref().ok()});
        let ended = self.fire(MONOLOGUE_END, end).await;
        match (result, ended) {
            (Err(e), _) => {
                self.add_log(
                    "error",
                    "The loop ended".to_owned(),
                    e.to_string(),
                    Map::new(),
                    true,
                );
                Err(e)
            }
            (Ok(_), Err(e)) => Err(e),
            (Ok(answer), Ok(_)) => Ok(answer),
        }
    }

    async fn iterate(
        self: &Arc<Self>,
        model: &dyn Model,
        options: &LoopOptions,
    ) -> Result<String, LoopError> {
        let mut unusable = 0;
        let mut last_reply: Option<String> = None;
        for iteration in 1..=options.max_iterations {
            self.checkpoint().await?;
            self.fire(MESSAGE_LOOP_START, json!({ "iteration": iteration }))
                .await?;
            let reply = self.ask(model).await?;
            let request = parse_reply(&reply);
            let repeated = last_reply.as_deref() == Some(reply.as_str());
            last_reply = Some(reply);
            let Some(request) = request.filter(|_| !repeated) else {
                unusable += 1;
                let warning = if repeated {
                    REPEAT_WARNING
                } else {
                    MISFORMAT_WARNING
                };
                self.warn(warning.to_owned()).await?;
                self.fire(MESSAGE_LOOP_END, json!({ "iteration": iteration }))
                    .await?;
                if unusable >= options.max_unusable {
                    return Err(LoopError::Unusable(unusable));
                }
                continue;
            };
            unusable = 0;
            match self.call_tool(&request.tool, request.args).await {
                Ok(response) => {
                    let result = json!({"tool_name": request.tool, "result": response.message});
                    self.fire(HIST_ADD_TOOL_RESULT, result).await?;
                    // A message that arrived while the answer was being given is answered too.
                    if response.break_loop && !self.has_interjections() {
                        self.add_log(
                            "response",
                            format!("{}: final answer", self.name()),
                            response.message.clone(),
                            Map::new(),
                            true,
                        );
                        self.fire(MESSAGE_LOOP_END, json!({ "iteration": iteration }))
                            .await?;
                        return Ok(self.host.secrets().mask(&response.message).into_owned());
                    }
                }
                Err(error) if error.kind() == ErrorKind::Intervention => {
                    if self.is_stopped() {
                        return Err(LoopError::Stopped);
                    }
                    // The rest of this iteration is skipped; the lifecycle kept the tool's
                    // progress as its result, and the next checkpoint adds the messages.
                    continue;
                }
                Err(error)
                    if matches!(error.kind(), ErrorKind::Repairable | ErrorKind::Validation) =>
                {
                    let text = self.format_error(&request.tool, &error).await?;
                    self.warn(text).await?;
                }
                Err(error) => {
                    let error = ToolError::new(
                        error.kind(),
                        self.host.secrets().mask(error.message()).into_owned(),
                    );
                    return Err(LoopError::Tool {
                        tool: request.tool,
                        error,
                    });
                }
            }
            self.fire(MESSAGE_LOOP_END, json!({ "iteration": iteration }))
                .await?;
        }
        Err(LoopError::IterationLimit(options.max_iterations))
    }

    /// Waits while paused; fails if stopped; adds the messages the user sent meanwhile, then
    /// checks again (a paused agent stays paused after an interjection).
    async fn checkpoint(self: &Arc<Self>) -> Result<(), LoopError> {
        loop {
            match self.check_intervention().await {
                Ok(()) if !self.has_interjections() => return Ok(()),
                Err(_) if self.is_stopped() => return Err(LoopError::Stopped),
                _ => self.add_interjections().await?,
            }
        }
    }

    async fn add_interjections(self: &Arc<Self>) -> Result<(), LoopError> {
        for message in self.take_interjections() {
            self.add_log(
                "user",
                "User message (interjected)".to_owned(),
                message.clone(),
                Map::new(),
                true,
            );
            self.print(OutputKind::User, || {
                format!("User (interjected): {message}")
            });
            self.hist_add(Role::User, message).await?;
        }
        Ok(())
    }

    /// Asks the model, streaming its reply (masked) to the output; the reply joins the history.
    async fn ask(self: &Arc<Self>, model: &dyn Model) -> Result<String, LoopError> {
        let system = self.system_prompt().await?;
        let history = self.history();
        let secrets = self.host.secrets();
        let mut stream = secrets.stream();
        let output = self.output.clone();
        let streaming = output.enabled();
        let request = ModelRequest {
            system: &system,
            history: &history,
        };
        let reply = {
            let mut shown = |chunk: &str| {
                if streaming {
                    let text = stream.push(chunk);
                    if !text.is_empty() {
                        output.print(OutputKind::ModelChunk, &text);
                    }
                }
            };
            model.reply(request, &mut shown).await?
        };
        if streaming {
            let rest = stream.finish();
            self.output.print(OutputKind::ModelEnd, &rest);
        }
        let masked = secrets.mask(&reply).into_owned();
        let parsed = parse_reply(&reply);
        let mut kvps = Map::new();
        if let Some(request) = &parsed {
            kvps.insert("tool".to_owned(), json!(request.tool));
            if let Some(thoughts) = &request.thoughts {
                kvps.insert("thoughts".to_owned(), thoughts.clone());
            }
        }
        let heading = parsed
            .as_ref()
            .and_then(|r| r.headline.clone())
            .unwrap_or_else(|| format!("{}: reply", self.name()));
        self.add_log("agent", heading, masked.clone(), kvps, true);
        self.hist_add(Role::Ai, masked).await?;
        Ok(reply)
    }

    /// The system prompt: the profile's `agent.system.*.md` fragments, then the tools
    /// section, passed through `system_prompt`.
    pub async fn system_prompt(self: &Arc<Self>) -> Result<String, LoopError> {
        let parts = self.host.system_prompt_parts(self.profile());
        let data = self.fire(SYSTEM_PROMPT, json!({ "parts": parts })).await?;
        let parts = data
            .get("parts")
            .and_then(Value::as_array)
            .map(|parts| {
                parts
                    .iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join("\n\n")
            })
            .unwrap_or_default();
        Ok(parts)
    }

    /// Adds a warning for the model to the history and the log.
    async fn warn(self: &Arc<Self>, text: String) -> Result<(), LoopError> {
        self.print(OutputKind::Warning, || format!("Warning: {text}"));
        self.add_log(
            "warning",
            "Warning".to_owned(),
            text.clone(),
            Map::new(),
            true,
        );
        self.hist_add(Role::Warning, text).await
    }

    /// The text the model sees for a repairable error, through `error_format`.
    async fn format_error(
        self: &Arc<Self>,
        tool: &str,
        error: &ToolError,
    ) -> Result<String, LoopError> {
        // Masked before the extensions see it: one that rewrites the text (truncates it,
        // changes its case) could otherwise defeat the masking after it.
        let secrets = self.host.secrets();
        let message = secrets.mask(error.message()).into_owned();
        let text = format!("Tool '{tool}' failed: {message}");
        let data = json!({"kind": error.kind().as_str(), "message": message, "text": text});
        let data = self.fire(ERROR_FORMAT, data).await?;
        Ok(data
            .get("text")
            .and_then(Value::as_str)
            .map_or(text, str::to_owned))
    }

    /// Adds a message to the history through `hist_add_before` (which may change its content).
    async fn hist_add(self: &Arc<Self>, role: Role, content: String) -> Result<(), LoopError> {
        // Masked before extensions see it, and again by `add_history` after they changed it.
        let content = self.host.secrets().mask(&content).into_owned();
        let role_name = serde_json::to_value(role).unwrap_or_default();
        let data = self
            .fire(
                HIST_ADD_BEFORE,
                json!({"role": role_name, "content": content}),
            )
            .await?;
        let content = match data.get("content") {
            Some(Value::String(text)) => text.clone(),
            _ => content,
        };
        self.add_history(HistoryMessage {
            role,
            content,
            tool_name: None,
            additional: None,
        });
        Ok(())
    }

    /// Runs the extensions of `point` on `data`; returns the data they leave.
    async fn fire(self: &Arc<Self>, point: &'static str, data: Value) -> Result<Value, LoopError> {
        self.call_extensions(point, data).await.map_err(|error| {
            let message = self.host.secrets().mask(error.message()).into_owned();
            LoopError::Extension {
                point,
                error: ToolError::new(error.kind(), message),
            }
        })
    }

    /// Runs the extensions of any point (the host's or one of your own) on `data`, in order;
    /// returns the data the last one left.
    pub async fn call_extensions(
        self: &Arc<Self>,
        point: &str,
        data: Value,
    ) -> Result<Value, ToolError> {
        let call = Arc::new(CallContext::for_agent(self.clone()));
        Ok(self
            .run_extensions(point, &data, &call)
            .await?
            .unwrap_or(data))
    }
}
