//! The circuit breaker through its whole cycle with a short cool-down: open after failures in
//! a row, half-open after the cool-down, closed by a probe's success; each change of state is
//! a record in the audit. Real plugin (`fx-governed`), real loader.

use std::time::Duration;

use serde_json::{json, Value};
use toolhost::ErrorKind;
use toolhost_tests::{block_on, Fixture, TestRoot};

#[test]
fn the_breaker_goes_open_half_open_closed_and_each_change_is_audited() {
    let root = TestRoot::new();
    root.tool("usr", "governed", Fixture::Governed);
    root.write(
        "usr/toolhost.toml",
        "[breaker]\nfailures = 2\ncooldown_seconds = 0.3\nhalf_open_calls = 1\n",
    );
    let (agent, _) = root.agent("default");
    for key in ["a", "b"] {
        let args = json!({"city": "x", "key": key, "fail_times": 100, "kind": "dependency"});
        let e = block_on(agent.call_tool("governed:flaky", args)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Dependency, "{e}");
    }
    let e = block_on(agent.call_tool("governed", json!({"city": "x"}))).unwrap_err();
    assert!(e.message().contains("is unavailable until"), "{e}");
    std::thread::sleep(Duration::from_millis(400));
    block_on(agent.call_tool("governed", json!({"city": "x"}))).unwrap();
    let found = agent.host().resolve("default", "governed").found.clone();
    assert_eq!(found.unwrap().handle.breaker_state().name(), "closed");

    let log = std::fs::read_to_string(root.path().join("usr/audit/audit.jsonl")).unwrap();
    let moves: Vec<(String, String, String)> = log
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["type"] == "breaker")
        .map(|r| {
            assert_eq!(r["tool"], "governed");
            let text = |k: &str| r[k].as_str().unwrap().to_owned();
            (text("from"), text("to"), text("reason"))
        })
        .collect();
    let states: Vec<(&str, &str)> = moves
        .iter()
        .map(|(from, to, _)| (from.as_str(), to.as_str()))
        .collect();
    assert_eq!(
        states,
        [
            ("closed", "open"),
            ("open", "half_open"),
            ("half_open", "closed")
        ],
        "{log}"
    );
    assert_eq!(moves[0].2, "2 failures in a row");
    let notes: Vec<String> = agent
        .log()
        .into_iter()
        .map(|i| i.heading.into_inner())
        .collect();
    assert!(
        notes.contains(&"Circuit breaker of tool 'governed': closed -> open".to_owned()),
        "{notes:?}"
    );
}
