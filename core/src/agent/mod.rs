//! An agent: a thin owner of its parts. The [`Transcript`] holds its history, log and session;
//! the [`Intervention`] holds pause, stop and the user's messages; the [`Approvals`] who is
//! asked about calls; the host's secrets mask everything on its way to any of them.
//!
//! [`Agent::call_tool`] makes each tool call a value of its own, [`call::Call`], whose
//! methods are the steps of its lifecycle (`call/`); [`Agent::monologue`] runs the message
//! loop (`message_loop/`).

pub(crate) mod call;
pub(crate) mod intervention;
pub(crate) mod message_loop;
pub mod output;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{Map, Value};

use crate::agent::call::ask::Asker;
use crate::agent::intervention::{Check, Intervention};
use crate::agent::output::{Output, OutputKind, Terminal};
use crate::audit::AuditError;
use crate::governance::{Approvals, Approver};
use crate::host::error::HostError;
use crate::host::Host;
use crate::layout::is_safe_name;
use crate::model::Usage;
use crate::plugin::ToolHandle;
use crate::secrets::Masked;
use crate::sync::lock;
use crate::transcript::{HistoryMessage, LogItem, LogKind, Transcript};
use plugin_api::{Response, ToolError};

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

    /// Calls a tool through the whole lifecycle and returns its response.
    ///
    /// `request` is `name` or `name:method`; `args` is the JSON object of arguments (`null` is
    /// taken as `{}`). The steps, in order, are stated once, on
    /// [`plugin_api::Tool`](plugin_api::Tool#lifecycle), and each is a method of the call's
    /// value, [`call::Call`]; an interruption is [`interject`](Self::interject).
    pub async fn call_tool(
        self: &Arc<Self>,
        request: &str,
        args: Value,
    ) -> Result<Response, ToolError> {
        call::lifecycle::call(self, request, args, false).await
    }

    /// Whether a call of `request` (`name` or `name:method`) reaches a tool of that name (a
    /// library in the profile's layers, a ready MCP server's tool, or the built-in `parallel`)
    /// rather than the Unknown tool. An invalid name is not a tool.
    pub fn has_tool(&self, request: &str) -> bool {
        call::resolve::has_tool(self, request)
    }

    /// Runs only `execute` of an already resolved library tool: no lookup, hooks, extensions,
    /// intervention checks, log or history. This is the raw cost of crossing the plugin
    /// boundary, for benchmarks and debugging; agents use [`call_tool`](Self::call_tool).
    pub async fn execute_bare(
        self: &Arc<Self>,
        tool: &ToolHandle,
        args: &Value,
    ) -> Result<Response, ToolError> {
        call::lifecycle::execute_bare(self, tool, args).await
    }

    /// Sets who is asked when the policy says "ask" (without one, such calls are denied).
    pub fn set_approver(&self, approver: Arc<dyn Approver>) {
        *lock(&self.approvals.approver) = Some(approver);
    }

    /// Marks the agent as serving an MCP client (`toolhost serve-mcp` does for each call's
    /// agent): its calls follow [`Config::mcp_policy`](crate::config::Config::mcp_policy), so a tool
    /// saved as `allow` in a terminal session is still asked about, and answering "always"
    /// saves `mcp_policy`.
    pub fn serve_mcp_client(&self, yes: bool) {
        let flag = &self.approvals.for_mcp_client;
        flag.store(yes, std::sync::atomic::Ordering::SeqCst);
    }

    /// Approves the asks for `write` tools without asking (`--yes`); `exec` tools are still
    /// asked.
    pub fn approve_writes(&self, yes: bool) {
        let flag = &self.approvals.yes_to_writes;
        flag.store(yes, std::sync::atomic::Ordering::SeqCst);
    }

    /// Sets who answers what plugins ask (log, elicit, sample); without one, log messages go
    /// to the host's log, forms to the agent's approver (the terminal) and completions to the
    /// host's model ([`Host::set_sampling_models`](crate::Host::set_sampling_models)).
    pub fn set_asker(&self, asker: Arc<dyn Asker>) {
        *lock(&self.asker) = Some(asker);
    }

    /// The first audit record this agent could not write since it was made, if any: the call
    /// it belongs to ran (or failed) without it. Each failure is also logged as a warning
    /// (see `call/audit.rs`).
    pub fn audit_failure(&self) -> Option<AuditError> {
        self.state().audit_failure.clone()
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
