//! `test_header_echo`: says which region it was given, which clients also send as the Mcp-Param-Region header. A tool of the MCP conformance suite's server
//! (profile `conformance`), written as any author would write it.

use plugin_api::{Args, Context, Response, RiskLevel, Tool, ToolError, ToolInfo};
use serde_json::json;

#[derive(Default)]
struct HeaderEcho;

impl Tool for HeaderEcho {
    fn info(&self) -> ToolInfo {
        ToolInfo::new("Says which region it was given, which clients also send as the Mcp-Param-Region header.")
            .risk(RiskLevel::Read)
            .parameters(json!({
                "type": "object",
                "properties": {
                    // SEP-2243: a balancer can route on the header without reading the body.
                    "region": {"type": "string", "x-mcp-header": "Region"},
                },
                "required": ["region"],
            }))
    }

    async fn execute(&self, _ctx: &Context, args: Args) -> Result<Response, ToolError> {
        let region = args.require_str("region")?;
        Ok(Response::text(format!("region: {region}")))
    }
}

plugin_api::export_tool!(HeaderEcho);
