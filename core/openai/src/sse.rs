//! Server-sent events read in linear time with a bound on each event.
//!
//! The reader keeps the bytes not yet read as lines in one buffer, remembers how far it has
//! already looked for a line end (so a long line arriving in many reads is searched once, not
//! again from its start at each read), and moves the unread rest to the buffer's front only
//! when it is at most as long as what was read before it (so every byte is moved a bounded
//! number of times). `eventsource-stream`, used before, searched its whole buffer again at
//! each read and copied the rest after each line: one event of 20 MB took 7.7 s.
//!
//! Only what a chat-completions stream uses is kept: the `data` lines of each event (joined
//! with a line feed, as the spec says). Comments and the `event`, `id` and `retry` fields are
//! read and dropped. Lines end with CR, LF or CR LF; a byte-order mark at the start is
//! skipped.

use std::fmt;

/// An event stream that cannot be read on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SseError {
    /// One event (its data, or a line not yet ended) is longer than the bound.
    TooLong {
        /// The bound, in bytes.
        max: usize,
    },
    /// An event's data is not UTF-8.
    NotUtf8,
}

impl fmt::Display for SseError {
    fn fmt(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooLong { max } => write!(out, "one event is longer than {max} bytes"),
            Self::NotUtf8 => out.write_str("an event is not UTF-8"),
        }
    }
}

/// Reads events out of the bytes of a stream, given in pieces of any size.
/// A buffer larger than this is given back once it is all read.
const KEPT_BUFFER: usize = 64 << 10;

#[derive(Debug)]
pub(crate) struct SseReader {
    /// Bytes received and not yet read as lines: from `start` on.
    buffer: Vec<u8>,
    start: usize,
    /// `buffer[start..scanned]` holds no line end.
    scanned: usize,
    /// The data of the event being read (each `data` line and a line feed).
    data: Vec<u8>,
    /// A `data` line was seen in this event (its data may still be empty).
    has_data: bool,
    /// The last line ended with a CR that was the last byte: a LF next belongs to it.
    after_cr: bool,
    /// The first bytes were looked at for a byte-order mark.
    started: bool,
    max_event: usize,
}

impl SseReader {
    /// A reader that refuses an event of more than `max_event` bytes.
    pub(crate) fn new(max_event: usize) -> Self {
        Self {
            buffer: Vec::new(),
            start: 0,
            scanned: 0,
            data: Vec::new(),
            has_data: false,
            after_cr: false,
            started: false,
            max_event,
        }
    }

    /// Reads `bytes`, appending the data of each event they complete to `events`.
    pub(crate) fn feed(&mut self, bytes: &[u8], events: &mut Vec<String>) -> Result<(), SseError> {
        self.buffer.extend_from_slice(bytes);
        if !self.started {
            if self.buffer.len() < 3 && b"\xEF\xBB\xBF".starts_with(&self.buffer) {
                return Ok(()); // perhaps the start of a byte-order mark
            }
            self.started = true;
            if self.buffer.starts_with(b"\xEF\xBB\xBF") {
                self.start = 3;
                self.scanned = 3;
            }
        }
        loop {
            if self.after_cr && self.start < self.buffer.len() {
                self.after_cr = false;
                if self.buffer[self.start] == b'\n' {
                    self.start += 1;
                }
            }
            let from = self.scanned.max(self.start);
            let Some(at) = memchr::memchr2(b'\n', b'\r', &self.buffer[from..]) else {
                self.scanned = self.buffer.len();
                break;
            };
            let end = from + at;
            let next = match self.buffer[end] {
                b'\r' if end + 1 < self.buffer.len() => {
                    end + 1 + usize::from(self.buffer[end + 1] == b'\n')
                }
                b'\r' => {
                    self.after_cr = true;
                    end + 1
                }
                _ => end + 1,
            };
            let (start, line_end) = (self.start, end);
            self.start = next;
            self.scanned = next;
            self.line(start, line_end, events)?;
        }
        if self.data.len() + (self.buffer.len() - self.start) > self.max_event {
            return Err(SseError::TooLong {
                max: self.max_event,
            });
        }
        // The unread rest moves to the front once what was read before it is at least as long.
        if self.start == self.buffer.len() && self.buffer.capacity() > KEPT_BUFFER {
            // All read: a long event's buffer is given back, not kept for the next.
            self.buffer = Vec::new();
            self.scanned = 0;
            self.start = 0;
        } else if self.start > 0 && self.start >= self.buffer.len() - self.start {
            self.buffer.drain(..self.start);
            self.scanned -= self.start;
            self.start = 0;
        }
        Ok(())
    }

    /// One line, `buffer[start..end]`.
    fn line(&mut self, start: usize, end: usize, events: &mut Vec<String>) -> Result<(), SseError> {
        let line = &self.buffer[start..end];
        if line.is_empty() {
            return self.dispatch(events);
        }
        let (field, value) = match memchr::memchr(b':', line) {
            Some(0) => return Ok(()), // a comment
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &[][..]),
        };
        if field == b"data" {
            if self.data.len() + value.len() + 1 > self.max_event {
                return Err(SseError::TooLong {
                    max: self.max_event,
                });
            }
            self.data.extend_from_slice(value);
            self.data.push(b'\n');
            self.has_data = true;
        }
        Ok(())
    }

    /// The end of an event: its data, without the last line feed, unless it had none.
    fn dispatch(&mut self, events: &mut Vec<String>) -> Result<(), SseError> {
        if !std::mem::take(&mut self.has_data) {
            return Ok(());
        }
        let mut data = std::mem::take(&mut self.data);
        data.pop();
        let data = String::from_utf8(data).map_err(|_| SseError::NotUtf8)?;
        events.push(data);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every event of `stream` fed in pieces of `size` bytes.
    fn read(stream: &[u8], size: usize, max: usize) -> Result<Vec<String>, SseError> {
        let mut reader = SseReader::new(max);
        let mut events = Vec::new();
        for piece in stream.chunks(size) {
            reader.feed(piece, &mut events)?;
        }
        Ok(events)
    }

    #[test]
    fn events_are_the_same_whatever_the_pieces_and_line_ends() {
        let stream = b"\xEF\xBB\xBFdata: a\r\n\r\n: a comment\ndata:b\ndata:  c\n\nevent: x\nid: 1\nretry: 5\ndata\r\rdata: d\r\n\n";
        let expected = ["a", "b\n c", "", "d"];
        for size in 1..stream.len() {
            assert_eq!(read(stream, size, 1 << 20).unwrap(), expected, "{size}");
        }
    }

    #[test]
    fn an_event_without_data_is_none_and_an_unended_one_is_not_given() {
        assert_eq!(
            read(b"event: x\n\n\n\ndata: y", 3, 64).unwrap(),
            [] as [&str; 0]
        );
    }

    #[test]
    fn an_event_or_line_over_the_bound_is_refused_however_it_arrives() {
        let big = format!("data: {}\n\n", "x".repeat(100));
        assert_eq!(read(big.as_bytes(), 7, 200).unwrap().len(), 1);
        for size in [1, 7, big.len()] {
            assert_eq!(
                read(big.as_bytes(), size, 50),
                Err(SseError::TooLong { max: 50 })
            );
        }
        // Many short data lines of one event count together; a line with no end too.
        let lines = "data: 0123456789\n".repeat(10);
        assert_eq!(
            read(lines.as_bytes(), 5, 100),
            Err(SseError::TooLong { max: 100 })
        );
        assert_eq!(
            read(&[b':'; 300], 10, 100),
            Err(SseError::TooLong { max: 100 })
        );
    }

    #[test]
    fn data_that_is_not_utf8_is_an_error() {
        assert_eq!(read(b"data: \xff\n\n", 4, 64), Err(SseError::NotUtf8));
    }
}
