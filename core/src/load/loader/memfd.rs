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
use std::io::{self, Read, Seek, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

use rustix::fs::{MemfdFlags, SealFlags};

use crate::sync::lock;

/// The longest path handed to the dynamic loader (PATH_MAX is 4096).
const MAX_PATH: usize = 3072;

/// Whether loading from in-memory files can work here: `/proc` is mounted.
pub(super) fn available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(|| Path::new("/proc/self/fd").is_dir())
}

/// What an in-memory copy is sealed against: writes, shrinking, growing, further seals.
const SEALS: SealFlags = SealFlags::WRITE
    .union(SealFlags::SHRINK)
    .union(SealFlags::GROW)
    .union(SealFlags::SEAL);

/// A library's bytes in a sealed in-memory file, open until dropped.
pub(super) struct InMemory {
    _file: File,
    path: PathBuf,
}

impl InMemory {
    /// An in-memory file holding `bytes` (read from `source`, which names it).
    pub(super) fn new(source: &Path, bytes: &[u8]) -> io::Result<Self> {
        let mut file = File::from(create(&name_for(source))?);
        file.write_all(bytes)?;
        if let Err(e) = rustix::fs::fcntl_add_seals(&file, SEALS) {
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

    /// The sealed file itself (for worker processes to inherit).
    pub(super) fn into_file(self) -> File {
        self._file
    }
}

/// A library file's bytes in a sealed in-memory file, mapped read-only so that they can be
/// checked where they are: the bytes hashed, checked and loaded are the same, and nothing can
/// change them once sealed.
pub(crate) struct Sealed {
    file: File,
    map: std::ptr::NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is read-only and owned by this value (unmapped on drop), and the file
// under it is sealed against writes and truncation.
unsafe impl Send for Sealed {}
unsafe impl Sync for Sealed {}

/// What [`Sealed::copy`] gives.
pub(crate) enum Copied {
    /// The sealed copy, how many bytes the file gave (more than the limit: it grew), and their
    /// XXH3-128.
    Sealed(Sealed, u64, u128),
    /// No in-memory file could be made or written, or the file is empty: the file is back
    /// at its start, for the caller to read another way.
    Unsupported,
}

/// The bytes read and written at a time: small enough to stay in the CPU's cache between the
/// read, the hash and the write, and to come from the allocator's reused memory.
const CHUNK: usize = 64 * 1024;

impl Sealed {
    /// Copies `from` (a regular file, at its start) into a new in-memory file named after
    /// `source`, until its end or until more than `limit` bytes came, hashing the bytes on the
    /// way; then seals and maps it.
    ///
    /// The bytes go through one small buffer: read, hashed, written. A whole-file buffer
    /// would cost a fresh page for every 4 KiB of library (on a small virtual machine about
    /// as much as the copy itself), and a second pass over bytes no longer in the cache.
    pub(crate) fn copy(source: &Path, from: &mut File, limit: u64) -> io::Result<Copied> {
        let Ok(memfd) = create(&name_for(source)) else {
            return Ok(Copied::Unsupported);
        };
        let mut file = File::from(memfd);
        let mut hasher = xxhash_rust::xxh3::Xxh3Default::new();
        let mut chunk = vec![0u8; CHUNK];
        let mut total: u64 = 0;
        // Whole chunks are asked for even near the limit, as `read_at_most` does.
        while total <= limit {
            match from.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => {
                    hasher.update(&chunk[..n]);
                    if let Err(e) = file.write_all(&chunk[..n]) {
                        // Out of memory for it (a memory limit, a full tmpfs quota)?
                        tracing::debug!("cannot write an in-memory file: {e}");
                        return rewind(from);
                    }
                    total += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if total == 0 {
            return rewind(from); // empty: nothing to map (and refused as empty)
        }
        if let Err(e) = rustix::fs::fcntl_add_seals(&file, SEALS) {
            tracing::debug!("cannot seal an in-memory file: {e}");
            return rewind(from);
        }
        let Ok(len) = usize::try_from(total) else {
            return rewind(from);
        };
        // SAFETY: a new read-only shared mapping of a file sealed against writes and
        // truncation (so never past its end); unmapped only on drop. Not populated: the usual
        // load touches only the headers through it.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        let map = match std::ptr::NonNull::new(map.cast::<u8>()) {
            Some(map) if map.as_ptr() != libc::MAP_FAILED.cast() => map,
            _ => {
                tracing::debug!(
                    "cannot map an in-memory file: {}",
                    io::Error::last_os_error()
                );
                return rewind(from);
            }
        };
        let sealed = Self { file, map, len };
        Ok(Copied::Sealed(sealed, total, hasher.digest128()))
    }

    /// The bytes.
    pub(crate) fn bytes(&self) -> &[u8] {
        // SAFETY: `len` bytes mapped read-only for the life of `self`, which nothing changes.
        unsafe { std::slice::from_raw_parts(self.map.as_ptr(), self.len) }
    }

    /// A path the dynamic loader opens it by (new to this process).
    pub(crate) fn path(&self) -> io::Result<PathBuf> {
        fresh_path(self.file.as_raw_fd())
    }

    /// A second descriptor of the sealed file (close-on-exec), for worker processes to inherit.
    pub(crate) fn file(&self) -> io::Result<File> {
        self.file.try_clone()
    }
}

impl Drop for Sealed {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `copy`, not used after this.
        unsafe { libc::munmap(self.map.as_ptr().cast(), self.len) };
    }
}

/// [`Copied::Unsupported`], with `from` back at its start.
fn rewind(from: &mut File) -> io::Result<Copied> {
    from.seek(io::SeekFrom::Start(0))?;
    Ok(Copied::Unsupported)
}

/// `toolhost:<file name>`, within what the kernel takes.
fn name_for(source: &Path) -> String {
    let name = source
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    let mut name = format!("toolhost:{name}");
    while name.len() > 240 {
        name.pop(); // the kernel takes at most 249 bytes
    }
    name
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
    let mut uses = lock(&USES);
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
    fn a_copy_holds_the_bytes_it_hashed_sealed() {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("lib.so");
        // Several chunks and a part of one.
        let bytes: Vec<u8> = (0..3 * CHUNK + 1234).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&source, &bytes).unwrap();
        let mut from = File::open(&source).unwrap();
        let Copied::Sealed(sealed, len, hash) = Sealed::copy(&source, &mut from, 1 << 30).unwrap()
        else {
            panic!("no in-memory file");
        };
        assert_eq!(len, bytes.len() as u64);
        assert_eq!(
            hash,
            xxhash_rust::xxh3::xxh3_128(&bytes),
            "the one-shot hash"
        );
        assert_eq!(sealed.bytes(), &bytes[..]);
        let path = sealed.path().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), bytes);
        let mut writer = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        assert!(writer.write_all(b"x").is_err(), "sealed against writes");
        assert!(writer.set_len(1).is_err(), "sealed against shrinking");
    }

    #[test]
    fn a_copy_stops_after_the_limit_and_an_empty_file_is_not_copied() {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("lib.so");
        std::fs::write(&source, vec![1u8; 2 * CHUNK]).unwrap();
        let mut from = File::open(&source).unwrap();
        let Copied::Sealed(_, len, _) = Sealed::copy(&source, &mut from, 10).unwrap() else {
            panic!("no in-memory file");
        };
        assert!(len > 10 && len <= CHUNK as u64, "{len}");
        std::fs::write(&source, b"").unwrap();
        let mut from = File::open(&source).unwrap();
        assert!(matches!(
            Sealed::copy(&source, &mut from, 10).unwrap(),
            Copied::Unsupported
        ));
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
