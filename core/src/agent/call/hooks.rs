//! The host's default hooks of a call: what Agent Zero's `Tool.before_execution`,
//! `after_execution` and `set_progress` do when a tool does not replace them.

use std::sync::Arc;

use plugin_api::points::ToolOutputUpdate;
use plugin_api::Response;
use serde_json::{Map, Value};

use crate::agent::call::context::CallContext;
use crate::agent::output::OutputKind;
use crate::transcript::HistoryMessage;
use plugin_api::ToolError;

impl CallContext {
    /// The default `before_execution`: prints the call and its arguments.
    pub(crate) fn show_call(&self, args: &Map<String, Value>) {
        let agent = &self.agent;
        agent.print(OutputKind::ToolUse, || {
            format!("{}: Using tool '{}'", agent.name(), self.tool_name)
        });
        for (key, value) in args {
            agent.print(OutputKind::Argument, || {
                let value = value
                    .as_str()
                    .map_or_else(|| value.to_string(), str::to_owned);
                format!("  {}: {value}", nice_key(key))
            });
        }
    }

    /// The default `after_execution`: records the sanitised result in history and the log:
    /// the message, then each content block described (`content.rs`: a model reads text only).
    pub(crate) fn record_result(&self, response: &Response) {
        let agent = &self.agent;
        let (text, images) = match response.content.is_empty() {
            true => (agent.mask(sanitize(response.message.trim())), Vec::new()),
            false => {
                let (text, images) = self.describe_content(response);
                (agent.mask(sanitize(&text)), images)
            }
        };
        agent.print(OutputKind::ToolResponse, || {
            format!(
                "{}: Response from tool '{}':\n{text}",
                agent.name(),
                self.tool_name
            )
        });
        let content = text.clone();
        agent.transcript.update_log(self.log_id, |item| {
            item.content = content;
            item.finished = true;
        });
        if !self.nested {
            // A call of `parallel` is reported in the combined result instead.
            let additional = response.additional.clone();
            let additional = additional.map(|a| agent.host.secret_store().map(a));
            let message = HistoryMessage::tool_result(self.tool_name.to_string(), text, additional)
                .with_images(images);
            agent.transcript.add_history(message);
        }
    }

    /// Sets the call's progress and fires `tool_output_update`.
    pub(crate) async fn report_progress(self: &Arc<Self>, text: String) -> Result<(), ToolError> {
        let data = ToolOutputUpdate::new(self.tool_name.to_string(), text);
        let agent = &self.agent;
        let text = agent.mask(self.run_point(data).await?.progress);
        agent.print(OutputKind::Progress, || format!("  ... {text}"));
        agent
            .transcript
            .update_log(self.log_id, |item| item.progress = text);
        Ok(())
    }

    /// Appends to the call's progress without firing any extension point.
    pub(crate) fn append_progress(&self, text: &str) {
        let store = self.agent.host.secret_store();
        self.agent.transcript.update_log(self.log_id, |item| {
            item.progress = store.append(&item.progress, text);
        });
    }

    /// Replaces the text content of the call's log item.
    pub(crate) fn replace_log_content(&self, content: &str) {
        let content = self.agent.mask(content.to_owned());
        self.agent
            .transcript
            .update_log(self.log_id, |item| item.content = content);
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
