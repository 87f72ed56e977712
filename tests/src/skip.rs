//! Skipped tests, never a silent pass. A test that cannot run here (a tool it needs is
//! missing and cannot be installed, a registry cannot be reached) calls [`skipped`]: under
//! `CI=true` that fails the test; elsewhere the test's name and the reason go on one line
//! to the process's standard error as it is, past the test harness's capture (libtest
//! captures only what the `print!` family writes, through its output-capture hook; a write
//! to [`std::io::stderr`] itself goes straight to file descriptor 2), and when the test
//! binary ends, after the harness's own `test result:` line, one more block counts the
//! skipped tests and says why each was.

use std::io::Write as _;
use std::sync::{Mutex, Once};

/// The tests skipped so far in this process: the test's name and why.
static SKIPPED: Mutex<Vec<(String, String)>> = Mutex::new(Vec::new());

/// Registers [`summary`] to run at the process's exit, once.
static AT_EXIT: Once = Once::new();

/// Notes that the running test is skipped because of `why` (one line saying what is missing
/// and how to get it), and says so on the process's standard error at once. The test then
/// returns without checking anything.
///
/// # Panics
///
/// Under `CI=true` (see [`in_ci`](crate::peers::in_ci)), with `why`: there a test must not
/// skip for want of a tool.
pub fn skipped(why: &str) {
    if crate::peers::in_ci() {
        panic!("{why}; under CI=true this test must run, not skip");
    }
    // libtest runs each test on a thread named after it.
    let test = std::thread::current()
        .name()
        .unwrap_or("a test outside the harness")
        .to_owned();
    uncaptured(&format!("SKIPPED {test}: {why}\n"));
    SKIPPED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((test, why.to_owned()));
    AT_EXIT.call_once(|| {
        // SAFETY: `atexit` only stores the pointer of a function that takes nothing, unwinds
        // nothing (`summary` catches its own panics) and lives as long as the process.
        let registered = unsafe { atexit(summary) };
        if registered != 0 {
            uncaptured("cannot count the skipped tests at exit: atexit failed\n");
        }
    });
}

/// How many tests this process skipped so far.
pub fn count() -> usize {
    SKIPPED.lock().unwrap_or_else(|e| e.into_inner()).len()
}

/// Writes `text` to the process's standard error itself, past the test harness's capture.
fn uncaptured(text: &str) {
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

unsafe extern "C" {
    fn atexit(callback: extern "C" fn()) -> std::ffi::c_int;
}

/// At the process's exit: the count of skipped tests, and why each was.
extern "C" fn summary() {
    let _ = std::panic::catch_unwind(|| {
        let skipped = SKIPPED.lock().unwrap_or_else(|e| e.into_inner());
        let mut text = format!(
            "\n{} test(s) SKIPPED, not passed (under CI=true they fail):\n",
            skipped.len()
        );
        for (test, why) in skipped.iter() {
            text.push_str(&format!("  {test}: {why}\n"));
        }
        uncaptured(&text);
    });
}
