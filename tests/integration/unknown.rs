//! A tool no layer has: the Unknown tool lists what is available, and the loop goes on.

use serde_json::json;
use toolhost_tests::{block_on, Fixture, TestRoot};

#[test]
fn unknown_tool_lists_the_available_tools() {
    let root = TestRoot::new();
    root.tool("core", "response", Fixture::Response);
    root.tool("usr", "echo", Fixture::Echo);
    root.write(
        "core/prompts/agent.system.tool.response.md",
        "### response\nFinal answer.\n",
    );
    let (agent, _) = root.agent("default");

    let r = block_on(agent.call_tool("weather", json!({"city": "Oslo"}))).unwrap();
    assert!(!r.break_loop);
    let expected = format!(
        "Tool weather not found. Available tools:\n{}",
        agent.host().tools_prompt("default")
    );
    assert_eq!(r.message, expected);
    // The fragment file and the generated entry (echo has no fragment) are both there.
    assert!(
        r.message.contains("### response\nFinal answer."),
        "{}",
        r.message
    );
    assert!(
        r.message
            .contains("### echo\nTest fixture: echoes its arguments"),
        "{}",
        r.message
    );
    // It went through the lifecycle like any tool: a log item and a history entry.
    assert_eq!(agent.log()[0].heading, "Using tool 'weather'");
    assert_eq!(agent.history()[0].tool_name.as_deref(), Some("weather"));
}

#[test]
fn a_library_named_unknown_overrides_the_builtin() {
    let root = TestRoot::new();
    root.tool("usr", "unknown", Fixture::Echo);
    let (agent, _) = root.agent("default");
    let r = block_on(agent.call_tool("weather:now", json!({"city": "Oslo"}))).unwrap();
    assert_eq!(r.message, r#"{"city":"Oslo"}"#);
    let r = block_on(agent.call_tool("weather:context", json!({}))).unwrap();
    let ctx: serde_json::Value = serde_json::from_str(&r.message).unwrap();
    assert_eq!(
        ctx["tool"], "weather",
        "the override sees the requested name"
    );
}

#[test]
fn prompt_fragments_follow_first_occurrence_by_file_name() {
    let root = TestRoot::new();
    root.write("core/prompts/agent.system.tool.b.md", "core b");
    root.write("core/prompts/agent.system.tool.a.md", "core a");
    root.write("usr/prompts/agent.system.tool.b.md", "user b");
    root.write("usr/prompts/unrelated.md", "ignored");
    let fragments = root.host().prompt_fragments("default");
    assert_eq!(
        fragments,
        [
            ("agent.system.tool.a.md".to_owned(), "core a".to_owned()),
            ("agent.system.tool.b.md".to_owned(), "user b".to_owned())
        ]
    );
}
