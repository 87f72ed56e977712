//! A circuit breaker per loaded build of a tool, counting only infrastructure failures.
//!
//! Closed: calls run; `failures` consecutive infrastructure failures (`timeout`, `dependency`,
//! `internal`) open it. Open: calls are answered at once, without running, until the cool-down
//! ends. Half-open: up to `half_open_calls` probe calls run; a success closes it, a failure
//! opens it again. The breaker lives in the tool's handle, so a new build of the tool starts
//! closed.

use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Instant, SystemTime};

use crate::audit::BreakerState;
use crate::config::numbers::later;
use crate::config::BreakerSettings;
use crate::sync::lock;
use plugin_api::ErrorKind;
use plugin_api::ToolError;

/// A breaker's state with what it knows, as `list` shows it: its
/// [`BreakerState`](crate::audit::BreakerState) and the failures behind it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BreakerStatus {
    /// Calls run; the number of consecutive infrastructure failures so far.
    Closed(u32),
    /// Calls are refused until the time given (wall clock), after the last failure's message.
    Open {
        /// When the cool-down ends.
        until: SystemTime,
        /// The failure that opened it.
        last: String,
    },
    /// Probe calls are running.
    HalfOpen,
}

impl BreakerStatus {
    /// The state alone.
    pub fn state(&self) -> BreakerState {
        match self {
            Self::Closed(_) => BreakerState::Closed,
            Self::Open { .. } => BreakerState::Open,
            Self::HalfOpen => BreakerState::HalfOpen,
        }
    }

    /// `closed`, `open` or `half_open`.
    pub fn name(&self) -> &'static str {
        self.state().as_str()
    }
}

/// A change of state, for the log and the audit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Transition {
    pub(crate) from: BreakerState,
    pub(crate) to: BreakerState,
    pub(crate) reason: String,
}

enum State {
    Closed {
        failures: u32,
    },
    Open {
        until: Instant,
        wall: SystemTime,
        failures: u32,
        last: String,
    },
    HalfOpen {
        probes: u32,
    },
}

/// One tool build's breaker.
pub(crate) struct Breaker {
    state: Mutex<State>,
    /// Whether the state is closed with no failure counted: the usual case, in which a call is
    /// admitted and a success recorded without taking the lock.
    clean: AtomicBool,
}

impl Default for Breaker {
    fn default() -> Self {
        Self {
            state: Mutex::new(State::Closed { failures: 0 }),
            clean: AtomicBool::new(true),
        }
    }
}

/// The locked state; `clean` is brought up to date when it is released.
struct Locked<'a> {
    guard: MutexGuard<'a, State>,
    clean: &'a AtomicBool,
}

impl Deref for Locked<'_> {
    type Target = State;
    fn deref(&self) -> &State {
        &self.guard
    }
}

impl DerefMut for Locked<'_> {
    fn deref_mut(&mut self) -> &mut State {
        &mut self.guard
    }
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        let clean = matches!(*self.guard, State::Closed { failures: 0 });
        self.clean.store(clean, Ordering::Release);
    }
}

impl Breaker {
    fn state(&self) -> Locked<'_> {
        Locked {
            guard: lock(&self.state),
            clean: &self.clean,
        }
    }

    /// Whether a call may run now; an open breaker answers with a `dependency` error that says
    /// until when. Moving from open to half-open is returned as a transition.
    pub(crate) fn admit(
        &self,
        tool: &str,
        settings: &BreakerSettings,
    ) -> Result<Option<Transition>, ToolError> {
        if self.clean.load(Ordering::Acquire) {
            return Ok(None);
        }
        let mut state = self.state();
        match &mut *state {
            State::Closed { .. } => Ok(None),
            State::Open {
                until,
                wall,
                failures,
                last,
            } => {
                if Instant::now() < *until {
                    return Err(ToolError::dependency(format!(
                        "tool {tool} is unavailable until {} after {failures} failures (last: {last})",
                        clock(*wall)
                    )));
                }
                *state = State::HalfOpen { probes: 1 };
                Ok(Some(transition(
                    BreakerState::Open,
                    BreakerState::HalfOpen,
                    "the cool-down ended",
                )))
            }
            State::HalfOpen { probes } if *probes < settings.half_open_calls.max(1) => {
                *probes += 1;
                Ok(None)
            }
            State::HalfOpen { .. } => Err(ToolError::dependency(format!(
                "tool {tool} is unavailable while its probe calls run after repeated failures"
            ))),
        }
    }

    /// Counts a call's outcome; returns the transition it caused, if any.
    pub(crate) fn record(
        &self,
        outcome: Result<(), &ToolError>,
        settings: &BreakerSettings,
    ) -> Option<Transition> {
        let infrastructure = outcome.err().filter(|e| is_infrastructure(e.kind()));
        if infrastructure.is_none() && self.clean.load(Ordering::Acquire) {
            return None; // closed, and stays closed with no failure counted
        }
        let mut state = self.state();
        match (&mut *state, infrastructure) {
            (State::Closed { failures }, None) => {
                *failures = 0;
                None
            }
            (State::HalfOpen { .. }, None) => {
                *state = State::Closed { failures: 0 };
                Some(transition(
                    BreakerState::HalfOpen,
                    BreakerState::Closed,
                    "a probe call succeeded",
                ))
            }
            (State::Closed { failures }, Some(error)) => {
                *failures += 1;
                if *failures < settings.failures.max(1) {
                    return None;
                }
                let failures = *failures;
                *state = open(settings, failures, error);
                Some(transition(
                    BreakerState::Closed,
                    BreakerState::Open,
                    &format!("{failures} failures in a row"),
                ))
            }
            (State::HalfOpen { .. }, Some(error)) => {
                *state = open(settings, settings.failures, error);
                Some(transition(
                    BreakerState::HalfOpen,
                    BreakerState::Open,
                    "a probe call failed",
                ))
            }
            (State::Open { .. }, _) => None,
        }
    }

    /// The state, for `list`.
    pub(crate) fn snapshot(&self) -> BreakerStatus {
        match &*self.state() {
            State::Closed { failures } => BreakerStatus::Closed(*failures),
            State::Open { wall, last, .. } => BreakerStatus::Open {
                until: *wall,
                last: last.clone(),
            },
            State::HalfOpen { .. } => BreakerStatus::HalfOpen,
        }
    }
}

/// Whether an error kind is an infrastructure failure (retried, and counted by the breaker).
pub(crate) fn is_infrastructure(kind: ErrorKind) -> bool {
    matches!(
        kind,
        ErrorKind::Timeout | ErrorKind::Dependency | ErrorKind::Internal
    )
}

fn open(settings: &BreakerSettings, failures: u32, error: &ToolError) -> State {
    let mut last: String = error.message().chars().take(120).collect();
    if last.len() < error.message().len() {
        last.push('…');
    }
    State::Open {
        until: later(Instant::now(), settings.cooldown),
        wall: later(SystemTime::now(), settings.cooldown),
        failures,
        last,
    }
}

fn transition(from: BreakerState, to: BreakerState, reason: &str) -> Transition {
    Transition {
        from,
        to,
        reason: reason.to_owned(),
    }
}

/// `14:03:07 UTC`.
pub(crate) fn clock(time: SystemTime) -> String {
    let secs = time
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let day = secs % 86_400;
    format!("{:02}:{:02}:{:02} UTC", day / 3600, day / 60 % 60, day % 60)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn settings() -> BreakerSettings {
        BreakerSettings {
            failures: 2,
            cooldown: Duration::from_millis(30),
            half_open_calls: 1,
        }
    }

    #[test]
    fn opens_refuses_probes_and_closes() {
        let (breaker, s) = (Breaker::default(), settings());
        let failure = ToolError::timeout("slow");
        assert!(breaker
            .record(Err(&ToolError::validation("x")), &s)
            .is_none());
        assert!(breaker.record(Err(&failure), &s).is_none());
        let opened = breaker.record(Err(&failure), &s).unwrap();
        assert_eq!(
            (opened.from, opened.to),
            (BreakerState::Closed, BreakerState::Open)
        );
        let refusal = breaker.admit("t", &s).unwrap_err();
        assert!(refusal.message().contains("unavailable until"), "{refusal}");
        assert!(
            refusal.message().contains("after 2 failures (last: slow)"),
            "{refusal}"
        );
        std::thread::sleep(Duration::from_millis(40));
        assert_eq!(
            breaker.admit("t", &s).unwrap().unwrap().to,
            BreakerState::HalfOpen
        );
        assert!(breaker.admit("t", &s).is_err(), "one probe at a time");
        let closed = breaker.record(Ok(()), &s).unwrap();
        assert_eq!(closed.to, BreakerState::Closed);
        assert_eq!(breaker.snapshot(), BreakerStatus::Closed(0));
    }

    #[test]
    fn a_failed_probe_opens_it_again() {
        let (breaker, s) = (Breaker::default(), settings());
        let failure = ToolError::internal("boom");
        breaker.record(Err(&failure), &s);
        breaker.record(Err(&failure), &s);
        std::thread::sleep(Duration::from_millis(40));
        breaker.admit("t", &s).unwrap();
        assert_eq!(
            breaker.record(Err(&failure), &s).unwrap().to,
            BreakerState::Open
        );
        assert_eq!(breaker.snapshot().name(), "open");
    }
}
