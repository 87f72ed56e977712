//! A plugin's panic becomes an error of that call, with its message; the host lives on.

use plugin_api::ErrorKind;
use serde_json::json;
use toolhost_tests::{block_on, spawn_call, Fixture, TestRoot};

fn root_with_panicky() -> TestRoot {
    let root = TestRoot::new();
    root.tool("usr", "panicky", Fixture::Panicky);
    root.tool("usr", "echo", Fixture::Echo);
    root
}

fn assert_panic_error(request: &str, message: &str) {
    let root = root_with_panicky();
    let (agent, _) = root.agent("default");
    let e = block_on(agent.call_tool(request, json!({}))).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Internal);
    assert!(e.message().contains(message), "{}", e.message());
    assert!(
        e.message()
            .contains("panicked at tests/fixtures/panicky/src/lib.rs:"),
        "{}",
        e.message()
    );
    // The host, the same library and other tools keep working.
    assert!(block_on(agent.call_tool(request, json!({}))).is_err());
    let r = block_on(agent.call_tool("echo", json!({"still": "alive"}))).unwrap();
    assert_eq!(r.message, r#"{"still":"alive"}"#);
    assert_eq!(agent.current_tool(), None);
}

#[test]
fn a_tool_that_panics_at_once() {
    assert_panic_error("panicky", "boom at once");
}

#[test]
fn a_tool_that_panics_inside_its_future_after_awaiting() {
    assert_panic_error("panicky:later", "boom after awaiting");
}

#[test]
fn a_tool_whose_hook_panics() {
    assert_panic_error("panicky:hook", "boom in before_execution");
}

#[test]
fn an_extension_that_panics() {
    let root = TestRoot::new();
    root.tool("usr", "echo", Fixture::Echo);
    root.extension("usr", "tool_execute_after", "_10_boom", Fixture::PanickyExt);
    let (agent, _) = root.agent("default");
    let e = block_on(agent.call_tool("echo", json!({}))).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Internal);
    assert!(
        e.message()
            .contains("extension '_10_boom' at tool_execute_after"),
        "{}",
        e.message()
    );
    assert!(
        e.message().contains("extension exploded"),
        "{}",
        e.message()
    );
    // Without the extension the tool works again in the same process.
    std::fs::remove_file(
        root.path()
            .join("usr/extensions/tool_execute_after/_10_boom.so"),
    )
    .unwrap();
    agent.host().invalidate();
    assert_eq!(
        block_on(agent.call_tool("echo", json!({})))
            .unwrap()
            .message,
        "{}"
    );
}

#[test]
fn panics_in_many_concurrent_calls() {
    let root = root_with_panicky();
    let (agent, _) = root.agent("default");
    let results = block_on(async {
        let calls: Vec<_> = (0..16)
            .map(|i| {
                let name = if i % 2 == 0 {
                    "panicky:later"
                } else {
                    "echo:sleep"
                };
                spawn_call(&agent, name, json!({"ms": 5}))
            })
            .collect();
        let mut results = Vec::new();
        for call in calls {
            results.push(call.await.expect("task"));
        }
        results
    });
    for (i, r) in results.into_iter().enumerate() {
        assert_eq!(r.is_ok(), i % 2 == 1, "call {i}: {r:?}");
    }
}
