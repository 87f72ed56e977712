//! Asking for approval: the policy's decision for a call, the user asked where it says "ask"
//! (through the agent's [`Approver`](crate::governance::Approver)), and the decision logged.

use crate::agent::call::Call;
use crate::agent::Agent;
use crate::config::{save_tool_policy, Config, PolicyDecision};
use crate::governance::{
    allowed, refused, said, ApprovalAnswer, ApprovalRequest, DecisionSource, Verdict,
};
use crate::sync::lock;
use crate::transcript::LogKind;
use plugin_api::RiskLevel;
use plugin_api::ToolError;

impl Call {
    /// The policy's decision for the call of `tool`, asking the user where it says "ask". A
    /// denial is a repairable error (the model is told the user did not approve the call),
    /// with who denied it for the audit.
    pub(crate) async fn approve(
        &self,
        config: &Config,
        tool: &str,
        risk: RiskLevel,
    ) -> Result<Verdict, (ToolError, DecisionSource)> {
        let agent = self.agent();
        let (policy, source) = match serves_mcp_client(agent) {
            true => config.mcp_policy(tool, risk),
            false => config.policy(tool, risk),
        };
        let decision = match policy {
            PolicyDecision::Allow => allowed(DecisionSource::Policy(source)),
            PolicyDecision::Deny => refused(DecisionSource::Policy(source)),
            // Boxed: a rare path, whose large future would be moved on every call.
            PolicyDecision::Ask => Box::pin(self.ask_user(tool, risk)).await,
        };
        log_decision(agent, tool, &policy, &decision);
        if decision.allowed {
            return Ok(decision);
        }
        let error = ToolError::repairable(format!(
            "the call of tool {tool} was not approved ({}): do not retry it; tell the user or choose another way",
            decision.source
        ));
        Err((error, decision.source))
    }

    /// Asks the agent's approver about the call of `tool`, unless the session's approvals or
    /// `--yes` answer already.
    async fn ask_user(&self, tool: &str, risk: RiskLevel) -> Verdict {
        let agent = self.agent();
        if lock(&agent.approvals.session).contains(tool) {
            return allowed(said("user: approved for this session"));
        }
        let yes = agent
            .approvals
            .yes_to_writes
            .load(std::sync::atomic::Ordering::SeqCst);
        if yes && risk == RiskLevel::Write {
            return allowed(said("--yes (write)"));
        }
        let Some(approver) = lock(&agent.approvals.approver).clone() else {
            return refused(no_approver(agent, tool, yes, risk));
        };
        if let Some(reason) = approver.unavailable() {
            return refused(DecisionSource::Said(reason.into()));
        }
        let pretty = serde_json::to_string_pretty(&self.args).unwrap_or_default();
        let request = ApprovalRequest {
            agent: agent.name().to_owned(),
            tool: tool.to_owned(),
            method: self.request.method().map(str::to_owned),
            risk,
            args: agent.mask(pretty).into_inner(),
            saves_to: policy_file(agent),
        };
        let answer = tokio::task::spawn_blocking(move || approver.ask(&request))
            .await
            .unwrap_or(ApprovalAnswer::Deny);
        match answer {
            ApprovalAnswer::Once => allowed(said("user: approved once")),
            ApprovalAnswer::Session => {
                lock(&agent.approvals.session).insert(tool.to_owned());
                allowed(said("user: approved for this session"))
            }
            ApprovalAnswer::Always => approve_always(agent, tool),
            ApprovalAnswer::Deny => refused(said("user: denied")),
        }
    }
}

/// Whether the agent serves an MCP client ([`Agent::serve_mcp_client`]).
fn serves_mcp_client(agent: &Agent) -> bool {
    let flag = &agent.approvals.for_mcp_client;
    flag.load(std::sync::atomic::Ordering::SeqCst)
}

/// Why a call the policy asks about is refused when nobody can be asked, and what to do.
fn no_approver(agent: &Agent, tool: &str, yes: bool, risk: RiskLevel) -> DecisionSource {
    let file = policy_file(agent);
    let file = crate::layout::Escaped(&file);
    let allow = format!("[tools.{tool}] policy = \"allow\" in {file}");
    DecisionSource::Said(
        match (yes, risk) {
            (true, RiskLevel::Exec) => format!(
                "policy asks, and --yes never approves an exec tool: allow it with \
                 {allow}, or run on a terminal to be asked"
            ),
            _ => format!(
                "policy asks, and there is no terminal to ask on: run on a terminal to \
                 be asked, pass --yes (write tools only), or allow it with {allow}"
            ),
        }
        .into(),
    )
}

/// Logs a decision that was not a plain "allow" of the policy: who approved or denied.
fn log_decision(agent: &Agent, tool: &str, policy: &PolicyDecision, decision: &Verdict) {
    if decision.allowed && *policy == PolicyDecision::Allow {
        return;
    }
    let verdict = if decision.allowed {
        "approved"
    } else {
        "denied"
    };
    tracing::info!("tool {tool}: call {verdict} ({})", decision.source);
    let kind = if decision.allowed {
        LogKind::Tool
    } else {
        LogKind::Warning
    };
    let heading = format!("Call of tool '{tool}' {verdict}");
    agent.add_note(kind, heading, decision.source.to_string());
}

/// The profile's policy file (the global one for the default profile).
pub(crate) fn policy_file(agent: &Agent) -> std::path::PathBuf {
    let layout = agent.host.layout();
    match agent.profile() {
        "default" => layout.config_file(),
        profile => layout.profile_config_file(profile),
    }
}

/// Saves "allow" for the tool in the profile's policy file (as its `mcp_policy` for an
/// MCP client's agent).
fn approve_always(agent: &Agent, tool: &str) -> Verdict {
    let save = match serves_mcp_client(agent) {
        true => crate::config::save_tool_mcp_policy,
        false => save_tool_policy,
    };
    save_allow(agent, tool, save)
}

/// Saves "allow" for `key` in the profile's policy file with `save`: the verdict allows
/// either way and says where the answer was saved, or why it was not.
pub(crate) fn save_allow(
    agent: &Agent,
    key: &str,
    save: fn(&std::path::Path, &str, PolicyDecision) -> Result<(), crate::config::ConfigError>,
) -> Verdict {
    let file = policy_file(agent);
    match save(&file, key, PolicyDecision::Allow) {
        Ok(()) => {
            agent.host.config_changed();
            allowed(DecisionSource::Said(
                format!(
                    "user: approved always (saved to {})",
                    crate::layout::Escaped(&file)
                )
                .into(),
            ))
        }
        Err(e) => {
            tracing::warn!("{e}");
            allowed(DecisionSource::Said(
                format!("user: approved always (not saved: {e})").into(),
            ))
        }
    }
}
