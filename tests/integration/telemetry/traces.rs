//! Spans exported over OTLP: a client's `traceparent` → the `tools/call` span of `serve-mcp`
//! → `execute_tool {tool}` → its steps, with the GenAI attribute names; and no secret in any
//! attribute.

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::{Receiver, Served};
use crate::mcp_server::root;

/// The secret of `mcp_server::root()`'s `API_KEY`.
const SECRET: &str = "sk-live-4f9a8b7c6d5e";
const TRACE_ID: &str = "0af7651916cd43dd8448eb211c80319c";
const CLIENT_SPAN: &str = "b7ad6b7169203331";

fn named<'a>(spans: &'a [Value], name: &str) -> Vec<&'a Value> {
    spans.iter().filter(|s| s["name"] == name).collect()
}

fn children<'a>(spans: &'a [Value], parent: &Value) -> Vec<&'a Value> {
    let id = &parent["span_id"];
    spans
        .iter()
        .filter(|s| s["parent_span_id"] == *id)
        .collect()
}

#[test]
fn a_served_call_is_traced_from_the_clients_traceparent_to_the_plugins_execute() {
    let root = root();
    // A real root's extensions, whose points are steps of the call.
    root.secret_extensions();
    let receiver = Receiver::start(root.path());
    let env = receiver.env("toolhost-under-test");
    // `echo` is not a `read` tool: a listener without a token serves it only when told.
    let server = Served::start(&root, &["--allow-writes-without-token"], &env);
    let traceparent = format!("00-{TRACE_ID}-{CLIENT_SPAN}-01");
    // Secrets pushed through every attribute a client or a tool can reach: the call id, the
    // error message, and a tool name.
    let failed = server.call(
        &format!("call-{SECRET}"),
        "echo:fail",
        json!({"message": format!("the key is {SECRET}")}),
        json!({"traceparent": traceparent}),
    );
    assert_eq!(failed["isError"], true, "{failed}");
    // A tool not served: the spec's protocol error, with a request span and no call span.
    server.call("named", SECRET, json!({}), json!({}));
    let ok = server.call("7", "echo", json!({"x": 1}), json!({}));
    assert_eq!(ok["isError"], false, "{ok}");

    let spans = receiver.wait_for(|spans| {
        named(spans, "tools/call echo").len() == 1
            && named(spans, "tools/call echo:fail").len() == 1
            && spans.iter().filter(|s| s["kind"] == 2).count() == 3
            && spans
                .iter()
                .filter(|s| s["attributes"]["gen_ai.operation.name"] == "execute_tool")
                .count()
                == 2
    });

    // The request's span: a server span, child of the client's.
    let request = named(&spans, "tools/call echo:fail")[0];
    assert_eq!(request["trace_id"], TRACE_ID, "{request:#}");
    assert_eq!(request["parent_span_id"], CLIENT_SPAN, "{request:#}");
    assert_eq!(request["kind"], 2, "SPAN_KIND_SERVER: {request:#}");
    assert_eq!(request["attributes"]["mcp.method.name"], "tools/call");
    assert_eq!(request["service"], "toolhost-under-test");

    // The tool call's span, its child, with the GenAI attributes and the call's own.
    let calls = children(&spans, request);
    assert_eq!(calls.len(), 1, "{calls:#?}");
    let call = calls[0];
    assert_eq!(call["name"], "execute_tool echo");
    assert_eq!(call["trace_id"], TRACE_ID);
    let attributes = &call["attributes"];
    assert_eq!(attributes["gen_ai.operation.name"], "execute_tool");
    assert_eq!(attributes["gen_ai.tool.name"], "echo");
    assert_eq!(attributes["gen_ai.tool.call.id"], "call-§§secret(API_KEY)");
    assert_eq!(attributes["toolhost.tool.method"], "fail");
    assert_eq!(attributes["toolhost.tool.layer"], "usr");
    assert_eq!(attributes["toolhost.tool.risk"], "write");
    assert_eq!(attributes["toolhost.tool.isolated"], false);
    assert_eq!(attributes["toolhost.call.outcome"], "error");
    assert_eq!(attributes["error.type"], "business");
    assert_eq!(call["status"], 2, "STATUS_CODE_ERROR: {call:#}");
    assert_eq!(call["status_message"], "the key is §§secret(API_KEY)");
    let library = std::fs::read(root.path().join("usr/tools/echo.so")).expect("echo.so");
    let sha256 = hex::encode(Sha256::digest(&library));
    assert_eq!(attributes["toolhost.library.sha256"], sha256.as_str());

    // Its steps; the extension points' too (a point without extensions has no span). The
    // failed call never reached `tool_execute_after`.
    let steps = |call: &Value| -> Vec<String> {
        children(&spans, call)
            .iter()
            .map(|s| s["name"].as_str().expect("a name").to_owned())
            .collect()
    };
    let failed_steps = steps(call);
    for step in ["tool_execute_before", "validation", "approval", "execute"] {
        assert!(
            failed_steps.iter().any(|s| s == step),
            "{step} missing from {failed_steps:?}"
        );
    }
    assert!(
        !failed_steps.iter().any(|s| s == "tool_execute_after"),
        "{failed_steps:?}"
    );
    let execute = named(&spans, "execute")
        .into_iter()
        .find(|s| s["parent_span_id"] == call["span_id"])
        .expect("execute");
    assert_eq!(execute["attributes"]["toolhost.attempt"], 1, "an integer");

    // Without a traceparent, a trace of its own; a successful call.
    let request = named(&spans, "tools/call echo")[0];
    assert_eq!(request["parent_span_id"], "");
    assert_ne!(request["trace_id"], TRACE_ID);
    let call = children(&spans, request)[0];
    assert_eq!(call["attributes"]["toolhost.call.outcome"], "ok");
    assert_eq!(call["attributes"]["gen_ai.tool.call.id"], "7");
    assert!(call["attributes"].get("error.type").is_none(), "{call:#}");
    let ok_steps = steps(call);
    for step in ["tool_execute_before", "execute", "tool_execute_after"] {
        assert!(
            ok_steps.iter().any(|s| s == step),
            "{step} missing from {ok_steps:?}"
        );
    }

    // The secret-named tool: its name masked in the request span's name; no call ran.
    let masked = named(&spans, "tools/call §§secret(API_KEY)");
    assert_eq!(masked.len(), 1, "{spans:#?}");
    assert!(children(&spans, masked[0]).is_empty(), "{spans:#?}");

    // Not one byte of the secret left the host, in any attribute, event or name.
    let sent = std::fs::read(&receiver.raw).expect("the bodies received");
    let found = sent.windows(SECRET.len()).any(|w| w == SECRET.as_bytes());
    assert!(!found, "the secret was exported");
    let text = serde_json::to_string(&spans).expect("spans");
    assert!(
        text.contains("§§secret(API_KEY)"),
        "the masked form was exported"
    );
}
