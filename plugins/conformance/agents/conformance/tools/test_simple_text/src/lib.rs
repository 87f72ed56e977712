//! `test_simple_text`: returns a simple text response. A tool of the MCP conformance suite's server
//! (profile `conformance`), written as any author would write it.

use plugin_api::{Args, Context, Response, RiskLevel, Tool, ToolError, ToolInfo};

#[derive(Default)]
struct TestSimpleText;

impl Tool for TestSimpleText {
    fn info(&self) -> ToolInfo {
        ToolInfo::new("Returns a simple text response.").risk(RiskLevel::Read)
    }

    async fn execute(&self, _ctx: &Context, _args: Args) -> Result<Response, ToolError> {
        Ok(Response::text(
            "This is a simple text response for testing.",
        ))
    }
}

plugin_api::export_tool!(TestSimpleText);
