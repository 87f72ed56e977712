//! An example extension at `tool_execute_after`: shortens tool results longer than
//! `max_output_chars` (loop data, default 1000) so they cannot flood the model's context.

use plugin_api::points::ToolExecuteAfter;
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
        let mut after: ToolExecuteAfter = data.read()?;
        let message = &after.response.message;
        let total = message.chars().count();
        if total <= limit {
            return Ok(()); // short enough: the data is not sent back
        }
        let kept: String = message.chars().take(limit).collect();
        after.response.message = format!(
            "{kept}... ({} more characters cut by _50_truncate_output)",
            total - limit
        );
        data.write(&after)
    }
}

plugin_api::export_extension!(TruncateOutput);
