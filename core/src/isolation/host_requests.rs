//! The host answers what a plugin in a worker asks of its context, with the real context of
//! the call: through the same host functions an in-process plugin calls, so both behave alike.

use std::sync::Arc;

use plugin_abi::{FfiContext, RString};
use tokio::runtime::Handle;

use super::protocol::{Answer, HostRequest, ToWorker, WireError};
use super::worker_process::Link;
use plugin_api::ToolError;

/// Answers request `req` of a call (`found`: its context and runtime, `None` if the call is
/// unknown). Quick requests are answered on the reader thread, in order; those that wait
/// (progress, intervention, hooks, extensions) on the caller's runtime.
pub(super) fn answer(
    link: &Arc<Link>,
    found: Option<(FfiContext, Option<Handle>)>,
    req: u64,
    request: HostRequest,
) {
    let Some((ctx, runtime)) = found else {
        let gone = WireError::from(ToolError::internal("the call has ended"));
        reply(link, req, Answer::Status(Err(gone.clone())));
        return;
    };
    let quick = match request {
        HostRequest::LogContent(text) => {
            ctx.log_content(&text);
            None
        }
        HostRequest::AddProgress(text) => {
            ctx.add_progress(&text);
            None
        }
        HostRequest::HistoryAdd { role, content } => {
            ctx.history_add(&role, content.into());
            None
        }
        HostRequest::LoopDataGet(key) => {
            let value = ctx.loop_data_get(&key);
            Some(Answer::MaybeText(
                value.into_option().map(RString::into_string),
            ))
        }
        HostRequest::LoopDataSet { key, json } => {
            let set = ctx.loop_data_set(&key, json.into());
            Some(Answer::Status(set.into_result().map_err(WireError::from)))
        }
        HostRequest::Mask(text) => {
            let masked = ctx.mask_text(text.clone().into());
            Some(Answer::Text(masked.map_or(text, RString::into_string)))
        }
        HostRequest::Unmask(json) => Some(Answer::TextResult(match ctx.unmask_json(json.into()) {
            Some(unmasked) => unmasked
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
async fn wait_for(ctx: &FfiContext, request: HostRequest) -> Answer {
    match request {
        HostRequest::SetProgress(text) => {
            ctx.set_progress(text.into()).await;
            Answer::Unit
        }
        HostRequest::CheckIntervention => {
            let result = ctx.check_intervention().await;
            Answer::Status(result.into_result().map_err(WireError::from))
        }
        HostRequest::DefaultBefore(args) => {
            let result = ctx.default_before_execution(args.into()).await;
            Answer::Status(result.into_result().map_err(WireError::from))
        }
        HostRequest::DefaultAfter(response) => {
            let result = ctx.default_after_execution(response.into()).await;
            Answer::Status(result.into_result().map_err(WireError::from))
        }
        HostRequest::CallExtensions { point, json } => {
            let Some(call) = ctx.call_extensions(point.into(), json.into()) else {
                let e = ToolError::dependency("this host cannot run extension points");
                return Answer::TextResult(Err(WireError::from(e)));
            };
            let out = call.await;
            Answer::TextResult(
                out.into_result()
                    .map(RString::into_string)
                    .map_err(WireError::from),
            )
        }
        HostRequest::Ask(json) => {
            let Some(asking) = ctx.ask(json.into()) else {
                let e = ToolError::dependency("this host cannot be asked");
                return Answer::TextResult(Err(WireError::from(e)));
            };
            let out = asking.await;
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
