//! `test_tool_with_logging`: sends three log messages while it runs. A tool of the MCP conformance suite's server
//! (profile `conformance`), written as any author would write it.

use std::time::Duration;

use plugin_api::ask::LogLevel;
use plugin_api::{Args, Context, Response, RiskLevel, Tool, ToolError, ToolInfo};

#[derive(Default)]
struct TestToolWithLogging;

impl Tool for TestToolWithLogging {
    fn info(&self) -> ToolInfo {
        ToolInfo::new("Sends three log messages while it runs.").risk(RiskLevel::Read)
    }

    async fn execute(&self, ctx: &Context, _args: Args) -> Result<Response, ToolError> {
        ctx.log(LogLevel::Info, "Tool execution started").await;
        tokio::time::sleep(Duration::from_millis(50)).await;
        ctx.log(LogLevel::Info, "Tool processing data").await;
        tokio::time::sleep(Duration::from_millis(50)).await;
        ctx.log(LogLevel::Info, "Tool execution completed").await;
        Ok(Response::text("Tool with logging executed successfully"))
    }
}

plugin_api::export_tool!(TestToolWithLogging);
