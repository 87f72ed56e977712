//! Agent Zero's message loop: ask the model, read the tool request in its reply, run the tool,
//! and go on until a tool ends the loop.

pub(crate) mod ask;
mod error;
pub(crate) mod tool_calls;

pub use error::LoopError;

use std::sync::Arc;

use crate::agent::message_loop::ask::Asked;
use crate::agent::output::OutputKind;
use crate::agent::Agent;
use crate::model::{Model, ModelError};
use crate::secrets::Masked;
use crate::transcript::{HistoryMessage, LogKind, Role, ToolCall};
use plugin_api::points::{
    AgentInit, ErrorFormat, HistAddBefore, HistAddToolResult, MessageLoopEnd, MessageLoopStart,
    MonologueEnd, MonologueStart, ProcessChainEnd, SystemPrompt,
};
use plugin_api::ErrorKind;
use plugin_api::Response;
use plugin_api::ToolError;
use toolhost_reply::{Misformat, ToolRequest};

/// Limits of one monologue.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LoopOptions {
    /// Iterations (model replies) before the loop gives up. Default 25.
    pub max_iterations: usize,
    /// Unusable replies in a row (no tool request, or the same reply again) before the loop
    /// gives up. Default 3.
    pub max_unusable: usize,
    /// Failed tool calls in a row (of any kind but an intervention) before the loop gives up.
    /// Default 5.
    pub max_failed_calls: usize,
}

impl Default for LoopOptions {
    fn default() -> Self {
        Self {
            max_iterations: 25,
            max_unusable: 3,
            max_failed_calls: 5,
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

    /// Sets [`max_failed_calls`](Self::max_failed_calls).
    pub fn with_max_failed_calls(mut self, n: usize) -> Self {
        self.max_failed_calls = n.max(1);
        self
    }
}

/// The warning for a reply without a readable tool request.
pub const MISFORMAT_WARNING: &str = "Your reply was not a valid tool request. Reply with exactly one JSON object: {\"thoughts\": [...], \"headline\": \"...\", \"tool_name\": \"...\", \"tool_args\": {...}}";

/// The warning for a reply identical to the previous one.
pub const REPEAT_WARNING: &str = "You repeated your previous reply. Do something else: use the result you already have, call another tool, or answer with the response tool.";

/// One monologue's loop: the agent, and the model it asks. Its methods are the steps of an
/// iteration (asking the model is in `ask.rs`).
pub(crate) struct MessageLoop<'a> {
    agent: &'a Arc<Agent>,
    model: &'a dyn Model,
}

/// What one iteration came to.
enum Step {
    /// The loop goes on.
    Next,
    /// The user interrupted the tool: the rest of the iteration (`message_loop_end`) is
    /// skipped; the lifecycle kept the tool's progress as its result, and the next checkpoint
    /// adds the user's messages.
    Interrupted,
    /// A reply without a usable request (or the same reply again).
    Unusable,
    /// The reply broke off (counts as unusable; the last one ends the loop with this error).
    Broken(ModelError),
    /// The tool failed: its error went back to the model.
    Failed(ToolRequest, ToolError),
    /// The final answer (masked).
    Answer(String),
}

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
    /// tool's failure of any kind goes back to the model as a warning marked with its kind and
    /// what to do (through `error_format`) and the loop goes on, until
    /// [`max_failed_calls`](LoopOptions::max_failed_calls) calls in a row failed; an
    /// intervention ends the iteration (an interrupted tool's progress is kept as its result);
    /// a fault of the host (a required audit record that cannot be written) ends the loop.
    pub async fn monologue(
        self: &Arc<Self>,
        model: &dyn Model,
        message: &str,
        options: &LoopOptions,
    ) -> Result<String, LoopError> {
        if self.first_init() {
            let data = AgentInit::new(self.name().to_owned(), self.profile().to_owned());
            self.fire(data).await?;
        }
        self.fire(MonologueStart::new(message.to_owned())).await?;
        self.add_note(LogKind::User, "User message".to_owned(), message.to_owned());
        self.print(OutputKind::User, || format!("User: {message}"));
        let running = self.intervention.start_monologue();
        // A tool's answer is bounded to what this model's context can take.
        self.state().model_answer_limit = model.max_tool_answer_bytes();
        let turn = MessageLoop { agent: self, model };
        let result = match turn.hist_add(Role::User, message.to_owned()).await {
            Ok(()) => turn.iterate(options).await,
            Err(e) => Err(e),
        };
        self.state().model_answer_limit = None;
        // Messages that arrived after the last checkpoint are kept, not lost.
        for late in running.end() {
            let heading = "User message (arrived after the loop ended)";
            self.add_note(LogKind::User, heading.to_owned(), late.clone());
            let content = self.mask(late);
            self.transcript
                .add_history(HistoryMessage::new(Role::User, content));
        }
        self.transcript.flush_session_log();
        let end = MonologueEnd::new(result.as_ref().ok().cloned());
        let ended = self.fire(end).await;
        let chain_end = || ProcessChainEnd::new(result.as_ref().ok().cloned());
        let ended = match ended {
            Ok(_) => self.fire_lazy(chain_end).await.map(|_| ()),
            Err(e) => Err(e),
        };
        if let Err(e) = &result {
            self.add_note(LogKind::Error, "The loop ended".to_owned(), e.to_string());
        }
        result.and_then(|answer| ended.map(|_| answer))
    }

    /// The system prompt: the profile's `agent.system.*.md` fragments, then the tools
    /// section, passed through `system_prompt`.
    pub async fn system_prompt(self: &Arc<Self>) -> Result<String, LoopError> {
        let parts = self.host.system_prompt_parts(self.profile());
        let prompt = self.fire(SystemPrompt::new(parts)).await?;
        Ok(prompt.parts.join("\n\n"))
    }
}

impl MessageLoop<'_> {
    /// `Err` once the session's record or the audit log could not be written.
    fn records_written(&self) -> Result<(), LoopError> {
        if let Some(why) = self.agent.transcript.session_failure() {
            return Err(LoopError::Record(why));
        }
        match self.agent.audit_failure() {
            Some(error) => Err(LoopError::Record(format!(
                "an audit record cannot be written: {error}"
            ))),
            None => Ok(()),
        }
    }

    async fn iterate(&self, options: &LoopOptions) -> Result<String, LoopError> {
        let mut unusable = 0;
        let mut failed = 0;
        let mut last_reply: Option<String> = None;
        for iteration in 1..=options.max_iterations {
            self.records_written()?;
            self.checkpoint().await?;
            let iteration = iteration as u64;
            self.agent.fire(MessageLoopStart::new(iteration)).await?;
            let step = self.iteration(&mut last_reply, iteration).await?;
            if matches!(step, Step::Interrupted) {
                unusable = 0;
                continue;
            }
            self.agent.fire(MessageLoopEnd::new(iteration)).await?;
            if !matches!(step, Step::Failed(..)) {
                failed = 0;
            }
            self.records_written()?;
            match step {
                Step::Answer(answer) => return Ok(answer),
                Step::Next | Step::Interrupted => unusable = 0,
                Step::Failed(request, error) => {
                    unusable = 0;
                    failed += 1;
                    if failed >= options.max_failed_calls {
                        let error = self.agent.host.secret_store().error(&error);
                        return Err(LoopError::FailedCalls {
                            count: failed,
                            tool: request.tool,
                            error,
                        });
                    }
                }
                Step::Unusable => {
                    unusable += 1;
                    if unusable >= options.max_unusable {
                        return Err(LoopError::Unusable(unusable));
                    }
                }
                Step::Broken(error) => {
                    unusable += 1;
                    if unusable >= options.max_unusable {
                        return Err(error.into());
                    }
                }
            }
        }
        Err(LoopError::IterationLimit(options.max_iterations))
    }

    /// One iteration after its checkpoint: the model's reply, and the tool it asks for (a
    /// native call's result is marked with the call's id).
    async fn iteration(
        &self,
        last_reply: &mut Option<String>,
        iteration: u64,
    ) -> Result<Step, LoopError> {
        let reply = match self.ask(iteration).await? {
            Asked::Reply(reply) => reply,
            Asked::Interrupted => return Ok(Step::Interrupted),
            Asked::Broken(error) => return Ok(Step::Broken(error)),
        };
        let repeated = last_reply.as_deref() == Some(reply.signature.as_str());
        *last_reply = Some(reply.signature);
        let mut request = match reply.request {
            _ if repeated => return self.unusable(REPEAT_WARNING.to_owned()).await,
            Ok(request) => request,
            Err(Misformat::NoRequest) => return self.unusable(MISFORMAT_WARNING.to_owned()).await,
            Err(misformat) => {
                let warning = format!("{MISFORMAT_WARNING}\nIn your reply, {misformat}.");
                return self.unusable(warning).await;
            }
        };
        let call_id = reply.call_id;
        self.agent.transcript.expect_result_of(call_id);
        let audit_was_failing = self.agent.audit_failure().is_some();
        let result = self
            .agent
            // Moved, not copied: what follows needs the tool's name only.
            .call_tool(&request.tool, std::mem::take(&mut request.args))
            .await;
        self.agent.transcript.expect_result_of(None);
        match result {
            Ok(response) => self.tool_answered(&request, response).await,
            // The host could not keep its required audit record: a fault of the host, which
            // the model cannot work around.
            Err(error) if !audit_was_failing && self.agent.audit_failure().is_some() => {
                Err(LoopError::Tool {
                    tool: request.tool,
                    error: self.agent.host.secret_store().error(&error),
                })
            }
            Err(error) => self.tool_failed(request, error).await,
        }
    }

    /// An unusable reply: the warning goes back to the model.
    async fn unusable(&self, warning: String) -> Result<Step, LoopError> {
        self.warn(warning).await?;
        Ok(Step::Unusable)
    }

    /// A tool answered: its result was added to the history; a `break_loop` ends the loop,
    /// unless a message arrived while the answer was being given (it is answered too).
    async fn tool_answered(
        &self,
        request: &ToolRequest,
        response: Response,
    ) -> Result<Step, LoopError> {
        let result = HistAddToolResult::new(request.tool.clone(), response.message.clone());
        self.agent.fire(result).await?;
        if !response.break_loop || self.agent.intervention.has_messages() {
            return Ok(Step::Next);
        }
        let heading = format!("{}: final answer", self.agent.name());
        self.agent
            .add_note(LogKind::Response, heading, response.message.clone());
        Ok(Step::Answer(self.agent.mask(response.message).into_inner()))
    }

    /// A tool failed: an intervention ends the iteration; any other failure goes back to the
    /// model as a warning that answers the call (Agent Zero's path), marked with its kind and
    /// what to do (through `error_format`), and the loop goes on.
    async fn tool_failed(&self, request: ToolRequest, error: ToolError) -> Result<Step, LoopError> {
        match error.kind() {
            ErrorKind::Intervention if self.agent.is_stopped() => Err(LoopError::Stopped),
            ErrorKind::Intervention => Ok(Step::Interrupted),
            _ => {
                let text = self.format_error(&request.tool, &error).await?;
                self.warn(text).await?;
                Ok(Step::Failed(request, error))
            }
        }
    }

    /// Waits while paused; fails if stopped; adds the messages the user sent meanwhile, then
    /// checks again (a paused agent stays paused after an interjection).
    async fn checkpoint(&self) -> Result<(), LoopError> {
        loop {
            let messages = self.agent.intervention.checkpoint().await?;
            if messages.is_empty() {
                return Ok(());
            }
            for message in messages {
                let heading = "User message (interjected)";
                self.agent
                    .add_note(LogKind::User, heading.to_owned(), message.clone());
                self.agent.print(OutputKind::User, || {
                    format!("User (interjected): {message}")
                });
                self.hist_add(Role::User, message).await?;
            }
        }
    }

    /// Adds a warning for the model to the history and the log.
    async fn warn(&self, text: String) -> Result<(), LoopError> {
        self.agent
            .print(OutputKind::Warning, || format!("Warning: {text}"));
        self.agent
            .add_note(LogKind::Warning, "Warning".to_owned(), text.clone());
        self.hist_add(Role::Warning, text).await
    }

    /// The text the model sees for a repairable error, through `error_format`.
    async fn format_error(&self, tool: &str, error: &ToolError) -> Result<String, LoopError> {
        // Masked before the extensions see it: one that rewrites the text (truncates it,
        // changes its case) could otherwise defeat the masking after it.
        let message = self.agent.mask(error.message().to_owned());
        let kind = error.kind();
        let text = format!(
            "Tool '{tool}' failed ({kind} error): {message}\n{}",
            advice(kind)
        );
        let kind = error.kind().as_str().to_owned();
        let data = ErrorFormat::new(kind, message.into_inner(), text);
        Ok(self.agent.fire(data).await?.text)
    }

    /// Adds a message to the history through `hist_add_before` (which may change its content).
    async fn hist_add(&self, role: Role, content: String) -> Result<(), LoopError> {
        self.hist_add_with(role, content, Masked::default()).await
    }

    /// [`hist_add`](Self::hist_add) of a reply with native tool calls.
    pub(crate) async fn hist_add_with(
        &self,
        role: Role,
        content: String,
        tool_calls: Masked<Vec<ToolCall>>,
    ) -> Result<(), LoopError> {
        // Masked before extensions see it, and again after they changed it.
        let data = HistAddBefore::new(role.as_str().to_owned(), content);
        let content = self.agent.fire(data).await?.content;
        let content = self.agent.mask(content);
        let message = HistoryMessage::new(role, content).with_tool_calls(tool_calls);
        self.agent.transcript.add_history(message);
        Ok(())
    }
}

/// What the model can do after a failure of `kind`.
pub(crate) fn advice(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::Repairable | ErrorKind::Validation => {
            "Fix the call as the error says, then call the tool again."
        }
        ErrorKind::Business => {
            "The tool ran and refused: change the request, or reach the goal another way."
        }
        ErrorKind::Timeout => {
            "It took too long: ask for less, try again once, or use another tool."
        }
        ErrorKind::Dependency => {
            "Something it depends on is failing: do not repeat the same call now; use another \
             tool, or answer with what you have."
        }
        _ => {
            "The tool failed unexpectedly: do not repeat the same call; use another tool, or \
             answer with what you have."
        }
    }
}
