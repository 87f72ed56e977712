//! The plugin's own tokio runtime.
//!
//! A plugin library links its own copy of tokio, whose thread-locals the host's runtime never
//! sets. So every call into the plugin (`execute`, hooks, extensions) runs with this plugin's
//! runtime made current on the polling thread, and timers and I/O register with a driver that a
//! thread of this plugin keeps turning. The runtime (current-thread, driven by one thread of the
//! plugin) starts on first use and stops after the host has let go of this build of the library
//! (see [`Tool`](crate::Tool)'s "Reloads and shutdown").
//!
//! Code inside `execute` needs nothing from here; [`handle`] is for spawning tasks that outlive
//! a call:
//!
//! ```
//! # async fn f() {
//! let task = plugin_api::runtime::handle().spawn(async { 6 * 7 });
//! # let _ = task;
//! # }
//! ```

use std::cell::Cell;
use std::sync::{Mutex, OnceLock};

use tokio::runtime::{Builder, Handle};

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
pub(crate) fn enter_runtime() {
    thread_local! {
        static ENTERED: Cell<bool> = const { Cell::new(false) };
    }
    if !ENTERED.with(Cell::get) {
        std::mem::forget(handle().enter());
        ENTERED.with(|e| e.set(true));
    }
}

/// Polls plugin futures in this plugin's runtime (the export glue's panic guard).
pub(crate) struct PluginRuntime;

impl plugin_abi::guard::Enter for PluginRuntime {
    fn enter() {
        enter_runtime();
    }
}

/// Stops the runtime's thread; tasks still spawned on it are dropped, and blocking tasks are
/// left to finish on their own. Called by the host through the module's `shutdown` once the
/// last call on this build of the library has ended. Only the module's `shutdown` function in
/// the export glue calls it: a plugin cannot stop its own runtime.
pub(crate) fn shutdown() {
    if let Some((stop, driver)) = RUNTIME.lock().unwrap_or_else(|e| e.into_inner()).take() {
        let _ = stop.send(());
        let _ = driver.join();
    }
}
