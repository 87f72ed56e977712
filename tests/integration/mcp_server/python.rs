//! The Python `mcp` client (2.3.0) against `toolhost serve-mcp`, over stdio and HTTP.

use serde_json::{json, Value};
use toolhost_tests::{toolhost_bin, wait_for, Fixture, TestRoot};

use super::{audited_calls, event, root, run_python, HttpServer, SECRET};

/// What every transport must show: the tools, progress, a masked error, a cancelled spin and
/// a reload.
const STEPS: [&str; 6] = [
    "list",
    "progress",
    "call|echo:fail|{\"kind\": \"business\", \"message\": \"bad key sk-live-4f9a8b7c6d5e\"}",
    "call|noop|{}",
    "cancel",
    "reload",
];

fn check_tools(events: &[Value]) {
    let tools = event(events, "tools")["tools"]
        .as_array()
        .expect("tools")
        .clone();
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(
        names,
        ["echo", "governed", "noop", "versioned"],
        "hidden is refused by [access]"
    );
    let governed = &tools[1];
    assert_eq!(governed["description"], "A governed test tool.");
    assert_eq!(governed["inputSchema"]["type"], "object");
    assert!(
        governed["inputSchema"]["properties"]["city"].is_object(),
        "{governed}"
    );
    assert_eq!(governed["inputSchema"]["required"], json!(["city"]));
    assert_eq!(governed["annotations"]["readOnlyHint"], true);
    assert_eq!(governed["annotations"]["openWorldHint"], false);
    assert_eq!(
        tools[0]["inputSchema"]["type"], "object",
        "echo declares no parameters"
    );
}

fn check_calls(root: &TestRoot, events: &[Value]) {
    let progress = event(events, "progress");
    assert_eq!(progress["text"], "progressed");
    assert_eq!(progress["is_error"], false);
    assert_eq!(progress["seen"][0]["message"], "half way", "{progress}");
    assert_eq!(progress["seen"][0]["progress"], 1.0);

    let calls: Vec<&Value> = events.iter().filter(|e| e["event"] == "call").collect();
    let failed = calls[0];
    assert_eq!(failed["is_error"], true);
    let text = failed["text"].as_str().unwrap();
    assert!(
        text.starts_with("business error: bad key §§secret(API_KEY)"),
        "{text}"
    );
    assert!(
        !text.contains(SECRET),
        "a secret reached the client: {text}"
    );

    // `noop` asks, and this client cannot be asked.
    let asked = calls[1];
    assert_eq!(asked["is_error"], true);
    let text = asked["text"].as_str().unwrap();
    assert!(
        text.contains("not approved (policy asks, and the MCP client cannot be asked: it does not support elicitation)"),
        "{text}"
    );

    let cancelled = event(events, "cancelled");
    assert_eq!(cancelled["then"], "{\"after\":\"cancel\"}");
    // The spinning call was abandoned at the cancellation, not at its 60 s deadline.
    let spun = wait_for("the cancelled call's audit record", || {
        let calls = audited_calls(root, "governed");
        calls
            .into_iter()
            .find(|c| c["method"] == "spin")
            .ok_or("none yet")
    });
    assert_eq!(spun["outcome"], "intervention", "{spun}");
    assert!(spun["duration_ms"].as_f64().unwrap() < 10_000.0, "{spun}");
    assert_eq!(spun["agent"], "mcp");
    assert!(
        events.iter().any(|e| e["event"] == "list-changed"),
        "{events:?}"
    );
}

#[test]
fn python_client_over_stdio_lists_calls_cancels_and_sees_reloads() {
    let root = root();
    let exe = toolhost_bin();
    let mut args = vec![
        "stdio",
        exe.to_str().unwrap(),
        root.path().to_str().unwrap(),
    ];
    args.extend(STEPS);
    let events = run_python(&root, &args, || {
        root.replace("usr/tools/versioned.so", Fixture::VersionedV2);
    });
    check_tools(&events);
    check_calls(&root, &events);
}

#[test]
fn python_client_over_http_with_sessions_does_the_same() {
    let root = root();
    let server = HttpServer::start(&root, &["--sessions", "--allow-writes-without-token"]);
    let mut args = vec!["http", server.url.as_str()];
    args.extend(STEPS);
    let events = run_python(&root, &args, || {
        root.replace("usr/tools/versioned.so", Fixture::VersionedV2);
    });
    check_tools(&events);
    check_calls(&root, &events);
}

#[test]
fn python_client_over_stateless_http_lists_calls_with_progress_and_cancels() {
    let root = root();
    let server = HttpServer::start(&root, &["--token-secret", "MCP_TOKEN"]);
    let url = server.url.as_str();
    let steps = ["--elicit", "list", "progress", "call|noop|{}", "cancel"];
    let mut args = vec!["http", url, "token=tok-123456789"];
    args.extend(steps);
    let events = run_python(&root, &args, || {});
    check_tools(&events);
    let progress = event(&events, "progress");
    assert_eq!(progress["text"], "progressed");
    assert_eq!(progress["seen"][0]["message"], "half way", "{progress}");
    // The answer to an elicitation would come back in a request of its own: not asked.
    let asked = event(&events, "call");
    assert_eq!(asked["is_error"], true);
    let text = asked["text"].as_str().unwrap();
    let reason = "a client of stateless HTTP cannot be asked: serve with --sessions";
    assert!(text.contains(reason), "{text}");
    assert!(
        !events.iter().any(|e| e["event"] == "elicited"),
        "{events:?}"
    );
    // The client gives up the request (its stream, and a courtesy cancellation): the spinning
    // call ends then, not at its deadline.
    let spun = wait_for("the cancelled call's audit record", || {
        let calls = audited_calls(&root, "governed");
        calls
            .into_iter()
            .find(|c| c["method"] == "spin")
            .ok_or("none yet")
    });
    assert_eq!(spun["outcome"], "intervention", "{spun}");
    assert!(spun["duration_ms"].as_f64().unwrap() < 10_000.0, "{spun}");
}

#[test]
fn an_ask_tool_is_approved_through_elicitation() {
    let root = root();
    let exe = toolhost_bin();
    let args = [
        "stdio",
        exe.to_str().unwrap(),
        root.path().to_str().unwrap(),
        "--elicit",
        "call|noop|{\"city\": \"Oslo\"}",
    ];
    let events = run_python(&root, &args, || {});
    let asked = event(&events, "elicited")["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(asked.contains("wants to call tool 'noop'"), "{asked}");
    assert!(asked.contains("Oslo"), "{asked}");
    let call = event(&events, "call");
    assert_eq!(call["is_error"], false, "{call}");
}

/// The same Python SDK (2.3.0, which speaks 2026-07-28) in its default mode: it probes
/// `server/discover` and stays on 2026-07-28, lists with caching hints, calls, answers an
/// approval's `InputRequiredResult`, sees a changed `requestState` refused and hears a
/// rebuilt plugin on `subscriptions/listen`.
fn check_modern(root: &TestRoot, events: &[Value]) {
    let discovered = event(events, "discovered");
    assert_eq!(discovered["version"], "2026-07-28", "{discovered}");
    assert_eq!(discovered["server"], "toolhost");
    let tools = event(events, "tools");
    assert_eq!(
        tools["names"],
        json!(["echo", "governed", "noop", "versioned"])
    );
    assert_eq!(tools["ttl_ms"], 10_000, "{tools}");
    assert_eq!(tools["cache_scope"], "public", "{tools}");
    let call = event(events, "call");
    assert_eq!(call["text"], r#"{"text":"modern"}"#);
    assert_eq!(call["is_error"], false);
    let approved = event(events, "approved");
    assert_eq!(approved["is_error"], false, "{approved}");
    let asked = approved["asked"].as_array().expect("asked");
    assert_eq!(asked.len(), 1, "{approved}");
    assert!(asked[0].as_str().unwrap().contains("'noop'"), "{approved}");
    let records = audited_calls(root, "noop");
    assert_eq!(
        records.len(),
        1,
        "the rounds that ask run nothing: {records:?}"
    );
    assert_eq!(records[0]["approval"]["source"], "user: approved once");
    let tampered = event(events, "tampered");
    assert_eq!(tampered["refused"], true, "{tampered}");
    assert_eq!(tampered["code"], -32602, "{tampered}");
    assert_eq!(tampered["asked"], json!(["approval"]), "{tampered}");
    event(events, "listened");
}

fn modern_script(root: &TestRoot) -> std::path::PathBuf {
    root.write("client_modern.py", include_str!("client_modern.py"))
}

#[test]
fn python_client_speaking_2026_07_28_over_stdio() {
    let root = root();
    let bin = toolhost_bin();
    let args = [
        "stdio",
        bin.to_str().unwrap(),
        root.path().to_str().unwrap(),
    ];
    let events = super::run_script(&modern_script(&root), &args, || {
        root.replace("usr/tools/versioned.so", Fixture::VersionedV2);
    });
    check_modern(&root, &events);
}

#[test]
fn python_client_speaking_2026_07_28_over_stateless_http() {
    let root = root();
    let server = HttpServer::start(&root, &["--allow-writes-without-token"]);
    let args = ["http", server.url.as_str()];
    let events = super::run_script(&modern_script(&root), &args, || {
        root.replace("usr/tools/versioned.so", Fixture::VersionedV2);
    });
    check_modern(&root, &events);
}
