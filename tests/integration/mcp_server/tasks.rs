//! Long tool calls as tasks (the Tasks extension of MCP 2026-07-28), with rmcp's client
//! against `toolhost serve-mcp` over stdio and stateless HTTP: a call of a tool whose deadline
//! is a minute or more answers with a task, polled with `tasks/get` to the result a plain call
//! gives; `tasks/cancel` reaches the tool's `Context` and the audit; a tool's failure is a
//! completed task with the masked error; unknown ids are invalid params; a client that does
//! not declare the extension, or a short tool, gets the plain result; the store is bounded;
//! a tool's questions inside a task are asked in its `inputRequests` and answered with
//! `tasks/update`.

use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientCapabilities, ClientConfig,
    ClientRequest, CustomRequest, DetailedTask, ErrorCode, GetTaskParams, Implementation,
    InputRequests, InputResponses, ProtocolVersion, TaskPayload, TaskStatus, UpdateTaskParams,
};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{RoleClient, ServiceError};
use serde_json::{json, Value};
use toolhost_tests::{wait_for, wait_for_text, TestRoot};

use super::{audited_calls, call, conformance_fixture, root, stdio_transport, HttpServer, SECRET};

type Client = RunningService<RoleClient, ClientConfig>;

/// A 2026-07-28 client, declaring the Tasks extension or not.
fn client_info(tasks: bool) -> ClientConfig {
    let capabilities = match tasks {
        true => json!({"extensions": {"io.modelcontextprotocol/tasks": {}}}),
        false => json!({}),
    };
    let capabilities: ClientCapabilities = serde_json::from_value(capabilities).unwrap();
    ClientConfig::new(capabilities, Implementation::new("tasks-test", "1.0"))
}

fn modern() -> ClientLifecycleMode {
    ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    }
}

/// The tests' root, where `echo`'s deadline is raised to 90 s (so its calls become tasks).
fn tasks_root() -> TestRoot {
    let root = root();
    let config = std::fs::read_to_string(root.path().join("usr/toolhost.toml")).unwrap();
    root.write(
        "usr/toolhost.toml",
        format!("{config}[tools.echo]\ntimeout_seconds = 90\n"),
    );
    root
}

async fn stdio_client(root: &TestRoot, tasks: bool) -> Client {
    let transport = stdio_transport(root);
    client_info(tasks)
        .serve_with_lifecycle(transport, modern())
        .await
        .expect("server/discover")
}

async fn http_client(url: &str, tasks: bool) -> Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let transport = StreamableHttpClientTransport::from_uri(url.to_owned());
    client_info(tasks)
        .serve_with_lifecycle(transport, modern())
        .await
        .expect("server/discover")
}

/// Calls `request`, which must answer with a task; returns its id.
async fn start_task(client: &Client, request: CallToolRequestParams) -> String {
    let name = request.name.clone();
    let answer = client.call_tool_once(request).await.expect("tools/call");
    let CallToolResponse::Task(created) = answer else {
        panic!("{name}: not a task: {answer:?}")
    };
    assert_eq!(created.task.status, TaskStatus::Working, "{created:?}");
    assert!(created.task.poll_interval_ms.is_some(), "{created:?}");
    created.task.task_id
}

/// Polls task `id` until `ready` takes what it is (30 s at most, waiting for `what`).
async fn poll<T>(
    client: &Client,
    id: &str,
    what: &str,
    ready: impl Fn(DetailedTask) -> Option<T>,
) -> T {
    let polled = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let got = client
                .get_task(GetTaskParams::new(id.to_owned()))
                .await
                .expect("tasks/get");
            if let Some(found) = ready(got.task) {
                return found;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    polled.unwrap_or_else(|_| panic!("task {id}: no {what} within 30 s"))
}

/// Polls task `id` until it ends.
async fn until_done(client: &Client, id: &str) -> DetailedTask {
    let ended = |task: DetailedTask| task.status().is_terminal().then_some(task);
    poll(client, id, "end", ended).await
}

/// The result of a completed task, as JSON.
fn completed(task: &DetailedTask) -> Value {
    match &task.payload {
        TaskPayload::Completed { result } => Value::Object(result.clone()),
        other => panic!("not completed: {other:?}"),
    }
}

/// The content and error flag of a result, the parts a task's and a plain call's share.
fn shown(result: &Value) -> (Value, Value) {
    (result["content"].clone(), result["isError"].clone())
}

/// What every transport must show, with `tasks` (declares the extension) and `plain` (does
/// not), both 2026-07-28 clients of the same server (or of servers of the same root).
async fn exercise(tasks: &Client, plain: &Client, root: &TestRoot, run: &str) {
    let server = tasks.peer_info().expect("server/discover's answer");
    assert!(
        server.capabilities.supports_tasks(),
        "the Tasks extension is not advertised: {:?}",
        server.capabilities
    );

    // `governed` (deadline 60 s): a task, polled to the result a plain call gives.
    let args = json!({"city": "Paris", "top": 3});
    let id = start_task(tasks, call("governed", args.clone())).await;
    assert_eq!(id.len(), 32, "{id}");
    let done = until_done(tasks, &id).await;
    assert_eq!(
        done.task.ttl_ms,
        Some(360_000),
        "60 s and 300 s of retention"
    );
    let from_task = completed(&done);
    let plainly = plain
        .call_tool_once(call("governed", args))
        .await
        .expect("tools/call without the extension");
    let CallToolResponse::Complete(plainly) = plainly else {
        panic!("a client without the extension got {plainly:?}")
    };
    let plainly = serde_json::to_value(&plainly).unwrap();
    assert_eq!(shown(&from_task), shown(&plainly));
    assert_eq!(
        from_task["content"][0]["text"],
        r#"{"city":"Paris","top":3,"units":"metric"}"#
    );
    // Polled again, the same finished task.
    let again = tasks
        .get_task(GetTaskParams::new(id.clone()))
        .await
        .expect("tasks/get of a finished task");
    assert_eq!(completed(&again.task), from_task);

    // A short tool (`versioned`, 30 s) answers plainly even to a client of the extension.
    let short = tasks
        .call_tool_once(call("versioned", json!({})))
        .await
        .expect("tools/call of a short tool");
    assert!(
        matches!(short, CallToolResponse::Complete(_)),
        "a short tool became a task: {short:?}"
    );

    // A failing tool (echo, 90 s by its [tools.echo] config): a completed task whose result
    // is the masked error, not a failed one (a tool's error is not a protocol error).
    let message = format!("bad key {SECRET}");
    let failing = call("echo:fail", json!({"kind": "business", "message": message}));
    let id = start_task(tasks, failing).await;
    let done = until_done(tasks, &id).await;
    let result = completed(&done);
    assert_eq!(result["isError"], true, "{result}");
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("business error: bad key §§secret(API_KEY)"),
        "{text}"
    );
    assert!(
        !done_json(&done).contains(SECRET),
        "a secret reached the client"
    );

    // tasks/cancel: the tool's Context is cancelled (it writes the note), the task ends
    // `cancelled`, and the audit records the call as stopped by an intervention.
    let note = root.path().join(format!("cancelled-{run}.txt"));
    let waits = call(
        "governed:cooperative",
        json!({"city": "Oslo", "note": note.to_str().unwrap()}),
    );
    let id = start_task(tasks, waits).await;
    let got = tasks
        .get_task(GetTaskParams::new(id.clone()))
        .await
        .expect("tasks/get");
    assert_eq!(got.task.status(), TaskStatus::Working, "{got:?}");
    tasks
        .cancel_task(CancelTaskParams::new(id.clone()))
        .await
        .expect("tasks/cancel");
    let done = until_done(tasks, &id).await;
    assert_eq!(done.status(), TaskStatus::Cancelled, "{done:?}");
    let seen = wait_for_text("the tool's note of its cancellation", &note);
    assert_eq!(seen, "cancelled true");
    let record = wait_for("the cancelled call's audit record", || {
        audited_calls(root, "governed")
            .into_iter()
            .find(|c| c["method"] == "cooperative" && c["args"]["note"] == note.to_str().unwrap())
            .ok_or("none yet")
    });
    assert_eq!(record["outcome"], "intervention", "{record}");
    assert_eq!(record["agent"], "mcp", "{record}");
    assert!(
        record["duration_ms"].as_f64().unwrap() < 30_000.0,
        "{record}"
    );
    // Cancelling a finished task is acknowledged and changes nothing.
    tasks
        .cancel_task(CancelTaskParams::new(id.clone()))
        .await
        .expect("tasks/cancel of a finished task");
    let still = until_done(tasks, &id).await;
    assert_eq!(still.status(), TaskStatus::Cancelled);

    // Unknown ids: invalid params, for tasks/get and tasks/cancel.
    for outcome in [
        tasks
            .get_task(GetTaskParams::new("0123456789abcdef"))
            .await
            .map(|_| ()),
        tasks
            .cancel_task(CancelTaskParams::new("0123456789abcdef"))
            .await,
    ] {
        match outcome {
            Err(ServiceError::McpError(e)) => {
                assert_eq!(e.code, ErrorCode::INVALID_PARAMS, "{e:?}");
                assert!(e.message.contains("unknown task"), "{e:?}");
            }
            other => panic!("an unknown task id was not refused: {other:?}"),
        }
    }

    // The 2025-11-25 methods the extension removed are unknown methods.
    for method in ["tasks/result", "tasks/list"] {
        let request = CustomRequest::new(method, Some(json!({"taskId": id})));
        let answer = tasks
            .send_request(ClientRequest::CustomRequest(request))
            .await;
        match answer {
            Err(ServiceError::McpError(e)) => {
                assert_eq!(e.code, ErrorCode::METHOD_NOT_FOUND, "{method}: {e:?}")
            }
            other => panic!("{method} was answered: {other:?}"),
        }
    }

    // A client that does not declare the extension cannot poll (and gets no task above).
    let refused = plain.get_task(GetTaskParams::new(id)).await;
    assert!(
        matches!(&refused, Err(ServiceError::McpError(e)) if e.code.0 == -32021),
        "{refused:?}"
    );
}

fn done_json(task: &DetailedTask) -> String {
    serde_json::to_string(task).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_calls_of_a_stdio_client_become_tasks_polled_cancelled_and_failed() {
    let root = tasks_root();
    let tasks = stdio_client(&root, true).await;
    let plain = stdio_client(&root, false).await;
    exercise(&tasks, &plain, &root, "stdio").await;
    tasks.cancel().await.expect("close");
    plain.cancel().await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_calls_of_a_stateless_http_client_become_tasks_polled_cancelled_and_failed() {
    let root = tasks_root();
    let server = HttpServer::start(&root, &["--allow-writes-without-token"]);
    let tasks = http_client(&server.url, true).await;
    let plain = http_client(&server.url, false).await;
    exercise(&tasks, &plain, &root, "http").await;
    tasks.cancel().await.expect("close");
    plain.cancel().await.expect("close");
}

/// `--max-tasks 1`: while one task is held, the next long call runs as a plain call; with
/// `--max-tasks 0` no call becomes a task.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tasks_a_server_holds_are_bounded() {
    let root = tasks_root();
    let server = HttpServer::start(&root, &["--allow-writes-without-token", "--max-tasks", "1"]);
    let client = http_client(&server.url, true).await;
    let note = root.path().join("held.txt");
    let held = call(
        "governed:cooperative",
        json!({"city": "Lima", "note": note.to_str().unwrap()}),
    );
    let id = start_task(&client, held).await;
    let next = client
        .call_tool_once(call("governed", json!({"city": "Quito"})))
        .await
        .expect("tools/call past the bound");
    let CallToolResponse::Complete(next) = next else {
        panic!("a task past the bound: {next:?}")
    };
    let text = serde_json::to_value(&next.content).unwrap();
    assert_eq!(text[0]["text"], r#"{"city":"Quito","units":"metric"}"#);
    client
        .cancel_task(CancelTaskParams::new(id.clone()))
        .await
        .expect("tasks/cancel");
    assert_eq!(
        until_done(&client, &id).await.status(),
        TaskStatus::Cancelled
    );
    let seen = wait_for_text("the held tool's note", &note);
    assert_eq!(seen, "cancelled true");
    client.cancel().await.expect("close");
    drop(server);

    let none = HttpServer::start(&root, &["--allow-writes-without-token", "--max-tasks", "0"]);
    let client = http_client(&none.url, true).await;
    let answer = client
        .call_tool_once(call("governed", json!({"city": "Quito"})))
        .await
        .expect("tools/call");
    assert!(
        matches!(answer, CallToolResponse::Complete(_)),
        "--max-tasks 0 made a task: {answer:?}"
    );
    client.cancel().await.expect("close");
}

/// A 2026-07-28 client of the Tasks extension that declares form elicitation and sampling.
async fn asking_client(root: &TestRoot) -> Client {
    let capabilities = json!({
        "extensions": {"io.modelcontextprotocol/tasks": {}},
        "elicitation": {"form": {}},
        "sampling": {},
    });
    let capabilities: ClientCapabilities = serde_json::from_value(capabilities).unwrap();
    ClientConfig::new(capabilities, Implementation::new("asked-test", "1.0"))
        .serve_with_lifecycle(stdio_transport(root), modern())
        .await
        .expect("server/discover")
}

/// Polls task `id` until it asks something; its open input requests.
async fn until_asked(client: &Client, id: &str) -> InputRequests {
    let asked = |task: DetailedTask| match task.payload {
        TaskPayload::InputRequired { input_requests } => Some(input_requests),
        TaskPayload::Working => None,
        other => panic!("the task ended without asking: {other:?}"),
    };
    poll(client, id, "question", asked).await
}

/// A tool's own questions inside a task (`Context::elicit`, `Context::sample`): the task turns
/// `input_required` with the question in its `inputRequests`; an answer to a question it did
/// not ask is ignored; `tasks/update` with the answer lets the tool go on, and the task
/// completes with a result built from it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tools_questions_inside_a_task_are_answered_with_tasks_update() {
    let root = TestRoot::new();
    for name in ["test_elicitation", "test_sampling"] {
        root.tool("usr", name, conformance_fixture(name));
    }
    root.write(
        "usr/toolhost.toml",
        "[tools.test_elicitation]\ntimeout_seconds = 90\n[tools.test_sampling]\ntimeout_seconds = 90\n",
    );
    let client = asking_client(&root).await;

    let question = call("test_elicitation", json!({"message": "Who are you?"}));
    let id = start_task(&client, question).await;
    let asked = until_asked(&client, &id).await;
    let keys: Vec<&String> = asked.keys().collect();
    assert_eq!(keys, ["elicit-1"]);
    let request = serde_json::to_value(&asked["elicit-1"]).unwrap();
    assert_eq!(request["method"], "elicitation/create", "{request}");
    assert_eq!(request["params"]["message"], "Who are you?", "{request}");

    // An answer to a question not asked is ignored (the extension says so): the task still
    // waits for its question.
    let stray = InputResponses::from([("elicit-9".to_owned(), json!({"action": "decline"}))]);
    client
        .update_task(UpdateTaskParams::new(id.clone(), stray))
        .await
        .expect("tasks/update with a key not asked");
    let still = until_asked(&client, &id).await;
    assert_eq!(still.keys().collect::<Vec<_>>(), ["elicit-1"]);
    let answer = json!({"action": "accept",
        "content": {"username": "ada", "email": "ada@example.com"}});
    let answers = InputResponses::from([("elicit-1".to_owned(), answer)]);
    client
        .update_task(UpdateTaskParams::new(id.clone(), answers))
        .await
        .expect("tasks/update");
    let done = until_done(&client, &id).await;
    let result = completed(&done);
    assert_eq!(result["isError"], false, "{result}");
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("accept") && text.contains("ada@example.com"),
        "{text}"
    );

    let question = call("test_sampling", json!({"prompt": "The capital of France?"}));
    let id = start_task(&client, question).await;
    let asked = until_asked(&client, &id).await;
    let request = serde_json::to_value(&asked["sample-1"]).unwrap();
    assert_eq!(request["method"], "sampling/createMessage", "{request}");
    assert!(
        request.to_string().contains("The capital of France?"),
        "{request}"
    );
    let completion = json!({"model": "client-model", "role": "assistant",
        "content": {"type": "text", "text": "Paris."}, "stopReason": "endTurn"});
    let answers = InputResponses::from([("sample-1".to_owned(), completion)]);
    client
        .update_task(UpdateTaskParams::new(id.clone(), answers))
        .await
        .expect("tasks/update");
    let result = completed(&until_done(&client, &id).await);
    assert_eq!(
        result["content"][0]["text"], "LLM response: Paris.",
        "{result}"
    );
    client.cancel().await.expect("close");
}
