//! A hostile MCP server cannot make the client do unbounded work: a storm of progress
//! notifications reaches the call at most `PROGRESS_PER_SECOND` times a second (the latest
//! replacing the rest), a storm of `notifications/tools/list_changed` costs one re-list per
//! debounce window, and a 15 MB answer goes on cut to `max_output` with a note. The server
//! is a plain Python script (no SDK), so it sends exactly what it is told to.

use serde_json::json;
use toolhost::output::OutputKind;
use toolhost_tests::{block_on, TestRoot};

use super::{ready_agent, servers};

/// How many of each notification the storm sends.
const STORM: usize = 5000;

/// `storm` sends [`STORM`] progress notifications for its call and as many
/// `tools/list_changed`, then answers; `lists` says how many `tools/list` requests came;
/// `big` answers 15 MB of text.
const SETUP: &str = r#"
lists = 0
schema = {"type": "object"}
"#;

/// The requests' answers of the storm server (see [`SETUP`]).
const ANSWER: &str = r#"
    global lists
    if method == "initialize":
        return greeting(msg, "storm", {"tools": {"listChanged": True}})
    if method == "tools/list":
        lists += 1
        return {"tools": [{"name": n, "inputSchema": schema} for n in ("storm", "lists", "big")]}
    if method != "tools/call":
        return {}
    name = msg["params"]["name"]
    if name == "storm":
        token = msg["params"].get("_meta", {}).get("progressToken")
        for i in range(int(sys.argv[1])):
            send({"jsonrpc": "2.0", "method": "notifications/progress",
                  "params": {"progressToken": token, "progress": i + 1}})
            send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        text = "stormed"
    elif name == "lists":
        text = str(lists)
    else:
        text = "y" * 15000000
    return {"content": [{"type": "text", "text": text}]}
"#;

fn root() -> TestRoot {
    let root = TestRoot::new();
    let script = root.write("storm.py", super::python_server(SETUP, ANSWER));
    let storm = json!({"command": "python3", "args": [script, STORM.to_string()]});
    servers(&root, "usr/mcp.json", json!({ "storm": storm }));
    root
}

#[test]
fn storms_of_progress_and_list_changed_are_coalesced() {
    let root = root();
    let (agent, output) = ready_agent(&root, "default");
    let stormed = block_on(agent.call_tool("storm.storm", json!({}))).unwrap();
    assert_eq!(stormed.message, "stormed");
    let shown = output
        .lines()
        .into_iter()
        .filter(|(kind, _)| *kind == OutputKind::Progress)
        .count();
    // 10 a second: all 5000 would only be shown if the storm lasted 500 s.
    assert!(
        (1..STORM / 10).contains(&shown),
        "{shown} of {STORM} progress notifications were shown"
    );
    // The re-lists the storm caused (one per 250 ms window): wait for the first.
    let lists = || {
        let answer = block_on(agent.call_tool("storm.lists", json!({}))).unwrap();
        answer.message.parse::<usize>().unwrap()
    };
    toolhost_tests::wait_for("the tool list read again after the storm", || {
        match lists() {
            n if n > 1 => Ok(()),
            n => Err(n),
        }
    });
    let count = lists();
    assert!(
        count < STORM / 10,
        "{count} tools/list requests for {STORM} notifications"
    );
}

#[test]
fn a_15_mb_answer_goes_on_cut_to_max_output() {
    let root = root();
    let (agent, _) = ready_agent(&root, "default");
    let big = block_on(agent.call_tool("storm.big", json!({}))).unwrap();
    assert!(big.message.starts_with("yyyy"));
    assert!(big.message.len() < 70_000, "{}", big.message.len());
    assert!(
        big.message.contains("more bytes cut (of 15000000)"),
        "{}",
        &big.message[big.message.len() - 200..]
    );
}
