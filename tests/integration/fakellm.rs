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

/// Rules for the model points, the tool answer bound and vision, each on its own model.
const MODEL_RULES: &str = r#"
rules:
  - name: prompt-changed
    when: {model_matches: "fake-prompt", messages_contain: "[changed by util_model_call_before]"}
    respond: {content: '{"thoughts": ["seen"], "headline": "Answering", "tool_name": "response", "tool_args": {"text": "The prompt was changed."}}'}
  - name: prompt-unchanged
    when: {model_matches: "fake-prompt"}
    respond: {content: '{"thoughts": ["seen"], "headline": "Answering", "tool_name": "response", "tool_args": {"text": "The prompt was NOT changed."}}'}
  - name: big-call
    when: {model_matches: "fake-big", turn: 1}
    respond: {content: '{"thoughts": ["a lot"], "headline": "Echoing", "tool_name": "echo:big", "tool_args": {"bytes": 1000000}}'}
  - name: big-cut
    when: {model_matches: "fake-big", messages_contain: "to fit the model's context"}
    respond: {content: '{"thoughts": ["cut"], "headline": "Answering", "tool_name": "response", "tool_args": {"text": "The answer was cut."}}'}
  - name: big-whole
    when: {model_matches: "fake-big"}
    respond: {content: '{"thoughts": ["whole"], "headline": "Answering", "tool_name": "response", "tool_args": {"text": "The answer was NOT cut."}}'}
  - name: image-call
    when: {model_matches: "fake-vision", turn: 1}
    respond: {content: '{"thoughts": ["look"], "headline": "Looking", "tool_name": "test_image_content", "tool_args": {}}'}
  - name: image-seen
    when: {model_matches: "fake-vision", messages_contain: "[image: image/png"}
    respond: {content: '{"thoughts": ["red"], "headline": "Answering", "tool_name": "response", "tool_args": {"text": "A red pixel."}}'}
  - name: image-missed
    when: {model_matches: "fake-vision"}
    respond: {content: '{"thoughts": ["?"], "headline": "Answering", "tool_name": "response", "tool_args": {"text": "No image."}}'}
"#;

/// `toolhost chat --profile P --model M` with one message; the answer and standard error.
fn chat_as(root: &TestRoot, profile: &str, model: &str, message: &str) -> (String, String) {
    let out = std::process::Command::new(toolhost_tests::toolhost_bin())
        .arg("--root")
        .arg(root.path())
        .args(["chat", "--profile", profile, "--model", model])
        .env("NO_COLOR", "1")
        .stdin(std::fs::File::open(root.write("line.txt", format!("{message}\n"))).unwrap())
        .output()
        .expect("run toolhost chat");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    (String::from_utf8_lossy(&out.stdout).into_owned(), stderr)
}

/// The one session folder under the root.
fn session_dir(root: &TestRoot) -> std::path::PathBuf {
    let sessions = root.path().join("usr/sessions");
    let mut dirs: Vec<_> = std::fs::read_dir(sessions).unwrap().flatten().collect();
    assert_eq!(dirs.len(), 1);
    dirs.pop().unwrap().path()
}

fn model_root(server: &Fakellm, name: &str, extra: &str) -> TestRoot {
    let root = TestRoot::new();
    root.tool("core", "response", Fixture::Response);
    root.tool("usr", "echo", Fixture::Echo);
    root.write(
        "usr/models.toml",
        format!(
            "[models.{name}]\nbase_url = \"{}\"\nmodel = \"fake-{name}\"\n{extra}\n",
            server.url()
        ),
    );
    root
}

#[test]
fn an_extension_at_util_model_call_before_changes_what_fakellm_is_sent() {
    let dir = TestRoot::new();
    let server = Fakellm::start(MODEL_RULES, dir.path());
    let root = model_root(&server, "prompt", "");
    let (answer, log) = chat_as(&root, "default", "prompt", "Hello.");
    assert_eq!(answer, "The prompt was NOT changed.\n", "{log}");
    let root = model_root(&server, "prompt", "");
    let point = "util_model_call_before";
    root.extension("usr", point, "_50_model", Fixture::ModelExt);
    let (answer, log) = chat_as(&root, "default", "prompt", "Hello again.");
    assert_eq!(answer, "The prompt was changed.\n", "{log}");
    // The change was for the request only: the history keeps the user's words.
    let history = std::fs::read_to_string(session_dir(&root).join("history.jsonl")).unwrap();
    assert!(history.contains("Hello again."), "{history}");
    assert!(!history.contains("util_model_call_before"), "{history}");
}

#[test]
fn a_runaway_tool_answer_is_cut_to_the_context_and_the_chat_goes_on() {
    let dir = TestRoot::new();
    let server = Fakellm::start(MODEL_RULES, dir.path());
    let root = model_root(&server, "big", "context_tokens = 4096");
    let (answer, log) = chat_as(&root, "default", "big", "Echo a megabyte.");
    assert_eq!(answer, "The answer was cut.\n", "{log}");
    let outputs = session_dir(&root).join("outputs");
    let saved: Vec<_> = std::fs::read_dir(outputs).unwrap().flatten().collect();
    assert_eq!(saved.len(), 1);
    assert_eq!(saved[0].metadata().unwrap().len(), 1_000_000);
}

#[test]
fn a_tools_image_reaches_a_vision_model_and_is_kept_as_a_file() {
    let dir = TestRoot::new();
    let server = Fakellm::start(MODEL_RULES, dir.path());
    let root = model_root(&server, "vision", "vision = true");
    root.tool(
        "plugins/conformance/agents/conformance",
        "test_image_content",
        Fixture::ConformanceTestImageContent,
    );
    let manifest = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../plugins/conformance/toolhost-plugin.toml"
    );
    root.write(
        "plugins/conformance/toolhost-plugin.toml",
        std::fs::read_to_string(manifest).unwrap(),
    );
    // fakellm reads the text part of the message whose content is parts (text, image).
    let (answer, log) = chat_as(&root, "conformance", "vision", "Show me an image.");
    assert_eq!(answer, "A red pixel.\n", "{log}");
    let session = session_dir(&root);
    let history = std::fs::read_to_string(session.join("history.jsonl")).unwrap();
    let line = history.lines().find(|l| l.contains("\"images\"")).unwrap();
    let entry: serde_json::Value = serde_json::from_str(line).unwrap();
    let file = entry["images"][0]["file"].as_str().unwrap();
    assert_eq!(entry["images"][0]["mime_type"], "image/png");
    let bytes = std::fs::read(session.join(file)).unwrap();
    assert!(bytes.starts_with(b"\x89PNG"), "{file}");
    assert!(
        !line.contains("iVBOR"),
        "no base64 PNG in the session: {line}"
    );
}
