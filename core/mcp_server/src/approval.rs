//! Approvals asked of the MCP client's user with an elicitation: approve once, for this
//! session, always, or deny. A client of 2025-11-25 or earlier is sent `elicitation/create`
//! during the call; a client of 2026-07-28 gets the same form in an `InputRequiredResult`
//! and answers it in its retry of the call ([`crate::round_trip`]), where there is no session:
//! once, always, or deny.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{ElicitRequestParams, ElicitationAction, ElicitationSchema};
use rmcp::service::{ElicitationMode, Peer, RoleServer};
use serde_json::json;
use tokio::runtime::Handle;

use crate::lock;
use crate::round_trip::{self, RoundTrip, APPROVAL};
use toolhost::governance::{ApprovalAnswer, ApprovalRequest, Approver};

/// How long the user has to answer; then the call is denied.
const ASK_TIMEOUT: Duration = Duration::from_secs(300);

/// The answers offered, as the client shows them.
const ANSWERS: [&str; 4] = ["once", "session", "always", "deny"];

/// Asks an MCP session's client (elicitation, form mode) about calls the policy asks for.
/// Calls approved "for this session" are remembered for the MCP session (each call runs on an
/// agent of its own). A client that did not declare elicitation is not asked: the call is
/// denied, saying why.
pub(crate) struct ElicitationApprover {
    peer: Peer<RoleServer>,
    runtime: Handle,
    session: Arc<Mutex<HashSet<String>>>,
    /// Why the transport cannot carry the question, if it cannot.
    unavailable: Option<&'static str>,
}

impl ElicitationApprover {
    /// An approver for `peer`'s session; `session` holds the tools it approved for the session;
    /// `unavailable` says why the transport cannot carry the question, if it cannot.
    pub(crate) fn new(
        peer: Peer<RoleServer>,
        session: Arc<Mutex<HashSet<String>>>,
        unavailable: Option<&'static str>,
    ) -> Self {
        Self {
            peer,
            runtime: Handle::current(),
            session,
            unavailable,
        }
    }

    fn remembered(&self, tool: &str) -> bool {
        lock(&self.session).contains(tool)
    }
}

impl Approver for ElicitationApprover {
    fn ask(&self, request: &ApprovalRequest) -> ApprovalAnswer {
        if self.remembered(&request.tool) {
            return ApprovalAnswer::Once;
        }
        let message = question(request);
        let Ok(requested_schema) = ElicitationSchema::from_json_schema(as_object(schema(&ANSWERS)))
        else {
            return ApprovalAnswer::Deny;
        };
        let params = ElicitRequestParams::FormElicitationParams {
            meta: None,
            message,
            requested_schema,
        };
        let asking = self
            .peer
            .create_elicitation_with_timeout(params, Some(ASK_TIMEOUT));
        let result = match self.runtime.block_on(asking) {
            Ok(result) => result,
            Err(e) => {
                tracing::warn!("asking the MCP client for approval failed: {e}");
                return ApprovalAnswer::Deny;
            }
        };
        if result.action != ElicitationAction::Accept {
            return ApprovalAnswer::Deny;
        }
        let decision = result
            .content
            .as_ref()
            .and_then(|c| c.get("decision")?.as_str().map(str::to_owned));
        match decision.as_deref() {
            Some("once") => ApprovalAnswer::Once,
            Some("session") => {
                let mut session = lock(&self.session);
                session.insert(request.tool.clone());
                ApprovalAnswer::Session
            }
            Some("always") => ApprovalAnswer::Always,
            _ => ApprovalAnswer::Deny,
        }
    }

    fn unavailable(&self) -> Option<String> {
        if let Some(reason) = self.unavailable {
            return Some(format!("policy asks, and {reason}"));
        }
        let modes = self.peer.supported_elicitation_modes();
        (!modes.contains(&ElicitationMode::Form)).then(|| {
            "policy asks, and the MCP client cannot be asked: it does not support elicitation"
                .to_owned()
        })
    }
}

/// The question, as the client shows it.
fn question(request: &ApprovalRequest) -> String {
    let method = request
        .method
        .as_deref()
        .map_or(String::new(), |m| format!(":{m}"));
    format!(
        "Agent {} wants to call tool '{}{method}' (risk {}) with:\n{}\nApprove?",
        request.agent,
        request.tool,
        request.risk.as_str(),
        request.args
    )
}

/// The form: one field, the decision among `answers`.
fn schema(answers: &[&str]) -> serde_json::Value {
    json!({
        "type": "object",
        "properties": {"decision": {
            "type": "string",
            "title": "Decision",
            "description": "once: this call; session: every call of this tool in this session; always: saved to the policy; deny: not this call",
            "enum": answers,
        }},
        "required": ["decision"],
    })
}

/// The answers offered to a client of 2026-07-28 (no session to remember one in).
const STATELESS_ANSWERS: [&str; 3] = ["once", "always", "deny"];

/// Asks a 2026-07-28 client through the call's round trip: with no answer yet, the form is
/// added to the round's input requests and the call is denied for this round (its result is
/// replaced by the `InputRequiredResult`); with the answer, the call is decided by it.
pub(crate) struct RoundTripApprover {
    round: std::sync::Arc<RoundTrip>,
}

impl RoundTripApprover {
    pub(crate) fn new(round: std::sync::Arc<RoundTrip>) -> Self {
        Self { round }
    }
}

/// The elicitation request of an approval, for an `InputRequiredResult`.
pub(crate) fn approval_request(
    request: &ApprovalRequest,
) -> Result<rmcp::model::InputRequest, String> {
    let params = json!({
        "mode": "form",
        "message": question(request),
        "requestedSchema": schema(&STATELESS_ANSWERS),
    });
    round_trip::input_request("elicitation/create", params)
}

impl Approver for RoundTripApprover {
    fn ask(&self, request: &ApprovalRequest) -> ApprovalAnswer {
        let Some(answer) = self.round.answer(APPROVAL) else {
            match approval_request(request) {
                Ok(asked) => self.round.ask(APPROVAL.to_owned(), asked),
                Err(e) => tracing::warn!("the approval form: {e}"),
            }
            return ApprovalAnswer::Deny;
        };
        if answer["action"] != "accept" {
            return ApprovalAnswer::Deny;
        }
        match answer["content"]["decision"].as_str() {
            Some("once") => ApprovalAnswer::Once,
            Some("always") => ApprovalAnswer::Always,
            _ => ApprovalAnswer::Deny,
        }
    }

    fn unavailable(&self) -> Option<String> {
        (!self.round.elicits()).then(|| {
            "policy asks, and the MCP client cannot be asked: it does not support elicitation"
                .to_owned()
        })
    }
}

fn as_object(value: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
    match value {
        serde_json::Value::Object(map) => map,
        _ => serde_json::Map::new(),
    }
}

/// The approval a 2026-07-28 client's call needs, asked before it runs when its policy asks
/// (`mcp_policy`, and `--yes` for write tools): the first round asks and runs nothing, so that
/// no round is audited as a refused call; the retry that brings the answer runs it, asking
/// the [`RoundTripApprover`]. Arguments are checked after the answer, when the call runs.
pub(crate) fn asked_before_running(
    host: &toolhost::Host,
    profile: &str,
    request: &rmcp::model::CallToolRequestParams,
    yes_to_writes: bool,
) -> Option<ApprovalRequest> {
    let name = toolhost::ToolName::parse(&request.name).ok()?;
    let resolution = host.resolve(profile, name.name());
    let risk = resolution.found.as_ref()?.handle.info().risk_level;
    let config = host.config(profile).ok()?;
    let (decision, _) = config.mcp_policy(name.name(), risk);
    let yes = yes_to_writes && risk == plugin_api::RiskLevel::Write;
    if decision != toolhost::config::PolicyDecision::Ask || yes {
        return None;
    }
    let args = request.arguments.clone().unwrap_or_default();
    let args = serde_json::to_string_pretty(&args).unwrap_or_default();
    Some(ApprovalRequest {
        agent: crate::AGENT_NAME.to_owned(),
        tool: name.name().to_owned(),
        method: name.method().map(str::to_owned),
        risk,
        args: host.secrets().mask_owned(args).into_inner(),
        saves_to: std::path::PathBuf::new(),
    })
}
