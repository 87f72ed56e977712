//! Governance of every tool call (Echo Agent's registry, over the native lifecycle): argument
//! validation against the tool's JSON Schema, retries with backoff, a circuit breaker per tool
//! build, approvals by risk level, readiness, the allowed tools, and the audit trail. These
//! are the rules and their state; the agent applies them to each call, in the order of its
//! governed steps (`agent/call/govern.rs`), and plugin code runs on the call threads of
//! `exec/`, so deadlines and interventions hold for any plugin.
//!
//! - `schema.rs`: the compiled schema, defaults and the validation error;
//! - `rules.rs`: one call's deadline, retries, backoff and breaker settings;
//! - `breaker.rs`: the circuit breaker;
//! - `approval.rs`: approvals by risk level, asked of an [`Approver`];
//! - `audit_trail.rs`: what a call did, and its records in the audit log.

mod approval;
mod audit_trail;
mod breaker;
mod rules;
mod schema;

pub use crate::exec::call_threads::overdue;
pub(crate) use approval::{allowed, refused, said, Approvals, DecisionSource, Verdict};
pub use approval::{
    ApprovalAnswer, ApprovalRequest, Approver, FormAnswer, FormRequest, SampleApproval,
};
pub(crate) use audit_trail::{
    append_breaker, append_call, append_early, append_start, Caller, EarlyCall, EndedCall, Trail,
};
pub use breaker::BreakerStatus;

pub(crate) use breaker::{clock, is_infrastructure, Breaker, Transition};
pub(crate) use rules::{jitter, retryable, timed_out, CallRules};
pub(crate) use schema::{check_output, ArgumentSchema};
