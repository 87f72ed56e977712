//! The panic guard: plugin code never unwinds into the host, and a plugin future is polled
//! (and dropped) inside the runtime of the plugin's choosing.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::Once;
use std::task::{Context as TaskContext, Poll};

thread_local! {
    static CATCHING: Cell<bool> = const { Cell::new(false) };
    static LOCATION: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Runs `f`, turning a panic into a [`Panicked`] with its message and location (`panicked at
/// src/lib.rs:9:5: boom`).
///
/// While `f` runs, this library's panic hook records the location instead of printing, so a
/// panic the host reports as a call error is not also printed as a backtrace. Panics elsewhere
/// (a thread the plugin spawned) still go to the default hook.
pub fn catch_panic<R>(f: impl FnOnce() -> R) -> Result<R, Panicked> {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if CATCHING.with(Cell::get) {
                let at = info.location().map(|l| l.to_string());
                LOCATION.with(|l| *l.borrow_mut() = at);
            } else {
                default(info);
            }
        }));
    });
    let was_catching = CATCHING.with(|c| c.replace(true));
    let result = catch_unwind(AssertUnwindSafe(f));
    CATCHING.with(|c| c.set(was_catching));
    result.map_err(|payload| {
        let message = panic_message(&*payload);
        Panicked(match LOCATION.with(|l| l.borrow_mut().take()) {
            Some(at) => format!("panicked at {at}: {message}"),
            None => format!("panicked: {message}"),
        })
    })
}

/// Turns a panic payload into its message.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-text payload".to_owned()
    }
}

/// A panic of plugin code, with its message and location, as [`Guarded`] reports it.
///
/// Plugin code is at fault: the host reports it as the call's internal error, and the plugin's
/// author fixes the panic the message locates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Panicked(pub String);

impl std::fmt::Display for Panicked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Panicked {}

/// What [`Guarded`] does before each poll and drop: enter the plugin's runtime, or nothing.
pub trait Enter {
    /// Makes the plugin's runtime current on this thread (cheap when it already is).
    fn enter();
}

/// Polls in the caller's own runtime: enters nothing (a host-less test of plugin code).
#[derive(Debug)]
pub struct InPlace;

impl Enter for InPlace {
    fn enter() {}
}

/// Polls a plugin future inside its runtime (`R`) and turns a panic into an error.
///
/// Dropping it (the host cancelled the call) also runs inside the runtime and the panic guard,
/// so a panicking `Drop` in plugin state cannot abort the process.
pub struct Guarded<F, R: Enter> {
    inner: ManuallyDrop<F>,
    done: bool,
    runtime: PhantomData<fn() -> R>,
}

impl<F, R: Enter> Guarded<F, R> {
    /// Wraps a future of plugin code.
    pub fn new(inner: F) -> Self {
        Self {
            inner: ManuallyDrop::new(inner),
            done: false,
            runtime: PhantomData,
        }
    }
}

impl<F, R: Enter> Drop for Guarded<F, R> {
    fn drop(&mut self) {
        let inner = &mut self.inner;
        let _ = catch_panic(|| {
            R::enter();
            // SAFETY: `inner` is dropped exactly once, here, and never used again.
            unsafe { ManuallyDrop::drop(inner) }
        });
    }
}

impl<T, E, F, R> Future for Guarded<F, R>
where
    F: Future<Output = Result<T, E>>,
    E: From<Panicked>,
    R: Enter,
{
    type Output = Result<T, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Self::Output> {
        // SAFETY: `inner` is structurally pinned: it is never moved out of `self`.
        let this = unsafe { self.get_unchecked_mut() };
        if this.done {
            let message = "plugin future polled after completion".to_owned();
            return Poll::Ready(Err(E::from(Panicked(message))));
        }
        // SAFETY: see above.
        let inner = unsafe { Pin::new_unchecked(&mut *this.inner) };
        let polled = catch_panic(|| {
            R::enter();
            inner.poll(cx)
        });
        match polled {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(ready) => {
                this.done = true;
                ready
            }
            Err(panicked) => {
                this.done = true;
                Poll::Ready(Err(E::from(panicked)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_is_caught_as_a_panicked_with_its_location() {
        assert_eq!(catch_panic(|| 7), Ok(7));
        let panicked: Panicked = catch_panic(|| panic!("boom")).unwrap_err();
        assert!(panicked.0.starts_with("panicked at "), "{panicked}");
        assert!(panicked.0.ends_with(": boom"), "{panicked}");
        assert_eq!(panicked.to_string(), panicked.0);
    }
}
