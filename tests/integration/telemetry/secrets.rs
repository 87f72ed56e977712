//! No secret reaches the OTLP receiver, whatever attribute it is pushed through, in a chat:
//! the model's name (`gen_ai.request.model`, the `chat {model}` span's name), the tool's
//! arguments, its error message (the status message), and the model's text; and the `chat`
//! span itself: the model asked for, the tokens used, and the `traceparent` header the model
//! server received pointing at it. The metrics exported at the end of `chat` are searched
//! too.

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::{json, Value};
use toolhost_tests::fake_llm::{text_reply, FakeLlm};
use toolhost_tests::{toolhost_bin, Fixture};

use super::Receiver;
use crate::mcp_server::root;

/// The secret of `mcp_server::root()`'s `API_KEY` (in its `usr/secrets.env`).
const SECRET: &str = "sk-live-4f9a8b7c6d5e";
const MASKED: &str = "§§secret(API_KEY)";

#[test]
fn secrets_pushed_through_every_attribute_of_a_chat_never_reach_the_receiver() {
    let root = root();
    root.tool("core", "response", Fixture::Response);
    let receiver = Receiver::start(root.path());
    let model = FakeLlm::start();
    let call = json!({"thoughts": [format!("the key is {SECRET}")], "tool_name": "echo:fail",
        "tool_args": {"kind": "dependency", "message": format!("refused with {SECRET}"), "key": SECRET}});
    model.push(text_reply(&call.to_string(), Some((12, 5))));
    let done = json!({"tool_name": "response", "tool_args": {"text": format!("done {SECRET}")}});
    model.push(text_reply(&done.to_string(), Some((30, 7))));
    root.write(
        "usr/models.toml",
        format!(
            "[models.fake]\nbase_url = \"{}\"\nmodel = \"fake-{SECRET}\"\n",
            model.url()
        ),
    );
    let mut child = Command::new(toolhost_bin())
        .arg("--root")
        .arg(root.path())
        .args(["chat", "--model", "fake"])
        .env(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            format!("http://127.0.0.1:{}", receiver.port),
        )
        .env("OTEL_BSP_SCHEDULE_DELAY", "50")
        .env("NO_COLOR", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("toolhost chat");
    writeln!(child.stdin.take().expect("stdin"), "Go.").expect("the message");
    let out = child.wait_with_output().expect("chat's end");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");

    let chat_name = format!("chat fake-{MASKED}");
    let spans = receiver.wait_for(|spans| {
        spans.iter().filter(|s| s["name"] == chat_name).count() == 2
            && spans.iter().any(|s| s["name"] == "execute_tool echo")
    });
    let chats: Vec<&Value> = spans.iter().filter(|s| s["name"] == chat_name).collect();
    let tokens: Vec<(&Value, &Value)> = chats
        .iter()
        .map(|s| {
            let a = &s["attributes"];
            (
                &a["gen_ai.usage.input_tokens"],
                &a["gen_ai.usage.output_tokens"],
            )
        })
        .collect();
    assert!(tokens.contains(&(&json!(12), &json!(5))), "{chats:#?}");
    assert!(tokens.contains(&(&json!(30), &json!(7))), "{chats:#?}");
    for chat in &chats {
        assert_eq!(chat["kind"], 3, "SPAN_KIND_CLIENT: {chat:#}");
        assert_eq!(chat["attributes"]["gen_ai.operation.name"], "chat");
        let requested = format!("fake-{MASKED}");
        assert_eq!(
            chat["attributes"]["gen_ai.request.model"],
            requested.as_str()
        );
    }
    // Each request to the model server carried the traceparent of its chat span.
    let sent: Vec<String> = model
        .requests()
        .iter()
        .filter_map(|r| {
            let (_, value) = r.headers.iter().find(|(name, _)| name == "traceparent")?;
            Some(value.clone())
        })
        .collect();
    assert_eq!(sent.len(), 2, "{sent:?}");
    for chat in &chats {
        let expected = format!(
            "00-{}-{}-01",
            chat["trace_id"].as_str().unwrap(),
            chat["span_id"].as_str().unwrap()
        );
        assert!(sent.contains(&expected), "{expected} not in {sent:?}");
    }
    // The failed call: its error message masked in the status.
    let call = spans
        .iter()
        .find(|s| s["name"] == "execute_tool echo")
        .expect("the call's span");
    assert_eq!(call["attributes"]["error.type"], "dependency");
    let status = call["status_message"].as_str().unwrap_or_default();
    assert_eq!(status, format!("refused with {MASKED}"), "{call:#}");

    // The metrics (on with the general endpoint, sent when `chat` ended): the tokens by
    // model, masked like every attribute; then every body is searched below.
    let requested = format!("fake-{MASKED}");
    let points = receiver.wait_for_metrics(|points| {
        points
            .iter()
            .any(|p| p["name"] == "gen_ai.client.token.usage")
            && points.iter().any(|p| p["name"] == "toolhost.tool.failures")
    });
    let input = points
        .iter()
        .rev()
        .find(|p| {
            p["name"] == "gen_ai.client.token.usage"
                && p["attributes"]["gen_ai.token.type"] == "input"
        })
        .expect("the input tokens");
    assert_eq!(
        input["attributes"]["gen_ai.request.model"],
        requested.as_str()
    );
    assert_eq!(input["sum"], 42.0, "12 + 30 input tokens: {input:#}");
    assert_eq!(input["count"], 2, "{input:#}");

    // Not one byte of the secret, in any form the masker knows, left the host.
    let bodies = std::fs::read(&receiver.raw).expect("the bodies received");
    for form in [
        SECRET.to_owned(),
        SECRET.to_uppercase(),
        SECRET.replace('-', "%2D"),
    ] {
        let found = bodies.windows(form.len()).any(|w| w == form.as_bytes());
        assert!(!found, "{form} was exported");
    }
}
