//! The cache file, `usr/.cache/metadata.json`: read whole, written whole (a new file renamed
//! over the old one), merged with what other processes wrote meanwhile (the last writer wins).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use plugin_api::{ExtensionInfo, ToolInfo};
use serde::{Deserialize, Serialize};

use super::key::FileKey;
use crate::layout::{read_capped, Escaped, ReadErrorKind};

/// The version of the file's format; a file of another version is ignored (and replaced).
const FORMAT: u32 = 1;

/// The largest cache file read; a larger one is ignored.
const MAX_BYTES: u64 = 256 << 20;

/// Records of libraries no indexed file holds now (an earlier build, a removed plugin) that are
/// kept, the most recently written first: switching back to a build does not load it again.
const KEEP_UNUSED: usize = 256;

/// Everything the file holds.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct Store {
    #[serde(default)]
    format: u32,
    /// The stat index: the SHA-256 of each library file, by its path, while its [`FileKey`]
    /// stays the same.
    #[serde(default)]
    pub(crate) files: BTreeMap<String, FileRecord>,
    /// What each library is, by `<sha256>:<role>` ([`library_key`]).
    #[serde(default)]
    pub(crate) libraries: BTreeMap<String, LibraryRecord>,
}

/// One line of the stat index.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct FileRecord {
    pub(crate) key: FileKey,
    pub(crate) sha256: String,
}

/// What a library was found to be, by the host whose contract is `host`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct LibraryRecord {
    pub(crate) host: String,
    /// When it was written (seconds since the Unix epoch): the oldest unused records go first.
    #[serde(default)]
    pub(crate) written: u64,
    pub(crate) outcome: Outcome,
}

/// What loading a library gave, as far as `list` and the tools prompt need it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub(crate) enum Outcome {
    /// A tool, with its metadata and the readiness it reported when it was loaded.
    Tool {
        info: ToolInfo,
        package: String,
        version: String,
        contract: String,
        ready: bool,
    },
    /// An extension, with its metadata.
    Extension { info: ExtensionInfo },
    /// It was refused for a reason that depends only on its bytes and this host (the kind's
    /// [`as_str`](crate::LoadErrorKind::as_str), and the one-line reason).
    Failed { kind: String, reason: String },
}

/// The key of a library's record: its content and the role it was loaded in (a tool's library
/// in an extensions folder is refused, and the other way round).
pub(crate) fn library_key(sha256: &str, extension: bool) -> String {
    let role = if extension { "extension" } else { "tool" };
    format!("{sha256}:{role}")
}

impl Store {
    /// Reads the file at `path`; a missing, unreadable or corrupt file reads as empty (logged:
    /// the cache only saves time, it is never the reason a command fails).
    pub(crate) fn read(path: &Path) -> Self {
        let read = match read_capped(path, MAX_BYTES, "the metadata cache's size limit") {
            Ok(read) => read,
            Err(e) if e.kind == ReadErrorKind::Missing => return Self::default(),
            Err(e) => {
                tracing::debug!("metadata cache {} not read: {e}", Escaped(path));
                return Self::default();
            }
        };
        match serde_json::from_slice::<Self>(&read.bytes) {
            Ok(store) if store.format == FORMAT => store,
            Ok(_) => {
                tracing::debug!("metadata cache {}: another format, ignored", Escaped(path));
                Self::default()
            }
            Err(e) => {
                tracing::warn!(
                    "metadata cache {} is corrupt ({e}); ignored, and written again",
                    Escaped(path)
                );
                Self::default()
            }
        }
    }

    /// Merges `files` and `libraries` into what the file holds now and writes it atomically.
    /// Files that are gone leave the index, and of the records no indexed file refers to only
    /// the [`KEEP_UNUSED`] most recent stay.
    pub(crate) fn merge_and_write(
        path: &Path,
        files: BTreeMap<String, FileRecord>,
        libraries: BTreeMap<String, LibraryRecord>,
    ) -> std::io::Result<()> {
        let mut store = Self::read(path);
        store.format = FORMAT;
        store.files.extend(files);
        store.libraries.extend(libraries);
        store
            .files
            .retain(|file, _| FileKey::of(Path::new(file)).is_some());
        let used: BTreeSet<&str> = store.files.values().map(|f| f.sha256.as_str()).collect();
        let is_used = |key: &str| {
            key.rsplit_once(':')
                .is_some_and(|(sha, _)| used.contains(sha))
        };
        let mut unused: Vec<(u64, String)> = store
            .libraries
            .iter()
            .filter(|(key, _)| !is_used(key))
            .map(|(key, record)| (record.written, key.clone()))
            .collect();
        unused.sort_unstable_by(|a, b| b.cmp(a));
        for (_, key) in unused.into_iter().skip(KEEP_UNUSED) {
            store.libraries.remove(&key);
        }
        let bytes = serde_json::to_vec(&store).map_err(std::io::Error::other)?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        crate::layout::write_atomically(path, &bytes)
    }
}
