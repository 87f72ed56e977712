//! An agent: its profile, history, log, loop data and intervention state.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use serde::Serialize;
use serde_json::{Map, Value};
use tokio::sync::watch;

use crate::error::HostError;
use crate::name::is_safe_name;
use crate::output::{Output, OutputKind, Terminal};
use crate::session::Session;
use crate::{Host, ToolError};

/// Who wrote a history message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The user.
    User,
    /// The model.
    Ai,
    /// A tool result.
    Tool,
    /// A warning shown to the model (for example a repairable error).
    Warning,
}

impl Role {
    /// Parses `user`, `ai`, `tool` or `warning`.
    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "user" => Self::User,
            "ai" | "assistant" => Self::Ai,
            "tool" => Self::Tool,
            "warning" => Self::Warning,
            _ => return None,
        })
    }
}

/// One message of the agent's history.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HistoryMessage {
    /// Who wrote it.
    pub role: Role,
    /// Its text.
    pub content: String,
    /// For tool results: the tool's name.
    pub tool_name: Option<String>,
    /// For tool results: the response's `additional` data.
    pub additional: Option<Map<String, Value>>,
}

/// One item of the agent's log (what a UI shows).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LogItem {
    /// Unique within the agent.
    pub id: u64,
    /// `tool`, `warning`, ...
    pub kind: String,
    /// `Using tool 'name:method'`.
    pub heading: String,
    /// The result text, once known.
    pub content: String,
    /// Key-values: the call's arguments.
    pub kvps: Map<String, Value>,
    /// The latest progress text.
    pub progress: String,
    /// Whether the call has finished.
    pub finished: bool,
}

/// The user's intervention state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Intervention {
    paused: bool,
    stopped: bool,
    /// The user sent a message: the current iteration ends at the next checkpoint.
    interrupted: bool,
}

#[derive(Default)]
struct State {
    history: Vec<HistoryMessage>,
    log: Vec<LogItem>,
    loop_data: Map<String, Value>,
    current_tool: Option<String>,
    /// Messages the user sent while the agent was working.
    interjections: Vec<String>,
    /// A monologue is running: an interjection interrupts it.
    running: bool,
    session: Option<Session>,
    initialised: bool,
}

/// An agent using a [`Host`]'s tools under one profile.
pub struct Agent {
    pub(crate) host: Arc<Host>,
    name: String,
    profile: String,
    state: Mutex<State>,
    intervention: watch::Sender<Intervention>,
    /// Whether `intervention` is anything but the default: the checkpoints' lock-free fast path.
    intervening: AtomicBool,
    pub(crate) output: Arc<dyn Output>,
}

impl Agent {
    /// An agent named `name` (Agent Zero's first agent is `A0`) with `profile`; it prints to the
    /// terminal (standard error).
    pub fn new(host: Arc<Host>, name: &str, profile: &str) -> Result<Arc<Self>, HostError> {
        Self::with_output(host, name, profile, Arc::new(Terminal::default()))
    }

    /// Like [`new`](Self::new), printing to `output`.
    pub fn with_output(
        host: Arc<Host>,
        name: &str,
        profile: &str,
        output: Arc<dyn Output>,
    ) -> Result<Arc<Self>, HostError> {
        if !is_safe_name(profile) {
            return Err(HostError::InvalidProfile(profile.to_owned()));
        }
        Ok(Arc::new(Self {
            host,
            name: name.to_owned(),
            profile: profile.to_owned(),
            state: Mutex::default(),
            intervention: watch::Sender::new(Intervention::default()),
            intervening: AtomicBool::new(false),
            output,
        }))
    }

    /// The agent's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The agent's profile.
    pub fn profile(&self) -> &str {
        &self.profile
    }

    /// The host.
    pub fn host(&self) -> &Arc<Host> {
        &self.host
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A copy of the history.
    pub fn history(&self) -> Vec<HistoryMessage> {
        self.state().history.clone()
    }

    /// A copy of the log.
    pub fn log(&self) -> Vec<LogItem> {
        self.state().log.clone()
    }

    /// A loop-data value.
    pub fn loop_data(&self, key: &str) -> Option<Value> {
        self.state().loop_data.get(key).cloned()
    }

    /// Sets a loop-data value.
    pub fn set_loop_data(&self, key: &str, value: Value) {
        self.state().loop_data.insert(key.to_owned(), value);
    }

    /// The tool being called right now, as requested (`name[:method]`).
    pub fn current_tool(&self) -> Option<String> {
        self.state().current_tool.clone()
    }

    pub(crate) fn set_current_tool(&self, tool: Option<&str>) {
        self.state().current_tool = tool.map(str::to_owned);
    }

    /// Adds a message to the history, with every secret value masked.
    pub fn add_history(&self, mut message: HistoryMessage) {
        if let Some(secrets) = self.host.secret_store().active() {
            secrets.mask_in_place(&mut message.content);
            if let Some(additional) = &mut message.additional {
                secrets.mask_map(additional);
            }
        }
        let mut state = self.state();
        if let Some(session) = &mut state.session {
            session.history(&message);
        }
        state.history.push(message);
    }

    /// Writes the log items that are not finished yet to the session (at the end of a
    /// monologue: a tool that was interrupted or failed).
    pub(crate) fn flush_session_log(&self) {
        let mut state = self.state();
        let State { log, session, .. } = &mut *state;
        if let Some(session) = session {
            for item in log.iter().filter(|i| !i.finished) {
                session.log(item);
            }
        }
    }

    /// Records this agent's history and log under `parent` (normally `usr/sessions/`) from now
    /// on, as JSON Lines; returns the session's folder.
    pub fn record_session(&self, parent: &std::path::Path) -> std::io::Result<std::path::PathBuf> {
        let session = Session::create(parent, &self.name)?;
        let dir = session.dir().to_owned();
        self.state().session = Some(session);
        Ok(dir)
    }

    /// Sends the agent a message while it works: the current iteration ends at its next
    /// checkpoint (the running tool's progress so far is kept as its result), and the message
    /// loop goes on with the message in the history.
    ///
    /// Outside a monologue the message waits, and joins the history at the next monologue's
    /// first checkpoint.
    pub fn interject(&self, message: &str) {
        // The queue and the flag change under one lock, so no message can be left queued with
        // the flag cleared.
        let mut state = self.state();
        state.interjections.push(message.to_owned());
        if state.running {
            self.set_intervention(|i| i.interrupted = true);
        }
    }

    /// The messages sent with [`interject`](Self::interject) since the last call; clears the
    /// interruption.
    pub(crate) fn take_interjections(&self) -> Vec<String> {
        let mut state = self.state();
        let messages = std::mem::take(&mut state.interjections);
        self.set_intervention(|i| i.interrupted = false);
        messages
    }

    /// Marks a monologue as running or not; returns the messages still queued when it ends.
    pub(crate) fn set_running(&self, running: bool) -> Vec<String> {
        let mut state = self.state();
        state.running = running;
        if running {
            return Vec::new();
        }
        self.set_intervention(|i| i.interrupted = false);
        std::mem::take(&mut state.interjections)
    }

    /// A monologue was cancelled: not running any more; queued messages wait for the next.
    pub(crate) fn cancel_running(&self) {
        let mut state = self.state();
        state.running = false;
        self.set_intervention(|i| i.interrupted = false);
    }

    /// Whether messages sent with [`interject`](Self::interject) wait to join the history.
    pub(crate) fn has_interjections(&self) -> bool {
        !self.state().interjections.is_empty()
    }

    /// Whether the user interrupted (not stopped) the agent.
    pub(crate) fn is_interrupted(&self) -> bool {
        self.intervention.borrow().interrupted
    }

    /// Like [`check_intervention`](Self::check_intervention), but an interruption does not
    /// count: once a tool has run, its call completes, and the loop's next checkpoint takes the
    /// user's message.
    pub(crate) async fn check_pause_or_stop(&self) -> Result<(), ToolError> {
        self.wait_intervention(false).await
    }

    /// Whether the agent was stopped.
    pub fn is_stopped(&self) -> bool {
        self.intervention.borrow().stopped
    }

    /// Marks the agent as initialised; true the first time.
    pub(crate) fn first_init(&self) -> bool {
        !std::mem::replace(&mut self.state().initialised, true)
    }

    fn set_intervention(&self, change: impl FnOnce(&mut Intervention)) {
        self.intervention.send_modify(|i| {
            change(i);
            self.intervening
                .store(*i != Intervention::default(), Ordering::SeqCst);
        });
    }

    /// Pauses the agent: the next intervention check waits until [`resume`](Self::resume).
    pub fn pause(&self) {
        self.set_intervention(|i| i.paused = true);
    }

    /// Resumes a paused agent.
    pub fn resume(&self) {
        self.set_intervention(|i| i.paused = false);
    }

    /// Stops the agent: the next intervention check fails with an intervention error, until
    /// [`clear_stop`](Self::clear_stop).
    pub fn stop(&self) {
        self.set_intervention(|i| i.stopped = true);
    }

    /// Lets a stopped agent run again.
    pub fn clear_stop(&self) {
        self.set_intervention(|i| i.stopped = false);
    }

    /// Waits while paused; fails with an intervention error if stopped, or if a message sent
    /// with [`interject`](Self::interject) interrupted a running monologue. The lifecycle calls
    /// this between steps, and tools through
    /// [`Context::check_intervention`](plugin_api::Context::check_intervention).
    pub async fn check_intervention(&self) -> Result<(), ToolError> {
        self.wait_intervention(true).await
    }

    /// Waits while paused; fails if stopped, or if interrupted and `interruptions` count.
    async fn wait_intervention(&self, interruptions: bool) -> Result<(), ToolError> {
        if !self.intervening.load(Ordering::SeqCst) {
            return Ok(());
        }
        let mut rx = self.intervention.subscribe();
        loop {
            let state = *rx.borrow_and_update();
            if state.stopped {
                return Err(ToolError::intervention(format!(
                    "agent {} was stopped",
                    self.name
                )));
            }
            if interruptions && state.interrupted {
                return Err(ToolError::intervention(format!(
                    "agent {} was interrupted by a message from the user",
                    self.name
                )));
            }
            if !state.paused {
                return Ok(());
            }
            if rx.changed().await.is_err() {
                return Ok(());
            }
        }
    }

    pub(crate) fn new_log_item(&self, heading: String, kvps: Map<String, Value>) -> u64 {
        self.add_log("tool", heading, String::new(), kvps, false)
    }

    /// Adds a log item of `kind` (`user`, `agent`, `tool`, `warning`, `error`, `response`, ...),
    /// masked; returns its id.
    pub(crate) fn add_log(
        &self,
        kind: &str,
        heading: String,
        content: String,
        kvps: Map<String, Value>,
        finished: bool,
    ) -> u64 {
        let mut item = LogItem {
            id: 0,
            kind: kind.to_owned(),
            heading,
            content,
            kvps,
            progress: String::new(),
            finished,
        };
        self.mask_log_item(&mut item);
        let mut state = self.state();
        item.id = state.log.len() as u64 + 1;
        if let (Some(session), true) = (&mut state.session, item.finished) {
            session.log(&item);
        }
        let id = item.id;
        state.log.push(item);
        id
    }

    pub(crate) fn update_log(&self, id: u64, f: impl FnOnce(&mut LogItem)) {
        let secrets = self.host.secret_store().active();
        let mut state = self.state();
        let State { log, session, .. } = &mut *state;
        if let Some(item) = id.checked_sub(1).and_then(|i| log.get_mut(i as usize)) {
            f(item);
            if let Some(secrets) = &secrets {
                mask_item(secrets, item);
            }
            // Written once finished: progress appended piece by piece could hold part of a
            // value until the rest arrives and the whole is masked.
            if let (Some(session), true) = (session, item.finished) {
                session.log(item);
            }
        }
    }

    fn mask_log_item(&self, item: &mut LogItem) {
        if let Some(secrets) = self.host.secret_store().active() {
            mask_item(&secrets, item);
        }
    }

    pub(crate) fn loop_data_mut<R>(&self, f: impl FnOnce(&mut Map<String, Value>) -> R) -> R {
        f(&mut self.state().loop_data)
    }

    /// Prints to the agent's output, with every secret value masked.
    pub(crate) fn print(&self, kind: OutputKind, text: impl FnOnce() -> String) {
        if self.output.enabled() {
            let mut text = text();
            if let Some(secrets) = self.host.secret_store().active() {
                secrets.mask_in_place(&mut text);
            }
            self.output.print(kind, &text);
        }
    }
}

fn mask_item(secrets: &crate::Secrets, item: &mut LogItem) {
    for text in [&mut item.heading, &mut item.content, &mut item.progress] {
        secrets.mask_in_place(text);
    }
    secrets.mask_map(&mut item.kvps);
}

/// Agent Zero's `nice_key`: `search_query` -> `Search query`.
pub fn nice_key(key: &str) -> String {
    let spaced = key.replace('_', " ");
    let mut chars = spaced.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// Agent Zero's `sanitize_string`: control characters other than newline and tab are dropped
/// (Rust strings are already valid UTF-8).
pub fn sanitize(text: &str) -> String {
    text.chars()
        .filter(|c| !c.is_control() || matches!(c, '\n' | '\t'))
        .collect()
}
