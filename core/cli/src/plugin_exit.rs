//! A tool that ends the process (`exit(0)` in an in-process plugin) during `toolhost call`:
//! the process must not end quietly with status 0 and no output. An `atexit` hook, armed
//! while the call runs, says so on standard error and ends the process with
//! [`PLUGIN_EXITED`](crate::exit::PLUGIN_EXITED). The call's write-ahead audit record then
//! stays "started, never finished", which `toolhost audit verify` and the next call report.

use std::io::Write as _;
use std::sync::{Mutex, Once};

/// The tool whose call is running, while one is.
static CALLING: Mutex<Option<String>> = Mutex::new(None);

/// The hook is registered once per process.
static HOOK: Once = Once::new();

/// Disarms the hook when the call returns, however it returns.
pub(crate) struct Armed(());

impl Drop for Armed {
    fn drop(&mut self) {
        if let Ok(mut calling) = CALLING.lock() {
            *calling = None;
        }
    }
}

/// Arms the hook for the call of `name` until the returned guard drops.
pub(crate) fn arm(name: &str) -> Armed {
    HOOK.call_once(|| {
        // SAFETY: `on_exit` is an `extern "C" fn()` that lives as long as the program.
        unsafe { libc::atexit(on_exit) };
    });
    if let Ok(mut calling) = CALLING.lock() {
        *calling = Some(name.to_owned());
    }
    Armed(())
}

/// Run by `exit`: if a call is running, its tool ended the process.
extern "C" fn on_exit() {
    let Ok(calling) = CALLING.try_lock() else {
        return;
    };
    let Some(name) = calling.as_deref() else {
        return;
    };
    let name = toolhost::Escaped(std::path::Path::new(name)); // on one line
    let _ = writeln!(
        std::io::stderr(),
        "error: tool '{name}' ended the process (it called exit) before its call finished: \
         its answer is lost, and its audit record stays \"started, never finished\""
    );
    // SAFETY: `_exit` ends the process at once, which is what is wanted here (the other exit
    // hooks and buffers belong to a process whose call was cut short).
    unsafe { libc::_exit(crate::exit::PLUGIN_EXITED.into()) };
}
