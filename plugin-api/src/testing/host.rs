//! The host side of a [`TestContext`](super::TestContext): the shared state a test reads, and the
//! [`HostVtable`] functions a plugin's [`Context`](crate::Context) reaches, in-process.

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Arc, LazyLock, Mutex, MutexGuard};

use abi_stable::prefix_type::PrefixTypeTrait;
use abi_stable::std_types::{ROption, RResult, RStr, RString};
use async_ffi::{FfiFuture, FutureExt};
use serde_json::Value;

use super::secrets::TestSecrets;
use super::{ExtensionCall, HistoryEntry};
use crate::__private::abi::{
    error_to_ffi, response_from_ffi, ContextField, FfiContext, FfiResponse, FfiResult, HostVtable,
    HostVtableRef,
};
use crate::__private::guard::catch_panic;
use crate::ToolError;

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
        FfiContext {
            data: Arc::into_raw(self.clone()).cast(),
            vtable: *TEST_VTABLE,
        }
    }

    pub(super) fn recorded(&self) -> MutexGuard<'_, Recorded> {
        lock(&self.recorded)
    }
}

static TEST_VTABLE: LazyLock<HostVtableRef> = LazyLock::new(|| {
    HostVtable {
        retain,
        release,
        field,
        log_content,
        set_progress,
        add_progress,
        check_intervention,
        loop_data_get,
        loop_data_set,
        history_add,
        default_before_execution,
        default_after_execution,
        unmask_json,
        mask_text,
        call_extensions,
        is_cancelled,
        cancelled,
    }
    .leak_into_prefix()
});

/// Borrows the state behind a pointer from [`State::to_ffi`].
///
/// # Safety
/// `data` must come from `to_ffi`, and its reference must still be held by the caller.
unsafe fn state<'a>(data: *const c_void) -> &'a State {
    // SAFETY: per the contract above.
    unsafe { &*data.cast::<State>() }
}

/// A new strong reference to the state behind `data`, for a future that outlives the call.
///
/// # Safety
/// As for [`state`].
unsafe fn state_arc(data: *const c_void) -> Arc<State> {
    let ptr = data.cast::<State>();
    // SAFETY: per the contract above.
    unsafe {
        Arc::increment_strong_count(ptr);
        Arc::from_raw(ptr)
    }
}

/// Runs test-kit code behind an `extern "C"` function: a panic must not cross it.
fn guard<T>(fallback: T, f: impl FnOnce() -> T) -> T {
    catch_panic(f).unwrap_or(fallback)
}

unsafe extern "C" fn retain(data: *const c_void) {
    // SAFETY: the plugin holds a reference (vtable contract).
    unsafe { Arc::increment_strong_count(data.cast::<State>()) }
}

unsafe extern "C" fn release(data: *const c_void) {
    // SAFETY: the plugin gives back one reference it held.
    guard((), || unsafe { drop(Arc::from_raw(data.cast::<State>())) })
}

unsafe extern "C" fn field(data: *const c_void, field: ContextField) -> RString {
    // SAFETY: vtable contract (as in every function below).
    let id = lock(&unsafe { state(data) }.identity).clone();
    RString::from(match field {
        ContextField::AgentName => id.agent_name,
        ContextField::Profile => id.profile,
        ContextField::ToolName => id.tool_name,
        ContextField::Method => id.method.unwrap_or_default(),
        ContextField::ExtensionPoint | ContextField::ExtensionName => String::new(),
        ContextField::LogId => id.log_id.to_string(),
    })
}

unsafe extern "C" fn log_content(data: *const c_void, content: RStr<'_>) {
    // SAFETY: vtable contract.
    unsafe { state(data) }.recorded().log_content = Some(content.as_str().to_owned());
}

unsafe extern "C" fn set_progress(data: *const c_void, text: RString) -> FfiFuture<()> {
    // SAFETY: vtable contract.
    let mut recorded = unsafe { state(data) }.recorded();
    recorded.progress = text.to_string();
    recorded.progress_updates.push(text.into_string());
    async {}.into_ffi()
}

unsafe extern "C" fn add_progress(data: *const c_void, text: RStr<'_>) {
    // SAFETY: vtable contract.
    unsafe { state(data) }
        .recorded()
        .progress
        .push_str(text.as_str());
}

unsafe extern "C" fn check_intervention(data: *const c_void) -> FfiFuture<FfiResult<()>> {
    // SAFETY: vtable contract.
    let intervention = unsafe { state(data) }.recorded().intervention.clone();
    let result = match intervention {
        Some(message) => RResult::RErr(error_to_ffi(ToolError::intervention(message))),
        None => RResult::ROk(()),
    };
    async move { result }.into_ffi()
}

unsafe extern "C" fn is_cancelled(data: *const c_void) -> bool {
    // SAFETY: vtable contract.
    *unsafe { state(data) }.cancel.borrow()
}

unsafe extern "C" fn cancelled(data: *const c_void) -> FfiFuture<()> {
    // SAFETY: vtable contract.
    let mut cancel = unsafe { state(data) }.cancel.subscribe();
    async move {
        if cancel.wait_for(|cancelled| *cancelled).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
    .into_ffi()
}

unsafe extern "C" fn loop_data_get(data: *const c_void, key: RStr<'_>) -> ROption<RString> {
    // SAFETY: vtable contract.
    let recorded = unsafe { state(data) }.recorded();
    let value = recorded.loop_data.get(key.as_str());
    value.map(|v| RString::from(v.to_string())).into()
}

unsafe extern "C" fn loop_data_set(
    data: *const c_void,
    key: RStr<'_>,
    json: RString,
) -> FfiResult<()> {
    let value = match serde_json::from_str::<Value>(&json) {
        Ok(value) => value,
        Err(e) => {
            let message = format!("loop data '{key}' is not valid JSON: {e}");
            return RResult::RErr(error_to_ffi(ToolError::validation(message)));
        }
    };
    // SAFETY: vtable contract.
    let mut recorded = unsafe { state(data) }.recorded();
    let key = key.as_str().to_owned();
    recorded.loop_data.insert(key.clone(), value.clone());
    recorded.loop_data_writes.push((key, value));
    RResult::ROk(())
}

unsafe extern "C" fn history_add(data: *const c_void, role: RStr<'_>, content: RString) {
    let entry = HistoryEntry {
        role: role.as_str().to_owned(),
        content: content.into_string(),
    };
    // SAFETY: vtable contract.
    unsafe { state(data) }.recorded().history.push(entry);
}

unsafe extern "C" fn default_before_execution(
    _data: *const c_void,
    _args: RString,
) -> FfiFuture<FfiResult<()>> {
    async { RResult::ROk(()) }.into_ffi()
}

unsafe extern "C" fn default_after_execution(
    data: *const c_void,
    response: FfiResponse,
) -> FfiFuture<FfiResult<()>> {
    // As the host's default: the result joins the history as the tool's message.
    let entry = HistoryEntry {
        role: "tool".to_owned(),
        content: response_from_ffi(response).message,
    };
    // SAFETY: vtable contract.
    unsafe { state(data) }.recorded().history.push(entry);
    async { RResult::ROk(()) }.into_ffi()
}

unsafe extern "C" fn unmask_json(data: *const c_void, json: RString) -> FfiResult<RString> {
    // SAFETY: vtable contract.
    let secrets = lock(&unsafe { state(data) }.secrets).clone();
    let unmasked = serde_json::from_str::<Value>(&json)
        .map_err(|e| ToolError::internal(format!("unmask_json: not JSON: {e}")))
        .and_then(|mut value| secrets.unmask_value(&mut value).map(|()| value));
    match unmasked {
        Ok(value) => RResult::ROk(RString::from(value.to_string())),
        Err(e) => RResult::RErr(error_to_ffi(e)),
    }
}

unsafe extern "C" fn mask_text(data: *const c_void, text: RString) -> RString {
    // SAFETY: vtable contract.
    RString::from(lock(&unsafe { state(data) }.secrets).mask(&text))
}

unsafe extern "C" fn call_extensions(
    data: *const c_void,
    point: RString,
    json: RString,
) -> FfiFuture<FfiResult<RString>> {
    // SAFETY: vtable contract.
    let state = unsafe { state_arc(data) };
    async move {
        let value: Value = match serde_json::from_str(&json) {
            Ok(value) => value,
            Err(e) => {
                let message = format!("call_extensions: not JSON: {e}");
                return RResult::RErr(error_to_ffi(ToolError::internal(message)));
            }
        };
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
            return RResult::ROk(RString::from(value.to_string()));
        };
        match catch_panic(|| handler(value)) {
            Ok(Ok(out)) => RResult::ROk(RString::from(out.to_string())),
            Ok(Err(e)) => RResult::RErr(error_to_ffi(e)),
            Err(panic) => RResult::RErr(error_to_ffi(ToolError::internal(format!(
                "the test's handler of extension point '{point}' {panic}"
            )))),
        }
    }
    .into_ffi()
}
