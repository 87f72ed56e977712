//! Governance of every tool call (Echo Agent's registry, over the native lifecycle): argument
//! validation against the tool's JSON Schema, deadlines that hold for any plugin, retries with
//! backoff, a circuit breaker per tool build, approvals by risk level, readiness, and the
//! allowed tools.
//!
//! - `schema.rs`: the compiled schema, defaults and the validation error;
//! - plugin code runs on the call threads of `exec/`, so deadlines and interventions hold;
//! - `breaker.rs`: the circuit breaker;
//! - `approval.rs`: approvals by risk level, asked of an [`Approver`];
//! - `governed.rs`: what a call targets (a library tool or an MCP tool);
//! - `steps.rs`: the governed steps of a call, in order.

mod approval;
mod audit_trail;
mod breaker;
mod governed;
mod schema;
mod steps;

pub use crate::exec::call_threads::overdue;
pub(crate) use approval::Approvals;
pub use approval::{ApprovalAnswer, ApprovalRequest, Approver};
pub(crate) use audit_trail::sha256_hex;
pub use breaker::BreakerState;

pub(crate) use breaker::{clock, is_infrastructure, Breaker, Transition};
pub(crate) use governed::Governed;
pub(crate) use schema::ArgumentSchema;
pub(crate) use steps::{timed_out, CallRules};
