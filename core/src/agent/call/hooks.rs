//! The host's default hooks of a call: what Agent Zero's `Tool.before_execution`,
//! `after_execution` and `set_progress` do when a tool does not replace them.

use std::sync::Arc;

use plugin_api::points::ToolOutputUpdate;
use plugin_api::Response;
use serde_json::{Map, Value};

use crate::agent::call::context::CallContext;
use crate::agent::output::OutputKind;
use crate::agent::Agent;
use crate::transcript::HistoryMessage;
use plugin_api::ToolError;

impl Agent {
    /// The default `before_execution`: prints the call and its arguments.
    pub(crate) fn default_before_execution(&self, call: &CallContext, args: &Map<String, Value>) {
        self.print(OutputKind::ToolUse, || {
            format!("{}: Using tool '{}'", self.name(), call.tool_name)
        });
        for (key, value) in args {
            self.print(OutputKind::Argument, || {
                let value = value
                    .as_str()
                    .map_or_else(|| value.to_string(), str::to_owned);
                format!("  {}: {value}", nice_key(key))
            });
        }
    }

    /// The default `after_execution`: records the sanitised result in history and the log:
    /// the message, then each content block described (`content.rs`: a model reads text only).
    pub(crate) fn default_after_execution(&self, call: &CallContext, response: &Response) {
        let (text, images) = match response.content.is_empty() {
            true => (self.mask(sanitize(response.message.trim())), Vec::new()),
            false => {
                let (text, images) = self.describe_content(call.log_id, response);
                (self.mask(sanitize(&text)), images)
            }
        };
        self.print(OutputKind::ToolResponse, || {
            format!(
                "{}: Response from tool '{}':\n{text}",
                self.name(),
                call.tool_name
            )
        });
        let content = text.clone();
        self.transcript.update_log(call.log_id, |item| {
            item.content = content;
            item.finished = true;
        });
        if !call.nested {
            // A call of `parallel` is reported in the combined result instead.
            let additional = response.additional.clone();
            let additional = additional.map(|a| self.host.secret_store().map(a));
            let message = HistoryMessage::tool_result(call.tool_name.to_string(), text, additional)
                .with_images(images);
            self.transcript.add_history(message);
        }
    }

    /// Sets a call's progress and fires `tool_output_update`.
    pub(crate) async fn set_progress(
        self: Arc<Self>,
        call: &Arc<CallContext>,
        text: String,
    ) -> Result<(), ToolError> {
        let data = ToolOutputUpdate::new(call.tool_name.to_string(), text);
        let text = self.mask(self.run_point(data, call).await?.progress);
        self.print(OutputKind::Progress, || format!("  ... {text}"));
        self.transcript
            .update_log(call.log_id, |item| item.progress = text);
        Ok(())
    }

    /// Appends to a call's progress without firing any extension point.
    pub(crate) fn add_progress(&self, call: &CallContext, text: &str) {
        let store = self.host.secret_store();
        self.transcript.update_log(call.log_id, |item| {
            item.progress = store.append(&item.progress, text);
        });
    }

    /// Replaces the text content of a call's log item.
    pub(crate) fn log_content(&self, call: &CallContext, content: &str) {
        let content = self.mask(content.to_owned());
        self.transcript
            .update_log(call.log_id, |item| item.content = content);
    }
}

/// Agent Zero's `nice_key`: `search_query` -> `Search query`.
pub fn nice_key(key: &str) -> String {
    let spaced = key.replace('_', " ");
    let mut chars = spaced.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// Agent Zero's `sanitize_string`: control characters other than newline and tab are dropped
/// (Rust strings are already valid UTF-8).
pub fn sanitize(text: &str) -> String {
    text.chars()
        .filter(|c| !c.is_control() || matches!(c, '\n' | '\t'))
        .collect()
}
