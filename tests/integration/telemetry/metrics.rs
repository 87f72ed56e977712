//! `/metrics` on `serve-mcp --http`: Prometheus text (OpenMetrics) behind the same token as
//! `/mcp`, counting calls, failures by kind, durations and MCP requests with their durations;
//! its labels are the profile's tools (a name a client makes up is `unknown`), masked, and the
//! text parses with the Prometheus client's OpenMetrics parser.

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::json;
use toolhost_tests::balancer::KeepAlive;
use toolhost_tests::peers;

use super::Served;
use crate::mcp_server::{root, SECRET};

/// `/metrics` of `server` with `headers`, de-chunked: the status and the text.
fn scrape(server: &Served, headers: &[(&str, &str)]) -> (u16, String) {
    let port = server
        .authority
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok());
    let mut client = KeepAlive::new(port.expect("a port"), headers);
    client.exchange("GET", "/metrics", "").expect("/metrics")
}

/// Parses `text` with the Prometheus client library's OpenMetrics parser (strict: it refuses
/// what Prometheus would not scrape); the names of the metric families.
fn parsed(text: &str) -> Vec<String> {
    let script = "import sys\n\
        from prometheus_client.openmetrics.parser import text_string_to_metric_families\n\
        for family in text_string_to_metric_families(sys.stdin.read()):\n    print(family.name)\n";
    let mut child = Command::new(peers::prometheus_python())
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("the metrics to the parser");
    let out = child.wait_with_output().expect("the parser");
    assert!(
        out.status.success(),
        "the OpenMetrics parser refused /metrics: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

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
    // An unknown tool is a JSON-RPC error (invalid params).
    call("4", "nope", json!({}));
    let (status, text) = scrape(&server, &token);
    assert_eq!(status, 200, "{text}");
    for line in [
        r#"toolhost_tool_calls_total{gen_ai_tool_name="echo",toolhost_call_outcome="ok"} 2"#,
        r#"toolhost_tool_calls_total{gen_ai_tool_name="echo",toolhost_call_outcome="error"} 1"#,
        r#"toolhost_tool_failures_total{error_type="timeout",gen_ai_tool_name="echo"} 1"#,
        r#"toolhost_tool_call_duration_seconds_count{gen_ai_tool_name="echo"} 3"#,
        r#"toolhost_tool_call_duration_seconds_bucket{gen_ai_tool_name="echo",le="+Inf"} 3"#,
        r#"toolhost_mcp_requests_total{mcp_method_name="tools/call"} 4"#,
        // Each request's duration, by method and tool, and by error when it failed: a tool's
        // own failure, or the JSON-RPC error's code.
        r#"mcp_server_operation_duration_seconds_count{gen_ai_tool_name="echo",mcp_method_name="tools/call"} 2"#,
        // A method is not part of the label (a client chooses it); a name the profile does not
        // serve is `unknown`.
        r#"mcp_server_operation_duration_seconds_count{error_type="tool_error",gen_ai_tool_name="echo",mcp_method_name="tools/call"} 1"#,
        r#"mcp_server_operation_duration_seconds_count{error_type="-32602",gen_ai_tool_name="unknown",mcp_method_name="tools/call"} 1"#,
        "# TYPE mcp_server_operation_duration_seconds histogram",
        // echo, governed, versioned, noop and hidden, each loaded once.
        r#"toolhost_reloads_total{toolhost_reload_event="loaded"}"#,
        "# TYPE toolhost_tool_call_duration_seconds histogram",
        "# EOF",
    ] {
        assert!(text.contains(line), "{line} missing from:\n{text}");
    }
    let families = parsed(&text);
    assert!(
        families.contains(&"mcp_server_operation_duration_seconds".to_owned()),
        "{families:?}"
    );
}

/// A client cannot choose the series: 300 made-up tool names, one of them a secret's value,
/// and made-up methods of a real tool add no label; `/metrics` stays small, holds no secret and
/// still parses.
#[test]
fn tool_names_a_client_makes_up_are_one_unknown_label_with_no_secret() {
    let root = root();
    let server = Served::start(&root, &["--token-secret", "MCP_TOKEN", "--no-watch"], &[]);
    let token = [("Authorization", "Bearer tok-123456789")];
    let call = |id: usize, name: &str| {
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": name, "arguments": {}}});
        let (status, answer) = server.request("POST", "/mcp", &token, &body.to_string());
        assert_eq!(status, 200, "{answer}");
    };
    call(0, SECRET);
    call(1, &format!("tool-{SECRET}"));
    for i in 0..300 {
        call(10 + i, &format!("made_up_{i}"));
    }
    for i in 0..20 {
        call(1000 + i, &format!("echo:method_{i}"));
    }
    let (status, text) = scrape(&server, &token);
    assert_eq!(status, 200, "{text}");
    assert!(!text.contains(SECRET), "a secret in /metrics:\n{text}");
    assert!(
        !text.contains("made_up"),
        "a made-up name in /metrics:\n{text}"
    );
    assert!(
        !text.contains("echo:"),
        "a made-up method in /metrics:\n{text}"
    );
    let line = r#"mcp_server_operation_duration_seconds_count{error_type="-32602",gen_ai_tool_name="unknown",mcp_method_name="tools/call"} 302"#;
    assert!(text.contains(line), "{line} missing from:\n{text}");
    assert!(text.len() < 64 << 10, "{} bytes:\n{text}", text.len());
    parsed(&text);
}

#[test]
fn sessions_started_are_counted_and_open_ones_go_down_on_delete() {
    let root = root();
    let server = Served::start(&root, &["--sessions", "--allow-writes-without-token"], &[]);
    let init = json!({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}});
    let open = |expected: u32| {
        let (status, text) = server.request("GET", "/metrics", &[], "");
        assert_eq!(status, 200, "{text}");
        let line = format!("toolhost_mcp_sessions_open {expected}\n");
        assert!(text.contains(&line), "{line} missing from:\n{text}");
        text
    };
    open(0);
    let mut ids = Vec::new();
    for _ in 0..2 {
        let (status, answer) = server.exchange("POST", "/mcp", &[], &init.to_string());
        assert_eq!(status, 200, "{answer}");
        let id = answer
            .lines()
            .find_map(|l| {
                let (name, value) = l.split_once(':')?;
                name.eq_ignore_ascii_case("mcp-session-id")
                    .then(|| value.trim().to_owned())
            })
            .unwrap_or_else(|| panic!("no Mcp-Session-Id in {answer}"));
        ids.push(id);
    }
    let text = open(2);
    let line = "toolhost_mcp_sessions_started_total 2";
    assert!(text.contains(line), "{line} missing from:\n{text}");
    let session = [
        ("Mcp-Session-Id", ids[0].as_str()),
        ("MCP-Protocol-Version", "2025-06-18"),
    ];
    let (status, answer) = server.request("DELETE", "/mcp", &session, "");
    assert!((200..300).contains(&status), "{status} {answer}");
    let text = open(1);
    assert!(text.contains(line), "started stays 2:\n{text}");
}
