//! A worker's limits: memory, CPU time, and a call past its deadline that does not stop.

use std::time::{Duration, Instant};

use plugin_api::ErrorKind;
use serde_json::json;
use toolhost_tests::{block_on, Fixture, TestRoot};

use super::{alive, root_with_crashy, wait_gone};

#[test]
fn the_memory_limit_is_enforced_with_a_clear_error() {
    let root = root_with_crashy("");
    let (agent, _) = root.agent("default");
    let r = block_on(agent.call_tool("crashy:alloc", json!({"mib": 16}))).unwrap();
    assert_eq!(r.message, format!("allocated {} bytes", 16 << 20));
    let e = block_on(agent.call_tool("crashy:alloc", json!({"mib": 1024}))).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Internal);
    assert!(
        e.message().starts_with(
            "the plugin process died: SIGABRT (aborted) while limited to 256 MiB ([isolation] memory_mb, or the grant memory:MB)"
        ),
        "{}",
        e.message()
    );
    assert!(block_on(agent.call_tool("crashy", json!({}))).is_ok());
}

#[test]
fn the_cpu_time_limit_is_enforced_with_a_clear_error() {
    let root = root_with_crashy("cpu_seconds = 1\n\n[tools.crashy]\ntimeout_seconds = 20\n");
    let (agent, _) = root.agent("default");
    let started = Instant::now();
    let e = block_on(agent.call_tool("crashy:spin", json!({}))).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Internal);
    assert!(
        e.message().contains("went over its CPU time limit of 1 s"),
        "{}",
        e.message()
    );
    assert!(started.elapsed() < Duration::from_secs(15));
    assert!(block_on(agent.call_tool("crashy", json!({}))).is_ok());
}

#[test]
fn a_call_past_its_deadline_times_out_and_a_worker_that_does_not_stop_is_killed() {
    let extra = "grace_ms = 200\n\n[tools.crashy]\ntimeout_seconds = 0.3\n";
    let root = root_with_crashy(extra);
    let (agent, _) = root.agent("default");
    let pid: u32 = block_on(agent.call_tool("crashy:pid", json!({})))
        .unwrap()
        .message
        .parse()
        .unwrap();
    let started = Instant::now();
    let e = block_on(agent.call_tool("crashy:spin", json!({}))).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Timeout, "{}", e.message());
    assert!(
        e.message().contains("did not answer within 0.3 s"),
        "{}",
        e.message()
    );
    assert!(started.elapsed() < Duration::from_secs(3));
    // The spinning worker was killed after the grace period; the next call gets a new one.
    wait_gone(pid);
    let next: u32 = block_on(agent.call_tool("crashy:pid", json!({})))
        .unwrap()
        .message
        .parse()
        .unwrap();
    assert_ne!(next, pid);
    assert!(alive(next));
}

#[test]
fn a_cooperative_tool_sees_its_cancellation_and_its_worker_lives_on() {
    let root = TestRoot::new();
    root.tool("usr", "governed", Fixture::Governed);
    root.write(
        "usr/toolhost.toml",
        format!(
            "isolate = [\"governed\"]\n\n[isolation]\ngrace_ms = 5000\n\n[tools.governed]\ntimeout_seconds = 0.3\ngrant = [\"write:{}\"]\n",
            root.path().join("files").display()
        ),
    );
    // Sandboxed, it writes its note in the folder granted to it.
    std::fs::create_dir(root.path().join("files")).unwrap();
    let (agent, _) = root.agent("default");
    let handle = super::handle(agent.host(), "governed");
    let pid = handle.worker_pid().expect("a worker");
    let note = root.path().join("files/note.txt");
    let args = json!({"city": "x", "note": note.to_str().unwrap()});
    let e = block_on(agent.call_tool("governed:cooperative", args)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Timeout, "{}", e.message());
    let seen = toolhost_tests::wait_for_text("the tool to see its cancellation", &note);
    assert_eq!(seen, "cancelled true");
    // It stopped within its grace period: the same worker serves the next call.
    block_on(agent.call_tool("governed", json!({"city": "x"}))).unwrap();
    assert_eq!(handle.worker_pid(), Some(pid));
}
