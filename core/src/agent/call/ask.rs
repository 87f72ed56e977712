//! What a plugin asks of whoever its call is served to ([`plugin_api::ask`]): a log message, a
//! form for the user (elicitation), a model's completion (sampling). The agent's [`Asker`]
//! answers (the MCP server sets one per call); without one, a log message goes to the host's
//! log, a form goes to the person behind the call (`form.rs`, on the terminal) and a
//! completion to the host's configured model (`sample.rs`); a question nobody can answer is
//! refused, saying why.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use plugin_api::ask::{Ask, LogLevel};
use plugin_api::ToolError;
use serde_json::Value;

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

impl Agent {
    /// Sets who answers what plugins ask (log, elicit, sample); without one, log messages go
    /// to the host's log, forms to the agent's approver (the terminal) and completions to the
    /// host's model ([`Host::set_sampling_models`](crate::Host::set_sampling_models)).
    pub fn set_asker(&self, asker: Arc<dyn Asker>) {
        *lock(&self.asker) = Some(asker);
    }

    /// Answers a plugin's request, for the call of `tool`: its texts masked first, then given
    /// to the agent's [`Asker`] or answered here.
    pub(crate) fn answer_ask(self: &Arc<Self>, tool: &str, request: Ask) -> Answering {
        let request = self.mask_ask(request);
        let asker = lock(&self.asker).clone();
        if let Some(asker) = asker {
            return asker.ask(tool, request);
        }
        let tool = tool.to_owned();
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
                    agent: self.name().to_owned(),
                    tool: tool.clone(),
                    approver: lock(&self.approvals.approver).clone(),
                    yes: (self.approvals.yes_to_writes).load(std::sync::atomic::Ordering::SeqCst),
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
                let agent = self.clone();
                Box::pin(async move {
                    let sampler = super::sample::Sampler::Tool { tool };
                    let sampled = agent.sample_here(sampler, sample).await?;
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

    /// `request` with every text that leaves the host masked.
    fn mask_ask(&self, request: Ask) -> Ask {
        let mask = |text: String| self.mask(text).into_inner();
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
