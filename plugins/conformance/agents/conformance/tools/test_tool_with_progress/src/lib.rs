//! `test_tool_with_progress`: reports its progress three times while it runs. A tool of the MCP conformance suite's server
//! (profile `conformance`), written as any author would write it.

use std::time::Duration;

use plugin_api::{Args, Context, Response, RiskLevel, Tool, ToolError, ToolInfo};

#[derive(Default)]
struct TestToolWithProgress;

impl Tool for TestToolWithProgress {
    fn info(&self) -> ToolInfo {
        ToolInfo::new("Reports its progress three times while it runs.").risk(RiskLevel::Read)
    }

    async fn execute(&self, ctx: &Context, _args: Args) -> Result<Response, ToolError> {
        ctx.set_progress("0/100").await;
        tokio::time::sleep(Duration::from_millis(50)).await;
        ctx.set_progress("50/100").await;
        tokio::time::sleep(Duration::from_millis(50)).await;
        ctx.set_progress("100/100").await;
        Ok(Response::text("Tool with progress executed successfully"))
    }
}

plugin_api::export_tool!(TestToolWithProgress);
