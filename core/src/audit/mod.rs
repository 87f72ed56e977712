//! The tamper-evident audit log: one line per tool call (a start before its tool runs, the
//! call's record when it ends), approval decision, circuit-breaker change, sampling request
//! and change (or approval) of a pinned MCP tool definition, in
//! `usr/audit/audit.jsonl` ([`Layout::audit_dir`](crate::Layout::audit_dir)), each line
//! chained to the one before by SHA-256.
//!
//! ```text
//! {"seq":1,"time_ms":1764531200123,"prev":"000…000","hash":"9f2c…","type":"start","execution_id":"…",…}
//! {"seq":2,"time_ms":1764531200456,"prev":"9f2c…","hash":"41ab…","type":"call","execution_id":"…",…}
//! ```
//!
//! The chain rule: `seq` counts from 1; `prev` is the `hash` of the line before (64 zeros for
//! the first); `hash` is the hex SHA-256 of the line as written without its `"hash":"…",`
//! part (and its `"mac":"…",` part, and the newline). So [`verify()`] finds the first line that
//! was edited (any byte, the hash included), deleted, moved, duplicated or cut. What the chain
//! alone cannot show is covered by the rest of the format, version 2 ([`FORMAT`]):
//!
//! - **The head** (`head.json`, [`Head`]): the last record's `seq` and hash, rewritten in
//!   place after each append (`head.rs`), so records cut from the end are detected; `verify` prints it
//!   for keeping elsewhere, and checks a kept copy ([`VerifyOptions::head`]).
//! - **A key** ([`AuditKey`], optional): an HMAC-SHA256 of each record's hash and of the head,
//!   so a rewrite that recomputes every hash is detected by whoever holds the key.
//! - **Values stored apart** (`blobs/<sha256>.json`): a record over [`MAX_INLINE_BYTES`] keeps
//!   its largest fields in files named by their hash, so no record makes a line too long to
//!   read.
//! - **Segments** (`audit.<n>.jsonl`): a damaged last line (a crash mid-write) is kept where it
//!   is, under a new name, and a new `audit.jsonl` continues the chain ([`SegmentRecord`]).
//! - **Start records** ([`StartRecord`]): a call that kills its process stays visible as
//!   started and never finished.
//!
//! Logs of format 1 (no head, no MACs) verify as before once a record is appended by this
//! version, which writes the head; before that, `verify` reports the missing head.
//!
//! [`Audit`] appends from any number of threads and host processes at once: each append
//! holds the file's exclusive lock while it reads where the chain stands and writes one
//! line in one `write` call. The caller masks arguments and metadata before building a
//! record: the log writes what it is given. Every read goes through the bounded reader of
//! [`crate::layout`]: a FIFO or a device in the log's place is refused, never waited on.

mod apart;
mod chain;
mod error;
mod head;
mod key;
mod lines;
mod record;
mod report;
mod segment;
mod tail;
mod unfinished;
mod verify;
mod writer;

/// Releases the lock this process holds on `file` (one lock, exclusive or shared: the audit
/// log never takes both on one handle).
#[cfg(not(windows))]
fn unlock(file: &std::fs::File) -> std::io::Result<()> {
    file.unlock()
}

/// Releases the lock this process holds on `file` (one lock, exclusive or shared: the audit
/// log never takes both on one handle) with one `UnlockFile`. std's `File::unlock` calls it a
/// second time, for a handle that holds both, and accepts `ERROR_NOT_LOCKED` as Windows answers;
/// Wine 8 answers `ERROR_LOCK_VIOLATION`, which std reports as a failure to unlock.
#[cfg(windows)]
fn unlock(file: &std::fs::File) -> std::io::Result<()> {
    use std::os::windows::io::AsRawHandle;
    #[link(name = "kernel32")]
    unsafe extern "system" {
        fn UnlockFile(
            file: *mut std::ffi::c_void,
            offset_low: u32,
            offset_high: u32,
            bytes_low: u32,
            bytes_high: u32,
        ) -> i32;
    }
    // SAFETY: an open file's handle, and the range std's `lock` and `lock_shared` lock.
    match unsafe { UnlockFile(file.as_raw_handle(), 0, 0, u32::MAX, u32::MAX) } {
        0 => Err(std::io::Error::last_os_error()),
        _ => Ok(()),
    }
}

pub use apart::{BLOBS_DIR, MAX_INLINE_BYTES};
pub use chain::GENESIS_PREV;
pub use error::{AuditError, AuditErrorKind};
pub use head::{Head, FORMAT, HEAD_FILE};
pub use key::{AuditKey, MIN_KEY_BYTES};
pub use lines::MAX_LINE_BYTES;
pub use record::{
    ApprovalDecision, ApprovalRecord, Attempt, AuditRecord, BreakerRecord, BreakerState,
    CallRecord, CutRecord, Decision, DefinitionEvent, DefinitionRecord, SamplingRecord,
    SegmentRecord, StartRecord, UnfinishedRecord,
};
pub use tail::{tail, AuditEntry, TailLine};
pub use unfinished::LOOK_BACK_BYTES;
pub use verify::{
    verify, verify_with, Broken, BrokenKind, CutFound, Quarantined, Unfinished, VerifyOptions,
    VerifyReport,
};
pub(crate) use writer::now_ms;
pub use writer::{Audit, AuditOptions};

/// The log's file name in its folder.
pub use crate::layout::AUDIT_FILE_NAME as FILE_NAME;

#[cfg(test)]
mod tests;
