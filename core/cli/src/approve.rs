//! Approvals on the terminal: the tool, its method and masked arguments, then approve once,
//! for this session, always, or deny.

use std::io::{BufRead, IsTerminal, Write};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex};

use toolhost::governance::{ApprovalAnswer, ApprovalRequest, Approver};
use toolhost::Agent;

/// Sets up an agent's approvals for a command: `--yes` approves writes; on a terminal, the
/// user is asked (through `lines` when another reader owns standard input).
pub(crate) fn set_up(agent: &Agent, yes: bool, lines: Option<Arc<Lines>>) {
    agent.approve_writes(yes);
    if std::io::stdin().is_terminal() {
        agent.set_approver(Arc::new(TerminalApprover { lines }));
    }
}

/// Hands the next typed line to a waiting approval instead of its usual reader.
#[derive(Default)]
pub(crate) struct Lines {
    waiting: Mutex<Option<Sender<String>>>,
}

impl Lines {
    /// Gives `line` to a waiting approval; `false` if none waits.
    pub(crate) fn answer(&self, line: &str) -> bool {
        let waiting = self
            .waiting
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        match waiting {
            Some(sender) => sender.send(line.to_owned()).is_ok(),
            None => false,
        }
    }

    fn next(&self) -> Option<String> {
        let (sender, receiver) = mpsc::channel();
        *self.waiting.lock().unwrap_or_else(|e| e.into_inner()) = Some(sender);
        receiver.recv().ok()
    }
}

struct TerminalApprover {
    lines: Option<Arc<Lines>>,
}

impl Approver for TerminalApprover {
    fn ask(&self, request: &ApprovalRequest) -> ApprovalAnswer {
        let method = request
            .method
            .as_deref()
            .map_or(String::new(), |m| format!(":{m}"));
        let mut err = std::io::stderr().lock();
        let _ = writeln!(
            err,
            "\n{} wants to call tool '{}{method}' (risk {}) with:\n{}",
            request.agent,
            request.tool,
            request.risk.as_str(),
            request.args
        );
        let _ = write!(
            err,
            "Approve? [o]nce, for this [s]ession, [a]lways, [d]eny: "
        );
        let _ = err.flush();
        drop(err);
        let line = match &self.lines {
            Some(lines) => lines.next(),
            // The terminal itself: standard input may be held by the command's own reader.
            None => match std::fs::File::open("/dev/tty") {
                Ok(tty) => std::io::BufReader::new(tty)
                    .lines()
                    .next()
                    .and_then(Result::ok),
                Err(_) => std::io::stdin().lock().lines().next().and_then(Result::ok),
            },
        };
        let (answer, said) = match line.as_deref().map(str::trim) {
            Some("o" | "once" | "y" | "yes") => (ApprovalAnswer::Once, "approved once".to_owned()),
            Some("s" | "session") => (
                ApprovalAnswer::Session,
                format!(
                    "approved: '{}' is not asked about again in this session",
                    request.tool
                ),
            ),
            Some("a" | "always") => (
                ApprovalAnswer::Always,
                format!(
                    "approved always: saving [tools.{}] policy = \"allow\" in {}",
                    request.tool,
                    toolhost::Escaped(&request.saves_to)
                ),
            ),
            _ => (ApprovalAnswer::Deny, "denied".to_owned()),
        };
        let _ = writeln!(std::io::stderr(), "{said}");
        answer
    }
}
