//! The worker's side of a call's context: a second [`HostServices`] whose methods send the
//! plugin's requests to the host over the pipe and, for those that return something, wait for
//! the host's answer. The call's text fields and its cancellation are answered in the worker.

use std::collections::HashMap;
use std::fs::File;
use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, OnceLock};

use plugin_abi::{ContextField, FfiContext, FfiError, FfiResponse, HostServices, RString};
use plugin_api::ToolError;
use tokio::sync::oneshot;

use crate::exec::cancel::Cancel;
use crate::isolation::protocol::{write_frame, Answer, CallInfo, FromWorker, HostRequest};
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
            super::serve::end_with_descendants();
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
    /// The worker's scratch folder, where this call's own is made when the plugin first asks
    /// for it (a call that never asks costs no folder).
    pub(super) scratch_root: Option<Arc<PathBuf>>,
    /// This call's scratch folder, once made (empty if it could not be).
    pub(super) scratch: OnceLock<String>,
}

impl WorkerCall {
    /// The call's scratch folder (`<root>/call-<id>`), made empty on first use; empty text if
    /// the worker has none.
    fn scratch(&self) -> String {
        let Some(root) = &self.scratch_root else {
            return String::new();
        };
        self.scratch
            .get_or_init(|| {
                let dir = root.join(format!("call-{}", self.id));
                let _ = std::fs::remove_dir_all(&dir);
                match std::fs::create_dir(&dir) {
                    Ok(()) => dir.to_string_lossy().into_owned(),
                    Err(e) => {
                        eprintln!("toolhost worker: cannot create {}: {e}", dir.display());
                        String::new()
                    }
                }
            })
            .clone()
    }

    /// Removes the call's scratch folder, if it made one.
    pub(super) fn remove_scratch(&self) {
        if let Some(dir) = self.scratch.get().filter(|d| !d.is_empty()) {
            let _ = std::fs::remove_dir_all(dir);
        }
    }

    /// A new reference for the plugin.
    pub(super) fn to_ffi(self: &Arc<Self>) -> FfiContext {
        FfiContext::new(self.clone())
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
    fn ask_host(
        &self,
        request: HostRequest,
    ) -> impl std::future::Future<Output = Answer> + Send + use<> {
        let (tx, rx) = oneshot::channel();
        self.link
            .request(self.id, request, Some(Reply::Awaiting(tx)));
        async move { rx.await.unwrap_or(Answer::Unit) }
    }
}

fn status(answer: Answer) -> Result<(), FfiError> {
    match answer {
        Answer::Status(Err(e)) => Err(FfiError::from(e)),
        _ => Ok(()),
    }
}

fn text_result(answer: Answer) -> Result<String, FfiError> {
    match answer {
        Answer::TextResult(Ok(text)) => Ok(text),
        Answer::TextResult(Err(e)) | Answer::Status(Err(e)) => Err(FfiError::from(e)),
        _ => Err(ToolError::internal("the host gave no answer").into()),
    }
}

impl HostServices for WorkerCall {
    fn field(&self, field: ContextField) -> String {
        let info = &self.info;
        match field {
            ContextField::AgentName => info.agent_name.clone(),
            ContextField::Profile => info.profile.clone(),
            ContextField::ToolName => info.tool_name.clone(),
            ContextField::Method => info.method.clone(),
            ContextField::ExtensionPoint => info.extension_point.clone(),
            ContextField::ExtensionName => info.extension_name.clone(),
            ContextField::LogId => info.log_id.to_string(),
            ContextField::Scratch => self.scratch(),
            ContextField::TraceParent => info.traceparent.clone(),
        }
    }

    fn log_content(&self, content: &str) {
        self.tell(HostRequest::LogContent(content.to_owned()));
    }

    fn set_progress(self: &Arc<Self>, text: RString) -> impl Future<Output = ()> + Send + 'static {
        let answer = self.ask_host(HostRequest::SetProgress(text.into_string()));
        async move {
            answer.await;
        }
    }

    fn add_progress(&self, text: &str) {
        self.tell(HostRequest::AddProgress(text.to_owned()));
    }

    fn check_intervention(
        self: &Arc<Self>,
    ) -> impl Future<Output = Result<(), FfiError>> + Send + 'static {
        let answer = self.ask_host(HostRequest::CheckIntervention);
        async move { status(answer.await) }
    }

    fn loop_data_get(&self, key: &str) -> Option<String> {
        match self.ask_blocking(HostRequest::LoopDataGet(key.to_owned())) {
            Answer::MaybeText(text) => text,
            _ => None,
        }
    }

    fn loop_data_set(&self, key: &str, json: RString) -> Result<(), FfiError> {
        let key = key.to_owned();
        let json = json.into_string();
        status(self.ask_blocking(HostRequest::LoopDataSet { key, json }))
    }

    fn history_add(&self, role: &str, content: RString) {
        let role = role.to_owned();
        let content = content.into_string();
        self.tell(HostRequest::HistoryAdd { role, content });
    }

    fn default_before_execution(
        self: &Arc<Self>,
        args: RString,
    ) -> impl Future<Output = Result<(), FfiError>> + Send + 'static {
        let answer = self.ask_host(HostRequest::DefaultBefore(args.into_string()));
        async move { status(answer.await) }
    }

    fn default_after_execution(
        self: &Arc<Self>,
        response: FfiResponse,
    ) -> impl Future<Output = Result<(), FfiError>> + Send + 'static {
        let answer = self.ask_host(HostRequest::DefaultAfter(response.into()));
        async move { status(answer.await) }
    }

    fn unmask_json(&self, json: RString) -> Result<String, FfiError> {
        text_result(self.ask_blocking(HostRequest::Unmask(json.into_string())))
    }

    fn mask_text(&self, text: RString) -> String {
        match self.ask_blocking(HostRequest::Mask(text.into_string())) {
            Answer::Text(text) => text,
            _ => String::new(),
        }
    }

    fn call_extensions(
        self: &Arc<Self>,
        point: RString,
        json: RString,
    ) -> impl Future<Output = Result<String, FfiError>> + Send + 'static {
        let point = point.into_string();
        let json = json.into_string();
        let answer = self.ask_host(HostRequest::CallExtensions { point, json });
        async move { text_result(answer.await) }
    }

    fn ask(
        self: &Arc<Self>,
        request: RString,
    ) -> impl Future<Output = Result<String, FfiError>> + Send + 'static {
        let answer = self.ask_host(HostRequest::Ask(request.into_string()));
        async move { text_result(answer.await) }
    }

    fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    fn cancelled(self: &Arc<Self>) -> impl Future<Output = ()> + Send + 'static {
        let call = self.clone();
        async move { call.cancel.cancelled().await }
    }
}
