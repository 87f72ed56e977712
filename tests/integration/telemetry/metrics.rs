//! `/metrics` on `serve-mcp --http`: Prometheus text (OpenMetrics) behind the same token as
//! `/mcp`, counting calls, failures by kind, durations and MCP requests.

use serde_json::json;

use super::Served;
use crate::mcp_server::root;

#[test]
fn metrics_are_served_behind_the_token_and_count_calls_and_failures() {
    let root = root();
    let server = Served::start(&root, &["--token-secret", "MCP_TOKEN"], &[]);
    let (status, _) = server.request("GET", "/metrics", &[], "");
    assert_eq!(status, 401, "the token guards /metrics too");
    let token = [("Authorization", "Bearer tok-123456789")];
    let call = |id: &str, name: &str, args| {
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": name, "arguments": args}});
        let (status, answer) = server.request("POST", "/mcp", &token, &body.to_string());
        assert_eq!(status, 200, "{answer}");
    };
    call("1", "echo", json!({"x": 1}));
    call("2", "echo", json!({"x": 2}));
    call("3", "echo:fail", json!({"kind": "timeout"}));
    let (status, text) = server.request("GET", "/metrics", &token, "");
    assert_eq!(status, 200, "{text}");
    for line in [
        r#"toolhost_tool_calls_total{tool="echo",outcome="ok"} 2"#,
        r#"toolhost_tool_calls_total{tool="echo",outcome="error"} 1"#,
        r#"toolhost_tool_failures_total{tool="echo",kind="timeout"} 1"#,
        r#"toolhost_tool_call_duration_seconds_count{tool="echo"} 3"#,
        r#"toolhost_mcp_requests_total{method="tools/call"} 3"#,
        // echo, governed, versioned, noop and hidden, each loaded once.
        r#"toolhost_reloads_total{event="loaded"}"#,
        "# TYPE toolhost_tool_call_duration_seconds histogram",
        "# EOF",
    ] {
        assert!(text.contains(line), "{line} missing from:\n{text}");
    }
}

#[test]
fn sessions_started_are_counted() {
    let root = root();
    let server = Served::start(&root, &["--sessions", "--allow-writes-without-token"], &[]);
    let init = json!({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}});
    for _ in 0..2 {
        let (status, answer) = server.request("POST", "/mcp", &[], &init.to_string());
        assert_eq!(status, 200, "{answer}");
    }
    let (status, text) = server.request("GET", "/metrics", &[], "");
    assert_eq!(status, 200, "{text}");
    let line = "toolhost_mcp_sessions_started_total 2";
    assert!(text.contains(line), "{line} missing from:\n{text}");
}
