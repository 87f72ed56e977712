//! An MCP server's tool as a governed target: the server's `tools/call`, with its progress
//! shown as the call's progress and the user's intervention as a cancellation.

use std::borrow::Cow;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use plugin_api::{Response, ToolError, ToolInfo};
use serde_json::{Map, Value};

use super::Governed;
use crate::agent::call::context::CallContext;
use crate::agent::Agent;
use crate::governance::{ArgumentSchema, Breaker};
use crate::mcp::McpTool;

impl Governed for McpTool {
    type Answer = Response;

    fn name(&self) -> &str {
        &self.name
    }

    fn info(&self) -> &ToolInfo {
        &self.info
    }

    fn breaker(&self) -> &Breaker {
        &self.breaker
    }

    fn schema(&self) -> &ArgumentSchema {
        &self.schema
    }

    fn not_ready(&self) -> Option<String> {
        None // a server that is not ready fails the call with its reason
    }

    fn metadata(answer: &Response) -> Option<Map<String, Value>> {
        answer.metadata.clone()
    }

    fn audit_source(&self, _root: &Path) -> (Cow<'_, str>, Option<&str>) {
        (format!("mcp:{}", self.server_name).into(), None)
    }

    async fn attempt(
        self: &Arc<Self>,
        agent: &Arc<Agent>,
        call: &Arc<CallContext>,
        args: &Map<String, Value>,
        timeout: Option<Duration>,
    ) -> Result<Response, ToolError> {
        let progress = |text: String| async move {
            if let Err(e) = call.report_progress(text).await {
                let e = agent.host.secret_store().error(&e);
                tracing::warn!("a tool_output_update extension failed: {e}");
            }
        };
        let secrets = agent.host.secrets();
        let interrupt = agent.intervention.stopped();
        let asker = asker_for(agent, &self.name);
        self.call(&secrets, args, timeout, progress, interrupt, asker)
            .await
    }
}

/// Who can answer for `agent`'s call of `tool`: forms go to its approver (`form.rs`),
/// completions to the host's model under its policy (`sample.rs`).
fn asker_for(agent: &Arc<Agent>, tool: &str) -> crate::mcp::Asker {
    use crate::agent::call::form::{ask_form, FormAsker};
    use crate::agent::call::sample::Sampler;
    let form = FormAsker {
        agent: agent.name().to_owned(),
        tool: tool.to_owned(),
        approver: crate::sync::lock(&agent.approvals.approver).clone(),
        yes: (agent.approvals.yes_to_writes).load(std::sync::atomic::Ordering::SeqCst),
    };
    let weak = Arc::downgrade(agent);
    let masking = weak.clone();
    let sampling_tool = tool.to_owned();
    crate::mcp::Asker {
        form: Arc::new(move |server, message, schema| {
            let form = form.clone();
            let message = match masking.upgrade() {
                Some(agent) => agent.mask(message).into_inner(),
                None => message,
            };
            Box::pin(async move { ask_form(&form, &server, message, schema).await })
        }),
        sample: Arc::new(move |server, request| {
            let agent = weak.upgrade();
            let tool = sampling_tool.clone();
            Box::pin(async move {
                let Some(agent) = agent else {
                    return Err(ToolError::dependency("the agent has ended"));
                };
                let sampler = Sampler::McpServer { server, tool };
                crate::agent::call::sample::sample(&agent, sampler, request).await
            })
        }),
    }
}
