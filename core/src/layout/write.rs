//! Writing a file so that a reader sees the old bytes or the new ones, never a part.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Replaces the file at `path` (or the target of the link at `path`) with `bytes`: written to
/// a new file in the same folder, flushed, renamed over it, and the folder flushed. The
/// file's permissions are kept.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_atomically_with(path, bytes, true)
}

/// [`write_atomically`] for a file only its owner may read (mode 0600 on Unix, whatever the
/// mode of the file it replaces): state that holds a peer's text.
#[cfg(feature = "mcp")]
pub(crate) fn write_privately(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_atomically_as(path, bytes, true, true)
}

/// [`write_atomically`], flushing the file and its folder to the disk only when `durable`
/// (a reader still sees the old bytes or the new ones; after a power loss, maybe the old).
pub(crate) fn write_atomically_with(path: &Path, bytes: &[u8], durable: bool) -> io::Result<()> {
    write_atomically_as(path, bytes, durable, false)
}

/// [`write_atomically_with`], the new file private to its owner if `private`.
fn write_atomically_as(path: &Path, bytes: &[u8], durable: bool, private: bool) -> io::Result<()> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let target = match fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => fs::canonicalize(path)?,
        _ => path.to_owned(),
    };
    let dir = match target.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_owned(),
        _ => PathBuf::from("."),
    };
    fs::create_dir_all(&dir)?;
    let name = target.file_name().unwrap_or_default().to_string_lossy();
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let temp = dir.join(format!(".{name}.{}.{n}.tmp", std::process::id()));
    let written = (|| {
        let mut options = fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        if private {
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        }
        let mut file = options.open(&temp)?;
        match fs::metadata(&target) {
            Ok(_) if private => {}
            Ok(meta) => file.set_permissions(meta.permissions())?,
            Err(_) => {}
        }
        file.write_all(bytes)?;
        if durable {
            file.sync_all()?;
        }
        drop(file);
        fs::rename(&temp, &target)?;
        match durable {
            true => sync_dir(&dir),
            false => Ok(()),
        }
    })();
    if written.is_err() {
        let _ = fs::remove_file(&temp);
    }
    written
}

/// Flushes a folder's entries (the rename) to the disk, where the system allows it.
fn sync_dir(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    fs::File::open(dir)?.sync_all()?;
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}
