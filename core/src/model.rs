//! The model the message loop asks, and the scripted one that replays a conversation.

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Mutex;

use crate::secrets::Masked;
use crate::transcript::HistoryMessage;

/// What the model is asked: the system prompt and the history so far (already masked: secret
/// values never reach a model).
#[derive(Debug, Clone, Copy)]
pub struct ModelRequest<'a> {
    /// The system prompt.
    pub system: &'a Masked,
    /// The conversation so far, oldest first.
    pub history: &'a [HistoryMessage],
}

/// A boxed future, so that [`Model`] can be used as `dyn Model`.
pub type ModelFuture<'a> = Pin<Box<dyn Future<Output = Result<String, ModelError>> + Send + 'a>>;

/// Why the model gave no reply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// A scripted model has no more replies.
    #[error("the script has no more model replies: add a '=== model' block or end with the response tool")]
    ScriptEnded,
    /// The model failed.
    #[error("the model failed: {0}")]
    Failed(String),
}

/// A language model: one required method.
///
/// `reply` streams the reply's text through `chunk` as it arrives (the loop masks secrets in it
/// and shows it live) and returns the whole text.
pub trait Model: Send + Sync {
    /// Answers `request`.
    fn reply<'a>(
        &'a self,
        request: ModelRequest<'a>,
        chunk: &'a mut (dyn FnMut(&str) + Send),
    ) -> ModelFuture<'a>;
}

/// A conversation to replay: user messages and the model's replies, in order.
///
/// The text format: blocks that each start with a line `=== user` or `=== model`; lines
/// before the first block starting with `#` are comments.
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
    pub fn parse(text: &str) -> Result<Self, String> {
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
                other => match &mut current {
                    Some((_, lines)) => lines.push(other),
                    None if other.trim().is_empty() || other.starts_with('#') => {}
                    None => {
                        return Err(format!(
                            "line {}: text before the first '=== user' or '=== model' line; start \
                             each block with one of them",
                            i + 1
                        ))
                    }
                },
            }
        }
        flush(current, &mut script);
        if script.user_messages.is_empty() {
            return Err("the script has no '=== user' block: it needs a task to start".to_owned());
        }
        Ok(script)
    }

    /// Reads and parses a script file.
    pub fn load(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the script {}: {e}", path.display()))?;
        Self::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
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
        self.replies.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

impl Model for ScriptedModel {
    fn reply<'a>(
        &'a self,
        _request: ModelRequest<'a>,
        chunk: &'a mut (dyn FnMut(&str) + Send),
    ) -> ModelFuture<'a> {
        Box::pin(async move {
            let reply = self
                .replies
                .lock()
                .unwrap_or_else(|e| e.into_inner())
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
