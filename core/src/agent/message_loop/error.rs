//! Why a monologue ended without a final answer.

use crate::agent::intervention::Stopped;
use crate::model::ModelError;
use crate::secrets::MaskedError;

/// Why a monologue ended without a final answer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoopError {
    /// Too many unusable replies in a row.
    #[error(
        "the model gave {0} unusable replies in a row (no tool request it could read, or the same reply again); stopping"
    )]
    Unusable(usize),
    /// No final answer within the iteration limit.
    #[error(
        "no final answer after {0} iterations; stopping (raise the limit with --max-iterations)"
    )]
    IterationLimit(usize),
    /// The model gave no reply.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// Too many tool calls in a row failed; the last one's error.
    #[error("{count} tool calls failed in a row; the last: tool '{tool}' failed ({} error): {}; stopping (raise the limit with --max-failed-calls)", .error.kind(), .error.message())]
    FailedCalls {
        /// How many.
        count: usize,
        /// The last request (`name[:method]`).
        tool: String,
        /// Its error, masked.
        error: MaskedError,
    },
    /// A tool's call failed for a fault of the host (its required audit record could not be
    /// written).
    #[error("tool '{tool}' failed ({} error): {}", .error.kind(), .error.message())]
    Tool {
        /// The request (`name[:method]`).
        tool: String,
        /// The error, masked.
        error: MaskedError,
    },
    /// An extension failed.
    #[error("extension point {point}: {}", .error.message())]
    Extension {
        /// The point.
        point: &'static str,
        /// The error, masked.
        error: MaskedError,
    },
    /// The user stopped the agent.
    #[error("stopped by the user")]
    Stopped,
    /// The session's record or the audit log could not be written (a full disk, a file
    /// system made read-only): the loop stops rather than run on with holes in its records.
    #[error("{0}; stopping (free some space or make it writable, then start again)")]
    Record(String),
}

impl From<Stopped> for LoopError {
    fn from(_: Stopped) -> Self {
        Self::Stopped
    }
}
