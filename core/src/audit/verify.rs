//! Checking a whole log: every segment in order, every line's hash and link (and MAC, with the
//! key), every value stored apart, and the chain's end against the head.

use std::io::{BufReader, Read};
use std::path::Path;

use super::apart::{check_parts, parts};
use super::chain::{self, Header, LineFault, Link};
use super::head::{read_head, Head, HEAD_FILE};
use super::key::same_mac;
use super::lines::{next_line, RawLine};
pub use super::report::{
    Broken, BrokenKind, CutFound, Quarantined, Unfinished, VerifyOptions, VerifyReport,
};
use super::segment::sealed_segments;
use super::unfinished::Starts;
use super::{AuditError, AuditErrorKind, FILE_NAME};
use crate::layout::{open_regular, ReadErrorKind};

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

/// What is wrong at the chain's end: the seq to name, the kind, the reason.
type EndBroken = (Option<u64>, BrokenKind, String);

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
        let (seq, kind, reason) = self
            .check_copy_of_head()
            .or_else(|| self.check_head_file(head))?;
        Some(Broken {
            file: current.to_owned(),
            line: 0,
            seq,
            kind,
            reason,
        })
    }

    /// The chain reaches the copy of the head the user kept (`--head`), with that record in it.
    fn check_copy_of_head(&self) -> Option<EndBroken> {
        let last = self.last.seq;
        let (seq, _) = self.options.head.as_ref()?;
        if *seq > last {
            let reason = format!(
                "your copy of the head says the chain reached seq {seq}: records {} to {seq} were deleted",
                last + 1
            );
            return Some((Some(last), BrokenKind::Cut, reason));
        }
        if !self.anchor_matched && *seq > 0 {
            let reason =
                format!("your copy of the head names seq {seq}, which is not in the chain");
            return Some((Some(*seq), BrokenKind::Head, reason));
        }
        None
    }

    /// The head file is there (once the chain has records), readable, and checked.
    fn check_head_file(&self, head: &Result<Option<Head>, String>) -> Option<EndBroken> {
        let last = self.last.seq;
        match head {
            Err(reason) => Some((None, BrokenKind::Head, reason.clone())),
            Ok(None) if last == 0 => None,
            Ok(None) => Some((
                Some(last),
                BrokenKind::Head,
                format!(
                    "there is no head file ({HEAD_FILE}), so records cut from the end cannot be detected: it was deleted, or the log was written before head files existed (the next record writes one)"
                ),
            )),
            Ok(Some(head)) => self.check_head(head),
        }
    }

    /// The chain reaches the head, which names a record of it and, with a key, has its MAC.
    fn check_head(&self, head: &Head) -> Option<EndBroken> {
        let last = self.last.seq;
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
            return Some((Some(last), BrokenKind::Cut, reason));
        }
        if !self.head_matched && head.seq > 0 {
            let reason = format!(
                "the head ({HEAD_FILE}) names seq {}, which is not in the chain",
                head.seq
            );
            return Some((Some(head.seq), BrokenKind::Head, reason));
        }
        let key = self.options.key.as_ref()?;
        let good = head
            .mac
            .as_ref()
            .is_some_and(|mac| same_mac(mac.as_bytes(), &key.head_mac(head.seq, &head.hash)));
        if good {
            return None;
        }
        let reason = match head.mac {
            None => format!("the head ({HEAD_FILE}) has no MAC: it was written without the key"),
            Some(_) => {
                format!("the head's MAC ({HEAD_FILE}) does not match the key: it was forged")
            }
        };
        Some((Some(head.seq), BrokenKind::Head, reason))
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
