//! Deadlines hold wherever a call runs: inside `parallel` (the other calls finish normally)
//! and in `toolhost watch` (the prompt comes back). Real plugin (`fx-governed`, 1 s deadline).

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;
use toolhost_tests::{block_on, toolhost_bin, Fixture, TestRoot};

fn root() -> TestRoot {
    let root = TestRoot::new();
    root.tool("core", "response", Fixture::Response);
    root.tool("usr", "governed", Fixture::Governed);
    root
}

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
    let mut child = Command::new(toolhost_bin())
        .arg("--root")
        .arg(root.path())
        .arg("watch")
        .env("NO_COLOR", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let (tx, lines) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let next = |what: &str, pred: &dyn Fn(&str) -> bool| loop {
        match lines.recv_timeout(Duration::from_secs(20)) {
            Ok(line) if pred(&line) => return line,
            Ok(_) => {}
            Err(_) => panic!("no line {what}"),
        }
    };
    next("announcing the tools", &|l| l.starts_with("watching "));
    writeln!(stdin, r#"governed {{"city": "warm"}}"#).unwrap();
    next("answering the warm-up", &|l| l.contains("warm"));
    let started = Instant::now();
    writeln!(stdin, r#"governed:spin {{"city": "x", "ms": 4000}}"#).unwrap();
    let line = next("with the timeout", &|l| l.starts_with("error:"));
    let took = started.elapsed();
    assert!(line.contains("did not answer within 1 s"), "{line}");
    assert!(
        took < Duration::from_millis(1500),
        "came back after {took:?}"
    );
    writeln!(stdin, r#"governed {{"city": "after"}}"#).unwrap();
    next("answering the next call", &|l| l.contains("after"));
    writeln!(stdin, "/quit").unwrap();
    let _ = child.wait();
}
