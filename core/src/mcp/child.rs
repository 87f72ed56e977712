//! A stdio server's child process, which dies with the host: on Linux it asks the kernel for
//! `SIGKILL` when its parent dies (`PR_SET_PDEATHSIG`), so a server that ignores the end of
//! its input does not outlive a host killed with `SIGKILL`. The kernel sends that signal when
//! the *thread* that started the child ends, so every child is started from one thread that
//! lives as long as the process.

use std::sync::{mpsc, OnceLock};

use rmcp::transport::TokioChildProcess;
use tokio::process::ChildStderr;
use tokio::runtime::Handle;

/// What a start gives: the transport and the child's standard error.
type Started = std::io::Result<(TokioChildProcess, Option<ChildStderr>)>;

/// One start, run on the starting thread within the caller's runtime.
type Job = Box<dyn FnOnce() + Send>;

/// Starts `cmd` (its standard error piped) from the process-long starting thread.
pub(crate) async fn spawn(mut cmd: tokio::process::Command) -> Started {
    dies_with_host(&mut cmd);
    let runtime = Handle::current();
    let (done, started) = tokio::sync::oneshot::channel::<Started>();
    let job: Job = Box::new(move || {
        let _entered = runtime.enter(); // the child's pipes register with the caller's runtime
        let result = TokioChildProcess::builder(cmd)
            .stderr(std::process::Stdio::piped())
            .spawn();
        let _ = done.send(result);
    });
    if starter().send(job).is_err() {
        return Err(std::io::Error::other(
            "the thread that starts MCP servers is gone",
        ));
    }
    started.await.unwrap_or_else(|_| {
        Err(std::io::Error::other(
            "the start of the MCP server was lost",
        ))
    })
}

/// The channel to the starting thread, started at first use.
fn starter() -> mpsc::Sender<Job> {
    static STARTER: OnceLock<mpsc::Sender<Job>> = OnceLock::new();
    STARTER
        .get_or_init(|| {
            let (to_thread, jobs) = mpsc::channel::<Job>();
            let spawned = std::thread::Builder::new()
                .name("toolhost-mcp-start".into())
                .spawn(move || {
                    for job in jobs {
                        job();
                    }
                });
            if let Err(e) = spawned {
                tracing::error!("no thread to start MCP servers from: {e}");
            }
            to_thread
        })
        .clone()
}

/// On Linux: the child gets `SIGKILL` when the host dies (and ends at once if the host died
/// before it could ask).
#[cfg(target_os = "linux")]
fn dies_with_host(cmd: &mut tokio::process::Command) {
    let host = std::process::id();
    // SAFETY: the hook runs in the child between fork and exec, and only makes system calls
    // that are async-signal-safe (prctl, getppid, _exit).
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::getppid() as u32 != host {
                libc::_exit(1); // the host is already gone
            }
            Ok(())
        });
    }
}

/// Elsewhere the child ends when its input does, or when the host drops it.
#[cfg(not(target_os = "linux"))]
fn dies_with_host(_cmd: &mut tokio::process::Command) {}
