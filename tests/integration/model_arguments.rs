//! A call whose arguments break the tool's JSON Schema never reaches the tool, whatever the
//! model server's grammar let through: node-llama-cpp's ignores `minimum` and `maximum`, and
//! SmolLM2-135M-Instruct under it asked `greet` (`times` from 1 to 1000) for 160000000000
//! greetings, and 383232000000 in the reply below (the `real_model` bench, issue 61). The host's validation refuses the call, the
//! model is told which field broke which bound, and asked again.

use serde_json::json;
use toolhost::Role;
use toolhost_tests::fake_llm::{text_reply, FakeLlm};
use toolhost_tests::Fixture;

use super::models::{request, root, run};

/// SmolLM2-135M-Instruct's reply to "Greet Nadia, then answer." through node-llama-cpp with
/// main's schema (`times` listed, so the grammar required it), as the `real_model` bench printed
/// it (`REAL_MODEL_REPLIES=1`, variant 0, 2026-12-07).
const REAL_REPLY: &str = "{\n    \"thoughts\": [\"Greet\", \"Greet:shout\"],\n    \"headline\": \"This is a response. You did not tell me where to place the next task.\",\n    \"tool_name\": \"greet\",\n    \"tool_args\": {\n        \"name\": \"Greet\",\n        \"times\": 383232000000\n    }\n}";

#[test]
fn arguments_beyond_the_schemas_bounds_never_reach_the_tool_and_the_model_is_told_the_bound() {
    let server = FakeLlm::start();
    // The real reply; then `times` within `u32` but over its maximum (a tool that took it
    // would greet 5000 times); then a call within bounds, and the answer.
    server.push(text_reply(REAL_REPLY, None));
    server.push(text_reply(
        &request("greet", json!({"name": "Nadia", "times": 5000})),
        None,
    ));
    server.push(text_reply(
        &request("greet", json!({"name": "Nadia", "times": 2})),
        None,
    ));
    server.push(text_reply(
        &request("response", json!({"text": "Greeted."})),
        None,
    ));
    let root = root(&server, "structured_output = true");
    root.tool("usr", "greet", Fixture::Greet);
    let (result, agent, _) = run(&root, "Greet Nadia, then answer.");
    assert_eq!(result.unwrap(), "Greeted.");
    let history = agent.history();
    // The tool ran once, for the call within bounds.
    let greetings: Vec<&str> = history
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| m.content.as_str())
        .filter(|c| c.contains("Hello, Nadia!"))
        .collect();
    assert_eq!(greetings.len(), 1, "{history:#?}");
    assert_eq!(greetings[0].matches("Hello, Nadia!").count(), 2);
    // Each refused call was answered with the field and its bound, and the model asked again:
    // the next request carries the warning as its last message.
    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    for (asked, given) in [(1, "383232000000"), (2, "5000")] {
        let messages = requests[asked].body["messages"].as_array().unwrap();
        let last = messages.last().unwrap()["content"].as_str().unwrap();
        assert!(
            last.contains("Tool 'greet' failed (validation error)")
                && last.contains(&format!("/times: {given}"))
                && last.contains("maximum of 1000"),
            "{last}"
        );
    }
}
