//! What checking a whole log found (`verify.rs` checks it): the report, a record cut from the
//! chain, a segment set aside, a call that never ended, a line that breaks the chain.

use std::fmt;

use super::head::Head;
use super::key::AuditKey;

/// What [`verify_with`](super::verify_with) checks besides the chain.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VerifyOptions {
    /// The key the log was written with: each record's MAC from the first signed one on, and
    /// the head's, must match it.
    pub key: Option<AuditKey>,
    /// A copy of the head kept elsewhere (`seq`, `hash`): the log must reach it, with that
    /// record unchanged.
    pub head: Option<(u64, String)>,
}

/// The result of [`verify`](super::verify()).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyReport {
    /// Good records: all of them, or those before the first broken one.
    pub records: u64,
    /// The `seq` and `hash` of the last good record.
    pub last: Option<(u64, String)>,
    /// The first broken record, if any.
    pub broken: Option<Broken>,
    /// What the head file says, if there is one: print it for keeping elsewhere.
    pub head: Option<Head>,
    /// The damaged tails kept in sealed segments, each followed by a new segment.
    pub quarantined: Vec<Quarantined>,
    /// Calls that started and never finished.
    pub unfinished: Vec<Unfinished>,
    /// The `cut` records: each time a writer found records missing from the log (deleted
    /// from its end, the file emptied or replaced by an older copy) before it appended.
    pub cuts: Vec<CutFound>,
    /// Records that carry a MAC.
    pub signed: u64,
    /// Whether the MACs were checked (a key was given).
    pub key_checked: bool,
}

impl VerifyReport {
    /// Whether every line is a good record, chained to the one before, the chain ends where
    /// the head says, and no writer ever found records missing ([`cuts`](Self::cuts) is
    /// empty: a cut, once recorded, is reported on every later run).
    pub fn is_intact(&self) -> bool {
        self.broken.is_none() && self.cuts.is_empty()
    }
}

/// A `cut` record found in the log ([`crate::audit::CutRecord`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CutFound {
    /// The file it is in (`audit.jsonl`).
    pub file: String,
    /// The `seq` of the cut record.
    pub seq: u64,
    /// When it was written, Unix milliseconds.
    pub time_ms: u64,
    /// What its writer found.
    pub reason: String,
}

/// A damaged tail kept aside: the end of a sealed segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quarantined {
    /// The sealed segment's file name (`audit.1.jsonl`).
    pub file: String,
    /// The damaged tail's first line number in it, from 1.
    pub line: u64,
    /// Its length in bytes.
    pub bytes: u64,
    /// What was wrong with it.
    pub reason: String,
}

/// A call that started and never finished.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unfinished {
    /// Its execution id.
    pub execution_id: String,
    /// The `seq` of its start record.
    pub seq: u64,
    /// The tool.
    pub tool: String,
    /// Whether a host noted it (an `unfinished` record: its process had ended); if not, it
    /// may still be running.
    pub noted: bool,
}

/// The first line where the chain breaks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broken {
    /// The file, in the log's folder (`audit.jsonl`, `audit.2.jsonl`).
    pub file: String,
    /// Its line number, from 1; 0 when the break is not one line's (the chain's end).
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
    /// A value it stores apart is missing or changed.
    StoredApart,
    /// Its MAC does not match the key: rewritten by someone without it.
    BadMac,
    /// It has no MAC though a record before it has one: a MAC was removed.
    Unsigned,
    /// Records were cut from the chain's end: the head names a later record.
    Cut,
    /// The head is missing, unreadable, unsigned or forged, or does not match the record it
    /// names.
    Head,
}

impl BrokenKind {
    /// `edited`, `missing`, `out of order`, `bad JSON`, `too long`, `truncated`, `stored
    /// apart`, `bad MAC`, `unsigned`, `cut` or `head`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Edited => "edited",
            Self::Missing => "missing",
            Self::OutOfOrder => "out of order",
            Self::BadJson => "bad JSON",
            Self::TooLong => "too long",
            Self::Truncated => "truncated",
            Self::StoredApart => "stored apart",
            Self::BadMac => "bad MAC",
            Self::Unsigned => "unsigned",
            Self::Cut => "cut",
            Self::Head => "head",
        }
    }
}

impl Broken {
    /// The break, naming its file as `file` (the log's folder relative to where the reader
    /// is): `usr/audit/audit.jsonl:7 (seq 7): edited: its hash does not match its content`; the
    /// chain's end has no line: `usr/audit/audit.jsonl (the chain's end): head: ...`.
    pub fn located(&self, file: &std::path::Path) -> String {
        let line = usize::try_from(self.line).ok();
        let at = crate::layout::Location::new(file, line);
        let (kind, reason) = (self.kind.as_str(), &self.reason);
        match (self.line, self.seq) {
            (_, Some(seq)) => format!("{at} (seq {seq}): {kind}: {reason}"),
            (0, None) => format!("{at} (the chain's end): {kind}: {reason}"),
            (_, None) => format!("{at}: {kind}: {reason}"),
        }
    }
}

impl fmt::Display for Broken {
    /// [`located`](Self::located) in the log's folder: `audit.jsonl:7 (seq 7): edited: ...`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.located(std::path::Path::new(&self.file)))
    }
}
