//! Extensions: merged by file name across layers, run sorted by file name.

use serde_json::{json, Value};
use toolhost_tests::{block_on, Fixture, TestRoot};

const BEFORE: &str = "tool_execute_before";
const AFTER: &str = "tool_execute_after";

fn trace(agent: &toolhost::Agent) -> Vec<String> {
    let trace = agent.loop_data("trace").unwrap_or(json!([]));
    serde_json::from_value(trace).unwrap()
}

#[test]
fn run_sorted_by_file_name_across_layers_and_pass_data_along() {
    let root = TestRoot::new();
    root.tool("core", "echo", Fixture::Echo);
    root.extension("core", BEFORE, "_30_core", Fixture::RecorderExt);
    root.extension("plugins/web", BEFORE, "_10_plugin", Fixture::RecorderExt);
    root.extension("usr", BEFORE, "_20_user", Fixture::RecorderExt);
    root.extension(
        "usr/agents/dev",
        BEFORE,
        "_40_profile",
        Fixture::RecorderExt,
    );
    let (agent, _) = root.agent("dev");

    let r = block_on(agent.call_tool("echo", json!({"q": 1}))).unwrap();

    let expected = [
        "tool_execute_before/_10_plugin",
        "tool_execute_before/_20_user",
        "tool_execute_before/_30_core",
        "tool_execute_before/_40_profile",
    ];
    assert_eq!(trace(&agent), expected);
    // Each extension saw the arguments the previous one left, and the tool got the result.
    let args: Value = serde_json::from_str(&r.message).unwrap();
    assert_eq!(args, json!({"q": 1, "seen_by": expected}));
}

#[test]
fn a_same_named_file_in_a_higher_layer_replaces_the_extension() {
    let root = TestRoot::new();
    root.tool("core", "echo", Fixture::Echo);
    root.extension("core", BEFORE, "_10_a", Fixture::RecorderExt);
    root.extension("core", BEFORE, "_20_b", Fixture::RecorderExt);
    root.extension("usr", BEFORE, "_20_b", Fixture::NoopExt); // replaces core's _20_b
    let (agent, _) = root.agent("default");
    block_on(agent.call_tool("echo", json!({}))).unwrap();
    assert_eq!(trace(&agent), ["tool_execute_before/_10_a"]);
    let exts = agent.host().extensions("default", BEFORE);
    let sources: Vec<_> = exts
        .iter()
        .map(|e| e.source().strip_prefix(root.path()).unwrap().to_owned())
        .collect();
    assert_eq!(
        sources,
        [
            std::path::PathBuf::from("core/extensions/tool_execute_before/_10_a.so"),
            "usr/extensions/tool_execute_before/_20_b.so".into()
        ]
    );
}

#[test]
fn after_extensions_change_the_message_but_not_break_loop() {
    let root = TestRoot::new();
    root.tool("core", "echo", Fixture::Echo);
    root.tool("core", "response", Fixture::Response);
    root.extension("usr", AFTER, "_10_r", Fixture::RecorderExt);
    let (agent, _) = root.agent("default");

    // The recorder appends to the message and flips break_loop: only the message sticks.
    let r = block_on(agent.call_tool("echo", json!({}))).unwrap();
    assert_eq!(r.message, "{}|tool_execute_after/_10_r");
    assert!(!r.break_loop);

    let r = block_on(agent.call_tool("response", json!({"text": "bye"}))).unwrap();
    assert_eq!(r.message, "bye|tool_execute_after/_10_r");
    assert!(r.break_loop);
    // History holds what the extension left.
    assert_eq!(
        agent.history().last().unwrap().content,
        "bye|tool_execute_after/_10_r"
    );
}

#[test]
fn non_library_files_and_other_points_are_ignored() {
    let root = TestRoot::new();
    root.tool("core", "echo", Fixture::Echo);
    root.write("usr/extensions/tool_execute_before/README.md", "notes");
    root.extension("usr", "some_other_point", "_10_r", Fixture::RecorderExt);
    let (agent, _) = root.agent("default");
    block_on(agent.call_tool("echo", json!({}))).unwrap();
    assert!(trace(&agent).is_empty());
}
