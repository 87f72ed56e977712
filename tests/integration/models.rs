//! Real models: the OpenAI-compatible adapter against the tests' own server
//! (`toolhost_tests::fake_llm`), which replays streams byte for byte.

use serde_json::{json, Value};
use std::sync::Arc;
use toolhost::output::{Captured, OutputKind};
use toolhost::{Agent, LoopError, LoopOptions, Role};
use toolhost_openai::{ModelsConfig, OpenAiModel};
use toolhost_tests::fake_llm::{
    sse_bytes, text_events, text_reply, tool_calls_reply, Answer, FakeLlm, Piece,
};
use toolhost_tests::{Fixture, TestRoot};

pub(crate) const KEY: &str = "sk-test-0123456789abcdef";

/// A root with `response`, `echo` and the secret extensions, a secrets file holding the API
/// key, and `usr/models.toml` pointing at `server` with `extra` lines.
pub(crate) fn root(server: &FakeLlm, extra: &str) -> TestRoot {
    let root = TestRoot::new();
    root.tool("core", "response", Fixture::Response);
    root.tool("usr", "echo", Fixture::Echo);
    root.secret_extensions();
    root.write("usr/secrets.env", format!("LLM_KEY={KEY}\n"));
    let config = format!(
        "[models.fake]\nbase_url = \"{}\"\nmodel = \"fake-1\"\napi_key_secret = \"LLM_KEY\"\n\
         retry_initial_ms = 10\n{extra}\n",
        server.url()
    );
    root.write("usr/models.toml", config);
    root
}

pub(crate) fn model(root: &TestRoot, agent: &Agent) -> OpenAiModel {
    let models = ModelsConfig::load(agent.host().layout(), "default").unwrap();
    let _ = root;
    OpenAiModel::new(models.get(None).unwrap().clone(), &agent.host().secrets()).unwrap()
}

pub(crate) fn run(
    root: &TestRoot,
    message: &str,
) -> (Result<String, LoopError>, Arc<Agent>, Arc<Captured>) {
    let (agent, output) = root.agent("default");
    let model = model(root, &agent);
    let result =
        toolhost_tests::block_on(agent.monologue(&model, message, &LoopOptions::default()));
    (result, agent, output)
}

pub(crate) fn request(tool: &str, args: Value) -> String {
    json!({"thoughts": ["next"], "headline": format!("Calling {tool}"), "tool_name": tool, "tool_args": args}).to_string()
}

pub(crate) fn everything_written(root: &TestRoot, agent: &Agent, output: &Captured) -> String {
    let mut all = format!("{:?}{:?}{:?}", agent.history(), agent.log(), output.lines());
    if let Ok(sessions) = std::fs::read_dir(root.path().join("usr/sessions")) {
        for dir in sessions.flatten() {
            for file in ["history.jsonl", "log.jsonl"] {
                all += &std::fs::read_to_string(dir.path().join(file)).unwrap_or_default();
            }
        }
    }
    all
}

#[test]
fn a_streamed_json_protocol_session_calls_a_tool_and_sums_the_usage() {
    let server = FakeLlm::start();
    server.push(text_reply(
        &request("echo", json!({"q": 1})),
        Some((100, 20)),
    ));
    server.push(text_reply(
        &request("response", json!({"text": "Echoed."})),
        Some((150, 10)),
    ));
    let root = root(&server, "structured_output = true");
    let (agent, output) = root.agent("default");
    agent
        .record_session(&root.path().join("usr/sessions"))
        .unwrap();
    let model = model(&root, &agent);
    let result = toolhost_tests::block_on(agent.monologue(
        &model,
        "Echo, then answer.",
        &LoopOptions::default(),
    ));
    assert_eq!(result.unwrap(), "Echoed.");
    assert_eq!(agent.usage().total_tokens, 280);
    assert_eq!(agent.usage().prompt_tokens, 250);
    let roles: Vec<Role> = agent.history().iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [Role::User, Role::Ai, Role::Tool, Role::Ai, Role::Tool]
    );
    // The text was shown as it streamed, in pieces.
    let chunks = output
        .lines()
        .iter()
        .filter(|(k, _)| *k == OutputKind::ModelChunk)
        .count();
    assert!(chunks > 10, "{chunks}");
    // Usage is in the log, per reply.
    let usage: Vec<Value> = agent
        .log()
        .iter()
        .filter_map(|i| i.kvps.get().get("usage").cloned())
        .collect();
    assert_eq!(usage[0]["total_tokens"], 120);
    // What was sent: the key in the header only; the tool result as a user message.
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let auth = requests[0]
        .headers
        .iter()
        .find(|(k, _)| k == "authorization")
        .unwrap();
    assert_eq!(auth.1, format!("Bearer {KEY}"));
    assert_eq!(requests[1].body["model"], "fake-1");
    assert_eq!(requests[1].body["response_format"]["type"], "json_schema");
    let messages = requests[1].body["messages"].as_array().unwrap();
    assert!(
        messages[3]["content"]
            .as_str()
            .unwrap()
            .contains("tool_result"),
        "{messages:?}"
    );
    assert!(!everything_written(&root, &agent, &output).contains(KEY));
    // Both requests went over one connection.
    assert_eq!(server.connections(), 1);
}

#[test]
fn structured_output_is_built_from_the_tools_and_falls_back_to_names_after_a_null() {
    let server = FakeLlm::start();
    // The per-tool form (oneOf) answered with `null`, as a grammar converter that cannot take
    // it does; asked again with the names form, the model answers.
    server.push(text_reply("null", Some((10, 1))));
    server.push(text_reply(&request("echo", json!({"q": 1})), Some((10, 5))));
    server.push(text_reply(
        &request("response", json!({"text": "Done."})),
        Some((10, 5)),
    ));
    // Thoughts first (Agent Zero's order; the default is last), to see the order kept.
    let root = root(
        &server,
        "structured_output = true\nmax_thoughts = 3\nthoughts = \"first\"",
    );
    let (result, agent, _) = run(&root, "Echo, then answer.");
    assert_eq!(result.unwrap(), "Done.");
    let requests = server.requests();
    assert_eq!(requests.len(), 3, "the null reply was asked again at once");
    let schema = |i: usize| requests[i].body["response_format"]["json_schema"]["schema"].clone();
    let branches = schema(0)["oneOf"].as_array().cloned().unwrap();
    let names: Vec<&Value> = branches
        .iter()
        .map(|b| &b["properties"]["tool_name"]["const"])
        .collect();
    assert!(
        names.contains(&&json!("echo")) && names.contains(&&json!("response")),
        "{names:?}"
    );
    for later in [1, 2] {
        let names = &schema(later)["properties"]["tool_name"]["enum"];
        assert!(
            names.as_array().unwrap().contains(&json!("echo")),
            "{names}"
        );
    }
    assert_eq!(schema(1)["properties"]["thoughts"]["maxItems"], 3);
    // On the wire the keys are in Agent Zero's order.
    let text = &requests[1].text;
    let at = |key: &str| text.find(&format!("\"{key}\":{{")).unwrap();
    assert!(
        at("thoughts") < at("headline") && at("headline") < at("tool_name"),
        "{text}"
    );
    assert!(at("tool_name") < at("tool_args"), "{text}");
    // The usage of the null reply is counted too.
    assert_eq!(agent.usage().completion_tokens, 11);
}

#[test]
fn reasoning_deltas_reach_the_log_and_not_the_history() {
    use toolhost_tests::fake_llm::{chunk, sse};
    let server = FakeLlm::start();
    let reply = request("response", json!({"text": "Four."}));
    let mut events = vec![
        chunk(json!({"role": "assistant"}), None),
        chunk(json!({"reasoning_content": "Two and two "}), None),
        chunk(json!({"reasoning_content": "make four."}), None),
    ];
    events.extend(text_events(&reply, None));
    server.push(Answer::Stream(sse(&events)));
    let root = root(&server, "");
    let (result, agent, _) = run(&root, "2+2?");
    assert_eq!(result.unwrap(), "Four.");
    let logged: Vec<Value> = agent
        .log()
        .iter()
        .filter_map(|i| i.kvps.get().get("reasoning").cloned())
        .collect();
    assert_eq!(logged, [json!("Two and two make four.")]);
    let history = format!("{:?}", agent.history());
    assert!(!history.contains("make four"), "{history}");
}

#[test]
fn the_stream_points_see_the_reply_and_the_reasoning_in_order() {
    use toolhost_tests::fake_llm::{chunk, sse};
    let server = FakeLlm::start();
    let reply = request("response", json!({"text": "Four."}));
    let mut events = vec![
        chunk(json!({"role": "assistant"}), None),
        chunk(json!({"reasoning_content": "Two and two "}), None),
        chunk(json!({"reasoning_content": "make four."}), None),
    ];
    events.extend(text_events(&reply, None));
    server.push(Answer::Stream(sse(&events)));
    let root = root(&server, "");
    for point in [
        "response_stream_chunk",
        "response_stream",
        "response_stream_end",
        "reasoning_stream_chunk",
        "reasoning_stream",
        "reasoning_stream_end",
    ] {
        root.extension("usr", point, "_50_model", Fixture::ModelExt);
    }
    let (result, agent, output) = run(&root, "2+2?");
    assert_eq!(result.unwrap(), "Four.");
    let list = |point: &str| -> Vec<Value> {
        serde_json::from_value(agent.loop_data(point).unwrap_or_default()).unwrap_or_default()
    };
    let joined =
        |items: Vec<Value>| -> String { items.iter().map(|c| c.as_str().unwrap()).collect() };
    // Every piece, in order: together they are the reply; the text so far grows with each.
    let chunks = list("response_stream_chunk");
    assert!(chunks.len() > 5, "{chunks:?}");
    assert_eq!(joined(chunks.clone()), reply);
    let lengths: Vec<u64> = list("response_stream")
        .iter()
        .map(|n| n.as_u64().unwrap())
        .collect();
    assert_eq!(lengths.len(), chunks.len());
    assert!(lengths.windows(2).all(|w| w[0] < w[1]), "{lengths:?}");
    assert_eq!(*lengths.last().unwrap(), reply.len() as u64);
    assert_eq!(agent.loop_data("response_stream_end"), Some(json!(reply)));
    // The reasoning the same, apart from the text.
    assert_eq!(
        joined(list("reasoning_stream_chunk")),
        "Two and two make four."
    );
    assert_eq!(list("reasoning_stream").len(), 2);
    assert_eq!(
        agent.loop_data("reasoning_stream_end"),
        Some(json!("Two and two make four."))
    );
    // The extension changed what is shown live (upper case); the reply kept is the model's.
    let shown: String = output
        .lines()
        .iter()
        .filter(|(k, _)| matches!(k, OutputKind::ModelChunk | OutputKind::ModelEnd))
        .map(|(_, text)| text.as_str())
        .collect();
    assert_eq!(shown, reply.to_uppercase());
    let ai = agent.history().into_iter().find(|m| m.role == Role::Ai);
    assert_eq!(ai.unwrap().content.as_str(), reply);
    let history = format!("{:?}", agent.history());
    assert!(!history.contains("make four"), "{history}");
}

#[test]
fn split_lines_crlf_and_data_without_a_space_are_read() {
    let server = FakeLlm::start();
    let reply = request("response", json!({"text": "Split fine."}));
    let mut bytes = Vec::new();
    for (i, event) in text_events(&reply, Some((5, 5))).iter().enumerate() {
        // Alternate `data: ` and `data:`, and end every line with CRLF.
        let prefix = if i % 2 == 0 { "data: " } else { "data:" };
        bytes.extend(format!("{prefix}{event}\r\n\r\n").into_bytes());
    }
    bytes.extend(b"data: [DONE]\r\n\r\n");
    // Pieces of 7 bytes: every line is split across reads, CRLFs too.
    let pieces = bytes.chunks(7).map(|c| Piece::Bytes(c.to_vec())).collect();
    server.push(Answer::Stream(pieces));
    let root = root(&server, "");
    let (result, agent, _) = run(&root, "Answer.");
    assert_eq!(result.unwrap(), "Split fine.");
    assert_eq!(agent.usage().total_tokens, 10);
}

#[test]
fn native_calls_in_pieces_run_in_parallel_and_results_go_back_by_id() {
    let server = FakeLlm::start();
    server.push(tool_calls_reply(&[
        ("call_a", "echo", r#"{"who": "Ada", "n": 1}"#),
        ("call_b", "echo", r#"{"who": "Bob"}"#),
    ]));
    server.push(tool_calls_reply(&[(
        "call_c",
        "echo",
        r#"{"third": true}"#,
    )]));
    server.push(text_reply("All three echoed.", Some((1, 1))));
    let root = root(&server, "tool_protocol = \"native\"");
    let (result, agent, _) = run(&root, "Echo three times.");
    assert_eq!(result.unwrap(), "All three echoed.");
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let tools: Vec<&str> = requests[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["echo", "response"]);
    // The second request: the assistant's two calls, then one tool message per call.
    let messages = requests[1].body["messages"].as_array().unwrap();
    let n = messages.len();
    assert_eq!(
        messages[n - 3]["tool_calls"][0]["function"]["arguments"],
        r#"{"who": "Ada", "n": 1}"#
    );
    assert_eq!(
        (
            messages[n - 2]["role"].as_str(),
            messages[n - 2]["tool_call_id"].as_str()
        ),
        (Some("tool"), Some("call_a"))
    );
    assert_eq!(messages[n - 1]["tool_call_id"], "call_b");
    assert!(
        messages[n - 2]["content"].as_str().unwrap().contains("Ada"),
        "{messages:?}"
    );
    // The third: the single call's result carries its id, recorded in the history too.
    let last = requests[2].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["tool_call_id"], "call_c");
    assert!(agent
        .history()
        .iter()
        .any(|m| m.tool_call_id.as_deref() == Some("call_c")));
    // Several calls ran as one `parallel` request.
    assert!(agent
        .log()
        .iter()
        .any(|i| i.heading == "Using tool 'parallel'"));
}

#[test]
fn a_whole_json_body_works_without_streaming() {
    let server = FakeLlm::start();
    let reply = request("response", json!({"text": "Not streamed."}));
    server.push(Answer::Json(json!({
        "choices": [{"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}
    })));
    let root = root(&server, "stream = false");
    let (result, agent, _) = run(&root, "Answer.");
    assert_eq!(result.unwrap(), "Not streamed.");
    assert_eq!(agent.usage().total_tokens, 7);
    assert_eq!(server.requests()[0].body["stream"], false);
}

#[test]
fn models_toml_is_layered_per_profile() {
    let root = TestRoot::new();
    root.write("usr/models.toml", "default = \"local\"\n[models.local]\nbase_url = \"http://a/v1\"\nmodel = \"small\"\ncontext_tokens = 4096\n[models.other]\nbase_url = \"http://b/v1\"\nmodel = \"o\"\n");
    root.write(
        "usr/agents/dev/models.toml",
        "default = \"other\"\n[models.local]\nmodel = \"big\"\ntool_protocol = \"native\"\n",
    );
    let layout = toolhost::Layout::new(root.path());
    let plain = ModelsConfig::load(&layout, "default").unwrap();
    assert_eq!(plain.get(None).unwrap().model, "small");
    let dev = ModelsConfig::load(&layout, "dev").unwrap();
    assert_eq!(dev.get(None).unwrap().name, "other");
    let local = dev.get(Some("local")).unwrap();
    assert_eq!(
        (
            local.model.as_str(),
            local.base_url.as_str(),
            local.context_tokens
        ),
        ("big", "http://a/v1", 4096)
    );
    assert_eq!(local.tool_protocol, toolhost::ToolProtocol::Native);
    let unknown = dev.get(Some("nope")).unwrap_err().to_string();
    assert_eq!(
        unknown,
        "no model named 'nope' in models.toml; configured: local, other"
    );
    root.write(
        "usr/models.toml",
        "[models.x]\nbase_url = \"http://a/v1\"\nmodel = \"m\"\ncolour = \"red\"\n",
    );
    let bad = ModelsConfig::load(&layout, "default")
        .unwrap_err()
        .to_string();
    // The file, the model and the key, with the value as written.
    assert!(
        bad.contains("usr/models.toml: [models.x] colour = \"red\": unknown field `colour`"),
        "{bad}"
    );
    // A header HTTP does not allow is a mistake of the file, not a server that is down.
    root.write(
        "usr/models.toml",
        "[models.x]\nbase_url = \"http://a/v1\"\nmodel = \"m\"\n[models.x.headers]\n\"X Bad\" = \"1\"\n",
    );
    let bad = ModelsConfig::load(&layout, "default")
        .unwrap_err()
        .to_string();
    assert!(
        bad.contains("[models.x] headers = ") && bad.contains("\"X Bad\" is not a header name"),
        "{bad}"
    );
}

#[test]
fn a_long_session_keeps_going_within_a_small_context_window() {
    let server = FakeLlm::start();
    let big = "z".repeat(6000);
    for i in 0..6 {
        // Each big reply as one body: streamed in pieces of 5 characters, 2 ms apart, the six
        // took 20 s, and the stream is not what this test is about.
        let events = text_events(&request("echo", json!({"i": i, "blob": big})), None);
        server.push(Answer::Whole(sse_bytes(&events)));
    }
    server.push(text_reply(
        &request("response", json!({"text": "Survived."})),
        None,
    ));
    let root = root(&server, "context_tokens = 6000");
    let (agent, _) = root.agent("default");
    let model = model(&root, &agent);
    let options = LoopOptions::default();
    let result = toolhost_tests::block_on(agent.monologue(&model, "Echo a lot.", &options));
    assert_eq!(result.unwrap(), "Survived.");
    let last = server.requests().last().unwrap().body.clone();
    let sent = last["messages"].to_string();
    // 6,000 tokens less a quarter for the reply, at 3 bytes a token.
    assert!(sent.len() < 4500 * 3, "{}", sent.len());
    assert!(
        sent.contains("were cut to fit the model's context window"),
        "{sent}"
    );
    assert!(sent.contains("older messages were left out"), "{sent}");
}

#[test]
fn toolhost_chat_answers_each_line_and_prints_the_usage() {
    let server = FakeLlm::start();
    server.push(text_reply(&request("echo", json!({"x": 1})), Some((10, 5))));
    server.push(text_reply(
        &request("response", json!({"text": "First answer."})),
        Some((20, 5)),
    ));
    server.push(text_reply(
        &request("response", json!({"text": "Second answer."})),
        Some((30, 5)),
    ));
    let root = root(&server, "");
    let mut child = std::process::Command::new(toolhost_tests::toolhost_bin())
        .arg("--root")
        .arg(root.path())
        .arg("chat")
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"Echo, then answer.\nAgain.\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "First answer.\nSecond answer.\n"
    );
    assert!(
        stderr.contains("usage: 75 tokens (60 prompt, 15 completion)"),
        "{stderr}"
    );
    assert!(stderr.contains("session saved in"), "{stderr}");
    assert!(!stderr.contains(KEY));
}

/// Lines of a pipe, read on a thread.
fn lines_of(pipe: impl std::io::Read + Send + 'static) -> std::sync::mpsc::Receiver<String> {
    use std::io::BufRead;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(pipe).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    rx
}

/// The next line of `lines` that `pick` accepts (at most 30 s).
fn next_line(
    lines: &std::sync::mpsc::Receiver<String>,
    what: &str,
    pick: impl Fn(&str) -> bool,
) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) if pick(&line) => return line,
            Ok(line) => seen.push(line),
            Err(_) => panic!("no line {what}; saw {seen:?}"),
        }
    }
}

#[test]
fn toolhost_chat_reports_a_plugin_added_during_the_chat_and_calls_it() {
    let server = FakeLlm::start();
    server.push(text_reply(
        &request("response", json!({"text": "First."})),
        None,
    ));
    server.push(text_reply(&request("ver", json!({})), None));
    server.push(text_reply(
        &request("response", json!({"text": "Done."})),
        None,
    ));
    let root = root(&server, "");
    let mut child = std::process::Command::new(toolhost_tests::toolhost_bin())
        .arg("--root")
        .arg(root.path())
        .arg("chat")
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    let mut stdin = child.stdin.take().unwrap();
    let stdout = lines_of(child.stdout.take().unwrap());
    let stderr = lines_of(child.stderr.take().unwrap());
    stdin.write_all(b"Hello.\n").unwrap();
    next_line(&stdout, "answering the first message", |l| l == "First.");

    root.replace("usr/tools/ver.so", Fixture::Versioned);
    let line = next_line(&stderr, "reporting the new plugin", |l| {
        l.contains("ver.so")
    });
    assert!(
        line.starts_with("loaded usr/tools/ver.so [layer usr]: 0.1.0 (generation 1) in "),
        "{line}"
    );
    stdin.write_all(b"Call ver.\n").unwrap();
    drop(stdin);
    next_line(&stdout, "answering after calling the new plugin", |l| {
        l == "Done."
    });
    assert!(child.wait().unwrap().success());
    // The model was told what `ver` answered: the new plugin ran.
    let asked = server.requests();
    let last = asked.last().expect("requests").body.to_string();
    assert!(last.contains("v1"), "{last}");
}

#[test]
fn a_runaway_tool_answer_is_cut_to_the_models_context_and_kept_whole() {
    let server = FakeLlm::start();
    server.push(text_reply(
        &request("echo:big", json!({"bytes": 1_000_000})),
        None,
    ));
    server.push(text_reply(
        &request("response", json!({"text": "Still here."})),
        None,
    ));
    let root = root(&server, "context_tokens = 4096\nmax_tokens = 256");
    let (agent, _) = root.agent("default");
    let session = agent
        .record_session(&root.path().join("usr/sessions"))
        .unwrap();
    let model = model(&root, &agent);
    // Half of what 4,096 tokens leave for messages (3,840), at 3 bytes a token.
    assert_eq!(
        toolhost::Model::max_tool_answer_bytes(&model),
        Some(1920 * 3)
    );
    let options = LoopOptions::default();
    let result = toolhost_tests::block_on(agent.monologue(&model, "Echo a lot.", &options));
    assert_eq!(result.unwrap(), "Still here.");
    let sent = server.requests()[1].body["messages"].to_string();
    assert!(sent.len() < 4096 * 3, "{}", sent.len());
    assert!(
        sent.contains("more bytes cut (of 1000000) to fit the model's context"),
        "{sent}"
    );
    // The whole answer is beside the session, named in the note.
    let result = agent
        .history()
        .into_iter()
        .find(|m| m.role == Role::Tool)
        .unwrap();
    let file = result
        .content
        .as_str()
        .split("session folder: ")
        .nth(1)
        .unwrap()
        .trim_end_matches(']')
        .to_owned();
    let whole = std::fs::read(session.join(file)).unwrap();
    assert_eq!(whole.len(), 1_000_000);
    // The bound is the model's: a call outside a monologue keeps the host's (64 KiB).
    let r = toolhost_tests::block_on(agent.call_tool("echo:big", json!({"bytes": 100_000})));
    assert!(r.unwrap().message.contains("more bytes cut (of 100000);"));
}

/// A root where `test_image_content` (the conformance plugin's image tool) is in profile
/// `conformance`, and the model named in it is `fake` with `extra` lines.
fn image_root(server: &FakeLlm, extra: &str) -> TestRoot {
    let root = root(server, extra);
    let profile = "plugins/conformance/agents/conformance";
    root.tool(
        profile,
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
    root
}

fn image_session(
    extra: &str,
) -> (
    Vec<toolhost_tests::fake_llm::Recorded>,
    Arc<Agent>,
    TestRoot,
) {
    let server = FakeLlm::start();
    let native = extra.contains("native");
    match native {
        true => server.push(tool_calls_reply(&[("call_i", "test_image_content", "{}")])),
        false => server.push(text_reply(&request("test_image_content", json!({})), None)),
    }
    match native {
        true => server.push(text_reply("A red pixel.", None)),
        false => server.push(text_reply(
            &request("response", json!({"text": "A red pixel."})),
            None,
        )),
    }
    let root = image_root(&server, extra);
    let (agent, _) = root.agent("conformance");
    agent
        .record_session(&root.path().join("usr/sessions"))
        .unwrap();
    let model = model(&root, &agent);
    let options = LoopOptions::default();
    let result = toolhost_tests::block_on(agent.monologue(&model, "Show me.", &options));
    assert_eq!(result.unwrap(), "A red pixel.");
    (server.requests(), agent, root)
}

/// The red pixel the conformance tool returns.
fn red_pixel() -> Vec<u8> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../plugins/conformance/agents/conformance/resources/red-pixel.png"
    );
    std::fs::read(path).unwrap()
}

#[test]
fn a_tools_image_goes_to_a_vision_model_as_an_image_part_and_stays_a_file() {
    use base64::Engine;
    let url = format!(
        "data:image/png;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(red_pixel())
    );
    let image_part = json!({"type": "image_url", "image_url": {"url": url}});

    // JSON protocol: the result's user message is its text, then the image.
    let (requests, agent, root) = image_session("vision = true");
    let last = requests[1].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .cloned();
    let parts = last.unwrap()["content"].as_array().cloned().unwrap();
    assert_eq!(parts[0]["type"], "text");
    let text = parts[0]["text"].as_str().unwrap();
    assert!(text.contains("[image: image/png, "), "{text}");
    assert_eq!(parts[1], image_part);
    // The session names the file; the bytes are in it, never inline.
    let sessions = root.path().join("usr/sessions");
    let dir = std::fs::read_dir(&sessions)
        .unwrap()
        .flatten()
        .next()
        .unwrap()
        .path();
    let history = std::fs::read_to_string(dir.join("history.jsonl")).unwrap();
    assert!(!history.contains(&url[22..]), "{history}");
    let image = agent
        .history()
        .into_iter()
        .find(|m| !m.images.is_empty())
        .unwrap();
    let file = image.images[0].file.clone().unwrap();
    assert!(history.contains(file.to_str().unwrap()), "{history}");
    assert_eq!(std::fs::read(dir.join(file)).unwrap(), red_pixel());

    // Native protocol: a `role: tool` message has text only; the image follows in a user
    // message.
    let (requests, _, _) = image_session("vision = true\ntool_protocol = \"native\"");
    let messages = requests[1].body["messages"].as_array().cloned().unwrap();
    let n = messages.len();
    assert_eq!(messages[n - 2]["role"], "tool");
    assert!(messages[n - 2]["content"].is_string());
    assert_eq!(messages[n - 1]["role"], "user");
    assert_eq!(messages[n - 1]["content"][1], image_part);

    // Without vision the image is described in text only.
    let (requests, _, _) = image_session("");
    let last = requests[1].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .cloned();
    let content = last.unwrap()["content"].clone();
    assert!(
        content.as_str().unwrap().contains("[image: image/png, "),
        "{content}"
    );
    assert!(!requests[1].text.contains("image_url"));
}

/// SIGTERM while a turn waits for the model: the turn ends with its answer, no new message is
/// taken (the next line is never sent to the model), the session is saved and `chat` exits 0.
#[test]
fn sigterm_lets_the_turn_running_finish_and_takes_no_new_message() {
    let server = FakeLlm::start();
    let mut slow = vec![toolhost_tests::fake_llm::Piece::Pause(
        std::time::Duration::from_millis(1500),
    )];
    slow.extend(toolhost_tests::fake_llm::sse(
        &toolhost_tests::fake_llm::text_events(
            &request("response", json!({"text": "Done."})),
            None,
        ),
    ));
    server.push(toolhost_tests::fake_llm::Answer::Stream(slow));
    server.push(text_reply(
        &request("response", json!({"text": "Never."})),
        None,
    ));
    let root = root(&server, "");
    let mut child = std::process::Command::new(toolhost_tests::toolhost_bin())
        .arg("--root")
        .arg(root.path())
        .arg("chat")
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"First.\n").unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while server.requests().is_empty() {
        assert!(std::time::Instant::now() < deadline, "no request");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let pid = i32::try_from(child.id()).unwrap();
    // SAFETY: kill(2) with the pid of our own child, not reaped yet.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    // Sent after the signal: standard input stays open, and this line is not taken.
    stdin.write_all(b"Second.\n").unwrap();
    let out = child.wait_with_output().unwrap();
    drop(stdin);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "Done.\n", "{stderr}");
    assert!(stderr.contains("SIGTERM: stopping"), "{stderr}");
    assert!(stderr.contains("session saved in"), "{stderr}");
    assert_eq!(server.requests().len(), 1);
}
