//! The lifecycle of a tool call (see `Agent::call_tool`), observed from hooks, extensions and the agent's state.

use std::time::Duration;

use plugin_api::ErrorKind;
use serde_json::{json, Value};
use toolhost::output::OutputKind;
use toolhost::Role;
use toolhost_tests::{block_on, spawn_call, Fixture, TestRoot};

#[test]
fn hooks_and_extensions_run_in_lifecycle_order() {
    let root = TestRoot::new();
    root.tool("usr", "hooked", Fixture::Hooked);
    for point in ["tool_execute_before", "tool_execute_after"] {
        root.extension("usr", point, "_20_second", Fixture::RecorderExt);
        root.extension("core", point, "_10_first", Fixture::RecorderExt);
    }
    let (agent, output) = root.agent("default");
    let r = block_on(agent.call_tool("hooked", json!({"k": "v"}))).unwrap();

    assert_eq!(
        agent.loop_data("trace").unwrap(),
        json!([
            "before_execution",
            "tool_execute_before/_10_first",
            "tool_execute_before/_20_second",
            "execute",
            "tool_execute_after/_10_first",
            "tool_execute_after/_20_second",
            "after_execution",
        ])
    );
    // The hooks called the host's defaults: the call was printed and recorded.
    let kinds: Vec<_> = output.lines().into_iter().map(|(k, _)| k).collect();
    assert_eq!(
        kinds,
        [
            OutputKind::ToolUse,
            OutputKind::Argument,
            OutputKind::ToolResponse
        ]
    );
    let last = agent.history().pop().unwrap();
    assert_eq!(
        (last.role, last.content.as_str()),
        (Role::Tool, r.message.as_str())
    );
}

#[test]
fn default_hooks_print_log_and_record_history() {
    let root = TestRoot::new();
    root.tool("usr", "echo", Fixture::Echo);
    let (agent, output) = root.agent("default");
    let r = block_on(agent.call_tool("echo", json!({"search_query": "rust  "}))).unwrap();

    assert_eq!(
        output.lines(),
        [
            (OutputKind::ToolUse, "A0: Using tool 'echo'".to_owned()),
            (OutputKind::Argument, "  Search query: rust  ".to_owned()),
            (
                OutputKind::ToolResponse,
                format!("A0: Response from tool 'echo':\n{}", r.message)
            ),
        ]
    );
    let log = agent.log();
    assert_eq!(log.len(), 1);
    assert_eq!(log[0].kind, "tool");
    assert_eq!(log[0].heading, "Using tool 'echo'");
    assert_eq!(log[0].kvps["search_query"], "rust  ");
    assert!(log[0].finished);
    assert_eq!(log[0].content, r.message);
    let history = agent.history();
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].role, Role::Tool);
    assert_eq!(history[0].tool_name.as_deref(), Some("echo"));
}

#[test]
fn the_context_reaches_the_agent() {
    let root = TestRoot::new();
    root.tool("usr/agents/dev", "echo", Fixture::Echo);
    let (agent, _) = root.agent("dev");
    let r = block_on(agent.call_tool("echo:context", json!({}))).unwrap();
    let ctx: Value = serde_json::from_str(&r.message).unwrap();
    assert_eq!(
        ctx,
        json!({"agent": "A0", "profile": "dev", "tool": "echo", "method": "context", "log_id": 1})
    );
    assert_eq!(agent.log()[0].heading, "Using tool 'echo:context'");
}

#[test]
fn tokio_timers_work_inside_plugins() {
    let root = TestRoot::new();
    root.tool("usr", "echo", Fixture::Echo);
    let (agent, _) = root.agent("default");
    let r = block_on(agent.call_tool("echo:sleep", json!({"ms": 20}))).unwrap();
    assert_eq!(r.message, "slept 20 ms");
    // Also from a current-thread host runtime.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let r = rt
        .block_on(agent.call_tool("echo:sleep", json!({"ms": 5})))
        .unwrap();
    assert_eq!(r.message, "slept 5 ms");
}

#[test]
fn progress_is_stored_and_fires_tool_output_update() {
    let root = TestRoot::new();
    root.tool("usr", "echo", Fixture::Echo);
    root.extension("usr", "tool_output_update", "_10_r", Fixture::RecorderExt);
    let (agent, output) = root.agent("default");
    block_on(agent.call_tool("echo:progress", json!({}))).unwrap();
    assert_eq!(agent.log()[0].progress, "half way, almost there");
    assert_eq!(
        agent.loop_data("trace").unwrap(),
        json!(["tool_output_update/_10_r"])
    );
    assert!(output
        .lines()
        .contains(&(OutputKind::Progress, "  ... half way".to_owned())));
}

#[test]
fn error_kinds_cross_the_boundary() {
    let root = TestRoot::new();
    root.tool("usr", "echo", Fixture::Echo);
    let (agent, _) = root.agent("default");
    for (kind, expected) in [
        ("repairable", ErrorKind::Repairable),
        ("validation", ErrorKind::Validation),
        ("business", ErrorKind::Business),
        ("timeout", ErrorKind::Timeout),
        ("dependency", ErrorKind::Dependency),
        ("internal", ErrorKind::Internal),
    ] {
        let e = block_on(agent.call_tool("echo:fail", json!({"kind": kind}))).unwrap_err();
        assert_eq!((e.kind(), e.message()), (expected, "asked to fail"));
    }
    assert_eq!(agent.current_tool(), None, "cleared even after errors");
}

#[test]
fn the_response_tool_needs_text_and_ends_the_loop() {
    let root = TestRoot::new();
    root.tool("core", "response", Fixture::Response);
    let (agent, _) = root.agent("default");
    let e = block_on(agent.call_tool("response", json!({"text": "  "}))).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Repairable);
    assert!(e.message().contains("'text'"));
    let r = block_on(agent.call_tool("response", json!({"message": "via message"}))).unwrap();
    assert_eq!((r.message.as_str(), r.break_loop), ("via message", true));
}

#[test]
fn a_paused_agent_waits_and_a_stopped_one_refuses() {
    let root = TestRoot::new();
    root.tool("usr", "echo", Fixture::Echo);
    let (agent, _) = root.agent("default");
    block_on(async {
        agent.pause();
        let call = spawn_call(&agent, "echo", json!({}));
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!call.is_finished(), "a paused agent must not run the tool");
        assert!(agent.log().is_empty());
        agent.resume();
        assert_eq!(call.await.unwrap().unwrap().message, "{}");

        agent.stop();
        let e = agent.call_tool("echo", json!({})).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Intervention);
        agent.clear_stop();
        assert!(agent.call_tool("echo", json!({})).await.is_ok());
    });
}

#[test]
fn a_tool_checking_intervention_stops_mid_call() {
    let root = TestRoot::new();
    root.tool("usr", "echo", Fixture::Echo);
    let (agent, _) = root.agent("default");
    block_on(async {
        let call = spawn_call(&agent, "echo:wait", json!({}));
        // Let the tool take a few of its 200 steps, then stop the agent.
        while agent.loop_data("wait_steps").is_none() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        agent.stop();
        let e = call.await.unwrap().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Intervention);
    });
    // The tool's own check returned the error: it stopped long before its last step.
    let steps = agent.loop_data("wait_steps").unwrap().as_u64().unwrap();
    assert!(steps < 200, "the tool ran all {steps} steps");
    assert!(
        agent.history().is_empty(),
        "an interrupted result never reaches history"
    );
}

#[test]
fn a_cancelled_call_clears_the_current_tool() {
    let root = TestRoot::new();
    root.tool("usr", "echo", Fixture::Echo);
    let (agent, _) = root.agent("default");
    block_on(async {
        let call = spawn_call(&agent, "echo:sleep", json!({"ms": 5000}));
        while agent.current_tool().is_none() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(agent.current_tool().as_deref(), Some("echo:sleep"));
        call.abort();
        assert!(call.await.unwrap_err().is_cancelled());
    });
    assert_eq!(agent.current_tool(), None);
}

#[test]
fn contexts_are_released_after_every_call() {
    let root = TestRoot::new();
    root.tool("usr", "echo", Fixture::Echo);
    root.tool("usr", "hooked", Fixture::Hooked);
    for point in [
        "tool_execute_before",
        "tool_execute_after",
        "tool_output_update",
    ] {
        root.extension("usr", point, "_10_r", Fixture::RecorderExt);
    }
    let (agent, _) = root.agent("default");
    let baseline = std::sync::Arc::strong_count(&agent);
    for request in [
        "echo",
        "echo:progress",
        "echo:context",
        "hooked",
        "echo:fail",
        "nope",
    ] {
        let _ = block_on(agent.call_tool(request, json!({})));
    }
    // Every context handed to a plugin (tool, hooks, extensions, progress) was given back.
    assert_eq!(std::sync::Arc::strong_count(&agent), baseline);
}

#[test]
fn many_concurrent_calls() {
    let root = TestRoot::new();
    root.tool("usr", "echo", Fixture::Echo);
    root.extension("usr", "tool_execute_before", "_10_n", Fixture::NoopExt);
    let (agent, _) = root.agent("default");
    let answers = block_on(async {
        let handles: Vec<_> = (0..32)
            .map(|i| spawn_call(&agent, "echo", json!({"i": i})))
            .collect();
        let mut out = Vec::new();
        for h in handles {
            out.push(h.await.unwrap().unwrap().message);
        }
        out
    });
    for (i, a) in answers.iter().enumerate() {
        assert_eq!(*a, format!(r#"{{"i":{i}}}"#));
    }
    assert_eq!(agent.history().len(), 32);
}
