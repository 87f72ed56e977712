//! `usr/mcp.json` mistakes and `toolhost mcp`'s exit, and which commands start the servers
//! (`serve-mcp` starts none: it offers library tools only).

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use serde_json::{json, Value};
use toolhost_tests::{peers, TestRoot};

use super::servers;

#[test]
fn a_typo_in_mcp_json_is_one_line_with_file_line_and_key_and_toolhost_mcp_exits_1() {
    let root = TestRoot::new();
    root.write(
        "usr/mcp.json",
        "{\n  \"mcpServers\": {\n    \"typo\": {\n      \"command\": \"npx\",\n      \"arg\": [\"-y\", \"x\"]\n    }\n  }\n}\n",
    );
    let out = root.run_cli(&["mcp"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines,
        [
            "config error: usr/mcp.json:5: mcpServers.typo: unknown key \"arg\" (did you mean \"args\"?)",
            "No MCP servers for profile 'default' (list them in usr/mcp.json).",
        ],
        "{stderr}"
    );
    assert!(stderr.contains("1 mistake(s) in mcp.json"), "{stderr}");
}

#[test]
fn toolhost_mcp_exits_1_naming_a_server_that_failed_and_why() {
    let root = TestRoot::new();
    let time = json!({"command": peers::mcp_python(), "args": ["-m", "mcp_server_time"]});
    let missing = json!({"command": "/nonexistent/mcp-server"});
    servers(
        &root,
        "usr/mcp.json",
        json!({"time": time, "gone": missing}),
    );
    let out = root.run_cli(&["mcp"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stdout.contains("gone: failed: cannot start `/nonexistent/mcp-server`"),
        "{stdout}"
    );
    assert!(stdout.contains("time: ready with 2 tools"), "{stdout}");
    assert!(stderr.contains("1 server(s) not ready"), "{stderr}");
    let json = root.run_cli(&["mcp", "--json"]);
    assert_eq!(json.status.code(), Some(1));
    servers(
        &root,
        "usr/mcp.json",
        json!({"time": {"command": peers::mcp_python(), "args": ["-m", "mcp_server_time"]}}),
    );
    let ok = root.run_cli(&["mcp"]);
    assert_eq!(
        ok.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&ok.stdout)
    );
}

#[test]
fn serve_mcp_starts_no_mcp_server_while_list_does() {
    let root = TestRoot::new();
    let marker = root.path().join("started");
    let script = format!(
        "echo started >> '{}'; exec '{}' -m mcp_server_time",
        marker.display(),
        peers::mcp_python().display()
    );
    servers(
        &root,
        "usr/mcp.json",
        json!({"time": {"command": "sh", "args": ["-c", script]}}),
    );
    let mut serve = Command::new(toolhost_tests::toolhost_bin())
        .arg("--root")
        .arg(root.path())
        .args(["serve-mcp", "--no-watch"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("toolhost serve-mcp");
    let mut input = serve.stdin.take().unwrap();
    let messages = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
               "params": {"name": "time.get_current_time", "arguments": {"timezone": "UTC"}}}),
    ];
    for message in &messages {
        writeln!(input, "{message}").unwrap();
    }
    let mut lines = BufReader::new(serve.stdout.take().unwrap()).lines();
    let mut answers = Vec::new();
    while answers.len() < 3 {
        let line = lines.next().expect("serve-mcp answered").unwrap();
        let value: Value = serde_json::from_str(&line).unwrap();
        if value.get("id").is_some() {
            answers.push(value);
        }
    }
    drop(input);
    let _ = serve.wait();
    answers.sort_by_key(|a| a["id"].as_u64());
    let listed = answers[1]["result"]["tools"].as_array();
    let listed = listed.unwrap_or_else(|| panic!("{answers:?}"));
    assert!(
        listed
            .iter()
            .all(|t| !t["name"].as_str().unwrap().starts_with("time.")),
        "{listed:?}"
    );
    // Not offered, so unknown: a JSON-RPC error, as the MCP spec has it.
    assert_eq!(answers[2]["error"]["code"], -32602, "{}", answers[2]);
    let called = answers[2]["error"]["message"].as_str().unwrap_or_default();
    assert!(called.contains("Unknown tool"), "{}", answers[2]);
    assert!(!marker.exists(), "serve-mcp started the MCP server");
    // `list` offers the servers' tools, so it starts them (the marker is a real witness).
    let out = root.run_cli(&["list"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("time.get_current_time"));
    assert!(marker.exists(), "list started the MCP server");
}

#[test]
fn a_server_that_keeps_failing_the_same_way_is_reported_once_per_host() {
    let root = TestRoot::new();
    servers(
        &root,
        "usr/mcp.json",
        json!({"gone": {"command": "/nonexistent/mcp-server"}}),
    );
    let mut watch = crate::watch_mode::WatchProcess::start(&root);
    watch.expect_line("the prompt", |l| l.starts_with("type `name"));
    for _ in 0..3 {
        // Past the backoff (0 s, 1 s, 2 s), so each call starts the server again and it fails.
        std::thread::sleep(std::time::Duration::from_millis(2100));
        watch.send("gone.x");
        watch.expect_line("the call's error", |l| l.contains("MCP server 'gone'"));
    }
    let logged = watch.logged();
    let warnings: Vec<&String> = logged
        .iter()
        .filter(|l| l.contains("WARN") && l.contains("MCP server gone: cannot start"))
        .collect();
    assert_eq!(warnings.len(), 1, "{logged:#?}\n{:#?}", watch.printed());
}
