//! Asking for approval: the policy's decision for a call, the user asked where it says "ask"
//! (through the agent's [`Approver`]), and the decision logged.

use std::sync::Arc;

use serde_json::{Map, Value};

use crate::agent::Agent;
use crate::config::{save_tool_policy, Config, PolicyDecision};
use crate::governance::{
    allowed, refused, said, ApprovalAnswer, ApprovalRequest, Approver, DecisionSource, Verdict,
};
use crate::sync::lock;
use crate::transcript::LogKind;
use plugin_api::RiskLevel;
use plugin_api::ToolError;

impl Agent {
    /// Sets who is asked when the policy says "ask" (without one, such calls are denied).
    pub fn set_approver(&self, approver: Arc<dyn Approver>) {
        *lock(&self.approvals.approver) = Some(approver);
    }

    /// Marks the agent as serving an MCP client (`toolhost serve-mcp` does for each call's
    /// agent): its calls follow [`Config::mcp_policy`], so a tool saved as `allow` in a
    /// terminal session is still asked about, and answering "always" saves `mcp_policy`.
    pub fn serve_mcp_client(&self, yes: bool) {
        let flag = &self.approvals.for_mcp_client;
        flag.store(yes, std::sync::atomic::Ordering::SeqCst);
    }

    fn serves_mcp_client(&self) -> bool {
        let flag = &self.approvals.for_mcp_client;
        flag.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Approves the asks for `write` tools without asking (`--yes`); `exec` tools are still
    /// asked.
    pub fn approve_writes(&self, yes: bool) {
        let flag = &self.approvals.yes_to_writes;
        flag.store(yes, std::sync::atomic::Ordering::SeqCst);
    }

    /// The policy's decision for a call, asking the user where it says "ask". A denial is a
    /// repairable error (the model is told the user did not approve the call), with who
    /// denied it for the audit.
    pub(crate) async fn approve(
        &self,
        config: &Config,
        tool: &str,
        method: Option<&str>,
        risk: RiskLevel,
        args: &Map<String, Value>,
    ) -> Result<Verdict, (ToolError, DecisionSource)> {
        let (policy, source) = match self.serves_mcp_client() {
            true => config.mcp_policy(tool, risk),
            false => config.policy(tool, risk),
        };
        let decision = match policy {
            PolicyDecision::Allow => allowed(DecisionSource::Policy(source)),
            PolicyDecision::Deny => refused(DecisionSource::Policy(source)),
            // Boxed: a rare path, whose large future would be moved on every call.
            PolicyDecision::Ask => Box::pin(self.ask_user(tool, method, risk, args)).await,
        };
        self.log_decision(tool, &policy, &decision);
        if decision.allowed {
            return Ok(decision);
        }
        let error = ToolError::repairable(format!(
            "the call of tool {tool} was not approved ({}): do not retry it; tell the user or choose another way",
            decision.source
        ));
        Err((error, decision.source))
    }

    /// Logs a decision that was not a plain "allow" of the policy: who approved or denied.
    fn log_decision(&self, tool: &str, policy: &PolicyDecision, decision: &Verdict) {
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
        self.add_note(kind, heading, decision.source.to_string());
    }

    async fn ask_user(
        &self,
        tool: &str,
        method: Option<&str>,
        risk: RiskLevel,
        args: &Map<String, Value>,
    ) -> Verdict {
        if lock(&self.approvals.session).contains(tool) {
            return allowed(said("user: approved for this session"));
        }
        let yes = self
            .approvals
            .yes_to_writes
            .load(std::sync::atomic::Ordering::SeqCst);
        if yes && risk == RiskLevel::Write {
            return allowed(said("--yes (write)"));
        }
        let Some(approver) = lock(&self.approvals.approver).clone() else {
            let file = self.policy_file();
            let file = crate::layout::Escaped(&file);
            let allow = format!("[tools.{tool}] policy = \"allow\" in {file}");
            return refused(DecisionSource::Said(
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
            ));
        };
        if let Some(reason) = approver.unavailable() {
            return refused(DecisionSource::Said(reason.into()));
        }
        let pretty = serde_json::to_string_pretty(args).unwrap_or_default();
        let request = ApprovalRequest {
            agent: self.name().to_owned(),
            tool: tool.to_owned(),
            method: method.map(str::to_owned),
            risk,
            args: self.mask(pretty).into_inner(),
            saves_to: self.policy_file(),
        };
        let answer = tokio::task::spawn_blocking(move || approver.ask(&request))
            .await
            .unwrap_or(ApprovalAnswer::Deny);
        match answer {
            ApprovalAnswer::Once => allowed(said("user: approved once")),
            ApprovalAnswer::Session => {
                lock(&self.approvals.session).insert(tool.to_owned());
                allowed(said("user: approved for this session"))
            }
            ApprovalAnswer::Always => self.approve_always(tool),
            ApprovalAnswer::Deny => refused(said("user: denied")),
        }
    }

    /// The profile's policy file (the global one for the default profile).
    pub(crate) fn policy_file(&self) -> std::path::PathBuf {
        let layout = self.host.layout();
        match self.profile() {
            "default" => layout.config_file(),
            profile => layout.profile_config_file(profile),
        }
    }

    /// Saves "allow" for the tool in the profile's policy file (as its `mcp_policy` for an
    /// MCP client's agent).
    fn approve_always(&self, tool: &str) -> Verdict {
        let save = match self.serves_mcp_client() {
            true => crate::config::save_tool_mcp_policy,
            false => save_tool_policy,
        };
        self.save_allow(tool, save)
    }

    /// Saves "allow" for `key` in the profile's policy file with `save`: the verdict allows
    /// either way and says where the answer was saved, or why it was not.
    pub(crate) fn save_allow(
        &self,
        key: &str,
        save: fn(&std::path::Path, &str, PolicyDecision) -> Result<(), crate::config::ConfigError>,
    ) -> Verdict {
        let file = self.policy_file();
        match save(&file, key, PolicyDecision::Allow) {
            Ok(()) => {
                self.host.config_changed();
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
}
