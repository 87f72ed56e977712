//! An example tool: greets someone, slowly enough to show progress. `greet:shout` shouts.
//!
//! A [`TypedTool`]: its arguments are one Rust type, whose JSON Schema (the tool's
//! parameters) is derived from it, and which `execute` receives already parsed.

use std::time::Duration;

use plugin_api::{Context, Response, ToolError, ToolInfo, TypedTool};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

/// The arguments of a call.
#[derive(Deserialize, JsonSchema)]
struct GreetArgs {
    /// Who to greet.
    name: String,
    /// How often.
    #[serde(default = "once")]
    #[schemars(range(min = 1, max = 1000))]
    times: u32,
}

fn once() -> u32 {
    1
}

#[derive(Default)]
struct Greet;

impl TypedTool for Greet {
    type Args = GreetArgs;

    fn info(&self) -> ToolInfo {
        ToolInfo::new("Greets someone by name. Call 'greet:shout' to greet loudly.")
            .timeout_seconds(5)
    }

    async fn execute(&self, ctx: &Context, args: GreetArgs) -> Result<Response, ToolError> {
        let GreetArgs { name, times } = args;
        ctx.set_progress(format!("thinking of a greeting for {name}"))
            .await;
        tokio::time::sleep(Duration::from_millis(20)).await; // tokio works inside plugins
        ctx.check_intervention().await?;
        let mut greeting = format!("Hello, {name}!");
        if ctx.method().as_deref() == Some("shout") {
            greeting = greeting.to_uppercase();
        }
        let text = vec![greeting; times.max(1) as usize].join(" ");
        Ok(Response::text(text).with_additional("greeted", json!(name)))
    }
}

plugin_api::export_tool!(Greet);

#[cfg(test)]
mod tests;
