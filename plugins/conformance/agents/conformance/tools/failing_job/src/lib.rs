//! `failing_job`: fails after a second, as a long job that goes wrong does. A tool of the MCP conformance suite's server
//! (profile `conformance`, the Tasks extension's fixtures), written as any author would write it.

use std::time::Duration;

use plugin_api::{Args, Context, Response, RiskLevel, Tool, ToolError, ToolInfo};

#[derive(Default)]
struct FailingJob;

impl Tool for FailingJob {
    fn info(&self) -> ToolInfo {
        ToolInfo::new("Fails after a second, as a long job that goes wrong does.")
            .risk(RiskLevel::Read)
            .timeout_seconds(120)
            // Its calls are always tasks: a 2026-07-28 client must declare the extension.
            .task_required(true)
    }

    async fn execute(&self, _ctx: &Context, _args: Args) -> Result<Response, ToolError> {
        tokio::time::sleep(Duration::from_secs(1)).await;
        Err(ToolError::business("the job failed, as it always does"))
    }
}

plugin_api::export_tool!(FailingJob);
