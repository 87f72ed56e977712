//! Governance of every tool call (Echo Agent's registry, over the native lifecycle): argument
//! validation against the tool's JSON Schema, deadlines that hold for any plugin, retries with
//! backoff, a circuit breaker per tool build, approvals by risk level, readiness, and the
//! allowed tools.
//!
//! - `schema.rs`: the compiled schema, defaults and the validation error;
//! - `call_threads.rs`: plugin code on call threads, so deadlines and interventions hold;
//! - `breaker.rs`, `backoff.rs`: the breaker and the retry delays.

mod backoff;
mod breaker;
pub(crate) mod call_threads;
mod schema;
mod steps;

pub use backoff::Backoff;
pub use breaker::{BreakerSettings, BreakerState};
pub use call_threads::overdue;

pub(crate) use breaker::{clock, is_infrastructure, Breaker, Transition};
pub(crate) use schema::ArgumentSchema;
pub(crate) use steps::CallRules;
