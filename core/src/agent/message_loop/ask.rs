//! Asking the model, one iteration's first step: the request (system prompt, history, and the
//! tools), the reply streamed to the output with secrets masked and
//! raced against a stop or an interjection, then recorded: log (with its token usage) and
//! history (with its native tool calls).

use std::sync::Arc;

use serde_json::{json, Map};

use crate::agent::message_loop::error::LoopError;
use crate::agent::output::OutputKind;
use crate::agent::Agent;
use crate::model::{Model, ModelError, ModelReply, ModelRequest};
use crate::telemetry::ChatSpan;
use crate::transcript::{LogKind, Role};
use plugin_api::points::{BeforeMainLlmCall, MessageLoopPromptsAfter, MessageLoopPromptsBefore};
use toolhost_reply::parse_reply;
use tracing::Instrument;

/// How asking the model ended.
pub(crate) enum Asked {
    /// The whole reply; it is in the log and the history.
    Reply(ModelReply),
    /// A message from the user interrupted the reply: the part that arrived is in the log and
    /// the history, and the loop's next checkpoint takes the message.
    Interrupted,
    /// The reply broke off ([`ModelError::Broken`]): the part that arrived is in the log; this
    /// iteration fails and the loop asks again.
    Broken(ModelError),
}

impl Agent {
    /// Asks the model; its text streams (masked) to the output as it arrives. A stop or an
    /// interjection drops the reply at once.
    pub(crate) async fn ask(
        self: &Arc<Self>,
        model: &dyn Model,
        iteration: u64,
    ) -> Result<Asked, LoopError> {
        let before = MessageLoopPromptsBefore::new(iteration, Vec::new());
        let extras = self.fire_lazy(|| before).await?.map(|b| b.extras);
        let system = self.system_prompt().await?;
        let extras = extras.unwrap_or_default();
        let after = || MessageLoopPromptsAfter::new(iteration, system.clone(), extras.clone());
        let (mut system, extras) = match self.fire_lazy(after).await? {
            Some(after) => (after.system, after.extras),
            None => (system, extras),
        };
        for extra in extras {
            system.push_str("\n\n");
            system.push_str(&extra);
        }
        let history = self.history();
        let system = self.mask(system);
        let last_look = || BeforeMainLlmCall::new(system.as_str().to_owned(), history.len() as u64);
        let system = match self.fire_lazy(last_look).await? {
            Some(changed) => self.mask(changed.system),
            None => system,
        };
        let tools = self.host.tool_specs(self.profile());
        let request = ModelRequest {
            system: &system,
            history: &history,
            tools: &tools,
        };
        let secrets = self.host.secrets();
        let mut stream = secrets.stream();
        let output = self.output.clone();
        let streaming = output.enabled();
        let mut received = String::new();
        let result = {
            let mut shown = |chunk: &str| {
                received.push_str(chunk);
                if streaming {
                    let text = stream.push(chunk);
                    if !text.is_empty() {
                        output.print(OutputKind::ModelChunk, &text);
                    }
                }
            };
            let chat = ChatSpan::start(model.model_name());
            let reply = model
                .respond(request, &mut shown)
                .instrument(chat.span().clone());
            let result = tokio::select! {
                biased;
                reply = reply => Some(reply),
                () = self.intervention.stopped_or_interrupted() => None,
            };
            if let Some(result) = &result {
                chat.ended(result.as_ref());
            }
            result
        };
        if streaming {
            self.output.print(OutputKind::ModelEnd, &stream.finish());
        }
        match result {
            Some(Ok(reply)) => {
                self.record_reply(&reply).await?;
                Ok(Asked::Reply(reply))
            }
            Some(Err(error @ ModelError::Broken { .. })) => Ok(self.broken(error)),
            Some(Err(error)) => Err(error.into()),
            None => self.dropped(received).await,
        }
    }

    /// The reply broke off: the part that arrived goes to the log, with the reason.
    fn broken(&self, error: ModelError) -> Asked {
        if let ModelError::Broken { partial, .. } = &error {
            let heading = format!("{}: reply broke off: {error}", self.name());
            self.add_note(LogKind::Error, heading, partial.clone());
        }
        self.print(OutputKind::Warning, || format!("{error}; asking again"));
        Asked::Broken(error)
    }

    /// The user stopped or interrupted the agent while the reply streamed: what arrived is kept
    /// in the log and, unless empty, in the history.
    async fn dropped(self: &Arc<Self>, received: String) -> Result<Asked, LoopError> {
        let heading = format!("{}: reply (dropped: the user intervened)", self.name());
        self.add_note(LogKind::Agent, heading, received.clone());
        if self.is_stopped() {
            return Err(LoopError::Stopped);
        }
        if !received.trim().is_empty() {
            let text = format!("{received}\n(interrupted by the user)");
            self.hist_add_reply(text, Vec::new()).await?;
        }
        Ok(Asked::Interrupted)
    }

    /// A whole reply: in the log (with its usage), its usage summed, and in the history.
    async fn record_reply(self: &Arc<Self>, reply: &ModelReply) -> Result<(), LoopError> {
        self.log_reply(reply);
        if let Some(usage) = reply.usage {
            self.add_usage(usage);
        }
        self.hist_add_reply(reply.text.clone(), reply.tool_calls.clone())
            .await
    }

    /// The model's reply in the log, headed by its `headline`, with its tool (or native
    /// calls), thoughts and token usage.
    fn log_reply(&self, reply: &ModelReply) {
        let parsed = match reply.tool_calls.is_empty() {
            true => parse_reply(&reply.text),
            false => None,
        };
        let mut kvps = Map::new();
        if let Some(request) = &parsed {
            kvps.insert("tool".to_owned(), json!(request.tool));
            if let Some(thoughts) = &request.thoughts {
                kvps.insert("thoughts".to_owned(), thoughts.clone());
            }
        }
        if !reply.tool_calls.is_empty() {
            kvps.insert("tool_calls".to_owned(), json!(reply.tool_calls));
        }
        if let Some(usage) = reply.usage {
            kvps.insert("usage".to_owned(), json!(usage));
        }
        // The model's reasoning is for a person to read: the log has it, the history not.
        if !reply.reasoning.is_empty() {
            kvps.insert("reasoning".to_owned(), json!(reply.reasoning));
        }
        let heading = parsed
            .and_then(|r| r.headline)
            .unwrap_or_else(|| format!("{}: reply", self.name()));
        self.add_log(LogKind::Agent, heading, reply.text.clone(), kvps, true);
    }

    /// The reply in the history, with its native tool calls (masked like the rest).
    async fn hist_add_reply(
        self: &Arc<Self>,
        text: String,
        calls: Vec<crate::transcript::ToolCall>,
    ) -> Result<(), LoopError> {
        let calls = self.host.secret_store().each(calls);
        self.hist_add_with(Role::Ai, text, calls).await
    }
}
