//! `test_input_required_result_multiple_inputs`: asks the user, the client's model and the client's roots at once. A tool of the MCP conformance suite's server
//! (profile `conformance`), written as any author would write it.

use plugin_api::ask::SampleRequest;
use plugin_api::{Args, Context, Response, RiskLevel, Tool, ToolError, ToolInfo};
use serde_json::{json, Value};

#[derive(Default)]
struct ThreeQuestions;

impl Tool for ThreeQuestions {
    fn info(&self) -> ToolInfo {
        ToolInfo::new("Asks the user, the client's model and the client's roots at once.")
            .risk(RiskLevel::Read)
    }

    async fn execute(&self, ctx: &Context, _args: Args) -> Result<Response, ToolError> {
        let schema = json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]});
        // Asked together, so that a 2026-07-28 client gets all three in one round.
        let (name, greeting, roots) = futures_util::future::join3(
            ctx.elicit_as("user_name", "What is your name?", schema),
            ctx.sample(SampleRequest::new("Generate a greeting", 50).with_key("greeting")),
            ctx.roots(Some("client_roots")),
        )
        .await;
        let content = name?.content.unwrap_or_default();
        let name = content
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("stranger");
        let (greeting, roots) = (greeting?, roots?);
        Ok(Response::text(format!(
            "{} {name} (roots: {})",
            greeting.text,
            roots.len()
        )))
    }
}

plugin_api::export_tool!(ThreeQuestions);
