//! The MCP client against a tiny server written here with the Python SDK (`MCPServer`):
//! a server killed mid-call, a timeout that cancels the request, a tool list that changes.

use std::time::{Duration, Instant};

use plugin_api::ErrorKind;
use serde_json::{json, Value};
use toolhost_tests::{block_on, peers, spawn_call, TestRoot};

use super::{ready_agent, servers, START};

/// A server that reports its pid, sleeps (writing `$MARKER` if its call is cancelled) and
/// grows a tool; written with the Python SDK's `MCPServer`.
const SLOW_SERVER: &str = r#"
import asyncio, os
from mcp.server.mcpserver import Context, MCPServer

app = MCPServer("slow")

@app.tool()
def pid() -> str:
    """The server's process id."""
    return str(os.getpid())

@app.tool()
async def sleep(seconds: float) -> str:
    """Sleeps, then says so."""
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        with open(os.environ["MARKER"], "w") as f:
            f.write("cancelled")
        raise
    return "slept"

@app.tool()
async def grow(ctx: Context) -> str:
    """Adds the tool `extra`, then says the tool list changed."""
    def extra() -> str:
        """A tool added later."""
        return "extra"
    app.add_tool(extra)
    await ctx.session.send_tool_list_changed()
    return "grown"

app.run("stdio")
"#;

fn slow(root: &TestRoot) -> Value {
    let script = root.write("slow_server.py", SLOW_SERVER);
    json!({
        "command": peers::mcp_python(),
        "args": [script],
        "env": {"MARKER": "§§secret(MARKER_PATH)"},
        // Its `grow` says the list changed in a notification of the call, as 2025-11-25 does
        // (2026-07-28 sends it on `subscriptions/listen`, which this client does not open).
        "protocol": "2025-11-25",
    })
}

/// Whether process `pid` is gone (or a zombie waiting to be reaped).
fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|s| s.trim_start().starts_with('Z')),
    }
}

fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "{what} within {limit:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_server_killed_mid_call_is_a_dependency_error_and_restarts_at_the_next_call() {
    let root = TestRoot::new();
    root.write(
        "usr/secrets.env",
        format!("MARKER_PATH={}\n", root.path().join("marker").display()),
    );
    servers(&root, "usr/mcp.json", json!({"slow": slow(&root)}));
    let (agent, _) = ready_agent(&root, "default");
    let pid: u32 = block_on(agent.call_tool("slow.pid", json!({})))
        .unwrap()
        .message
        .parse()
        .unwrap();
    let result = block_on(async {
        let call = spawn_call(&agent, "slow.sleep", json!({"seconds": 30}));
        tokio::time::sleep(Duration::from_millis(700)).await;
        std::process::Command::new("kill")
            .arg("-9")
            .arg(pid.to_string())
            .status()
            .unwrap();
        tokio::time::timeout(Duration::from_secs(10), call).await
    });
    let error = result
        .expect("the call ends when its server dies")
        .unwrap()
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Dependency, "{error}");
    assert!(error.message().contains("MCP server 'slow'"), "{error}");
    let again =
        block_on(agent.call_tool("slow.pid", json!({}))).expect("restarted at the next call");
    let new_pid: u32 = again.message.parse().unwrap();
    assert_ne!(new_pid, pid);
    let status = agent.host().mcp_servers("default");
    assert!(
        status[0]
            .last_error
            .as_deref()
            .unwrap_or_default()
            .contains("exited"),
        "{:?}",
        status[0].last_error
    );
    drop(agent);
    wait_until(
        "the server is shut down with its host",
        Duration::from_secs(10),
        || gone(new_pid),
    );
}

#[test]
fn a_timeout_cancels_the_request_on_the_server() {
    let root = TestRoot::new();
    let marker = root.path().join("marker");
    root.write(
        "usr/secrets.env",
        format!("MARKER_PATH={}\n", marker.display()),
    );
    root.write(
        "usr/toolhost.toml",
        "[tools.\"slow.sleep\"]\ntimeout_seconds = 1\n",
    );
    servers(&root, "usr/mcp.json", json!({"slow": slow(&root)}));
    let (agent, _) = ready_agent(&root, "default");
    let error = block_on(agent.call_tool("slow.sleep", json!({"seconds": 20}))).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Timeout, "{error}");
    wait_until(
        "notifications/cancelled reaches the server",
        Duration::from_secs(10),
        || std::fs::read_to_string(&marker).is_ok_and(|m| m == "cancelled"),
    );
    // The server is still usable.
    let pid = block_on(agent.call_tool("slow.pid", json!({}))).unwrap();
    assert!(pid.message.parse::<u32>().is_ok());
}

#[test]
fn tools_list_changed_refreshes_the_servers_tools() {
    let root = TestRoot::new();
    root.write("usr/secrets.env", "MARKER_PATH=/dev/null\n");
    servers(&root, "usr/mcp.json", json!({"slow": slow(&root)}));
    let (agent, _) = ready_agent(&root, "default");
    let names = || -> Vec<String> {
        let tools = agent.host().mcp_tools("default");
        tools.iter().map(|t| t.name().to_owned()).collect()
    };
    assert!(!names().contains(&"slow.extra".to_owned()));
    let grown = block_on(agent.call_tool("slow.grow", json!({}))).unwrap();
    assert_eq!(grown.message, "grown");
    // A tool added during a session is held back until approved, like a changed one.
    let host = agent.host();
    wait_until("the new tool is held back", Duration::from_secs(10), || {
        host.mcp_servers("default")[0]
            .changed
            .iter()
            .any(|c| c.tool == "extra")
    });
    assert!(!names().contains(&"slow.extra".to_owned()));
    let digest = toolhost::mcp::changes_digest(&host.mcp_servers("default")[0].changed);
    let approved = block_on(host.approve_mcp_tools("default", "slow", &digest, START));
    assert_eq!(approved.unwrap(), ["extra"]);
    wait_until("the new tool is listed", Duration::from_secs(10), || {
        names().contains(&"slow.extra".to_owned())
    });
    let extra = block_on(agent.call_tool("slow.extra", json!({}))).unwrap();
    assert_eq!(extra.message, "extra");
}

#[test]
fn a_stop_cancels_the_request_on_the_server() {
    let root = TestRoot::new();
    let marker = root.path().join("marker");
    root.write(
        "usr/secrets.env",
        format!("MARKER_PATH={}\n", marker.display()),
    );
    servers(&root, "usr/mcp.json", json!({"slow": slow(&root)}));
    let (agent, _) = ready_agent(&root, "default");
    let result = block_on(async {
        let call = spawn_call(&agent, "slow.sleep", json!({"seconds": 20}));
        tokio::time::sleep(Duration::from_millis(700)).await;
        agent.stop();
        tokio::time::timeout(Duration::from_secs(10), call).await
    });
    let error = result
        .expect("a stop ends the call at once")
        .unwrap()
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Intervention, "{error}");
    wait_until(
        "notifications/cancelled reaches the server",
        Duration::from_secs(10),
        || std::fs::read_to_string(&marker).is_ok_and(|m| m == "cancelled"),
    );
}

/// A server that writes its pid to `$PID_FILE`, serves, and then keeps running after the end
/// of its input (as some servers do).
const STUBBORN_SERVER: &str = r#"
import os, time
from mcp.server.mcpserver import MCPServer

with open(os.environ["PID_FILE"], "w") as f:
    f.write(str(os.getpid()))

app = MCPServer("stubborn")

@app.tool()
def wait(seconds: float) -> str:
    """Sleeps."""
    time.sleep(seconds)
    return "waited"

app.run("stdio")
while True:
    time.sleep(1)
"#;

/// A `toolhost call stubborn.wait` with `seconds`, its server started through `sh -c` when
/// `wrapped` (the server is then the host's grandchild); the host and the server's pid.
fn stubborn_call(root: &TestRoot, wrapped: bool, seconds: u32) -> (std::process::Child, u32) {
    let script = root.write("stubborn_server.py", STUBBORN_SERVER);
    let pid_file = root.path().join("server.pid");
    let _ = std::fs::remove_file(&pid_file);
    let python = peers::mcp_python();
    let server = match wrapped {
        // `; true` keeps sh from replacing itself with python.
        true => json!({
            "command": "sh",
            "args": ["-c", format!("'{}' '{}'; true", python.display(), script.display())],
            "env": {"PID_FILE": pid_file.to_str().unwrap()},
        }),
        false => json!({
            "command": python,
            "args": [script],
            "env": {"PID_FILE": pid_file.to_str().unwrap()},
        }),
    };
    servers(root, "usr/mcp.json", json!({"stubborn": server}));
    let host = std::process::Command::new(toolhost_tests::toolhost_bin())
        .arg("--root")
        .arg(root.path())
        .args(["call", "stubborn.wait", "--args"])
        .arg(format!("{{\"seconds\": {seconds}}}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("toolhost call");
    wait_until("the server has started", Duration::from_secs(60), || {
        std::fs::read_to_string(&pid_file).is_ok_and(|p| !p.is_empty())
    });
    let pid: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    (host, pid)
}

#[test]
#[cfg(target_os = "linux")] // the parent-death signal is Linux's
fn a_stdio_server_that_ignores_the_end_of_its_input_dies_with_a_host_killed_by_sigkill() {
    let root = TestRoot::new();
    for wrapped in [false, true] {
        let (mut host, pid) = stubborn_call(&root, wrapped, 600);
        std::thread::sleep(Duration::from_millis(500)); // the call is under way
        let running = host.try_wait().unwrap().is_none();
        assert!(running && !gone(pid), "the host and its server run");
        host.kill().expect("SIGKILL the host");
        host.wait().expect("reaped");
        wait_until(
            &format!("the server is gone once its host was killed (wrapped: {wrapped})"),
            Duration::from_secs(10),
            || gone(pid),
        );
    }
}

#[test]
#[cfg(target_os = "linux")] // process groups as the host uses them are tested on Linux
fn a_stdio_server_under_a_wrapper_that_ignores_the_end_of_its_input_ends_with_its_host() {
    let root = TestRoot::new();
    let (mut host, pid) = stubborn_call(&root, true, 0);
    let status = host.wait().expect("the call ends");
    assert!(status.success(), "{status:?}");
    wait_until(
        "the wrapped server is gone once its host ended",
        Duration::from_secs(10),
        || gone(pid),
    );
}
