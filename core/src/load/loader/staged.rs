//! A library's private copy for worker processes ([isolated](crate::isolation) plugins).
//!
//! On Linux it is a sealed in-memory file (the image's own, or one written for it), or where
//! in-memory files cannot be used a file of mode 0600 in the loader's private folder, removed as
//! soon as it is open. Either way the host keeps the descriptor open, and each worker it starts
//! inherits it and loads `/proc/self/fd/N`: no copy that another process could read or
//! change sits in a folder. Elsewhere it is a 0600 file in the private folder, removed when no
//! worker needs it any more.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// A private copy of a library that workers load; dropped when no worker needs it.
#[derive(Debug)]
pub(crate) struct Staged {
    /// The open copy (in memory, or a file already removed), inherited by each worker.
    #[cfg(target_os = "linux")]
    file: File,
    /// What a worker opens.
    path: PathBuf,
}

impl Staged {
    /// A copy held by `file` (Linux: sealed in memory, or a removed file).
    #[cfg(target_os = "linux")]
    pub(super) fn open(file: File) -> Self {
        use std::os::fd::AsRawFd;
        let path = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
        Self { file, path }
    }

    /// A copy at `path` (not Linux), removed when dropped.
    #[cfg(not(target_os = "linux"))]
    pub(super) fn at(path: PathBuf) -> Self {
        Self { path }
    }

    /// The path a worker loads (in the worker's process, with
    /// [`inherited_fd`](Self::inherited_fd) kept open).
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The descriptor a worker must inherit (its close-on-exec flag cleared in the child).
    #[cfg(target_os = "linux")]
    pub(crate) fn inherited_fd(&self) -> Option<std::os::fd::RawFd> {
        use std::os::fd::AsRawFd;
        Some(self.file.as_raw_fd())
    }

    /// No descriptor to inherit: the worker opens the file by its path.
    #[cfg(not(target_os = "linux"))]
    pub(crate) fn inherited_fd(&self) -> Option<i32> {
        None
    }
}

#[cfg(not(target_os = "linux"))]
impl Drop for Staged {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Writes `bytes` to a new file at `path` that only this user can read (mode 0600 on Unix),
/// refusing one that exists; the file is returned open.
pub(super) fn write_private(path: &Path, bytes: &[u8]) -> io::Result<File> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path)?;
    file.write_all(bytes)?;
    Ok(file)
}
