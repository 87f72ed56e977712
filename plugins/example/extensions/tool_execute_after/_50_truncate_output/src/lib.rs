//! An example extension at `tool_execute_after`: shortens tool results longer than
//! `max_output_chars` (loop data, default 1000) so they cannot flood the model's context.

use plugin_api::{Context, Extension, PointData, ToolError};

const DEFAULT_LIMIT: usize = 1000;

#[derive(Default)]
struct TruncateOutput;

impl Extension for TruncateOutput {
    async fn execute(&self, ctx: &Context, data: &mut PointData) -> Result<(), ToolError> {
        let limit = ctx
            .loop_data("max_output_chars")
            .and_then(|v| v.as_u64())
            .map_or(DEFAULT_LIMIT, |n| n as usize);
        let Some(message) = data
            .value()
            .pointer("/response/message")
            .and_then(|m| m.as_str())
        else {
            return Ok(());
        };
        let total = message.chars().count();
        if total <= limit {
            return Ok(());
        }
        let kept: String = message.chars().take(limit).collect();
        let shortened = format!(
            "{kept}... ({} more characters cut by _50_truncate_output)",
            total - limit
        );
        if let Some(m) = data.value_mut().pointer_mut("/response/message") {
            *m = shortened.into();
        }
        Ok(())
    }
}

plugin_api::export_extension!(TruncateOutput);
