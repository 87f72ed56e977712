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

/// Why a worker with `settings` cannot start on this system, if it cannot: a memory or CPU
/// time limit is set as rlimits in the child (Unix's), and a worker on Windows runs without any
/// (no job object bounds it). A sandboxed tool with `[sandbox] weaker = true` runs without its
/// sandbox's limits as without its sandbox; the limits of `[isolation]` and of grants are
/// refused rather than not enforced.
#[cfg(not(unix))]
pub(crate) fn unenforceable(settings: &IsolationSettings) -> Option<String> {
    if settings.sandbox.as_ref().is_some_and(|s| s.weaker) {
        return None;
    }
    let mut set = Vec::new();
    if let Some(mb) = settings.memory_mb {
        set.push(format!("memory {mb} MiB"));
    }
    if let Some(seconds) = settings.cpu_seconds {
        set.push(format!("CPU {seconds} s"));
    }
    if set.is_empty() {
        return None;
    }
    Some(format!(
        "its limits ({}) cannot be enforced on this system (they are Unix rlimits): remove [isolation] memory_mb and cpu_seconds and the grants memory: and cpu: for it, or, for a sandboxed tool, set [sandbox] weaker = true to run it without a sandbox and its limits",
        set.join(", ")
    ))
}

/// How a worker ended, as the kernel reported it when the host reaped it: never from anything
/// the plugin wrote, which it could forge.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Ending {
    /// Its wait status.
    pub(crate) status: Option<ExitStatus>,
    /// The CPU time (user and system) it used over its life.
    pub(crate) cpu: Option<std::time::Duration>,
    /// Whether the kernel's out-of-memory killer ended a process of its control group at its
    /// memory limit (the group's own count).
    pub(crate) oom_killed: bool,
}

/// A sandboxed worker's limits and what enforces them, in words: `memory 1024 MiB, CPU 600 s,
/// 256 tasks (cgroup v1 and rlimits)`; `group` is the control group's hierarchy, or why
/// there is none.
pub(crate) fn describe(settings: &IsolationSettings, group: Result<&str, &String>) -> String {
    if cfg!(not(unix)) {
        // Started only with `[sandbox] weaker = true` ([`unenforceable`]).
        return "no limits: this system has no rlimits ([sandbox] weaker = true allows it)"
            .to_owned();
    }
    let mut limits = Vec::new();
    if let Some(mb) = settings.memory_mb {
        limits.push(format!("memory {mb} MiB"));
    }
    if let Some(seconds) = settings.cpu_seconds {
        limits.push(format!("CPU {seconds} s"));
    }
    match (settings.tasks, group) {
        (Some(tasks), Ok(hierarchy)) => {
            limits.push(format!("{tasks} tasks"));
            if let Some(cpus) = settings.cpus {
                let noun = if cpus == 1 { "CPU" } else { "CPUs" };
                limits.push(format!("{cpus} {noun} at once"));
            }
            format!("{} ({hierarchy} and rlimits)", limits.join(", "))
        }
        (_, Err(why)) => format!(
            "{} (rlimits; threads bounded by the memory limit only: {why})",
            limits.join(", ")
        ),
        (None, Ok(hierarchy)) => format!("{} ({hierarchy} and rlimits)", limits.join(", ")),
    }
}

/// What ended a worker, in words: `the plugin process died: SIGSEGV (segmentation fault)`.
///
/// Only the wait status, the CPU time the kernel counted and the limits the host set are
/// read; `killed` is the host's reason when the host killed it. A limit is named as the cause
/// only when the kernel's account shows it (the CPU limit), or as the likely cause of a signal
/// that going over it raises (the memory limit: a refused allocation aborts).
pub(crate) fn death_reason(
    ending: &Ending,
    settings: &IsolationSettings,
    killed: Option<&str>,
) -> String {
    if let Some(killed) = killed {
        return format!("the plugin process was killed: {killed}");
    }
    let signal = ending.status.and_then(signal_of);
    if let (true, Some(mb)) = (ending.oom_killed, settings.memory_mb) {
        return format!(
            "the plugin process was killed at its memory limit of {mb} MiB (the kernel's out-of-memory killer, in its control group); grant more with memory:MB if it needs more"
        );
    }
    #[cfg(unix)]
    if let (Some(libc::SIGXCPU | libc::SIGKILL), Some(seconds)) = (signal, settings.cpu_seconds) {
        // The kernel sends these at the limit; a plugin raising them itself has not used it.
        // The kernel compares the limit with its tick-sampled count, which on a busy machine
        // runs ahead of the precise count rusage reports (0.86 s at a 1 s limit, measured
        // with 8 test threads on 2 cores): half the limit still tells a raise at once apart.
        let used = ending.cpu.map_or(0.0, |cpu| cpu.as_secs_f64());
        if used >= seconds as f64 * 0.5 {
            return format!(
                "the plugin process went over its CPU time limit of {seconds} s; raise [isolation] cpu_seconds in toolhost.toml if it needs more"
            );
        }
    }
    match (signal, ending.status.and_then(|s| s.code())) {
        (Some(signal), _) => {
            let mut reason = format!("the plugin process died: {}", signal_name(signal));
            if let (true, Some(mb)) = (memory_signal(signal), settings.memory_mb) {
                reason.push_str(&format!(
                    " while limited to {mb} MiB ([isolation] memory_mb, or the grant memory:MB): an allocation over that limit ends a process this way"
                ));
            }
            reason
        }
        (None, Some(code)) => format!("the plugin process exited with code {code}"),
        (None, None) => "the plugin process ended".to_owned(),
    }
}

/// Whether `signal` is one a refused allocation ends a process with (an abort from the
/// allocation error handler; a fault where a stack or a mapping could not grow).
fn memory_signal(signal: i32) -> bool {
    #[cfg(unix)]
    return matches!(signal, libc::SIGABRT | libc::SIGSEGV | libc::SIGBUS);
    #[cfg(not(unix))]
    return false;
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
    fn each_ending_is_named_from_the_status_and_the_limits_only() {
        let none = IsolationSettings::default();
        let ending = |status, cpu| Ending {
            status,
            cpu: Some(std::time::Duration::from_secs_f64(cpu)),
            oom_killed: false,
        };
        assert_eq!(
            death_reason(&ending(signalled(libc::SIGSEGV), 0.0), &none, None),
            "the plugin process died: SIGSEGV (segmentation fault)"
        );
        let limited = IsolationSettings {
            memory_mb: Some(256),
            ..none.clone()
        };
        let reason = death_reason(&ending(signalled(libc::SIGABRT), 0.0), &limited, None);
        assert!(
            reason.starts_with(
                "the plugin process died: SIGABRT (aborted) while limited to 256 MiB ([isolation] memory_mb, or the grant memory:MB)"
            ),
            "{reason}"
        );
        let cpu = IsolationSettings {
            cpu_seconds: Some(1),
            ..none.clone()
        };
        for used in [1.0, 0.86] {
            assert!(
                death_reason(&ending(signalled(libc::SIGXCPU), used), &cpu, None)
                    .contains("CPU time limit of 1 s")
            );
        }
        // A plugin that raises SIGXCPU itself has not used its CPU time.
        assert_eq!(
            death_reason(&ending(signalled(libc::SIGXCPU), 0.01), &cpu, None),
            "the plugin process died: SIGXCPU (CPU time limit)"
        );
        assert_eq!(
            death_reason(
                &ending(Some(ExitStatus::from_raw(3 << 8)), 0.0),
                &none,
                None
            ),
            "the plugin process exited with code 3"
        );
        assert_eq!(signal_name(77), "signal 77");
    }
}
