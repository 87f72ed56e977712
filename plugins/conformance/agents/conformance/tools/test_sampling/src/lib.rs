//! `test_sampling`: asks the client's model to answer a prompt. A tool of the MCP conformance suite's server
//! (profile `conformance`), written as any author would write it.

use plugin_api::ask::SampleRequest;
use plugin_api::{Context, Response, RiskLevel, ToolError, ToolInfo, TypedTool};
use schemars::JsonSchema;
use serde::Deserialize;

/// The arguments of a call.
#[derive(Deserialize, JsonSchema)]
struct Args {
    /// The prompt to send to the model.
    prompt: String,
}

#[derive(Default)]
struct TestSampling;

impl TypedTool for TestSampling {
    type Args = Args;

    fn info(&self) -> ToolInfo {
        ToolInfo::new("Asks the client's model to answer a prompt.").risk(RiskLevel::Read)
    }

    async fn execute(&self, ctx: &Context, args: Args) -> Result<Response, ToolError> {
        let answer = ctx.sample(SampleRequest::new(args.prompt, 100)).await?;
        Ok(Response::text(format!("LLM response: {}", answer.text)))
    }
}

plugin_api::export_tool!(TestSampling);
