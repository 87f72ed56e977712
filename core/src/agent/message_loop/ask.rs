//! Asking the model, one iteration's first step: the request (system prompt, history, and the
//! tools), the reply streamed to the output with secrets masked and
//! raced against a stop or an interjection, then recorded: log (with its token usage) and
//! history (with its native tool calls).

use serde_json::{json, Map};

use crate::agent::call::shown;
use crate::agent::message_loop::error::LoopError;
use crate::agent::message_loop::tool_calls::{request_of, signature};
use crate::agent::message_loop::MessageLoop;
use crate::agent::output::OutputKind;
use crate::model::{Delta, ModelError, ModelReply, ModelRequest};
use crate::secrets::{MaskStream, Masked, Secrets};
use crate::telemetry::ChatSpan;
use crate::transcript::{HistoryMessage, LogKind, Role};
use plugin_api::points::{
    BeforeMainLlmCall, CallMessage, MessageLoopPromptsAfter, MessageLoopPromptsBefore, Point,
    ReasoningStream, ReasoningStreamChunk, ReasoningStreamEnd, ResponseStream, ResponseStreamChunk,
    ResponseStreamEnd, UtilModelCallBefore,
};
use toolhost_reply::{parse_reply, Misformat, ToolRequest};

/// How asking the model ended.
pub(crate) enum Asked {
    /// The whole reply, read; its text is in the log and the history.
    Reply(ReadReply),
    /// A message from the user interrupted the reply: the part that arrived is in the log and
    /// the history, and the loop's next checkpoint takes the message.
    Interrupted,
    /// The reply broke off ([`ModelError::Broken`]): the part that arrived is in the log; this
    /// iteration fails and the loop asks again.
    Broken(ModelError),
}

/// What the loop needs of a whole reply, read before the history takes its text (moved, not
/// copied: a long reply is held once).
pub(crate) struct ReadReply {
    /// The tool it asks for, or what is wrong with it.
    pub(crate) request: Result<ToolRequest, Misformat>,
    /// What a repeat of it would share ([`signature`]).
    pub(crate) signature: String,
    /// The id of its native tool call, when it made exactly one.
    pub(crate) call_id: Option<String>,
}

/// What has streamed in so far.
struct Live<'s> {
    /// Masks the reply's text as it arrives (holding back what may be a secret's start).
    text: MaskStream<'s>,
    /// The same for the reasoning.
    reasoning: MaskStream<'s>,
    /// The text as received.
    received: String,
    /// The text so far, masked, as the stream points see it: kept only when one of the
    /// `response_stream*` points has an extension (a long reply is not held once more).
    said: String,
    keep_said: bool,
    /// The reasoning so far, masked; kept only for the `reasoning_stream*` points likewise.
    thought: String,
    keep_thought: bool,
}

impl<'s> Live<'s> {
    /// `watched`: whether a point of that name has an extension.
    fn new(secrets: &'s Secrets, watched: impl Fn(&str) -> bool) -> Self {
        let any = |names: [&str; 3]| names.into_iter().any(&watched);
        Self {
            text: secrets.stream(),
            reasoning: secrets.stream(),
            received: String::new(),
            said: String::new(),
            keep_said: any([
                ResponseStreamChunk::NAME,
                ResponseStream::NAME,
                ResponseStreamEnd::NAME,
            ]),
            thought: String::new(),
            keep_thought: any([
                ReasoningStreamChunk::NAME,
                ReasoningStream::NAME,
                ReasoningStreamEnd::NAME,
            ]),
        }
    }
}

impl MessageLoop<'_> {
    /// Asks the model; its text streams (masked) to the output as it arrives. A stop or an
    /// interjection drops the reply at once.
    pub(crate) async fn ask(&self, iteration: u64) -> Result<Asked, LoopError> {
        let before = MessageLoopPromptsBefore::new(iteration, Vec::new());
        let extras = self.agent.fire_lazy(|| before).await?.map(|b| b.extras);
        let system = self.agent.system_prompt().await?;
        let extras = extras.unwrap_or_default();
        let after = || MessageLoopPromptsAfter::new(iteration, system.clone(), extras.clone());
        let (mut system, extras) = match self.agent.fire_lazy(after).await? {
            Some(after) => (after.system, after.extras),
            None => (system, extras),
        };
        for extra in extras {
            system.push_str("\n\n");
            system.push_str(&extra);
        }
        let mut history = self.agent.history();
        let system = self.agent.mask(system);
        let last_look = || BeforeMainLlmCall::new(system.as_str().to_owned(), history.len() as u64);
        let system = match self.agent.fire_lazy(last_look).await? {
            Some(changed) => self.agent.mask(changed.system),
            None => system,
        };
        let system = self.util_model_call_before(system, &mut history).await?;
        let tools = self.agent.host.tool_specs(self.agent.profile());
        let request = ModelRequest {
            system: &system,
            history: &history,
            tools: &tools,
        };
        let secrets = self.agent.host.secrets();
        let (host, profile) = (&self.agent.host, self.agent.profile());
        let mut live = Live::new(&secrets, |point| {
            !host.extensions(profile, point).is_empty()
        });
        // The model's pieces go through a channel to the extensions of the stream points
        // (`live`), in the order they arrive, while the reply streams.
        let (sender, mut pieces) = tokio::sync::mpsc::unbounded_channel();
        let model = self.model;
        let chat = ChatSpan::start(model.model_name());
        let chat_span = chat.span();
        let asking = async move {
            let mut send = move |delta: Delta<'_>| {
                let piece = match delta {
                    Delta::Text(text) => (false, text.to_owned()),
                    Delta::Reasoning(text) => (true, text.to_owned()),
                };
                let _ = sender.send(piece);
            };
            chat_span.run(model.stream(request, &mut send)).await
        };
        let showing = async {
            while let Some((reasoning, piece)) = pieces.recv().await {
                self.streamed(&mut live, reasoning, piece).await?;
            }
            Ok::<(), LoopError>(())
        };
        let result = tokio::select! {
            biased;
            (reply, shown) = async { tokio::join!(asking, showing) } => Some((reply, shown)),
            () = self.agent.intervention.stopped_or_interrupted() => None,
        };
        let received = self.stream_ended(live).await;
        let result = match result {
            Some((reply, shown)) => {
                chat.ended(reply.as_ref());
                shown?;
                Some(reply)
            }
            None => None,
        };
        let received = received?;
        match result {
            Some(Ok(reply)) => Ok(Asked::Reply(self.record_reply(reply).await?)),
            Some(Err(error @ ModelError::Broken { .. })) => Ok(self.broken(error)),
            Some(Err(error)) => Err(error.into()),
            None => self.dropped(received).await,
        }
    }

    /// `util_model_call_before`: the last look at the request; changes apply to this request
    /// only (see the point's docs).
    async fn util_model_call_before(
        &self,
        system: Masked,
        history: &mut [HistoryMessage],
    ) -> Result<Masked, LoopError> {
        let data = || {
            let messages = history.iter().map(|m| {
                CallMessage::new(m.role.as_str().to_owned(), m.content.as_str().to_owned())
            });
            UtilModelCallBefore::new(system.as_str().to_owned(), messages.collect())
        };
        let Some(changed) = self.agent.fire_lazy(data).await? else {
            return Ok(system);
        };
        if changed.messages.len() == history.len() {
            for (message, new) in history.iter_mut().zip(changed.messages) {
                if new.role == message.role.as_str() {
                    message.content = self.agent.mask(new.content);
                }
            }
        }
        Ok(self.agent.mask(changed.system))
    }

    /// A piece of the reply (or of its reasoning) arrived: masked, through the
    /// `*_stream_chunk` and `*_stream` points, then shown (text only).
    async fn streamed(
        &self,
        live: &mut Live<'_>,
        reasoning: bool,
        piece: String,
    ) -> Result<(), LoopError> {
        let (masked, full, keep) = match reasoning {
            true => (
                live.reasoning.push(&piece),
                &mut live.thought,
                live.keep_thought,
            ),
            false => {
                let masked = live.text.push(&piece);
                match live.received.is_empty() {
                    // The first piece (a reply in one event: all of it) is moved, not copied.
                    true => live.received = piece,
                    false => live.received.push_str(&piece),
                }
                (masked, &mut live.said, live.keep_said)
            }
        };
        if !masked.is_empty() {
            self.stream_piece(reasoning, full, keep, masked.into_inner(), true)
                .await?;
        }
        Ok(())
    }

    /// A masked piece: added to `full` (if `keep`: the points have extensions), through the
    /// `*_stream_chunk` point (which may change it) and the `*_stream` point, then, if `show`,
    /// shown (text only). Returns the piece as changed, masked.
    async fn stream_piece(
        &self,
        reasoning: bool,
        full: &mut String,
        keep: bool,
        piece: String,
        show: bool,
    ) -> Result<Masked, LoopError> {
        if keep {
            full.push_str(&piece);
        }
        let piece = match reasoning {
            true => {
                let chunk = || ReasoningStreamChunk::new(piece.clone(), full.clone());
                let piece = self
                    .agent
                    .fire_lazy(chunk)
                    .await?
                    .map_or(piece, |c| c.chunk);
                self.agent
                    .fire_lazy(|| ReasoningStream::new(full.clone()))
                    .await?;
                piece
            }
            false => {
                let chunk = || ResponseStreamChunk::new(piece.clone(), full.clone());
                let piece = self
                    .agent
                    .fire_lazy(chunk)
                    .await?
                    .map_or(piece, |c| c.chunk);
                self.agent
                    .fire_lazy(|| ResponseStream::new(full.clone()))
                    .await?;
                piece
            }
        };
        let piece = self.agent.mask(piece);
        if show && !reasoning && !piece.is_empty() && self.agent.output.enabled() {
            self.agent.output.print(OutputKind::ModelChunk, &piece);
        }
        Ok(piece)
    }

    /// The stream ended (whole, broken off or dropped): the held-back ends through the
    /// points, the line's end shown, then `response_stream_end` and, if any reasoning came,
    /// `reasoning_stream_end`. Returns the text received (unmasked: the log masks it).
    async fn stream_ended(&self, live: Live<'_>) -> Result<String, LoopError> {
        let Live {
            text,
            reasoning,
            received,
            mut said,
            keep_said,
            mut thought,
            keep_thought,
        } = live;
        let rest = reasoning.finish().into_inner();
        if !rest.is_empty() {
            self.stream_piece(true, &mut thought, keep_thought, rest, false)
                .await?;
        }
        let rest = text.finish().into_inner();
        let rest = match rest.is_empty() {
            true => Masked::default(),
            false => {
                self.stream_piece(false, &mut said, keep_said, rest, false)
                    .await?
            }
        };
        if self.agent.output.enabled() {
            self.agent.output.print(OutputKind::ModelEnd, &rest);
        }
        self.agent
            .fire_lazy(|| ResponseStreamEnd::new(said))
            .await?;
        if !thought.is_empty() {
            self.agent
                .fire_lazy(|| ReasoningStreamEnd::new(thought))
                .await?;
        }
        Ok(received)
    }

    /// The reply broke off: the part that arrived goes to the log, with the reason.
    fn broken(&self, error: ModelError) -> Asked {
        if let ModelError::Broken { partial, .. } = &error {
            let heading = format!("{}: reply broke off: {error}", self.agent.name());
            self.agent
                .add_note(LogKind::Error, heading, partial.clone());
        }
        self.agent
            .print(OutputKind::Warning, || format!("{error}; asking again"));
        Asked::Broken(error)
    }

    /// The user stopped or interrupted the agent while the reply streamed: what arrived is kept
    /// in the log and, unless empty, in the history.
    async fn dropped(&self, received: String) -> Result<Asked, LoopError> {
        let heading = format!(
            "{}: reply (dropped: the user intervened)",
            self.agent.name()
        );
        self.agent
            .add_note(LogKind::Agent, heading, received.clone());
        if self.agent.is_stopped() {
            return Err(LoopError::Stopped);
        }
        if !received.trim().is_empty() {
            let text = format!("{received}\n(interrupted by the user)");
            self.hist_add_reply(text, Vec::new()).await?;
        }
        Ok(Asked::Interrupted)
    }

    /// A whole reply: read, in the log (with its usage), its usage summed, and in the
    /// history.
    async fn record_reply(&self, reply: ModelReply) -> Result<ReadReply, LoopError> {
        let specs = self.agent.host.tool_specs(self.agent.profile());
        let tools: Vec<(&str, &serde_json::Value)> = specs
            .iter()
            .map(|t| (t.name.as_str(), &t.parameters))
            .collect();
        let read = ReadReply {
            request: request_of(&reply, self.model.protocol(), &tools),
            signature: signature(&reply),
            call_id: match reply.tool_calls.as_slice() {
                [call] => Some(call.id.clone()),
                _ => None,
            },
        };
        self.log_reply(&reply, read.request.as_ref().ok());
        if let Some(usage) = reply.usage {
            self.agent.add_usage(usage);
        }
        self.hist_add_reply(reply.text, reply.tool_calls).await?;
        Ok(read)
    }

    /// The model's reply in the log, headed by its `headline`, with its tool (or native
    /// calls), thoughts and token usage. `request`: the reply read, if it could be.
    fn log_reply(&self, reply: &ModelReply, request: Option<&ToolRequest>) {
        let reread;
        let parsed = match (reply.tool_calls.is_empty(), request) {
            (false, _) => None,
            (true, Some(request)) => Some(request),
            // Unusable as a request: what the lenient reader finds still heads the log.
            (true, None) => {
                reread = parse_reply(&reply.text);
                reread.as_ref()
            }
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
            .and_then(|r| r.headline.clone())
            .unwrap_or_else(|| format!("{}: reply", self.agent.name()));
        self.agent.add_log(
            LogKind::Agent,
            heading,
            shown::text(
                &reply.text,
                "the history",
                &self.agent.host.secret_store().get(),
            ),
            kvps,
            true,
        );
    }

    /// The reply in the history, with its native tool calls (masked like the rest).
    async fn hist_add_reply(
        &self,
        text: String,
        calls: Vec<crate::transcript::ToolCall>,
    ) -> Result<(), LoopError> {
        let calls = self.agent.host.secret_store().each(calls);
        self.hist_add_with(Role::Ai, text, calls).await
    }
}
