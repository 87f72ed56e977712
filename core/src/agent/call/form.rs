//! A form for the person behind a call: an MCP server's `elicitation/create` (`crate::mcp::ask`)
//! and a plugin's [`Context::elicit`] when its call is not served over MCP. One path for
//! both: the agent's [`Approver`] shows it (on the terminal for `call`, `watch` and `chat`),
//! fields left out get their defaults (SEP-1034), and `--yes` sends a form whose required
//! fields all have defaults. The values answered are never logged.
//!
//! [`Context::elicit`]: plugin_api::Context::elicit

use std::sync::Arc;

use plugin_api::ask::{ElicitAction, Elicited};
use serde_json::{Map, Value};

use crate::governance::{Approver, FormAnswer, FormRequest};

/// Who can answer a form for one running call.
#[derive(Clone)]
pub(crate) struct FormAsker {
    /// The agent.
    pub(crate) agent: String,
    /// The tool called.
    pub(crate) tool: String,
    /// The agent's approver, if it has one.
    pub(crate) approver: Option<Arc<dyn Approver>>,
    /// `--yes`: a form whose required fields all have defaults is sent with them.
    pub(crate) yes: bool,
}

/// Each property's `default` in `schema`.
fn defaults(schema: &Value) -> Map<String, Value> {
    let properties = schema.get("properties").and_then(Value::as_object);
    properties
        .into_iter()
        .flatten()
        .filter_map(|(name, p)| Some((name.clone(), p.get("default")?.clone())))
        .collect()
}

/// The required fields `content` lacks.
fn missing(schema: &Value, content: &Map<String, Value>) -> Vec<String> {
    let required = schema.get("required").and_then(Value::as_array);
    required
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|name| !content.contains_key(*name))
        .map(str::to_owned)
        .collect()
}

/// The answer to the form `message` / `schema` that `server` (empty for the tool itself)
/// asks during the call of `asker`. `Err`: nobody can answer here, and why (one line).
pub(crate) async fn ask_form(
    asker: &FormAsker,
    server: &str,
    message: String,
    schema: Value,
) -> Result<Elicited, String> {
    let mut content = defaults(&schema);
    let asked = asker
        .approver
        .as_ref()
        .filter(|a| a.unavailable().is_none())
        .cloned();
    let answer = match asked {
        Some(approver) => {
            let request = FormRequest {
                agent: asker.agent.clone(),
                tool: asker.tool.clone(),
                server: server.to_owned(),
                message,
                schema: schema.clone(),
            };
            let filled = tokio::task::spawn_blocking(move || approver.fill(&request)).await;
            filled.unwrap_or(FormAnswer::Cancel)
        }
        None if asker.yes && missing(&schema, &content).is_empty() => {
            FormAnswer::Accept(Map::new())
        }
        None => {
            return Err(format!(
                "no one can answer here (not on a terminal; --yes sends a form whose required \
                 fields all have defaults), during the call of {}",
                asker.tool
            ));
        }
    };
    let who = match server {
        "" => format!("tool {}", asker.tool),
        server => format!("MCP server {server}"),
    };
    Ok(match answer {
        FormAnswer::Accept(given) => {
            content.extend(given);
            let lacking = missing(&schema, &content);
            if !lacking.is_empty() {
                tracing::warn!(
                    "{who}: its form was declined, required fields left empty: {}",
                    lacking.join(", ")
                );
                return Ok(Elicited::new(ElicitAction::Decline, None));
            }
            tracing::info!(
                "{who}: its form was answered ({} fields, values not logged)",
                content.len()
            );
            Elicited::new(ElicitAction::Accept, Some(content))
        }
        FormAnswer::Decline => Elicited::new(ElicitAction::Decline, None),
        FormAnswer::Cancel => Elicited::new(ElicitAction::Cancel, None),
    })
}
