//! The HTTP transport's defaults: loopback only, a foreign `Origin` refused, a bearer token
//! when one is configured, a cap on the body.

use std::io::{Read, Write};
use std::net::TcpStream;

use super::{root, HttpServer};

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;

/// POSTs `body` to `/mcp` with `headers`; returns the status code.
fn post(server: &HttpServer, headers: &[(&str, &str)], body: &str) -> u16 {
    let mut stream = TcpStream::connect(server.authority()).expect("connect");
    let mut request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
        server.authority(),
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).expect("request head");
    // A refused body may be cut short by the server: that is its answer.
    let _ = stream.write_all(body.as_bytes());
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).expect("status line");
    let status = std::str::from_utf8(&head[9..12]).expect("status");
    status.parse().expect("numeric status")
}

#[test]
fn the_default_bind_is_loopback() {
    let root = root();
    let output = root.run_cli(&["serve-mcp", "--help"]);
    let help = String::from_utf8_lossy(&output.stdout);
    assert!(help.contains("--http <ADDR>"), "{help}");
    let server = HttpServer::start_at(&root, "127.0.0.1:0", &[]);
    assert!(
        server.url.starts_with("http://127.0.0.1:"),
        "{}",
        server.url
    );
    let options = toolhost_mcp_server::HttpOptions::default();
    assert!(options.addr.ip().is_loopback(), "{:?}", options.addr);
    assert!(options.token.is_none() && !options.sessions);
}

#[test]
fn origins_are_checked() {
    let root = root();
    let server = HttpServer::start(&root, &["--allow-origin", "https://app.example.com:443"]);
    assert_eq!(
        post(&server, &[], INITIALIZE),
        200,
        "no Origin: a local client"
    );
    let local = [("Origin", "http://localhost:3000")];
    assert_eq!(post(&server, &local, INITIALIZE), 200);
    let allowed = [("Origin", "https://app.example.com")];
    assert_eq!(post(&server, &allowed, INITIALIZE), 200);
    let foreign = [("Origin", "https://evil.example.net")];
    assert_eq!(post(&server, &foreign, INITIALIZE), 403);
}

#[test]
fn a_token_is_required_when_configured() {
    let root = root();
    let server = HttpServer::start(&root, &["--token-secret", "MCP_TOKEN"]);
    assert_eq!(post(&server, &[], INITIALIZE), 401);
    let wrong = [("Authorization", "Bearer tok-000000000")];
    assert_eq!(post(&server, &wrong, INITIALIZE), 401);
    let right = [("Authorization", "Bearer tok-123456789")];
    assert_eq!(post(&server, &right, INITIALIZE), 200);
    let output = root.run_cli(&[
        "serve-mcp",
        "--http",
        "127.0.0.1:0",
        "--token-secret",
        "NOPE",
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("there is no secret NOPE"), "{stderr}");
}

#[test]
fn an_oversized_body_is_refused() {
    let root = root();
    let server = HttpServer::start(
        &root,
        &["--max-body-bytes", "65536", "--allow-writes-without-token"],
    );
    let padding = "x".repeat(70_000);
    let big = INITIALIZE.replace("\"raw\"", &format!("\"{padding}\""));
    assert_eq!(post(&server, &[], &big), 413);
    assert_eq!(post(&server, &[], INITIALIZE), 200);
}

/// Without a token (`--token-secret`), an HTTP listener serves only `read` tools: any process
/// that reaches it could call them. `--allow-writes-without-token` serves the others too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_token_only_read_tools_are_served_unless_allowed() {
    use rmcp::model::CallToolRequestParams;
    use rmcp::ServiceExt;
    let root = root();
    let _ = rustls::crypto::ring::default_provider().install_default();
    for (args, writes) in [
        (&[][..], false),
        (&["--allow-writes-without-token"][..], true),
    ] {
        let server = HttpServer::start(&root, args);
        let transport =
            rmcp::transport::StreamableHttpClientTransport::from_uri(server.url.clone());
        let client = ().serve(transport).await.expect("initialize");
        let tools = client.list_all_tools().await.expect("tools/list");
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        assert!(names.contains(&"governed"), "a read tool: {names:?}");
        assert_eq!(names.contains(&"echo"), writes, "{args:?}: {names:?}");
        let mut echo = serde_json::Map::new();
        echo.insert("text".into(), "hi".into());
        let called = client
            .call_tool(CallToolRequestParams::new("echo").with_arguments(echo))
            .await;
        match (writes, called) {
            (true, Ok(result)) => assert_eq!(result.is_error, Some(false), "{result:?}"),
            (false, Err(e)) => assert!(
                e.to_string().contains("--allow-writes-without-token"),
                "{e}"
            ),
            (_, other) => panic!("{args:?}: {other:?}"),
        }
        let _ = client.cancel().await;
    }
}

/// GETs `path` with the raw head lines `head` (HTTP/1.0 when `head` holds no `Host`, as a
/// balancer's health check sends it); returns the status code.
fn get(server: &HttpServer, path: &str, head: &[&str]) -> u16 {
    let mut stream = TcpStream::connect(server.authority()).expect("connect");
    let version = match head.iter().any(|l| l.starts_with("Host:")) {
        true => "HTTP/1.1",
        false => "HTTP/1.0",
    };
    let mut request = format!("GET {path} {version}\r\nConnection: close\r\n");
    for line in head {
        request.push_str(line);
        request.push_str("\r\n");
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).expect("request");
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer[9..12].parse().expect("numeric status")
}

/// DNS rebinding: a page of another site, its name resolved to 127.0.0.1, reaches the
/// listener with its own name in `Host`. Every endpoint refuses it, as `/mcp` does.
#[test]
fn every_endpoint_applies_the_host_and_origin_rule() {
    let root = root();
    let server = HttpServer::start(&root, &[]);
    let local = format!("Host: {}", server.authority());
    for path in ["/metrics", "/ready", "/mcp"] {
        assert_eq!(
            get(&server, path, &["Host: evil.example"]),
            403,
            "{path}: a foreign Host"
        );
        let foreign = [local.as_str(), "Origin: http://evil.example"];
        assert_eq!(
            get(&server, path, &foreign),
            403,
            "{path}: a foreign Origin"
        );
    }
    assert_eq!(get(&server, "/metrics", &[&local]), 200);
    assert_eq!(get(&server, "/ready", &[&local]), 200);
    assert_eq!(
        get(&server, "/ready", &[]),
        200,
        "a health check with no Host"
    );
}
