//! The package archive: a gzip-compressed tar with the manifest first and every other file
//! after it in path order, written deterministically (the same files give the same bytes:
//! mtime 0, owner 0, mode 0644 or 0755, no user names), and read entry by entry with each
//! path checked before anything is written.

use std::fs;
use std::io::{self, Read, Write};
use std::path::Path;

use super::manifest::{check_path, MANIFEST_FILE_NAME};
use super::{PackageError, PackageErrorKind};
use crate::layout::Escaped;

/// The most bytes a package may unpack to (all its files together): 1 GiB.
pub const MAX_UNPACKED_BYTES: u64 = 1 << 30;

/// The most entries a package may hold.
pub const MAX_ENTRIES: usize = 10_000;

/// One file to put in an archive: its path in the package, its bytes, and whether it is
/// executable (libraries are).
pub struct Entry {
    /// The path in the package, `/`-separated.
    pub path: String,
    /// The file's bytes.
    pub bytes: Vec<u8>,
    /// Mode 0755 instead of 0644.
    pub executable: bool,
}

/// Writes `entries` (the manifest first, then the others sorted by path) as a tar.gz to `out`,
/// through a temporary file renamed into place.
pub fn write_archive(out: &Path, mut entries: Vec<Entry>) -> Result<(), PackageError> {
    entries.sort_by(|a, b| {
        let key = |e: &Entry| (e.path != MANIFEST_FILE_NAME, e.path.clone());
        key(a).cmp(&key(b))
    });
    let gz = flate2::GzBuilder::new()
        .mtime(0)
        .write(Vec::new(), flate2::Compression::best());
    let mut tar = tar::Builder::new(gz);
    tar.mode(tar::HeaderMode::Deterministic);
    let failed = |e: io::Error| PackageError::io("cannot write", out, e);
    for entry in &entries {
        let mut header = tar::Header::new_gnu();
        header.set_size(entry.bytes.len() as u64);
        header.set_mode(if entry.executable { 0o755 } else { 0o644 });
        header.set_mtime(0);
        header.set_uid(0);
        header.set_gid(0);
        header.set_entry_type(tar::EntryType::Regular);
        tar.append_data(&mut header, &entry.path, entry.bytes.as_slice())
            .map_err(failed)?;
    }
    let bytes = tar
        .into_inner()
        .and_then(|gz| gz.finish())
        .map_err(failed)?;
    crate::layout::write_atomically(out, &bytes).map_err(failed)
}

/// Unpacks the archive `file` into the folder `dest` (which must exist and be empty).
///
/// Refused before anything of it is written outside `dest`, with one line: an entry with
/// `..`, an absolute path or another unsafe name, a link, a device or other special entry;
/// more than [`MAX_ENTRIES`] entries or [`MAX_UNPACKED_BYTES`] unpacked bytes; a file that
/// is not a gzip-compressed tar.
pub fn unpack(file: &Path, dest: &Path) -> Result<(), PackageError> {
    let archive = fs::File::open(file).map_err(|e| PackageError::io("cannot read", file, e))?;
    unpack_reader(archive, file, dest)
}

/// As [`unpack`], for the archive's bytes in `archive`, named `file` in messages.
pub fn unpack_reader(archive: impl Read, file: &Path, dest: &Path) -> Result<(), PackageError> {
    let to = Unpacking { file, dest };
    let not_archive = |e: io::Error| to.not_archive(e);
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(io::BufReader::new(archive)));
    let mut total: u64 = 0;
    let mut count = 0usize;
    // Raw entries: a GNU long name or a PAX header is an entry of its own here, so its size is
    // checked before a byte of it is read (the tar crate reads either whole into memory).
    let mut long_name: Option<Vec<u8>> = None;
    for entry in tar.entries().map_err(not_archive)?.raw(true) {
        let mut entry = entry.map_err(not_archive)?;
        count += 1;
        if count > MAX_ENTRIES {
            return Err(to.unsafe_entry(format!("more than {MAX_ENTRIES} entries")));
        }
        let kind = entry.header().entry_type();
        if to.extension_header(&mut entry, &mut long_name)? {
            continue;
        }
        let raw = long_name
            .take()
            .unwrap_or_else(|| entry.path_bytes().into_owned());
        let name = String::from_utf8_lossy(&raw).into_owned();
        let name = name.strip_prefix("./").unwrap_or(&name).to_owned();
        if kind.is_dir() {
            check_path(name.trim_end_matches('/'))
                .map_err(|why| to.unsafe_entry(format!("entry {why}")))?;
            continue;
        }
        if !kind.is_file() {
            return Err(to.unsafe_entry(format!(
                "entry {name:?} is a {} (a package holds regular files only)",
                entry_kind(kind)
            )));
        }
        check_path(&name).map_err(|why| to.unsafe_entry(format!("entry {why}")))?;
        let size = entry.header().size().map_err(not_archive)?;
        total = total.saturating_add(size);
        if total > MAX_UNPACKED_BYTES {
            return Err(to.unsafe_entry(format!(
                "it unpacks to more than {} MiB (a decompression bomb?)",
                MAX_UNPACKED_BYTES >> 20
            )));
        }
        to.write_file(&mut entry, &name, size)?;
    }
    if count == 0 {
        return Err(not_archive(io::Error::new(
            io::ErrorKind::InvalidData,
            "no entries",
        )));
    }
    Ok(())
}

/// One archive being unpacked: its name in messages and the folder it goes into.
struct Unpacking<'a> {
    file: &'a Path,
    dest: &'a Path,
}

impl Unpacking<'_> {
    /// The archive cannot be read as a gzip-compressed tar.
    fn not_archive(&self, e: io::Error) -> PackageError {
        PackageError::new(
            PackageErrorKind::NotAnArchive,
            format!(
                "{}: not a package archive (a .tar.gz made by `toolhost pack`): {e}",
                Escaped(self.file)
            ),
        )
    }

    /// The archive is refused: `why`.
    fn unsafe_entry(&self, why: String) -> PackageError {
        PackageError::new(
            PackageErrorKind::UnsafeArchive,
            format!(
                "{}: refused: {why}; nothing was installed",
                Escaped(self.file)
            ),
        )
    }

    /// Whether `entry` is a GNU long name or a PAX header (read, within its size limit, into
    /// `long_name` for the next entry), not an entry of its own.
    fn extension_header<R: Read>(
        &self,
        entry: &mut tar::Entry<'_, R>,
        long_name: &mut Option<Vec<u8>>,
    ) -> Result<bool, PackageError> {
        let kind = entry.header().entry_type();
        let extension = kind.is_gnu_longname()
            || kind.is_gnu_longlink()
            || kind.is_pax_local_extensions()
            || kind.is_pax_global_extensions();
        if !extension {
            return Ok(false);
        }
        let size = entry.header().size().map_err(|e| self.not_archive(e))?;
        if size > MAX_HEADER_BYTES {
            return Err(self.unsafe_entry(format!(
                "a long-name or PAX header of {size} bytes, over the limit of {} KiB (not written by `toolhost pack`)",
                MAX_HEADER_BYTES >> 10
            )));
        }
        let mut data = Vec::with_capacity(size as usize);
        entry
            .take(size)
            .read_to_end(&mut data)
            .map_err(|e| self.not_archive(e))?;
        if kind.is_gnu_longname() {
            while data.last() == Some(&0) {
                data.pop();
            }
            *long_name = Some(data);
        } else if kind.is_pax_local_extensions() {
            let path = pax_path(&data).map_err(|why| self.unsafe_entry(why))?;
            *long_name = path.or(long_name.take());
        } else if kind.is_gnu_longlink() {
            return Err(self
                .unsafe_entry("a long link name (a package holds regular files only)".to_owned()));
        }
        Ok(true)
    }

    /// The regular file `entry` written to `name` in the folder, at most `size` bytes (its
    /// header's size, which a lying stream cannot exceed); a name seen twice is refused.
    fn write_file<R: Read>(
        &self,
        entry: &mut tar::Entry<'_, R>,
        name: &str,
        size: u64,
    ) -> Result<(), PackageError> {
        let target = self.dest.join(name);
        if let Some(parent) = target.parent() {
            fs::create_dir_all(parent).map_err(|e| PackageError::io("cannot create", parent, e))?;
        }
        let mut out = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&target)
            .map_err(|e| match e.kind() {
                io::ErrorKind::AlreadyExists => {
                    self.unsafe_entry(format!("entry {name:?} appears twice"))
                }
                _ => PackageError::io("cannot write", &target, e),
            })?;
        let copied = io::copy(&mut entry.take(size), &mut out).map_err(|e| self.not_archive(e))?;
        if copied != size {
            return Err(self.not_archive(io::Error::new(io::ErrorKind::UnexpectedEof, "cut short")));
        }
        out.flush()
            .map_err(|e| PackageError::io("cannot write", &target, e))?;
        #[cfg(unix)]
        if entry.header().mode().is_ok_and(|m| m & 0o111 != 0) {
            use std::os::unix::fs::PermissionsExt as _;
            let _ = fs::set_permissions(&target, fs::Permissions::from_mode(0o755));
        }
        Ok(())
    }
}

/// The most bytes a GNU long name or a PAX header may hold: 4 KiB (a path in a package is
/// far shorter).
pub const MAX_HEADER_BYTES: u64 = 4 << 10;

/// The `path` of a PAX header's records (`LEN KEY=VALUE\n` each); a record this reader would
/// not apply as every other tar reader does (`size`, `linkpath`) refuses the archive.
fn pax_path(data: &[u8]) -> Result<Option<Vec<u8>>, String> {
    let mut path = None;
    let mut rest = data;
    while !rest.is_empty() {
        let space = rest.iter().position(|&b| b == b' ');
        let len = space
            .and_then(|at| std::str::from_utf8(&rest[..at]).ok())
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|&len| len > 0 && len <= rest.len());
        let (Some(at), Some(len)) = (space, len) else {
            return Err("a PAX header that is not records of `LEN KEY=VALUE`".to_owned());
        };
        let record = &rest[at + 1..len];
        let record = record.strip_suffix(b"\n").unwrap_or(record);
        let (key, value) = match record.iter().position(|&b| b == b'=') {
            Some(eq) => (&record[..eq], &record[eq + 1..]),
            None => return Err("a PAX record without `=`".to_owned()),
        };
        match key {
            b"path" => path = Some(value.to_vec()),
            b"size" | b"linkpath" | b"GNU.sparse.size" | b"GNU.sparse.map" => {
                return Err(format!(
                    "a PAX `{}` record (not written by `toolhost pack`)",
                    String::from_utf8_lossy(key)
                ));
            }
            _ => {}
        }
        rest = &rest[len..];
    }
    Ok(path)
}

fn entry_kind(kind: tar::EntryType) -> &'static str {
    match kind {
        tar::EntryType::Symlink => "symbolic link",
        tar::EntryType::Link => "hard link",
        tar::EntryType::Char | tar::EntryType::Block => "device",
        tar::EntryType::Fifo => "FIFO",
        _ => "special entry",
    }
}

#[cfg(test)]
mod tests {
    use super::pax_path;

    #[test]
    fn a_pax_header_gives_its_path_and_refuses_what_would_change_an_entry() {
        assert_eq!(
            pax_path(b"19 path=tools/x.so\n").unwrap(),
            Some(b"tools/x.so".to_vec())
        );
        assert_eq!(pax_path(b"14 mtime=12.5\n").unwrap(), None);
        assert!(pax_path(b"20 size=99999999999\n")
            .unwrap_err()
            .contains("`size`"));
        assert!(pax_path(b"99 path=x\n").is_err());
        assert!(pax_path(b"x path=x\n").is_err());
    }
}
