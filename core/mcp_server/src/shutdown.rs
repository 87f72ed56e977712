//! Stopping without dropping calls: what is in flight is counted ([`InFlight`]), so that a
//! server asked to stop waits for it (within the grace period) before it ends.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

pub use toolhost::DEFAULT_GRACE;

/// How long `serve-mcp --http` keeps accepting connections once asked to stop, by default:
/// 5 s, while [`READY_PATH`](crate::READY_PATH) answers 503, so that a balancer's health
/// check takes the instance out before it stops listening.
pub const DEFAULT_DRAIN: Duration = Duration::from_secs(5);

/// A count of things in flight (requests, connections), and a way to wait until there are
/// none.
#[derive(Default)]
pub(crate) struct InFlight {
    count: AtomicUsize,
    idle: Notify,
}

/// One thing in flight: counted until dropped.
pub(crate) struct Entered(Arc<InFlight>);

impl InFlight {
    /// Counts one more until the guard is dropped.
    pub(crate) fn enter(self: &Arc<Self>) -> Entered {
        self.count.fetch_add(1, Ordering::SeqCst);
        Entered(self.clone())
    }

    /// Counts one more, until [`leave`](Self::leave).
    pub(crate) fn add(&self) {
        self.count.fetch_add(1, Ordering::SeqCst);
    }

    /// Counts one less (never below zero).
    pub(crate) fn leave(&self) {
        let left = self
            .count
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
        if left == Ok(1) {
            self.idle.notify_waiters();
        }
    }

    /// How many are in flight now.
    pub(crate) fn count(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }

    /// Waits until none is in flight.
    pub(crate) async fn idle(&self) {
        loop {
            let notified = self.idle.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.count() == 0 {
                return;
            }
            notified.await;
        }
    }
}

impl Drop for Entered {
    fn drop(&mut self) {
        self.0.leave();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn idle_waits_for_the_last_guard() {
        let in_flight = Arc::new(InFlight::default());
        in_flight.idle().await;
        let first = in_flight.enter();
        in_flight.add();
        let waiter = tokio::spawn({
            let in_flight = in_flight.clone();
            async move { in_flight.idle().await }
        });
        drop(first);
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        in_flight.leave();
        in_flight.leave(); // one too many: stays at zero
        waiter.await.expect("idle");
        assert_eq!(in_flight.count(), 0);
    }
}
