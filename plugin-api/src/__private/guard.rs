//! The panic guard: plugin code never unwinds into the host, and a plugin future is always
//! polled (and dropped) inside the plugin's own runtime.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::mem::ManuallyDrop;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::Once;
use std::task::{Context as TaskContext, Poll};

use crate::runtime::enter_runtime;
use crate::ToolError;

thread_local! {
    static CATCHING: Cell<bool> = const { Cell::new(false) };
    static LOCATION: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Runs `f`, turning a panic into its message and location (`panicked at src/lib.rs:9:5: boom`).
///
/// While `f` runs, this plugin's panic hook records the location instead of printing, so a
/// panic the host reports as a call error is not also printed as a backtrace. Panics elsewhere
/// (a thread the plugin spawned) still go to the default hook.
pub fn catch_panic<R>(f: impl FnOnce() -> R) -> Result<R, String> {
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
        match LOCATION.with(|l| l.borrow_mut().take()) {
            Some(at) => format!("panicked at {at}: {message}"),
            None => format!("panicked: {message}"),
        }
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

/// Polls a plugin future inside the plugin's runtime and turns a panic into an error.
///
/// Dropping it (the host cancelled the call) also runs inside the runtime and the panic guard,
/// so a panicking `Drop` in plugin state cannot abort the process.
///
/// `ENTER` is whether polling enters the plugin's own runtime: always in a library (see
/// [`runtime`](crate::runtime)); never in the `testing` kit, where the tool runs inside the
/// test's runtime, as plain Rust (entering and forgetting another runtime's context there would
/// break the test runtime's own context).
pub struct Guarded<F, const ENTER: bool = true> {
    inner: ManuallyDrop<F>,
    done: bool,
}

impl<F> Guarded<F, true> {
    /// Wraps a future of plugin code called by the host.
    pub fn new(inner: F) -> Self {
        Self {
            inner: ManuallyDrop::new(inner),
            done: false,
        }
    }
}

#[cfg(feature = "testing")]
impl<F> Guarded<F, false> {
    /// Wraps a future that runs in the caller's own runtime (the `testing` kit).
    pub(crate) fn in_place(inner: F) -> Self {
        Self {
            inner: ManuallyDrop::new(inner),
            done: false,
        }
    }
}

impl<F, const ENTER: bool> Drop for Guarded<F, ENTER> {
    fn drop(&mut self) {
        // SAFETY: `inner` is dropped exactly once, here, and never used again.
        let _ = catch_panic(|| {
            if ENTER {
                enter_runtime();
            }
            unsafe { ManuallyDrop::drop(&mut self.inner) }
        });
    }
}

impl<T, F: Future<Output = Result<T, ToolError>>, const ENTER: bool> Future for Guarded<F, ENTER> {
    type Output = Result<T, ToolError>;

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Self::Output> {
        // SAFETY: `inner` is structurally pinned: it is never moved out of `self`.
        let this = unsafe { self.get_unchecked_mut() };
        if this.done {
            return Poll::Ready(Err(ToolError::internal(
                "plugin future polled after completion",
            )));
        }
        // SAFETY: see above.
        let inner = unsafe { Pin::new_unchecked(&mut *this.inner) };
        let polled = catch_panic(|| {
            if ENTER {
                enter_runtime();
            }
            inner.poll(cx)
        });
        match polled {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(ready) => {
                this.done = true;
                ready
            }
            Err(message) => {
                this.done = true;
                Poll::Ready(Err(ToolError::internal(message)))
            }
        }
    }
}
