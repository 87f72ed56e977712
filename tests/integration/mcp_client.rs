//! The MCP client against real servers: `server-everything` (npm) and `mcp-server-time`
//! (PyPI) here, a tiny Python `MCPServer` in `slow.rs`. Each test has its own root, host and
//! server processes.

use std::time::{Duration, Instant};

use plugin_api::ErrorKind;
use serde_json::{json, Value};
use toolhost::mcp::McpState;
use toolhost::output::OutputKind;
use toolhost::{Agent, Host};
use toolhost_tests::{block_on, peers, Fixture, TestRoot};

mod asks;
mod config_cli;
mod conformance;
mod failures_named;
mod greeting;
mod hostile_state;
mod live_reload;
mod oauth;
mod over_http;
mod rug_pull;
mod sampling;
mod shapes;
mod slow;
mod storms;
mod structured;

/// How long a test waits for its servers to start.
pub(crate) const START: Duration = Duration::from_secs(60);

pub(crate) fn everything() -> Value {
    let entry = peers::server_everything();
    json!({"command": "node", "args": [entry, "stdio"]})
}

pub(crate) fn time() -> Value {
    let python = peers::mcp_python();
    json!({"command": python, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]})
}

/// A plain Python MCP server of 2025-11-25 over stdio (`server/discover` is not found), with
/// no SDK, so it sends exactly what it is told to.
/// `setup` runs first (at the top level); then each request goes to `answer` — the body of
/// `def answer(msg, mid, method):`, each line indented by four spaces — which returns the
/// result, or `None` when it answered (or chose not to) itself. `send(obj)` writes one
/// message; `greeting(msg, name, caps)` is the result of an `initialize`.
pub(crate) fn python_server(setup: &str, answer: &str) -> String {
    format!(
        r#"import json, os, sys
def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()
def greeting(msg, name, caps):
    return {{"protocolVersion": msg["params"]["protocolVersion"], "capabilities": caps,
            "serverInfo": {{"name": name, "version": "1"}}}}
{setup}
def answer(msg, mid, method):
{answer}
for line in sys.stdin:
    msg = json.loads(line)
    mid, method = msg.get("id"), msg.get("method")
    if mid is None:
        continue
    if method == "server/discover":
        # A server of 2025-11-25: no such method (the client then sends `initialize`).
        send({{"jsonrpc": "2.0", "id": mid, "error": {{"code": -32601, "message": "Method not found"}}}})
        continue
    result = answer(msg, mid, method)
    if result is not None:
        send({{"jsonrpc": "2.0", "id": mid, "result": result}})
"#
    )
}

/// Writes `usr/mcp.json` (or a profile's) with `servers`.
pub(crate) fn servers(root: &TestRoot, rel: &str, servers: Value) {
    let text = serde_json::to_string_pretty(&json!({"mcpServers": servers})).unwrap();
    root.write(rel, text);
}

/// An agent whose profile's servers have all started.
pub(crate) fn ready_agent(
    root: &TestRoot,
    profile: &str,
) -> (
    std::sync::Arc<Agent>,
    std::sync::Arc<toolhost::output::Captured>,
) {
    let (agent, output) = root.agent(profile);
    block_on(agent.host().wait_for_mcp(profile, START));
    for server in agent.host().mcp_servers(profile) {
        assert_eq!(
            server.state,
            McpState::Ready,
            "{}: {:?}",
            server.name,
            server.last_error
        );
    }
    (agent, output)
}

#[test]
fn everything_lists_and_calls_echo_sum_and_a_long_operation_with_progress() {
    let root = TestRoot::new();
    servers(&root, "usr/mcp.json", json!({"everything": everything()}));
    let (agent, output) = ready_agent(&root, "default");
    let names: Vec<String> = agent
        .host()
        .mcp_tools("default")
        .iter()
        .map(|t| t.name().to_owned())
        .collect();
    for name in [
        "everything.echo",
        "everything.get-sum",
        "everything.trigger-long-running-operation",
    ] {
        assert!(
            names.iter().any(|n| n == name),
            "{name} missing from {names:?}"
        );
    }
    let echo = block_on(agent.call_tool("everything.echo", json!({"message": "hello"}))).unwrap();
    assert_eq!(echo.message, "Echo: hello");
    let sum = block_on(agent.call_tool("everything.get-sum", json!({"a": 2, "b": 40}))).unwrap();
    assert!(sum.message.contains("42"), "{}", sum.message);

    let args = json!({"duration": 1, "steps": 3});
    let long =
        block_on(agent.call_tool("everything.trigger-long-running-operation", args)).unwrap();
    assert!(long.message.contains("completed"), "{}", long.message);
    let progress: Vec<String> = output
        .lines()
        .into_iter()
        .filter(|(kind, _)| *kind == OutputKind::Progress)
        .map(|(_, text)| text)
        .collect();
    assert!(
        progress.len() >= 2,
        "progress notifications reach the call: {progress:?}"
    );
    let item = agent
        .log()
        .into_iter()
        .rev()
        .find(|i| i.heading.contains("trigger-long"))
        .unwrap();
    // The last notification the call saw: one of the three steps (the last may arrive after
    // the result, so it is not always 3/3).
    assert!(
        ["1/3", "2/3", "3/3"].contains(&item.progress.as_str()),
        "{}",
        item.progress
    );
}

#[test]
fn a_bad_argument_is_a_validation_error_from_the_input_schema() {
    let root = TestRoot::new();
    servers(&root, "usr/mcp.json", json!({"everything": everything()}));
    let (agent, _) = ready_agent(&root, "default");
    let error = block_on(agent.call_tool("everything.get-sum", json!({"a": "two"}))).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Validation, "{error}");
    // An image of an MCP tool is a content block of the contract, its bytes decoded; the
    // model reads it described.
    let image = block_on(agent.call_tool("everything.get-tiny-image", json!({}))).unwrap();
    let png = image.content.iter().find_map(|block| match block {
        plugin_api::Content::Image { data, mime_type } => Some((data.len(), mime_type.clone())),
        _ => None,
    });
    let (bytes, mime) = png.unwrap_or_else(|| panic!("no image: {:?}", image.content));
    assert_eq!(mime, "image/png");
    assert!(bytes > 100, "{bytes} bytes");
    let history = agent.history();
    let described = history.last().unwrap().content.as_str();
    assert!(
        described.contains(&format!("[image: image/png, {bytes} bytes]")),
        "{described}"
    );
    assert!(
        error.message().contains("/a: must be of type number"),
        "{error}"
    );
    // `toolhost call` of an MCP tool: found (exit 0), not the Unknown tool (exit 3).
    let out = root.run_cli(&["call", "everything.echo", "--args", r#"{"message": "hi"}"#]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "Echo: hi");
}

#[test]
fn time_answers_and_a_bad_time_zone_is_repairable() {
    let root = TestRoot::new();
    servers(&root, "usr/mcp.json", json!({"time": time()}));
    let (agent, _) = ready_agent(&root, "default");
    let now =
        block_on(agent.call_tool("time.get_current_time", json!({"timezone": "Europe/Oslo"})))
            .unwrap();
    let value: Value = serde_json::from_str(&now.message).expect("the structured result, once");
    assert_eq!(value["timezone"], "Europe/Oslo");
    let structured = now.structured_content.as_ref().expect("structured content");
    assert_eq!(structured["timezone"], "Europe/Oslo", "{structured}");
    let error =
        block_on(agent.call_tool("time.get_current_time", json!({"timezone": "Mars/Olympus"})))
            .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Repairable, "{error}");
    assert!(error.message().contains("Mars/Olympus"), "{error}");
    // The model sees it as a warning in the history, and the loop can go on.
    let tool = agent
        .host()
        .mcp_tools("default")
        .into_iter()
        .find(|t| t.name() == "time.get_current_time")
        .unwrap();
    assert_eq!(
        tool.breaker_state().name(),
        "closed",
        "a repairable error is not a failure"
    );
}

#[test]
fn an_mcp_tool_wins_over_a_library_of_the_same_name_and_is_listed_and_prompted() {
    let root = TestRoot::new();
    root.tool("usr", "everything.echo", Fixture::Echo);
    servers(&root, "usr/mcp.json", json!({"everything": everything()}));
    let (agent, _) = ready_agent(&root, "default");
    let echo =
        block_on(agent.call_tool("everything.echo", json!({"message": "mcp first"}))).unwrap();
    assert_eq!(echo.message, "Echo: mcp first");
    let listing = agent.host().list("default");
    assert!(
        listing.tools.iter().all(|t| t.name != "everything.echo"),
        "the library is hidden"
    );
    let listed = listing
        .mcp
        .iter()
        .find(|m| m.tool.name() == "everything.echo")
        .unwrap();
    assert_eq!(listed.shadows.len(), 1);
    let prompt = agent.host().tools_prompt("default");
    assert!(
        prompt.contains("### everything.echo\nEchoes back the input string"),
        "{prompt}"
    );
    assert!(
        prompt.contains("\"message\""),
        "the inputSchema is in the prompt"
    );

    let out = root.run_cli(&["list", "--json"]);
    let value: Value = serde_json::from_slice(&out.stdout).unwrap();
    let tool = value["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "everything.echo")
        .unwrap();
    assert_eq!(tool["layer"], "mcp:everything");
    let out = root.run_cli(&["mcp"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("everything: ready with"), "{text}");
    // Models that call tools natively get `<server>__<tool>` (no `.` in function names).
    let specs = agent.host().tool_specs("default");
    assert!(
        specs.iter().any(|s| s.name == "everything__echo"),
        "{specs:?}"
    );
    let native = block_on(agent.call_tool("everything__echo", json!({"message": "n"}))).unwrap();
    assert_eq!(native.message, "Echo: n");
    // `name:method` still parses; the method goes with the call.
    let method =
        block_on(agent.call_tool("everything.echo:loud", json!({"message": "m"}))).unwrap();
    assert_eq!(method.message, "Echo: m");
}

#[test]
fn a_profile_switches_a_server_off_and_a_bad_file_is_one_line() {
    let root = TestRoot::new();
    servers(
        &root,
        "usr/mcp.json",
        json!({"time": time(), "off": {"command": "true"}}),
    );
    servers(
        &root,
        "usr/agents/dev/mcp.json",
        json!({"off": {"disabled": true}, "time": {"disabled": true}}),
    );
    root.write(
        "usr/agents/broken/mcp.json",
        "{\"mcpServers\": {\"x\": [1]}",
    );
    let host = root.host();
    block_on(host.wait_for_mcp("dev", START));
    assert!(
        host.mcp_servers("dev").is_empty(),
        "both switched off for dev"
    );
    let agent = Agent::new(host.clone(), "A0", "dev").unwrap();
    let unknown =
        block_on(agent.call_tool("time.get_current_time", json!({"timezone": "UTC"}))).unwrap();
    assert!(
        unknown
            .message
            .starts_with("Tool time.get_current_time not found"),
        "{}",
        unknown.message
    );

    let errors = host.mcp_config_errors("broken");
    assert_eq!(errors.len(), 1, "{errors:?}");
    let line = errors[0].to_string();
    assert!(
        line.starts_with("usr/agents/broken/mcp.json:1: invalid JSON"),
        "{line}"
    );
    block_on(host.wait_for_mcp("broken", START));
    let time = host
        .mcp_servers("broken")
        .into_iter()
        .find(|s| s.name == "time")
        .unwrap();
    assert_eq!(
        time.state,
        McpState::Ready,
        "the global file still works: {:?}",
        time.last_error
    );
    // A streamable HTTP server that nobody serves fails with the reason, naming its URL.
    let remote = json!({"remote": {"url": "http://127.0.0.1:9/mcp", "headers": {"X-Key": "k"}}});
    servers(&root, "usr/agents/web/mcp.json", remote);
    block_on(host.wait_for_mcp("web", START));
    let remote = host
        .mcp_servers("web")
        .into_iter()
        .find(|s| s.name == "remote")
        .unwrap();
    assert!(
        matches!(&remote.state, McpState::Failed(why) if why.contains("cannot reach http://127.0.0.1:9/mcp")),
        "{:?}",
        remote.state
    );
    let out = root.run_cli(&["mcp", "--profile", "broken"]);
    let text = String::from_utf8_lossy(&out.stdout);
    let mentions: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("broken/mcp.json"))
        .collect();
    assert_eq!(mentions.len(), 1, "{text}");
}

#[test]
fn servers_start_in_the_background_and_a_call_waits_for_them() {
    let root = TestRoot::new();
    servers(&root, "usr/mcp.json", json!({"time": time()}));
    let started = Instant::now();
    let host = std::sync::Arc::new(Host::new(root.path()).unwrap());
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "the host does not wait for servers"
    );
    let states: Vec<McpState> = host
        .mcp_servers("default")
        .into_iter()
        .map(|s| s.state)
        .collect();
    assert!(
        matches!(states[..], [McpState::Starting | McpState::Ready]),
        "{states:?}"
    );
    let agent = Agent::new(host, "A0", "default").unwrap();
    let now =
        block_on(agent.call_tool("time.get_current_time", json!({"timezone": "UTC"}))).unwrap();
    assert!(now.message.contains("UTC"), "{}", now.message);
}

#[test]
fn dotted_names_survive_every_reply_form() {
    let replies = [
        r#"{"tool_name": "everything.echo", "tool_args": {"message": "x"}}"#,
        "<tool_call>\n{\"name\": \"everything.echo\", \"arguments\": {\"message\": \"x\"}}\n</tool_call>",
        "<invoke name=\"everything.echo\"><parameter name=\"message\">x</parameter></invoke>",
        r#"everything.echo(message="x")"#,
    ];
    for reply in replies {
        let request = toolhost::read_reply(reply).unwrap_or_else(|e| panic!("{reply}: {e:?}"));
        assert_eq!(request.tool, "everything.echo", "{reply}");
        assert_eq!(request.args["message"], "x", "{reply}");
    }
    let method = toolhost::read_reply(r#"{"tool_name": "everything.echo:loud", "tool_args": {}}"#);
    let name = toolhost::ToolName::parse(&method.unwrap().tool).unwrap();
    assert_eq!(
        (name.name(), name.method()),
        ("everything.echo", Some("loud"))
    );
}

#[test]
fn the_message_loop_calls_an_mcp_tool_with_secrets_unmasked_and_masked_again() {
    let root = TestRoot::new();
    root.tool("core", "response", Fixture::Response);
    root.secret_extensions();
    root.write("usr/secrets.env", "GUEST=Ada Lovelace\n");
    servers(&root, "usr/mcp.json", json!({"everything": everything()}));
    let (agent, _) = ready_agent(&root, "default");
    let replies = vec![
        json!({"tool_name": "everything.echo", "tool_args": {"message": "§§secret(GUEST)"}})
            .to_string(),
        json!({"tool_name": "response", "tool_args": {"text": "done"}}).to_string(),
    ];
    let model = toolhost::ScriptedModel::new(replies);
    let options = toolhost::LoopOptions::default();
    let answer = block_on(agent.monologue(&model, "Echo our guest.", &options)).unwrap();
    assert_eq!(answer, "done");
    let history = agent.history();
    let result = history
        .iter()
        .find(|m| m.tool_name.as_deref() == Some("everything.echo"))
        .expect("the MCP tool's result is in the history");
    // The server got the value; the model sees the placeholder again.
    assert_eq!(&*result.content, "Echo: §§secret(GUEST)");
}

#[test]
fn approvals_and_the_audit_govern_mcp_calls() {
    let root = TestRoot::new();
    root.write("usr/toolhost.toml", "[policy]\nwrite = \"deny\"\n");
    servers(&root, "usr/mcp.json", json!({"everything": everything()}));
    let (agent, _) = ready_agent(&root, "default");
    let tools = agent.host().mcp_tools("default");
    let write = tools
        .iter()
        .find(|t| t.info().risk_level == toolhost::RiskLevel::Write)
        .expect("a tool without readOnlyHint is write");
    let refused = block_on(agent.call_tool(write.name(), json!({}))).unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::Repairable, "{refused}");
    assert!(refused.message().contains("was not approved"), "{refused}");
    block_on(agent.call_tool("everything.echo", json!({"message": "audited"}))).unwrap();
    let audit = std::fs::read_to_string(root.path().join("usr/audit/audit.jsonl")).unwrap();
    let record = audit
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .rfind(|r| r["type"] == "call" && r["tool"] == "everything.echo")
        .expect("the MCP call is audited");
    assert_eq!(record["layer"], "mcp:everything", "{record}");
    assert_eq!(record["outcome"], "success", "{record}");
}
