//! Names that could reach outside the tools folders are refused before any file is touched.

use plugin_api::ErrorKind;
use serde_json::json;
use toolhost_tests::{block_on, Fixture, TestRoot};

#[test]
fn path_like_names_are_refused() {
    let root = TestRoot::new();
    // A real plugin where `usr/tools/../x.so` would point: it must never be loaded.
    root.copy(Fixture::Echo, "usr/x.so");
    root.tool("usr", "echo", Fixture::Echo);
    let (agent, _) = root.agent("default");
    let absolute = root.path().join("usr/x").display().to_string();
    for bad in [
        "../x",
        "a/b",
        absolute.as_str(),
        "a\\b",
        "..",
        ".hidden",
        "",
        "x:y:z",
        "x:",
        "x:../y",
        "é",
    ] {
        let e = block_on(agent.call_tool(bad, json!({}))).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Repairable, "{bad:?}");
        assert!(
            e.message().contains(&format!("invalid tool name '{bad}'")),
            "{}",
            e.message()
        );
    }
    // Nothing was loaded or logged for them; the valid name works.
    assert!(agent.log().is_empty());
    assert_eq!(
        block_on(agent.call_tool("echo", json!({})))
            .unwrap()
            .message,
        "{}"
    );
}

#[test]
fn a_method_suffix_is_allowed() {
    let root = TestRoot::new();
    root.tool("usr", "echo", Fixture::Echo);
    let (agent, _) = root.agent("default");
    let r = block_on(agent.call_tool("echo:context", json!({}))).unwrap();
    let ctx: serde_json::Value = serde_json::from_str(&r.message).unwrap();
    assert_eq!(ctx["tool"], "echo");
    assert_eq!(ctx["method"], "context");
}
