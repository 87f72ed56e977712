//! The host side of a call's context: what the [`HostVtable`] functions reach.

use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, LazyLock};

use abi_stable::prefix_type::PrefixTypeTrait;
use abi_stable::std_types::{ROption, RResult, RStr, RString};
use async_ffi::{FfiFuture, FutureExt};
use plugin_api::__private::abi::{
    error_to_ffi, response_from_ffi, ContextField, FfiContext, FfiResponse, FfiResult, HostVtable,
    HostVtableRef,
};
use plugin_api::ToolError;
use serde_json::{Map, Value};

use crate::agent::Agent;
use crate::exec::cancel::Cancel;
use crate::transcript::{HistoryMessage, Role};

/// One tool call: what its own context and each extension's within it share (an attempt gets
/// a copy with a cancellation of its own).
pub(crate) struct Call {
    pub(crate) agent: Arc<Agent>,
    pub(crate) tool_name: Arc<str>,
    pub(crate) method: Option<Arc<str>>,
    pub(crate) log_id: u64,
    /// A call of `parallel`: no history entry of its own.
    pub(crate) nested: bool,
    /// Set when the host stops waiting for the call (deadline, intervention).
    pub(crate) cancel: Cancel,
}

/// One tool call (or one extension run within it), as plugins see it. Its fields are the
/// [`Call`]'s (through `Deref`). A call's context is one allocation; an extension's is one
/// more, holding its call's context and its own point and name.
pub(crate) struct CallContext(Kind);

enum Kind {
    /// A call's (or one attempt's) own context.
    Call(Call),
    /// An extension's, within the call `parent` (always a `Kind::Call`).
    Extension {
        parent: Arc<CallContext>,
        point: Arc<str>,
        name: Arc<str>,
    },
}

impl std::ops::Deref for CallContext {
    type Target = Call;

    fn deref(&self) -> &Call {
        match &self.0 {
            Kind::Call(call) => call,
            Kind::Extension { parent, .. } => parent,
        }
    }
}

impl CallContext {
    /// The context of a new call.
    pub(crate) fn new(call: Call) -> Self {
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
        FfiContext {
            data: Arc::into_raw(self.clone()).cast(),
            vtable: *HOST_VTABLE,
        }
    }

    /// The agent itself, outside any tool call (the message loop's extension points).
    pub(crate) fn for_agent(agent: Arc<Agent>) -> Self {
        Self::new(Call {
            agent,
            tool_name: "".into(),
            method: None,
            log_id: 0,
            nested: false,
            cancel: Cancel::default(),
        })
    }

    /// The same call for one more attempt of `execute`, with a cancellation of its own.
    pub(crate) fn for_attempt(self: &Arc<Self>) -> Arc<Self> {
        let attempt = Arc::new(Self::new(Call {
            agent: self.agent.clone(),
            tool_name: self.tool_name.clone(),
            method: self.method.clone(),
            log_id: self.log_id,
            nested: self.nested,
            cancel: Cancel::default(),
        }));
        match self.extension() {
            None => attempt,
            Some((point, name)) => attempt.for_extension(point, name),
        }
    }

    /// The same call, seen from the extension `name` at `point`.
    pub(crate) fn for_extension(self: &Arc<Self>, point: &Arc<str>, name: &Arc<str>) -> Arc<Self> {
        let parent = match &self.0 {
            Kind::Call(_) => self.clone(),
            Kind::Extension { parent, .. } => parent.clone(),
        };
        Arc::new(Self(Kind::Extension {
            parent,
            point: point.clone(),
            name: name.clone(),
        }))
    }
}

static HOST_VTABLE: LazyLock<HostVtableRef> = LazyLock::new(|| {
    HostVtable {
        retain: ctx_retain,
        release: ctx_release,
        field: ctx_field,
        log_content: ctx_log_content,
        set_progress: ctx_set_progress,
        add_progress: ctx_add_progress,
        check_intervention: ctx_check_intervention,
        loop_data_get: ctx_loop_data_get,
        loop_data_set: ctx_loop_data_set,
        history_add: ctx_history_add,
        default_before_execution: ctx_default_before,
        default_after_execution: ctx_default_after,
        unmask_json: ctx_unmask_json,
        mask_text: ctx_mask_text,
        call_extensions: ctx_call_extensions,
        is_cancelled: ctx_is_cancelled,
        cancelled: ctx_cancelled,
    }
    .leak_into_prefix()
});

/// Borrows the context behind a pointer from [`CallContext::to_ffi`].
///
/// # Safety
/// `data` must come from `to_ffi` and its reference must still be held by the caller.
unsafe fn call<'a>(data: *const c_void) -> &'a CallContext {
    // SAFETY: per the contract above.
    unsafe { &*data.cast::<CallContext>() }
}

/// A new strong reference to the context behind `data`.
///
/// # Safety
/// As for [`call`].
unsafe fn call_arc(data: *const c_void) -> Arc<CallContext> {
    let ptr = data.cast::<CallContext>();
    // SAFETY: per the contract above.
    unsafe {
        Arc::increment_strong_count(ptr);
        Arc::from_raw(ptr)
    }
}

/// Runs host code behind an `extern "C"` function: a panic must never unwind into the plugin.
fn guard<T>(fallback: T, f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|p| {
        tracing::error!(
            "host context function panicked: {}",
            plugin_api::__private::guard::panic_message(&*p)
        );
        fallback
    })
}

unsafe extern "C" fn ctx_retain(data: *const c_void) {
    // SAFETY: the plugin holds a reference (vtable contract).
    unsafe { Arc::increment_strong_count(data.cast::<CallContext>()) }
}

unsafe extern "C" fn ctx_release(data: *const c_void) {
    // SAFETY: the plugin gives back one reference it held.
    guard((), || unsafe {
        drop(Arc::from_raw(data.cast::<CallContext>()))
    })
}

unsafe extern "C" fn ctx_field(data: *const c_void, field: ContextField) -> RString {
    // SAFETY: vtable contract.
    let call = unsafe { call(data) };
    guard(RString::new(), || {
        let text: String = match field {
            ContextField::AgentName => call.agent.name().to_owned(),
            ContextField::Profile => call.agent.profile().to_owned(),
            ContextField::ToolName => call.tool_name.to_string(),
            ContextField::Method => call.method.as_deref().unwrap_or_default().to_owned(),
            ContextField::ExtensionPoint => call
                .extension()
                .map(|(p, _)| p.to_string())
                .unwrap_or_default(),
            ContextField::ExtensionName => call
                .extension()
                .map(|(_, n)| n.to_string())
                .unwrap_or_default(),
            ContextField::LogId => call.log_id.to_string(),
        };
        RString::from(text)
    })
}

unsafe extern "C" fn ctx_log_content(data: *const c_void, content: RStr<'_>) {
    // SAFETY: vtable contract.
    let call = unsafe { call(data) };
    guard((), || call.agent.log_content(call, content.as_str()))
}

unsafe extern "C" fn ctx_set_progress(data: *const c_void, text: RString) -> FfiFuture<()> {
    // SAFETY: vtable contract.
    let call = unsafe { call_arc(data) };
    async move {
        if let Err(e) = call
            .agent
            .clone()
            .set_progress(&call, text.into_string())
            .await
        {
            let e = call.agent.host.secret_store().error(&e);
            tracing::warn!("a tool_output_update extension failed: {e}");
        }
    }
    .into_ffi()
}

unsafe extern "C" fn ctx_add_progress(data: *const c_void, text: RStr<'_>) {
    // SAFETY: vtable contract.
    let call = unsafe { call(data) };
    guard((), || call.agent.add_progress(call, text.as_str()))
}

unsafe extern "C" fn ctx_check_intervention(data: *const c_void) -> FfiFuture<FfiResult<()>> {
    // SAFETY: vtable contract.
    let call = unsafe { call_arc(data) };
    async move {
        call.agent
            .check_intervention()
            .await
            .map_err(error_to_ffi)
            .into()
    }
    .into_ffi()
}

unsafe extern "C" fn ctx_is_cancelled(data: *const c_void) -> bool {
    // SAFETY: vtable contract.
    let call = unsafe { call(data) };
    call.cancel.is_cancelled()
}

unsafe extern "C" fn ctx_cancelled(data: *const c_void) -> FfiFuture<()> {
    // SAFETY: vtable contract.
    let shared = unsafe { call_arc(data) };
    async move { shared.cancel.cancelled().await }.into_ffi()
}

unsafe extern "C" fn ctx_loop_data_get(data: *const c_void, key: RStr<'_>) -> ROption<RString> {
    // SAFETY: vtable contract.
    let call = unsafe { call(data) };
    guard(ROption::RNone, || {
        call.agent
            .loop_data(key.as_str())
            .map(|v| RString::from(serde_json::to_string(&v).unwrap_or_default()))
            .into()
    })
}

unsafe extern "C" fn ctx_loop_data_set(
    data: *const c_void,
    key: RStr<'_>,
    json: RString,
) -> FfiResult<()> {
    // SAFETY: vtable contract.
    let call = unsafe { call(data) };
    guard(
        RResult::RErr(error_to_ffi(ToolError::internal(
            "setting loop data failed",
        ))),
        || match serde_json::from_str::<Value>(&json) {
            Ok(value) => {
                call.agent.set_loop_data(key.as_str(), value);
                RResult::ROk(())
            }
            Err(e) => RResult::RErr(error_to_ffi(ToolError::validation(format!(
                "loop data '{key}' is not valid JSON: {e}"
            )))),
        },
    )
}

unsafe extern "C" fn ctx_history_add(data: *const c_void, role: RStr<'_>, content: RString) {
    // SAFETY: vtable contract.
    let call = unsafe { call(data) };
    guard((), || {
        let role = Role::parse(role.as_str()).unwrap_or_else(|| {
            tracing::warn!(
                "tool '{}' added history with unknown role '{role}'; using 'tool'",
                call.tool_name
            );
            Role::Tool
        });
        let content = call.agent.mask(content.into_string());
        let message = HistoryMessage::new(role, content).from_tool(call.tool_name.to_string());
        call.agent.transcript.add_history(message);
    })
}

unsafe extern "C" fn ctx_default_before(
    data: *const c_void,
    args: RString,
) -> FfiFuture<FfiResult<()>> {
    // SAFETY: vtable contract.
    let call = unsafe { call_arc(data) };
    async move {
        // Arguments that are not an object (a plugin's bug) have nothing to show.
        let args = serde_json::from_str::<Map<String, Value>>(&args).unwrap_or_default();
        call.agent.default_before_execution(&call, &args);
        RResult::ROk(())
    }
    .into_ffi()
}

unsafe extern "C" fn ctx_default_after(
    data: *const c_void,
    response: FfiResponse,
) -> FfiFuture<FfiResult<()>> {
    // SAFETY: vtable contract.
    let call = unsafe { call_arc(data) };
    async move {
        call.agent
            .default_after_execution(&call, &response_from_ffi(response));
        RResult::ROk(())
    }
    .into_ffi()
}

unsafe extern "C" fn ctx_unmask_json(data: *const c_void, json: RString) -> FfiResult<RString> {
    // SAFETY: the plugin holds a reference for the duration of the call.
    let call = unsafe { call(data) };
    let result = catch_unwind(AssertUnwindSafe(|| {
        let mut value: Value = serde_json::from_str(&json)
            .map_err(|e| ToolError::internal(format!("unmask_json: not JSON: {e}")))?;
        call.agent.host.secrets().unmask_value(&mut value)?;
        Ok::<_, ToolError>(serde_json::to_string(&value).unwrap_or_default())
    }));
    match result {
        Ok(Ok(text)) => RResult::ROk(RString::from(text)),
        Ok(Err(e)) => RResult::RErr(error_to_ffi(e)),
        Err(_) => RResult::RErr(error_to_ffi(ToolError::internal(
            "unmasking secrets panicked",
        ))),
    }
}

unsafe extern "C" fn ctx_mask_text(data: *const c_void, text: RString) -> RString {
    // SAFETY: as in `ctx_unmask_json`.
    let call = unsafe { call(data) };
    guard(RString::new(), || {
        RString::from(call.agent.mask(text.into_string()).into_inner())
    })
}

unsafe extern "C" fn ctx_call_extensions(
    data: *const c_void,
    point: RString,
    json: RString,
) -> FfiFuture<FfiResult<RString>> {
    // SAFETY: as in `ctx_unmask_json`; the future keeps its own reference.
    let call = unsafe { call_arc(data) };
    async move {
        let value: Value = match serde_json::from_str(&json) {
            Ok(v) => v,
            Err(e) => {
                return RResult::RErr(error_to_ffi(ToolError::internal(format!(
                    "call_extensions: not JSON: {e}"
                ))))
            }
        };
        match call.agent.call_extensions(&point, value).await {
            Ok(out) => RResult::ROk(RString::from(out.to_string())),
            Err(e) => RResult::RErr(error_to_ffi(e)),
        }
    }
    .into_ffi()
}
