//! `test_missing_capability`: needs the client's model (sampling), and fails without it. A tool of the MCP conformance suite's server
//! (profile `conformance`), written as any author would write it.

use plugin_api::ask::SampleRequest;
use plugin_api::{Args, Context, Response, RiskLevel, Tool, ToolError, ToolInfo};

#[derive(Default)]
struct NeedsSampling;

impl Tool for NeedsSampling {
    fn info(&self) -> ToolInfo {
        ToolInfo::new("Needs the client's model (sampling), and fails without it.")
            .risk(RiskLevel::Read)
    }

    async fn execute(&self, ctx: &Context, _args: Args) -> Result<Response, ToolError> {
        let answer = ctx.sample(SampleRequest::new("Say hello.", 20)).await?;
        Ok(Response::text(answer.text))
    }
}

plugin_api::export_tool!(NeedsSampling);
