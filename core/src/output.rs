//! Where an agent's live output goes: the terminal, a buffer (tests), or nowhere (benchmarks).

use std::io::{IsTerminal, Write};
use std::sync::Mutex;

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
}

/// Receives an agent's live output.
pub trait Output: Send + Sync {
    /// One line (or block) of output.
    fn print(&self, kind: OutputKind, text: &str);

    /// Whether anything is printed; when false the agent skips formatting.
    fn enabled(&self) -> bool {
        true
    }
}

/// Discards everything.
#[derive(Debug, Default)]
pub struct Silent;

impl Output for Silent {
    fn print(&self, _: OutputKind, _: &str) {}
    fn enabled(&self) -> bool {
        false
    }
}

/// Prints to standard error, coloured when it is a terminal (so standard output stays clean for
/// results and `--json`).
#[derive(Debug)]
pub struct Terminal {
    color: bool,
    hidden: Vec<OutputKind>,
}

impl Default for Terminal {
    fn default() -> Self {
        Self {
            color: std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
            hidden: Vec::new(),
        }
    }
}

impl Terminal {
    /// Leaves out lines of `kind` (the CLI prints the response itself).
    pub fn without(mut self, kind: OutputKind) -> Self {
        self.hidden.push(kind);
        self
    }
}

impl Output for Terminal {
    fn print(&self, kind: OutputKind, text: &str) {
        if self.hidden.contains(&kind) {
            return;
        }
        let code = match kind {
            OutputKind::ToolUse => "1;36",
            OutputKind::Argument => "34",
            OutputKind::ToolResponse => "32",
            OutputKind::Progress => "2",
            OutputKind::Warning => "33",
        };
        let mut err = std::io::stderr().lock();
        let _ = if self.color {
            writeln!(err, "\x1b[{code}m{text}\x1b[0m")
        } else {
            writeln!(err, "{text}")
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
        self.lines.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl Output for Captured {
    fn print(&self, kind: OutputKind, text: &str) {
        self.lines
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((kind, text.to_owned()));
    }
}
