//! Strings in a tolerant reading: escapes, raw control characters, and inner quotes.
//!
//! - The JSON escapes are read as JSON reads them (`\'` too, inside single quotes). Any other
//!   backslash is kept with the character after it: `C:\Users` stays `C:\Users`, `\d+\s` stays
//!   `\d+\s`. A reader that dropped it would change a command without saying so.
//! - Raw line breaks, tabs and other control characters are kept as they are.
//! - In [`Quotes::Lenient`] mode a quote ends its string only where the text after it goes on
//!   with the surrounding value: a key's quote before `:`; a value's quote before the end of the
//!   text, before `,` and a next member (a key and its `:` in an object, a value in an array),
//!   or before closing brackets followed by `,`, more brackets, a line break, `<` or the end.
//!   Any other quote belongs to the string. Inner quotes must pair up, each pair opening after
//!   a space or a sign rather than a word (`say "hi"`, `print("hi")`); otherwise the reading is
//!   ambiguous and fails.

use super::lenient::{Parser, Quotes};

/// How far the reader looks ahead for a key after a comma.
const KEY_LOOKAHEAD: usize = 256;

impl Parser<'_> {
    /// A string opened by `quote` at the current position; `key` if it is an object key.
    pub(super) fn string(&mut self, quote: u8, key: bool) -> Result<String, &'static str> {
        self.pos += 1;
        // One allocation in the common case: the text up to the next quote, at most.
        let rest = &self.bytes[self.pos..];
        let mut out = String::with_capacity(memchr::memchr(quote, rest).unwrap_or(0));
        let mut inner_quotes = 0usize;
        loop {
            let rest = &self.bytes[self.pos..];
            let Some(i) = memchr::memchr2(quote, b'\\', rest) else {
                return Err("a string is never closed");
            };
            out.push_str(&self.text[self.pos..self.pos + i]);
            self.pos += i;
            if self.bytes[self.pos] == b'\\' {
                self.escape(quote, &mut out)?;
                continue;
            }
            self.pos += 1;
            if self.quotes == Quotes::Strict || self.ends_string(key) {
                if inner_quotes % 2 == 1 {
                    return Err("unescaped quotes inside a string do not pair up");
                }
                return Ok(out);
            }
            // An inner quote that opens a quotation follows a space or a sign, not a word.
            if inner_quotes.is_multiple_of(2) && out.ends_with(char::is_alphanumeric) {
                return Err("unescaped quotes inside a string do not pair up");
            }
            inner_quotes += 1;
            out.push(char::from(quote));
        }
    }

    /// The escape at the current position (a backslash).
    fn escape(&mut self, quote: u8, out: &mut String) -> Result<(), &'static str> {
        let Some(&next) = self.bytes.get(self.pos + 1) else {
            return Err("the text ends inside a string");
        };
        let simple = match next {
            b'"' => Some('"'),
            b'\\' => Some('\\'),
            b'/' => Some('/'),
            b'b' => Some('\u{8}'),
            b'f' => Some('\u{c}'),
            b'n' => Some('\n'),
            b'r' => Some('\r'),
            b't' => Some('\t'),
            b'\'' if quote == b'\'' => Some('\''),
            _ => None,
        };
        if let Some(c) = simple {
            out.push(c);
            self.pos += 2;
            return Ok(());
        }
        if next == b'u' {
            if let Some((c, len)) = self.unicode() {
                out.push(c);
                self.pos += len;
                return Ok(());
            }
        }
        // Not a JSON escape: the backslash stays, and what follows is read as usual.
        out.push('\\');
        self.pos += 1;
        Ok(())
    }

    /// A `\uXXXX` escape (or a surrogate pair of them) and its length in bytes.
    fn unicode(&self) -> Option<(char, usize)> {
        let hex = |at: usize| -> Option<u32> {
            let digits = self.text.get(at..at + 4)?;
            if !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
                return None;
            }
            u32::from_str_radix(digits, 16).ok()
        };
        let first = hex(self.pos + 2)?;
        if (0xD800..0xDC00).contains(&first) && self.text[self.pos + 6..].starts_with("\\u") {
            if let Some(second @ 0xDC00..=0xDFFF) = hex(self.pos + 8) {
                let code = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00);
                return Some((char::from_u32(code)?, 12));
            }
        }
        Some((char::from_u32(first).unwrap_or('\u{FFFD}'), 6))
    }

    /// Whether the quote just read (before the current position) ends its string.
    fn ends_string(&self, key: bool) -> bool {
        let at = self.blank(self.pos, true);
        match self.bytes.get(at) {
            None => true,
            Some(b':') => key,
            _ if key => false,
            Some(b',') => self.starts_member(self.blank(at + 1, true)),
            Some(b'}' | b']') => self.closes(at),
            Some(b'/') => matches!(self.bytes.get(at + 1), Some(b'/' | b'*')),
            _ => false,
        }
    }

    /// Closing brackets from `at` on, then `,` and a member, a line break, `<` or the end.
    fn closes(&self, mut at: usize) -> bool {
        loop {
            at = self.blank(at + 1, false);
            match self.bytes.get(at) {
                None | Some(b'\n' | b'\r' | b'<') => return true,
                Some(b'}' | b']') => {}
                Some(b',') => return self.starts_member(self.blank(at + 1, true)),
                Some(_) => return false,
            }
        }
    }

    /// Whether a next member starts at `at`: a value in an array, a key and `:` in an object.
    fn starts_member(&self, at: usize) -> bool {
        let Some(&b) = self.bytes.get(at) else {
            return true;
        };
        if matches!(b, b'}' | b']') {
            return true;
        }
        if self.in_array() {
            let word = |w: &str| self.text[at..].starts_with(w);
            return matches!(b, b'"' | b'\'' | b'{' | b'[' | b'-' | b'0'..=b'9')
                || word("true")
                || word("false")
                || word("null");
        }
        let window = &self.bytes[at..self.bytes.len().min(at + KEY_LOOKAHEAD)];
        let end = match b {
            b'"' | b'\'' => match window[1..].iter().position(|&c| c == b) {
                Some(i) => i + 2,
                None => return false,
            },
            _ => window
                .iter()
                .position(|c| !(c.is_ascii_alphanumeric() || *c == b'_' || *c == b'$'))
                .unwrap_or(window.len()),
        };
        end > 0 && self.bytes.get(self.blank(at + end, true)) == Some(&b':')
    }

    /// The first offset from `at` that is not white space (line breaks too, if `lines`).
    fn blank(&self, mut at: usize, lines: bool) -> usize {
        while let Some(&b) = self.bytes.get(at) {
            match b {
                b' ' | b'\t' => at += 1,
                b'\n' | b'\r' if lines => at += 1,
                _ => break,
            }
        }
        at
    }
}
