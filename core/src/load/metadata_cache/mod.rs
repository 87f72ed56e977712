//! The metadata cache: what `list` and the tools prompt show of each library, kept in
//! `usr/.cache/metadata.json` so that they need not load a library whose bytes they have seen.
//!
//! Two maps, in one file read at once:
//!
//! - the stat index: a library file's path and its identity on disk (device, inode, size,
//!   modification and change times in nanoseconds) give the SHA-256 of its bytes, so a warm
//!   `list` does not even read the files. If any of these differ, the file is read and hashed.
//! - the records: a library's SHA-256, its role (tool or extension) and the identity of this
//!   host's contract ([`key::host_contract`]) give what loading it gave: a tool's metadata and
//!   the readiness it reported then, an extension's metadata, or the one-line reason it was
//!   refused. A record made by a host with another contract is not trusted.
//!
//! A tool recorded as not ready is loaded again by every `list` (its readiness is checked
//! again); a call always loads the library. The pin check is never skipped: it compares the
//! SHA-256, which the stat index gives. A missing, unreadable or corrupt file is an empty
//! cache; a cache that cannot be written (a read-only `usr/`) is logged and left alone.

mod cache_file;
mod key;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

pub(crate) use cache_file::Outcome;
use cache_file::{library_key, FileRecord, LibraryRecord, Store};
pub(crate) use key::FileKey;

use crate::layout::Escaped;
use crate::sync::lock;

/// The metadata cache of one host: read on first use, written by [`save`](Self::save).
pub(crate) struct MetadataCache {
    path: PathBuf,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The file as read (on first use).
    store: Option<Store>,
    /// What this host learnt since, to be merged into the file.
    new_files: BTreeMap<String, FileRecord>,
    new_libraries: BTreeMap<String, LibraryRecord>,
}

impl State {
    fn store(&mut self, path: &Path) -> &Store {
        self.store.get_or_insert_with(|| Store::read(path))
    }
}

impl MetadataCache {
    /// The cache kept in the file at `path`.
    pub(crate) fn new(path: PathBuf) -> Self {
        Self {
            path,
            state: Mutex::default(),
        }
    }

    /// The SHA-256 of the file at `file` if its identity on disk is still `key`.
    pub(crate) fn sha256(&self, file: &Path, key: FileKey) -> Option<String> {
        let name = file.to_string_lossy();
        let mut state = lock(&self.state);
        if let Some(record) = state.new_files.get(name.as_ref()) {
            return (record.key == key).then(|| record.sha256.clone());
        }
        let record = state.store(&self.path).files.get(name.as_ref())?;
        (record.key == key).then(|| record.sha256.clone())
    }

    /// Records that the file at `file`, with identity `key`, holds bytes of SHA-256 `sha256`.
    pub(crate) fn remember_file(&self, file: &Path, key: FileKey, sha256: &str) {
        let record = FileRecord {
            key,
            sha256: sha256.to_owned(),
        };
        let name = file.to_string_lossy().into_owned();
        lock(&self.state).new_files.insert(name, record);
    }

    /// What loading the library of SHA-256 `sha256` gave this host's contract, as a tool or as
    /// an `extension`.
    pub(crate) fn outcome(&self, sha256: &str, extension: bool) -> Option<Outcome> {
        let key = library_key(sha256, extension);
        let host = key::host_contract();
        let mut state = lock(&self.state);
        let record = match state.new_libraries.get(&key) {
            Some(record) => record,
            None => state.store(&self.path).libraries.get(&key)?,
        };
        (record.host == host).then(|| record.outcome.clone())
    }

    /// Records what loading the library of SHA-256 `sha256` gave.
    pub(crate) fn record(&self, sha256: &str, extension: bool, outcome: Outcome) {
        let written = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let record = LibraryRecord {
            host: key::host_contract().to_owned(),
            written,
            outcome,
        };
        let key = library_key(sha256, extension);
        lock(&self.state).new_libraries.insert(key, record);
    }

    /// Writes what this host learnt into the file (merged with what it holds now), if anything.
    /// A failure is logged: the cache only saves time.
    pub(crate) fn save(&self) {
        let (files, libraries) = {
            let mut state = lock(&self.state);
            if state.new_files.is_empty() && state.new_libraries.is_empty() {
                return;
            }
            let files = std::mem::take(&mut state.new_files);
            let libraries = std::mem::take(&mut state.new_libraries);
            // What is written is what the next lookups read.
            let store = state.store.get_or_insert_with(Store::default);
            store.files.extend(files.clone());
            store.libraries.extend(libraries.clone());
            (files, libraries)
        };
        if let Err(e) = Store::merge_and_write(&self.path, files, libraries) {
            tracing::debug!("metadata cache {} not written: {e}", Escaped(&self.path));
        }
    }
}
