//! A server that asks: a Python `MCPServer` tool that elicits a form during its call, answered
//! by the person at the terminal of `toolhost call` (a pseudo-terminal here), a field left
//! empty getting its default; the server's words shown escaped.

use serde_json::json;
use toolhost_tests::{peers, TestRoot};

use super::servers;

/// A server whose tool `ask` asks for a name and a colour (default blue).
const ASKING_SERVER: &str = r#"
from pydantic import BaseModel, Field
from mcp.server.mcpserver import Context, MCPServer

app = MCPServer("asker")

class Info(BaseModel):
    name: str = Field(description="Your name")
    color: str = Field(default="blue", description="Favourite colour")

@app.tool()
async def ask(ctx: Context) -> str:
    """Asks who is there."""
    answer = await ctx.elicit("Who are you? \x1b[2J", schema=Info)
    if answer.action == "accept":
        return f"{answer.data.name} likes {answer.data.color}"
    return f"no answer: {answer.action}"

app.run("stdio")
"#;

#[test]
fn a_servers_form_is_answered_on_the_terminal_with_defaults_for_empty_fields() {
    let root = TestRoot::new();
    let script = root.write("asking_server.py", ASKING_SERVER);
    servers(
        &root,
        "usr/mcp.json",
        // Its tool asks in the middle of the call, as 2025-11-25 allows (the SDK speaks
        // 2026-07-28 too, where that is refused): greeted with `initialize` only.
        json!({"asker": {"command": peers::mcp_python(), "args": [script], "protocol": "2025-11-25"}}),
    );
    let Some(shown) = root.run_on_terminal("call asker.ask", "Ada\n\ny\n", false) else {
        return; // no `script` here: noted as skipped (under CI=true, a failure)
    };
    assert!(
        shown.contains("MCP server 'asker' asks, during A0's call of tool 'asker.ask':"),
        "{shown}"
    );
    assert!(
        shown.contains("Who are you? \\u{1b}[2J"),
        "escaped: {shown}"
    );
    assert!(
        shown.contains("name (required) Your name [string]:"),
        "{shown}"
    );
    assert!(
        shown.contains("color Favourite colour [string, empty for \"blue\"]:"),
        "{shown}"
    );
    assert!(shown.contains("Ada likes blue"), "{shown}");
    // Off a terminal no one can answer: declined, and the server says so.
    let out = root.run_cli(&["call", "asker.ask"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("no answer: decline"), "{stdout}");
}
