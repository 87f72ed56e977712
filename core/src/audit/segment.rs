//! Segments: when the log's last line is damaged (cut off by a crash or a full disk, longer
//! than the readers take, or not a record), the writer keeps the file as it is under a new name
//! (`audit.<n>.jsonl`, `n` counting from 1) and begins a new `audit.jsonl` whose first record
//! (a [`SegmentRecord`]) continues the chain from the last good record and says where the
//! damaged tail is. So auditing never stops, and nothing is deleted.
//!
//! The new file is written whole before it takes the log's name (a new file renamed over the
//! old name, which a hard link keeps under its new one): no writer ever sees the log missing or
//! empty. Writers that still hold the old file notice the name now points elsewhere and open
//! the new one.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::Path;

use super::chain::{self, Link};
use super::key::AuditKey;
use super::lines::{last_line_start, line_at, RawLine, MAX_LINE_BYTES};
use super::{now_ms, AuditError, AuditRecord, SegmentRecord, FILE_NAME};

/// Lines looked at backwards for the last good record before a damaged tail.
const LOOK_BACK_LINES: usize = 16;

/// A log's damaged tail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Damage {
    /// The bytes before it: good records.
    pub(crate) good_bytes: u64,
    /// The link of the last good record (or the genesis, when none was found).
    pub(crate) last: Link,
    /// What is wrong with it.
    pub(crate) reason: String,
}

/// The sealed segments in `dir`, in order: `(n, file name)` of each `audit.<n>.jsonl`.
pub(crate) fn sealed_segments(dir: &Path) -> std::io::Result<Vec<(u64, String)>> {
    let mut found = Vec::new();
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(found),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let name = entry?.file_name();
        let Some(name) = name.to_str() else { continue };
        let number = name
            .strip_prefix("audit.")
            .and_then(|rest| rest.strip_suffix(".jsonl"))
            .and_then(|n| n.parse::<u64>().ok());
        if let Some(n) = number {
            found.push((n, name.to_owned()));
        }
    }
    found.sort();
    Ok(found)
}

/// What is wrong with a last line, or `None` if it is a record line.
fn fault(raw: &RawLine) -> Option<String> {
    match raw {
        RawLine::Complete(_) => match record_link(raw) {
            Some(_) => None,
            None => Some("not a record line".to_owned()),
        },
        RawLine::Incomplete(_) => Some("cut off (no newline at its end)".to_owned()),
        RawLine::TooLong => Some(format!("longer than {MAX_LINE_BYTES} bytes")),
    }
}

/// Where the chain stands at the end of the file's first `len` bytes: the last record's link,
/// or the damaged tail after the last good record.
pub(crate) fn tail(file: &File, len: u64) -> std::io::Result<Result<Link, Damage>> {
    if len == 0 {
        return Ok(Ok(Link::GENESIS));
    }
    let start = last_line_start(file, len)?;
    let raw = line_at(file, start, len)?;
    let Some(reason) = fault(&raw) else {
        return Ok(Ok(record_link(&raw).unwrap_or(Link::GENESIS)));
    };
    let mut end = start;
    for _ in 0..LOOK_BACK_LINES {
        if end == 0 {
            break;
        }
        let start = last_line_start(file, end)?;
        if let Some(last) = record_link(&line_at(file, start, end)?) {
            return Ok(Err(Damage {
                good_bytes: end,
                last,
                reason,
            }));
        }
        end = start;
    }
    Ok(Err(Damage {
        good_bytes: end,
        last: Link::GENESIS,
        reason,
    }))
}

/// The link a complete record line ends with.
fn record_link(raw: &RawLine) -> Option<Link> {
    match raw {
        RawLine::Complete(line) => chain::header(line).ok().and_then(|h| h.link()),
        _ => None,
    }
}

/// Seals the log at `dir/audit.jsonl` (whose lock the caller holds, `len` bytes long, with
/// `damage` at its end) as the next `audit.<n>.jsonl`, and puts a new log in its place whose
/// first line is the segment record. Returns the sealed file's name and the new last link.
pub(crate) fn seal(
    dir: &Path,
    len: u64,
    damage: &Damage,
    key: Option<&AuditKey>,
    durable: bool,
) -> Result<(String, Link), AuditError> {
    let path = dir.join(FILE_NAME);
    let io = |doing: &str, e| AuditError::io(&path, doing, e);
    let next = sealed_segments(dir)
        .map_err(|e| io("list its segments", e))?
        .last()
        .map_or(1, |(n, _)| n + 1);
    let sealed = format!("audit.{next}.jsonl");
    let record = AuditRecord::Segment(SegmentRecord {
        previous: sealed.clone(),
        good_bytes: damage.good_bytes,
        quarantined_bytes: len - damage.good_bytes,
        reason: damage.reason.clone(),
    });
    // Serializing these plain fields cannot fail.
    let body = serde_json::to_vec(&record).unwrap_or_default();
    let mut line = Vec::with_capacity(body.len() + 256);
    let link = chain::encode(&damage.last, now_ms(), &body, key, &mut line);
    let temp = dir.join(format!(".{FILE_NAME}.{}.new", std::process::id()));
    let written = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&temp)?;
        file.write_all(&line)?;
        if durable {
            file.sync_data()?;
        }
        Ok(())
    })();
    if let Err(e) = written {
        let _ = fs::remove_file(&temp);
        return Err(io("begin a new segment", e));
    }
    let kept =
        fs::hard_link(&path, dir.join(&sealed)).or_else(|_| fs::rename(&path, dir.join(&sealed)));
    if let Err(e) = kept.and_then(|()| fs::rename(&temp, &path)) {
        let _ = fs::remove_file(&temp);
        return Err(io("keep its damaged segment aside", e));
    }
    Ok((sealed, link))
}
