//! Checking a whole log: every segment in order, every line's hash and link (and MAC, with the
//! key), every value stored apart, and the chain's end against the head.

use std::fmt;
use std::io::{BufReader, Read};
use std::path::Path;

use super::apart::{check_parts, parts};
use super::chain::{self, Header, LineFault, Link};
use super::head::{read_head, Head, HEAD_FILE};
use super::key::{same_mac, AuditKey};
use super::lines::{next_line, RawLine};
use super::segment::sealed_segments;
use super::unfinished::Starts;
use super::{AuditError, AuditErrorKind, FILE_NAME};
use crate::layout::{open_regular, ReadErrorKind};

/// What [`verify_with`] checks besides the chain.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VerifyOptions {
    /// The key the log was written with: each record's MAC from the first signed one on, and
    /// the head's, must match it.
    pub key: Option<AuditKey>,
    /// A copy of the head kept elsewhere (`seq`, `hash`): the log must reach it, with that
    /// record unchanged.
    pub head: Option<(u64, String)>,
}

/// The result of [`verify`].
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

impl fmt::Display for Broken {
    /// `line 7 (seq 7): edited: its hash does not match its content`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.line, self.seq) {
            (0, Some(seq)) => write!(f, "(seq {seq})")?,
            (0, None) => write!(f, "(the chain's end)")?,
            (line, Some(seq)) => write!(f, "line {line} (seq {seq})")?,
            (line, None) => write!(f, "line {line}")?,
        }
        write!(f, ": {}: {}", self.kind.as_str(), self.reason)
    }
}

/// Checks the whole log whose current segment is `path` (`<dir>/audit.jsonl`): see
/// [`verify_with`], without a key or a copy of the head.
pub fn verify(path: &Path) -> Result<VerifyReport, AuditError> {
    verify_with(path, &VerifyOptions::default())
}

/// Checks the whole log whose current segment is `path`: its sealed segments in order, then
/// `path`, line by line (each line capped at [`MAX_LINE_BYTES`](super::MAX_LINE_BYTES)); each
/// value stored apart; the MACs with `options.key`; the chain's end against the head file and
/// `options.head`. Reports the good records and the first broken one. Any content is reported,
/// never a panic, and a FIFO or a device in the log's place is refused without blocking. Lines
/// appended while it runs are not looked at: it reads the length each file had when it came
/// to it (under a shared lock, so no half-written line is counted). An error only when the log
/// cannot be opened or read.
pub fn verify_with(path: &Path, options: &VerifyOptions) -> Result<VerifyReport, AuditError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut files: Vec<String> = sealed_segments(dir)
        .map_err(|e| AuditError::io(dir, "list its segments", e))?
        .into_iter()
        .map(|(_, name)| name)
        .collect();
    let current = path.file_name().map_or_else(
        || FILE_NAME.to_owned(),
        |n| n.to_string_lossy().into_owned(),
    );
    files.push(current);
    let head = read_head(dir);
    let mut walk = Walk {
        dir,
        options,
        head_seq: head
            .as_ref()
            .ok()
            .and_then(Option::as_ref)
            .map(|h| (h.seq, h.hash.clone())),
        last: Link::GENESIS,
        records: 0,
        signed: 0,
        starts: Starts::default(),
        quarantined: Vec::new(),
        damaged: None,
        cuts: Vec::new(),
        current: String::new(),
        head_matched: false,
        anchor_matched: false,
    };
    let count = files.len();
    for (i, name) in files.iter().enumerate() {
        let sealed = i + 1 < count;
        walk.current = name.clone();
        if let Some(broken) = walk.segment(&dir.join(name), name, i > 0, sealed)? {
            return Ok(walk.report(Some(broken), head.ok().flatten()));
        }
    }
    let current = &files[count - 1];
    let broken = walk.end(current, &head);
    Ok(walk.report(broken, head.ok().flatten()))
}

/// The state of a verification, from one segment to the next.
struct Walk<'a> {
    dir: &'a Path,
    options: &'a VerifyOptions,
    /// The head file's `seq` and `hash`.
    head_seq: Option<(u64, String)>,
    last: Link,
    records: u64,
    signed: u64,
    starts: Starts,
    quarantined: Vec<Quarantined>,
    /// The sealed segment before, if it ended in a damaged tail: its name and good bytes.
    damaged: Option<(String, u64)>,
    /// The `cut` records so far.
    cuts: Vec<CutFound>,
    /// The file being read.
    current: String,
    head_matched: bool,
    anchor_matched: bool,
}

impl Walk<'_> {
    /// Checks one segment; the first broken line, if any. `after` says whether a segment came
    /// before (so its first record must be a segment record), `sealed` whether one comes after
    /// (so a damaged tail is expected: quarantined, not broken).
    fn segment(
        &mut self,
        path: &Path,
        name: &str,
        after: bool,
        sealed: bool,
    ) -> Result<Option<Broken>, AuditError> {
        let (file, _) = open_regular(path).map_err(|e| {
            let doing = match e.kind() {
                ReadErrorKind::Missing => "open it",
                _ => "read it",
            };
            AuditError::new(AuditErrorKind::Io, path, format!("cannot {doing}: {e}"))
        })?;
        file.lock_shared()
            .map_err(|e| AuditError::io(path, "lock it", e))?;
        let len = file.metadata().map(|m| m.len());
        let _ = super::unlock(&file);
        let len = len.map_err(|e| AuditError::io(path, "read its length", e))?;
        let mut reader = BufReader::with_capacity(64 << 10, file.take(len));
        let mut buf = Vec::new();
        let mut number = 0;
        let mut offset = 0u64;
        while let Some(raw) =
            next_line(&mut reader, &mut buf).map_err(|e| AuditError::io(path, "read it", e))?
        {
            number += 1;
            let broken = |seq, kind, reason: String| Broken {
                file: name.to_owned(),
                line: number,
                seq,
                kind,
                reason,
            };
            let fault = match raw {
                RawLine::Complete(line) => {
                    let checked = self.line(&line, number, after && number == 1);
                    let consumed = line.len() as u64 + 1;
                    buf = line;
                    match checked {
                        Ok(()) => {
                            offset += consumed;
                            continue;
                        }
                        Err((seq, kind, reason)) => (seq, kind, reason),
                    }
                }
                RawLine::TooLong => (
                    None,
                    BrokenKind::TooLong,
                    format!("longer than {} bytes", super::MAX_LINE_BYTES),
                ),
                RawLine::Incomplete(line) => (
                    chain::header(&line).ok().map(|h| h.seq),
                    BrokenKind::Truncated,
                    "the last line has no newline: the file was cut".to_owned(),
                ),
            };
            // A sealed segment ends where its damage begins; the next segment says so.
            let damage = matches!(
                fault.1,
                BrokenKind::TooLong | BrokenKind::Truncated | BrokenKind::BadJson
            );
            if sealed && damage {
                self.damaged = Some((name.to_owned(), offset));
                self.quarantined.push(Quarantined {
                    file: name.to_owned(),
                    line: number,
                    bytes: len - offset,
                    reason: fault.2,
                });
                return Ok(None);
            }
            return Ok(Some(broken(fault.0, fault.1, fault.2)));
        }
        if sealed {
            self.damaged = Some((name.to_owned(), offset));
        }
        Ok(None)
    }

    /// Checks one complete line against the chain so far, and takes it in.
    fn line(
        &mut self,
        line: &[u8],
        number: u64,
        first_of_segment: bool,
    ) -> Result<(), (Option<u64>, BrokenKind, String)> {
        let header = link(line, &self.last, number)?;
        let seq = Some(header.seq);
        let next = header
            .link()
            .ok_or((seq, BrokenKind::BadJson, "bad hash".to_owned()))?;
        if first_of_segment {
            self.segment_start(line, seq)?;
        }
        match (&header.mac, &self.options.key) {
            (Some(mac), Some(key))
                if !same_mac(mac.as_bytes(), &key.record_mac(header.hash.as_bytes())) =>
            {
                let reason = "its MAC does not match the key: the record was written or \
                              rewritten without it"
                    .to_owned();
                return Err((seq, BrokenKind::BadMac, reason));
            }
            (None, Some(_)) if self.signed > 0 => {
                let reason =
                    "it has no MAC, though the records before it have one: its MAC was removed"
                        .to_owned();
                return Err((seq, BrokenKind::Unsigned, reason));
            }
            _ => {}
        }
        if let Some(parts) = parts(line).map_err(|e| (seq, BrokenKind::BadJson, e))? {
            check_parts(self.dir, &parts).map_err(|e| (seq, BrokenKind::StoredApart, e))?;
        }
        if header.mac.is_some() {
            self.signed += 1;
        }
        if let Some((head_seq, head_hash)) = &self.head_seq {
            if *head_seq == header.seq {
                if *head_hash != header.hash {
                    let reason = format!(
                        "the head ({HEAD_FILE}) names another record at seq {head_seq}: this one, or the head, was replaced"
                    );
                    return Err((seq, BrokenKind::Head, reason));
                }
                self.head_matched = true;
            }
        }
        if let Some((anchor_seq, anchor_hash)) = &self.options.head {
            if *anchor_seq == header.seq {
                if *anchor_hash != header.hash {
                    let reason = format!(
                        "your copy of the head names another record at seq {anchor_seq}: the log was rewritten"
                    );
                    return Err((seq, BrokenKind::Head, reason));
                }
                self.anchor_matched = true;
            }
        }
        self.starts.see(line);
        if let Some(cut) = cut_of(line) {
            self.cuts.push(CutFound {
                file: self.current.clone(),
                seq: header.seq,
                time_ms: header.time_ms,
                reason: cut,
            });
        }
        self.last = next;
        self.records += 1;
        Ok(())
    }

    /// Checks that the first record of a segment after another is a segment record that says
    /// where the one before ended.
    fn segment_start(
        &self,
        line: &[u8],
        seq: Option<u64>,
    ) -> Result<(), (Option<u64>, BrokenKind, String)> {
        #[derive(serde::Deserialize)]
        struct First {
            #[serde(rename = "type")]
            kind: String,
            previous: Option<String>,
            good_bytes: Option<u64>,
        }
        let first: Option<First> = serde_json::from_slice(line).ok();
        let expected = self.damaged.as_ref();
        let ok = match (first, expected) {
            (Some(first), Some((name, good))) => {
                first.kind == "segment"
                    && first.previous.as_deref() == Some(name.as_str())
                    && first.good_bytes == Some(*good)
            }
            _ => false,
        };
        match ok {
            true => Ok(()),
            false => {
                let before = expected.map_or("?", |(name, _)| name.as_str());
                Err((
                    seq,
                    BrokenKind::Edited,
                    format!(
                        "the first record of a segment must be a segment record that says where {before} ended"
                    ),
                ))
            }
        }
    }

    /// The checks at the chain's end: the head file, the key, a copy of the head.
    fn end(&self, current: &str, head: &Result<Option<Head>, String>) -> Option<Broken> {
        let broken = |seq, kind, reason: String| {
            Some(Broken {
                file: current.to_owned(),
                line: 0,
                seq,
                kind,
                reason,
            })
        };
        let last = self.last.seq;
        if let Some((seq, _)) = &self.options.head {
            if *seq > last {
                let reason = format!(
                    "your copy of the head says the chain reached seq {seq}: records {} to {seq} were deleted",
                    last + 1
                );
                return broken(Some(last), BrokenKind::Cut, reason);
            }
            if !self.anchor_matched && *seq > 0 {
                let reason =
                    format!("your copy of the head names seq {seq}, which is not in the chain");
                return broken(Some(*seq), BrokenKind::Head, reason);
            }
        }
        let head = match head {
            Err(reason) => return broken(None, BrokenKind::Head, reason.clone()),
            Ok(None) if last == 0 => None,
            Ok(None) => {
                return broken(
                    Some(last),
                    BrokenKind::Head,
                    format!(
                        "there is no head file ({HEAD_FILE}), so records cut from the end cannot be detected: it was deleted, or the log was written before head files existed (the next record writes one)"
                    ),
                );
            }
            Ok(Some(head)) => Some(head),
        };
        if let Some(head) = head {
            if head.seq > last {
                let reason = match head.seq - last {
                    1 => format!(
                        "the head ({HEAD_FILE}) says the chain ends at seq {}: record {} was deleted from the end",
                        head.seq, head.seq
                    ),
                    _ => format!(
                        "the head ({HEAD_FILE}) says the chain ends at seq {}: records {} to {} were deleted from the end",
                        head.seq,
                        last + 1,
                        head.seq
                    ),
                };
                return broken(Some(last), BrokenKind::Cut, reason);
            }
            if !self.head_matched && head.seq > 0 {
                let reason = format!(
                    "the head ({HEAD_FILE}) names seq {}, which is not in the chain",
                    head.seq
                );
                return broken(Some(head.seq), BrokenKind::Head, reason);
            }
            if let Some(key) = &self.options.key {
                let good = head.mac.as_ref().is_some_and(|mac| {
                    same_mac(mac.as_bytes(), &key.head_mac(head.seq, &head.hash))
                });
                if !good {
                    let reason = match head.mac {
                        None => format!(
                            "the head ({HEAD_FILE}) has no MAC: it was written without the key"
                        ),
                        Some(_) => format!(
                            "the head's MAC ({HEAD_FILE}) does not match the key: it was forged"
                        ),
                    };
                    return broken(Some(head.seq), BrokenKind::Head, reason);
                }
            }
        } else if self.options.key.is_some() && last > 0 {
            let reason = format!("there is no head file ({HEAD_FILE}) to check with the key");
            return broken(Some(last), BrokenKind::Head, reason);
        }
        None
    }

    fn report(self, broken: Option<Broken>, head: Option<Head>) -> VerifyReport {
        VerifyReport {
            records: self.records,
            last: (self.last.seq > 0).then(|| (self.last.seq, self.last.hash_str().to_owned())),
            broken,
            head,
            quarantined: self.quarantined,
            unfinished: self
                .starts
                .unfinished()
                .into_iter()
                .map(|open| Unfinished {
                    execution_id: open.execution_id,
                    seq: open.seq,
                    tool: open.tool,
                    noted: open.noted,
                })
                .collect(),
            cuts: self.cuts,
            signed: self.signed,
            key_checked: self.options.key.is_some(),
        }
    }
}

/// The reason of a `cut` record, if `line` is one.
fn cut_of(line: &[u8]) -> Option<String> {
    const MARK: &[u8] = b"\"type\":\"cut\"";
    if !line.windows(MARK.len()).any(|w| w == MARK) {
        return None;
    }
    #[derive(serde::Deserialize)]
    struct Cut {
        #[serde(rename = "type")]
        kind: String,
        reason: String,
    }
    let cut: Cut = serde_json::from_slice(line).ok()?;
    (cut.kind == "cut").then_some(cut.reason)
}

/// Checks one complete line against the link before it; returns its header.
fn link(
    line: &[u8],
    before: &Link,
    number: u64,
) -> Result<Header, (Option<u64>, BrokenKind, String)> {
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
            1 if before.seq == 0 => {
                "the first record's prev is not 64 zeros: records before it were cut".to_owned()
            }
            1 => "its prev is not the hash of the last record of the segment before".to_owned(),
            _ => format!(
                "its prev is not line {}'s hash: a record was replaced",
                number - 1
            ),
        };
        return Err((seq, BrokenKind::Edited, reason));
    }
    Ok(header)
}
