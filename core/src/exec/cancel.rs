//! A call's cancellation: set by the host at the deadline or at an intervention, seen by the
//! plugin through `Context::is_cancelled` and `Context::cancelled`.

use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::Notify;

/// Whether a call was cancelled, and the waiters of its cancellation.
#[derive(Default)]
pub(crate) struct Cancel {
    cancelled: AtomicBool,
    notify: Notify,
}

impl Cancel {
    /// Cancels the call: the flag is set and every waiter wakes.
    pub(crate) fn cancel(&self) {
        self.cancelled.store(true, Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    /// Whether the call was cancelled.
    pub(crate) fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst)
    }

    /// Completes once the call is cancelled.
    pub(crate) async fn cancelled(&self) {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            // Registered before the flag is read, so a cancel in between is not missed.
            notified.as_mut().enable();
            if self.is_cancelled() {
                return;
            }
            notified.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[tokio::test]
    async fn a_waiter_wakes_when_the_call_is_cancelled() {
        let cancel = Arc::new(Cancel::default());
        let waiter = tokio::spawn({
            let cancel = cancel.clone();
            async move { cancel.cancelled().await }
        });
        tokio::task::yield_now().await;
        assert!(!cancel.is_cancelled());
        cancel.cancel();
        waiter.await.unwrap();
        cancel.cancelled().await; // already cancelled: at once
    }
}
