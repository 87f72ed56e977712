//! Private copies in memory (Linux): the bytes already read go into an anonymous file made with
//! `memfd_create`, which the dynamic loader opens as `/proc/self/fd/N`.
//!
//! Why this is as safe as a file copy, and what it takes:
//!
//! - Each in-memory file is a new inode, so the dynamic loader's check for an image it already
//!   has (same device and inode) never matches an older generation while that one stays
//!   mapped (it always does: abi_stable never unloads).
//! - glibc also matches the *name* passed to `dlopen` against every name it has loaded, before
//!   it opens anything. A file descriptor's number is reused once it is closed, so the plain
//!   `/proc/self/fd/7` of the next load would be answered with the previous library. Every
//!   path handed out is therefore new to this process: a number's second use gets an extra
//!   `/` (`/proc/self/fd//7`, which the kernel reads the same), its third two, and so on. A
//!   path that would grow past [`MAX_PATH`] is refused, and the load falls back to a file copy.
//! - It is sealed once written (no write, no shrink, no growth, no further seal), so nothing
//!   that finds it (`/proc/<pid>/fd/N` while it is open) can change the code under the mapping,
//!   and it can never be truncated under it (SIGBUS). Sealing is defence in depth: if it
//!   fails, the load goes on.
//! - The descriptor is closed once the library is loaded; the mapping keeps the memory.
//! - Named `toolhost:<file name>`, so `/proc/<pid>/maps` says which library a mapping is.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

use rustix::fs::{MemfdFlags, SealFlags};

/// The longest path handed to the dynamic loader (PATH_MAX is 4096).
const MAX_PATH: usize = 3072;

/// Whether loading from in-memory files can work here: `/proc` is mounted.
pub(super) fn available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(|| Path::new("/proc/self/fd").is_dir())
}

/// A library's bytes in a sealed in-memory file, open until dropped.
pub(super) struct InMemory {
    _file: File,
    path: PathBuf,
}

impl InMemory {
    /// An in-memory file holding `bytes` (read from `source`, which names it).
    pub(super) fn new(source: &Path, bytes: &[u8]) -> io::Result<Self> {
        let name = source
            .file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default();
        let mut name = format!("toolhost:{name}");
        while name.len() > 240 {
            name.pop(); // the kernel takes at most 249 bytes
        }
        let mut file = File::from(create(&name)?);
        file.write_all(bytes)?;
        let seals = SealFlags::WRITE | SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL;
        if let Err(e) = rustix::fs::fcntl_add_seals(&file, seals) {
            tracing::debug!(
                "cannot seal the in-memory copy of {}: {e}",
                source.display()
            );
        }
        let path = fresh_path(file.as_raw_fd())?;
        Ok(Self { _file: file, path })
    }

    /// The path the dynamic loader opens it by (new to this process).
    pub(super) fn path(&self) -> &Path {
        &self.path
    }
}

/// `memfd_create(name)`, close-on-exec and sealable, and executable where the kernel knows
/// the flag (Linux 6.3 and later: otherwise a `vm.memfd_noexec` policy could make it
/// non-executable, and the kernel warns about a memfd made without saying).
fn create(name: &str) -> io::Result<std::os::fd::OwnedFd> {
    static EXEC_FLAG: AtomicBool = AtomicBool::new(true);
    let flags = MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING;
    if EXEC_FLAG.load(Ordering::Relaxed) {
        match rustix::fs::memfd_create(name, flags | MemfdFlags::EXEC) {
            Err(rustix::io::Errno::INVAL) => EXEC_FLAG.store(false, Ordering::Relaxed),
            done => return done.map_err(io::Error::from),
        }
    }
    rustix::fs::memfd_create(name, flags).map_err(io::Error::from)
}

/// `/proc/self/fd/<fd>`, with as many extra slashes as this number was handed out before in
/// this process: a path the dynamic loader has never seen.
fn fresh_path(fd: RawFd) -> io::Result<PathBuf> {
    static USES: Mutex<Option<HashMap<RawFd, usize>>> = Mutex::new(None);
    let mut uses = USES.lock().unwrap_or_else(|e| e.into_inner());
    let count = uses.get_or_insert_with(HashMap::new).entry(fd).or_insert(0);
    let path = format!("/proc/self/fd/{}{fd}", "/".repeat(*count));
    if path.len() > MAX_PATH {
        return Err(io::Error::other(
            "this descriptor number was used for too many loads",
        ));
    }
    *count += 1;
    Ok(PathBuf::from(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_path_is_new() {
        let a = fresh_path(1_000_000).unwrap();
        let b = fresh_path(1_000_000).unwrap();
        assert_eq!(a, Path::new("/proc/self/fd/1000000"));
        assert_eq!(b, Path::new("/proc/self/fd//1000000"));
    }

    #[test]
    fn holds_the_bytes_sealed() {
        let file = InMemory::new(Path::new("/x/lib.so"), b"hello").unwrap();
        assert_eq!(std::fs::read(file.path()).unwrap(), b"hello");
        let mut writer = std::fs::OpenOptions::new()
            .write(true)
            .open(file.path())
            .unwrap();
        assert!(writer.write_all(b"x").is_err(), "sealed against writes");
    }
}
