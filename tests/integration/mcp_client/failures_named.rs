//! Hostile MCP servers whose messages the client cannot read, and a hostile `mcp.json`: each
//! failure says what happened, at once, and the servers that are fine keep working. A line
//! that is not JSON at `initialize`, a tool list nested deeper than JSON is read or over the
//! size of a message: each server is `failed` with that reason (not "still starting" for
//! ever); an entry that is not an object is one mistake, not the end of every server. The
//! servers are plain Python scripts (no SDK), so they send exactly what they are told to.

use serde_json::json;
use toolhost_tests::TestRoot;

use super::servers;

/// A server that answers `initialize` as `$MODE` says: `bad_init` with a line that is not
/// JSON; else well, then `tools/list` with a schema nested 300 deep (`deep`), with 17 MB of
/// description (`big`), or with one tool (`fine`).
const ANSWER: &str = r#"
    mode = os.environ["MODE"]
    if method == "initialize":
        if mode == "bad_init":
            sys.stdout.write('{"jsonrpc": "2.0", "id": ' + json.dumps(mid) + ', oops\n')
            sys.stdout.flush()
            return None
        return greeting(msg, mode, {"tools": {}})
    if method != "tools/list":
        return {}
    tool = {"name": "t", "description": "A tool.", "inputSchema": {"type": "object"}}
    if mode == "deep":
        tool["inputSchema"]["default"] = json.loads("[" * 300 + "]" * 300)
    if mode == "big":
        tool["description"] = "d" * (17 << 20)
    return {"tools": [tool]}
"#;

#[test]
fn unreadable_messages_fail_their_server_at_once_with_the_reason() {
    let root = TestRoot::new();
    let script = root.write("hostile.py", super::python_server("", ANSWER));
    let entry = |mode: &str| json!({"command": "python3", "args": [script], "env": {"MODE": mode}});
    servers(
        &root,
        "usr/mcp.json",
        json!({
            "bad_init": entry("bad_init"),
            "deep": entry("deep"),
            "big": entry("big"),
            "fine": entry("fine"),
            "a": 1,
        }),
    );
    let out = root.run_cli(&["mcp"]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let all = format!("{text}{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(
        text.contains("bad_init: failed: the handshake failed: it sent a line that is not JSON, and it was dropped: {\"jsonrpc\""),
        "{all}"
    );
    assert!(
        text.contains("deep: failed: listing its tools failed: it sent a message nested 305 levels deep, deeper than the 128 levels JSON is read to"),
        "{all}"
    );
    assert!(
        text.contains("big: failed: listing its tools failed: it sent a message of ")
            && text.contains("over the 16 MiB a message may have"),
        "{all}"
    );
    assert!(text.contains("fine: ready with 1 tools"), "{all}");
    assert!(
        text.contains("mcpServers.a: expected an object, not a number"),
        "one mistake, the other servers read: {all}"
    );
    // At once: each failed with its reason, none "still starting" after the 20 s a command
    // waits for servers to settle.
    assert!(!text.contains("still starting"), "{all}");
}
