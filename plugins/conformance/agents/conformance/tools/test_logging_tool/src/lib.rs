//! `test_logging_tool`: logs two messages, which reach only a client that asked for them. A tool of the MCP conformance suite's server
//! (profile `conformance`), written as any author would write it.

use plugin_api::ask::LogLevel;
use plugin_api::{Args, Context, Response, RiskLevel, Tool, ToolError, ToolInfo};

#[derive(Default)]
struct Logs;

impl Tool for Logs {
    fn info(&self) -> ToolInfo {
        ToolInfo::new("Logs two messages, which reach only a client that asked for them.")
            .risk(RiskLevel::Read)
    }

    async fn execute(&self, ctx: &Context, _args: Args) -> Result<Response, ToolError> {
        ctx.log(LogLevel::Info, "logging tool started").await;
        ctx.log(LogLevel::Warning, "logging tool finished").await;
        Ok(Response::text("logged two messages"))
    }
}

plugin_api::export_tool!(Logs);
