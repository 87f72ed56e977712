//! The plugin's own tokio runtime, and the guard that runs plugin futures inside it.
//!
//! A plugin library links its own copy of tokio, whose thread-locals the host's runtime never
//! sets. Every future the export glue hands to the host is polled through [`Guarded`], which
//! makes this plugin's runtime current on the polling thread (once per thread), so timers and
//! I/O register with a driver that a thread of this plugin keeps turning. The runtime (current-thread, driven by one thread of the
//! plugin) starts on first use and stops when the host calls the module's `shutdown`.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::mem::ManuallyDrop;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::{Mutex, Once, OnceLock};
use std::task::{Context as TaskContext, Poll};

use tokio::runtime::{Builder, Handle};

use crate::ToolError;

static HANDLE: OnceLock<Handle> = OnceLock::new();
type Driver = (
    tokio::sync::oneshot::Sender<()>,
    std::thread::JoinHandle<()>,
);
static RUNTIME: Mutex<Option<Driver>> = Mutex::new(None);

/// A handle to this plugin's tokio runtime, started on first use.
///
/// Use it to `spawn` background tasks that outlive a call; code inside `execute` already runs in
/// the runtime's context and needs nothing special.
pub fn handle() -> &'static Handle {
    HANDLE.get_or_init(|| {
        let runtime = Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("could not start the plugin's tokio runtime");
        let handle = runtime.handle().clone();
        // One thread of this plugin drives the runtime's timers and I/O until shutdown.
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let driver = std::thread::Builder::new()
            .name("plugin-runtime".to_owned())
            .spawn(move || {
                runtime.block_on(async {
                    let _ = stopped.await;
                });
                // Drops the tasks still spawned, without waiting for `spawn_blocking` work,
                // which may never end: shutdown must not hang the host.
                runtime.shutdown_background();
            })
            .expect("could not start the plugin's runtime thread");
        *RUNTIME.lock().unwrap_or_else(|e| e.into_inner()) = Some((stop, driver));
        handle
    })
}

/// Makes this plugin's runtime the current one on this thread, once per thread.
///
/// The guard is kept (forgotten) rather than dropped after each poll: the context lives in this
/// plugin's own copy of tokio, which the host's tokio never reads, so leaving it set costs the
/// host nothing and saves entering and leaving on every poll of every call.
fn enter_runtime() {
    thread_local! {
        static ENTERED: Cell<bool> = const { Cell::new(false) };
    }
    if !ENTERED.with(Cell::get) {
        std::mem::forget(handle().enter());
        ENTERED.with(|e| e.set(true));
    }
}

/// Stops the runtime's thread; tasks still spawned on it are dropped, and blocking tasks are
/// left to finish on their own. Called by the host through the module's `shutdown` once the
/// last call on this build of the library has ended.
pub fn shutdown() {
    if let Some((stop, driver)) = RUNTIME.lock().unwrap_or_else(|e| e.into_inner()).take() {
        let _ = stop.send(());
        let _ = driver.join();
    }
}

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
pub struct Guarded<F> {
    inner: ManuallyDrop<F>,
    done: bool,
}

impl<F> Guarded<F> {
    /// Wraps a future.
    pub fn new(inner: F) -> Self {
        Self {
            inner: ManuallyDrop::new(inner),
            done: false,
        }
    }
}

impl<F> Drop for Guarded<F> {
    fn drop(&mut self) {
        // SAFETY: `inner` is dropped exactly once, here, and never used again.
        let _ = catch_panic(|| {
            enter_runtime();
            unsafe { ManuallyDrop::drop(&mut self.inner) }
        });
    }
}

impl<T, F: Future<Output = Result<T, ToolError>>> Future for Guarded<F> {
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
            enter_runtime();
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
