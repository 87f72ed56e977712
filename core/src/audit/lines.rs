//! Reading the log's lines with a cap on each: forwards for `verify`, backwards from the end
//! for `tail` and for the writer's view of the chain's tail. No file content makes either
//! read more than a bounded amount into memory.

use std::fs::File;
use std::io::{self, BufRead, Read, Seek, SeekFrom};

/// The longest line read: a longer one is reported, never held whole.
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// One line as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RawLine {
    /// A line ended by a newline (the newline not included).
    Complete(Vec<u8>),
    /// The file's last bytes, with no newline after them.
    Incomplete(Vec<u8>),
    /// A line longer than [`MAX_LINE_BYTES`].
    TooLong,
}

/// Reads the next line of `reader` into `buf` (cleared first), at most [`MAX_LINE_BYTES`]
/// of it; `None` at the end.
pub(crate) fn next_line<R: BufRead>(
    reader: &mut R,
    buf: &mut Vec<u8>,
) -> io::Result<Option<RawLine>> {
    buf.clear();
    let read = reader
        .by_ref()
        .take(MAX_LINE_BYTES as u64 + 1)
        .read_until(b'\n', buf)?;
    if read == 0 {
        return Ok(None);
    }
    if buf.last() == Some(&b'\n') {
        buf.pop();
        return Ok(Some(RawLine::Complete(std::mem::take(buf))));
    }
    if buf.len() > MAX_LINE_BYTES {
        return Ok(Some(RawLine::TooLong));
    }
    Ok(Some(RawLine::Incomplete(std::mem::take(buf))))
}

/// The last `n` lines of the first `len` bytes of `file`, oldest first. Reads backwards in
/// growing chunks and at most `(n + 1) * (MAX_LINE_BYTES + 1)` bytes.
pub(crate) fn last_lines(file: &File, len: u64, n: usize) -> io::Result<Vec<RawLine>> {
    if n == 0 || len == 0 {
        return Ok(Vec::new());
    }
    let limit = (n as u64 + 1).saturating_mul(MAX_LINE_BYTES as u64 + 1);
    let floor = len.saturating_sub(limit);
    let mut chunks: Vec<Vec<u8>> = Vec::new();
    let mut pos = len;
    let mut newlines = 0;
    let mut needed = None;
    let mut chunk_len: u64 = 8 << 10;
    while pos > floor {
        let size = chunk_len.min(pos - floor);
        pos -= size;
        let mut chunk = vec![0; size as usize];
        let mut reader = file;
        reader.seek(SeekFrom::Start(pos))?;
        reader.read_exact(&mut chunk)?;
        // The newline that ends the file's last line does not start a line.
        let needed = *needed.get_or_insert(n + usize::from(chunk.last() == Some(&b'\n')));
        newlines += memchr::memchr_iter(b'\n', &chunk).count();
        chunks.push(chunk);
        if newlines >= needed {
            break;
        }
        chunk_len = (chunk_len * 2).min(MAX_LINE_BYTES as u64);
    }
    chunks.reverse();
    let data = chunks.concat();
    Ok(split_tail(&data, pos == 0, n))
}

/// The last `n` lines of `data`, the file's bytes from some offset to its end; `at_start`
/// says whether that offset is the file's start (else the bytes before the first newline
/// are the end of a line that starts earlier).
fn split_tail(data: &[u8], at_start: bool, n: usize) -> Vec<RawLine> {
    let ends_complete = data.last() == Some(&b'\n');
    let body = if ends_complete {
        &data[..data.len() - 1]
    } else {
        data
    };
    // Where each of the last `n` lines starts, last first.
    let mut starts: Vec<usize> = memchr::memrchr_iter(b'\n', body)
        .take(n)
        .map(|newline| newline + 1)
        .collect();
    if starts.len() < n {
        starts.push(0);
    }
    starts.reverse();
    let mut out = Vec::with_capacity(starts.len());
    for (k, &start) in starts.iter().enumerate() {
        let last = k + 1 == starts.len();
        let end = if last { body.len() } else { starts[k + 1] - 1 };
        let piece = &body[start..end];
        let line = if start == 0 && !at_start || piece.len() > MAX_LINE_BYTES {
            // Read back to the limit without finding where it starts: too long.
            RawLine::TooLong
        } else if last && !ends_complete {
            RawLine::Incomplete(piece.to_vec())
        } else {
            RawLine::Complete(piece.to_vec())
        };
        out.push(line);
    }
    out
}

/// Where the last line of the file's first `end` bytes starts: just after the last newline
/// before it (a newline at `end - 1` ends that line), or 0. Reads backwards in 64 KiB chunks,
/// however long the line is.
pub(crate) fn last_line_start(file: &File, end: u64) -> io::Result<u64> {
    let mut pos = end.saturating_sub(1); // the byte at `end - 1` may be the line's newline
    let mut chunk = vec![0u8; 64 << 10];
    while pos > 0 {
        let size = (chunk.len() as u64).min(pos);
        let start = pos - size;
        let mut reader = file;
        reader.seek(SeekFrom::Start(start))?;
        let piece = &mut chunk[..size as usize];
        reader.read_exact(piece)?;
        if let Some(newline) = memchr::memrchr(b'\n', piece) {
            return Ok(start + newline as u64 + 1);
        }
        pos = start;
    }
    Ok(0)
}

/// The line of `file` from `start` to `end` (its newline, if any, not included), or
/// [`RawLine::TooLong`].
pub(crate) fn line_at(file: &File, start: u64, end: u64) -> io::Result<RawLine> {
    let len = end - start;
    if len > MAX_LINE_BYTES as u64 + 1 {
        return Ok(RawLine::TooLong);
    }
    let mut bytes = vec![0u8; len as usize];
    let mut reader = file;
    reader.seek(SeekFrom::Start(start))?;
    reader.read_exact(&mut bytes)?;
    if bytes.last() == Some(&b'\n') {
        bytes.pop();
        return Ok(match bytes.len() > MAX_LINE_BYTES {
            true => RawLine::TooLong,
            false => RawLine::Complete(bytes),
        });
    }
    Ok(match bytes.len() > MAX_LINE_BYTES {
        true => RawLine::TooLong,
        false => RawLine::Incomplete(bytes),
    })
}
