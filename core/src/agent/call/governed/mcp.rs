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
            if let Err(e) = agent.clone().set_progress(call, text).await {
                let e = agent.host.secret_store().error(&e);
                tracing::warn!("a tool_output_update extension failed: {e}");
            }
        };
        let secrets = agent.host.secrets();
        let interrupt = agent.intervention.stopped();
        let asker = crate::mcp::Asker::for_call(agent, &self.name);
        self.call(&secrets, args, timeout, progress, interrupt, asker)
            .await
    }
}
