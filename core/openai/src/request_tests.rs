//! The request body: both protocols' messages, native pairing, the context window.

use serde_json::{json, Value};

use super::*;
use toolhost::Secrets;
use toolhost::ToolCall;
use toolhost::ToolSpec;

fn message(role: Role, text: &str) -> HistoryMessage {
    let content = Secrets::empty().mask(text);
    match role {
        Role::Tool => HistoryMessage::tool_result("greet", content, None),
        _ => HistoryMessage::new(role, content),
    }
}

fn calls(ids: &[&str]) -> HistoryMessage {
    let calls = ids
        .iter()
        .map(|id| ToolCall {
            id: (*id).to_owned(),
            name: "greet".to_owned(),
            arguments: r#"{"name":"Ada"}"#.to_owned(),
        })
        .collect();
    message(Role::Ai, "").with_tool_calls(Secrets::empty().mask_each(calls))
}

fn config(protocol: &str) -> ModelConfig {
    let mut config: ModelConfig = toml::from_str(&format!(
        "base_url = \"http://x/v1\"\nmodel = \"m\"\ntool_protocol = \"{protocol}\""
    ))
    .unwrap();
    config.structured_output = true;
    config
}

fn body_of(config: &ModelConfig, history: &[HistoryMessage], tools: &[ToolSpec]) -> Value {
    let system = Secrets::empty().mask("You are A0.");
    body(
        config,
        &ModelRequest {
            system: &system,
            history,
            tools,
        },
    )
}

fn roles(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn the_json_protocol_sends_results_as_user_messages_and_the_request_schema() {
    let history = [
        message(Role::User, "Hi"),
        message(Role::Ai, "{...}"),
        message(Role::Tool, "Hello"),
        message(Role::Warning, "careful"),
    ];
    let body = body_of(&config("json"), &history, &[]);
    assert_eq!(roles(&body), ["system", "user", "assistant", "user"]);
    let merged = body["messages"][3]["content"].as_str().unwrap();
    assert!(
        merged.starts_with(r#"{"tool_name":"greet","tool_result":"Hello"}"#)
            && merged.ends_with("careful"),
        "{merged}"
    );
    assert_eq!(
        body["response_format"]["json_schema"]["schema"],
        request_schema()
    );
    assert!(body.get("tools").is_none());
    assert_eq!(body["stream_options"]["include_usage"], true);
}

#[test]
fn native_calls_get_one_tool_message_each_by_id_order_or_parallel_split() {
    let mut result = message(Role::Tool, "Hello, Ada");
    result.tool_call_id = Some("b".to_owned());
    let mut parallel = message(Role::Tool, "[...]");
    let results = json!({"results": [
        {"state": "success", "message": "one"},
        {"state": "error", "error": {"kind": "business", "message": "no"}}
    ]});
    parallel.additional = Some(Secrets::empty().mask_map(results.as_object().unwrap().clone()));
    let history = [
        message(Role::User, "Hi"),
        calls(&["a", "b"]),
        result,
        message(Role::Warning, "bad arguments"),
        calls(&["c", "d"]),
        parallel,
        calls(&["e"]),
        message(Role::User, "stop"),
    ];
    let tools = [ToolSpec {
        name: "greet".into(),
        description: "Greets.".into(),
        parameters: json!({"type": "object"}),
    }];
    let body = body_of(&config("native"), &history, &tools);
    let messages = body["messages"].as_array().unwrap();
    let ids: Vec<(&str, &str)> = messages
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            (
                m["tool_call_id"].as_str().unwrap(),
                m["content"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        ids[..3],
        [("b", "Hello, Ada"), ("a", "bad arguments"), ("c", "one")]
    );
    assert!(ids[3].0 == "d" && ids[3].1.contains("business"), "{ids:?}");
    assert_eq!(ids[4], ("e", "(no result: the call did not run)"));
    assert_eq!(
        messages[2]["tool_calls"][1]["function"]["arguments"],
        r#"{"name":"Ada"}"#
    );
    assert!(messages[2]["content"].is_null());
    assert!(messages[0]["content"]
        .as_str()
        .unwrap()
        .ends_with(NATIVE_NOTE));
    assert_eq!(body["tools"][0]["function"]["name"], "greet");
    assert!(body.get("response_format").is_none());
}

#[test]
fn a_long_history_is_fitted_old_tool_results_first_then_old_turns() {
    let mut config = config("json");
    config.context_tokens = 4000; // 3,000 for the messages, about 9,000 bytes
    let big = "x".repeat(3000);
    let mut history = Vec::new();
    for i in 0..4 {
        history.push(message(Role::User, &format!("task {i}")));
        history.push(message(Role::Tool, &big));
    }
    let body = body_of(&config, &history, &[]);
    let text = body["messages"].to_string();
    assert!(text.len() < 9000 + 2000, "{}", text.len());
    assert!(
        text.contains("bytes of an old tool result were cut"),
        "{text}"
    );
    assert!(!text.contains("older messages were left out"), "{text}");
    assert!(text.contains(&big), "the latest result stays whole");

    // Too many turns even shortened: the oldest are left out, with a note.
    let history: Vec<_> = (0..200)
        .map(|i| message(Role::User, &format!("message {i} {}", "y".repeat(100))))
        .collect();
    let body = body_of(&config, &history, &[]);
    let text = body["messages"].to_string();
    assert!(
        text.contains("older messages were left out to fit"),
        "{text}"
    );
    assert!(text.contains("message 199") && !text.contains("message 0 "));
}
