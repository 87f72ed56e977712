//! A completion asked of the host's own model: a plugin's [`Context::sample`] when its call is
//! not served over MCP, and an MCP server's `sampling/createMessage` (`crate::mcp::ask`). One
//! path for both: the texts masked, the profile's model looked up ([`SamplingModels`](crate::model::SamplingModels), set by
//! the CLI from `models.toml`), the policy asked, then the model, and an audit record of
//! the request either way.
//!
//! The policy of a sampling request of `NAME` (an MCP server or a plugin tool) is
//! `[tools."sampling.NAME"] policy`, else `[policy] exec`, else "ask": a person approves it
//! (`--yes` never does). Where nobody can approve, or no model is configured, it is declined
//! with a reason that says what to do.
//!
//! [`Context::sample`]: plugin_api::Context::sample

use plugin_api::ask::{SampleRequest, SampleRole, Sampled};
use plugin_api::{RiskLevel, ToolError};
use serde_json::Value;

use crate::agent::Agent;
use crate::audit::{AuditRecord, Decision, SamplingRecord};
use crate::config::PolicyDecision;
use crate::governance::{
    allowed, refused, said, ApprovalAnswer, DecisionSource, SampleApproval, Verdict,
};
use crate::model::{ModelRequest, SamplingModel};
use crate::sync::lock;
use crate::transcript::HistoryMessage;

/// Who asks for a completion.
#[derive(Debug, Clone)]
pub(crate) enum Sampler {
    /// An MCP server, during the call of one of its tools.
    #[cfg_attr(not(feature = "mcp"), allow(dead_code))]
    McpServer { server: String, tool: String },
    /// A plugin tool, during its call (`Context::sample`).
    Tool { tool: String },
}

impl Sampler {
    /// The name the policy and the session's approvals know it by: `sampling.<server or tool>`.
    fn key(&self) -> String {
        match self {
            Self::McpServer { server, .. } => format!("sampling.{server}"),
            Self::Tool { tool } => format!("sampling.{tool}"),
        }
    }

    /// `MCP server 'time'` or `tool 'summarise'`.
    fn shown(&self) -> String {
        match self {
            Self::McpServer { server, .. } => format!("MCP server '{server}'"),
            Self::Tool { tool } => format!("tool '{tool}'"),
        }
    }

    /// The tool whose call it happens during.
    fn tool(&self) -> &str {
        match self {
            Self::McpServer { tool, .. } | Self::Tool { tool } => tool,
        }
    }

    /// `mcp:<server>` or `tool`, for the audit.
    fn source(&self) -> String {
        match self {
            Self::McpServer { server, .. } => format!("mcp:{server}"),
            Self::Tool { .. } => "tool".to_owned(),
        }
    }
}

/// Answers `request` of `sampler` with the host's model for this agent's profile, after
/// the policy's approval; audited either way. The texts are masked before anyone sees
/// them.
pub(crate) async fn sample(
    agent: &Agent,
    sampler: Sampler,
    mut request: SampleRequest,
) -> Result<Sampled, ToolError> {
    for message in &mut request.messages {
        message.text = agent.mask(std::mem::take(&mut message.text)).into_inner();
    }
    request.system_prompt = request.system_prompt.map(|s| agent.mask(s).into_inner());
    let who = sampler.shown();
    let mut record = SamplingRecord {
        agent: agent.name().to_owned(),
        profile: agent.profile().to_owned(),
        requester: sampler.source(),
        tool: sampler.tool().to_owned(),
        model: None,
        request: serde_json::to_value(&request).unwrap_or(Value::Null),
        decision: Decision::Denied,
        source: String::new(),
        outcome: "unavailable".to_owned(),
        answer_chars: None,
        time_ms: crate::audit::now_ms(),
    };
    let models = lock(&agent.host.sampling).clone();
    let found = match models {
        Some(models) => models.model(agent.profile(), request.max_tokens),
        None => Err(
            "this host has no model to sample with (the CLI sets one from \
                     models.toml)"
                .to_owned(),
        ),
    };
    let model = match found {
        Ok(model) => model,
        Err(why) => {
            record.source = "no model".to_owned();
            audit_sampling(agent, record);
            let message = format!(
                "{who} asked for a model's completion (sampling), declined: no model to \
                 ask here: {why}"
            );
            tracing::warn!("{message}");
            return Err(ToolError::dependency(message));
        }
    };
    record.model = Some(model.name.clone());
    let verdict = approve_sampling(agent, &sampler, &model.name, &request).await;
    record.decision = match verdict.allowed {
        true => Decision::Allowed,
        false => Decision::Denied,
    };
    record.source = verdict.source.to_string();
    if !verdict.allowed {
        record.outcome = "denied".to_owned();
        audit_sampling(agent, record);
        let message = format!(
            "{who} asked for a completion of model '{}' (sampling), declined ({})",
            model.name, verdict.source
        );
        tracing::warn!("{message}");
        return Err(ToolError::dependency(message));
    }
    let answered = ask_model(agent, &model, &request).await;
    match &answered {
        Ok(sampled) => {
            record.outcome = "success".to_owned();
            record.answer_chars = Some(sampled.text.chars().count() as u64);
            tracing::info!(
                "{who}: sampling answered by model '{}' ({} characters)",
                model.name,
                sampled.text.chars().count()
            );
        }
        Err(e) => record.outcome = e.kind().as_str().to_owned(),
    }
    audit_sampling(agent, record);
    answered
}

/// The policy's decision on a sampling request, asking the user where it says "ask".
async fn approve_sampling(
    agent: &Agent,
    sampler: &Sampler,
    model: &str,
    request: &SampleRequest,
) -> Verdict {
    let key = sampler.key();
    let decision = match agent.host.config(agent.profile()) {
        Ok(config) => config.policy(&key, RiskLevel::Exec),
        Err(e) => return refused(DecisionSource::Said(e.to_string().into())),
    };
    let (policy, source) = decision;
    match policy {
        PolicyDecision::Allow => return allowed(DecisionSource::Policy(source)),
        PolicyDecision::Deny => return refused(DecisionSource::Policy(source)),
        PolicyDecision::Ask => {}
    }
    if lock(&agent.approvals.session).contains(&key) {
        return allowed(said("user: approved for this session"));
    }
    let file = super::approve::policy_file(agent);
    let allow = format!(
        "[tools.\"{key}\"] policy = \"allow\" in {}",
        crate::layout::Escaped(&file)
    );
    let Some(approver) = lock(&agent.approvals.approver).clone() else {
        return refused(DecisionSource::Said(
            format!(
                "policy asks, and there is no terminal to ask on: run on a terminal to be \
                 asked, or allow it with {allow}"
            )
            .into(),
        ));
    };
    if let Some(reason) = approver.unavailable() {
        return refused(DecisionSource::Said(reason.into()));
    }
    let asked = SampleApproval {
        agent: agent.name().to_owned(),
        requester: sampler.shown(),
        tool: sampler.tool().to_owned(),
        key: key.clone(),
        model: model.to_owned(),
        max_tokens: request.max_tokens,
        system_prompt: request.system_prompt.clone(),
        messages: request
            .messages
            .iter()
            .map(|m| (role_name(m.role).to_owned(), m.text.clone()))
            .collect(),
        saves_to: file,
    };
    let answer = tokio::task::spawn_blocking(move || approver.sample(&asked))
        .await
        .unwrap_or(ApprovalAnswer::Deny);
    match answer {
        ApprovalAnswer::Once => allowed(said("user: approved once")),
        ApprovalAnswer::Session => {
            lock(&agent.approvals.session).insert(key);
            allowed(said("user: approved for this session"))
        }
        ApprovalAnswer::Always => {
            super::approve::save_allow(agent, &key, crate::config::save_tool_policy)
        }
        _ => refused(said("user: denied")),
    }
}

/// The model's completion of `request`.
async fn ask_model(
    agent: &Agent,
    model: &SamplingModel,
    request: &SampleRequest,
) -> Result<Sampled, ToolError> {
    let store = agent.host.secret_store();
    let system = store.text(request.system_prompt.clone().unwrap_or_default());
    let history: Vec<HistoryMessage> = request
        .messages
        .iter()
        .map(|m| {
            let role = match m.role {
                SampleRole::Assistant => crate::transcript::Role::Ai,
                _ => crate::transcript::Role::User,
            };
            HistoryMessage::new(role, store.text(m.text.clone()))
        })
        .collect();
    let asked = ModelRequest {
        system: &system,
        history: &history,
        tools: &[],
    };
    let mut ignore = |_: &str| {};
    let reply = model.model.respond(asked, &mut ignore).await.map_err(|e| {
        ToolError::dependency(format!(
            "model '{}' did not answer the sampling request: {e}",
            model.name
        ))
    })?;
    if let Some(usage) = reply.usage {
        agent.add_usage(usage);
    }
    let mut sampled = Sampled::new(reply.text, model.name.clone());
    sampled.stop_reason = Some("endTurn".to_owned());
    Ok(sampled)
}

/// Appends `record` to the audit log (a failure is logged: the request was answered or
/// declined already).
fn audit_sampling(agent: &Agent, record: SamplingRecord) {
    let config = match agent.host.config(agent.profile()) {
        Ok(config) => config,
        Err(e) => return tracing::warn!("sampling not audited: {e}"),
    };
    let appended = agent
        .host
        .audit(&config)
        .and_then(|audit| audit.append(&AuditRecord::Sampling(record)));
    if let Err(e) = appended {
        tracing::warn!("sampling not audited: {e}");
    }
}

/// `user` or `assistant`.
fn role_name(role: SampleRole) -> &'static str {
    match role {
        SampleRole::Assistant => "assistant",
        _ => "user",
    }
}

/// The JSON of a sampling answer, as [`plugin_api::Context::sample`] reads it.
pub(crate) fn answer_json(sampled: &Sampled) -> Value {
    serde_json::to_value(sampled).unwrap_or(Value::Null)
}
