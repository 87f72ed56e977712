//! The trace context passed on across processes, decoded by the real OTLP receiver: a
//! client's `traceparent` → `serve-mcp`'s request span → `execute_tool echo` → its `execute`
//! step → the span the isolated worker timed for the plugin's `execute` → the `tools/call` span
//! of a second `serve-mcp` that the plugin called with the traceparent it read from its
//! `Context` (`_meta.traceparent`), and that server's own `execute_tool`; and the host's own
//! MCP client: a `tools/call` sent in a client span that the server's span continues.

use std::process::Command;

use serde_json::{json, Value};
use toolhost_tests::{toolhost_bin, TestRoot};

use super::{Receiver, Served};
use crate::mcp_server::root;

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN: &str = "00f067aa0ba902b7";

fn one<'a>(spans: &'a [Value], what: impl Fn(&Value) -> bool, name: &str) -> &'a Value {
    let found: Vec<&Value> = spans.iter().filter(|s| what(s)).collect();
    assert_eq!(found.len(), 1, "one {name} expected in {spans:#?}");
    found[0]
}

/// Whether a span is named `name` and comes from `service`.
fn named(service: &'static str, name: &'static str) -> impl Fn(&Value) -> bool {
    move |s: &Value| s["service"] == service && s["name"] == name
}

/// The spans received once one of each `(service, name)` of `expected` has arrived.
fn arrived(receiver: &Receiver, expected: &[(&'static str, &'static str)]) -> Vec<Value> {
    receiver.wait_for(|spans| {
        expected
            .iter()
            .all(|&(service, name)| spans.iter().any(named(service, name)))
    })
}

/// The spans of the trace `trace_id`.
fn in_trace(spans: &[Value], trace_id: &Value) -> Vec<Value> {
    spans
        .iter()
        .filter(|s| s["trace_id"] == *trace_id)
        .cloned()
        .collect()
}

/// The MCP server called: `serve-mcp` over a root of its own, exporting as `downstream`.
fn downstream(receiver: &Receiver) -> (TestRoot, Served) {
    let root = root();
    let env = receiver.env("downstream");
    let served = Served::start(&root, &["--allow-writes-without-token"], &env);
    (root, served)
}

/// The client's trace: a `tools/call` of `echo:forward` (which calls `echo` of a downstream
/// `serve-mcp` with the traceparent its `Context` gives) on a `serve-mcp` exporting as
/// `upstream`, whose root's `usr/toolhost.toml` is `toml`. The plugin's answer (what it passed
/// on, and the downstream's answer) and the servers with their roots, to keep until the spans
/// have arrived.
fn forward_through(receiver: &Receiver, toml: Option<&str>) -> (Value, Vec<Served>, Vec<TestRoot>) {
    let (downstream_root, downstream) = downstream(receiver);
    let port: u16 = downstream
        .authority
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("a port");
    let upstream_root = root();
    if let Some(toml) = toml {
        upstream_root.write("usr/toolhost.toml", toml);
    }
    let upstream = Served::start(
        &upstream_root,
        &["--allow-writes-without-token"],
        &receiver.env("upstream"),
    );
    let traceparent = format!("00-{TRACE_ID}-{CLIENT_SPAN}-01");
    let result = upstream.call(
        "forwarding",
        "echo:forward",
        json!({"port": port, "tool": "echo"}),
        json!({"traceparent": traceparent}),
    );
    assert_eq!(result["isError"], false, "{result}");
    let text = result["content"][0]["text"].as_str().expect("a text");
    let answer: Value = serde_json::from_str(text).expect("forward's JSON");
    assert!(
        answer["answer"]
            .as_str()
            .unwrap_or("")
            .contains("forwarded"),
        "{answer}"
    );
    let servers = vec![downstream, upstream];
    (answer, servers, vec![downstream_root, upstream_root])
}

#[test]
fn a_call_is_one_trace_through_the_worker_to_the_mcp_server_the_plugin_calls() {
    let receiver = Receiver::start(root().path());
    // echo runs in a worker (no sandbox: it opens a socket).
    let toml = "isolate = [\"echo\"]\n[tools.echo]\nsandbox = \"off\"\n";
    let (answer, _servers, _roots) = forward_through(&receiver, Some(toml));
    let sent = answer["traceparent"]
        .as_str()
        .expect("the plugin read a traceparent");
    assert!(
        sent.starts_with(&format!("00-{TRACE_ID}-")),
        "the plugin's traceparent is of the client's trace: {sent}"
    );

    // Every span checked below: each process exports its spans in batches as they end, so
    // the worker's span can arrive before the request span that encloses it.
    let spans = arrived(
        &receiver,
        &[
            ("upstream", "tools/call echo:forward"),
            ("upstream", "execute_tool echo"),
            ("upstream", "execute"),
            ("upstream", "worker execute"),
            ("downstream", "tools/call echo"),
            ("downstream", "execute_tool echo"),
        ],
    );
    let spans = in_trace(&spans, &Value::from(TRACE_ID));
    let request = one(
        &spans,
        named("upstream", "tools/call echo:forward"),
        "request",
    );
    assert_eq!(request["parent_span_id"], CLIENT_SPAN);
    let call = one(&spans, named("upstream", "execute_tool echo"), "call span");
    assert_eq!(call["parent_span_id"], request["span_id"]);
    assert_eq!(call["attributes"]["toolhost.tool.isolated"], true);
    let execute = one(&spans, named("upstream", "execute"), "execute step");
    assert_eq!(execute["parent_span_id"], call["span_id"]);
    // The worker's span: a child of the host's execute, with the worker's process id, and the
    // very span the plugin passed on.
    let worker = one(&spans, named("upstream", "worker execute"), "worker span");
    assert_eq!(worker["parent_span_id"], execute["span_id"], "{worker:#}");
    let pid = worker["attributes"]["toolhost.worker.pid"]
        .as_str()
        .expect("a pid");
    assert!(pid.parse::<u32>().is_ok_and(|p| p > 0), "{pid}");
    assert_eq!(
        sent,
        format!("00-{TRACE_ID}-{}-01", worker["span_id"].as_str().unwrap())
    );
    // The MCP server the plugin called: its request span is the worker span's child.
    let served = one(
        &spans,
        named("downstream", "tools/call echo"),
        "downstream request",
    );
    assert_eq!(served["parent_span_id"], worker["span_id"], "{served:#}");
    assert_eq!(served["kind"], 2, "SPAN_KIND_SERVER");
    let downstream_call = one(
        &spans,
        named("downstream", "execute_tool echo"),
        "downstream call",
    );
    assert_eq!(downstream_call["parent_span_id"], served["span_id"]);
}

#[test]
fn a_tool_of_an_mcp_server_is_called_in_a_client_span_that_the_server_continues() {
    let receiver = Receiver::start(root().path());
    let (_downstream_root, downstream) = downstream(&receiver);
    // The host's MCP client: `toolhost call` of a tool of the server its `mcp.json` names.
    let upstream = TestRoot::new();
    let url = format!("http://{}/mcp", downstream.authority);
    upstream.write(
        "usr/mcp.json",
        json!({"mcpServers": {"down": {"url": url}}}).to_string(),
    );
    upstream.write(
        "usr/toolhost.toml",
        "[tools.\"down.echo\"]\npolicy = \"allow\"\n",
    );
    let out = Command::new(toolhost_bin())
        .arg("--root")
        .arg(upstream.path())
        .args(["call", "down.echo", "--args", r#"{"x": 1}"#])
        .envs(receiver.env("upstream"))
        .output()
        .expect("toolhost call");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");

    let spans = arrived(
        &receiver,
        &[
            ("upstream", "execute_tool down.echo"),
            ("upstream", "execute"),
            ("upstream", "tools/call echo"),
            ("downstream", "tools/call echo"),
            ("downstream", "execute_tool echo"),
            ("upstream", "initialize"),
            ("upstream", "tools/list"),
            ("downstream", "tools/list"),
        ],
    );
    // Connecting: the handshake and the tool list, client spans naming the server; the
    // list request carries its span's traceparent, which the server continues.
    let handshake = one(&spans, named("upstream", "initialize"), "handshake");
    assert_eq!(handshake["kind"], 3, "SPAN_KIND_CLIENT: {handshake:#}");
    assert_eq!(handshake["attributes"]["mcp.method.name"], "initialize");
    assert_eq!(handshake["attributes"]["toolhost.mcp.server"], "down");
    let list = one(&spans, named("upstream", "tools/list"), "list sent");
    assert_eq!(list["kind"], 3, "SPAN_KIND_CLIENT: {list:#}");
    assert_eq!(list["attributes"]["toolhost.mcp.server"], "down");
    let listed = one(&spans, named("downstream", "tools/list"), "list served");
    assert_eq!(listed["parent_span_id"], list["span_id"], "{listed:#}");
    assert_eq!(listed["trace_id"], list["trace_id"]);
    let call = one(
        &spans,
        named("upstream", "execute_tool down.echo"),
        "call span",
    );
    assert_eq!(call["attributes"]["toolhost.tool.layer"], "mcp");
    let spans = in_trace(&spans, &call["trace_id"]);
    let execute = one(&spans, named("upstream", "execute"), "execute step");
    assert_eq!(execute["parent_span_id"], call["span_id"]);
    // The request sent: a client span, child of the host's execute.
    let sent = one(&spans, named("upstream", "tools/call echo"), "request sent");
    assert_eq!(sent["parent_span_id"], execute["span_id"], "{sent:#}");
    assert_eq!(sent["kind"], 3, "SPAN_KIND_CLIENT: {sent:#}");
    assert_eq!(sent["attributes"]["mcp.method.name"], "tools/call");
    assert_eq!(sent["attributes"]["gen_ai.tool.name"], "echo");
    assert_eq!(sent["attributes"]["toolhost.mcp.server"], "down");
    // The server's span continues it, in the same trace.
    let served = one(
        &spans,
        named("downstream", "tools/call echo"),
        "request served",
    );
    assert_eq!(served["parent_span_id"], sent["span_id"], "{served:#}");
    assert_eq!(served["kind"], 2, "SPAN_KIND_SERVER");
}

#[test]
fn a_plugin_in_the_hosts_process_passes_on_its_execute_span() {
    let receiver = Receiver::start(root().path());
    // echo in serve-mcp's own process: its `execute` runs on a call thread.
    let (answer, _servers, _roots) = forward_through(&receiver, None);
    let sent = answer["traceparent"].as_str().unwrap_or_default();

    let spans = arrived(
        &receiver,
        &[
            ("upstream", "execute"),
            ("upstream", "execute_tool echo"),
            ("downstream", "tools/call echo"),
        ],
    );
    let spans = in_trace(&spans, &Value::from(TRACE_ID));
    let call = one(&spans, named("upstream", "execute_tool echo"), "call span");
    assert_eq!(call["attributes"]["toolhost.tool.isolated"], false);
    let execute = one(&spans, named("upstream", "execute"), "execute step");
    assert_eq!(execute["parent_span_id"], call["span_id"]);
    let execute_id = execute["span_id"].as_str().expect("an id");
    assert_eq!(sent, format!("00-{TRACE_ID}-{execute_id}-01"), "{answer}");
    let served = one(
        &spans,
        named("downstream", "tools/call echo"),
        "downstream request",
    );
    assert_eq!(served["parent_span_id"], execute["span_id"], "{served:#}");
}
