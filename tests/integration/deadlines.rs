//! Deadlines hold wherever a call runs: inside `parallel` (the other calls finish normally)
//! and in `toolhost watch` (the prompt comes back). Real plugin (`fx-governed`, 1 s deadline).

use std::time::{Duration, Instant};

use serde_json::json;
use toolhost_tests::block_on;

use super::governance::root;
use super::watch_mode::WatchProcess;

#[test]
fn a_spinning_call_inside_parallel_times_out_and_the_others_finish() {
    let root = root();
    let (agent, _) = root.agent("default");
    block_on(agent.call_tool("governed", json!({"city": "warm"}))).unwrap(); // loaded
    let started = Instant::now();
    let calls = json!({"calls": [
        {"tool_name": "governed:spin", "tool_args": {"city": "x", "ms": 3000}},
        {"tool_name": "governed", "tool_args": {"city": "y"}},
    ]});
    let response = block_on(agent.call_tool("parallel", calls)).unwrap();
    let took = started.elapsed();
    assert!(
        took < Duration::from_millis(1500),
        "came back after {took:?}"
    );
    let results = &response.additional.unwrap()["results"];
    assert_eq!(results[0]["state"], "timeout", "{results}");
    assert_eq!(results[0]["error"]["kind"], "timeout", "{results}");
    assert_eq!(results[1]["state"], "success", "{results}");
}

#[test]
fn watch_gets_its_prompt_back_at_the_deadline() {
    let root = root();
    let mut watch = WatchProcess::start(&root);
    watch.expect_line("announcing the tools", |l| l.starts_with("watching "));
    watch.send(r#"governed {"city": "warm"}"#);
    watch.expect_line("answering the warm-up", |l| l.contains("warm"));
    let started = Instant::now();
    watch.send(r#"governed:spin {"city": "x", "ms": 4000}"#);
    let line = watch.expect_line("with the timeout", |l| l.starts_with("error:"));
    let took = started.elapsed();
    assert!(line.contains("did not answer within 1 s"), "{line}");
    assert!(
        took < Duration::from_millis(1500),
        "came back after {took:?}"
    );
    watch.send(r#"governed {"city": "after"}"#);
    watch.expect_line("answering the next call", |l| l.contains("after"));
}
