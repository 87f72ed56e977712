//! `toolhost chat` against a real peer: `fakellm` 0.3.5 (PyPI), an OpenAI-compatible mock
//! server with YAML rules, SSE streaming, native `tool_calls` streamed in pieces, and injected
//! 429s. Installed by the test into `target/peers/` on first use.

use toolhost_tests::peers::Fakellm;
use toolhost_tests::{Fixture, TestRoot};

/// Rules per conversation (fakellm counts turns per first user message). fakellm answers a
/// streamed request with a stream whatever the rule's status, so the 429 is injected into the
/// JSON-protocol session, which does not stream; the native session streams its tool call.
const RULES: &str = r#"
rules:
  - name: rate-limit-first
    when: {turn: 1, header.x-test-scenario: rate_limit}
    respond: {status: 429, error: "Rate limit reached, try again"}
  - name: native-answer
    when: {model_matches: "fake-native", tool_result_contains: "Ada"}
    respond: {content: "I greeted Ada natively."}
  - name: native-call
    when: {model_matches: "fake-native", tools_include: echo}
    respond:
      tool_calls:
        - name: echo
          arguments: {who: "Ada", greeting: "hello"}
  - name: json-answer
    when: {model_matches: "fake-json", turn: 3}
    respond: {content: '{"thoughts": ["done"], "headline": "Answering", "tool_name": "response", "tool_args": {"text": "Bob was echoed the JSON way."}}'}
  - name: json-call
    when: {model_matches: "fake-json", turn: 2}
    respond: {content: '{"thoughts": ["echo first"], "headline": "Echoing Bob", "tool_name": "echo", "tool_args": {"who": "Bob"}}'}
"#;

fn chat(root: &TestRoot, model: &str, message: &str) -> (String, String) {
    let mut child = std::process::Command::new(toolhost_tests::toolhost_bin())
        .arg("--root")
        .arg(root.path())
        .args(["chat", "--model", model])
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start toolhost chat");
    use std::io::Write;
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "{message}").unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    (String::from_utf8_lossy(&out.stdout).into_owned(), stderr)
}

#[test]
fn a_chat_with_fakellm_survives_a_429_and_calls_tools_in_both_protocols() {
    let root = TestRoot::new();
    root.tool("core", "response", Fixture::Response);
    root.tool("usr", "echo", Fixture::Echo);
    let server = Fakellm::start(RULES, root.path());
    let model = |name: &str, extra: &str| {
        format!(
            "[models.{name}]\nbase_url = \"{}\"\nmodel = \"fake-{name}\"\ntool_protocol = \
             \"{name}\"\nretry_initial_ms = 50\n{extra}\n",
            server.url()
        )
    };
    let json = "stream = false\nheaders = { x-test-scenario = \"rate_limit\" }";
    root.write(
        "usr/models.toml",
        model("native", "") + &model("json", json),
    );

    let (answer, log) = chat(&root, "native", "Greet Ada, natively.");
    assert_eq!(answer, "I greeted Ada natively.\n", "{log}");
    assert!(
        log.contains("Using tool 'echo'") && log.contains("Ada"),
        "{log}"
    );

    let (answer, log) = chat(&root, "json", "Echo Bob, the JSON way.");
    assert_eq!(answer, "Bob was echoed the JSON way.\n", "{log}");
    assert!(
        log.contains("429 Too Many Requests: Rate limit reached, try again; rate limited"),
        "{log}"
    );
    assert!(log.contains("retrying in"), "{log}");
    assert!(
        log.contains("Using tool 'echo'") && log.contains("Bob"),
        "{log}"
    );
    assert!(log.contains("usage: "), "{log}");
}
