//! One tool call, as a value: [`Call`] owns what was asked, the tool it resolved to and the
//! rules that govern it, its audit trail and the context its plugins see; each step of its
//! fixed lifecycle (the order documented on [`plugin_api::Tool`](plugin_api::Tool#lifecycle))
//! is one of its methods, in the file of its concern:
//!
//! - `lifecycle.rs`: from a request to its result, the steps in order (resolution in
//!   `resolve.rs`);
//! - `govern.rs`: admission, validation, approval, the attempts under the deadline with
//!   retries (over a library or MCP tool alike, `governed/`);
//! - `approve.rs`: the policy's decision, the user asked where it says "ask";
//! - `audit.rs`: the call's records in the audit log;
//! - `long_output.rs`: a long answer cut to what the model may read;
//! - `context.rs`: the [`CallContext`] a plugin's callbacks reach, with the host's default
//!   hooks (`hooks.rs`, `content.rs`), the extension points within the call
//!   (`extension_points.rs`, read back through `read_back.rs`) and what plugins ask
//!   (`ask.rs`, `form.rs`, `sample.rs`);
//! - `parallel.rs`: the built-in `parallel` tool.

pub(crate) mod approve;
pub(crate) mod ask;
pub(crate) mod audit;
pub(crate) mod content;
pub(crate) mod context;
pub(crate) mod extension_points;
pub(crate) mod form;
pub(crate) mod govern;
pub(crate) mod governed;
pub(crate) mod hooks;
pub(crate) mod lifecycle;
pub(crate) mod long_output;
pub(crate) mod parallel;
pub(crate) mod read_back;
pub(crate) mod resolve;
pub(crate) mod sample;
pub(crate) mod shown;

use std::sync::Arc;

use serde_json::{Map, Value};

pub use ask::{Answering, Asker};
pub use hooks::{nice_key, sanitize};
pub use long_output::DEFAULT_MAX_OUTPUT;
pub use parallel::{MAX_CALLS, MAX_PARALLEL};

use crate::agent::Agent;
use crate::governance::Trail;
use crate::layout::ToolName;
use context::CallContext;
use resolve::Target;

/// One tool call from the moment its request resolved to a tool until its result: what it
/// is (the request, the tool and its rules, the context its plugins see) and what its steps
/// made of it so far (the arguments as the hooks and extensions left them, the audit trail of
/// its governed steps).
///
/// [`Agent::call_tool`] makes one ([`lifecycle::call`]) and runs its steps
/// ([`Call::run`]): hooks, extension points and intervention checks around the governed
/// execution ([`Call::execute_governed`]), which asks for approval ([`Call::approve`]) and
/// writes the audit record ([`Call::audit_call`]). A call that ends before it has a `Call`
/// (its request is not a valid name, its arguments not an object, its tool cannot be
/// resolved) is audited as an early end ([`audit::early_end`]).
pub(crate) struct Call {
    /// What the plugins of the call see: the agent, the tool's name, the log item, the
    /// cancellation and the secrets it may receive.
    pub(crate) context: Arc<CallContext>,
    /// The tool as asked: `name` or `name:method`.
    pub(crate) request: ToolName,
    /// The tool it resolved to, and the rules that govern it.
    pub(crate) target: Target,
    /// The arguments, as the steps so far left them.
    pub(crate) args: Map<String, Value>,
    /// What the governed steps did, for the audit record (started when they start).
    pub(crate) trail: Trail,
}

impl Call {
    /// The agent making the call.
    pub(crate) fn agent(&self) -> &Arc<Agent> {
        &self.context.agent
    }
}
