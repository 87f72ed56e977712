//! Built-in extension at `tool_execute_before`: puts the secret values into the call's
//! arguments, replacing `§§secret(KEY)` placeholders in strings and object keys at any depth,
//! just before the tool runs. An unknown key is a repairable error that lists the known keys,
//! never a value.
//! Replace it by dropping a file of the same name into a higher layer.

use plugin_api::points::ToolExecuteBefore;
use plugin_api::serde_json::Value;
use plugin_api::{Context, Extension, PointData, ToolError};

#[derive(Default)]
struct UnmaskSecrets;

impl Extension for UnmaskSecrets {
    async fn execute(&self, ctx: &Context, data: &mut PointData) -> Result<(), ToolError> {
        let mut before: ToolExecuteBefore = data.read()?;
        if !before
            .args
            .iter()
            .any(|(k, v)| is_placeholder_in(k) || has_placeholder(v))
        {
            return Ok(()); // nothing to do: the data is not sent back
        }
        let mut args = Value::Object(std::mem::take(&mut before.args));
        ctx.unmask_secrets(&mut args)?;
        if let Value::Object(map) = args {
            before.args = map;
        }
        data.write(&before)
    }
}

/// Whether a string or an object key anywhere in `value` holds a `§§secret(` placeholder.
fn has_placeholder(value: &Value) -> bool {
    match value {
        Value::String(s) => is_placeholder_in(s),
        Value::Array(items) => items.iter().any(has_placeholder),
        Value::Object(map) => map
            .iter()
            .any(|(k, v)| is_placeholder_in(k) || has_placeholder(v)),
        _ => false,
    }
}

fn is_placeholder_in(text: &str) -> bool {
    text.contains("§§secret(")
}

plugin_api::export_extension!(UnmaskSecrets);
