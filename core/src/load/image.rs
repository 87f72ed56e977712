//! A library file read into memory: its bytes, their hash, and the file's identity on disk.
//!
//! Everything the loader does works on one [`Image`]: the headers are checked on these bytes, the
//! private copy is written from these bytes, and the hash that tells a real rebuild from an
//! identical rewrite is taken of these bytes. So a file that is being written while it is read
//! can never be half checked and half loaded.

use std::fs;
use std::path::Path;
use std::time::{Duration, SystemTime};

use crate::layout::{read_at_most, read_capped, read_capped_with, ReadError, ReadErrorKind};
use crate::load::error::{LoadError, LoadErrorKind};
use crate::load::loader::memfd::{Copied, Sealed};

/// Identity of a file on disk: a change of any field means the file may have new content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stamp {
    len: u64,
    modified: Option<SystemTime>,
    inode: u64,
}

impl Stamp {
    /// The stamp of `path` (following symbolic links), or `None` if it cannot be read.
    pub(crate) fn of(path: &Path) -> Option<Self> {
        Self::from_metadata(&fs::metadata(path).ok()?)
    }

    /// The stamp of whatever is at `path`: the file a link leads to, or else the link itself
    /// (a dangling link or a loop has a stamp too, so its failure is recorded once).
    pub(crate) fn of_entry(path: &Path) -> Option<Self> {
        Self::of(path).or_else(|| Self::from_metadata(&fs::symlink_metadata(path).ok()?))
    }

    /// Whether the file was modified less than `settle` ago (it may still be being written).
    pub(crate) fn is_younger_than(&self, settle: Duration) -> bool {
        self.settles_in(settle).is_some()
    }

    /// How long until the file has gone `settle` without a change, if it has not yet. (A
    /// modification time in the future counts as settled: it would never settle.)
    pub(crate) fn settles_in(&self, settle: Duration) -> Option<Duration> {
        let age = SystemTime::now().duration_since(self.modified?).ok()?;
        settle.checked_sub(age).filter(|left| !left.is_zero())
    }

    fn from_metadata(meta: &fs::Metadata) -> Option<Self> {
        #[cfg(unix)]
        let inode = std::os::unix::fs::MetadataExt::ino(meta);
        #[cfg(not(unix))]
        let inode = 0;
        Some(Self {
            len: meta.len(),
            modified: meta.modified().ok(),
            inode,
        })
    }
}

/// Where an [`Image`]'s bytes are.
pub(crate) enum Bytes {
    /// Read into memory.
    Heap(Vec<u8>),
    /// In a sealed in-memory file, mapped read-only: the loader maps that very file (Linux).
    Sealed(Sealed),
}

impl std::ops::Deref for Bytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Self::Heap(bytes) => bytes,
            Self::Sealed(sealed) => sealed.bytes(),
        }
    }
}

/// The content of a library file at one moment.
pub(crate) struct Image {
    pub(crate) bytes: Bytes,
    /// XXH3-128 of `bytes`.
    pub(crate) hash: u128,
    pub(crate) stamp: Stamp,
}

impl Image {
    /// Reads `path`, at most `cap` bytes ([`read_capped`]). The file must be a regular file,
    /// must not change while it is read (same stamp before and after), must not be empty, and
    /// must hold a complete shared library.
    ///
    /// With `in_memory`, the bytes go through one small buffer into a sealed in-memory file,
    /// hashed on the way, and are checked through a read-only mapping of that file, which the
    /// loader then maps ([`Bytes::Sealed`]): no heap copy of the whole file to fault in and
    /// read again. Where no in-memory file can be made, the file is read into memory.
    pub(crate) fn read(path: &Path, cap: u64, in_memory: bool) -> Result<Self, LoadError> {
        const LIMIT: &str = "HostOptions::max_library_bytes";
        let ((bytes, hash), metadata) = if in_memory {
            read_capped_with(path, cap, LIMIT, |file, limit| {
                Ok(match Sealed::copy(path, file, limit)? {
                    Copied::Sealed(sealed, len, hash) => ((Bytes::Sealed(sealed), Some(hash)), len),
                    Copied::Unsupported => {
                        let bytes = read_at_most(file, limit)?;
                        let len = bytes.len() as u64;
                        ((Bytes::Heap(bytes), None), len)
                    }
                })
            })
        } else {
            read_capped(path, cap, LIMIT)
                .map(|read| ((Bytes::Heap(read.bytes), None), read.metadata))
        }
        .map_err(|e| load_error(path, e))?;
        let stamp = Stamp::from_metadata(&metadata);
        let stamp = stamp.unwrap_or_else(|| unreachable!("from_metadata always gives a stamp"));
        if bytes.is_empty() {
            return Err(LoadError::new(
                path,
                LoadErrorKind::Empty,
                "the file is empty (0 bytes): rebuild the plugin or remove the file",
            ));
        }
        check_image(&bytes).map_err(|r| LoadError::new(path, LoadErrorKind::NotALibrary, r))?;
        let hash = hash.unwrap_or_else(|| xxhash_rust::xxh3::xxh3_128(&bytes));
        Ok(Self { bytes, hash, stamp })
    }
}

/// The [`LoadError`] for a library file that could not be read, with what to do.
fn load_error(path: &Path, error: ReadError) -> LoadError {
    let (kind, fix) = match error.kind {
        ReadErrorKind::Missing => {
            let reason = "the file went away while it was read (being replaced?); it is read \
                          again at its next change";
            return LoadError::new(path, LoadErrorKind::Changing, reason);
        }
        ReadErrorKind::Changing => (
            LoadErrorKind::Changing,
            "it is read again at its next change",
        ),
        ReadErrorKind::NotAFile if error.unbuilt => (
            LoadErrorKind::NotAFile,
            "not built yet: run `cargo build` in its crate (it is loaded at the build's end)",
        ),
        ReadErrorKind::NotAFile => (
            LoadErrorKind::NotAFile,
            "remove it, or put a plugin library there",
        ),
        ReadErrorKind::TooLarge => (
            LoadErrorKind::TooLarge,
            "remove it, or raise the limit if it really is a plugin",
        ),
        ReadErrorKind::Io => (LoadErrorKind::Io, "check that the host may read this file"),
    };
    LoadError::new(path, kind, format!("{}; {fix}", error.reason))
}

/// Checks that the bytes are a complete shared library before the dynamic loader maps them: a
/// truncated library would be mapped past its end and crash the process with SIGBUS on first
/// touch, so every segment must lie inside the file.
fn check_image(bytes: &[u8]) -> Result<(), String> {
    use object::{Object, ObjectSegment};
    let len = bytes.len() as u64;
    let image = object::File::parse(bytes).map_err(|e| {
        format!(
            "not a loadable shared library (truncated or corrupt?): {e}; rebuild it or remove it"
        )
    })?;
    for segment in image.segments() {
        let (offset, size) = segment.file_range();
        if offset.saturating_add(size) > len {
            return Err(format!(
                "truncated: the library needs {} bytes but the file has {len}; rebuild it or \
                 copy it again",
                offset.saturating_add(size)
            ));
        }
    }
    Ok(())
}

/// The SHA-256 of `bytes`, in hex: how the audit and `inspect` name a library's build.
pub(crate) use crate::hash::sha256_hex;
