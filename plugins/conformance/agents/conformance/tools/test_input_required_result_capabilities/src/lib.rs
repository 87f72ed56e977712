//! `test_input_required_result_capabilities`: asks the user and the client's model, each only if the client can answer. A tool of the MCP conformance suite's server
//! (profile `conformance`), written as any author would write it.

use plugin_api::ask::SampleRequest;
use plugin_api::{Args, Context, Response, RiskLevel, Tool, ToolError, ToolInfo};
use serde_json::json;

#[derive(Default)]
struct WhatYouCan;

impl Tool for WhatYouCan {
    fn info(&self) -> ToolInfo {
        ToolInfo::new("Asks the user and the client's model, each only if the client can answer.")
            .risk(RiskLevel::Read)
    }

    async fn execute(&self, ctx: &Context, _args: Args) -> Result<Response, ToolError> {
        let schema = json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]});
        // A question the client cannot answer fails at once and is not asked; the other one
        // still is.
        let (name, capital) = futures_util::future::join(
            ctx.elicit_as("user_name", "What is your name?", schema),
            ctx.sample(
                SampleRequest::new("What is the capital of France?", 100)
                    .with_key("capital_question"),
            ),
        )
        .await;
        match (name, capital) {
            (Err(e), Err(_)) => Err(e),
            (name, capital) => Ok(Response::text(format!(
                "answered: elicitation {}, sampling {}",
                name.is_ok(),
                capital.is_ok()
            ))),
        }
    }
}

plugin_api::export_tool!(WhatYouCan);
