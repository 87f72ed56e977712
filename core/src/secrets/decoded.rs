//! A text as masking also reads it, decoded: each URL escape `%XX` (either hex case, whatever
//! set of bytes the encoder escaped) as the byte it stands for, and the line breaks of wrapped
//! base64 (a line of 60 or more base64 characters: MIME's 76, PEM's 64) left out. A form found
//! in the decoded text is masked over the bytes it came from, so no encoder's choice of what to
//! escape, and no wrapping, hides a value.
//!
//! Built only for a text that holds an escape or a wrapped line: for any other, nothing is
//! copied.

/// The shortest line of base64 characters whose line break is taken for wrapping.
const WRAPPED_LINE: usize = 60;

/// The decoded text, and for each of its bytes the bytes of the original it came from.
#[derive(Debug)]
pub(super) struct Decoded {
    /// The decoded bytes (not always UTF-8).
    pub(super) bytes: Vec<u8>,
    /// Where each decoded byte's original starts.
    starts: Vec<usize>,
    /// Where each decoded byte's original ends.
    ends: Vec<usize>,
}

impl Decoded {
    /// The decoded view of `text`, if it differs from it.
    pub(super) fn of(text: &[u8]) -> Option<Self> {
        let escapes = memchr::memchr_iter(b'%', text).any(|i| escape_at(text, i).is_some());
        let wraps = memchr::memchr_iter(b'\n', text).any(|i| wrapped_break(text, i).is_some());
        if !escapes && !wraps {
            return None;
        }
        let mut decoded = Self {
            bytes: Vec::with_capacity(text.len()),
            starts: Vec::with_capacity(text.len()),
            ends: Vec::with_capacity(text.len()),
        };
        let mut at = 0;
        while at < text.len() {
            if let Some(byte) = escape_at(text, at) {
                decoded.push(byte, at, at + 3);
                at += 3;
                continue;
            }
            if text[at] == b'\r' || text[at] == b'\n' {
                let newline = if text[at] == b'\r' { at + 1 } else { at };
                if let Some(end) = wrapped_break(text, newline)
                    .filter(|_| text[at] == b'\n' || text.get(at + 1) == Some(&b'\n'))
                {
                    at = end;
                    continue;
                }
            }
            decoded.push(text[at], at, at + 1);
            at += 1;
        }
        Some(decoded)
    }

    fn push(&mut self, byte: u8, start: usize, end: usize) {
        self.bytes.push(byte);
        self.starts.push(start);
        self.ends.push(end);
    }

    /// The original stretch of the decoded `start..end` (`end` > `start`).
    pub(super) fn original(&self, start: usize, end: usize) -> (usize, usize) {
        (self.starts[start], self.ends[end - 1])
    }
}

/// The byte an escape `%XX` at `at` stands for.
pub(super) fn escape_at(text: &[u8], at: usize) -> Option<u8> {
    if text.get(at) != Some(&b'%') {
        return None;
    }
    let digit = |i: usize| text.get(i).and_then(|&b| (b as char).to_digit(16));
    Some((digit(at + 1)? * 16 + digit(at + 2)?) as u8)
}

/// `text` from a byte on, with its escapes decoded; a `%` or `%X` at its very end (an escape
/// still arriving) left out, and whether there was one.
pub(super) fn decode_tail(text: &[u8]) -> (Vec<u8>, bool) {
    let mut out = Vec::with_capacity(text.len());
    let mut at = 0;
    while at < text.len() {
        if let Some(byte) = escape_at(text, at) {
            out.push(byte);
            at += 3;
        } else if text[at] == b'%' && text.len() - at < 3 {
            return (out, true);
        } else {
            out.push(text[at]);
            at += 1;
        }
    }
    (out, false)
}

fn is_base64(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=' | b'-' | b'_')
}

/// If the `\n` at `newline` (with a `\r` before it) ends a line of wrapped base64 and base64
/// goes on after it: where the text goes on.
fn wrapped_break(text: &[u8], newline: usize) -> Option<usize> {
    let line_end = match newline > 0 && text[newline - 1] == b'\r' {
        true => newline - 1,
        false => newline,
    };
    let line_start = line_end.checked_sub(WRAPPED_LINE)?;
    let line = &text[line_start..line_end];
    let next = text.get(newline + 1).copied()?;
    (line.iter().all(|&b| is_base64(b)) && is_base64(next)).then_some(newline + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_in_either_case_decode_and_map_back() {
        let text = b"a%2db%2F%zz";
        let decoded = Decoded::of(text).unwrap();
        assert_eq!(decoded.bytes, b"a-b/%zz");
        assert_eq!(decoded.original(1, 4), (1, 8));
        assert!(Decoded::of(b"100% sure\nno wrap").is_none());
        assert_eq!(decode_tail(b"ab%2Dc%2"), (b"ab-c".to_vec(), true));
    }

    #[test]
    fn wrapped_base64_lines_join_and_short_lines_do_not() {
        let line = "QUJD".repeat(19); // 76 characters
        let text = format!("{line}\r\nRUZH\nshort\nline");
        let decoded = Decoded::of(text.as_bytes()).unwrap();
        assert_eq!(decoded.bytes, format!("{line}RUZH\nshort\nline").as_bytes());
        assert_eq!(decoded.original(75, 77), (75, 79));
    }
}
