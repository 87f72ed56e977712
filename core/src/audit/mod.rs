//! The tamper-evident audit log: one line per tool call, approval decision and
//! circuit-breaker change, in `usr/audit/audit.jsonl`
//! ([`Layout::audit_dir`](crate::Layout::audit_dir)), each line chained to the one before by
//! SHA-256.
//!
//! ```text
//! {"seq":1,"time_ms":1764531200123,"prev":"000…000","hash":"9f2c…","type":"call","execution_id":"…",…}
//! {"seq":2,"time_ms":1764531200456,"prev":"9f2c…","hash":"41ab…","type":"approval",…}
//! ```
//!
//! The chain rule: `seq` counts from 1; `prev` is the `hash` of the line before (64 zeros for
//! the first); `hash` is the hex SHA-256 of the line as written without its `"hash":"…",`
//! part (and without the newline). So [`verify`] finds the first line that was edited (any
//! byte, the hash included), deleted, moved, duplicated or cut. Records cut from the end
//! leave a shorter valid chain: keep the last `seq` and hash ([`VerifyReport::last`])
//! elsewhere to detect that. The chain has no key: it shows accidents and edits by hand or
//! by a tool unaware of it, not a forger who rewrites every hash after the edit.
//!
//! [`Audit`] appends from any number of threads and host processes at once: each append
//! holds the file's exclusive lock while it reads where the chain stands and writes one
//! line in one `write` call. The caller masks arguments and metadata before building a
//! record: the log writes what it is given.

mod chain;
mod error;
mod lines;
mod record;
mod tail;
mod verify;
mod writer;

pub use chain::GENESIS_PREV;
pub use error::{AuditError, AuditErrorKind};
pub use lines::MAX_LINE_BYTES;
pub use record::{
    ApprovalDecision, ApprovalRecord, Attempt, AuditRecord, BreakerRecord, BreakerState,
    CallRecord, Decision,
};
pub use tail::{tail, AuditEntry, TailLine};
pub use verify::{verify, Broken, BrokenKind, VerifyReport};
pub(crate) use writer::now_ms;
pub use writer::{Audit, AuditOptions};

/// The log's file name in its folder.
pub const FILE_NAME: &str = "audit.jsonl";

#[cfg(test)]
mod tests;
