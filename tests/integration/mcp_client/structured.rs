//! A result said twice (a text block and `structuredContent` with the same JSON or the same
//! text wrapped) reaches the model once: the filesystem server's file, server-everything's
//! structured content.

use serde_json::{json, Value};
use toolhost_tests::{block_on, peers, TestRoot};

use super::{everything, ready_agent, servers};

#[test]
fn a_file_read_through_the_filesystem_server_reaches_the_model_once() {
    let root = TestRoot::new();
    let files = root.path().join("files");
    std::fs::create_dir_all(&files).unwrap();
    let text: String = (1..=800)
        .map(|n| format!("line {n} of a file the model reads\n"))
        .collect();
    std::fs::write(files.join("big.txt"), &text).unwrap();
    let entry = peers::server_filesystem();
    servers(
        &root,
        "usr/mcp.json",
        json!({"fs": {"command": "node", "args": [entry, files]}}),
    );
    let (agent, _) = ready_agent(&root, "default");
    let path = files.join("big.txt");
    let read = block_on(agent.call_tool("fs.read_text_file", json!({"path": path}))).unwrap();
    // The structured content ({"content": text}) only wraps the text: the model gets the
    // file once, as it is.
    assert_eq!(read.message, text);
}

#[test]
fn server_everythings_structured_content_reaches_the_model_once() {
    let root = TestRoot::new();
    servers(&root, "usr/mcp.json", json!({"everything": everything()}));
    let (agent, _) = ready_agent(&root, "default");
    let weather = block_on(agent.call_tool(
        "everything.get-structured-content",
        json!({"location": "New York"}),
    ))
    .unwrap();
    let value: Value = serde_json::from_str(&weather.message)
        .unwrap_or_else(|e| panic!("one JSON value ({e}): {}", weather.message));
    assert!(value.get("temperature").is_some(), "{value}");
}
