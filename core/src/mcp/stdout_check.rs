//! A stdio server's output, read through a check. rmcp drops a line it cannot read (not
//! JSON, over its 16 MiB bound, nested deeper than JSON is read) without a word, so a request
//! whose answer was that line would wait for ever (a server "still starting" after minutes).
//! [`CheckedStdout`] passes every byte on as it is and, when a line that looks like a message
//! (it starts with `{` or `[`) is one rmcp will drop, says why on the connection's
//! [`Broken`] channel: the handshake or the listing waiting for it fails at once with that
//! reason. A line of plain text (a banner a sloppy server prints) is left to rmcp, which
//! skips it, as the other SDKs do.

use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};
use tokio::sync::watch;

/// The largest line rmcp reads (its `DEFAULT_MAX_LINE_LENGTH`).
pub(crate) const MAX_LINE: usize = 16 << 20;

/// The deepest nesting JSON is read to (serde_json's recursion limit).
const MAX_DEPTH: usize = 128;

/// A line up to this long that looks like a message is parsed to see that it is JSON.
const PARSED: usize = 64 << 10;

/// Why the server's output broke (the first line dropped), `None` while it has not.
pub(crate) type Broken = watch::Sender<Option<String>>;

/// Waits until `broken` says why; never returns if it never does.
pub(crate) async fn broke(broken: &mut watch::Receiver<Option<String>>) -> String {
    loop {
        if let Some(why) = broken.borrow_and_update().clone() {
            return why;
        }
        if broken.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// The server's standard output, checked line by line (see the module).
pub(crate) struct CheckedStdout<R> {
    inner: R,
    line: Line,
    broken: Broken,
}

impl<R> CheckedStdout<R> {
    pub(crate) fn new(inner: R, broken: Broken) -> Self {
        Self {
            inner,
            line: Line::default(),
            broken,
        }
    }
}

/// What is known of the line being read.
#[derive(Default)]
struct Line {
    len: usize,
    depth: usize,
    deepest: usize,
    in_string: bool,
    escaped: bool,
    /// Its first byte that is not white space.
    first: Option<u8>,
    /// Its first [`PARSED`] bytes, when it looks like a message.
    head: Vec<u8>,
}

impl Line {
    fn push(&mut self, byte: u8) {
        self.len += 1;
        if self.first.is_none() && !byte.is_ascii_whitespace() {
            self.first = Some(byte);
        }
        if !matches!(self.first, Some(b'{' | b'[')) {
            return;
        }
        if self.head.len() < PARSED {
            self.head.push(byte);
        }
        match (self.in_string, byte) {
            (true, _) if self.escaped => self.escaped = false,
            (true, b'\\') => self.escaped = true,
            (true, b'"') | (false, b'"') => self.in_string = !self.in_string,
            (false, b'{' | b'[') => {
                self.depth += 1;
                self.deepest = self.deepest.max(self.depth);
            }
            (false, b'}' | b']') => self.depth = self.depth.saturating_sub(1),
            _ => {}
        }
    }

    /// Why rmcp will drop this line, if it will.
    fn dropped(&self) -> Option<String> {
        if !matches!(self.first, Some(b'{' | b'[')) {
            return None;
        }
        if self.len > MAX_LINE {
            return Some(format!(
                "it sent a message of {} bytes, over the {} MiB a message may have, and it was \
                 dropped",
                self.len,
                MAX_LINE >> 20
            ));
        }
        if self.deepest > MAX_DEPTH {
            return Some(format!(
                "it sent a message nested {} levels deep, deeper than the {MAX_DEPTH} levels \
                 JSON is read to, and it was dropped",
                self.deepest
            ));
        }
        let text = self.head.strip_suffix(b"\r").unwrap_or(&self.head);
        if self.len <= PARSED && serde_json::from_slice::<serde::de::IgnoredAny>(text).is_err() {
            let text = String::from_utf8_lossy(text);
            let start: String = text.chars().take(80).collect();
            return Some(format!(
                "it sent a line that is not JSON, and it was dropped: {}",
                crate::package::Shown(&start)
            ));
        }
        None
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for CheckedStdout<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        let this = &mut *self;
        for &byte in &buf.filled()[before..] {
            if byte != b'\n' {
                this.line.push(byte);
                continue;
            }
            if let Some(why) = this.line.dropped() {
                // Said by the server's failure, with its name.
                this.broken.send_if_modified(|broken| match broken {
                    Some(_) => false,
                    None => {
                        *broken = Some(why);
                        true
                    }
                });
            }
            this.line = Line::default();
        }
        polled
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    async fn said(input: &[u8]) -> Option<String> {
        let broken = watch::channel(None).0;
        let mut checked = CheckedStdout::new(input, broken.clone());
        let mut out = Vec::new();
        checked.read_to_end(&mut out).await.unwrap();
        assert_eq!(out, input, "every byte passed on");
        let why = broken.borrow().clone();
        why
    }

    #[tokio::test]
    async fn lines_rmcp_would_drop_are_named() {
        let good = br#"{"jsonrpc":"2.0","id":1,"result":{"a":"{[\"}"}}"#;
        assert_eq!(said(&[good.as_slice(), b"\n"].concat()).await, None);
        assert_eq!(
            said(b"Starting server...\n").await,
            None,
            "a banner is skipped"
        );
        let bad = said(b"{oops\n").await.unwrap();
        assert!(bad.contains("not JSON") && bad.contains("{oops"), "{bad}");
        let deep = format!("{}{}\n", "[".repeat(200), "]".repeat(200));
        let why = said(deep.as_bytes()).await.unwrap();
        assert!(why.contains("nested 200 levels deep"), "{why}");
    }
}
