//! Built-in extension at `tool_execute_before`: puts the secret values into the call's
//! arguments, replacing `§§secret(KEY)` placeholders in strings at any depth, just before the
//! tool runs. An unknown key is a repairable error that lists the known keys, never a value.
//! Replace it by dropping a file of the same name into a higher layer.

use plugin_api::{Context, Extension, PointData, ToolError};

#[derive(Default)]
struct UnmaskSecrets;

impl Extension for UnmaskSecrets {
    async fn execute(&self, ctx: &Context, data: &mut PointData) -> Result<(), ToolError> {
        let has_placeholder = data
            .value()
            .get("args")
            .is_some_and(|args| args.to_string().contains("§§secret("));
        if !has_placeholder {
            return Ok(()); // nothing to do: the data is not sent back
        }
        if let Some(args) = data.value_mut().get_mut("args") {
            ctx.unmask_secrets(args)?;
        }
        Ok(())
    }
}

plugin_api::export_extension!(UnmaskSecrets);
