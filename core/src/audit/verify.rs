//! Checking a whole log: every line's hash, and every link from one line to the next.

use std::fmt;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use super::chain::{self, Header, LineFault, Link};
use super::lines::{next_line, RawLine};
use super::AuditError;

/// The result of [`verify`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyReport {
    /// Good records: all of them, or those before the first broken one.
    pub records: u64,
    /// The `seq` and `hash` of the last good record: compare them with a copy kept elsewhere
    /// to detect records cut from the end, which the chain alone cannot show.
    pub last: Option<(u64, String)>,
    /// The first broken record, if any.
    pub broken: Option<Broken>,
}

impl VerifyReport {
    /// Whether every line is a good record, chained to the one before.
    pub fn is_intact(&self) -> bool {
        self.broken.is_none()
    }
}

/// The first line where the chain breaks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broken {
    /// Its line number, from 1.
    pub line: u64,
    /// Its `seq`, when the line could be read.
    pub seq: Option<u64>,
    /// What is wrong.
    pub kind: BrokenKind,
    /// One line: why.
    pub reason: String,
}

/// What is wrong with a broken line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BrokenKind {
    /// Its content or its hash was changed, or the record before it was replaced.
    Edited,
    /// A record before it is missing: deleted, or moved.
    Missing,
    /// Its `seq` is not after the one before: lines were reordered or repeated.
    OutOfOrder,
    /// Not a JSON record line.
    BadJson,
    /// Longer than [`MAX_LINE_BYTES`](super::MAX_LINE_BYTES).
    TooLong,
    /// The last line has no newline: cut off, or its writer died mid-line.
    Truncated,
}

impl BrokenKind {
    /// `edited`, `missing`, `out of order`, `bad JSON`, `too long` or `truncated`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Edited => "edited",
            Self::Missing => "missing",
            Self::OutOfOrder => "out of order",
            Self::BadJson => "bad JSON",
            Self::TooLong => "too long",
            Self::Truncated => "truncated",
        }
    }
}

impl fmt::Display for Broken {
    /// `line 7 (seq 7): edited: its hash does not match its content`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}", self.line)?;
        if let Some(seq) = self.seq {
            write!(f, " (seq {seq})")?;
        }
        write!(f, ": {}: {}", self.kind.as_str(), self.reason)
    }
}

/// Checks the whole log at `path`, line by line (each line capped at
/// [`MAX_LINE_BYTES`](super::MAX_LINE_BYTES)), and reports the good records or the first
/// broken one. Any content is reported, never a panic. Lines appended while it runs are not
/// looked at: it reads the length the file had when it started (under a shared lock, so no
/// half-written line is counted). An error only when the file cannot be opened or read.
pub fn verify(path: &Path) -> Result<VerifyReport, AuditError> {
    let file = File::open(path).map_err(|e| AuditError::io(path, "open it", e))?;
    file.lock_shared()
        .map_err(|e| AuditError::io(path, "lock it", e))?;
    let len = file.metadata().map(|m| m.len());
    let _ = file.unlock();
    let len = len.map_err(|e| AuditError::io(path, "read its length", e))?;
    let mut reader = BufReader::with_capacity(64 << 10, file.take(len));
    let mut buf = Vec::new();
    let mut last = Link::GENESIS;
    let mut number = 0;
    while let Some(raw) =
        next_line(&mut reader, &mut buf).map_err(|e| AuditError::io(path, "read it", e))?
    {
        number += 1;
        let broken = |seq, kind, reason: String| Broken {
            line: number,
            seq,
            kind,
            reason,
        };
        let line = match raw {
            RawLine::Complete(line) => line,
            RawLine::TooLong => {
                let reason = format!("longer than {} bytes", super::MAX_LINE_BYTES);
                return Ok(report(
                    last,
                    Some(broken(None, BrokenKind::TooLong, reason)),
                ));
            }
            RawLine::Incomplete(line) => {
                let seq = chain::header(&line).ok().map(|h| h.seq);
                let reason = "the last line has no newline: the file was cut".to_owned();
                return Ok(report(
                    last,
                    Some(broken(seq, BrokenKind::Truncated, reason)),
                ));
            }
        };
        match link(&line, &last, number) {
            Ok(next) => last = next,
            Err((seq, kind, reason)) => {
                return Ok(report(last, Some(broken(seq, kind, reason))));
            }
        }
        buf = line;
    }
    Ok(report(last, None))
}

/// Checks one complete line against the link before it; returns its own link.
fn link(
    line: &[u8],
    before: &Link,
    number: u64,
) -> Result<Link, (Option<u64>, BrokenKind, String)> {
    let header: Header = chain::check(line).map_err(|(header, fault)| {
        let seq = header.map(|h| h.seq);
        match fault {
            LineFault::BadJson(e) => (seq, BrokenKind::BadJson, e),
            LineFault::NotCanonical => (
                seq,
                BrokenKind::Edited,
                "its header is not in the form the log writes".to_owned(),
            ),
            LineFault::HashMismatch => (
                seq,
                BrokenKind::Edited,
                "its hash does not match its content".to_owned(),
            ),
        }
    })?;
    let seq = Some(header.seq);
    let expected = before.seq + 1;
    if header.seq > expected {
        let reason = match header.seq - 1 {
            last if last == expected => format!("record {expected} was deleted or moved"),
            last => format!("records {expected} to {last} were deleted or moved"),
        };
        return Err((seq, BrokenKind::Missing, reason));
    }
    if header.seq < expected {
        let reason = format!("expected seq {expected}: lines were reordered or repeated");
        return Err((seq, BrokenKind::OutOfOrder, reason));
    }
    if header.prev != before.hash_str() {
        let reason = match number {
            1 => "the first record's prev is not 64 zeros: records before it were cut".to_owned(),
            _ => format!(
                "its prev is not line {}'s hash: a record was replaced",
                number - 1
            ),
        };
        return Err((seq, BrokenKind::Edited, reason));
    }
    // `check` accepted the hash: 64 lower-case hex digits.
    header
        .link()
        .ok_or((seq, BrokenKind::BadJson, "bad hash".to_owned()))
}

fn report(last: Link, broken: Option<Broken>) -> VerifyReport {
    VerifyReport {
        records: last.seq,
        last: (last.seq > 0).then(|| (last.seq, last.hash_str().to_owned())),
        broken,
    }
}
