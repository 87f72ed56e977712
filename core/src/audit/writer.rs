//! The writer: appends records to `audit.jsonl`, chained, safely from several processes.
//!
//! Each append takes the file's exclusive lock, makes sure the file is still the one named
//! `audit.jsonl` (another writer may have begun a new segment), continues the chain from its
//! last line, writes the new line with one `write` on a file opened for appending, rewrites
//! the head file in place (`head.rs`), then unlocks. The chain's last link and the file's length after this
//! writer's last line are kept in memory: the tail is read again only when the length changed
//! since (another process appended). A damaged last line begins a new segment
//! (`segment.rs`); a write that fails part-way is cut back off, so a full disk leaves no torn
//! line behind.

use std::fs::{self, File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

use super::apart::{store_apart, MAX_INLINE_BYTES};
use super::chain::{self, Link};
use super::head::{read_head_locked, write_head, HeadFile};
use super::key::AuditKey;
use super::segment::{self, Damage};
use super::unfinished::{open_starts, process_ended};
use super::{AuditError, AuditErrorKind, AuditRecord, CutRecord, UnfinishedRecord, FILE_NAME};

use crate::layout::not_regular;
use crate::sync::lock;

/// How the writer writes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditOptions {
    /// `sync_data` after each record (and the head), so a record survives a power loss once
    /// `append` returns (costs disk flushes per record). Off by default.
    pub fsync: bool,
    /// The key each record and the head are signed with (HMAC-SHA256), if any.
    pub key: Option<AuditKey>,
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
    /// The file's length after this writer's last look; `None` after a failed write or when
    /// the file was (re)opened.
    known_len: Option<u64>,
    /// The head file, kept open while the log is.
    head: HeadFile,
    /// Reused buffers: the record's JSON, the line.
    body: Vec<u8>,
    line: Vec<u8>,
    /// A cut this writer found and recorded (its reason), not yet reported to a caller: the
    /// next append returns it as an error once its record is written.
    cut: Option<String>,
}

/// Times an append opens the log again (a new segment begun by another writer, or by this one)
/// before it gives up.
const MAX_REOPENS: usize = 4;

impl Audit {
    /// Opens (creating it and `dir` if needed) `<dir>/audit.jsonl`, usually
    /// [`Layout::audit_dir`](crate::Layout::audit_dir). A damaged last line begins a new
    /// segment (see [`crate::audit`]); calls that started and never finished, found near the
    /// log's end, are said once and closed with an [`UnfinishedRecord`].
    pub fn open(dir: &Path, options: AuditOptions) -> Result<Self, AuditError> {
        fs::create_dir_all(dir).map_err(|e| AuditError::io(dir, "create the folder", e))?;
        let path = dir.join(FILE_NAME);
        let state = State {
            file: open_log(&path)?,
            last: Link::GENESIS,
            known_len: None,
            head: HeadFile::default(),
            body: Vec::with_capacity(1024),
            line: Vec::with_capacity(1280),
            cut: None,
        };
        let audit = Self {
            path,
            options,
            state: Mutex::new(state),
        };
        let open = audit.with_log(|audit, state| {
            let len = state.catch_up(audit)?;
            open_starts(&state.file, len).map_err(|e| AuditError::io(&audit.path, "read it", e))
        })?;
        // A cut found while opening is reported by the first append of a caller, not by
        // the notes below.
        let cut = lock(&audit.state).cut.take();
        for start in open.into_iter().filter(|s| process_ended(s.pid)) {
            let reason = format!("its process {} has ended", start.pid);
            tracing::warn!(
                "audit log {}: the call of tool {} (execution id {}, seq {}) started and never finished: {reason}",
                crate::layout::Escaped(&audit.path),
                start.tool,
                start.execution_id,
                start.seq
            );
            audit.append(&AuditRecord::Unfinished(UnfinishedRecord {
                execution_id: start.execution_id,
                start_seq: start.seq,
                tool: start.tool,
                reason,
            }))?;
        }
        if cut.is_some() {
            lock(&audit.state).cut = cut;
        }
        Ok(audit)
    }

    /// The log file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The log's folder.
    fn dir(&self) -> &Path {
        self.path.parent().unwrap_or(Path::new("."))
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
        if state.body.len() > MAX_INLINE_BYTES {
            state.body = store_apart(self.dir(), &state.body, self.options.fsync)?;
        }
        // Still holding the state: another thread's record must not replace this one in
        // `body` before it is written (it did: one record written twice, another lost).
        self.with_log_locked(state, |audit, state| {
            state.append_locked(audit)?;
            match state.cut.take() {
                None => Ok(()),
                Some(reason) => Err(AuditError::new(
                    AuditErrorKind::Cut,
                    &audit.path,
                    format!(
                        "{reason}; a `cut` record says so (`toolhost audit verify` reports it), and this record was appended after it"
                    ),
                )),
            }
        })
    }

    /// Runs `f` holding the exclusive lock of the file named `audit.jsonl` now: opens it again
    /// when another writer replaced it (a new segment), and begins a new segment first when
    /// its last line is damaged.
    fn with_log<T>(
        &self,
        f: impl FnMut(&Self, &mut State) -> Result<T, AuditError>,
    ) -> Result<T, AuditError> {
        self.with_log_locked(lock(&self.state), f)
    }

    /// [`with_log`](Self::with_log) with the state already locked by the caller.
    fn with_log_locked<T>(
        &self,
        mut state: std::sync::MutexGuard<'_, State>,
        mut f: impl FnMut(&Self, &mut State) -> Result<T, AuditError>,
    ) -> Result<T, AuditError> {
        for _ in 0..MAX_REOPENS {
            state
                .file
                .lock()
                .map_err(|e| AuditError::io(&self.path, "lock it", e))?;
            let result = match state.is_current(&self.path) {
                Ok(true) => match state.damage(self) {
                    Ok(None) => Some(f(self, &mut state)),
                    Ok(Some((len, damage))) => self.begin_segment(len, &damage).err().map(Err),
                    Err(e) => Some(Err(e)),
                },
                Ok(false) => None,
                Err(e) => Some(Err(e)),
            };
            let unlocked = super::unlock(&state.file);
            if let Some(result) = result {
                let value = result?;
                unlocked.map_err(|e| AuditError::io(&self.path, "unlock it", e))?;
                return Ok(value);
            }
            state.file = open_log(&self.path)?;
            state.known_len = None;
            // A new segment wrote a new head file.
            state.head.reset();
        }
        Err(AuditError::new(
            AuditErrorKind::Io,
            &self.path,
            format!(
                "it was replaced {MAX_REOPENS} times while a record waited to be appended; is something else renaming it?"
            ),
        ))
    }

    /// Keeps the damaged log aside and begins a new segment (under the damaged file's lock).
    fn begin_segment(&self, len: u64, damage: &Damage) -> Result<(), AuditError> {
        let key = self.options.key.as_ref();
        let (sealed, link) = segment::seal(self.dir(), len, damage, key, self.options.fsync)?;
        tracing::warn!(
            "audit log {}: its last line was damaged ({}, {} bytes); kept in {sealed}, and a new segment begins at seq {}",
            crate::layout::Escaped(&self.path),
            damage.reason,
            len - damage.good_bytes,
            link.seq
        );
        write_head(self.dir(), &link, key, self.options.fsync)
    }
}

impl State {
    /// Whether the open file is still the one named `path` (the caller holds its lock).
    fn is_current(&self, path: &Path) -> Result<bool, AuditError> {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            let open = self
                .file
                .metadata()
                .map_err(|e| AuditError::io(path, "read its metadata", e))?;
            match fs::metadata(path) {
                Ok(named) => Ok(named.dev() == open.dev() && named.ino() == open.ino()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
                Err(e) => Err(AuditError::io(path, "read its metadata", e)),
            }
        }
        #[cfg(not(unix))]
        {
            let _ = path;
            Ok(true)
        }
    }

    /// The file's damaged tail, with the file's length, if its last line changed since this
    /// writer looked and is damaged; brings `last` up to date otherwise.
    fn damage(&mut self, audit: &Audit) -> Result<Option<(u64, Damage)>, AuditError> {
        let path = &audit.path;
        // A seek to the end is the cheapest way to ask for the length (one light system call;
        // `metadata` is a `statx`). The position is not where appends go (O_APPEND).
        let len = (&self.file)
            .seek(SeekFrom::End(0))
            .map_err(|e| AuditError::io(path, "read its length", e))?;
        if self.known_len == Some(len) {
            return Ok(None);
        }
        match segment::tail(&self.file, len).map_err(|e| AuditError::io(path, "read its end", e))? {
            Ok(link) => {
                self.last = link;
                self.known_len = Some(len);
                self.check_head(audit)?;
                Ok(None)
            }
            Err(damage) => Ok(Some((len, damage))),
        }
    }

    /// The file's length, `last` being up to date with it (after [`damage`](Self::damage)).
    fn catch_up(&mut self, audit: &Audit) -> Result<u64, AuditError> {
        match self.known_len {
            Some(len) => Ok(len),
            None => Err(AuditError::new(
                AuditErrorKind::Io,
                &audit.path,
                "its length is not known after a failed look",
            )),
        }
    }

    /// Compares the log's end (just read) with its head: when the head names a later record
    /// (records deleted from the end, the file emptied or replaced by an older copy) or
    /// another record at the same `seq` (replaced), appends a [`CutRecord`] that continues
    /// the chain from what is left, and notes the cut for the caller. The head is read only
    /// when the log changed since this writer's last look.
    fn check_head(&mut self, audit: &Audit) -> Result<(), AuditError> {
        let Some(head) = read_head_locked(audit.dir()) else {
            return Ok(());
        };
        let found = self.last.seq;
        let reason = match head.seq {
            seq if seq > found && found == 0 => format!(
                "the log was emptied: its head ({}) says the chain had reached seq {seq}",
                super::HEAD_FILE
            ),
            seq if seq > found => format!(
                "{} missing: the log ends at seq {found} and its head says seq {seq} (deleted from the end, or the log replaced by an older copy)",
                match seq - found {
                    1 => format!("record {seq} is"),
                    _ => format!("records {} to {seq} are", found + 1),
                }
            ),
            seq if seq == found && head.hash != self.last.hash_str() => format!(
                "the record at seq {seq} is not the one its head names: the log was replaced by another copy"
            ),
            // Each append rewrites the head under the log's lock, so the head lags the log by
            // one record at most (a writer that died between the two).
            seq if seq + 1 < found => format!(
                "the log ends at seq {found} and its head says seq {seq}: the log was replaced by another copy"
            ),
            _ => return Ok(()),
        };
        tracing::error!(
            "audit log {}: {reason}; recorded as a `cut` record",
            crate::layout::Escaped(&audit.path)
        );
        let record = AuditRecord::Cut(CutRecord {
            head_seq: head.seq,
            head_hash: head.hash,
            found_seq: found,
            reason: reason.clone(),
            pid: std::process::id(),
        });
        let mut body = Vec::with_capacity(512);
        serde_json::to_writer(&mut body, &record).map_err(|e| {
            AuditError::new(
                AuditErrorKind::Encode,
                &audit.path,
                format!("cannot encode a record: {e}"),
            )
        })?;
        std::mem::swap(&mut self.body, &mut body);
        let written = self.append_locked(audit);
        std::mem::swap(&mut self.body, &mut body);
        written?;
        self.cut = Some(reason);
        Ok(())
    }

    fn append_locked(&mut self, audit: &Audit) -> Result<(), AuditError> {
        let path = &audit.path;
        let len = self.catch_up(audit)?;
        let key = audit.options.key.as_ref();
        let link = chain::encode(&self.last, now_ms(), &self.body, key, &mut self.line);
        // One write on an O_APPEND file: the line lands whole at the end.
        if let Err(e) = self.file.write_all(&self.line) {
            // A part written (a full disk) is cut back off: no torn line is left behind.
            let _ = self.file.set_len(len);
            self.known_len = None;
            return Err(AuditError::io(path, "append a record", e));
        }
        self.known_len = Some(len + self.line.len() as u64);
        self.last = link;
        if audit.options.fsync {
            self.file
                .sync_data()
                .map_err(|e| AuditError::io(path, "sync it to disk", e))?;
        }
        let dir = audit.dir();
        self.head
            .write(dir, &link, key, audit.options.fsync)
            .map_err(|e| {
                AuditError::new(
                    e.kind,
                    &e.path,
                    format!("record {} was appended, but {}", link.seq, e.message),
                )
            })
    }
}

/// Opens the log for appending (creating it), without blocking, and only if it is a regular
/// file; at a descriptor above [`PRIVATE_FD_FLOOR`](crate::fds::PRIVATE_FD_FLOOR).
fn open_log(path: &Path) -> Result<File, AuditError> {
    let mut options = OpenOptions::new();
    options.read(true).append(true).create(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = options
        .open(path)
        .map_err(|e| AuditError::io(path, "open it for appending", e))?;
    // Out of an in-process plugin's way (a plugin that closed fd 1 must not get the log as
    // the host's standard output).
    let file = crate::fds::above_floor(file);
    let metadata = file
        .metadata()
        .map_err(|e| AuditError::io(path, "read its metadata", e))?;
    if let Some(what) = not_regular(&metadata) {
        return Err(AuditError::new(
            AuditErrorKind::Io,
            path,
            format!("it is {what}, not a regular file: move it aside"),
        ));
    }
    Ok(file)
}

/// Now, in Unix milliseconds.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
