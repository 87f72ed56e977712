//! What a governed call targets: a library's tool (here) or an MCP server's tool (`mcp.rs`).
//! The governed steps (`govern.rs`) are generic over it, so each target is compiled into its
//! own copy and the library path costs what it did before.

use std::borrow::Cow;
use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};

use crate::agent::call::context::CallContext;
use crate::agent::Agent;
use crate::exec::call_threads::{self, Ended};
use crate::governance::{timed_out, ArgumentSchema, Breaker};
use crate::isolation::isolated_tool::Stopped;
use crate::isolation::protocol::{Op, Outcome};
use crate::isolation::IsolatedTool;
use crate::plugin::{PluginAnswer, ToolHandle};
use plugin_api::ToolError;
use plugin_api::ToolInfo;

#[cfg(feature = "mcp")]
mod mcp;

/// A tool the governed steps can call.
pub(crate) trait Governed: Send + Sync + 'static {
    /// What one successful attempt gives.
    type Answer: Send + 'static;

    /// The name the tool is called by.
    fn name(&self) -> &str;
    /// Its metadata (risk, capabilities, retries, declared deadline).
    fn info(&self) -> &ToolInfo;
    /// Its circuit breaker.
    fn breaker(&self) -> &Breaker;
    /// Its compiled argument schema.
    fn schema(&self) -> &ArgumentSchema;
    /// Why it is not ready, if it is not.
    fn not_ready(&self) -> Option<String>;
    /// The answer's metadata, for the audit.
    fn metadata(answer: &Self::Answer) -> Option<Map<String, Value>>;
    /// Where it comes from for the audit: a file (relative to the host's `root`) and its
    /// SHA-256.
    fn audit_source(&self, root: &Path) -> (Cow<'_, str>, Option<&str>);
    /// The sandbox it runs in, for the audit (`sandboxed; granted: net:443`).
    fn sandbox(&self) -> Option<String> {
        None
    }
    /// One attempt, until it answers, `timeout` passes or the user intervenes.
    fn attempt(
        self: &Arc<Self>,
        agent: &Arc<Agent>,
        call: &Arc<CallContext>,
        args: &Map<String, Value>,
        timeout: Option<Duration>,
    ) -> impl Future<Output = Result<Self::Answer, ToolError>> + Send;
}

impl Governed for ToolHandle {
    type Answer = PluginAnswer;

    fn name(&self) -> &str {
        ToolHandle::name(self)
    }

    fn info(&self) -> &ToolInfo {
        ToolHandle::info(self)
    }

    fn breaker(&self) -> &Breaker {
        &self.breaker
    }

    fn schema(&self) -> &ArgumentSchema {
        &self.schema
    }

    fn not_ready(&self) -> Option<String> {
        self.readiness().reason().map(str::to_owned)
    }

    fn metadata(answer: &PluginAnswer) -> Option<Map<String, Value>> {
        answer.metadata()
    }

    fn audit_source(&self, root: &Path) -> (Cow<'_, str>, Option<&str>) {
        let path = self.source();
        let relative = path.strip_prefix(root).unwrap_or(path);
        let file = match relative.to_str() {
            Some(file) if !file.contains('\\') => Cow::Borrowed(file),
            _ => Cow::Owned(relative.to_string_lossy().replace('\\', "/")),
        };
        (file, self.sha256())
    }

    fn sandbox(&self) -> Option<String> {
        ToolHandle::sandbox(self).map(|s| s.to_string())
    }

    /// `execute` on a call thread, until it answers, the deadline passes or the user
    /// intervenes. The plugin sees the cancellation through its context. Without a tokio
    /// runtime there is no deadline to keep: `execute` runs here, with the call's own context.
    fn attempt(
        self: &Arc<Self>,
        agent: &Arc<Agent>,
        call: &Arc<CallContext>,
        args: &Map<String, Value>,
        timeout: Option<Duration>,
    ) -> impl Future<Output = Result<PluginAnswer, ToolError>> + Send {
        let args = crate::agent::call::extension_points::args_text(args);
        async move {
            if let Some(isolated) = self.worker() {
                let call = call.for_attempt();
                let interrupt = agent.intervention.stopped();
                let config = agent.host.config(agent.profile()).ok();
                let max_output =
                    crate::agent::call::long_output::output_limit(agent, config.as_deref());
                // Boxed: a rare path, whose large future would be moved on every call.
                let attempt =
                    isolated_attempt(self, isolated, &call, args, timeout, max_output, interrupt);
                return Box::pin(attempt).await;
            }
            if tokio::runtime::Handle::try_current().is_err() {
                return self.execute(call.to_ffi(), args).await;
            }
            // Boxed: its state (the call's future until a call thread takes it, the deadline's
            // timer, the intervention) is 2 KiB, which every enclosing future would otherwise
            // hold and copy on each call.
            Box::pin(on_call_thread(self, agent, call, args, timeout)).await
        }
    }
}

/// One attempt of `execute` on a call thread, until it answers, the deadline passes or the
/// user intervenes.
async fn on_call_thread(
    tool: &Arc<ToolHandle>,
    agent: &Arc<Agent>,
    call: &Arc<CallContext>,
    args: String,
    timeout: Option<Duration>,
) -> Result<PluginAnswer, ToolError> {
    let call = call.for_attempt();
    let running = {
        let (tool, ctx) = (tool.clone(), call.to_ffi());
        // Polled on the call thread in the current span, the `execute` step's.
        crate::telemetry::carried(async move { tool.execute(ctx, args).await })
    };
    let deadline = timeout.unwrap_or(Duration::MAX);
    let interrupt = agent.intervention.stopped();
    match call_threads::run(running, deadline, interrupt).await {
        Ok(result) => result,
        Err(Ended::Deadline) => {
            call.cancel.cancel();
            Err(timed_out(tool.name(), deadline))
        }
        Err(Ended::Interrupted(error)) => {
            call.cancel.cancel();
            Err(error)
        }
    }
}

/// One attempt of a tool in its worker process: the same errors as in this process.
async fn isolated_attempt(
    tool: &ToolHandle,
    isolated: &IsolatedTool,
    call: &Arc<CallContext>,
    args: String,
    timeout: Option<Duration>,
    max_output: usize,
    interrupt: impl Future<Output = ToolError>,
) -> Result<PluginAnswer, ToolError> {
    let op = Op::Execute(args);
    let ctx = call.to_ffi();
    match isolated
        .call(tool.name(), op, ctx, timeout, Some(max_output), interrupt)
        .await
    {
        Ok(Outcome::Response(answer)) => Ok(PluginAnswer::from_wire(answer)),
        Ok(_) => Ok(PluginAnswer::from_wire(Default::default())),
        Err(Ok(error)) => Err(error),
        Err(Err(stopped)) => {
            call.cancel.cancel();
            Err(match stopped {
                Stopped::Deadline => timed_out(tool.name(), timeout.unwrap_or_default()),
                Stopped::Interrupted(error) => error,
            })
        }
    }
}
