//! `usr/mcp.json` live-reloaded by a watching host: a server added starts and its tools
//! appear, one removed stops and its tools leave, a mistake is reported, each change one
//! event (printed like a plugin reload).

use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use serde_json::json;
use toolhost::mcp::McpReload;
use toolhost::ReloadEvent;
use toolhost_tests::{block_on, TestRoot};

use super::{everything, servers, time, START};

/// The next `McpServers` event, within 20 s.
fn next_reload(events: &Receiver<ReloadEvent>) -> McpReload {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match events.recv_timeout(left) {
            Ok(ReloadEvent::McpServers(reload)) => return reload,
            Ok(_) => {}
            Err(e) => panic!("no MCP reload event: {e}"),
        }
    }
}

fn tool_names(host: &toolhost::Host) -> Vec<String> {
    host.mcp_tools("default")
        .iter()
        .map(|t| t.name().to_owned())
        .collect()
}

#[test]
fn mcp_json_is_live_reloaded_servers_start_and_stop_and_their_tools_follow() {
    let root = TestRoot::new();
    servers(&root, "usr/mcp.json", json!({"time": time()}));
    let host = root.host();
    let events = host.subscribe();
    let _watcher = host.watch().expect("watch");
    block_on(host.wait_for_mcp("default", START));
    assert!(tool_names(&host).contains(&"time.get_current_time".to_owned()));

    servers(&root, "usr/mcp.json", json!({"everything": everything()}));
    let reload = next_reload(&events);
    assert_eq!(reload.started, ["everything"], "{reload:?}");
    assert_eq!(reload.stopped, ["time"], "{reload:?}");
    let line = ReloadEvent::McpServers(reload)
        .report(root.path())
        .to_string();
    assert_eq!(
        line,
        "MCP servers of profile 'default' (mcp.json): started everything; stopped time"
    );
    block_on(host.wait_for_mcp("default", START));
    let names = tool_names(&host);
    assert!(names.contains(&"everything.echo".to_owned()), "{names:?}");
    assert!(names.iter().all(|n| !n.starts_with("time.")), "{names:?}");

    // A changed entry restarts the server; a mistake is reported with its line.
    let mut changed = everything();
    changed["env"] = json!({"MARK": "2"});
    servers(&root, "usr/mcp.json", json!({"everything": changed}));
    let reload = next_reload(&events);
    assert_eq!(reload.restarted, ["everything"], "{reload:?}");
    root.write(
        "usr/mcp.json",
        "{\"mcpServers\": {\n\"everything\": {\"command\": \"node\", \"arg\": []}}}",
    );
    let reload = next_reload(&events);
    assert_eq!(reload.stopped, ["everything"], "{reload:?}");
    assert_eq!(
        reload.errors,
        ["usr/mcp.json:2: mcpServers.everything: unknown key \"arg\" (did you mean \"args\"?)"]
    );
    assert!(tool_names(&host).is_empty());
}
