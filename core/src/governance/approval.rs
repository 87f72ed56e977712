//! Approvals by risk level: the policy says allow, ask or deny; "ask" goes to the agent's
//! [`Approver`] (a terminal prompt in the CLI), and with none, the call is denied.

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;
use std::sync::{Arc, Mutex};

use crate::config::Source;
use plugin_api::RiskLevel;

/// A call waiting for the user's approval. The arguments are masked.
#[derive(Debug, Clone)]
pub struct ApprovalRequest {
    /// The agent's name.
    pub agent: String,
    /// The tool (`name`, without the method).
    pub tool: String,
    /// The method of a `name:method` call.
    pub method: Option<String>,
    /// The tool's risk level.
    pub risk: RiskLevel,
    /// The arguments, with every secret masked, as pretty JSON.
    pub args: String,
    /// The file where [`ApprovalAnswer::Always`] saves `policy = "allow"` for the tool (the
    /// profile's `toolhost.toml`, or `usr/toolhost.toml` for the default profile).
    pub saves_to: std::path::PathBuf,
}

/// The user's answer to an [`ApprovalRequest`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalAnswer {
    /// This call only.
    Once,
    /// Every call of this tool by this agent, until it ends.
    Session,
    /// Every call of this tool, from now on: saved to the policy file.
    Always,
    /// Not this call.
    Deny,
}

/// Asks the user about a call. It may block (a terminal prompt); the host runs it off the
/// async threads.
pub trait Approver: Send + Sync {
    /// The user's answer.
    fn ask(&self, request: &ApprovalRequest) -> ApprovalAnswer;

    /// The user's answer to a form an MCP server (`elicitation/create`) or a plugin
    /// (`Context::elicit`) asks them to fill in during a call. The default declines:
    /// implement it where a person can answer.
    fn fill(&self, request: &FormRequest) -> FormAnswer {
        let _ = request;
        FormAnswer::Decline
    }

    /// The user's answer to a sampling request (a completion of the host's model asked by an
    /// MCP server or a plugin). The default asks as for a call of the `exec` tool named
    /// [`SampleApproval::key`], the conversation as its arguments.
    fn sample(&self, request: &SampleApproval) -> ApprovalAnswer {
        let args = serde_json::json!({
            "model": request.model,
            "max_tokens": request.max_tokens,
            "system_prompt": request.system_prompt,
            "messages": request.messages.iter().map(|(role, text)| {
                serde_json::json!({"role": role, "text": text})
            }).collect::<Vec<_>>(),
        });
        self.ask(&ApprovalRequest {
            agent: request.agent.clone(),
            tool: request.key.clone(),
            method: None,
            risk: RiskLevel::Exec,
            args: serde_json::to_string_pretty(&args).unwrap_or_default(),
            saves_to: request.saves_to.clone(),
        })
    }

    /// Why nobody can be asked now (for example, a client that cannot show a prompt): the
    /// call is denied with this reason, and [`ask`](Self::ask) is not called. `None` (the
    /// default): ask.
    fn unavailable(&self) -> Option<String> {
        None
    }
}

/// A form an MCP server asks the user to fill in during a call of one of its tools, or a
/// plugin tool during its call.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct FormRequest {
    /// The agent whose call it is.
    pub agent: String,
    /// The tool being called (`<server>.<tool>`).
    pub tool: String,
    /// The MCP server that asks; empty when the tool itself asks (`Context::elicit`).
    pub server: String,
    /// What it asks, in its words (a peer's text: show it escaped).
    pub message: String,
    /// The fields: its `requestedSchema`, an object schema whose properties are strings,
    /// numbers, integers, booleans or enums, each perhaps with a `default`.
    pub schema: serde_json::Value,
}

/// A completion of the host's model that an MCP server or a plugin asks for (sampling),
/// waiting for the user's approval. The texts are masked.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SampleApproval {
    /// The agent whose call it happens during.
    pub agent: String,
    /// Who asks: `MCP server 'time'` or `tool 'summarise'` (a peer's name: show it escaped).
    pub requester: String,
    /// The tool being called.
    pub tool: String,
    /// The name its policy is set under: `sampling.<server or tool>` (`[tools."sampling.X"]`).
    pub key: String,
    /// The model that would answer.
    pub model: String,
    /// The most tokens the answer may have.
    pub max_tokens: u32,
    /// The system prompt asked for, if any (a peer's text).
    pub system_prompt: Option<String>,
    /// The conversation: each message's role (`user`, `assistant`) and text (a peer's text).
    pub messages: Vec<(String, String)>,
    /// The file where [`ApprovalAnswer::Always`] saves `policy = "allow"` for [`key`](Self::key).
    pub saves_to: std::path::PathBuf,
}

/// The user's answer to a [`FormRequest`].
#[derive(Debug, Clone, PartialEq)]
pub enum FormAnswer {
    /// Sent with these values (fields left out get their defaults).
    Accept(serde_json::Map<String, serde_json::Value>),
    /// Refused.
    Decline,
    /// Dismissed without a choice.
    Cancel,
}

/// An agent's approval settings and what its user approved for the session.
#[derive(Default)]
pub(crate) struct Approvals {
    pub(crate) approver: Mutex<Option<Arc<dyn Approver>>>,
    /// `--yes`: asks for `write` tools are approved (never `exec`).
    pub(crate) yes_to_writes: std::sync::atomic::AtomicBool,
    /// The tools approved for this session.
    pub(crate) session: Mutex<HashSet<String>>,
    /// The agent serves an MCP client: `[tools.X] mcp_policy` decides, not a saved
    /// `policy = "allow"` ([`Config::mcp_policy`](crate::config::Config::mcp_policy)).
    pub(crate) for_mcp_client: std::sync::atomic::AtomicBool,
}

/// The verdict on a call's approval (allowed or not) and where it came from, for the log and
/// the audit (which records it as an [`audit::Decision`](crate::audit::Decision)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Verdict {
    pub(crate) allowed: bool,
    pub(crate) source: DecisionSource,
}

/// Where a decision came from; formatted only when the log or the audit needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DecisionSource {
    /// The policy, set where [`Source`] says (`policy: default: write allows`).
    Policy(Source),
    /// The user, `--yes`, or why nobody could be asked.
    Said(Cow<'static, str>),
}

impl DecisionSource {
    /// Whether the user decided (an approval record of its own in the audit).
    pub(crate) fn is_user(&self) -> bool {
        matches!(self, Self::Said(said) if said.starts_with("user"))
    }
}

impl fmt::Display for DecisionSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Policy(source) => write!(f, "policy: {source}"),
            Self::Said(said) => f.write_str(said),
        }
    }
}

pub(crate) fn said(text: &'static str) -> DecisionSource {
    DecisionSource::Said(Cow::Borrowed(text))
}

pub(crate) fn allowed(source: DecisionSource) -> Verdict {
    Verdict {
        allowed: true,
        source,
    }
}

pub(crate) fn refused(source: DecisionSource) -> Verdict {
    Verdict {
        allowed: false,
        source,
    }
}
