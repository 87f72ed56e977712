//! The MCP client over streamable HTTP, against this host's own `toolhost serve-mcp --http`
//! (a real server process): a bearer token from the client's secrets, and a wrong one.

use serde_json::json;
use toolhost::mcp::McpState;
use toolhost_tests::{block_on, TestRoot};

use super::{ready_agent, servers, START};
use crate::mcp_server::{self, HttpServer};

#[test]
fn a_streamable_http_server_is_called_with_its_bearer_token_from_the_secrets() {
    let served = mcp_server::root(); // its MCP_TOKEN is tok-123456789
    let server = HttpServer::start(&served, &["--token-secret", "MCP_TOKEN"]);
    let root = TestRoot::new();
    root.write("usr/secrets.env", "REMOTE_TOKEN=tok-123456789\n");
    let remote =
        json!({"url": server.url, "headers": {"Authorization": "Bearer §§secret(REMOTE_TOKEN)"}});
    servers(&root, "usr/mcp.json", json!({"remote": remote}));
    let (agent, _) = ready_agent(&root, "default");
    let response = block_on(agent.call_tool("remote.echo", json!({"said": "over http"}))).unwrap();
    assert!(
        response.message.contains("over http"),
        "{}",
        response.message
    );
    let listed = agent.host().mcp_tools("default");
    assert!(listed.iter().any(|t| t.name() == "remote.echo"));
}

#[test]
fn a_wrong_token_leaves_the_server_failed_with_the_reason() {
    let served = mcp_server::root();
    let server = HttpServer::start(&served, &["--token-secret", "MCP_TOKEN"]);
    let root = TestRoot::new();
    let remote = json!({"url": server.url, "headers": {"Authorization": "Bearer wrong-token"}});
    servers(&root, "usr/mcp.json", json!({"remote": remote}));
    let host = root.host();
    block_on(host.wait_for_mcp("default", START));
    let status = host.mcp_servers("default").remove(0);
    let McpState::Failed(reason) = status.state else {
        panic!("not failed: {:?}", status.state);
    };
    assert!(
        reason.contains("refused the credentials (HTTP 401)"),
        "{reason}"
    );
}
