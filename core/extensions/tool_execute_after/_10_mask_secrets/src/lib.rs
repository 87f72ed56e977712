//! Built-in extension at `tool_execute_after`: replaces every secret value in the tool's
//! result with its `§§secret(KEY)` placeholder, so the model never sees one. (The host also
//! masks history, logs, errors and output, so replacing this file cannot leak a secret there.)

use plugin_api::points::ToolExecuteAfter;
use plugin_api::{Context, Extension, PointData, ToolError};

#[derive(Default)]
struct MaskSecrets;

impl Extension for MaskSecrets {
    async fn execute(&self, ctx: &Context, data: &mut PointData) -> Result<(), ToolError> {
        let mut after: ToolExecuteAfter = data.read()?;
        let masked = ctx.mask_secrets(&after.response.message);
        if masked == after.response.message {
            return Ok(()); // no secret in it: the data is not sent back
        }
        after.response.message = masked;
        data.write(&after)
    }
}

plugin_api::export_extension!(MaskSecrets);
