//! Built-in extension at `tool_execute_after`: replaces every secret value in the tool's
//! result with its `§§secret(KEY)` placeholder, so the model never sees one. (The host also
//! masks history, logs, errors and output, so replacing this file cannot leak a secret there.)

use plugin_api::{Context, Extension, PointData, ToolError};

#[derive(Default)]
struct MaskSecrets;

impl Extension for MaskSecrets {
    async fn execute(&self, ctx: &Context, data: &mut PointData) -> Result<(), ToolError> {
        let Some(message) = data
            .value()
            .pointer("/response/message")
            .and_then(|m| m.as_str())
        else {
            return Ok(());
        };
        let masked = ctx.mask_secrets(message);
        if masked != message {
            if let Some(m) = data.value_mut().pointer_mut("/response/message") {
                *m = masked.into();
            }
        }
        Ok(())
    }
}

plugin_api::export_extension!(MaskSecrets);
