//! A worker's limits (memory, CPU time), set in the child before it runs the worker, and the
//! words for how a worker ended: a signal's name, or the limit it went over.

use std::process::ExitStatus;

pub use crate::config::IsolationSettings;

/// Sets the limits of the current process. Runs in the child between `fork` and `exec`, so it
/// only makes system calls (no allocation, no locks).
#[cfg(unix)]
pub(crate) fn apply(settings: &IsolationSettings) -> std::io::Result<()> {
    fn set(resource: libc::__rlimit_resource_t, soft: u64, hard: u64) -> std::io::Result<()> {
        let limit = libc::rlimit {
            rlim_cur: soft as libc::rlim_t,
            rlim_max: hard as libc::rlim_t,
        };
        // SAFETY: a plain system call with a valid pointer.
        match unsafe { libc::setrlimit(resource, &limit) } {
            0 => Ok(()),
            _ => Err(std::io::Error::last_os_error()),
        }
    }
    // A crash must not spend seconds writing a core file of a large process.
    set(libc::RLIMIT_CORE, 0, 0)?;
    if let Some(mb) = settings.memory_mb {
        let bytes = mb.saturating_mul(1 << 20);
        set(libc::RLIMIT_AS, bytes, bytes)?;
    }
    if let Some(seconds) = settings.cpu_seconds {
        // SIGXCPU at the soft limit; the kernel's SIGKILL one second later if it is ignored.
        set(libc::RLIMIT_CPU, seconds, seconds + 1)?;
    }
    Ok(())
}

/// What ended a worker, in words: `the plugin process died: SIGSEGV (segmentation fault)`.
///
/// `stderr` is the end of what the worker wrote on its standard error (Rust's runtime says
/// there why it aborted); `killed` is the host's reason when the host killed it.
pub(crate) fn death_reason(
    status: Option<ExitStatus>,
    stderr: &str,
    settings: &IsolationSettings,
    killed: Option<&str>,
) -> String {
    if let Some(killed) = killed {
        return format!("the plugin process was killed: {killed}");
    }
    let signal = status.and_then(signal_of);
    if let Some(line) = find_line(stderr, "memory allocation of") {
        return match settings.memory_mb {
            Some(mb) => format!(
                "the plugin process went over its memory limit of {mb} MiB ({line}); raise [isolation] memory_mb in toolhost.toml if it needs more"
            ),
            None => format!("the plugin process ran out of memory ({line})"),
        };
    }
    if find_line(stderr, "has overflowed its stack").is_some() {
        return "the plugin process died: stack overflow".to_owned();
    }
    if find_line(stderr, "panicked while processing panic").is_some()
        || find_line(stderr, "panic in a destructor during cleanup").is_some()
        || find_line(stderr, "non-unwinding panic").is_some()
    {
        return "the plugin process died: a panic while panicking aborted it (SIGABRT)".to_owned();
    }
    #[cfg(unix)]
    if let (Some(libc::SIGXCPU | libc::SIGKILL), Some(seconds)) = (signal, settings.cpu_seconds) {
        return format!(
            "the plugin process went over its CPU time limit of {seconds} s; raise [isolation] cpu_seconds in toolhost.toml if it needs more"
        );
    }
    match (signal, status.and_then(|s| s.code())) {
        (Some(signal), _) => format!("the plugin process died: {}", signal_name(signal)),
        (None, Some(code)) => format!("the plugin process exited with code {code}"),
        (None, None) => "the plugin process ended".to_owned(),
    }
}

/// The first line of `text` holding `needle`, trimmed (at most 200 bytes of it).
fn find_line<'a>(text: &'a str, needle: &str) -> Option<&'a str> {
    let line = text.lines().find(|l| l.contains(needle))?.trim();
    let mut end = line.len().min(200);
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    Some(&line[..end])
}

#[cfg(unix)]
fn signal_of(status: ExitStatus) -> Option<i32> {
    std::os::unix::process::ExitStatusExt::signal(&status)
}

#[cfg(not(unix))]
fn signal_of(_: ExitStatus) -> Option<i32> {
    None
}

/// `SIGSEGV (segmentation fault)`; an unknown number as `signal 42`.
pub(crate) fn signal_name(signal: i32) -> String {
    #[cfg(unix)]
    let known = match signal {
        libc::SIGHUP => Some(("SIGHUP", "hang-up")),
        libc::SIGINT => Some(("SIGINT", "interrupted")),
        libc::SIGQUIT => Some(("SIGQUIT", "quit")),
        libc::SIGILL => Some(("SIGILL", "illegal instruction")),
        libc::SIGTRAP => Some(("SIGTRAP", "trace trap")),
        libc::SIGABRT => Some(("SIGABRT", "aborted")),
        libc::SIGBUS => Some(("SIGBUS", "bus error")),
        libc::SIGFPE => Some(("SIGFPE", "arithmetic error")),
        libc::SIGKILL => Some(("SIGKILL", "killed")),
        libc::SIGSEGV => Some(("SIGSEGV", "segmentation fault")),
        libc::SIGPIPE => Some(("SIGPIPE", "broken pipe")),
        libc::SIGALRM => Some(("SIGALRM", "alarm")),
        libc::SIGTERM => Some(("SIGTERM", "terminated")),
        libc::SIGXCPU => Some(("SIGXCPU", "CPU time limit")),
        libc::SIGXFSZ => Some(("SIGXFSZ", "file size limit")),
        libc::SIGSYS => Some(("SIGSYS", "bad system call")),
        _ => None,
    };
    #[cfg(not(unix))]
    let known: Option<(&str, &str)> = None;
    match known {
        Some((name, what)) => format!("{name} ({what})"),
        None => format!("signal {signal}"),
    }
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::process::ExitStatusExt;

    use super::*;

    fn signalled(signal: i32) -> Option<ExitStatus> {
        Some(ExitStatus::from_raw(signal))
    }

    #[test]
    fn each_ending_is_named() {
        let none = IsolationSettings::default();
        assert_eq!(
            death_reason(signalled(libc::SIGSEGV), "", &none, None),
            "the plugin process died: SIGSEGV (segmentation fault)"
        );
        let oom = "memory allocation of 21474836480 bytes failed\n";
        let limited = IsolationSettings {
            memory_mb: Some(256),
            ..none
        };
        let reason = death_reason(signalled(libc::SIGABRT), oom, &limited, None);
        assert!(reason.starts_with("the plugin process went over its memory limit of 256 MiB"));
        let overflow = "\nthread 'x' has overflowed its stack\nfatal runtime error: stack overflow";
        assert_eq!(
            death_reason(signalled(libc::SIGABRT), overflow, &none, None),
            "the plugin process died: stack overflow"
        );
        let cpu = IsolationSettings {
            cpu_seconds: Some(1),
            ..none
        };
        assert!(death_reason(signalled(libc::SIGXCPU), "", &cpu, None)
            .contains("CPU time limit of 1 s"));
        assert_eq!(
            death_reason(Some(ExitStatus::from_raw(3 << 8)), "", &none, None),
            "the plugin process exited with code 3"
        );
        assert_eq!(signal_name(77), "signal 77");
    }
}
