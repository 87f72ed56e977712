//! rmcp's client speaking MCP 2026-07-28 to `toolhost serve-mcp`, over stdio and streamable
//! HTTP: `server/discover` instead of `initialize`, lists with caching hints, a call, a call
//! whose approval comes back as an `InputRequiredResult` and is answered in the retry, a
//! changed or reused `requestState` refused, `subscriptions/listen` told of a rebuilt plugin and of a
//! changed resource file, and a tool's own questions and sampling asked through the rounds.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, ClientCapabilities, ClientConfig,
    ElicitRequestParams, ElicitResult, ElicitationAction, ErrorCode, Implementation,
    ProtocolVersion, ReadResourceRequestParams, ServerNotification, SubscriptionFilter,
};
#[allow(deprecated)] // sampling is deprecated by SEP-2577, and still in 2026-07-28
use rmcp::model::{CreateMessageRequestParams, CreateMessageResult};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RequestContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientHandler, ErrorData, RoleClient, ServiceError};
use serde_json::json;
use toolhost_tests::{Fixture, TestRoot};

use super::{audited_calls, call, conformance_fixture, root, stdio_transport, HttpServer};

/// A client of 2026-07-28 that declares form elicitation and approves each call once,
/// keeping the questions it was asked.
#[derive(Clone, Default)]
struct Approving {
    asked: Arc<Mutex<Vec<String>>>,
}

impl ClientHandler for Approving {
    fn get_info(&self) -> ClientConfig {
        let capabilities: ClientCapabilities =
            serde_json::from_value(json!({"elicitation": {"form": {}}})).unwrap();
        ClientConfig::new(capabilities, Implementation::new("stateless-test", "1.0"))
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let ElicitRequestParams::FormElicitationParams { message, .. } = request else {
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        };
        let answer = match message.ends_with("Approve?") {
            true => json!({"decision": "once"}),
            false => json!({"username": "ada", "email": "ada@example.com"}),
        };
        self.asked.lock().unwrap().push(message);
        Ok(ElicitResult::new(ElicitationAction::Accept).with_content(answer))
    }
}

type Client = RunningService<RoleClient, Approving>;

fn modern() -> ClientLifecycleMode {
    ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    }
}

/// `toolhost serve-mcp` over stdio on `root`, discovered by a 2026-07-28 client `handler`.
pub(crate) async fn discovered<H: ClientHandler>(
    root: &TestRoot,
    handler: H,
) -> RunningService<RoleClient, H> {
    let transport = stdio_transport(root);
    handler
        .serve_with_lifecycle(transport, modern())
        .await
        .expect("server/discover")
}

/// A root serving the conformance plugin's tool `name` (as a user tool).
fn conformance_root(name: &str) -> TestRoot {
    let root = TestRoot::new();
    root.tool("usr", name, conformance_fixture(name));
    root
}

/// The first round of `question`: the ids of the input requests of its
/// `InputRequiredResult`, with the requests as JSON.
async fn first_round<H: ClientHandler>(
    client: &RunningService<RoleClient, H>,
    question: &CallToolRequestParams,
) -> serde_json::Map<String, serde_json::Value> {
    let first = client
        .call_tool_once(question.clone())
        .await
        .expect("tools/call once");
    let CallToolResponse::InputRequired(input) = first else {
        panic!("not an InputRequiredResult: {first:?}")
    };
    let requests = input.input_requests.as_ref().expect("inputRequests");
    let serde_json::Value::Object(requests) = serde_json::to_value(requests).unwrap() else {
        panic!("inputRequests is not an object")
    };
    requests
}

async fn exercise(client: &Client, approving: &Approving, root: &TestRoot) {
    // Discovered, not initialised: the version is 2026-07-28 and the server says who it is.
    let server = client.peer_info().expect("server/discover's answer");
    assert_eq!(server.protocol_version, ProtocolVersion::V_2026_07_28);
    let name = server.server_info.as_ref().map(|i| i.name.clone());
    assert_eq!(name.as_deref(), Some("toolhost"));
    assert!(server.capabilities.tools.is_some(), "{server:?}");

    // Lists in name order, fresh for 10 s, the same for every caller (no token).
    let listed = client.list_tools(None).await.expect("tools/list");
    let names: Vec<&str> = listed.tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, ["echo", "governed", "noop", "versioned"]);
    assert_eq!(listed.ttl_ms, Some(10_000), "{listed:?}");
    assert_eq!(listed.cache_scope, Some(CacheScope::Public));
    let prompts = client.list_prompts(None).await.expect("prompts/list");
    assert_eq!(prompts.ttl_ms, Some(10_000));

    let echoed = client
        .call_tool(call("echo", json!({"text": "stateless"})))
        .await
        .expect("tools/call");
    assert_eq!(echoed.is_error, Some(false), "{echoed:?}");
    let text = serde_json::to_value(&echoed.content).unwrap();
    assert_eq!(text[0]["text"], r#"{"text":"stateless"}"#, "{text}");

    // `noop`'s policy asks: the first answer is an InputRequiredResult with the approval form
    // and a sealed requestState; rmcp's client answers it and retries.
    let approved = client
        .call_tool(call("noop", json!({"city": "Paris"})))
        .await
        .expect("tools/call with an approval");
    assert_eq!(approved.is_error, Some(false), "{approved:?}");
    let asked = approving.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert!(
        asked[0].contains("'noop'") && asked[0].contains("Paris"),
        "{asked:?}"
    );
    // The first round ran nothing: one record, the approved call.
    let calls = audited_calls(root, "noop");
    assert_eq!(calls.len(), 1, "{calls:?}");
    let last = calls.last().expect("noop's audit record");
    assert_eq!(last["outcome"], "success", "{calls:?}");
    assert_eq!(last["approval"]["source"], "user: approved once", "{last}");

    // The same question, answered with a requestState that was changed on the way: refused
    // with invalid params, and the tool does not run.
    let first = client
        .call_tool_once(call("noop", json!({"city": "Rome"})))
        .await
        .expect("tools/call once");
    let CallToolResponse::InputRequired(input) = first else {
        panic!("not an InputRequiredResult: {first:?}")
    };
    let requests = input.input_requests.as_ref().expect("inputRequests");
    assert!(requests.contains_key("approval"), "{requests:?}");
    let state = input.request_state.clone().expect("requestState");
    let mut tampered = state.clone().into_bytes();
    let middle = tampered.len() / 2;
    tampered[middle] = if tampered[middle] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).unwrap();
    let answers = || {
        std::collections::BTreeMap::from([(
            "approval".to_owned(),
            json!({"action": "accept", "content": {"decision": "once"}}),
        )])
    };
    let ran_before = audited_calls(root, "noop").len();
    let refused = client
        .call_tool_once(
            call("noop", json!({"city": "Rome"}))
                .with_input_responses(answers())
                .with_request_state(tampered),
        )
        .await;
    match refused {
        Err(ServiceError::McpError(e)) => {
            assert_eq!(e.code, ErrorCode::INVALID_PARAMS, "{e:?}");
            assert!(e.message.contains("requestState"), "{e:?}");
        }
        other => panic!("a changed requestState was not refused: {other:?}"),
    }
    // The state given for Rome does not approve a call to Oslo either.
    let elsewhere = client
        .call_tool_once(
            call("noop", json!({"city": "Oslo"}))
                .with_input_responses(answers())
                .with_request_state(state.clone()),
        )
        .await;
    assert!(
        matches!(&elsewhere, Err(ServiceError::McpError(e)) if e.code == ErrorCode::INVALID_PARAMS),
        "{elsewhere:?}"
    );
    assert_eq!(audited_calls(root, "noop").len(), ran_before);
    // The state as given, with the answer: the call runs.
    let retry = || {
        call("noop", json!({"city": "Rome"}))
            .with_input_responses(answers())
            .with_request_state(state.clone())
    };
    let answered = client.call_tool_once(retry()).await.expect("the retry");
    let CallToolResponse::Complete(answered) = answered else {
        panic!("not a result: {answered:?}")
    };
    assert_eq!(answered.is_error, Some(false), "{answered:?}");
    // An approval is good once: the same retry sent again is refused and runs nothing.
    let ran = audited_calls(root, "noop").len();
    assert_eq!(ran, ran_before + 1);
    match client.call_tool_once(retry()).await {
        Err(ServiceError::McpError(e)) => {
            assert_eq!(e.code, ErrorCode::INVALID_PARAMS, "{e:?}");
            assert!(e.message.contains("already used"), "{e:?}");
        }
        other => panic!("a used requestState was accepted again: {other:?}"),
    }
    assert_eq!(audited_calls(root, "noop").len(), ran);

    // subscriptions/listen: a rebuilt plugin is told on the listening request.
    let filter = SubscriptionFilter::builder()
        .tools_list_changed()
        .prompts_list_changed()
        .build();
    let mut subscription = client.listen(filter).await.expect("subscriptions/listen");
    assert_eq!(subscription.acknowledged().tools_list_changed, Some(true));
    root.replace("usr/tools/versioned.so", Fixture::VersionedV2);
    let told = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            match subscription.next().await.expect("a notification") {
                Some(ServerNotification::ToolListChangedNotification(_)) => return,
                Some(_) => continue,
                None => panic!("the subscription ended"),
            }
        }
    })
    .await;
    assert!(
        told.is_ok(),
        "no tools/list_changed within 30 s of the rebuild"
    );
    subscription
        .cancel()
        .await
        .expect("cancel the subscription");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2026_07_28_client_over_stdio_discovers_lists_calls_is_asked_and_listens() {
    let root = root();
    let transport = stdio_transport(&root);
    let approving = Approving::default();
    let client = approving
        .clone()
        .serve_with_lifecycle(transport, modern())
        .await
        .expect("server/discover");
    exercise(&client, &approving, &root).await;
    client.cancel().await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2026_07_28_client_over_http_discovers_lists_calls_is_asked_and_listens() {
    let root = root();
    // Stateless HTTP (no --sessions): nothing is kept between the rounds of a call.
    let server = HttpServer::start(&root, &["--allow-writes-without-token"]);
    let _ = rustls::crypto::ring::default_provider().install_default();
    let transport = StreamableHttpClientTransport::from_uri(server.url.clone());
    let approving = Approving::default();
    let client = approving
        .clone()
        .serve_with_lifecycle(transport, modern())
        .await
        .expect("server/discover");
    exercise(&client, &approving, &root).await;
    client.cancel().await.expect("close");
}

/// A tool's own question (`Context::elicit`) reaches a 2026-07-28 client in an
/// `InputRequiredResult` (`elicit-1`); the retry runs the tool again, and its question gets
/// the answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tools_question_reaches_a_2026_07_28_client_through_the_round_trip() {
    let root = conformance_root("test_elicitation");
    let approving = Approving::default();
    let client = discovered(&root, approving.clone()).await;
    let question = call("test_elicitation", json!({"message": "Who are you?"}));
    let asked = first_round(&client, &question).await;
    let asked: Vec<&String> = asked.keys().collect();
    assert_eq!(asked, ["elicit-1"]);
    let answered = client.call_tool(question).await.expect("tools/call");
    assert_eq!(answered.is_error, Some(false), "{answered:?}");
    let text = serde_json::to_string(&answered.content).unwrap();
    assert!(
        text.contains("accept") && text.contains("ada@example.com"),
        "{text}"
    );
    assert_eq!(*approving.asked.lock().unwrap(), ["Who are you?"]);
    client.cancel().await.expect("close");
}

/// A client of 2025-11-25 still initialises and gets no 2026-07-28 fields.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2025_11_25_client_is_served_as_before() {
    let root = TestRoot::new();
    root.tool("usr", "noop", Fixture::Noop);
    let transport = stdio_transport(&root);
    let info = ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("legacy-test", "1.0"),
    )
    .with_protocol_version(ProtocolVersion::V_2025_11_25);
    let client = rmcp::ServiceExt::serve(info, transport)
        .await
        .expect("initialize");
    let server = client.peer_info().expect("initialize's answer");
    assert_eq!(server.protocol_version, ProtocolVersion::V_2025_11_25);
    let listed = client.list_tools(None).await.expect("tools/list");
    assert_eq!(listed.ttl_ms, None, "{listed:?}");
    assert_eq!(listed.result_type, None, "{listed:?}");
    client.cancel().await.expect("close");
}

/// A 2026-07-28 client that declares sampling and answers every `sampling/createMessage`
/// with one sentence, keeping the prompts it was given.
#[derive(Clone, Default)]
struct Sampling {
    prompts: Arc<Mutex<Vec<String>>>,
}

#[allow(deprecated)] // sampling is deprecated by SEP-2577, and still in 2026-07-28
impl ClientHandler for Sampling {
    fn get_info(&self) -> ClientConfig {
        let capabilities: ClientCapabilities =
            serde_json::from_value(json!({"sampling": {}})).unwrap();
        ClientConfig::new(capabilities, Implementation::new("sampling-test", "1.0"))
    }

    async fn create_message(
        &self,
        request: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        let asked = serde_json::to_value(&request.messages).unwrap();
        self.prompts.lock().unwrap().push(asked.to_string());
        let answer = json!({
            "model": "client-model",
            "role": "assistant",
            "content": {"type": "text", "text": "Paris, said the client's model."},
            "stopReason": "endTurn",
        });
        Ok(serde_json::from_value(answer).unwrap())
    }
}

/// A tool's `Context::sample` reaches a 2026-07-28 client as the input request `sample-1`
/// of an `InputRequiredResult`; the retry carries the client's completion, and the tool's
/// answer is built from it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tools_sampling_reaches_a_2026_07_28_client_through_the_round_trip() {
    let root = conformance_root("test_sampling");
    let sampling = Sampling::default();
    let client = discovered(&root, sampling.clone()).await;
    let question = call("test_sampling", json!({"prompt": "The capital of France?"}));
    let requests = first_round(&client, &question).await;
    let asked: Vec<&String> = requests.keys().collect();
    assert_eq!(asked, ["sample-1"]);
    let request = &requests["sample-1"];
    assert_eq!(request["method"], "sampling/createMessage", "{request}");
    assert!(sampling.prompts.lock().unwrap().is_empty());

    let answered = client.call_tool(question).await.expect("tools/call");
    assert_eq!(answered.is_error, Some(false), "{answered:?}");
    let text = serde_json::to_value(&answered.content).unwrap();
    assert_eq!(
        text[0]["text"], "LLM response: Paris, said the client's model.",
        "{text}"
    );
    let prompts = sampling.prompts.lock().unwrap().clone();
    assert_eq!(prompts.len(), 1, "{prompts:?}");
    assert!(prompts[0].contains("The capital of France?"), "{prompts:?}");
    client.cancel().await.expect("close");
}

/// A 2026-07-28 client listening for a resource hears the file behind it change, and hears
/// the list change when a file is added; a resource it did not name is not told.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listening_2026_07_28_client_hears_its_resource_change_and_the_list_grow() {
    let root = TestRoot::new();
    root.tool("usr", "noop", Fixture::Noop);
    root.write("usr/resources/notes.txt", "first notes\n");
    root.write("usr/resources/other.txt", "not listened to\n");
    let client = discovered(&root, Approving::default()).await;
    let listed = client.list_resources(None).await.expect("resources/list");
    let uris: Vec<&str> = listed.resources.iter().map(|r| r.uri.as_str()).collect();
    let notes = "toolhost://resources/notes.txt";
    assert_eq!(uris, [notes, "toolhost://resources/other.txt"]);

    let filter = SubscriptionFilter::builder()
        .resource_subscription(notes)
        .resources_list_changed()
        .build();
    let mut subscription = client.listen(filter).await.expect("subscriptions/listen");
    let acknowledged = subscription.acknowledged().clone();
    assert_eq!(acknowledged.resources_list_changed, Some(true));
    assert_eq!(
        acknowledged.resource_subscriptions.as_deref(),
        Some(&[notes.to_owned()][..])
    );
    let mut next = async || {
        tokio::time::timeout(Duration::from_secs(30), subscription.next())
            .await
            .expect("a notification within 30 s")
            .expect("the subscription's stream")
            .expect("the subscription went on")
    };

    // The other file changes first: nothing is said of it; then notes.txt changes.
    root.write("usr/resources/other.txt", "changed, unheard\n");
    tokio::time::sleep(Duration::from_millis(500)).await;
    root.write("usr/resources/notes.txt", "second notes\n");
    match next().await {
        ServerNotification::ResourceUpdatedNotification(n) => assert_eq!(n.params.uri, notes),
        other => panic!("not notes.txt's update: {other:?}"),
    }
    let read = client
        .read_resource(ReadResourceRequestParams::new(notes))
        .await
        .expect("resources/read");
    let read = serde_json::to_string(&read.contents).unwrap();
    assert!(read.contains("second notes"), "{read}");

    root.write("usr/resources/added.txt", "a new file\n");
    loop {
        match next().await {
            ServerNotification::ResourceListChangedNotification(_) => break,
            // The same change may be told twice; never another resource's update.
            ServerNotification::ResourceUpdatedNotification(n) => assert_eq!(n.params.uri, notes),
            other => panic!("not the list change: {other:?}"),
        }
    }
    let listed = client.list_resources(None).await.expect("resources/list");
    assert_eq!(listed.resources.len(), 3, "{listed:?}");
    subscription
        .cancel()
        .await
        .expect("cancel the subscription");
    client.cancel().await.expect("close");
}
