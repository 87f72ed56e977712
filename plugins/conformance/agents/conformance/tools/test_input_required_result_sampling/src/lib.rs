//! `test_input_required_result_sampling`: asks the client's model for the capital of France. A tool of the MCP conformance suite's server
//! (profile `conformance`), written as any author would write it.

use plugin_api::ask::SampleRequest;
use plugin_api::{Args, Context, Response, RiskLevel, Tool, ToolError, ToolInfo};

#[derive(Default)]
struct Capital;

impl Tool for Capital {
    fn info(&self) -> ToolInfo {
        ToolInfo::new("Asks the client's model for the capital of France.").risk(RiskLevel::Read)
    }

    async fn execute(&self, ctx: &Context, _args: Args) -> Result<Response, ToolError> {
        let question =
            SampleRequest::new("What is the capital of France?", 100).with_key("capital_question");
        let answer = ctx.sample(question).await?;
        Ok(Response::text(format!("The model says: {}", answer.text)))
    }
}

plugin_api::export_tool!(Capital);
