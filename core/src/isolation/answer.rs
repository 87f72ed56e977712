//! The host answers what a plugin in a worker asks of its context, with the real context of
//! the call: through the same host functions an in-process plugin calls, so both behave alike.

use std::sync::Arc;

use abi_stable::std_types::{RStr, RString};
use plugin_api::__private::abi::FfiContext;
use tokio::runtime::Handle;

use super::protocol::{Answer, HostRequest, ToWorker, WireError};
use super::worker_process::Link;
use crate::exec::context::CallContext;
use plugin_api::ToolError;

/// A context reference for the host functions, given back when dropped.
struct Borrowed(FfiContext);

// SAFETY: the host's context data is an `Arc<CallContext>`, and every host function may be
// called from any thread (the `HostVtable` contract).
unsafe impl Send for Borrowed {}
unsafe impl Sync for Borrowed {}

impl Drop for Borrowed {
    fn drop(&mut self) {
        // SAFETY: gives back the reference `to_ffi` made, once.
        unsafe { (self.0.vtable.release())(self.0.data) }
    }
}

/// Answers request `req` of a call (`found`: its context and runtime, `None` if the call is
/// unknown). Quick requests are answered on the reader thread, in order; those that wait
/// (progress, intervention, hooks, extensions) on the caller's runtime.
pub(super) fn answer(
    link: &Arc<Link>,
    found: Option<(Arc<CallContext>, Option<Handle>)>,
    req: u64,
    request: HostRequest,
) {
    let Some((ctx, runtime)) = found else {
        let gone = WireError::from(ToolError::internal("the call has ended"));
        reply(link, req, Answer::Status(Err(gone.clone())));
        return;
    };
    let ctx = Borrowed(ctx.to_ffi());
    let (data, vt) = (ctx.0.data, ctx.0.vtable);
    // SAFETY (every call below): `data` is alive while `ctx` holds its reference.
    let quick = match request {
        HostRequest::LogContent(text) => {
            unsafe { (vt.log_content())(data, RStr::from(text.as_str())) };
            None
        }
        HostRequest::AddProgress(text) => {
            unsafe { (vt.add_progress())(data, RStr::from(text.as_str())) };
            None
        }
        HostRequest::HistoryAdd { role, content } => {
            unsafe { (vt.history_add())(data, RStr::from(role.as_str()), content.into()) };
            None
        }
        HostRequest::LoopDataGet(key) => {
            let value = unsafe { (vt.loop_data_get())(data, RStr::from(key.as_str())) };
            Some(Answer::MaybeText(
                value.into_option().map(RString::into_string),
            ))
        }
        HostRequest::LoopDataSet { key, json } => {
            let set = unsafe { (vt.loop_data_set())(data, RStr::from(key.as_str()), json.into()) };
            Some(Answer::Status(set.into_result().map_err(WireError::from)))
        }
        HostRequest::Mask(text) => {
            let masked = vt
                .mask_text()
                .map(|f| unsafe { f(data, text.clone().into()) });
            Some(Answer::Text(masked.map_or(text, RString::into_string)))
        }
        HostRequest::Unmask(json) => Some(Answer::TextResult(match vt.unmask_json() {
            Some(f) => unsafe { f(data, json.into()) }
                .into_result()
                .map(RString::into_string)
                .map_err(WireError::from),
            None => Err(WireError::from(ToolError::dependency("no secrets service"))),
        })),
        waiting => {
            let link = link.clone();
            let task = async move {
                let answer = wait_for(&ctx, waiting).await;
                reply(&link, req, answer);
            };
            match runtime.or_else(|| Handle::try_current().ok()) {
                Some(runtime) => drop(runtime.spawn(task)),
                None => tracing::error!("no runtime to answer a worker's request on"),
            }
            None
        }
    };
    if let Some(answer) = quick {
        reply(link, req, answer);
    }
}

/// Answers a request that waits.
async fn wait_for(ctx: &Borrowed, request: HostRequest) -> Answer {
    let (data, vt) = (ctx.0.data, ctx.0.vtable);
    // SAFETY (every call below): `data` is alive while `ctx` holds its reference.
    match request {
        HostRequest::SetProgress(text) => {
            unsafe { (vt.set_progress())(data, text.into()) }.await;
            Answer::Unit
        }
        HostRequest::CheckIntervention => {
            let result = unsafe { (vt.check_intervention())(data) }.await;
            Answer::Status(result.into_result().map_err(WireError::from))
        }
        HostRequest::DefaultBefore(args) => {
            let result = unsafe { (vt.default_before_execution())(data, args.into()) }.await;
            Answer::Status(result.into_result().map_err(WireError::from))
        }
        HostRequest::DefaultAfter(response) => {
            let f = vt.default_after_execution();
            let result = unsafe { f(data, response.into()) }.await;
            Answer::Status(result.into_result().map_err(WireError::from))
        }
        HostRequest::CallExtensions { point, json } => {
            let Some(f) = vt.call_extensions() else {
                let e = ToolError::dependency("this host cannot run extension points");
                return Answer::TextResult(Err(WireError::from(e)));
            };
            let out = unsafe { f(data, point.into(), json.into()) }.await;
            Answer::TextResult(
                out.into_result()
                    .map(RString::into_string)
                    .map_err(WireError::from),
            )
        }
        _ => Answer::Unit,
    }
}

fn reply(link: &Link, req: u64, answer: Answer) {
    if req != 0 {
        // A worker that is gone needs no answer.
        let _ = link.send(&ToWorker::Answer { req, answer });
    }
}
