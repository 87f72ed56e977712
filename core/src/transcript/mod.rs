//! An agent's transcript: its history (what the model reads), its log (what a person reads)
//! and the session files they are recorded to. Everything in it is [`Masked`].

pub(crate) mod session;

pub use session::Session;

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::secrets::{Masked, TextFields};
use crate::sync::lock;

/// Who wrote a history message: the contract's own type, which plugins pass to
/// `Context::add_history`.
pub use plugin_api::Role;

/// One message of the agent's history.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HistoryMessage {
    /// Who wrote it.
    pub role: Role,
    /// Its text.
    pub content: Masked,
    /// For tool results: the tool's name.
    pub tool_name: Option<String>,
    /// For tool results: the response's `additional` data.
    pub additional: Option<Masked<Map<String, Value>>>,
    /// For the model's replies under the native tool protocol: the tool calls it made.
    #[serde(skip_serializing_if = "no_calls")]
    pub tool_calls: Masked<Vec<ToolCall>>,
    /// For a tool result under the native tool protocol: the id of the call it answers (the
    /// result of several calls, run as one `parallel` request, has none: its `additional`
    /// holds one result per call, in the order of the calls).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// For a tool result: the images the tool returned, which a model that sees images
    /// (`vision = true` in models.toml) gets as image parts. The session's files name each
    /// by the file it was saved to, never its bytes.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<Image>,
}

/// An image a tool returned, kept with its tool result for models that see images.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Image {
    /// Its MIME type (`image/png`).
    pub mime_type: String,
    /// Its bytes (in memory only: never written into the session's JSON).
    #[serde(skip)]
    pub data: std::sync::Arc<[u8]>,
    /// The file it was saved to, relative to the session folder (`content/7-1.png`), if the
    /// session is recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<PathBuf>,
}

impl Image {
    /// An image of `mime_type` with its bytes, saved as `file` (if it was).
    pub fn new(mime_type: String, data: std::sync::Arc<[u8]>, file: Option<PathBuf>) -> Self {
        Self {
            mime_type,
            data,
            file,
        }
    }

    /// The image as a `data:` URL (`data:image/png;base64,...`), as OpenAI-compatible servers
    /// read an image part.
    pub fn data_url(&self) -> String {
        use base64::Engine;
        let encoded = base64::engine::general_purpose::STANDARD.encode(&self.data);
        format!("data:{};base64,{encoded}", self.mime_type)
    }
}

impl HistoryMessage {
    /// A message of `role` with its (masked) text: no tool, no tool calls.
    pub fn new(role: Role, content: Masked) -> Self {
        Self {
            role,
            content,
            tool_name: None,
            additional: None,
            tool_calls: Masked::default(),
            tool_call_id: None,
            images: Vec::new(),
        }
    }

    /// The result of tool `tool_name`: its text and its response's `additional` data.
    pub fn tool_result(
        tool_name: impl Into<String>,
        content: Masked,
        additional: Option<Masked<Map<String, Value>>>,
    ) -> Self {
        Self {
            tool_name: Some(tool_name.into()),
            additional,
            ..Self::new(Role::Tool, content)
        }
    }

    /// The same message, written by tool `tool_name` (a message a tool adds to the history).
    pub fn from_tool(self, tool_name: impl Into<String>) -> Self {
        Self {
            tool_name: Some(tool_name.into()),
            ..self
        }
    }

    /// The same message, with the images of a tool's result.
    pub fn with_images(self, images: Vec<Image>) -> Self {
        Self { images, ..self }
    }

    /// The same message, with the tool calls the model made in it (native tool protocol).
    pub fn with_tool_calls(self, tool_calls: Masked<Vec<ToolCall>>) -> Self {
        Self { tool_calls, ..self }
    }
}

fn no_calls(calls: &Masked<Vec<ToolCall>>) -> bool {
    calls.is_empty()
}

/// A tool call a model made under the native tool protocol.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The model's id for the call; the result goes back with it.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments, as the JSON text the model wrote.
    pub arguments: String,
}

impl TextFields for ToolCall {
    fn for_each_text(&mut self, f: &mut dyn FnMut(&mut String)) {
        for field in [&mut self.id, &mut self.name, &mut self.arguments] {
            f(field);
        }
    }
}

/// What a log item is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum LogKind {
    /// A message from the user.
    User,
    /// A reply of the model.
    Agent,
    /// A tool call.
    Tool,
    /// A warning shown to the model.
    Warning,
    /// The loop ended with an error.
    Error,
    /// The final answer.
    Response,
}

impl LogKind {
    /// `user`, `agent`, `tool`, `warning`, `error` or `response`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Agent => "agent",
            Self::Tool => "tool",
            Self::Warning => "warning",
            Self::Error => "error",
            Self::Response => "response",
        }
    }
}

impl PartialEq<&str> for LogKind {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// One item of the agent's log (what a UI shows).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LogItem {
    /// Unique within the agent.
    pub id: u64,
    /// What it is about.
    pub kind: LogKind,
    /// `Using tool 'name:method'`.
    pub heading: Masked,
    /// The result text, once known.
    pub content: Masked,
    /// Key-values: the call's arguments.
    pub kvps: Masked<Map<String, Value>>,
    /// The latest progress text.
    pub progress: Masked,
    /// Whether the call has finished.
    pub finished: bool,
    /// The tool's result metadata ([`Response::metadata`](crate::Response::metadata)): for the
    /// log and the audit, never the model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Masked<Map<String, Value>>>,
}

#[derive(Default)]
struct Inner {
    history: Vec<HistoryMessage>,
    log: Vec<LogItem>,
    session: Option<Session>,
    /// The id of the native tool call whose result the next tool result is.
    pending_call: Option<String>,
}

/// History, log and session of one agent, behind one lock.
#[derive(Default)]
pub(crate) struct Transcript {
    inner: Mutex<Inner>,
}

impl Transcript {
    fn inner(&self) -> MutexGuard<'_, Inner> {
        lock(&self.inner)
    }

    /// A copy of the history.
    pub(crate) fn history(&self) -> Vec<HistoryMessage> {
        self.inner().history.clone()
    }

    /// The next tool result answers the native tool call `id` (`None`: no call is pending).
    pub(crate) fn expect_result_of(&self, id: Option<String>) {
        self.inner().pending_call = id;
    }

    /// A copy of the log.
    pub(crate) fn log(&self) -> Vec<LogItem> {
        self.inner().log.clone()
    }

    /// Adds a message to the history (and the session). The first tool result after
    /// [`expect_result_of`](Self::expect_result_of) gets that call's id.
    pub(crate) fn add_history(&self, mut message: HistoryMessage) {
        let mut inner = self.inner();
        if message.role == Role::Tool && message.tool_call_id.is_none() {
            message.tool_call_id = inner.pending_call.take();
        }
        if let Some(session) = &mut inner.session {
            session.history(&message);
        }
        inner.history.push(message);
    }

    /// Adds a log item; returns its id. A finished item goes to the session at once.
    pub(crate) fn add_log(&self, mut item: LogItem) -> u64 {
        let mut inner = self.inner();
        item.id = inner.log.len() as u64 + 1;
        if let (Some(session), true) = (&mut inner.session, item.finished) {
            session.log(&item);
        }
        let id = item.id;
        inner.log.push(item);
        id
    }

    /// Changes the log item `id`. It goes to the session once it is finished: progress
    /// appended piece by piece could hold part of a value until the rest arrives.
    pub(crate) fn update_log(&self, id: u64, change: impl FnOnce(&mut LogItem)) {
        let mut inner = self.inner();
        let Inner { log, session, .. } = &mut *inner;
        if let Some(item) = id.checked_sub(1).and_then(|i| log.get_mut(i as usize)) {
            change(item);
            if let (Some(session), true) = (session, item.finished) {
                session.log(item);
            }
        }
    }

    /// Records the transcript under `parent` from now on; returns the session's folder.
    pub(crate) fn record(&self, parent: &Path, agent: &str) -> std::io::Result<PathBuf> {
        let session = Session::create(parent, agent)?;
        let dir = session.dir().to_owned();
        self.inner().session = Some(session);
        Ok(dir)
    }

    /// Why the session's record could not be written, once a write failed.
    pub(crate) fn session_failure(&self) -> Option<String> {
        let inner = self.inner();
        inner.session.as_ref()?.failure().map(str::to_owned)
    }

    /// The folder of the session being recorded, if any.
    pub(crate) fn session_dir(&self) -> Option<PathBuf> {
        self.inner().session.as_ref().map(|s| s.dir().to_owned())
    }

    /// Writes the log items that are not finished yet to the session (at the end of a
    /// monologue: a tool that was interrupted or failed).
    pub(crate) fn flush_session_log(&self) {
        let mut inner = self.inner();
        let Inner { log, session, .. } = &mut *inner;
        if let Some(session) = session {
            for item in log.iter().filter(|i| !i.finished) {
                session.log(item);
            }
        }
    }
}
