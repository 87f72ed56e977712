//! `test_error_handling`: always fails, to show how a failure is reported. A tool of the MCP conformance suite's server
//! (profile `conformance`), written as any author would write it.

use plugin_api::{Args, Context, Response, RiskLevel, Tool, ToolError, ToolInfo};

#[derive(Default)]
struct TestErrorHandling;

impl Tool for TestErrorHandling {
    fn info(&self) -> ToolInfo {
        ToolInfo::new("Always fails, to show how a failure is reported.").risk(RiskLevel::Read)
    }

    async fn execute(&self, _ctx: &Context, _args: Args) -> Result<Response, ToolError> {
        Err(ToolError::business(
            "This tool intentionally returns an error for testing",
        ))
    }
}

plugin_api::export_tool!(TestErrorHandling);
