//! Running the extensions of a point: each gets the data the one before it left.

use std::sync::Arc;

use abi_stable::std_types::RString;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::agent::call::context::CallContext;
use crate::agent::call::read_back::ReadBack;
use crate::agent::message_loop::LoopError;
use crate::agent::Agent;
use crate::plugin::ExtensionHandle;
use crate::secrets::Masked;
use crate::telemetry;
use plugin_api::points::TOOL_EXECUTE_BEFORE;
use plugin_api::ToolError;

/// JSON text of a value (`to_string` goes through `fmt` and is slower).
pub(crate) fn json_text(value: &impl Serialize) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "null".to_owned())
}

/// JSON text of a call's arguments, written into a buffer sized for it first: a buffer left
/// to double as it fills holds up to twice the text, and copies it on each growth, which for
/// megabytes of arguments is most of what the call costs in memory.
pub(crate) fn args_text(args: &Map<String, Value>) -> String {
    let mut text = Vec::with_capacity(json_len_hint(args.iter()));
    match serde_json::to_writer(&mut text, args) {
        // serde_json writes UTF-8 only.
        Ok(()) => String::from_utf8(text).unwrap_or_else(|_| "null".to_owned()),
        Err(_) => "null".to_owned(),
    }
}

/// About the length of the JSON text of an object's members (a little over it, unless its
/// strings need many escapes).
fn json_len_hint<'a>(members: impl Iterator<Item = (&'a String, &'a Value)>) -> usize {
    members
        .map(|(name, value)| name.len() + 4 + value_len_hint(value))
        .sum::<usize>()
        + 2
}

fn value_len_hint(value: &Value) -> usize {
    match value {
        Value::String(text) => text.len() + text.len() / 64 + 2,
        Value::Array(items) => items.iter().map(|v| value_len_hint(v) + 1).sum::<usize>() + 2,
        Value::Object(members) => json_len_hint(members.iter()),
        _ => 24,
    }
}

impl CallContext {
    /// Runs every extension of `point` in order, each on the data the previous one left,
    /// within this call: the extensions receive no secret it may not.
    /// The data is serialised once, and parsed again only if an extension changed it: the
    /// result is `None` when nothing changed.
    pub(crate) async fn run_extensions(
        self: &Arc<Self>,
        point: &str,
        data: &impl Serialize,
    ) -> Result<Option<Value>, ToolError> {
        let agent = &self.agent;
        let extensions = agent.host.extensions(agent.profile(), point);
        self.run_list(&extensions, point, data).await
    }

    /// [`run_extensions`](Self::run_extensions) with the point's extensions already looked up.
    async fn run_list(
        self: &Arc<Self>,
        extensions: &[Arc<ExtensionHandle>],
        point: &str,
        data: &impl Serialize,
    ) -> Result<Option<Value>, ToolError> {
        if extensions.is_empty() {
            return Ok(None);
        }
        let host = &self.agent.host;
        // A point with extensions is a step of the call's span; one without costs nothing.
        let run = async {
            let mut text = RString::from(json_text(data));
            let mut changed_by = None;
            for ext in extensions.iter() {
                let access = ext.secret_access();
                // An extension in a worker process sees the data with every secret value in
                // it masked. The values go on masked, but for the tool's own arguments
                // (`tool_execute_before`, after the core's unmasking filled them in), where
                // they are put back where their placeholders are.
                let hidden = match access {
                    Some(_) => Some(host.secrets().hide_in_json(&text)),
                    None => None,
                };
                let sent = match &hidden {
                    Some((masked, _)) => RString::from(masked.as_str()),
                    None => text.clone(),
                };
                let restores = point == TOOL_EXECUTE_BEFORE;
                let ctx = self.for_extension(&ext.point, &ext.name, access);
                match (ext.execute(ctx.to_ffi(), sent).await, &hidden) {
                    (Ok(Some(new)), Some((_, keys))) if restores && !keys.is_empty() => {
                        let restored = host.secrets().restore_in_json(&new, keys)?;
                        text = RString::from(restored);
                        changed_by = Some(&ext.name);
                    }
                    (Ok(Some(new)), _) => {
                        text = new;
                        changed_by = Some(&ext.name);
                    }
                    (Ok(None), Some((masked, keys))) if !restores && !keys.is_empty() => {
                        text = RString::from(masked.as_str());
                        changed_by = Some(&ext.name);
                    }
                    (Ok(None), _) => {}
                    (Err(e), _) => {
                        let message =
                            format!("extension '{}' at {point}: {}", ext.name, e.message());
                        return Err(ToolError::new(e.kind(), message));
                    }
                }
            }
            let Some(changed_by) = changed_by else {
                return Ok(None);
            };
            serde_json::from_str(&text).map(Some).map_err(|e| {
                ToolError::internal(format!(
                    "extension '{changed_by}' at {point} left invalid JSON: {e}"
                ))
            })
        };
        telemetry::extension_point(point).run(run).await
    }

    /// [`Agent::call_extensions`] fired by a plugin within this call: the extensions run with
    /// the call's (and that plugin's) access to secrets, never more.
    pub(crate) async fn call_extensions_within(
        self: &Arc<Self>,
        point: &str,
        data: Value,
    ) -> Result<Value, ToolError> {
        Ok(self.run_extensions(point, &data).await?.unwrap_or(data))
    }

    /// Runs the extensions of `P`'s point on `data`; returns `data` with the changes they made
    /// that the point allows ([`ReadBack`]).
    pub(crate) async fn run_point<P: ReadBack>(self: &Arc<Self>, data: P) -> Result<P, ToolError> {
        let agent = &self.agent;
        let extensions = agent.host.extensions(agent.profile(), P::NAME);
        self.run_point_with(&extensions, data).await
    }

    /// [`run_point`](Self::run_point) with the point's extensions already looked up (a caller
    /// that finds none need not build the data at all).
    pub(crate) async fn run_point_with<P: ReadBack>(
        self: &Arc<Self>,
        extensions: &[Arc<ExtensionHandle>],
        data: P,
    ) -> Result<P, ToolError> {
        match self.run_list(extensions, P::NAME, &data).await? {
            None => Ok(data),
            Some(changed) => data.read_back(changed),
        }
    }
}

impl Agent {
    /// Runs the extensions of any point (the host's or one of your own) on `data`, in order;
    /// returns the data the last one left.
    pub async fn call_extensions(
        self: &Arc<Self>,
        point: &str,
        data: Value,
    ) -> Result<Value, ToolError> {
        let call = Arc::new(CallContext::for_agent(self.clone()));
        Ok(call.run_extensions(point, &data).await?.unwrap_or(data))
    }

    /// [`fire`](Self::fire), building the data only if the point has extensions: `None`
    /// without any.
    pub(crate) async fn fire_lazy<P: ReadBack>(
        self: &Arc<Self>,
        data: impl FnOnce() -> P,
    ) -> Result<Option<P>, LoopError> {
        if self.host.extensions(self.profile(), P::NAME).is_empty() {
            return Ok(None);
        }
        self.fire(data()).await.map(Some)
    }

    /// Runs the message loop's extensions of `P`'s point on `data`, masked first; returns the
    /// data they leave. A failure ends the loop, with its message masked.
    pub(crate) async fn fire<P: ReadBack>(self: &Arc<Self>, data: P) -> Result<P, LoopError> {
        let store = self.host.secret_store();
        let fail = |error: ToolError| LoopError::Extension {
            point: P::NAME,
            error: store.error(&error),
        };
        let data: Masked<P> = store.point(data).map_err(fail)?;
        let call = Arc::new(CallContext::for_agent(self.clone()));
        call.run_point(data.into_inner()).await.map_err(fail)
    }
}
