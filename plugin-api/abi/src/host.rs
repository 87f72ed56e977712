//! The host's side of the callback table, written once: a host implements the safe trait
//! [`HostServices`], and [`FfiContext::new`] hands a plugin a context whose
//! [`HostVtable`] is made of this module's `extern "C"` functions for that type.
//!
//! The functions are generic over the services type and the table is a constant per type, so
//! each host's calls are monomorphized: no dynamic dispatch, no allocation beyond what each
//! callback itself does. They borrow the host's value for the synchronous callbacks, hand the
//! asynchronous ones an `&Arc` (clone it to keep it in the future), keep the reference count,
//! and never let a panic of host code unwind into the plugin: a panic becomes the callback's
//! fallback answer (an `internal` error where the callback has an error to give) and is
//! reported to [`HostServices::panicked`].
//!
//! ```
//! use std::future::Future;
//! use std::sync::Arc;
//!
//! use plugin_abi::{ContextField, FfiContext, FfiError, FfiResponse, HostServices, RString};
//!
//! /// A host that knows only its agent's name.
//! struct Named(String);
//!
//! impl HostServices for Named {
//!     fn field(&self, field: ContextField) -> String {
//!         match field {
//!             ContextField::AgentName => self.0.clone(),
//!             _ => String::new(),
//!         }
//!     }
//!     fn log_content(&self, _content: &str) {}
//!     fn set_progress(self: &Arc<Self>, _text: RString) -> impl Future<Output = ()> + Send + 'static {
//!         async {}
//!     }
//!     fn add_progress(&self, _text: &str) {}
//!     fn check_intervention(
//!         self: &Arc<Self>,
//!     ) -> impl Future<Output = Result<(), FfiError>> + Send + 'static {
//!         async { Ok(()) }
//!     }
//!     fn loop_data_get(&self, _key: &str) -> Option<String> {
//!         None
//!     }
//!     fn loop_data_set(&self, _key: &str, _json: RString) -> Result<(), FfiError> {
//!         Ok(())
//!     }
//!     fn history_add(&self, _role: &str, _content: RString) {}
//!     fn default_before_execution(
//!         self: &Arc<Self>,
//!         _args: RString,
//!     ) -> impl Future<Output = Result<(), FfiError>> + Send + 'static {
//!         async { Ok(()) }
//!     }
//!     fn default_after_execution(
//!         self: &Arc<Self>,
//!         _response: FfiResponse,
//!     ) -> impl Future<Output = Result<(), FfiError>> + Send + 'static {
//!         async { Ok(()) }
//!     }
//!     fn unmask_json(&self, json: RString) -> Result<String, FfiError> {
//!         Ok(json.into_string())
//!     }
//!     fn mask_text(&self, text: RString) -> String {
//!         text.into_string()
//!     }
//!     fn call_extensions(
//!         self: &Arc<Self>,
//!         _point: RString,
//!         json: RString,
//!     ) -> impl Future<Output = Result<String, FfiError>> + Send + 'static {
//!         async move { Ok(json.into_string()) }
//!     }
//!     fn is_cancelled(&self) -> bool {
//!         false
//!     }
//!     fn cancelled(self: &Arc<Self>) -> impl Future<Output = ()> + Send + 'static {
//!         std::future::pending()
//!     }
//! }
//!
//! let ctx = FfiContext::new(Arc::new(Named("A0".to_owned())));
//! assert_eq!(ctx.field(ContextField::AgentName).as_str(), "A0");
//! assert_eq!(ctx.clone().mask_text("x".into()).unwrap().as_str(), "x");
//! ```

use std::ffi::c_void;
use std::future::Future;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use abi_stable::prefix_type::WithMetadata;
use abi_stable::std_types::{ROption, RResult, RStr, RString};
use async_ffi::{FfiFuture, FutureExt};

use crate::guard::panic_message;
use crate::wire::{ContextField, FfiError, FfiResponse, FfiResult, HostVtable, HostVtableRef};
use crate::FfiContext;

/// What a host does for a plugin during a call: one method per [`HostVtable`] function.
///
/// Implement it on the host's per-call state and hand a plugin
/// [`FfiContext::new(Arc::new(state))`](FfiContext::new). The asynchronous methods return a
/// `'static` future: clone the `Arc` into it if it needs the state. Errors are wire errors
/// ([`FfiError`]); `plugin-api` converts its `ToolError` into one with `From`.
pub trait HostServices: Send + Sync + Sized + 'static {
    /// A text field of the context (the agent's name, the tool's, the log id...).
    fn field(&self, field: ContextField) -> String;
    /// Replaces the text content of the call's log item.
    fn log_content(&self, content: &str);
    /// Sets the progress text and fires the `tool_output_update` extension point.
    fn set_progress(self: &Arc<Self>, text: RString) -> impl Future<Output = ()> + Send + 'static;
    /// Appends to the progress text without firing any extension point.
    fn add_progress(&self, text: &str);
    /// Waits while the agent is paused; an intervention error if it was stopped.
    fn check_intervention(
        self: &Arc<Self>,
    ) -> impl Future<Output = Result<(), FfiError>> + Send + 'static;
    /// A loop-data value as JSON text, if set.
    fn loop_data_get(&self, key: &str) -> Option<String>;
    /// Sets a loop-data value from JSON text.
    fn loop_data_set(&self, key: &str, json: RString) -> Result<(), FfiError>;
    /// Adds a message to the agent's history (`role` as the plugin sent it).
    fn history_add(&self, role: &str, content: RString);
    /// The default `before_execution`, with the arguments as JSON text.
    fn default_before_execution(
        self: &Arc<Self>,
        args: RString,
    ) -> impl Future<Output = Result<(), FfiError>> + Send + 'static;
    /// The default `after_execution`.
    fn default_after_execution(
        self: &Arc<Self>,
        response: FfiResponse,
    ) -> impl Future<Output = Result<(), FfiError>> + Send + 'static;
    /// Fills `§§secret(KEY)` placeholders into every string of a JSON text.
    fn unmask_json(&self, json: RString) -> Result<String, FfiError>;
    /// A text with every secret value replaced by its placeholder.
    fn mask_text(&self, text: RString) -> String;
    /// Runs the extensions of `point` on JSON data; the JSON they leave.
    fn call_extensions(
        self: &Arc<Self>,
        point: RString,
        json: RString,
    ) -> impl Future<Output = Result<String, FfiError>> + Send + 'static;
    /// Whether the host has cancelled the call.
    fn is_cancelled(&self) -> bool;
    /// Completes when the host cancels the call.
    fn cancelled(self: &Arc<Self>) -> impl Future<Output = ()> + Send + 'static;

    /// Asks whoever the call is served to, with a JSON request (`plugin_api::ask`); its JSON
    /// answer. The default refuses: a host that serves nobody cannot be asked.
    fn ask(
        self: &Arc<Self>,
        request: RString,
    ) -> impl Future<Output = Result<String, FfiError>> + Send + 'static {
        drop(request);
        async {
            Err(FfiError::new(
                crate::wire::kind::DEPENDENCY,
                "this host cannot be asked",
            ))
        }
    }

    /// Called when a method above panicked (the plugin got the fallback answer); `callback`
    /// names it. The default does nothing.
    fn panicked(callback: &str, message: &str) {
        let _ = (callback, message);
    }
}

impl FfiContext {
    /// A context for a plugin, owning one reference to `services`.
    pub fn new<S: HostServices>(services: Arc<S>) -> Self {
        // SAFETY: the pointer carries the reference `into_raw` leaves, and the table's
        // functions are written for `S` (below).
        unsafe { Self::from_raw(Arc::into_raw(services).cast(), Table::<S>::VTABLE) }
    }
}

/// The callback table of one services type.
struct Table<S>(PhantomData<S>);

impl<S: HostServices> Table<S> {
    const WITH_METADATA: &'static WithMetadata<HostVtable> = &WithMetadata::new(HostVtable {
        retain: retain::<S>,
        release: release::<S>,
        field: field::<S>,
        log_content: log_content::<S>,
        set_progress: set_progress::<S>,
        add_progress: add_progress::<S>,
        check_intervention: check_intervention::<S>,
        loop_data_get: loop_data_get::<S>,
        loop_data_set: loop_data_set::<S>,
        history_add: history_add::<S>,
        default_before_execution: default_before_execution::<S>,
        default_after_execution: default_after_execution::<S>,
        unmask_json: unmask_json::<S>,
        mask_text: mask_text::<S>,
        call_extensions: call_extensions::<S>,
        is_cancelled: is_cancelled::<S>,
        cancelled: cancelled::<S>,
        ask: ask::<S>,
    });
    const VTABLE: HostVtableRef = HostVtableRef(Self::WITH_METADATA.static_as_prefix());
}

/// Runs host code behind an `extern "C"` function: a panic never unwinds into the plugin, it
/// becomes `fallback()`.
fn guard<S: HostServices, T>(name: &str, fallback: impl FnOnce() -> T, f: impl FnOnce() -> T) -> T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(value) => value,
        Err(payload) => {
            S::panicked(name, &panic_message(&*payload));
            fallback()
        }
    }
}

fn panicked_error(name: &str) -> FfiError {
    FfiError::internal(format!("the host's {name} panicked"))
}

fn to_ffi<T>(result: Result<T, FfiError>) -> FfiResult<T> {
    match result {
        Ok(value) => RResult::ROk(value),
        Err(e) => RResult::RErr(e),
    }
}

/// Borrows the services behind a context's data.
///
/// # Safety
/// `data` must come from [`FfiContext::new`] for `S`, and its reference must still be held by
/// the caller (the `HostVtable` contract), as in every function below.
unsafe fn borrow<'a, S>(data: *const c_void) -> &'a S {
    // SAFETY: per the contract above.
    unsafe { &*data.cast::<S>() }
}

/// The services behind a context's data as an `Arc`, without taking a reference: the caller's
/// reference keeps it alive while the borrow lasts.
///
/// # Safety
/// As for [`borrow`].
unsafe fn borrow_arc<S>(data: *const c_void) -> ManuallyDrop<Arc<S>> {
    // SAFETY: per the contract above; never dropped, so the count is unchanged.
    ManuallyDrop::new(unsafe { Arc::from_raw(data.cast::<S>()) })
}

unsafe extern "C" fn retain<S: HostServices>(data: *const c_void) {
    // SAFETY: the plugin holds a reference (vtable contract).
    unsafe { Arc::increment_strong_count(data.cast::<S>()) }
}

unsafe extern "C" fn release<S: HostServices>(data: *const c_void) {
    // SAFETY: the plugin gives back one reference it held; the host's `Drop` may panic.
    guard::<S, _>(
        "release",
        || (),
        || unsafe { drop(Arc::from_raw(data.cast::<S>())) },
    )
}

unsafe extern "C" fn field<S: HostServices>(data: *const c_void, field: ContextField) -> RString {
    // SAFETY: vtable contract (as below).
    let s = unsafe { borrow::<S>(data) };
    guard::<S, _>("field", RString::new, || RString::from(s.field(field)))
}

unsafe extern "C" fn log_content<S: HostServices>(data: *const c_void, content: RStr<'_>) {
    let s = unsafe { borrow::<S>(data) };
    guard::<S, _>("log_content", || (), || s.log_content(content.as_str()))
}

unsafe extern "C" fn set_progress<S: HostServices>(
    data: *const c_void,
    text: RString,
) -> FfiFuture<()> {
    let s = unsafe { borrow_arc::<S>(data) };
    guard::<S, _>(
        "set_progress",
        || async {}.into_ffi(),
        || s.set_progress(text).into_ffi(),
    )
}

unsafe extern "C" fn add_progress<S: HostServices>(data: *const c_void, text: RStr<'_>) {
    let s = unsafe { borrow::<S>(data) };
    guard::<S, _>("add_progress", || (), || s.add_progress(text.as_str()))
}

unsafe extern "C" fn check_intervention<S: HostServices>(
    data: *const c_void,
) -> FfiFuture<FfiResult<()>> {
    let s = unsafe { borrow_arc::<S>(data) };
    guard::<S, _>(
        "check_intervention",
        || ready_error("check_intervention"),
        || {
            let fut = s.check_intervention();
            async move { to_ffi(fut.await) }.into_ffi()
        },
    )
}

fn ready_error<T: 'static>(name: &'static str) -> FfiFuture<FfiResult<T>> {
    async move { RResult::RErr(panicked_error(name)) }.into_ffi()
}

unsafe extern "C" fn loop_data_get<S: HostServices>(
    data: *const c_void,
    key: RStr<'_>,
) -> ROption<RString> {
    let s = unsafe { borrow::<S>(data) };
    guard::<S, _>(
        "loop_data_get",
        || ROption::RNone,
        || s.loop_data_get(key.as_str()).map(RString::from).into(),
    )
}

unsafe extern "C" fn loop_data_set<S: HostServices>(
    data: *const c_void,
    key: RStr<'_>,
    json: RString,
) -> FfiResult<()> {
    let s = unsafe { borrow::<S>(data) };
    guard::<S, _>(
        "loop_data_set",
        || RResult::RErr(FfiError::internal("setting loop data failed")),
        || to_ffi(s.loop_data_set(key.as_str(), json)),
    )
}

unsafe extern "C" fn history_add<S: HostServices>(
    data: *const c_void,
    role: RStr<'_>,
    content: RString,
) {
    let s = unsafe { borrow::<S>(data) };
    guard::<S, _>(
        "history_add",
        || (),
        || s.history_add(role.as_str(), content),
    )
}

unsafe extern "C" fn default_before_execution<S: HostServices>(
    data: *const c_void,
    args: RString,
) -> FfiFuture<FfiResult<()>> {
    let s = unsafe { borrow_arc::<S>(data) };
    guard::<S, _>(
        "default_before_execution",
        || ready_error("default_before_execution"),
        || {
            let fut = s.default_before_execution(args);
            async move { to_ffi(fut.await) }.into_ffi()
        },
    )
}

unsafe extern "C" fn default_after_execution<S: HostServices>(
    data: *const c_void,
    response: FfiResponse,
) -> FfiFuture<FfiResult<()>> {
    let s = unsafe { borrow_arc::<S>(data) };
    guard::<S, _>(
        "default_after_execution",
        || ready_error("default_after_execution"),
        || {
            let fut = s.default_after_execution(response);
            async move { to_ffi(fut.await) }.into_ffi()
        },
    )
}

unsafe extern "C" fn unmask_json<S: HostServices>(
    data: *const c_void,
    json: RString,
) -> FfiResult<RString> {
    let s = unsafe { borrow::<S>(data) };
    guard::<S, _>(
        "unmask_json",
        || RResult::RErr(FfiError::internal("unmasking secrets panicked")),
        || to_ffi(s.unmask_json(json).map(RString::from)),
    )
}

unsafe extern "C" fn mask_text<S: HostServices>(data: *const c_void, text: RString) -> RString {
    let s = unsafe { borrow::<S>(data) };
    guard::<S, _>("mask_text", RString::new, || {
        RString::from(s.mask_text(text))
    })
}

unsafe extern "C" fn call_extensions<S: HostServices>(
    data: *const c_void,
    point: RString,
    json: RString,
) -> FfiFuture<FfiResult<RString>> {
    let s = unsafe { borrow_arc::<S>(data) };
    guard::<S, _>(
        "call_extensions",
        || ready_error("call_extensions"),
        || {
            let fut = s.call_extensions(point, json);
            async move { to_ffi(fut.await.map(RString::from)) }.into_ffi()
        },
    )
}

unsafe extern "C" fn is_cancelled<S: HostServices>(data: *const c_void) -> bool {
    let s = unsafe { borrow::<S>(data) };
    guard::<S, _>("is_cancelled", || false, || s.is_cancelled())
}

unsafe extern "C" fn cancelled<S: HostServices>(data: *const c_void) -> FfiFuture<()> {
    let s = unsafe { borrow_arc::<S>(data) };
    guard::<S, _>(
        "cancelled",
        || std::future::pending().into_ffi(),
        || s.cancelled().into_ffi(),
    )
}

unsafe extern "C" fn ask<S: HostServices>(
    data: *const c_void,
    request: RString,
) -> FfiFuture<FfiResult<RString>> {
    let s = unsafe { borrow_arc::<S>(data) };
    guard::<S, _>(
        "ask",
        || ready_error("ask"),
        || {
            let fut = s.ask(request);
            async move { to_ffi(fut.await.map(RString::from)) }.into_ffi()
        },
    )
}
