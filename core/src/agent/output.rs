//! Where an agent's live output goes: the terminal, a buffer (tests), or nowhere (benchmarks).

use std::io::{IsTerminal, Write};
use std::sync::Mutex;

use crate::secrets::Masked;
use crate::sync::lock;

/// What a line of output is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputKind {
    /// `A0: Using tool 'x'`.
    ToolUse,
    /// One argument of a call, `Search query: ...`.
    Argument,
    /// `A0: Response from tool 'x'` and the response text.
    ToolResponse,
    /// A tool's progress text.
    Progress,
    /// A warning.
    Warning,
    /// A message from the user.
    User,
    /// A piece of the model's reply as it streams in (no line end of its own).
    ModelChunk,
    /// The end of the model's reply: the last held-back text, then the line ends.
    ModelEnd,
}

/// Receives an agent's live output: text that is already [`Masked`].
pub trait Output: Send + Sync {
    /// One line (or block) of output.
    fn print(&self, kind: OutputKind, text: &Masked);

    /// Whether anything is printed; when false the agent skips formatting.
    fn enabled(&self) -> bool {
        true
    }
}

/// Discards everything.
#[derive(Debug, Default)]
pub struct Silent;

impl Output for Silent {
    fn print(&self, _: OutputKind, _: &Masked) {}
    fn enabled(&self) -> bool {
        false
    }
}

/// Prints to standard error (so standard output stays clean for results and `--json`). On a
/// terminal it is coloured and a tool's progress is one line updated in place; otherwise (a
/// file, a pipe, `NO_COLOR`) it prints plain lines with no control codes.
#[derive(Debug)]
pub struct Terminal {
    color: bool,
    hidden: Vec<OutputKind>,
    /// A progress line is showing and the next output replaces it.
    progress_open: std::sync::atomic::AtomicBool,
}

impl Default for Terminal {
    fn default() -> Self {
        Self {
            color: std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
            hidden: Vec::new(),
            progress_open: std::sync::atomic::AtomicBool::new(false),
        }
    }
}

impl Terminal {
    /// Leaves out lines of `kind` (the CLI prints the response itself).
    pub fn without(mut self, kind: OutputKind) -> Self {
        self.hidden.push(kind);
        self
    }

    /// Ends a progress line that is still showing (on a terminal it is left open, to be
    /// replaced by the next output): call it before printing anything elsewhere, such as a
    /// result on standard output, so the two never run together.
    pub fn end_progress(&self) {
        if self
            .progress_open
            .swap(false, std::sync::atomic::Ordering::Relaxed)
        {
            let _ = writeln!(std::io::stderr().lock());
        }
    }
}

impl Output for Terminal {
    fn print(&self, kind: OutputKind, text: &Masked) {
        let text = text.as_str();
        if self.hidden.contains(&kind) {
            return;
        }
        let code = match kind {
            OutputKind::ToolUse => "1;36",
            OutputKind::Argument => "34",
            OutputKind::ToolResponse => "32",
            OutputKind::Progress => "2",
            OutputKind::Warning => "33",
            OutputKind::User => "1;35",
            OutputKind::ModelChunk | OutputKind::ModelEnd => "37",
        };
        let mut err = std::io::stderr().lock();
        let open = self
            .progress_open
            .swap(false, std::sync::atomic::Ordering::Relaxed);
        if !self.color {
            let _ = match kind {
                OutputKind::ModelChunk => write!(err, "{text}"),
                _ => writeln!(err, "{text}"),
            };
            return;
        }
        if open {
            let _ = write!(err, "\r\x1b[2K"); // clear the progress line
        }
        let _ = match kind {
            OutputKind::Progress => {
                self.progress_open
                    .store(true, std::sync::atomic::Ordering::Relaxed);
                write!(err, "\x1b[{code}m{text}\x1b[0m")
            }
            OutputKind::ModelChunk => write!(err, "\x1b[{code}m{text}\x1b[0m"),
            _ => writeln!(err, "\x1b[{code}m{text}\x1b[0m"),
        };
    }
}

/// Keeps every line, for tests.
#[derive(Debug, Default)]
pub struct Captured {
    lines: Mutex<Vec<(OutputKind, String)>>,
}

impl Captured {
    /// The lines so far.
    pub fn lines(&self) -> Vec<(OutputKind, String)> {
        lock(&self.lines).clone()
    }
}

impl Output for Captured {
    fn print(&self, kind: OutputKind, text: &Masked) {
        lock(&self.lines).push((kind, text.to_string()));
    }
}
