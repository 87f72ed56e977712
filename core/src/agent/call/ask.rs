//! What a plugin asks of whoever its call is served to ([`plugin_api::ask`]): a log message, a
//! form for the user (elicitation), a model's completion (sampling). The agent's [`Asker`]
//! answers (the MCP server sets one per call); without one, a log message goes to the host's
//! log, a form goes to the person behind the call (`form.rs`, on the terminal) and a
//! completion to the host's configured model (`sample.rs`); a question nobody can answer is
//! refused, saying why.

use std::future::Future;
use std::pin::Pin;

use plugin_api::ask::{Ask, LogLevel};
use plugin_api::ToolError;
use serde_json::Value;

use crate::agent::call::context::CallContext;
use crate::agent::Agent;
use crate::sync::lock;

/// A future an [`Asker`] answers with: the answer as JSON (`null` for a log message,
/// [`Elicited`](plugin_api::ask::Elicited) or [`Sampled`](plugin_api::ask::Sampled) as JSON).
pub type Answering = Pin<Box<dyn Future<Output = Result<Value, ToolError>> + Send>>;

/// Whoever an agent's calls are served to, asked on behalf of the plugins (set with
/// [`Agent::set_asker`]). The texts it gets are masked already.
pub trait Asker: Send + Sync {
    /// Answers `request`, made by the tool `tool`.
    fn ask(&self, tool: &str, request: Ask) -> Answering;
}

impl CallContext {
    /// Answers a plugin's request, made within this call: its texts masked first, then given
    /// to the agent's [`Asker`] or answered here.
    pub(crate) fn answer_ask(&self, request: Ask) -> Answering {
        let agent = &self.agent;
        let request = mask_ask(agent, request);
        let asker = lock(&agent.asker).clone();
        if let Some(asker) = asker {
            return asker.ask(&self.tool_name, request);
        }
        let tool = self.tool_name.to_string();
        match request {
            Ask::Log { level, message } => {
                log_here(&tool, level, &message);
                Box::pin(std::future::ready(Ok(Value::Null)))
            }
            // A form on the terminal, as an MCP server's is shown (`form.rs`).
            Ask::Elicit {
                message, schema, ..
            } => {
                let form = super::form::FormAsker {
                    agent: agent.name().to_owned(),
                    tool: tool.clone(),
                    approver: lock(&agent.approvals.approver).clone(),
                    yes: (agent.approvals.yes_to_writes).load(std::sync::atomic::Ordering::SeqCst),
                };
                Box::pin(async move {
                    match super::form::ask_form(&form, "", message, schema).await {
                        Ok(answer) => Ok(serde_json::to_value(answer).unwrap_or_default()),
                        Err(why) => Err(ToolError::dependency(format!(
                            "tool '{tool}' asked the user a question (elicitation), and {why}: \
                             run it on a terminal, or serve it with `toolhost serve-mcp` to a \
                             client that supports elicitation"
                        ))),
                    }
                })
            }
            // The host's own model, as for an MCP server's sampling (`sample.rs`).
            Ask::Sample(sample) => {
                let agent = agent.clone();
                Box::pin(async move {
                    let sampler = super::sample::Sampler::Tool { tool };
                    let sampled = super::sample::sample(&agent, sampler, sample).await?;
                    Ok(super::sample::answer_json(&sampled))
                })
            }
            Ask::Roots { .. } => Box::pin(std::future::ready(Err(ToolError::dependency(format!(
                "tool '{tool}' asked for the client's roots, which only an MCP client shares: \
                 serve it with `toolhost serve-mcp` to a client that declares roots"
            ))))),
            _ => Box::pin(std::future::ready(Err(ToolError::dependency(format!(
                "tool '{tool}' asked something this host does not know: update the host"
            ))))),
        }
    }
}

/// `request` with every text that leaves the host masked.
fn mask_ask(agent: &Agent, request: Ask) -> Ask {
    let mask = |text: String| agent.mask(text).into_inner();
    match request {
        Ask::Log { level, message } => Ask::Log {
            level,
            message: mask(message),
        },
        Ask::Elicit {
            message,
            schema,
            key,
        } => Ask::Elicit {
            message: mask(message),
            schema,
            key,
        },
        Ask::Sample(mut sample) => {
            for message in &mut sample.messages {
                message.text = mask(std::mem::take(&mut message.text));
            }
            sample.system_prompt = sample.system_prompt.map(mask);
            Ask::Sample(sample)
        }
        other => other,
    }
}

/// A tool's log message in the host's log, at the nearest level.
fn log_here(tool: &str, level: LogLevel, message: &str) {
    match level {
        LogLevel::Debug => tracing::debug!("tool {tool}: {message}"),
        LogLevel::Info | LogLevel::Notice => tracing::info!("tool {tool}: {message}"),
        LogLevel::Warning => tracing::warn!("tool {tool}: {message}"),
        _ => tracing::error!("tool {tool}: {message}"),
    }
}
