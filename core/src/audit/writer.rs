//! The writer: appends records to `audit.jsonl`, chained, safely from several processes.
//!
//! Each append takes the file's exclusive lock, continues the chain from its last line and
//! writes the new line with one `write` on a file opened for appending, then unlocks. The
//! chain's last link and the file's length after this writer's last line are kept in memory:
//! the tail is read again only when the length changed since (another process appended).

use std::fs::{self, File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

use super::chain::{self, Link};
use super::lines::{last_lines, RawLine};
use super::{AuditError, AuditErrorKind, AuditRecord, FILE_NAME};

use crate::sync::lock;

/// How the writer writes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AuditOptions {
    /// `sync_data` after each record, so a record survives a power loss once `append`
    /// returns (costs a disk flush per record). Off by default.
    pub fsync: bool,
}

/// An open audit log: `<dir>/audit.jsonl`. Share it (`Arc<Audit>`): `append` takes `&self`.
///
/// ```
/// use toolhost::audit::{Audit, AuditOptions, AuditRecord, BreakerRecord, BreakerState};
///
/// # let dir = tempfile::tempdir().unwrap();
/// let audit = Audit::open(dir.path(), AuditOptions::default())?;
/// audit.append(&AuditRecord::Breaker(BreakerRecord {
///     tool: "web".into(),
///     profile: "default".into(),
///     from: BreakerState::Closed,
///     to: BreakerState::Open,
///     reason: "5 failures in a row".into(),
///     time_ms: 1_700_000_000_000,
/// }))?;
/// assert_eq!(toolhost::audit::verify(audit.path())?.records, 1);
/// # Ok::<(), toolhost::audit::AuditError>(())
/// ```
#[derive(Debug)]
pub struct Audit {
    path: PathBuf,
    options: AuditOptions,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    file: File,
    /// The chain's last link, as of `known_len`.
    last: Link,
    /// The file's length after this writer's last look; `None` after a failed write.
    known_len: Option<u64>,
    /// Reused buffers: the record's JSON, the line.
    body: Vec<u8>,
    line: Vec<u8>,
}

impl Audit {
    /// Opens (creating it and `dir` if needed) `<dir>/audit.jsonl`, usually
    /// [`Layout::audit_dir`](crate::Layout::audit_dir). Fails with
    /// [`AuditErrorKind::Corrupt`] if its last line is cut off or not a record line.
    pub fn open(dir: &Path, options: AuditOptions) -> Result<Self, AuditError> {
        fs::create_dir_all(dir).map_err(|e| AuditError::io(dir, "create the folder", e))?;
        let path = dir.join(FILE_NAME);
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(&path)
            .map_err(|e| AuditError::io(&path, "open it for appending", e))?;
        let mut state = State {
            file,
            last: Link::GENESIS,
            known_len: None,
            body: Vec::with_capacity(1024),
            line: Vec::with_capacity(1280),
        };
        state.locked(&path, |state| state.catch_up(&path).map(|_| ()))?;
        Ok(Self {
            path,
            options,
            state: Mutex::new(state),
        })
    }

    /// The log file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `record` as the chain's next line. Safe from several threads and processes at
    /// once: lines never interleave and the chain stays whole.
    pub fn append(&self, record: &AuditRecord) -> Result<(), AuditError> {
        self.append_serialized(record)
    }

    /// [`append`](Self::append) for anything that serializes as a record's JSON object (a
    /// record borrowed from the call it describes).
    pub(crate) fn append_serialized(&self, record: &impl Serialize) -> Result<(), AuditError> {
        let mut state = lock(&self.state);
        state.body.clear();
        serde_json::to_writer(&mut state.body, record).map_err(|e| {
            AuditError::new(
                AuditErrorKind::Encode,
                &self.path,
                format!("cannot encode a record: {e}"),
            )
        })?;
        let fsync = self.options.fsync;
        state.locked(&self.path, |state| state.append_locked(&self.path, fsync))
    }
}

impl State {
    /// Runs `f` holding the file's exclusive lock.
    fn locked<T>(
        &mut self,
        path: &Path,
        f: impl FnOnce(&mut Self) -> Result<T, AuditError>,
    ) -> Result<T, AuditError> {
        self.file
            .lock()
            .map_err(|e| AuditError::io(path, "lock it", e))?;
        let result = f(self);
        let unlocked = self.file.unlock();
        let value = result?;
        unlocked.map_err(|e| AuditError::io(path, "unlock it", e))?;
        Ok(value)
    }

    /// Brings `last` up to date with the file (under the lock); returns the file's length.
    fn catch_up(&mut self, path: &Path) -> Result<u64, AuditError> {
        // A seek to the end is the cheapest way to ask for the length (one light system call;
        // `metadata` is a `statx`). The position is not where appends go (O_APPEND).
        let len = (&self.file)
            .seek(SeekFrom::End(0))
            .map_err(|e| AuditError::io(path, "read its length", e))?;
        if self.known_len != Some(len) {
            self.last = last_link(&self.file, len, path)?;
            self.known_len = Some(len);
        }
        Ok(len)
    }

    fn append_locked(&mut self, path: &Path, fsync: bool) -> Result<(), AuditError> {
        let len = self.catch_up(path)?;
        let link = chain::encode(&self.last, now_ms(), &self.body, &mut self.line);
        // One write on an O_APPEND file: the line lands whole at the end.
        if let Err(e) = self.file.write_all(&self.line) {
            self.known_len = None;
            return Err(AuditError::io(path, "append a record", e));
        }
        self.known_len = Some(len + self.line.len() as u64);
        self.last = link;
        if fsync {
            self.file
                .sync_data()
                .map_err(|e| AuditError::io(path, "sync it to disk", e))?;
        }
        Ok(())
    }
}

/// The link of the last line of the file's first `len` bytes.
fn last_link(file: &File, len: u64, path: &Path) -> Result<Link, AuditError> {
    let lines =
        last_lines(file, len, 1).map_err(|e| AuditError::io(path, "read its last line", e))?;
    let corrupt = |why: &str| {
        AuditError::new(
            AuditErrorKind::Corrupt,
            path,
            format!(
                "its last line {why}, so no record can be chained after it; run \
                 `toolhost audit verify`, then move the file aside to start a new log"
            ),
        )
    };
    match lines.into_iter().next() {
        None => Ok(Link::GENESIS),
        Some(RawLine::Complete(line)) => chain::header(&line)
            .ok()
            .and_then(|header| header.link())
            .ok_or_else(|| corrupt("is not a record line")),
        Some(RawLine::Incomplete(_)) => Err(corrupt("is cut off (no newline at its end)")),
        Some(RawLine::TooLong) => Err(corrupt("is longer than 1 MiB")),
    }
}

/// Now, in Unix milliseconds.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
