//! A library file read into memory: its bytes, their hash, and the file's identity on disk.
//!
//! Everything the loader does works on one [`Image`]: the headers are checked on these bytes, the
//! private copy is written from these bytes, and the hash that tells a real rebuild from an
//! identical rewrite is taken of these bytes. So a file that is being written while it is read
//! can never be half checked and half loaded.

use std::fs;
use std::io::Read;
use std::path::Path;
use std::time::SystemTime;

use crate::error::{LoadError, LoadErrorKind};

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

/// The content of a library file at one moment.
pub(crate) struct Image {
    pub(crate) bytes: Vec<u8>,
    /// XXH3-128 of `bytes`.
    pub(crate) hash: u128,
    pub(crate) stamp: Stamp,
}

impl Image {
    /// Reads `path`. The file must not change while it is read (same stamp before and after),
    /// must not be empty, and must hold a complete shared library.
    pub(crate) fn read(path: &Path) -> Result<Self, LoadError> {
        let io = |e: std::io::Error| match e.kind() {
            std::io::ErrorKind::NotFound => LoadError::new(
                path,
                LoadErrorKind::Changing,
                "the file went away while it was read (being replaced?); it is read again at \
                 its next change",
            ),
            _ => LoadError::new(
                path,
                LoadErrorKind::Io,
                format!("cannot read it: {e}; check that the host may read this file"),
            ),
        };
        // Stamps are taken of the open file, not the path: a rename over the path while it
        // is read does not affect these bytes, and the next lookup sees the new file's stamp.
        let mut file = fs::File::open(path).map_err(io)?;
        let stamp = |file: &fs::File| file.metadata().ok().and_then(|m| Stamp::from_metadata(&m));
        let before = stamp(&file).ok_or_else(|| io(std::io::ErrorKind::NotFound.into()))?;
        let mut bytes = Vec::with_capacity(before.len as usize);
        file.read_to_end(&mut bytes).map_err(io)?;
        if stamp(&file) != Some(before) || bytes.len() as u64 != before.len {
            return Err(LoadError::new(
                path,
                LoadErrorKind::Changing,
                "the file changed while it was read (still being written?); it is read again at \
                 its next change",
            ));
        }
        if bytes.is_empty() {
            return Err(LoadError::new(
                path,
                LoadErrorKind::Empty,
                "the file is empty (0 bytes): rebuild the plugin or remove the file",
            ));
        }
        check_image(&bytes).map_err(|r| LoadError::new(path, LoadErrorKind::NotALibrary, r))?;
        let hash = xxhash_rust::xxh3::xxh3_128(&bytes);
        Ok(Self {
            bytes,
            hash,
            stamp: before,
        })
    }
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
