//! The last records of a log, for display.

use std::path::Path;

use serde::Deserialize;

use super::lines::{last_lines, RawLine};
use super::{AuditError, AuditRecord};
use crate::layout::open_regular;

/// A record as read back: its place in the chain and its content.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditEntry {
    /// Its number in the chain, from 1.
    pub seq: u64,
    /// When it was appended, Unix milliseconds.
    pub time_ms: u64,
    /// The record.
    pub record: AuditRecord,
}

/// One of the lines [`tail`] returns.
#[derive(Debug, Clone, PartialEq)]
// A few of these at a time, for display: not worth a box per record.
#[allow(clippy::large_enum_variant)]
pub enum TailLine {
    /// A record.
    Entry(AuditEntry),
    /// A line that is not a readable record, and why. ([`verify`](super::verify()) says whether
    /// the chain is whole; `tail` does not check it.)
    Unreadable(String),
}

#[derive(Deserialize)]
struct Line {
    seq: u64,
    time_ms: u64,
    #[serde(flatten)]
    record: AuditRecord,
}

/// The last `n` lines of the log at `path`, oldest first. Reads from the end, each line
/// capped at [`MAX_LINE_BYTES`](super::MAX_LINE_BYTES); does not check the chain.
pub fn tail(path: &Path, n: usize) -> Result<Vec<TailLine>, AuditError> {
    let (file, metadata) = open_regular(path).map_err(|e| {
        AuditError::new(
            super::AuditErrorKind::Io,
            path,
            format!("cannot open it: {e}"),
        )
    })?;
    let len = metadata.len();
    let lines = last_lines(&file, len, n).map_err(|e| AuditError::io(path, "read it", e))?;
    Ok(lines.into_iter().map(read_line).collect())
}

fn read_line(raw: RawLine) -> TailLine {
    let line = match raw {
        RawLine::Complete(line) => line,
        RawLine::Incomplete(_) => return TailLine::Unreadable("cut off (no newline)".to_owned()),
        RawLine::TooLong => {
            return TailLine::Unreadable(format!("longer than {} bytes", super::MAX_LINE_BYTES));
        }
    };
    match serde_json::from_slice::<Line>(&line) {
        Ok(Line {
            seq,
            time_ms,
            record,
        }) => TailLine::Entry(AuditEntry {
            seq,
            time_ms,
            record,
        }),
        Err(e) => TailLine::Unreadable(format!("not a record: {e}")),
    }
}
