//! What a tool returns besides text (content blocks, structured content checked against its
//! output schema) and what it asks (log, elicit, sample): the same in process and through an
//! isolated worker, described to the model in its history, and carried over MCP (rmcp's
//! client over stdio) as MCP's own content, `structuredContent` and `outputSchema`.

use plugin_api::{Content, ErrorKind};
use serde_json::json;
use toolhost_tests::{block_on, toolhost_bin, Fixture, TestRoot};

fn root(isolated: bool) -> TestRoot {
    let root = TestRoot::new();
    root.tool("usr", "rich", Fixture::Rich);
    if isolated {
        root.write("usr/toolhost.toml", "isolate = [\"*\"]\n");
    }
    root
}

#[test]
fn blocks_and_structured_content_reach_the_caller_in_order_and_the_model_reads_them_described() {
    for isolated in [false, true] {
        let root = root(isolated);
        let (agent, _output) = root.agent("default");
        let response = block_on(agent.call_tool("rich", json!({}))).unwrap();
        assert_eq!(response.message, "two items");
        assert_eq!(
            response.content,
            vec![
                Content::image(vec![1, 2, 3], "image/png"),
                Content::resource_text("test://items", "text/plain", "a\nb"),
                Content::resource_link("test://more", "more"),
            ],
            "isolated: {isolated}"
        );
        assert_eq!(
            response.structured_content,
            Some(json!({"count": 2, "items": ["a", "b"]}))
        );
        let history = agent.history();
        let last = history.last().expect("the tool's result");
        assert_eq!(
            last.content.as_str(),
            "two items\n[image: image/png, 3 bytes]\n[resource test://items (text/plain):\na\nb\n]\n[resource link: test://more (more)]",
            "isolated: {isolated}"
        );
    }
}

#[test]
fn in_a_recorded_session_the_bytes_of_a_block_are_a_file_beside_it_not_inline() {
    for isolated in [false, true] {
        let root = root(isolated);
        let (agent, _output) = root.agent("default");
        let session = agent
            .record_session(&root.path().join("usr/sessions"))
            .unwrap();
        block_on(agent.call_tool("rich", json!({}))).unwrap();
        let history = agent.history();
        let last = history.last().unwrap().content.as_str().to_owned();
        let saved = last
            .lines()
            .find_map(|l| l.strip_prefix("[image: image/png, 3 bytes, saved as "))
            .and_then(|rest| rest.strip_suffix(']'))
            .unwrap_or_else(|| panic!("isolated {isolated}: {last}"));
        assert!(
            saved.starts_with("content/") && saved.ends_with("-1.png"),
            "{saved}"
        );
        assert_eq!(std::fs::read(session.join(saved)).unwrap(), [1, 2, 3]);
        // The session's own files hold the description, never the bytes inline.
        let mut recorded = String::new();
        for entry in std::fs::read_dir(&session).unwrap().flatten() {
            if entry.path().is_file() {
                recorded.push_str(&std::fs::read_to_string(entry.path()).unwrap_or_default());
            }
        }
        assert!(recorded.contains("saved as content/"), "{recorded}");
        assert!(!recorded.contains("AQID"), "base64 inline: {recorded}");
    }
}

#[test]
fn structured_content_must_match_the_declared_output_schema() {
    for isolated in [false, true] {
        let root = root(isolated);
        let (agent, _output) = root.agent("default");
        let error = block_on(agent.call_tool("rich:bad", json!({}))).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Internal, "{error}");
        assert!(
            error.message().contains("does not match its output schema")
                && error.message().contains("/count"),
            "{error}"
        );
        let error = block_on(agent.call_tool("rich:none", json!({}))).unwrap_err();
        assert!(
            error
                .message()
                .contains("declares an output schema but returned no structured content"),
            "{error}"
        );
    }
}

#[test]
fn a_question_nobody_can_answer_is_refused_saying_so_and_a_log_message_is_not_an_error() {
    for isolated in [false, true] {
        let root = root(isolated);
        let (agent, _output) = root.agent("default");
        block_on(agent.call_tool("rich:log", json!({}))).unwrap();
        for (method, what) in [("elicit", "elicitation"), ("sample", "sampling")] {
            let error =
                block_on(agent.call_tool(&format!("rich:{method}"), json!({}))).unwrap_err();
            assert_eq!(error.kind(), ErrorKind::Dependency, "{error}");
            assert!(
                error.message().contains(what)
                    && error.message().contains("no one can answer here")
                        | error.message().contains("no model to"),
                "isolated {isolated}: {error}"
            );
        }
    }
}

#[test]
fn over_mcp_blocks_are_mcp_content_with_structured_content_and_the_output_schema_is_listed() {
    use rmcp::model::CallToolRequestParams;
    use rmcp::transport::TokioChildProcess;
    use rmcp::ServiceExt;

    let root = root(false);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let mut command = tokio::process::Command::new(toolhost_bin());
        command.arg("--root").arg(root.path()).arg("serve-mcp");
        let transport = TokioChildProcess::new(command).expect("serve-mcp");
        let client = ().serve(transport).await.expect("initialize");
        let tools = client.list_all_tools().await.expect("tools/list");
        let rich = tools
            .iter()
            .find(|t| t.name == "rich")
            .expect("rich listed");
        let schema = serde_json::to_value(rich.output_schema.as_deref()).unwrap();
        assert_eq!(schema["required"], json!(["count", "items"]), "{schema}");
        let result = client
            .call_tool(CallToolRequestParams::new("rich"))
            .await
            .expect("tools/call");
        let result = serde_json::to_value(&result).unwrap();
        let kinds: Vec<&str> = result["content"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|b| b["type"].as_str())
            .collect();
        assert_eq!(
            kinds,
            ["text", "image", "resource", "resource_link"],
            "{result}"
        );
        assert_eq!(result["content"][1]["data"], "AQID");
        assert_eq!(result["content"][2]["resource"]["text"], "a\nb");
        assert_eq!(
            result["structuredContent"],
            json!({"count": 2, "items": ["a", "b"]})
        );
        // A question the client cannot answer (it declared no elicitation) fails the call
        // with isError and says why.
        let asked = client
            .call_tool(CallToolRequestParams::new("rich:elicit"))
            .await
            .expect("tools/call");
        assert_eq!(asked.is_error, Some(true));
        let text = serde_json::to_string(&asked.content).unwrap();
        assert!(text.contains("does not support elicitation"), "{text}");
        client.cancel().await.ok();
    });
}
