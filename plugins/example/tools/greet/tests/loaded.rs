//! The built library, loaded through the real host and called through its lifecycle.

use plugin_api::ErrorKind;
use serde_json::json;

#[tokio::test]
async fn the_built_library_greets_through_the_host() {
    let tool = toolhost_testkit::load_built_tool(env!("CARGO_MANIFEST_DIR"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(tool.name(), "greet");
    assert_eq!(tool.handle().info().timeout_seconds, 5);

    let answer = tool.call("greet", json!({"name": "Ada"})).await.unwrap();
    assert_eq!(answer.message, "Hello, Ada!");
    let answer = tool
        .call("greet:shout", json!({"name": "Ada"}))
        .await
        .unwrap();
    assert_eq!(answer.message, "HELLO, ADA!");
    // The default hooks ran: the result is in the agent's history.
    let history = tool.agent().history();
    assert_eq!(history.last().unwrap().content, "HELLO, ADA!");

    // The host checks the JSON Schema before `execute` (a unit test does not).
    let error = tool
        .call("greet", json!({"name": "Ada", "times": 0}))
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Validation);
    assert!(error.message().contains("/times"), "{}", error.message());
}
