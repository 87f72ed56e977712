//! The built-in `parallel` tool: several calls at once, each through the whole lifecycle.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use serde_json::{json, Map, Value};
use tokio::sync::Semaphore;

use crate::agent::Agent;
use crate::secrets::Secrets;
use plugin_api::ErrorKind;
use plugin_api::Response;
use plugin_api::ToolError;

/// The most calls a `parallel` request runs at once.
pub const MAX_PARALLEL: usize = 8;

/// The most calls one `parallel` request (so one reply's native tool calls) may ask for: the
/// rest are not run, and one entry at the end of the result says how many and why.
pub const MAX_CALLS: usize = 64;

type CallFuture = Pin<Box<dyn Future<Output = Result<Response, ToolError>> + Send>>;

/// Boxed, so that `call_tool` can start itself from inside `parallel`.
fn boxed_call(agent: Arc<Agent>, tool: String, args: Value) -> CallFuture {
    Box::pin(async move { super::lifecycle::call(&agent, &tool, args, true).await })
}

/// One call of a `parallel` request, as asked.
struct Entry {
    tool: String,
    args: Value,
    /// Why it is refused without running, if it is.
    refused: Option<String>,
}

/// How one call ended: `Ok`, or its state (`error`, `cancelled`, `timeout`), kind and message.
type Outcome = Result<Response, (&'static str, ErrorKind, String)>;

/// `parallel`: `{"calls": [{"tool_name", "tool_args"}, ...], "max_concurrent": n}`.
///
/// Runs up to `max_concurrent` (at most [`MAX_PARALLEL`], the default) calls at once, each
/// through [`call_tool`](Agent::call_tool), so under its tool's deadline and governance. The
/// results come back in the order asked, each with its `state` (`success`, `error`,
/// `cancelled` or `timeout`) and `duration_ms`. A `parallel` inside `parallel` is refused.
pub(crate) async fn run(
    agent: &Arc<Agent>,
    args: Map<String, Value>,
) -> Result<Response, ToolError> {
    let calls = match args.get("calls") {
        Some(Value::Array(calls)) if !calls.is_empty() => calls,
        _ => {
            return Err(ToolError::repairable(
                "parallel needs 'calls': a non-empty list of {\"tool_name\": ..., \
                     \"tool_args\": {...}}",
            ));
        }
    };
    let limit = args
        .get("max_concurrent")
        .and_then(Value::as_u64)
        .map_or(MAX_PARALLEL, |n| (n as usize).clamp(1, MAX_PARALLEL));
    let permits = Arc::new(Semaphore::new(limit));
    let (calls, left_out) = calls.split_at(calls.len().min(MAX_CALLS));
    // Dropping the set (the outer call cancelled) aborts the calls still running.
    let mut tasks = tokio::task::JoinSet::new();
    for (i, call) in calls.iter().enumerate() {
        let call = entry(i, call);
        let (agent, permits) = (agent.clone(), permits.clone());
        tasks.spawn(async move { (i, run_call(agent, call, permits).await) });
    }
    let mut results = vec![Value::Null; calls.len()];
    while let Some(done) = tasks.join_next().await {
        match done {
            Ok((i, result)) => results[i] = result,
            Err(e) => tracing::warn!("a parallel call's task failed: {e}"),
        }
    }
    for result in results.iter_mut().filter(|r| r.is_null()) {
        *result = json!({"state": "error", "error": {"kind": "internal", "message": "the call's task failed"}});
    }
    if agent.is_stopped() {
        let message = format!("agent {} was stopped", agent.name());
        return Err(ToolError::intervention(message));
    }
    if !left_out.is_empty() {
        let message = format!(
            "{} more calls were not run: one parallel request runs at most {MAX_CALLS}; \
                 ask for the rest in another request",
            left_out.len()
        );
        let note = Err(("error", ErrorKind::Repairable, message));
        let secrets = agent.host.secrets();
        results.push(result_entry(&secrets, "parallel", Instant::now(), note));
    }
    let text = serde_json::to_string_pretty(&results).unwrap_or_default();
    Ok(Response::text(text).with_additional("results", Value::Array(results)))
}

/// Reads call `i` of a request: its tool and arguments, or why it is refused.
fn entry(i: usize, call: &Value) -> Entry {
    let tool = ["tool_name", "tool", "name"]
        .iter()
        .find_map(|k| call.get(*k).and_then(Value::as_str))
        .unwrap_or_default()
        .to_owned();
    let args = ["tool_args", "args", "parameters"]
        .iter()
        .find_map(|k| call.get(*k).cloned())
        .unwrap_or(json!({}));
    let name = tool.split(':').next().unwrap_or_default();
    let refused = if tool.is_empty() {
        Some(format!("call {} has no tool_name", i + 1))
    } else if name == "parallel" {
        Some(
            "a parallel call inside parallel is refused: list every call in one parallel \
                 request"
                .to_owned(),
        )
    } else {
        None
    };
    Entry {
        tool,
        args,
        refused,
    }
}

/// Runs one call once a slot is free; returns its result entry, masked.
async fn run_call(agent: Arc<Agent>, call: Entry, permits: Arc<Semaphore>) -> Value {
    let secrets = agent.host.secrets();
    let tool = call.tool.clone();
    let mut started = Instant::now();
    let outcome = match call.refused {
        Some(reason) => Err(("error", ErrorKind::Repairable, reason)),
        None => {
            let _permit = permits.acquire_owned().await;
            started = Instant::now(); // the wait for a slot is not the call's time
            outcome(boxed_call(agent, call.tool, call.args)).await
        }
    };
    result_entry(&secrets, &tool, started, outcome)
}

/// Awaits a call (its deadline is the lifecycle's).
async fn outcome(call: CallFuture) -> Outcome {
    call.await.map_err(|e| match e.kind() {
        ErrorKind::Intervention => ("cancelled", e.kind(), e.message().to_owned()),
        ErrorKind::Timeout => ("timeout", e.kind(), e.message().to_owned()),
        kind => ("error", kind, e.message().to_owned()),
    })
}

/// The entry of one call in the combined result. Masked here: inside the combined JSON text a
/// value would be escaped twice, a form the later masking cannot know.
fn result_entry(secrets: &Secrets, tool: &str, started: Instant, outcome: Outcome) -> Value {
    let duration_ms = started.elapsed().as_secs_f64() * 1e3;
    let mut result = json!({
        "tool_name": tool,
        "duration_ms": (duration_ms * 10.0).round() / 10.0,
    });
    match outcome {
        Ok(response) => {
            result["state"] = json!("success");
            result["message"] = json!(secrets.mask(&response.message));
        }
        Err((state, kind, message)) => {
            result["state"] = json!(state);
            let message = secrets.mask(&message);
            result["error"] = json!({"kind": kind.as_str(), "message": message});
        }
    }
    result
}
