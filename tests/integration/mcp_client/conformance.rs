//! The official conformance suite's client scenarios against this client, through a driver
//! the test owns: a shell script the suite runs with its test server's URL as the last
//! argument, which points `usr/mcp.json` at that URL and runs the `toolhost` command the
//! scenario needs (`MCP_CONFORMANCE_SCENARIO` names it).
//!
//! Not run here, with the reason: the `auth/*` scenarios (this client has no OAuth yet: it
//! sends a fixed bearer header at most), and those the pinned suite marks for other protocol
//! versions than 2025-06-18 and 2025-11-25 (`auth/2025-03-26-*`: 2025-03-26; `auth/resource-
//! mismatch`, `auth/offline-access-*`: draft; `auth/client-credentials-*`,
//! `auth/cross-app-access-complete-flow`: extension).

use std::process::Command;

use serde_json::Value;
use toolhost_tests::{peers, TestRoot};

/// The driver: `$1`... the suite's, the last one the URL.
const DRIVER: &str = r#"#!/bin/sh
for url; do :; done
mkdir -p "$ROOT/usr"
printf '{"mcpServers": {"conf": {"url": "%s"}}}' "$url" > "$ROOT/usr/mcp.json"
case "$MCP_CONFORMANCE_SCENARIO" in
  initialize) exec "$TOOLHOST" --root "$ROOT" mcp ;;
  tools_call) exec "$TOOLHOST" --root "$ROOT" call conf.add_numbers --args '{"a": 2, "b": 3}' ;;
  elicitation-sep1034-client-defaults)
    exec "$TOOLHOST" --root "$ROOT" $YES call conf.test_client_elicitation_defaults ;;
  sse-retry) exec "$TOOLHOST" --root "$ROOT" call conf.test_reconnection ;;
  *) echo "no step for scenario $MCP_CONFORMANCE_SCENARIO" >&2; exit 2 ;;
esac
"#;

/// Runs one client scenario; each check's status and name, and the suite's report. `yes`:
/// the driver's command gets `--yes`.
fn scenario(name: &str, yes: bool) -> (Vec<(String, String)>, String) {
    let (node, suite) = (peers::node22(), peers::conformance());
    let root = TestRoot::new();
    let driver = root.write("driver.sh", DRIVER);
    let out_dir = root.path().join("results");
    let out = Command::new(node)
        .arg(suite)
        .args(["client", "--scenario", name, "--command"])
        .arg(format!("sh {}", driver.display()))
        .arg("-o")
        .arg(&out_dir)
        .env("ROOT", root.path())
        .env("TOOLHOST", toolhost_tests::toolhost_bin())
        .env("NO_COLOR", "1")
        .env("YES", if yes { "--yes" } else { "" })
        .output()
        .expect("the conformance suite runs");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let checks = std::fs::read_dir(&out_dir)
        .unwrap_or_else(|e| panic!("no results ({e}): {report}"))
        .flatten()
        .map(|d| d.path().join("checks.json"))
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("no checks.json: {report}"));
    // The client's own standard error, which the suite prints only when it fails.
    let client_stderr = std::fs::read_to_string(checks.with_file_name("stderr.txt"));
    let report = format!(
        "{report}\nclient stderr:\n{}",
        client_stderr.unwrap_or_default()
    );
    let checks: Vec<Value> = serde_json::from_slice(&std::fs::read(checks).unwrap()).unwrap();
    let checks = checks
        .iter()
        .map(|c| {
            let status = c["status"].as_str().unwrap_or_default().to_owned();
            let what = format!("{}: {}", c["id"], c["errorMessage"].as_str().unwrap_or(""));
            (status, what)
        })
        .collect();
    (checks, report)
}

/// Asserts that the scenario passed: some check succeeded and none failed or warned.
fn passes(name: &str) {
    let (checks, report) = scenario(name, true);
    let bad: Vec<&(String, String)> = checks
        .iter()
        .filter(|(status, _)| status == "FAILURE" || status == "WARNING")
        .collect();
    assert!(bad.is_empty(), "{name}: {bad:?}\n{report}");
    assert!(
        checks.iter().any(|(status, _)| status == "SUCCESS"),
        "{name}: no check succeeded\n{report}"
    );
}

#[test]
fn conformance_initialize() {
    passes("initialize");
}

#[test]
fn conformance_tools_call() {
    passes("tools_call");
}

#[test]
fn conformance_sse_retry() {
    passes("sse-retry");
}

/// SEP-1034: the server's form has a default for every field and asks for none; `--yes`
/// sends it with the defaults applied.
#[test]
fn conformance_elicitation_sep1034_client_defaults() {
    passes("elicitation-sep1034-client-defaults");
}

/// Without `--yes` and off a terminal no one can answer the form: it is declined, and the
/// reason is logged.
#[test]
fn a_form_no_one_can_answer_is_declined_with_the_reason() {
    let (checks, report) = scenario("elicitation-sep1034-client-defaults", false);
    assert!(
        checks.iter().any(|(status, what)| status == "FAILURE"
            && what.contains("Expected action 'accept', got 'decline'")),
        "{checks:?}\n{report}"
    );
    assert!(
        report.contains("declined, no one can answer here (not on a terminal; --yes sends a form whose required fields all have defaults)"),
        "{report}"
    );
}
