//! `slow_compute`: computes for the given number of seconds: a long call, run as a task for clients of the Tasks extension. A tool of the MCP conformance suite's server
//! (profile `conformance`, the Tasks extension's fixtures), written as any author would write it.

use std::time::Duration;

use plugin_api::{Args, Context, Response, RiskLevel, Tool, ToolError, ToolInfo};
use serde_json::{json, Value};

#[derive(Default)]
struct SlowCompute;

impl Tool for SlowCompute {
    fn info(&self) -> ToolInfo {
        // A deadline of two minutes: its calls become tasks (60 s or more).
        ToolInfo::new("Computes for the given number of seconds.")
            .risk(RiskLevel::Read)
            .timeout_seconds(120)
            .parameters(json!({
                "type": "object",
                "properties": {
                    "seconds": {"type": "number", "description": "How long, 0 for at once"},
                    "label": {"type": "string"},
                },
                "required": ["seconds"],
            }))
    }

    async fn execute(&self, ctx: &Context, args: Args) -> Result<Response, ToolError> {
        let map = args.into_map();
        let seconds = map.get("seconds").and_then(Value::as_f64).unwrap_or(0.0);
        let label = map
            .get("label")
            .and_then(Value::as_str)
            .unwrap_or("compute");
        let work = Duration::from_secs_f64(seconds.clamp(0.0, 110.0));
        tokio::select! {
            () = ctx.cancelled() => Err(ToolError::intervention("cancelled")),
            () = tokio::time::sleep(work) => {
                Ok(Response::text(format!("{label}: done after {seconds} s")))
            }
        }
    }
}

plugin_api::export_tool!(SlowCompute);
