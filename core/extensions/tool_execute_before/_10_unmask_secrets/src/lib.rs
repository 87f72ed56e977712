//! Built-in extension at `tool_execute_before`: puts the secret values into the call's
//! arguments, replacing `§§secret(KEY)` placeholders in strings and object keys at any depth,
//! just before the tool runs. An unknown key is a repairable error that lists the known keys,
//! never a value. The host decides what is filled in: a tool in a worker process gets only the
//! secrets granted to it (`secret:KEY`), and any other placeholder is refused with the grant
//! that would fill it. The live log says which secrets were filled in (by key, never the value).
//! Replace it by dropping a file of the same name into a higher layer.

use std::collections::BTreeSet;

use plugin_api::points::ToolExecuteBefore;
use plugin_api::serde_json::Value;
use plugin_api::{Context, Extension, PointData, ToolError};

#[derive(Default)]
struct UnmaskSecrets;

impl Extension for UnmaskSecrets {
    async fn execute(&self, ctx: &Context, data: &mut PointData) -> Result<(), ToolError> {
        let mut before: ToolExecuteBefore = data.read()?;
        let mut args = Value::Object(std::mem::take(&mut before.args));
        let mut keys = BTreeSet::new();
        placeholders(&args, &mut keys);
        if keys.is_empty() {
            return Ok(()); // nothing to do: the data is not sent back
        }
        ctx.unmask_secrets(&mut args)?;
        if let Value::Object(map) = args {
            before.args = map;
        }
        // Visible in the live log: the value reached the tool, without showing it.
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        let noun = if keys.len() == 1 { "secret" } else { "secrets" };
        ctx.set_progress(format!("{noun} {} filled in", keys.join(", ")))
            .await;
        data.write(&before)
    }
}

/// The keys of the `§§secret(KEY)` placeholders in the strings and object keys of `value`.
fn placeholders(value: &Value, keys: &mut BTreeSet<String>) {
    match value {
        Value::String(s) => keys_in(s, keys),
        Value::Array(items) => items.iter().for_each(|v| placeholders(v, keys)),
        Value::Object(map) => {
            for (k, v) in map {
                keys_in(k, keys);
                placeholders(v, keys);
            }
        }
        _ => {}
    }
}

fn keys_in(text: &str, keys: &mut BTreeSet<String>) {
    for (i, _) in text.match_indices(START) {
        let rest = &text[i + START.len()..];
        if let Some(end) = rest.find(')') {
            keys.insert(rest[..end].to_owned());
        }
    }
}

/// The text before a key in a placeholder.
const START: &str = "§§secret(";

plugin_api::export_extension!(UnmaskSecrets);
