//! Reading a file from the layers: the one place that opens a library, a prompt fragment, the
//! secrets file or any other file the host reads under its root.
//!
//! A file is read only if it is a regular file once symbolic links are followed (at most
//! [`MAX_LINK_HOPS`] of them; a loop is an error), and only up to a size cap. Its type is
//! checked before it is opened, and it is opened without blocking, so a FIFO, a device or a
//! `/proc` file can neither block the host nor fill its memory. Memory grows with the bytes
//! read, never with the size the file claims (a sparse 100 GiB file is refused by its size,
//! not allocated).

/// [`HostOptions::max_library_bytes`](crate::HostOptions::max_library_bytes) by default: 256 MiB.
pub const DEFAULT_MAX_LIBRARY_BYTES: u64 = 256 << 20;

/// [`HostOptions::max_text_bytes`](crate::HostOptions::max_text_bytes) by default: 1 MiB.
pub const DEFAULT_MAX_TEXT_BYTES: u64 = 1 << 20;

use std::fmt;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// Symbolic links followed in a row before a path is refused (the limit Linux applies).
pub const MAX_LINK_HOPS: usize = 40;

/// What kept a file from being read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReadErrorKind {
    /// Nothing at the path (not even a dangling link).
    Missing,
    /// A directory, a dangling link, a link loop, a FIFO, a device, a socket or a file whose
    /// content does not match its size (`/proc`).
    NotAFile,
    /// Larger than the cap.
    TooLarge,
    /// The file changed while it was read.
    Changing,
    /// The operating system refused to open or read it.
    Io,
}

/// Why a file was not read: the kind, and one line saying what the path is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadError {
    pub(crate) kind: ReadErrorKind,
    pub(crate) reason: String,
    /// A dangling link into a cargo `target/` folder: a build that has not been made yet
    /// (`toolhost new` links the layer to the crate's build before its first `cargo build`).
    pub(crate) unbuilt: bool,
}

impl std::error::Error for ReadError {}

impl ReadError {
    /// What kept the file from being read.
    pub fn kind(&self) -> ReadErrorKind {
        self.kind
    }

    fn new(kind: ReadErrorKind, reason: impl Into<String>) -> Self {
        Self {
            kind,
            reason: reason.into(),
            unbuilt: false,
        }
    }
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reason)
    }
}

/// A file read whole: its bytes, and its metadata as they were read.
pub(crate) struct FileBytes {
    pub(crate) bytes: Vec<u8>,
    pub(crate) metadata: fs::Metadata,
}

/// The metadata of the regular file at `path` after following links, or why it is not one.
pub(crate) fn regular_file(path: &Path) -> Result<fs::Metadata, ReadError> {
    let mut current = path.to_owned();
    let mut seen: Vec<PathBuf> = Vec::new();
    // What the last link says, as written: what the reason shows.
    let mut target = PathBuf::new();
    loop {
        let meta = match fs::symlink_metadata(&current) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && seen.is_empty() => {
                return Err(ReadError::new(
                    ReadErrorKind::Missing,
                    "the file does not exist",
                ));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let reason = format!(
                    "a symbolic link to {}, which does not exist",
                    Escaped(&target)
                );
                let mut error = ReadError::new(ReadErrorKind::NotAFile, reason);
                error.unbuilt = target
                    .components()
                    .any(|c| c.as_os_str() == std::ffi::OsStr::new("target"));
                return Err(error);
            }
            Err(e) => {
                return Err(ReadError::new(
                    ReadErrorKind::Io,
                    format!("cannot read it: {e}"),
                ));
            }
        };
        if !meta.file_type().is_symlink() {
            return match what_it_is(&meta) {
                None => Ok(meta),
                Some(what) if seen.is_empty() => Err(not_a_file(what.to_owned())),
                Some(what) => Err(not_a_file(format!(
                    "a symbolic link to {}, {what}",
                    Escaped(&target)
                ))),
            };
        }
        if seen.contains(&current) {
            return Err(not_a_file("a symbolic link loop".to_owned()));
        }
        if seen.len() >= MAX_LINK_HOPS {
            return Err(not_a_file(format!(
                "more than {MAX_LINK_HOPS} symbolic links in a row (a loop?)"
            )));
        }
        target = fs::read_link(&current)
            .map_err(|e| ReadError::new(ReadErrorKind::Io, format!("cannot read the link: {e}")))?;
        let next = match current.parent() {
            Some(dir) => dir.join(&target),
            None => target.clone(),
        };
        seen.push(std::mem::replace(&mut current, next));
    }
}

fn not_a_file(what: String) -> ReadError {
    ReadError::new(
        ReadErrorKind::NotAFile,
        format!("{what}, not a regular file"),
    )
}

/// What a file that is not a regular file is (`None` for a regular file).
fn what_it_is(meta: &fs::Metadata) -> Option<&'static str> {
    let kind = meta.file_type();
    if kind.is_file() {
        return None;
    }
    if kind.is_dir() {
        return Some("a directory");
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_fifo() {
            return Some("a named pipe (FIFO)");
        }
        if kind.is_char_device() {
            return Some("a character device");
        }
        if kind.is_block_device() {
            return Some("a block device");
        }
        if kind.is_socket() {
            return Some("a socket");
        }
    }
    Some("a special file")
}

/// Reads the regular file at `path` (see the module docs), at most `cap` bytes; `what` names
/// the limit in the error (`HostOptions::max_library_bytes`).
pub(crate) fn read_capped(path: &Path, cap: u64, what: &str) -> Result<FileBytes, ReadError> {
    let (bytes, metadata) = read_capped_with(path, cap, what, |file, limit| {
        let bytes = read_at_most(file, limit)?;
        let len = bytes.len() as u64;
        Ok((bytes, len))
    })?;
    Ok(FileBytes { bytes, metadata })
}

/// [`read_capped`], with the bytes read by `read`: given the opened file and its size, it reads
/// until the end or until more than that size came, and says how many bytes it read.
pub(crate) fn read_capped_with<T>(
    path: &Path,
    cap: u64,
    what: &str,
    read: impl FnOnce(&mut fs::File, u64) -> std::io::Result<(T, u64)>,
) -> Result<(T, fs::Metadata), ReadError> {
    let checked = regular_file(path)?;
    let too_large = |len: u64| {
        ReadError::new(
            ReadErrorKind::TooLarge,
            format!("the file is {len} bytes, over the limit of {cap} bytes ({what})"),
        )
    };
    if checked.len() > cap {
        return Err(too_large(checked.len()));
    }
    let io = io_error;
    let (mut file, before) = open_checked(path)?;
    if before.len() > cap {
        return Err(too_large(before.len()));
    }
    let (bytes, read_len) = read(&mut file, before.len()).map_err(io)?;
    let after = file.metadata().map_err(io)?;
    if stamp(&after) != stamp(&before) {
        return Err(ReadError::new(
            ReadErrorKind::Changing,
            "the file changed while it was read (still being written?)",
        ));
    }
    if read_len != before.len() {
        let (size, more) = (before.len(), read_len > before.len());
        let gives = if more { "more" } else { "fewer" };
        return Err(not_a_file(format!(
            "a file whose size says {size} bytes but reading it gives {gives} (a /proc or /sys \
             file?)"
        )));
    }
    Ok((bytes, before))
}

/// Opens the regular file at `path` for reading (see the module docs: links followed, its type
/// checked before and after it is opened, never blocking), for a reader that streams it with
/// its own bounds (the audit log's line reader). Returns the file and its metadata as opened.
pub(crate) fn open_regular(path: &Path) -> Result<(fs::File, fs::Metadata), ReadError> {
    regular_file(path)?;
    open_checked(path)
}

/// Opens `path` without blocking and checks that what was opened is a regular file (the path
/// may have been replaced since it was checked).
fn open_checked(path: &Path) -> Result<(fs::File, fs::Metadata), ReadError> {
    let file = open_nonblocking(path).map_err(io_error)?;
    let metadata = file.metadata().map_err(io_error)?;
    if let Some(what) = what_it_is(&metadata) {
        return Err(not_a_file(format!("{what} (replaced while it was opened)")));
    }
    Ok((file, metadata))
}

/// An I/O error while opening or reading a checked file.
fn io_error(e: std::io::Error) -> ReadError {
    match e.kind() {
        std::io::ErrorKind::NotFound => ReadError::new(
            ReadErrorKind::Changing,
            "the file went away while it was read (being replaced?)",
        ),
        _ => ReadError::new(ReadErrorKind::Io, format!("cannot read it: {e}")),
    }
}

/// Whether `metadata` is a regular file's; else what it is instead (`a named pipe (FIFO)`).
pub(crate) fn not_regular(metadata: &fs::Metadata) -> Option<&'static str> {
    what_it_is(metadata)
}

/// Reads a text file (UTF-8) of at most `cap` bytes, as the host reads every file of its
/// layers: a FIFO, a device or a directory is refused without blocking, a file larger than
/// `cap` is refused before it is read (`what` names the cap in the error: `"a 1 MiB limit"`),
/// and the error is one line that names the path.
pub fn read_text(path: &Path, cap: u64, what: &str) -> Result<String, ReadError> {
    let read = read_capped(path, cap, what)?;
    String::from_utf8(read.bytes).map_err(|e| {
        ReadError::new(
            ReadErrorKind::Io,
            format!(
                "not UTF-8 text (invalid byte at offset {})",
                e.utf8_error().valid_up_to()
            ),
        )
    })
}

fn stamp(meta: &fs::Metadata) -> (u64, Option<SystemTime>) {
    (meta.len(), meta.modified().ok())
}

/// Reads until the end, or until more than `limit` bytes came (at most one chunk more); the
/// buffer grows with what arrives. Whole chunks are asked for even near the limit: some
/// `/proc` files refuse small reads.
pub(crate) fn read_at_most(file: &mut fs::File, limit: u64) -> std::io::Result<Vec<u8>> {
    const CHUNK: usize = 64 * 1024;
    let mut bytes = Vec::new();
    let mut chunk = vec![0u8; CHUNK];
    while bytes.len() as u64 <= limit {
        match file.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => bytes.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(bytes)
}

/// Opens `path` for reading without blocking: a FIFO swapped in after the check does not
/// wait for a writer (regular files ignore the flag).
fn open_nonblocking(path: &Path) -> std::io::Result<fs::File> {
    let mut options = fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK);
    }
    options.open(path)
}

/// A path written for one line: control characters (a line break, an escape sequence) are
/// escaped as in Rust string literals, and a leading `./` is left out; everything else is
/// written as is.
///
/// ```
/// use std::path::Path;
/// let path = Path::new("usr/tools/a\nb.so");
/// assert_eq!(toolhost::Escaped(path).to_string(), r"usr/tools/a\nb.so");
/// assert_eq!(toolhost::Escaped(Path::new("./usr/x.so")).to_string(), "usr/x.so");
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Escaped<'a>(pub &'a Path);

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `./usr/x` (under the root `.`) is shown as `usr/x`, as every other line names it.
        let path = match self.0.strip_prefix(".") {
            Ok(rest) if !rest.as_os_str().is_empty() => rest,
            _ => self.0,
        };
        let text = path.to_string_lossy();
        if !text.chars().any(char::is_control) {
            return f.write_str(&text);
        }
        for c in text.chars() {
            match c.is_control() {
                true => write!(f, "{}", c.escape_debug())?,
                false => write!(f, "{c}")?,
            }
        }
        Ok(())
    }
}

/// Text from a package (its description, a file's name, a source) or another untrusted
/// source, shown on the terminal
/// with every control character (terminal escapes, newlines) and every bidirectional or
/// invisible formatting character escaped (`\u{1b}`, `\u{202e}`): a package cannot draw or
/// reorder the lines around it.
///
/// ```
/// use toolhost::package::Shown;
/// assert_eq!(Shown("ok\u{1b}[2K\u{202e}").to_string(), "ok\\u{1b}[2K\\u{202e}");
/// assert_eq!(Shown("Greets — someone.").to_string(), "Greets — someone.");
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Shown<'a>(pub &'a str);

/// Whether `c` must be escaped when text from a package is shown: a control character, or a
/// bidirectional or invisible formatting one.
pub fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}'
                | '\u{200b}'..='\u{200f}'
                | '\u{2028}'..='\u{202e}'
                | '\u{2060}'..='\u{2069}'
                | '\u{feff}'
        )
}

impl std::fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for c in self.0.chars() {
            match needs_escape(c) {
                true => write!(f, "\\u{{{:x}}}", c as u32)?,
                false => std::fmt::Write::write_char(f, c)?,
            }
        }
        Ok(())
    }
}

/// Whether `path` is a plain relative path inside the package (`/`-separated, no `..`, no
/// empty or `.` parts, no backslash, no absolute path).
pub(crate) fn check_path(path: &str) -> Result<(), String> {
    let bad = path.is_empty()
        || path.starts_with('/')
        || path.contains('\\')
        || path.contains(':')
        || path.split('/').any(|part| {
            part.is_empty() || part == "." || part == ".." || part.chars().any(char::is_control)
        });
    match bad {
        true => Err(format!(
            "{path:?} is not a relative path inside the package (no `..`, no absolute path)"
        )),
        false => Ok(()),
    }
}

/// A place in a file as every message names it: `file:line` (as compilers print it, so a
/// terminal or an editor opens the file there), or the file alone when the line is not known;
/// the file's control characters escaped ([`Escaped`]).
#[derive(Debug, Clone, Copy)]
pub struct Location<'a> {
    file: &'a Path,
    line: Option<usize>,
}

impl<'a> Location<'a> {
    /// Line `line` (from 1) of `file`; `None` (or 0): the file alone.
    pub fn new(file: &'a Path, line: Option<usize>) -> Self {
        Self {
            file,
            line: line.filter(|&n| n > 0),
        }
    }
}

impl fmt::Display for Location<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", Escaped(self.file))?;
        match self.line {
            Some(line) => write!(f, ":{line}"),
            None => Ok(()),
        }
    }
}

/// The 1-based line of byte `offset` in `text` (an offset past the end is on the last line):
/// the one line number every error about a file of text gives ([`Location`] names the place).
pub(crate) fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}
