//! A session's record on disk: its history and its log as JSON Lines, written as they happen.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::transcript::{HistoryMessage, LogItem};

/// Writes `history.jsonl` (one line per message, appended as it is added) and `log.jsonl` (one
/// line per log item change: the last line of an id is its final state) into one folder.
/// Everything written is already masked.
///
/// Each line is written whole or not at all: a write that fails (a full disk, a file system
/// made read-only) is undone to the end of the last whole line, nothing more is written, and
/// [`failure`](Self::failure) says why, so the message loop stops rather than run on with a
/// record that has holes.
#[derive(Debug)]
pub struct Session {
    dir: PathBuf,
    history: Record,
    log: Record,
    failure: Option<String>,
}

/// One of the session's files and its length: where a failed write is cut back to.
#[derive(Debug)]
struct Record {
    file: File,
    len: u64,
}

impl Session {
    /// A new session folder under `parent` (normally `usr/sessions/`), named after the time,
    /// the process and the agent.
    pub fn create(parent: &Path, agent: &str) -> std::io::Result<Self> {
        let secs = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let name: String = agent
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        let dir = parent.join(format!("{secs}-{}-{name}", std::process::id()));
        fs::create_dir_all(&dir)?;
        // Each at a descriptor above the ones an in-process plugin could take by accident.
        let open = |file: &str| -> std::io::Result<Record> {
            let file = OpenOptions::new()
                .create(true)
                .append(true)
                .open(dir.join(file))
                .map(crate::fds::above_floor)?;
            let len = file.metadata()?.len();
            Ok(Record { file, len })
        };
        Ok(Self {
            history: open("history.jsonl")?,
            log: open("log.jsonl")?,
            dir,
            failure: None,
        })
    }

    /// Why the record could not be written, once a write failed.
    pub fn failure(&self) -> Option<&str> {
        self.failure.as_deref()
    }

    /// The session's folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub(crate) fn history(&mut self, message: &HistoryMessage) {
        if self.failure.is_none() {
            let written = append(&mut self.history, message);
            self.note(written, "history.jsonl");
        }
    }

    pub(crate) fn log(&mut self, item: &LogItem) {
        if self.failure.is_none() {
            let written = append(&mut self.log, item);
            self.note(written, "log.jsonl");
        }
    }

    fn note(&mut self, written: std::io::Result<()>, file: &str) {
        if let Err(e) = written {
            let why = format!(
                "cannot write {}: {e}",
                crate::layout::Escaped(&self.dir.join(file))
            );
            tracing::error!("{why}; the session stops, its record whole up to here");
            self.failure = Some(why);
        }
    }
}

/// Appends `value` as one line, or nothing: a write that fails part way is cut back. The
/// line is written as it is serialised, through a small buffer: a long message is not copied
/// whole first.
fn append(record: &mut Record, value: &impl Serialize) -> std::io::Result<()> {
    let mut counted = Counted {
        file: &mut record.file,
        written: 0,
    };
    let written = {
        let mut writer = std::io::BufWriter::with_capacity(64 << 10, &mut counted);
        serde_json::to_writer(&mut writer, value)
            .map_err(std::io::Error::other)
            .and_then(|()| writer.write_all(b"\n"))
            .and_then(|()| writer.flush())
        // The writer is dropped here, before any cut below.
    };
    let length = counted.written;
    match written {
        Ok(()) => {
            record.len += length;
            Ok(())
        }
        Err(e) => {
            let _ = record.file.set_len(record.len);
            Err(e)
        }
    }
}

/// A file that counts what was written to it.
struct Counted<'f> {
    file: &'f mut File,
    written: u64,
}

impl Write for Counted<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.file.write(buf)?;
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}
