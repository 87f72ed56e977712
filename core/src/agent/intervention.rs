//! The user's intervention: pause, resume, stop, and messages sent while the agent works.
//!
//! The protocol, in one place:
//! - **Pause** makes every check wait until **resume**.
//! - **Stop** makes every check fail until it is cleared; the loop ends.
//! - A message sent with **interject** during a monologue *interrupts* it: checks up to a
//!   tool's `execute` fail, so the iteration ends at its next checkpoint; checks after
//!   `execute` let the call complete. The loop's next checkpoint takes the messages into the
//!   history. Outside a monologue a message waits for the next one.
//! - A check that failed because of an interruption, not a stop, is [`Intervention::interrupted`]:
//!   the caller keeps what the tool did so far and the loop goes on.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

use tokio::sync::watch;

use plugin_api::ToolError;

use crate::sync::lock;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Flags {
    paused: bool,
    stopped: bool,
    /// A message arrived during a monologue: the current iteration ends at the next check.
    interrupted: bool,
}

#[derive(Default)]
struct Queue {
    /// Messages the user sent while the agent was working.
    messages: Vec<String>,
    /// A monologue is running: a message interrupts it.
    running: bool,
}

/// Which interventions a check lets through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Check {
    /// Waits while paused; fails if stopped or interrupted (before and up to `execute`).
    All,
    /// Waits while paused; fails only if stopped (after `execute`: the call completes).
    PauseOrStop,
}

/// One agent's intervention state.
pub(crate) struct Intervention {
    agent: String,
    flags: watch::Sender<Flags>,
    /// Whether `flags` is anything but the default: the checks' lock-free fast path.
    active: AtomicBool,
    /// The queue and the `interrupted` flag change under this one lock, so no message can be
    /// left queued with the flag cleared.
    queue: Mutex<Queue>,
}

impl Intervention {
    pub(crate) fn new(agent: &str) -> Self {
        Self {
            agent: agent.to_owned(),
            flags: watch::Sender::new(Flags::default()),
            active: AtomicBool::new(false),
            queue: Mutex::default(),
        }
    }

    fn queue(&self) -> MutexGuard<'_, Queue> {
        lock(&self.queue)
    }

    fn change(&self, change: impl FnOnce(&mut Flags)) {
        self.flags.send_modify(|flags| {
            change(flags);
            let active = *flags != Flags::default();
            self.active.store(active, Ordering::SeqCst);
        });
    }

    pub(crate) fn pause(&self) {
        self.change(|f| f.paused = true);
    }

    pub(crate) fn resume(&self) {
        self.change(|f| f.paused = false);
    }

    pub(crate) fn stop(&self) {
        self.change(|f| f.stopped = true);
    }

    pub(crate) fn clear_stop(&self) {
        self.change(|f| f.stopped = false);
    }

    pub(crate) fn is_stopped(&self) -> bool {
        self.flags.borrow().stopped
    }

    /// Interrupted by a message, and not stopped: the iteration ends, the loop goes on.
    pub(crate) fn interrupted(&self) -> bool {
        let flags = *self.flags.borrow();
        flags.interrupted && !flags.stopped
    }

    /// Queues a message; during a monologue it interrupts the current iteration.
    pub(crate) fn interject(&self, message: &str) {
        let mut queue = self.queue();
        queue.messages.push(message.to_owned());
        if queue.running {
            self.change(|f| f.interrupted = true);
        }
    }

    /// Whether messages wait to join the history.
    pub(crate) fn has_messages(&self) -> bool {
        !self.queue().messages.is_empty()
    }

    /// The queued messages; clears the interruption.
    pub(crate) fn take_messages(&self) -> Vec<String> {
        let mut queue = self.queue();
        self.change(|f| f.interrupted = false);
        std::mem::take(&mut queue.messages)
    }

    /// Marks a monologue as running until the guard ends or is dropped.
    pub(crate) fn start_monologue(&self) -> Monologue<'_> {
        self.queue().running = true;
        Monologue(Some(self))
    }

    /// Waits while paused; fails with an intervention error if stopped, or if interrupted and
    /// `check` counts interruptions.
    pub(crate) async fn check(&self, check: Check) -> Result<(), ToolError> {
        if !self.active.load(Ordering::SeqCst) {
            return Ok(());
        }
        let mut rx = self.flags.subscribe();
        loop {
            let flags = *rx.borrow_and_update();
            if flags.stopped {
                let message = format!("agent {} was stopped", self.agent);
                return Err(ToolError::intervention(message));
            }
            if check == Check::All && flags.interrupted {
                let message = format!(
                    "agent {} was interrupted by a message from the user",
                    self.agent
                );
                return Err(ToolError::intervention(message));
            }
            if !flags.paused || rx.changed().await.is_err() {
                return Ok(());
            }
        }
    }

    /// Completes when the agent is stopped, with the error a check would give then. A running
    /// call waits for this next to its result, so a stop ends it at once; a message from the
    /// user does not (it joins at the loop's next checkpoint, and the call's result is kept).
    pub(crate) async fn stopped(&self) -> ToolError {
        let mut rx = self.flags.subscribe();
        loop {
            let flags = *rx.borrow_and_update();
            if flags.stopped {
                if let Err(error) = self.check(Check::PauseOrStop).await {
                    return error;
                }
            }
            if rx.changed().await.is_err() {
                return std::future::pending().await;
            }
        }
    }

    /// Resolves once the agent is stopped or interrupted by a message (never while only
    /// paused): what the message loop races a model's streamed reply against.
    pub(crate) async fn stopped_or_interrupted(&self) {
        let mut rx = self.flags.subscribe();
        if rx.wait_for(|f| f.stopped || f.interrupted).await.is_err() {
            std::future::pending::<()>().await; // the sender lives as long as `self`
        }
    }

    /// The message loop's checkpoint: waits while paused, fails if stopped, and returns the
    /// messages sent meanwhile (empty when there are none: the iteration may start).
    pub(crate) async fn checkpoint(&self) -> Result<Vec<String>, Stopped> {
        match self.check(Check::All).await {
            Ok(()) if !self.has_messages() => Ok(Vec::new()),
            Err(_) if self.is_stopped() => Err(Stopped),
            _ => Ok(self.take_messages()),
        }
    }
}

/// The agent was stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stopped;

/// A running monologue (see [`Intervention::start_monologue`]).
pub(crate) struct Monologue<'a>(Option<&'a Intervention>);

impl Monologue<'_> {
    /// Ends it; returns the messages still queued (they arrived after the last checkpoint).
    pub(crate) fn end(mut self) -> Vec<String> {
        let Some(intervention) = self.0.take() else {
            return Vec::new();
        };
        let mut queue = intervention.queue();
        queue.running = false;
        intervention.change(|f| f.interrupted = false);
        std::mem::take(&mut queue.messages)
    }
}

impl Drop for Monologue<'_> {
    fn drop(&mut self) {
        // Cancelled: not running any more; the queued messages wait for the next monologue.
        if let Some(intervention) = self.0.take() {
            intervention.queue().running = false;
            intervention.change(|f| f.interrupted = false);
        }
    }
}
