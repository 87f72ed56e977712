//! The worker's side of a call's context: a second [`HostVtable`] whose functions send the
//! plugin's requests to the host over the pipe and, for those that return something, wait for
//! the host's answer. The call's text fields and its cancellation are answered in the worker.

use std::collections::HashMap;
use std::ffi::c_void;
use std::fs::File;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, LazyLock, Mutex};

use abi_stable::prefix_type::PrefixTypeTrait;
use abi_stable::std_types::{ROption, RResult, RStr, RString};
use async_ffi::{FfiFuture, FutureExt};
use plugin_api::__private::abi::{
    error_to_ffi, ContextField, FfiContext, FfiError, FfiResponse, FfiResult, HostVtable,
    HostVtableRef,
};
use plugin_api::ToolError;
use tokio::sync::oneshot;

use super::protocol::{write_frame, Answer, CallInfo, FromWorker, HostRequest, WireError};
use crate::exec::cancel::Cancel;
use crate::sync::lock;

/// Where an answer goes: a thread blocked in a host function, or a future awaiting it.
pub(super) enum Reply {
    Blocking(mpsc::SyncSender<Answer>),
    Awaiting(oneshot::Sender<Answer>),
}

/// The worker's pipe to the host, and the requests waiting for an answer.
pub(super) struct WorkerLink {
    out: Mutex<File>,
    pub(super) waiting: Mutex<HashMap<u64, Reply>>,
    next_req: AtomicU64,
}

impl WorkerLink {
    pub(super) fn new(out: File) -> Self {
        Self {
            out: Mutex::new(out),
            waiting: Mutex::default(),
            next_req: AtomicU64::new(0),
        }
    }

    /// Sends a message to the host. If the host is gone, the worker has nothing left to do.
    pub(super) fn send(&self, message: &FromWorker) {
        let mut out = lock(&self.out);
        if write_frame(&mut *out, message).is_err() {
            super::serve::exit_now();
        }
    }

    fn request(&self, id: u64, request: HostRequest, reply: Option<Reply>) {
        let req = match reply {
            Some(reply) => {
                let req = self.next_req.fetch_add(1, Ordering::Relaxed) + 1;
                lock(&self.waiting).insert(req, reply);
                req
            }
            None => 0,
        };
        self.send(&FromWorker::Request { id, req, request });
    }
}

/// One call in the worker, as its plugin's context sees it.
pub(super) struct WorkerCall {
    pub(super) id: u64,
    pub(super) info: CallInfo,
    pub(super) cancel: Arc<Cancel>,
    pub(super) link: Arc<WorkerLink>,
}

impl WorkerCall {
    /// A new reference for the plugin.
    pub(super) fn to_ffi(self: &Arc<Self>) -> FfiContext {
        FfiContext {
            data: Arc::into_raw(self.clone()).cast(),
            vtable: *WORKER_VTABLE,
        }
    }

    fn tell(&self, request: HostRequest) {
        self.link.request(self.id, request, None);
    }

    /// Asks the host and blocks this thread until it answers.
    fn ask_blocking(&self, request: HostRequest) -> Answer {
        let (tx, rx) = mpsc::sync_channel(1);
        self.link
            .request(self.id, request, Some(Reply::Blocking(tx)));
        rx.recv().unwrap_or(Answer::Unit)
    }

    /// Asks the host; the future completes with its answer.
    fn ask(&self, request: HostRequest) -> impl std::future::Future<Output = Answer> + Send {
        let (tx, rx) = oneshot::channel();
        self.link
            .request(self.id, request, Some(Reply::Awaiting(tx)));
        async move { rx.await.unwrap_or(Answer::Unit) }
    }
}

static WORKER_VTABLE: LazyLock<HostVtableRef> = LazyLock::new(|| {
    HostVtable {
        retain: w_retain,
        release: w_release,
        field: w_field,
        log_content: w_log_content,
        set_progress: w_set_progress,
        add_progress: w_add_progress,
        check_intervention: w_check_intervention,
        loop_data_get: w_loop_data_get,
        loop_data_set: w_loop_data_set,
        history_add: w_history_add,
        default_before_execution: w_default_before,
        default_after_execution: w_default_after,
        unmask_json: w_unmask_json,
        mask_text: w_mask_text,
        call_extensions: w_call_extensions,
        is_cancelled: w_is_cancelled,
        cancelled: w_cancelled,
    }
    .leak_into_prefix()
});

/// # Safety
/// `data` must come from [`WorkerCall::to_ffi`], its reference still held.
unsafe fn call<'a>(data: *const c_void) -> &'a WorkerCall {
    // SAFETY: per the contract above.
    unsafe { &*data.cast::<WorkerCall>() }
}

/// # Safety
/// As for [`call`].
unsafe fn call_arc(data: *const c_void) -> Arc<WorkerCall> {
    let ptr = data.cast::<WorkerCall>();
    // SAFETY: per the contract above.
    unsafe {
        Arc::increment_strong_count(ptr);
        Arc::from_raw(ptr)
    }
}

fn status(answer: Answer) -> FfiResult<()> {
    match answer {
        Answer::Status(Err(e)) => RResult::RErr(FfiError::from(e)),
        _ => RResult::ROk(()),
    }
}

fn text_result(answer: Answer) -> FfiResult<RString> {
    match answer {
        Answer::TextResult(Ok(text)) => RResult::ROk(text.into()),
        Answer::TextResult(Err(e)) | Answer::Status(Err(e)) => RResult::RErr(FfiError::from(e)),
        _ => RResult::RErr(error_to_ffi(ToolError::internal("the host gave no answer"))),
    }
}

unsafe extern "C" fn w_retain(data: *const c_void) {
    // SAFETY: the plugin holds a reference (vtable contract).
    unsafe { Arc::increment_strong_count(data.cast::<WorkerCall>()) }
}

unsafe extern "C" fn w_release(data: *const c_void) {
    // SAFETY: the plugin gives back one reference it held.
    unsafe { drop(Arc::from_raw(data.cast::<WorkerCall>())) }
}

unsafe extern "C" fn w_field(data: *const c_void, field: ContextField) -> RString {
    // SAFETY: vtable contract (and below).
    let info = &unsafe { call(data) }.info;
    let text = match field {
        ContextField::AgentName => info.agent_name.clone(),
        ContextField::Profile => info.profile.clone(),
        ContextField::ToolName => info.tool_name.clone(),
        ContextField::Method => info.method.clone(),
        ContextField::ExtensionPoint => info.extension_point.clone(),
        ContextField::ExtensionName => info.extension_name.clone(),
        ContextField::LogId => info.log_id.to_string(),
    };
    RString::from(text)
}

unsafe extern "C" fn w_log_content(data: *const c_void, content: RStr<'_>) {
    unsafe { call(data) }.tell(HostRequest::LogContent(content.as_str().to_owned()));
}

unsafe extern "C" fn w_set_progress(data: *const c_void, text: RString) -> FfiFuture<()> {
    let answer = unsafe { call(data) }.ask(HostRequest::SetProgress(text.into_string()));
    async move {
        answer.await;
    }
    .into_ffi()
}

unsafe extern "C" fn w_add_progress(data: *const c_void, text: RStr<'_>) {
    unsafe { call(data) }.tell(HostRequest::AddProgress(text.as_str().to_owned()));
}

unsafe extern "C" fn w_check_intervention(data: *const c_void) -> FfiFuture<FfiResult<()>> {
    let answer = unsafe { call(data) }.ask(HostRequest::CheckIntervention);
    async move { status(answer.await) }.into_ffi()
}

unsafe extern "C" fn w_loop_data_get(data: *const c_void, key: RStr<'_>) -> ROption<RString> {
    let request = HostRequest::LoopDataGet(key.as_str().to_owned());
    match unsafe { call(data) }.ask_blocking(request) {
        Answer::MaybeText(Some(text)) => ROption::RSome(text.into()),
        _ => ROption::RNone,
    }
}

unsafe extern "C" fn w_loop_data_set(
    data: *const c_void,
    key: RStr<'_>,
    json: RString,
) -> FfiResult<()> {
    let key = key.as_str().to_owned();
    let json = json.into_string();
    status(unsafe { call(data) }.ask_blocking(HostRequest::LoopDataSet { key, json }))
}

unsafe extern "C" fn w_history_add(data: *const c_void, role: RStr<'_>, content: RString) {
    let role = role.as_str().to_owned();
    let content = content.into_string();
    unsafe { call(data) }.tell(HostRequest::HistoryAdd { role, content });
}

unsafe extern "C" fn w_default_before(
    data: *const c_void,
    args: RString,
) -> FfiFuture<FfiResult<()>> {
    let answer = unsafe { call(data) }.ask(HostRequest::DefaultBefore(args.into_string()));
    async move { status(answer.await) }.into_ffi()
}

unsafe extern "C" fn w_default_after(
    data: *const c_void,
    response: FfiResponse,
) -> FfiFuture<FfiResult<()>> {
    let answer = unsafe { call(data) }.ask(HostRequest::DefaultAfter(response.into()));
    async move { status(answer.await) }.into_ffi()
}

unsafe extern "C" fn w_unmask_json(data: *const c_void, json: RString) -> FfiResult<RString> {
    text_result(unsafe { call(data) }.ask_blocking(HostRequest::Unmask(json.into_string())))
}

unsafe extern "C" fn w_mask_text(data: *const c_void, text: RString) -> RString {
    match unsafe { call(data) }.ask_blocking(HostRequest::Mask(text.into_string())) {
        Answer::Text(text) => text.into(),
        _ => RString::new(),
    }
}

unsafe extern "C" fn w_call_extensions(
    data: *const c_void,
    point: RString,
    json: RString,
) -> FfiFuture<FfiResult<RString>> {
    let point = point.into_string();
    let json = json.into_string();
    let answer = unsafe { call(data) }.ask(HostRequest::CallExtensions { point, json });
    async move { text_result(answer.await) }.into_ffi()
}

unsafe extern "C" fn w_is_cancelled(data: *const c_void) -> bool {
    unsafe { call(data) }.cancel.is_cancelled()
}

unsafe extern "C" fn w_cancelled(data: *const c_void) -> FfiFuture<()> {
    let call = unsafe { call_arc(data) };
    async move { call.cancel.cancelled().await }.into_ffi()
}

/// Turns a plugin's error into its wire form.
pub(super) fn wire_error(e: FfiError) -> WireError {
    WireError::from(e)
}
