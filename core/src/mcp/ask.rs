//! A server that asks (`elicitation/create`): its form goes to the person behind the call
//! it came during (the agent's [`Approver`], on the terminal for `call`, `watch` and `chat`);
//! fields left out get their defaults (SEP-1034). Where no one can answer, it is declined
//! with the reason logged; `--yes` accepts a form whose required fields all have defaults.
//! The values answered are never logged.

use std::sync::Arc;

use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction};
use serde_json::{Map, Value};

use crate::governance::{Approver, FormAnswer, FormRequest};

/// Who can answer for one running call.
#[derive(Clone)]
pub(crate) struct Asker {
    /// The agent.
    pub(crate) agent: String,
    /// The tool called (`<server>.<tool>`).
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

fn declined() -> ElicitResult {
    ElicitResult::new(ElicitationAction::Decline)
}

/// The answer to `params` from server `server`, asked during the call of `asker` (`None`:
/// no call of that server runs, so no one asked for it).
pub(crate) async fn elicit(
    asker: Option<Asker>,
    server: &str,
    params: ElicitRequestParams,
) -> ElicitResult {
    let (message, schema) = match params {
        ElicitRequestParams::FormElicitationParams {
            message,
            requested_schema,
            ..
        } => (
            message,
            serde_json::to_value(requested_schema).unwrap_or(Value::Null),
        ),
        _ => {
            tracing::warn!(
                "MCP server {server} asked the user to open a URL (elicitation): declined, this \
                 host answers forms only"
            );
            return declined();
        }
    };
    let Some(asker) = asker else {
        tracing::warn!(
            "MCP server {server} asked for input while none of its tools was being called: \
             declined (no one to ask)"
        );
        return declined();
    };
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
            tracing::warn!(
                "MCP server {server} asked for input during the call of {}: declined, no one can \
                 answer here (not on a terminal; --yes sends a form whose required fields all \
                 have defaults)",
                asker.tool
            );
            return declined();
        }
    };
    match answer {
        FormAnswer::Accept(given) => {
            content.extend(given);
            let lacking = missing(&schema, &content);
            if !lacking.is_empty() {
                tracing::warn!(
                    "MCP server {server}: its form was declined, required fields left empty: {}",
                    lacking.join(", ")
                );
                return declined();
            }
            tracing::info!(
                "MCP server {server}: its form was answered ({} fields, values not logged)",
                content.len()
            );
            ElicitResult::new(ElicitationAction::Accept).with_content(Value::Object(content))
        }
        FormAnswer::Decline => declined(),
        FormAnswer::Cancel => ElicitResult::new(ElicitationAction::Cancel),
    }
}
