//! Isolated plugins: a tool's library in a worker process. Every kind of crash fails its call
//! and nothing else (through the library, `call`, `run` and `watch`); the context works across
//! the pipe; deadlines, grace and limits hold; reloads give memory back; a worker outlives no
//! host.

mod cli;
mod confined;
mod context;
mod crashes;
mod holes;
mod limits;
mod memory;
mod sandbox;

use std::time::Duration;

use toolhost_tests::{Fixture, TestRoot};

/// A root with `crashy` (isolated by `toolhost.toml`, with `extra` config lines) and `echo`
/// (in the host's process).
pub(super) fn root_with_crashy(extra: &str) -> TestRoot {
    let root = TestRoot::new();
    root.tool("usr", "crashy", Fixture::Crashy);
    root.tool("usr", "echo", Fixture::Echo);
    root.tool("core", "response", Fixture::Response);
    root.write(
        "usr/toolhost.toml",
        format!("isolate = [\"crashy\"]\n\n[isolation]\nmemory_mb = 256\n{extra}"),
    );
    root
}

/// The handle of the tool `name` that profile `default` resolves to (it must have one).
pub(super) fn handle(host: &toolhost::Host, name: &str) -> std::sync::Arc<toolhost::ToolHandle> {
    host.resolve("default", name)
        .found
        .clone()
        .unwrap_or_else(|| panic!("no tool {name}"))
        .handle
}

/// Whether process `pid` is alive (a zombie counts as gone).
pub(super) fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z')),
        Err(_) => false,
    }
}

/// Waits up to 10 s for process `pid` to end.
pub(super) fn wait_gone(pid: u32) {
    toolhost_tests::wait_for(&format!("process {pid} to end"), || match alive(pid) {
        true => Err(()),
        false => Ok(()),
    });
    std::thread::sleep(Duration::from_millis(1));
}
