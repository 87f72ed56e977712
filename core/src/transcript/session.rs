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
#[derive(Debug)]
pub struct Session {
    dir: PathBuf,
    history: File,
    log: File,
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
        let open = |file: &str| {
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(dir.join(file))
                .map(crate::fds::above_floor)
        };
        Ok(Self {
            history: open("history.jsonl")?,
            log: open("log.jsonl")?,
            dir,
        })
    }

    /// The session's folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub(crate) fn history(&mut self, message: &HistoryMessage) {
        append(&mut self.history, message, &self.dir);
    }

    pub(crate) fn log(&mut self, item: &LogItem) {
        append(&mut self.log, item, &self.dir);
    }
}

fn append(file: &mut File, value: &impl Serialize, dir: &Path) {
    let mut line = serde_json::to_vec(value).unwrap_or_default();
    line.push(b'\n');
    if let Err(e) = file.write_all(&line) {
        tracing::warn!(
            "cannot write the session record in {}: {e}; the run goes on without it",
            dir.display()
        );
    }
}
