//! rmcp's own client against `toolhost serve-mcp`: list, a call with progress, a cancelled
//! call, and `tools/list_changed`, over stdio and streamable HTTP; a resource subscription
//! told of its file's change.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequestParams, ClientRequest, ProgressNotificationParam, Request,
    ResourceUpdatedNotificationParam, ServerResult, SubscribeRequestParams,
    UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RunningService};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::json;
use toolhost_tests::{toolhost_bin, wait_for, Fixture, TestRoot};

use super::{audited_calls, root, stdio_transport, HttpServer};

/// Records the progress, list changes and resource updates the server sends.
#[derive(Clone, Default)]
struct Recorder {
    progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
    list_changed: Arc<AtomicUsize>,
    updated: Arc<Mutex<Vec<String>>>,
}

impl ClientHandler for Recorder {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.lock().unwrap().push(params);
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.list_changed.fetch_add(1, Ordering::SeqCst);
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.updated.lock().unwrap().push(params.uri);
    }
}

type Client = RunningService<RoleClient, Recorder>;

fn call_request(name: &str, args: serde_json::Value) -> ClientRequest {
    let serde_json::Value::Object(args) = args else {
        panic!("arguments must be an object")
    };
    let params = CallToolRequestParams::new(name.to_owned()).with_arguments(args);
    ClientRequest::CallToolRequest(Request::new(params))
}

/// Lists, calls with progress, cancels a spinning call, and waits for a reload's notice.
async fn exercise(client: &Client, recorder: &Recorder, root: &TestRoot) {
    let tools = client.list_all_tools().await.expect("tools/list");
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, ["echo", "governed", "noop", "versioned"]);

    let request = call_request("echo:progress", json!({"text": "step one"}));
    let handle = client
        .send_cancellable_request(request, PeerRequestOptions::no_options())
        .await
        .expect("tools/call");
    let ServerResult::CallToolResult(result) = handle.await_response().await.expect("result")
    else {
        panic!("not a tool result")
    };
    assert_eq!(result.is_error, Some(false));
    let text = serde_json::to_value(&result.content).unwrap();
    assert_eq!(text[0]["text"], "progressed");
    let progress = recorder.progress.lock().unwrap().clone();
    assert_eq!(progress.len(), 1, "{progress:?}");
    assert_eq!(progress[0].message.as_deref(), Some("step one"));

    let request = call_request("governed:spin", json!({"city": "Paris"}));
    let handle = client
        .send_cancellable_request(request, PeerRequestOptions::no_options())
        .await
        .expect("tools/call");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let cancelled = Instant::now();
    handle
        .cancel(Some("test".to_owned()))
        .await
        .expect("cancel");
    let spun = wait_for("the cancelled call's audit record", || {
        let calls = audited_calls(root, "governed");
        calls
            .into_iter()
            .find(|c| c["method"] == "spin")
            .ok_or("none yet")
    });
    assert_eq!(spun["outcome"], "intervention", "{spun}");
    assert!(cancelled.elapsed() < Duration::from_secs(10));
    assert!(spun["duration_ms"].as_f64().unwrap() < 10_000.0, "{spun}");

    // A rebuilt tool, a new one and a removed one are each announced.
    root.replace("usr/tools/versioned.so", Fixture::VersionedV2);
    let seen = list_changed_after(recorder, 0);
    root.tool("usr", "extra", Fixture::Noop);
    let seen = list_changed_after(recorder, seen);
    listed(client, "extra", true).await;
    std::fs::remove_file(root.path().join("usr/tools/extra.so")).unwrap();
    list_changed_after(recorder, seen);
    listed(client, "extra", false).await;
}

/// Waits (at most 10 s) until `tools/list` does or does not hold `name`: a notification of an
/// earlier change may arrive first.
async fn listed(client: &Client, name: &str, present: bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let tools = client.list_all_tools().await.expect("tools/list");
        if tools.iter().any(|t| t.name == name) == present {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{name} listed: {present}? {tools:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits for a `tools/list_changed` beyond the `seen` ones; returns how many came.
fn list_changed_after(recorder: &Recorder, seen: usize) -> usize {
    wait_for("tools/list_changed", || {
        match recorder.list_changed.load(Ordering::SeqCst) {
            n if n > seen => Ok(n),
            n => Err(n),
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_client_over_stdio_lists_calls_with_progress_and_cancels() {
    let root = root();
    let transport = stdio_transport(&root);
    let recorder = Recorder::default();
    let client = recorder.clone().serve(transport).await.expect("initialize");
    exercise(&client, &recorder, &root).await;
    client.cancel().await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_client_over_http_lists_calls_with_progress_and_cancels() {
    let root = root();
    let server = HttpServer::start(&root, &["--sessions", "--allow-writes-without-token"]);
    // rmcp's reqwest has no crypto provider of its own (a provider set earlier stays).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let transport = StreamableHttpClientTransport::from_uri(server.url.clone());
    let recorder = Recorder::default();
    let client = recorder.clone().serve(transport).await.expect("initialize");
    exercise(&client, &recorder, &root).await;
    client.cancel().await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn yes_approves_the_asks_for_write_tools() {
    let root = root();
    let mut command = tokio::process::Command::new(toolhost_bin());
    command
        .arg("--root")
        .arg(root.path())
        .args(["serve-mcp", "--yes"]);
    let transport = TokioChildProcess::new(command).expect("serve-mcp");
    let client = ().serve(transport).await.expect("initialize");
    // `noop` is a write tool whose policy asks; this client cannot be asked.
    let params = CallToolRequestParams::new("noop");
    let result = client.call_tool(params).await.expect("tools/call");
    assert_eq!(result.is_error, Some(false), "{result:?}");
    let approval = audited_calls(&root, "noop")[0]["approval"].clone();
    assert_eq!(approval["source"], "--yes (write)", "{approval}");
    client.cancel().await.expect("close");
}

/// A tool saved as `allow` in a terminal session (`[tools.shell] policy = "allow"`, what
/// answering "always" saves) still asks when an MCP client calls it: only `mcp_policy`
/// decides for MCP clients. This client cannot be asked (no elicitation), so the call is
/// refused saying so, until `mcp_policy = "allow"`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_saved_in_a_terminal_does_not_apply_to_mcp_clients() {
    let root = TestRoot::new();
    root.tool("usr", "shell", Fixture::Exec);
    root.write("usr/toolhost.toml", "[tools.shell]\npolicy = \"allow\"\n");
    let (agent, _) = root.agent("default");
    let ran = agent
        .call_tool("shell", json!({}))
        .await
        .expect("the terminal's call");
    assert_eq!(ran.message, "ran");
    let call = |root: &TestRoot| {
        let mut command = tokio::process::Command::new(toolhost_bin());
        command.arg("--root").arg(root.path()).arg("serve-mcp");
        async move {
            let transport = TokioChildProcess::new(command).expect("serve-mcp");
            let client = ().serve(transport).await.expect("initialize");
            let result = client
                .call_tool(CallToolRequestParams::new("shell"))
                .await
                .expect("tools/call");
            let _ = client.cancel().await;
            result
        }
    };
    let refused = call(&root).await;
    assert_eq!(refused.is_error, Some(true), "{refused:?}");
    let text = serde_json::to_string(&refused.content).unwrap();
    assert!(
        text.contains("not approved") && text.contains("elicitation"),
        "{text}"
    );
    root.write(
        "usr/toolhost.toml",
        "[tools.shell]\npolicy = \"allow\"\nmcp_policy = \"allow\"\n",
    );
    let allowed = call(&root).await;
    assert_eq!(allowed.is_error, Some(false), "{allowed:?}");
}

/// A session subscribed to a resource (`resources/subscribe`) is sent
/// `notifications/resources/updated` when its file changes, not when another file does, and
/// nothing after it unsubscribes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(deprecated)] // resources/subscribe is the way of sessions (before 2026-07-28)
async fn a_subscribed_session_is_told_when_its_resource_file_changes() {
    let root = TestRoot::new();
    root.tool("usr", "noop", Fixture::Noop);
    root.write("usr/resources/notes.txt", "first notes\n");
    root.write("usr/resources/other.txt", "not subscribed\n");
    let transport = stdio_transport(&root);
    let recorder = Recorder::default();
    let client = recorder.clone().serve(transport).await.expect("initialize");
    let notes = "toolhost://resources/notes.txt";
    client
        .subscribe(SubscribeRequestParams::new(notes))
        .await
        .expect("resources/subscribe");
    root.write("usr/resources/other.txt", "changed, unsubscribed\n");
    root.write("usr/resources/notes.txt", "second notes\n");
    let updated = recorder.updated.clone();
    wait_for("notes.txt's update", || {
        let updated = updated.lock().unwrap().clone();
        match updated.is_empty() {
            true => Err(updated),
            false => Ok(()),
        }
    });
    assert!(
        recorder.updated.lock().unwrap().iter().all(|u| u == notes),
        "{:?}",
        recorder.updated
    );
    client
        .unsubscribe(UnsubscribeRequestParams::new(notes))
        .await
        .expect("resources/unsubscribe");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let told = recorder.updated.lock().unwrap().len();
    root.write("usr/resources/notes.txt", "third notes\n");
    // The watcher's debounce is well under a second; nothing more comes.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(recorder.updated.lock().unwrap().len(), told);
    client.cancel().await.expect("close");
}
