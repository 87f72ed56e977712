//! An agent: a thin owner of its parts. The [`Transcript`] holds its history, log and session;
//! the [`Intervention`] holds pause, stop and the user's messages; the host's secrets mask
//! everything on its way to any of them. The lifecycle of a call is in `lifecycle.rs`, the
//! message loop in `message_loop.rs`.

pub(crate) mod call;
pub(crate) mod intervention;
pub(crate) mod message_loop;
pub mod output;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{Map, Value};

use crate::agent::intervention::{Check, Intervention};
use crate::agent::output::{Output, OutputKind, Terminal};
use crate::governance::Approvals;
use crate::host::error::HostError;
use crate::host::Host;
use crate::layout::is_safe_name;
use crate::model::Usage;
use crate::secrets::Masked;
use crate::sync::lock;
use crate::transcript::{HistoryMessage, LogItem, LogKind, Transcript};
use plugin_api::ToolError;

#[derive(Default)]
struct State {
    loop_data: Map<String, Value>,
    current_tool: Option<String>,
    initialised: bool,
    usage: Usage,
    /// The first audit record this agent could not write.
    audit_failure: Option<crate::audit::AuditError>,
    /// While a monologue runs: its model's bound on one tool answer
    /// ([`Model::max_tool_answer_bytes`](crate::Model::max_tool_answer_bytes)).
    model_answer_limit: Option<usize>,
}

/// An agent using a [`Host`]'s tools under one profile.
pub struct Agent {
    pub(crate) host: Arc<Host>,
    name: String,
    profile: String,
    state: Mutex<State>,
    pub(crate) transcript: Transcript,
    pub(crate) intervention: Intervention,
    pub(crate) output: Arc<dyn Output>,
    /// Who is asked about calls the policy asks for, and what was approved for the session.
    pub(crate) approvals: Approvals,
    /// Who answers what plugins ask (log, elicit, sample), if anyone (`call/ask.rs`).
    pub(crate) asker: Mutex<Option<Arc<dyn call::ask::Asker>>>,
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
        // The profile's MCP servers start in the background (never waited for here).
        #[cfg(feature = "mcp")]
        host.mcp_profile(profile);
        Ok(Arc::new(Self {
            host,
            name: name.to_owned(),
            profile: profile.to_owned(),
            state: Mutex::default(),
            transcript: Transcript::default(),
            intervention: Intervention::new(name),
            approvals: Approvals::default(),
            asker: Mutex::default(),
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
        lock(&self.state)
    }

    /// A copy of the history.
    pub fn history(&self) -> Vec<HistoryMessage> {
        self.transcript.history()
    }

    /// A copy of the log.
    pub fn log(&self) -> Vec<LogItem> {
        self.transcript.log()
    }

    /// Adds a message to the history. Its content is [`Masked`] already; it is masked again
    /// with this host's current secrets, in case it was masked with others.
    pub fn add_history(&self, mut message: HistoryMessage) {
        let store = self.host.secret_store();
        if store.active().is_some() {
            message.content = store.text(message.content.into_inner());
            message.additional = message.additional.map(|a| store.map(a.into_inner()));
        }
        self.transcript.add_history(message);
    }

    /// Records this agent's history and log under `parent` (normally `usr/sessions/`) from now
    /// on, as JSON Lines; returns the session's folder.
    pub fn record_session(&self, parent: &Path) -> std::io::Result<PathBuf> {
        self.transcript.record(parent, &self.name)
    }

    /// The tokens the model spent on this agent's requests so far, summed over its
    /// monologues (as far as the model reported them).
    pub fn usage(&self) -> Usage {
        self.state().usage
    }

    pub(crate) fn add_usage(&self, usage: Usage) {
        self.state().usage += usage;
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

    /// Marks the agent as initialised; true the first time.
    pub(crate) fn first_init(&self) -> bool {
        !std::mem::replace(&mut self.state().initialised, true)
    }

    /// Sends the agent a message while it works: the current iteration ends at its next
    /// checkpoint (the running tool's progress so far is kept as its result), and the message
    /// loop goes on with the message in the history.
    ///
    /// Outside a monologue the message waits, and joins the history at the next monologue's
    /// first checkpoint.
    pub fn interject(&self, message: &str) {
        self.intervention.interject(message);
    }

    /// Pauses the agent: the next intervention check waits until [`resume`](Self::resume).
    pub fn pause(&self) {
        self.intervention.pause();
    }

    /// Resumes a paused agent.
    pub fn resume(&self) {
        self.intervention.resume();
    }

    /// Stops the agent: the next intervention check fails with an intervention error, until
    /// [`clear_stop`](Self::clear_stop).
    pub fn stop(&self) {
        self.intervention.stop();
    }

    /// Lets a stopped agent run again.
    pub fn clear_stop(&self) {
        self.intervention.clear_stop();
    }

    /// Whether the agent was stopped.
    pub fn is_stopped(&self) -> bool {
        self.intervention.is_stopped()
    }

    /// Waits while paused; fails with an intervention error if stopped, or if a message sent
    /// with [`interject`](Self::interject) interrupted a running monologue. The lifecycle calls
    /// this between steps, and tools through
    /// [`Context::check_intervention`](plugin_api::Context::check_intervention).
    pub async fn check_intervention(&self) -> Result<(), ToolError> {
        self.intervention.check(Check::All).await
    }

    /// `text` with every secret value masked.
    pub(crate) fn mask(&self, text: String) -> Masked {
        self.host.secret_store().text(text)
    }

    /// Adds a log item, masked; returns its id.
    pub(crate) fn add_log(
        &self,
        kind: LogKind,
        heading: String,
        content: String,
        kvps: Map<String, Value>,
        finished: bool,
    ) -> u64 {
        let item = LogItem {
            id: 0,
            kind,
            heading: self.mask(heading),
            content: self.mask(content),
            kvps: self.host.secret_store().map(kvps),
            progress: Masked::default(),
            finished,
            metadata: None,
        };
        self.transcript.add_log(item)
    }

    /// Adds a finished log item with no key-values (a message, a warning, an answer).
    pub(crate) fn add_note(&self, kind: LogKind, heading: String, content: String) {
        self.add_log(kind, heading, content, Map::new(), true);
    }

    /// Prints to the agent's output, with every secret value masked.
    pub(crate) fn print(&self, kind: OutputKind, text: impl FnOnce() -> String) {
        if self.output.enabled() {
            self.output.print(kind, &self.mask(text()));
        }
    }
}
