//! The model the message loop asks, and the scripted one that replays a conversation.

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::secrets::Masked;
use crate::sync::lock;
use crate::transcript::{HistoryMessage, ToolCall};

/// What the model is asked: the system prompt and the history so far (already masked: secret
/// values never reach a model).
#[derive(Debug, Clone, Copy)]
pub struct ModelRequest<'a> {
    /// The system prompt.
    pub system: &'a Masked,
    /// The conversation so far, oldest first.
    pub history: &'a [HistoryMessage],
    /// The tools the model may call, as function definitions: sent as functions under
    /// [`ToolProtocol::Native`]; under [`ToolProtocol::Json`] the system prompt describes them,
    /// and a model may constrain its reply to them (a `response_format` schema).
    pub tools: &'a [ToolSpec],
}

/// How a model asks for a tool.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolProtocol {
    /// Agent Zero's: the system prompt describes the tools and the reply's text is a JSON tool
    /// request.
    #[default]
    Json,
    /// The tools are sent as function definitions and the model answers with tool calls;
    /// several calls in one reply run as one `parallel` request.
    Native,
}

impl ToolProtocol {
    /// `json` or `native`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Json => "json",
            Self::Native => "native",
        }
    }
}

/// A tool as a function definition: its name, description and JSON Schema of its arguments.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolSpec {
    /// The tool's name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// The JSON Schema of its arguments (an object schema).
    pub parameters: Value,
}

/// Tokens a model spent on requests.
///
/// ```
/// use toolhost::Usage;
/// let mut sum = Usage::default();
/// sum += Usage { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 };
/// sum += Usage { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 };
/// assert_eq!(sum.total_tokens, 18);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens of the request (system prompt, history, tools).
    #[serde(default)]
    pub prompt_tokens: u64,
    /// Tokens of the reply.
    #[serde(default)]
    pub completion_tokens: u64,
    /// Both.
    #[serde(default)]
    pub total_tokens: u64,
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, other: Self) {
        // Counts a peer sent: a huge one saturates instead of overflowing.
        self.prompt_tokens = self.prompt_tokens.saturating_add(other.prompt_tokens);
        self.completion_tokens = self
            .completion_tokens
            .saturating_add(other.completion_tokens);
        self.total_tokens = self.total_tokens.saturating_add(other.total_tokens);
    }
}

impl std::fmt::Display for Usage {
    fn fmt(&self, out: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            out,
            "{} tokens ({} prompt, {} completion)",
            self.total_tokens, self.prompt_tokens, self.completion_tokens
        )
    }
}

/// A model's whole reply: its text, the tool calls it made (native protocol) and what it cost.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelReply {
    /// The text (for the JSON protocol, the tool request).
    pub text: String,
    /// Native tool calls, in order.
    pub tool_calls: Vec<ToolCall>,
    /// The tokens of this request, if the server said.
    pub usage: Option<Usage>,
    /// The model's reasoning, if the server sent it apart from the text (`reasoning_content`
    /// or `reasoning` deltas): it goes to the log, never to the history.
    pub reasoning: String,
}

impl ModelReply {
    /// A reply of text only.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            ..Self::default()
        }
    }
}

/// A boxed future, so that [`Model`] can be used as `dyn Model`.
pub type ModelFuture<'a> = Pin<Box<dyn Future<Output = Result<String, ModelError>> + Send + 'a>>;

/// A boxed future of a whole reply ([`Model::respond`]).
pub type ReplyFuture<'a> =
    Pin<Box<dyn Future<Output = Result<ModelReply, ModelError>> + Send + 'a>>;

/// What kind of failure a [`ModelError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ModelErrorKind {
    /// A scripted model has no more replies.
    Script,
    /// The model's configuration is wrong (`usr/models.toml`).
    Config,
    /// The API key is missing or refused.
    Key,
    /// The server could not be reached.
    Unreachable,
    /// No answer in time.
    Timeout,
    /// The server answered with an error status.
    Status,
    /// The reply broke off mid-way: this iteration fails, the loop asks again.
    Broken,
    /// Anything else.
    Other,
}

/// Why the model gave no reply. Each is one line that says what failed and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// A scripted model has no more replies.
    #[error(
        "the script has no more model replies: add a '=== model' block or end with the response tool"
    )]
    ScriptEnded,
    /// The model failed.
    #[error("the model failed: {0}")]
    Failed(String),
    /// The request failed: configuration, key, network, server.
    #[error("{message}")]
    Request {
        /// What kind of failure.
        kind: ModelErrorKind,
        /// One line: what failed and how to fix it.
        message: String,
    },
    /// The reply broke off mid-way (a stream cut, a chunk that could not be read): an error of
    /// this iteration; the message loop logs the partial reply and asks again.
    #[error("the model's reply broke off: {reason}")]
    Broken {
        /// What happened.
        reason: String,
        /// The text received before it broke off.
        partial: String,
    },
}

impl ModelError {
    /// A request error of `kind`.
    pub fn request(kind: ModelErrorKind, message: impl Into<String>) -> Self {
        Self::Request {
            kind,
            message: message.into(),
        }
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> ModelErrorKind {
        match self {
            Self::ScriptEnded => ModelErrorKind::Script,
            Self::Failed(_) => ModelErrorKind::Other,
            Self::Request { kind, .. } => *kind,
            Self::Broken { .. } => ModelErrorKind::Broken,
        }
    }
}

/// A piece of a reply as it streams in ([`Model::stream`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Delta<'a> {
    /// A piece of the reply's text.
    Text(&'a str),
    /// A piece of the model's reasoning, sent apart from the text (`reasoning_content`).
    Reasoning(&'a str),
}

/// A language model: one required method.
///
/// `reply` streams the reply's text through `chunk` as it arrives (the loop masks secrets in it
/// and shows it live) and returns the whole text. A model that makes native tool calls or
/// reports token usage implements [`respond`](Self::respond) too, and says which
/// [`protocol`](Self::protocol) it speaks.
pub trait Model: Send + Sync {
    /// Answers `request`.
    fn reply<'a>(
        &'a self,
        request: ModelRequest<'a>,
        chunk: &'a mut (dyn FnMut(&str) + Send),
    ) -> ModelFuture<'a>;

    /// Answers `request` with the whole reply: text, native tool calls and usage. The message
    /// loop calls this; by default it is [`reply`](Self::reply)'s text alone.
    fn respond<'a>(
        &'a self,
        request: ModelRequest<'a>,
        chunk: &'a mut (dyn FnMut(&str) + Send),
    ) -> ReplyFuture<'a> {
        let reply = self.reply(request, chunk);
        Box::pin(async move { reply.await.map(ModelReply::text) })
    }

    /// Answers `request` with the whole reply, streaming both its text and its reasoning
    /// through `delta` as they arrive, in the order they arrive. The message loop calls this;
    /// by default it is [`respond`](Self::respond), its text as [`Delta::Text`].
    fn stream<'a>(
        &'a self,
        request: ModelRequest<'a>,
        delta: &'a mut (dyn FnMut(Delta<'_>) + Send),
    ) -> ReplyFuture<'a> {
        Box::pin(async move {
            let mut text = |chunk: &str| delta(Delta::Text(chunk));
            self.respond(request, &mut text).await
        })
    }

    /// How this model asks for tools. Default [`ToolProtocol::Json`].
    fn protocol(&self) -> ToolProtocol {
        ToolProtocol::Json
    }

    /// The model the requests ask for (the server's name for it), for the `chat {model}`
    /// span and the token metrics. Default `None`.
    fn model_name(&self) -> Option<&str> {
        None
    }

    /// The most bytes of one tool answer that go to this model: the message loop cuts a
    /// longer answer to it, with a note, and keeps it whole beside the session, so that one
    /// runaway answer cannot overflow the model's context. `None` (the default): no bound
    /// but the host's own (`[limits] max_output`).
    fn max_tool_answer_bytes(&self) -> Option<usize> {
        None
    }
}

/// A conversation to replay: user messages and the model's replies, in order.
///
/// The text format: blocks that each start with a line `=== user` or `=== model`; lines
/// before the first block starting with `#` are comments. Any other line starting with `===`
/// is an error naming its line (a misspelled header is never folded into a message).
///
/// ```
/// let script = toolhost::Script::parse("# demo\n=== user\nHi\n=== model\n{\"tool_name\": \"response\", \"tool_args\": {\"text\": \"Hello\"}}\n").unwrap();
/// assert_eq!(script.user_messages, ["Hi"]);
/// assert_eq!(script.replies.len(), 1);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Script {
    /// Each starts a monologue, after the previous one ended.
    pub user_messages: Vec<String>,
    /// The model's replies, in the order they are asked for.
    pub replies: Vec<String>,
}

impl Script {
    /// Parses the text of a script.
    ///
    /// ```
    /// let err = toolhost::Script::parse("=== user\nHi\n=== bogus\n").unwrap_err();
    /// assert_eq!(err.kind, toolhost::ScriptErrorKind::Format);
    /// assert!(err.message.starts_with("line 3: unknown block header '=== bogus'"), "{err}");
    /// ```
    pub fn parse(text: &str) -> Result<Self, ScriptError> {
        Self::parse_in(text, None)
    }

    /// Parses the text of a script read from `file` (if given), whose errors then name their
    /// place as `file:line` ([`Location`](crate::layout::Location)), else as `line N`.
    fn parse_in(text: &str, file: Option<&Path>) -> Result<Self, ScriptError> {
        let format = |message: String| ScriptError::new(ScriptErrorKind::Format, message);
        let at = |i: usize| match file {
            Some(file) => crate::layout::Location::new(file, Some(i + 1)).to_string(),
            None => format!("line {}", i + 1),
        };
        let mut script = Self::default();
        let mut current: Option<(bool, Vec<&str>)> = None;
        let flush = |block: Option<(bool, Vec<&str>)>, script: &mut Self| {
            if let Some((is_user, lines)) = block {
                let text = lines.join("\n").trim().to_owned();
                if is_user {
                    script.user_messages.push(text);
                } else {
                    script.replies.push(text);
                }
            }
        };
        for (i, line) in text.lines().enumerate() {
            match line.trim_end() {
                "=== user" => flush(current.replace((true, Vec::new())), &mut script),
                "=== model" => flush(current.replace((false, Vec::new())), &mut script),
                header if header.starts_with("===") => {
                    return Err(format(format!(
                        "{}: unknown block header '{}': a block starts with '=== user' or \
                         '=== model'",
                        at(i),
                        header.escape_debug()
                    )));
                }
                other => match &mut current {
                    Some((_, lines)) => lines.push(other),
                    None if other.trim().is_empty() || other.starts_with('#') => {}
                    None => {
                        return Err(format(format!(
                            "{}: text before the first '=== user' or '=== model' line; start \
                             each block with one of them",
                            at(i)
                        )));
                    }
                },
            }
        }
        flush(current, &mut script);
        if script.user_messages.is_empty() {
            let why = "the script has no '=== user' block: it needs a task to start";
            return Err(format(match file {
                Some(file) => format!("{}: {why}", crate::layout::Escaped(file)),
                None => why.to_owned(),
            }));
        }
        Ok(script)
    }

    /// Reads and parses a script file; the error names it.
    pub fn load(path: &Path) -> Result<Self, ScriptError> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            let message = format!("cannot read the script {}: {e}", path.display());
            ScriptError::new(ScriptErrorKind::Read, message)
        })?;
        Self::parse_in(&text, Some(path))
    }
}

/// What is wrong with a [`Script`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ScriptErrorKind {
    /// The file cannot be read.
    Read,
    /// A block header other than `=== user` or `=== model`, text before the first block, or
    /// no `=== user` block.
    Format,
}

/// Why a [`Script`] cannot be used: a kind and one line saying where, what and what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ScriptError {
    /// What is wrong.
    pub kind: ScriptErrorKind,
    /// One line: the file and line, what is wrong, and what to do.
    pub message: String,
}

impl ScriptError {
    fn new(kind: ScriptErrorKind, message: String) -> Self {
        Self { kind, message }
    }
}

/// A [`Model`] that replays scripted replies, in order, streaming each in small chunks. The
/// loop runs with no network.
#[derive(Debug, Default)]
pub struct ScriptedModel {
    replies: Mutex<std::collections::VecDeque<String>>,
    chunk_chars: usize,
}

impl ScriptedModel {
    /// Replays `replies`, streamed 16 characters at a time.
    pub fn new(replies: impl IntoIterator<Item = String>) -> Self {
        Self {
            replies: Mutex::new(replies.into_iter().collect()),
            chunk_chars: 16,
        }
    }

    /// How many replies are left.
    pub fn remaining(&self) -> usize {
        lock(&self.replies).len()
    }
}

impl Model for ScriptedModel {
    fn reply<'a>(
        &'a self,
        _request: ModelRequest<'a>,
        chunk: &'a mut (dyn FnMut(&str) + Send),
    ) -> ModelFuture<'a> {
        Box::pin(async move {
            let reply = lock(&self.replies)
                .pop_front()
                .ok_or(ModelError::ScriptEnded)?;
            let chars: Vec<char> = reply.chars().collect();
            for piece in chars.chunks(self.chunk_chars.max(1)) {
                chunk(&piece.iter().collect::<String>());
                tokio::task::yield_now().await;
            }
            Ok(reply)
        })
    }
}

/// A model the host samples with, and its name as the answer gives it (`model` of
/// `sampling/createMessage`'s result).
#[derive(Clone)]
pub struct SamplingModel {
    /// The model.
    pub model: std::sync::Arc<dyn Model>,
    /// Its name (the model's name on its server).
    pub name: String,
}

/// Where a host finds the model that answers sampling requests: the CLI gives one that reads
/// the profile's `models.toml` ([`Host::set_sampling_models`](crate::Host::set_sampling_models)).
pub trait SamplingModels: Send + Sync {
    /// The model of `profile` for a completion of at most `max_tokens` tokens. `Err`: why
    /// there is none, one line that says what to do (no model configured, a mistake in
    /// `models.toml`, a missing API key).
    fn model(&self, profile: &str, max_tokens: u32) -> Result<SamplingModel, String>;
}
