//! The host side of a [`TestContext`](super::TestContext): the shared state a test reads, and
//! its [`HostServices`], which a plugin's [`Context`](crate::Context) reaches in-process
//! through the same callback table as the real host's.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};

use abi_stable::std_types::RString;
use plugin_abi::guard::catch_panic;
use plugin_abi::{ContextField, FfiContext, FfiError, FfiResponse, HostServices};
use serde_json::Value;

use super::secrets::TestSecrets;
use super::{ExtensionCall, HistoryEntry};
use crate::{Response, Role, ToolError};

/// What a test scripts `call_extensions` with, per point.
pub(super) type ExtensionHandler = Arc<dyn Fn(Value) -> Result<Value, ToolError> + Send + Sync>;

/// Who is calling.
#[derive(Debug, Clone)]
pub(super) struct Identity {
    pub(super) agent_name: String,
    pub(super) profile: String,
    pub(super) tool_name: String,
    pub(super) method: Option<String>,
    pub(super) log_id: u64,
}

/// What the plugin did, and what the test set up.
#[derive(Default)]
pub(super) struct Recorded {
    pub(super) progress: String,
    pub(super) progress_updates: Vec<String>,
    pub(super) log_content: Option<String>,
    pub(super) loop_data: HashMap<String, Value>,
    pub(super) loop_data_writes: Vec<(String, Value)>,
    pub(super) history: Vec<HistoryEntry>,
    pub(super) extension_calls: Vec<ExtensionCall>,
    pub(super) handlers: HashMap<String, ExtensionHandler>,
    pub(super) intervention: Option<String>,
}

/// Everything behind one test context; a plugin's `Context` holds a reference to it.
pub(super) struct State {
    pub(super) identity: Mutex<Identity>,
    pub(super) recorded: Mutex<Recorded>,
    pub(super) secrets: Mutex<TestSecrets>,
    pub(super) cancel: tokio::sync::watch::Sender<bool>,
}

/// Locks, ignoring poisoning: a test that panicked while holding a lock is already failing.
pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl State {
    pub(super) fn new() -> Self {
        Self {
            identity: Mutex::new(Identity {
                agent_name: "A0".to_owned(),
                profile: "default".to_owned(),
                tool_name: "tool".to_owned(),
                method: None,
                log_id: 1,
            }),
            recorded: Mutex::default(),
            secrets: Mutex::default(),
            cancel: tokio::sync::watch::Sender::new(false),
        }
    }

    /// A new reference for a plugin's `Context`.
    pub(super) fn to_ffi(self: &Arc<Self>) -> FfiContext {
        FfiContext::new(self.clone())
    }

    pub(super) fn recorded(&self) -> MutexGuard<'_, Recorded> {
        lock(&self.recorded)
    }
}

impl HostServices for State {
    fn field(&self, field: ContextField) -> String {
        let id = lock(&self.identity).clone();
        match field {
            ContextField::AgentName => id.agent_name,
            ContextField::Profile => id.profile,
            ContextField::ToolName => id.tool_name,
            ContextField::Method => id.method.unwrap_or_default(),
            ContextField::ExtensionPoint | ContextField::ExtensionName => String::new(),
            ContextField::LogId => id.log_id.to_string(),
            ContextField::Scratch | ContextField::TraceParent => String::new(),
        }
    }

    fn log_content(&self, content: &str) {
        self.recorded().log_content = Some(content.to_owned());
    }

    fn set_progress(self: &Arc<Self>, text: RString) -> impl Future<Output = ()> + Send + 'static {
        let mut recorded = self.recorded();
        recorded.progress = text.to_string();
        recorded.progress_updates.push(text.into_string());
        async {}
    }

    fn add_progress(&self, text: &str) {
        self.recorded().progress.push_str(text);
    }

    fn check_intervention(
        self: &Arc<Self>,
    ) -> impl Future<Output = Result<(), FfiError>> + Send + 'static {
        let intervention = self.recorded().intervention.clone();
        let result = match intervention {
            Some(message) => Err(ToolError::intervention(message).into()),
            None => Ok(()),
        };
        async move { result }
    }

    fn loop_data_get(&self, key: &str) -> Option<String> {
        self.recorded().loop_data.get(key).map(Value::to_string)
    }

    fn loop_data_set(&self, key: &str, json: RString) -> Result<(), FfiError> {
        let value = serde_json::from_str::<Value>(&json).map_err(|e| {
            ToolError::validation(format!("loop data '{key}' is not valid JSON: {e}"))
        })?;
        let mut recorded = self.recorded();
        recorded.loop_data.insert(key.to_owned(), value.clone());
        recorded.loop_data_writes.push((key.to_owned(), value));
        Ok(())
    }

    fn history_add(&self, role: &str, content: RString) {
        // The plugin side sends a `Role`'s name; anything else is a plugin of another kit.
        let role = Role::parse(role).unwrap_or(Role::Tool);
        let content = content.into_string();
        self.recorded().history.push(HistoryEntry { role, content });
    }

    fn default_before_execution(
        self: &Arc<Self>,
        _args: RString,
    ) -> impl Future<Output = Result<(), FfiError>> + Send + 'static {
        std::future::ready(Ok(()))
    }

    fn default_after_execution(
        self: &Arc<Self>,
        response: FfiResponse,
    ) -> impl Future<Output = Result<(), FfiError>> + Send + 'static {
        // As the host's default: the result joins the history as the tool's message.
        let entry = HistoryEntry {
            role: Role::Tool,
            content: Response::from(response).message,
        };
        self.recorded().history.push(entry);
        async { Ok(()) }
    }

    fn unmask_json(&self, json: RString) -> Result<String, FfiError> {
        let secrets = lock(&self.secrets).clone();
        let mut value = serde_json::from_str::<Value>(&json)
            .map_err(|e| ToolError::internal(format!("unmask_json: not JSON: {e}")))?;
        secrets.unmask_value(&mut value)?;
        Ok(value.to_string())
    }

    fn mask_text(&self, text: RString) -> String {
        lock(&self.secrets).mask(&text)
    }

    fn call_extensions(
        self: &Arc<Self>,
        point: RString,
        json: RString,
    ) -> impl Future<Output = Result<String, FfiError>> + Send + 'static {
        let state = self.clone();
        async move {
            let value: Value = serde_json::from_str(&json)
                .map_err(|e| ToolError::internal(format!("call_extensions: not JSON: {e}")))?;
            let handler = {
                let mut recorded = state.recorded();
                recorded.extension_calls.push(ExtensionCall {
                    point: point.to_string(),
                    data: value.clone(),
                });
                recorded.handlers.get(point.as_str()).cloned()
            };
            // No handler: a point with no extensions leaves the data as it was.
            let Some(handler) = handler else {
                return Ok(value.to_string());
            };
            match catch_panic(|| handler(value)) {
                Ok(Ok(out)) => Ok(out.to_string()),
                Ok(Err(e)) => Err(e.into()),
                Err(panic) => Err(ToolError::internal(format!(
                    "the test's handler of extension point '{point}' {panic}"
                ))
                .into()),
            }
        }
    }

    fn is_cancelled(&self) -> bool {
        *self.cancel.borrow()
    }

    fn cancelled(self: &Arc<Self>) -> impl Future<Output = ()> + Send + 'static {
        let mut cancel = self.cancel.subscribe();
        async move {
            if cancel.wait_for(|cancelled| *cancelled).await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }
}
