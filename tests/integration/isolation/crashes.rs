//! Each kind of crash in an isolated tool is an `internal` error of that call that names what
//! happened; the host, other tools and the same tool (in a new worker) go on.

use plugin_api::ErrorKind;
use serde_json::json;
use toolhost_tests::block_on;

use super::root_with_crashy;

/// The crashes and what their error must say: the signal from the worker's wait status, and
/// the memory limit the host set (never what the plugin wrote on its standard error).
pub(super) const CRASHES: [(&str, &str); 5] = [
    ("abort", "the plugin process died: SIGABRT (aborted)"),
    (
        "segv",
        "the plugin process died: SIGSEGV (segmentation fault)",
    ),
    ("overflow", "the plugin process died: SIGABRT (aborted)"),
    (
        "alloc",
        "the plugin process died: SIGABRT (aborted) while limited to 256 MiB ([isolation] memory_mb, or the grant memory:MB)",
    ),
    ("double_panic", "the plugin process died: SIGABRT (aborted)"),
];

#[test]
fn every_kind_of_crash_fails_only_its_call() {
    let root = root_with_crashy("");
    let (agent, _) = root.agent("default");
    let host_pid = std::process::id();
    let first = block_on(agent.call_tool("crashy:pid", json!({}))).unwrap();
    assert_ne!(
        first.message,
        host_pid.to_string(),
        "runs in another process"
    );
    for (method, expected) in CRASHES {
        let e = block_on(agent.call_tool(&format!("crashy:{method}"), json!({}))).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Internal, "{method}: {}", e.message());
        assert!(e.message().contains(expected), "{method}: {}", e.message());
        // Another tool, and the same one (in a new worker), work in the same host.
        let r = block_on(agent.call_tool("echo", json!({"after": method}))).unwrap();
        assert_eq!(r.message, format!(r#"{{"after":"{method}"}}"#));
        let r = block_on(agent.call_tool("crashy", json!({}))).unwrap();
        assert_eq!(r.message, "ok", "after {method}");
    }
    let last = block_on(agent.call_tool("crashy:pid", json!({}))).unwrap();
    assert_ne!(
        last.message, first.message,
        "a new worker after the crashes"
    );
}

#[test]
fn crashes_count_for_the_breaker() {
    let root = root_with_crashy("\n[breaker]\nfailures = 2\ncooldown_seconds = 60\n");
    let (agent, _) = root.agent("default");
    for _ in 0..2 {
        let e = block_on(agent.call_tool("crashy:segv", json!({}))).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Internal);
    }
    // Two crashes in a row opened the breaker: the tool is refused without a worker.
    let e = block_on(agent.call_tool("crashy", json!({}))).unwrap_err();
    assert!(
        e.message()
            .contains("after 2 failures (last: the plugin process died: SIGSEGV"),
        "{}",
        e.message()
    );
    let handle = super::handle(agent.host(), "crashy");
    assert!(handle
        .unavailable()
        .unwrap()
        .contains("circuit breaker open"));
}

#[test]
fn a_worker_that_keeps_dying_is_started_again_after_a_delay() {
    let root = root_with_crashy("\n[breaker]\nfailures = 100\n");
    let (agent, _) = root.agent("default");
    for _ in 0..2 {
        block_on(agent.call_tool("crashy:abort", json!({}))).unwrap_err();
    }
    // The third worker is not started at once: the call says when it will be.
    let e = block_on(agent.call_tool("crashy", json!({}))).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Internal);
    assert!(
        e.message()
            .contains("died 2 times in a row (last: the plugin process died: SIGABRT (aborted)")
            && e.message().contains("it is started again in"),
        "{}",
        e.message()
    );
    std::thread::sleep(std::time::Duration::from_millis(150));
    let r = block_on(agent.call_tool("crashy", json!({}))).unwrap();
    assert_eq!(r.message, "ok");
}
