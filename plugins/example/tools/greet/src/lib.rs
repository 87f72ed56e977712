//! An example tool: greets someone, slowly enough to show progress. `greet:shout` shouts.

use std::time::Duration;

use plugin_api::{Args, Context, Response, Tool, ToolError, ToolInfo};
use serde_json::json;

#[derive(Default)]
struct Greet;

impl Tool for Greet {
    fn info(&self) -> ToolInfo {
        ToolInfo::new("Greets someone by name. Call 'greet:shout' to greet loudly.")
        .parameters(json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "Who to greet."},
                "times": {"type": "integer", "minimum": 1, "maximum": 1000, "description": "How often."}
            },
            "required": ["name"]
        }))
        .timeout_seconds(5)
    }

    async fn execute(&self, ctx: &Context, args: Args) -> Result<Response, ToolError> {
        let name = args.require_str("name")?;
        let times = args
            .get("times")
            .and_then(|v| v.as_u64())
            .unwrap_or(1)
            .max(1);
        ctx.set_progress(format!("thinking of a greeting for {name}"))
            .await;
        tokio::time::sleep(Duration::from_millis(20)).await; // tokio works inside plugins
        ctx.check_intervention().await?;
        let mut greeting = format!("Hello, {name}!");
        if ctx.method().as_deref() == Some("shout") {
            greeting = greeting.to_uppercase();
        }
        let text = vec![greeting; times as usize].join(" ");
        Ok(Response::text(text).with_additional("greeted", json!(name)))
    }
}

plugin_api::export_tool!(Greet);

#[cfg(test)]
mod tests;
