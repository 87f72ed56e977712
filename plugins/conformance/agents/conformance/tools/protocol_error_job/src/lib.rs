//! `protocol_error_job`: panics, as a long job with a bug does. A tool of the MCP conformance suite's server
//! (profile `conformance`, the Tasks extension's fixtures), written as any author would write it.

use plugin_api::{Args, Context, Response, RiskLevel, Tool, ToolError, ToolInfo};

#[derive(Default)]
struct ProtocolErrorJob;

impl Tool for ProtocolErrorJob {
    fn info(&self) -> ToolInfo {
        ToolInfo::new("Panics, as a long job with a bug does.")
            .risk(RiskLevel::Read)
            .timeout_seconds(120)
    }

    async fn execute(&self, _ctx: &Context, _args: Args) -> Result<Response, ToolError> {
        panic!("protocol_error_job: a bug")
    }
}

plugin_api::export_tool!(ProtocolErrorJob);
