//! Everything the context offers works across the worker's pipe: fields, progress,
//! intervention and cancellation, loop data, history, masking and unmasking, and extension
//! points fired by the plugin.

use std::time::Duration;

use plugin_api::ErrorKind;
use serde_json::json;
use toolhost::Secrets;
use toolhost_tests::{block_on, spawn_call, wait_for, Fixture, TestRoot};

/// What `echo:fire` answers when the recorder is the one extension at `echo_custom`: the point's
/// data as the tool passed it, with the recorder's mark added to its `args`.
const FIRED: &str = r#"{"args":{"from":"echo","seen_by":["echo_custom/_10_record"]}}"#;

/// A root where every tool is isolated.
fn isolated_root() -> TestRoot {
    let root = TestRoot::new();
    root.tool("usr", "echo", Fixture::Echo);
    root.tool("usr", "crashy", Fixture::Crashy);
    // Secrets reach an isolated plugin only by name.
    root.write(
        "usr/toolhost.toml",
        "isolate = [\"*\"]\n\n[sandbox]\ngrant = [\"secret:API_KEY\"]\n",
    );
    root
}

#[test]
fn fields_progress_loop_data_and_history_cross_the_pipe() {
    let root = isolated_root();
    let (agent, output) = root.agent("default");
    let handle = super::handle(agent.host(), "echo");
    assert!(handle.is_isolated());
    let r = block_on(agent.call_tool("echo:context", json!({}))).unwrap();
    let fields: serde_json::Value = serde_json::from_str(&r.message).unwrap();
    assert_eq!(fields["agent"], "A0");
    assert_eq!(fields["tool"], "echo");
    assert_eq!(fields["method"], "context");
    assert!(fields["log_id"].as_u64().unwrap() > 0);

    block_on(agent.call_tool("echo:progress", json!({"text": "half way"}))).unwrap();
    let log = agent.log();
    let item = log
        .iter()
        .rev()
        .find(|i| i.heading.contains("echo:progress"))
        .unwrap();
    assert_eq!(item.progress.as_str(), "half way, almost there");
    let printed: Vec<String> = output.lines().into_iter().map(|(_, l)| l).collect();
    assert!(
        printed.iter().any(|l| l.contains("half way")),
        "{printed:?}"
    );

    let r = block_on(agent.call_tool("crashy:history", json!({}))).unwrap();
    let pid = block_on(agent.call_tool("crashy:pid", json!({})))
        .unwrap()
        .message;
    assert_eq!(r.message, format!(r#"{{"from":{pid}}}"#));
    assert_eq!(
        agent.loop_data("crashy"),
        Some(json!({"from": pid.parse::<u64>().unwrap()}))
    );
    assert!(agent
        .history()
        .iter()
        .any(|m| m.content.as_str() == "crashy was here"));
}

#[test]
fn masking_and_unmasking_cross_the_pipe() {
    let root = isolated_root();
    let (agent, _) = root.agent("default");
    let pairs = [("API_KEY".to_owned(), "sk-very-secret-value".to_owned())];
    agent.host().set_secrets(Secrets::from_pairs(pairs));
    let args = json!({"text": "key sk-very-secret-value here", "placeholder": "§§secret(API_KEY)"});
    let r = block_on(agent.call_tool("crashy:secrets", args)).unwrap();
    assert_eq!(r.message, "key §§secret(API_KEY) here | 20");
    let args = json!({"text": "x", "placeholder": "§§secret(NOPE)"});
    let e = block_on(agent.call_tool("crashy:secrets", args)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Repairable, "{}", e.message());
    assert!(
        e.message().contains("not granted the secret NOPE"),
        "{}",
        e.message()
    );
}

#[test]
fn an_extension_point_fired_by_the_plugin_runs_in_the_host() {
    let root = isolated_root();
    root.extension("usr", "echo_custom", "_10_record", Fixture::RecorderExt);
    let (agent, _) = root.agent("default");
    let r = block_on(agent.call_tool("echo:fire", json!({}))).unwrap();
    assert_eq!(r.message, FIRED, "what the point gave back to the tool");
    assert_eq!(
        agent.loop_data("trace"),
        Some(json!(["echo_custom/_10_record"]))
    );
}

#[test]
fn an_intervention_reaches_a_tool_in_its_worker() {
    let root = isolated_root();
    let (agent, _) = root.agent("default");
    block_on(async {
        let call = spawn_call(&agent, "echo:wait", json!({"report": true}));
        wait_for("a few steps", || match agent.loop_data("wait_steps") {
            Some(steps) if steps.as_u64() >= Some(3) => Ok(()),
            other => Err(other),
        });
        agent.stop();
        let e = tokio::time::timeout(Duration::from_secs(5), call)
            .await
            .expect("the call ends")
            .unwrap()
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Intervention, "{}", e.message());
    });
    let steps = agent
        .loop_data("wait_steps")
        .and_then(|v| v.as_u64())
        .unwrap();
    assert!(steps < 200, "stopped early: {steps}");
}

#[test]
fn extensions_can_be_isolated_too() {
    let root = TestRoot::new();
    root.tool("usr", "echo", Fixture::Echo);
    root.tool("usr", "crashy", Fixture::Crashy);
    root.secret_extensions();
    root.extension("usr", "echo_custom", "_10_record", Fixture::RecorderExt);
    root.write(
        "usr/toolhost.toml",
        "isolate = [\"core\", \"usr\"]\n\n[sandbox]\ngrant = [\"secret:API_KEY\"]\n",
    );
    let (agent, _) = root.agent("default");
    let pairs = [("API_KEY".to_owned(), "sk-very-secret-value".to_owned())];
    agent.host().set_secrets(Secrets::from_pairs(pairs));
    for point in ["tool_execute_before", "tool_execute_after", "echo_custom"] {
        let list = agent.host().extensions("default", point);
        assert!(
            !list.is_empty() && list.iter().all(|e| e.is_isolated()),
            "{point}"
        );
    }
    // The core's secret extensions, in their workers, unmask the arguments and mask the answer.
    let r = block_on(agent.call_tool("echo", json!({"key": "§§secret(API_KEY)"}))).unwrap();
    assert_eq!(r.message, r#"{"key":"§§secret(API_KEY)"}"#);
    let r = block_on(agent.call_tool("echo:lengths", json!({"key": "§§secret(API_KEY)"}))).unwrap();
    assert_eq!(r.message, r#"{"key":20}"#, "the tool got the value");
    // An extension fired by an isolated tool, itself isolated, records through loop data.
    let r = block_on(agent.call_tool("echo:fire", json!({}))).unwrap();
    assert_eq!(r.message, FIRED, "what the point gave back to the tool");
    assert_eq!(
        agent.loop_data("trace"),
        Some(json!(["echo_custom/_10_record"]))
    );
    let out = root.run_cli(&["list"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("usr/extensions/echo_custom/_10_record.so (isolated)"),
        "{stdout}"
    );
}

#[test]
fn readiness_is_reported_by_the_worker() {
    let root = TestRoot::new();
    root.tool("usr", "governed", Fixture::Governed);
    root.write("usr/toolhost.toml", "isolate = [\"governed\"]\n");
    let (agent, _) = root.agent("default");
    block_on(agent.call_tool("governed", json!({"city": "x"}))).unwrap();
    block_on(agent.call_tool("governed:unready", json!({"city": "x"}))).unwrap();
    let e = block_on(agent.call_tool("governed", json!({"city": "x"}))).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Dependency);
    assert_eq!(
        e.message(),
        "tool governed is not ready: GOVERNED_KEY not configured"
    );
    let found = agent
        .host()
        .resolve("default", "governed")
        .found
        .clone()
        .unwrap();
    assert!(found.handle.is_isolated());
    assert_eq!(
        found.handle.unavailable().as_deref(),
        Some("not ready: GOVERNED_KEY not configured")
    );
    assert!(!agent.host().tools_prompt("default").contains("governed"));
}
