//! How stdio servers are greeted and what roots they get: `server/discover` of 2026-07-28
//! first, a 2025-11-25 server that ends the connection on it started again and greeted with
//! `initialize`; each answered with the roots its entry shares (`"roots"`), or none.

use serde_json::json;
use toolhost_tests::{peers, TestRoot};

use super::servers;

/// The Python SDK's `MCPServer` (it speaks 2026-07-28 and 2025-11-25): a tool whose
/// resolver asks for the client's roots (an `InputRequiredResult` of 2026-07-28).
const MODERN_SERVER: &str = r#"
from typing import Annotated
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.resolve import ListRoots, Resolve
from mcp_types import ListRootsResult

app = MCPServer("modern")

def get_roots() -> ListRoots:
    return ListRoots()

@app.tool()
async def where(roots: Annotated[ListRootsResult, Resolve(get_roots)]) -> str:
    """Lists the client's roots."""
    return "roots: " + ", ".join(f"{r.name}={r.uri}" for r in roots.roots)

app.run("stdio")
"#;

/// A server of 2025-11-25 written by hand: it ends the connection on any request before
/// `initialize` (as some do), records what it got, and its tool asks `roots/list`.
const OLD_SERVER: &str = r#"import json, sys

LOG = sys.argv[1]

def log(line):
    with open(LOG, "a") as f:
        f.write(line + "\n")

def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()

def read():
    line = sys.stdin.readline()
    if not line:
        sys.exit(0)
    return json.loads(line)

initialized = False
while True:
    message = read()
    method = message.get("method")
    log(f"got {method}")
    if method == "initialize":
        initialized = True
        send({"jsonrpc": "2.0", "id": message["id"], "result": {
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "old", "version": "1.0"}}})
    elif not initialized:
        log("ended: a request before initialize")
        sys.exit(1)
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": message["id"], "result": {"tools": [{
            "name": "where", "description": "Lists the client's roots.",
            "inputSchema": {"type": "object"}}]}})
    elif method == "tools/call":
        send({"jsonrpc": "2.0", "id": "roots-1", "method": "roots/list"})
        answer = read()
        while answer.get("id") != "roots-1":
            answer = read()
        roots = answer.get("result", {}).get("roots", [])
        text = "roots: " + ", ".join(f"{r.get('name')}={r['uri']}" for r in roots)
        send({"jsonrpc": "2.0", "id": message["id"], "result": {
            "content": [{"type": "text", "text": text}]}})
    elif "id" in message:
        send({"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": "no"}})
"#;

#[test]
fn a_2026_stdio_server_is_greeted_with_discover_and_gets_the_configured_roots() {
    let root = TestRoot::new();
    let script = root.write("modern_server.py", MODERN_SERVER);
    let shared = root.path().join("usr/shared");
    std::fs::create_dir_all(&shared).unwrap();
    servers(
        &root,
        "usr/mcp.json",
        json!({"modern": {"command": peers::mcp_python(), "args": [script], "roots": ["usr/shared"]}}),
    );
    let out = root.run_cli(&["--yes", "call", "modern.where"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let uri = format!("file://{}", shared.display());
    // The SDK asks for roots in an InputRequiredResult only over 2026-07-28 (over 2025-11-25 it
    // sends `roots/list`, which this test's other server covers).
    assert!(
        stdout.contains(&format!("roots: shared={uri}")),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Without "roots", none is shared, and the capability is not declared: the SDK refuses.
    servers(
        &root,
        "usr/mcp.json",
        json!({"modern": {"command": peers::mcp_python(), "args": [script]}}),
    );
    let out = root.run_cli(&["--yes", "call", "modern.where"]);
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!all.contains("shared="), "{all}");
    assert!(all.contains("roots capability"), "{all}");
    // Held to 2025-11-25 (`"protocol"`): greeted with `initialize`, the SDK sends
    // `roots/list` in the middle of the call, answered with the same roots.
    servers(
        &root,
        "usr/mcp.json",
        json!({"modern": {"command": peers::mcp_python(), "args": [script], "roots": ["usr/shared"], "protocol": "2025-11-25"}}),
    );
    let out = root.run_cli(&["--yes", "call", "modern.where"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!("roots: shared={uri}")),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_2025_stdio_server_that_ends_on_discover_is_started_again_with_initialize() {
    let root = TestRoot::new();
    let script = root.write("old_server.py", OLD_SERVER);
    let log = root.path().join("old.log");
    let shared = root.path().join("usr/shared");
    std::fs::create_dir_all(&shared).unwrap();
    let python = "python3";
    servers(
        &root,
        "usr/mcp.json",
        json!({"old": {"command": python, "args": [script, log], "roots": ["usr/shared"]}}),
    );
    let out = root.run_cli(&["--yes", "call", "old.where"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let uri = format!("file://{}", shared.display());
    assert!(
        stdout.contains(&format!("roots: shared={uri}")),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = got.lines().collect();
    // Greeted with discover first, ended, started again with initialize.
    assert_eq!(
        &lines[..3],
        [
            "got server/discover",
            "ended: a request before initialize",
            "got initialize"
        ],
        "{got}"
    );
    assert!(got.contains("got tools/call"), "{got}");
}
