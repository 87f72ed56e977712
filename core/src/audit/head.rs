//! The chain's head, anchored outside the log: `head.json` beside it holds the last record's
//! `seq` and `hash` (and, with a key, their MAC), rewritten after each append. The chain alone
//! cannot show records cut from its end; the head can, and a copy of it kept elsewhere
//! (`toolhost audit verify` prints it) can also when the whole folder is rewritten.
//!
//! ```text
//! {"format":2,"seq":42,"hash":"9f2c…","mac":"…"}
//! ```
//!
//! The head is one line padded with spaces to [`HEAD_BYTES`], written in place at offset 0
//! with one `pwrite` by the writer holding the log's exclusive lock (a write within one disk
//! sector: it lands whole or not at all), so an append costs one system call for it instead
//! of a temporary file and a rename. Readers take the log's shared lock to read it. A head
//! older than the log (a crash between the record and its head) is normal: only a log that
//! ends *before* its head is cut.

use std::fs::File;
use std::path::Path;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::chain::Link;
use super::key::AuditKey;
use super::{AuditError, AuditErrorKind, FILE_NAME};
use crate::layout::{not_regular, read_capped, write_atomically_with, ReadErrorKind};

/// The head's file name in the log's folder.
pub use crate::layout::AUDIT_HEAD_FILE_NAME as HEAD_FILE;

/// The head file's size: its line padded with spaces (the longest head, with a MAC and the
/// largest `seq`, is 188 bytes), within one 512-byte disk sector.
pub const HEAD_BYTES: usize = 256;

/// How long a reader waits for the log's shared lock before it reads the head without it.
const READ_LOCK_PATIENCE: Duration = Duration::from_secs(2);

/// The log format a head describes: 2 (format 1 had no head, no MACs and no values stored
/// apart; its records verify as they did).
pub const FORMAT: u32 = 2;

/// What the head file says: where the chain ended after its writer's last append.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Head {
    /// The log format ([`FORMAT`]).
    pub format: u32,
    /// The last record's `seq`.
    pub seq: u64,
    /// The last record's `hash`.
    pub hash: String,
    /// The HMAC of `head:<seq>:<hash>`, when the writer had a key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
}

impl Head {
    /// `42:9f2c…`: the form `toolhost audit verify --head` takes back.
    pub fn anchor(&self) -> String {
        format!("{}:{}", self.seq, self.hash)
    }
}

/// The head file's bytes after an append that ended at `link`: one JSON line, padded with
/// spaces before its newline to [`HEAD_BYTES`].
fn head_bytes(link: &Link, key: Option<&AuditKey>) -> Vec<u8> {
    let hash = link.hash_str();
    let head = Head {
        format: FORMAT,
        seq: link.seq,
        hash: hash.to_owned(),
        mac: key.map(|key| String::from_utf8_lossy(&key.head_mac(link.seq, hash)).into_owned()),
    };
    // Serializing these plain fields cannot fail.
    let mut bytes = serde_json::to_vec(&head).unwrap_or_default();
    bytes.resize(bytes.len().max(HEAD_BYTES - 1), b' ');
    bytes.push(b'\n');
    bytes
}

/// Rewrites the head atomically (a temporary file renamed over it): for a new segment, where
/// the writers' open head files are opened again with the log.
pub(crate) fn write_head(
    dir: &Path,
    link: &Link,
    key: Option<&AuditKey>,
    durable: bool,
) -> Result<(), AuditError> {
    let path = dir.join(HEAD_FILE);
    write_atomically_with(&path, &head_bytes(link, key), durable)
        .map_err(|e| AuditError::io(&path, "write the chain's head", e))
}

/// A writer's open head file, written in place after each append (the caller holds the log's
/// exclusive lock). Opened at the first write; [`reset`](Self::reset) when the log is opened
/// again, since a new segment replaces the head file.
#[derive(Debug, Default)]
pub(crate) struct HeadFile {
    file: Option<File>,
}

impl HeadFile {
    /// Forgets the open file: the next write opens `head.json` again.
    pub(crate) fn reset(&mut self) {
        self.file = None;
    }

    /// Writes the head after an append that ended at `link`.
    pub(crate) fn write(
        &mut self,
        dir: &Path,
        link: &Link,
        key: Option<&AuditKey>,
        durable: bool,
    ) -> Result<(), AuditError> {
        let path = dir.join(HEAD_FILE);
        let bytes = head_bytes(link, key);
        let written = self.write_in_place(&path, &bytes, durable);
        if written.is_err() {
            self.file = None;
        }
        written.map_err(|e| match e {
            Fault::Io(e) => AuditError::io(&path, "write the chain's head", e),
            Fault::NotRegular(what) => AuditError::new(
                AuditErrorKind::Io,
                &path,
                format!("it is {what}, not a regular file: move it aside"),
            ),
        })
    }

    #[cfg(unix)]
    fn write_in_place(&mut self, path: &Path, bytes: &[u8], durable: bool) -> Result<(), Fault> {
        use std::os::unix::fs::{FileExt, OpenOptionsExt};
        let file = match &mut self.file {
            Some(file) => file,
            None => {
                let file = std::fs::OpenOptions::new()
                    .write(true)
                    .create(true)
                    .custom_flags(libc::O_NONBLOCK)
                    .open(path)
                    .map_err(Fault::Io)?;
                let metadata = file.metadata().map_err(Fault::Io)?;
                if let Some(what) = not_regular(&metadata) {
                    return Err(Fault::NotRegular(what));
                }
                // A head of another size (format 2's first heads were not padded) is cut to
                // this one's once; from then on every head is the same size.
                if metadata.len() > bytes.len() as u64 {
                    file.set_len(bytes.len() as u64).map_err(Fault::Io)?;
                }
                self.file.insert(file)
            }
        };
        file.write_all_at(bytes, 0).map_err(Fault::Io)?;
        if durable {
            file.sync_data().map_err(Fault::Io)?;
        }
        Ok(())
    }

    #[cfg(not(unix))]
    fn write_in_place(&mut self, path: &Path, bytes: &[u8], durable: bool) -> Result<(), Fault> {
        write_atomically_with(path, bytes, durable).map_err(Fault::Io)
    }
}

/// Why the head file could not be written.
enum Fault {
    Io(std::io::Error),
    NotRegular(&'static str),
}

/// The head in `dir`: `Ok(None)` when there is no head file, `Err` with the reason when it
/// cannot be read or is not a head. Read under the log's shared lock, so never while a writer
/// rewrites it (after [`READ_LOCK_PATIENCE`] without the lock, it is read anyway).
pub(crate) fn read_head(dir: &Path) -> Result<Option<Head>, String> {
    let _shared = shared_lock(&dir.join(FILE_NAME));
    let path = dir.join(HEAD_FILE);
    let read = match read_capped(&path, 4096, "a 4 KiB limit") {
        Ok(read) => read,
        Err(e) if e.kind() == ReadErrorKind::Missing => return Ok(None),
        Err(e) => return Err(format!("{HEAD_FILE}: {e}")),
    };
    serde_json::from_slice(&read.bytes)
        .map(Some)
        .map_err(|e| format!("{HEAD_FILE} is not a head: {e}"))
}

/// The head in `dir` as the writer holding the log's exclusive lock reads it (no shared lock:
/// that would wait on the writer's own): `None` when there is none or it is not a head.
pub(crate) fn read_head_locked(dir: &Path) -> Option<Head> {
    let read = read_capped(&dir.join(HEAD_FILE), 4096, "a 4 KiB limit").ok()?;
    serde_json::from_slice(&read.bytes).ok()
}

/// The log's shared lock, if it is a regular file that can be locked within
/// [`READ_LOCK_PATIENCE`]; unlocked when the file is dropped.
fn shared_lock(log: &Path) -> Option<File> {
    let (file, _) = crate::layout::open_regular(log).ok()?;
    let deadline = Instant::now() + READ_LOCK_PATIENCE;
    loop {
        match file.try_lock_shared().taken() {
            Ok(true) => return Some(file),
            Ok(false) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(1));
            }
            Ok(false) | Err(_) => return None,
        }
    }
}

/// `File::try_lock_shared`'s answer as `Ok(true)` (taken), `Ok(false)` (held by another) or
/// the error. Its type changed when it became stable: Rust 1.89 answers
/// `Result<(), TryLockError>`, the unstable API before it (Debian's Rust 1.85, which builds
/// the host for Windows in the tests: docs/src/guide/building.md) `io::Result<bool>`.
trait Taken {
    fn taken(self) -> std::io::Result<bool>;
}

impl<E: Into<std::io::Error>> Taken for Result<(), E> {
    fn taken(self) -> std::io::Result<bool> {
        match self.map_err(Into::into) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(false),
            Err(e) => Err(e),
        }
    }
}

impl Taken for std::io::Result<bool> {
    fn taken(self) -> std::io::Result<bool> {
        self
    }
}
