//! The host side of a call's context: the [`HostServices`] a plugin reaches through its
//! `Context` (plugin-abi writes the callback table from them).

use std::future::Future;
use std::sync::Arc;

use plugin_abi::{ContextField, FfiContext, FfiError, FfiResponse, HostServices, RString};
use plugin_api::{Response, ToolError};
use serde_json::{Map, Value};

use crate::agent::Agent;
use crate::exec::cancel::Cancel;
use crate::secrets::SecretAccess;
use crate::sync::lock;
use crate::transcript::{HistoryMessage, Role};

/// What a tool call's own context and each extension's within it share (an attempt gets a
/// copy with a cancellation of its own). The call itself is [`Call`](super::Call).
pub(crate) struct Shared {
    pub(crate) agent: Arc<Agent>,
    pub(crate) tool_name: Arc<str>,
    pub(crate) method: Option<Arc<str>>,
    pub(crate) log_id: u64,
    /// A call of `parallel`: no history entry of its own.
    pub(crate) nested: bool,
    /// Set when the host stops waiting for the call (deadline, intervention).
    pub(crate) cancel: Cancel,
    /// Which secrets the called tool may receive (its arguments are its own).
    pub(crate) secrets: SecretAccess,
    /// What the host refused the call's plugins (`secret:KEY`), for its audit record; shared
    /// by its attempts.
    pub(crate) refused: Arc<std::sync::Mutex<Vec<String>>>,
}

impl Shared {
    /// A call of `tool_name` whose tool may receive `secrets`; the rest as a fresh call.
    pub(crate) fn new(agent: Arc<Agent>, tool_name: Arc<str>, secrets: SecretAccess) -> Self {
        Self {
            agent,
            tool_name,
            method: None,
            log_id: 0,
            nested: false,
            cancel: Cancel::default(),
            secrets,
            refused: Arc::default(),
        }
    }

    /// What the host refused the call's plugins so far.
    pub(crate) fn refused(&self) -> Vec<String> {
        lock(&self.refused).clone()
    }
}

/// One tool call (or one extension run within it), as plugins see it. Its fields are the
/// [`Shared`] ones (through `Deref`). A call's context is one allocation; an extension's is one
/// more, holding its call's context and its own point and name.
pub(crate) struct CallContext(Kind);

enum Kind {
    /// A call's (or one attempt's) own context.
    Call(Shared),
    /// An extension's, within the call `parent` (always a `Kind::Call`).
    Extension {
        parent: Arc<CallContext>,
        point: Arc<str>,
        name: Arc<str>,
        /// What the extension itself may receive, if it runs in a worker process, and what
        /// each extension that fired its point may (a point fired by an isolated extension
        /// runs with no more than it has).
        own: Vec<SecretAccess>,
    },
}

impl std::ops::Deref for CallContext {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        match &self.0 {
            Kind::Call(call) => call,
            Kind::Extension { parent, .. } => parent,
        }
    }
}

impl CallContext {
    /// The context of a new call.
    pub(crate) fn new(call: Shared) -> Self {
        Self(Kind::Call(call))
    }

    /// The extension's point and name, for a context handed to an extension.
    pub(crate) fn extension(&self) -> Option<(&Arc<str>, &Arc<str>)> {
        match &self.0 {
            Kind::Call(_) => None,
            Kind::Extension { point, name, .. } => Some((point, name)),
        }
    }

    /// A new reference for a plugin.
    pub(crate) fn to_ffi(self: &Arc<Self>) -> FfiContext {
        FfiContext::new(self.clone())
    }

    /// The agent itself, outside any tool call (the message loop's extension points).
    pub(crate) fn for_agent(agent: Arc<Agent>) -> Self {
        Self::new(Shared::new(agent, "".into(), SecretAccess::All))
    }

    /// The same call for one more attempt of `execute`, with a cancellation of its own.
    pub(crate) fn for_attempt(self: &Arc<Self>) -> Arc<Self> {
        let attempt = Arc::new(Self::new(Shared {
            agent: self.agent.clone(),
            tool_name: self.tool_name.clone(),
            method: self.method.clone(),
            log_id: self.log_id,
            nested: self.nested,
            cancel: Cancel::default(),
            secrets: self.secrets.clone(),
            refused: self.refused.clone(),
        }));
        match &self.0 {
            Kind::Call(_) => attempt,
            Kind::Extension {
                point, name, own, ..
            } => Arc::new(Self(Kind::Extension {
                parent: attempt,
                point: point.clone(),
                name: name.clone(),
                own: own.clone(),
            })),
        }
    }

    /// The same call, seen from the extension `name` at `point` (which may receive the
    /// secrets `own` allows, if it runs in a worker process, and never more than the call's
    /// tool).
    pub(crate) fn for_extension(
        self: &Arc<Self>,
        point: &Arc<str>,
        name: &Arc<str>,
        own: Option<SecretAccess>,
    ) -> Arc<Self> {
        let (parent, mut inherited) = match &self.0 {
            Kind::Call(_) => (self.clone(), Vec::new()),
            Kind::Extension { parent, own, .. } => (parent.clone(), own.clone()),
        };
        inherited.extend(own);
        Arc::new(Self(Kind::Extension {
            parent,
            point: point.clone(),
            name: name.clone(),
            own: inherited,
        }))
    }

    /// `value` with its placeholders filled in, if every key is one this context may
    /// receive: the call's tool's, and an isolated extension's own. A refusal is noted for
    /// the call's audit record and logged (the keys, never a value).
    fn unmask(&self, value: &mut Value) -> Result<(), ToolError> {
        let own: &[SecretAccess] = match &self.0 {
            Kind::Extension { own, .. } => own,
            Kind::Call(_) => &[],
        };
        for access in std::iter::once(&self.secrets).chain(own) {
            if let Err(refused) = access.check(value) {
                tracing::info!("{}", refused.error.message());
                let mut noted = lock(&self.refused);
                for key in refused.keys {
                    let grant = format!("secret:{key}");
                    if !noted.contains(&grant) {
                        noted.push(grant);
                    }
                }
                return Err(refused.error);
            }
        }
        let listed = own.last().unwrap_or(&self.secrets);
        self.agent.host.secrets().unmask_value_with(value, listed)?;
        Ok(())
    }
}

impl HostServices for CallContext {
    fn field(&self, field: ContextField) -> String {
        match field {
            ContextField::AgentName => self.agent.name().to_owned(),
            ContextField::Profile => self.agent.profile().to_owned(),
            ContextField::ToolName => self.tool_name.to_string(),
            ContextField::Method => self.method.as_deref().unwrap_or_default().to_owned(),
            ContextField::ExtensionPoint => self
                .extension()
                .map(|(p, _)| p.to_string())
                .unwrap_or_default(),
            ContextField::ExtensionName => self
                .extension()
                .map(|(_, n)| n.to_string())
                .unwrap_or_default(),
            ContextField::LogId => self.log_id.to_string(),
            // Only a worker process has one (crate::worker).
            ContextField::Scratch => String::new(),
            ContextField::TraceParent => crate::telemetry::traceparent().unwrap_or_default(),
        }
    }

    fn log_content(&self, content: &str) {
        self.replace_log_content(content)
    }

    fn set_progress(self: &Arc<Self>, text: RString) -> impl Future<Output = ()> + Send + 'static {
        let call = self.clone();
        async move {
            if let Err(e) = call.report_progress(text.into_string()).await {
                let e = call.agent.host.secret_store().error(&e);
                tracing::warn!("a tool_output_update extension failed: {e}");
            }
        }
    }

    fn add_progress(&self, text: &str) {
        self.append_progress(text)
    }

    fn check_intervention(
        self: &Arc<Self>,
    ) -> impl Future<Output = Result<(), FfiError>> + Send + 'static {
        let call = self.clone();
        async move {
            call.agent
                .check_intervention()
                .await
                .map_err(FfiError::from)
        }
    }

    fn loop_data_get(&self, key: &str) -> Option<String> {
        self.agent
            .loop_data(key)
            .map(|v| serde_json::to_string(&v).unwrap_or_default())
    }

    fn loop_data_set(&self, key: &str, json: RString) -> Result<(), FfiError> {
        let value = serde_json::from_str::<Value>(&json).map_err(|e| {
            ToolError::validation(format!("loop data '{key}' is not valid JSON: {e}"))
        })?;
        self.agent.set_loop_data(key, value);
        Ok(())
    }

    fn history_add(&self, role: &str, content: RString) {
        let role = Role::parse(role).unwrap_or_else(|| {
            tracing::warn!(
                "tool '{}' added history with unknown role '{role}'; using 'tool'",
                self.tool_name
            );
            Role::Tool
        });
        let content = self.agent.mask(content.into_string());
        let message = HistoryMessage::new(role, content).from_tool(self.tool_name.to_string());
        self.agent.transcript.add_history(message);
    }

    fn default_before_execution(
        self: &Arc<Self>,
        args: RString,
    ) -> impl Future<Output = Result<(), FfiError>> + Send + 'static {
        let call = self.clone();
        async move {
            // Arguments that are not an object (a plugin's bug) have nothing to show.
            let args = serde_json::from_str::<Map<String, Value>>(&args).unwrap_or_default();
            call.show_call(&args);
            Ok(())
        }
    }

    fn default_after_execution(
        self: &Arc<Self>,
        response: FfiResponse,
    ) -> impl Future<Output = Result<(), FfiError>> + Send + 'static {
        let call = self.clone();
        async move {
            call.record_result(&Response::from(response));
            Ok(())
        }
    }

    fn unmask_json(&self, json: RString) -> Result<String, FfiError> {
        let mut value: Value = serde_json::from_str(&json)
            .map_err(|e| ToolError::internal(format!("unmask_json: not JSON: {e}")))?;
        self.unmask(&mut value)?;
        Ok(serde_json::to_string(&value).unwrap_or_default())
    }

    fn mask_text(&self, text: RString) -> String {
        let own: &[SecretAccess] = match &self.0 {
            Kind::Extension { own, .. } => own,
            Kind::Call(_) => &[],
        };
        let limited = std::iter::once(&self.secrets)
            .chain(own)
            .filter_map(SecretAccess::granted)
            .next_back();
        match limited {
            // A plugin in a worker masks with the values it may have, no other: masking with
            // every value would tell it which of its guesses is one (the host masks what it
            // gives back with all of them anyway).
            Some(keys) => {
                let secrets = self.agent.host.secrets();
                let pairs = keys
                    .iter()
                    .filter_map(|k| secrets.get(k).map(|v| (k.clone(), v.to_owned())));
                crate::Secrets::from_pairs(pairs).mask(&text).into_inner()
            }
            None => self.agent.mask(text.into_string()).into_inner(),
        }
    }

    fn call_extensions(
        self: &Arc<Self>,
        point: RString,
        json: RString,
    ) -> impl Future<Output = Result<String, FfiError>> + Send + 'static {
        let call = self.clone();
        async move {
            let value: Value = serde_json::from_str(&json)
                .map_err(|e| ToolError::internal(format!("call_extensions: not JSON: {e}")))?;
            // Within this call: the extensions it fires receive no secret it may not.
            let out = call.call_extensions_within(&point, value).await?;
            Ok(out.to_string())
        }
    }

    fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    fn cancelled(self: &Arc<Self>) -> impl Future<Output = ()> + Send + 'static {
        let call = self.clone();
        async move { call.cancel.cancelled().await }
    }

    fn ask(
        self: &Arc<Self>,
        request: RString,
    ) -> impl Future<Output = Result<String, FfiError>> + Send + 'static {
        let call = self.clone();
        async move {
            let request = serde_json::from_str(&request).map_err(|e| {
                ToolError::validation(format!("a request this host does not know: {e}"))
            })?;
            let answer = call.answer_ask(request).await?;
            Ok(answer.to_string())
        }
    }

    fn panicked(callback: &str, message: &str) {
        tracing::error!("host context function {callback} panicked: {message}");
    }
}
