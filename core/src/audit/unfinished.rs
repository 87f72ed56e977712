//! Calls that started and never finished: a [`StartRecord`](super::StartRecord) with no call
//! record after it (same `execution_id`), whose process has ended. A writer opening the log
//! looks for them in its last [`LOOK_BACK_BYTES`], says so once (a warning) and closes each
//! with an [`UnfinishedRecord`](super::UnfinishedRecord), so the next one does not say it
//! again; [`verify`](super::verify()) finds them in the whole log.

use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};

use serde::Deserialize;

/// How far back from the log's end a writer looks when it opens the log: 1 MiB.
pub const LOOK_BACK_BYTES: u64 = 1 << 20;

/// A start record's fields, as read back; or the `execution_id` of a record that completes one.
#[derive(Debug, Deserialize)]
pub(crate) struct Marker {
    seq: u64,
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    execution_id: Option<String>,
    #[serde(default)]
    pid: Option<u32>,
    #[serde(default)]
    tool: Option<String>,
}

/// A call that started and has no record of its end (yet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Open {
    pub(crate) execution_id: String,
    pub(crate) seq: u64,
    pub(crate) pid: u32,
    pub(crate) tool: String,
    /// Whether an `unfinished` record closed it (its process had ended).
    pub(crate) noted: bool,
    /// Whether its call record came.
    completed: bool,
}

/// The starts seen and not completed, in order; bounded by [`Starts::CAP`].
#[derive(Debug, Default)]
pub(crate) struct Starts {
    open: Vec<Open>,
    index: HashMap<String, Vec<usize>>,
    /// Starts not kept because `CAP` were open already.
    pub(crate) dropped: u64,
}

impl Starts {
    /// The most open starts kept (a log of nothing but starts costs no more than this).
    const CAP: usize = 100_000;

    /// Takes one line (a complete record line) into account.
    pub(crate) fn see(&mut self, line: &[u8]) {
        // Only these three types matter: skip the parse of the rest.
        let needles = [
            &b"\"type\":\"start\""[..],
            b"\"type\":\"call\"",
            b"\"type\":\"unfinished\"",
        ];
        if !needles
            .iter()
            .any(|needle| memchr::memmem::find(line, needle).is_some())
        {
            return;
        }
        let Ok(marker) = serde_json::from_slice::<Marker>(line) else {
            return;
        };
        let Some(id) = marker.execution_id else {
            return;
        };
        match marker.kind.as_str() {
            "start" if self.open.len() < Self::CAP => {
                self.index
                    .entry(id.clone())
                    .or_default()
                    .push(self.open.len());
                self.open.push(Open {
                    execution_id: id,
                    seq: marker.seq,
                    pid: marker.pid.unwrap_or(0),
                    tool: marker.tool.unwrap_or_default(),
                    noted: false,
                    completed: false,
                });
            }
            "start" => self.dropped += 1,
            kind @ ("call" | "unfinished") => {
                let Some(slots) = self.index.get_mut(&id) else {
                    return;
                };
                // The oldest start of that id still waiting.
                let waiting = slots
                    .iter()
                    .position(|&slot| !self.open[slot].completed && !self.open[slot].noted);
                if let Some(at) = waiting {
                    let open = &mut self.open[slots[at]];
                    match kind {
                        "call" => {
                            open.completed = true;
                            slots.remove(at);
                        }
                        _ => open.noted = true,
                    }
                }
                if slots.is_empty() {
                    self.index.remove(&id);
                }
            }
            _ => {}
        }
    }

    /// The starts with no call record: those an `unfinished` record noted, and those still
    /// waiting (running, or their process died and no writer has opened the log since).
    pub(crate) fn unfinished(self) -> Vec<Open> {
        self.open.into_iter().filter(|o| !o.completed).collect()
    }
}

/// The starts with no completion in the last [`LOOK_BACK_BYTES`] of the file's first `len`
/// bytes.
pub(crate) fn open_starts(file: &File, len: u64) -> std::io::Result<Vec<Open>> {
    let from = len.saturating_sub(LOOK_BACK_BYTES);
    let mut bytes = Vec::with_capacity((len - from) as usize);
    let mut reader = file;
    reader.seek(SeekFrom::Start(from))?;
    reader.take(len - from).read_to_end(&mut bytes)?;
    // A window that starts mid-line: its first piece is not a line.
    let body = match from {
        0 => &bytes[..],
        _ => match memchr::memchr(b'\n', &bytes) {
            Some(newline) => &bytes[newline + 1..],
            None => &[],
        },
    };
    let mut starts = Starts::default();
    for line in body.split(|&b| b == b'\n') {
        if !line.is_empty() {
            starts.see(line);
        }
    }
    Ok(starts
        .unfinished()
        .into_iter()
        .filter(|o| !o.noted)
        .collect())
}

/// Whether the process `pid` has ended (`false` when it may still run, or is this one).
pub(crate) fn process_ended(pid: u32) -> bool {
    if pid == 0 || pid == std::process::id() {
        return false;
    }
    #[cfg(unix)]
    {
        let Ok(pid) = libc::pid_t::try_from(pid) else {
            return false;
        };
        // SAFETY: signal 0 sends nothing; it only asks whether the process exists.
        let alive = unsafe { libc::kill(pid, 0) } == 0;
        !alive && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
    }
    #[cfg(not(unix))]
    false
}
