//! `test_input_required_result_list_roots`: lists the client's roots. A tool of the MCP conformance suite's server
//! (profile `conformance`), written as any author would write it.

use plugin_api::{Args, Context, Response, RiskLevel, Tool, ToolError, ToolInfo};

#[derive(Default)]
struct Roots;

impl Tool for Roots {
    fn info(&self) -> ToolInfo {
        ToolInfo::new("Lists the client's roots.").risk(RiskLevel::Read)
    }

    async fn execute(&self, ctx: &Context, _args: Args) -> Result<Response, ToolError> {
        let roots = ctx.roots(Some("client_roots")).await?;
        let uris: Vec<&str> = roots.iter().map(|r| r.uri.as_str()).collect();
        Ok(Response::text(format!(
            "The client's roots: {}",
            uris.join(", ")
        )))
    }
}

plugin_api::export_tool!(Roots);
