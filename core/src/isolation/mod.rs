//! Isolated plugins: a tool's library, unchanged, loaded in a worker process instead of the
//! host, so that whatever its code does (abort, a segmentation fault, a stack overflow, running
//! out of memory, a panic while panicking) ends that process, not the host; and so that a
//! rebuilt library's memory is given back when its old worker exits.
//!
//! - `protocol.rs`: the messages and their frames (postcard, length-prefixed);
//! - `worker_process.rs`: starting a worker with its limits, the pipe, its reader thread, and
//!   turning its end into one line (`limits.rs` names signals and limits);
//! - `isolated_tool.rs`: a tool's worker, restarted with backoff, and its calls with deadline
//!   and grace period;
//! - `host_requests.rs`: the host answers the plugin's context requests with the call's real context;
//! - `sandbox.rs`: the sandbox a worker confines itself to, computed from the tool's grants;
//! - `cgroup.rs`: a sandboxed worker's control group (memory, tasks, and the end of all its
//!   processes with it).
//!
//! The worker process itself is [`crate::worker`]: this module is the host's side of it.
//!
//! Which tools are isolated is configured in `toolhost.toml` (`isolate = [...]`, see
//! [`Config::isolated`](crate::config::Config::isolated)) or for every tool with
//! [`HostOptions::isolate_all`](crate::HostOptions::isolate_all).

mod cgroup;
mod host_requests;
pub(crate) mod isolated_tool;
mod limits;
pub(crate) mod protocol;
pub(crate) mod sandbox;
mod worker_process;
mod worker_reader;

use std::path::PathBuf;

pub(crate) use isolated_tool::IsolatedTool;
pub use limits::IsolationSettings;

/// The name of the hidden command that runs a worker (`toolhost __worker LIBRARY SOURCE`,
/// which calls [`serve_worker`](crate::worker::serve_worker)).
pub const WORKER_COMMAND: &str = "__worker";

/// The program that runs workers: `TOOLHOST_WORKER` if set; else this program if it is the
/// `toolhost` binary; else a `toolhost` binary beside it or one folder up (a test or bench
/// binary in `target/<profile>/deps/`).
pub(crate) fn default_worker_program() -> PathBuf {
    if let Some(program) = std::env::var_os("TOOLHOST_WORKER") {
        return PathBuf::from(program);
    }
    let name = format!("toolhost{}", std::env::consts::EXE_SUFFIX);
    let Ok(exe) = std::env::current_exe() else {
        return PathBuf::from(name);
    };
    if exe.file_name().is_some_and(|n| n == name.as_str()) {
        return exe;
    }
    exe.ancestors()
        .skip(1)
        .take(2)
        .map(|dir| dir.join(&name))
        .find(|candidate| candidate.is_file())
        .unwrap_or_else(|| PathBuf::from(name))
}
