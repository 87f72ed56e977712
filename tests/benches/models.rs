//! Real models, measured against the tests' own OpenAI-compatible server on loopback: the
//! loop's overhead per iteration when the server answers at once (both tool protocols, and the
//! scripted model in the same run), and the time from the first byte of a streamed reply
//! received to its first character shown.
//!
//! Run with `cargo bench -p toolhost-tests --bench models`; `-- large-event` measures one
//! streamed event of 5, 10 and 20 MB instead.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use toolhost::output::{Output, OutputKind, Silent};
use toolhost::{Agent, LoopOptions, Masked, Model, ScriptedModel};
use toolhost_openai::{ModelsConfig, OpenAiModel};
use toolhost_tests::fake_llm::{
    chunk, sse, sse_bytes, text_events, usage_chunk, Answer, FakeLlm, Piece,
};
use toolhost_tests::{Fixture, TestRoot};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn root(server: &FakeLlm, protocol: &str) -> TestRoot {
    let root = TestRoot::new();
    root.tool("usr", "noop", Fixture::Noop);
    root.tool("core", "response", Fixture::Response);
    let config = format!(
        "[models.bench]\nbase_url = \"{}\"\nmodel = \"m\"\ntool_protocol = \"{protocol}\"\n",
        server.url()
    );
    root.write("usr/models.toml", config);
    root
}

fn model(root: &TestRoot) -> OpenAiModel {
    let models = ModelsConfig::load(&toolhost::Layout::new(root.path()), "default").unwrap();
    OpenAiModel::new(
        models.get(None).unwrap().clone(),
        &toolhost::Secrets::empty(),
    )
    .unwrap()
}

/// The answer of iteration `i` (a call of `noop`, different each time), then the final one.
fn answers(protocol: &str, n: usize) -> Vec<Answer> {
    let call = |i: usize| match protocol {
        "native" => {
            let call = json!({"index": 0, "id": format!("c{i}"), "type": "function",
                              "function": {"name": "noop", "arguments": format!("{{\"a\":{i}}}")}});
            vec![
                chunk(
                    json!({"role": "assistant", "tool_calls": [call]}),
                    Some("tool_calls"),
                ),
                usage_chunk(10, 5),
            ]
        }
        _ => text_events(
            &json!({"tool_name": "noop", "tool_args": {"a": i}}).to_string(),
            Some((10, 5)),
        ),
    };
    let last = text_events(
        &json!({"tool_name": "response", "tool_args": {"text": "done"}}).to_string(),
        None,
    );
    (0..n)
        .map(call)
        .chain([last])
        .map(|events| Answer::Whole(sse_bytes(&events)))
        .collect()
}

fn monologue(
    runtime: &tokio::runtime::Runtime,
    root: &TestRoot,
    model: &dyn Model,
    n: usize,
) -> Duration {
    let agent = Agent::with_output(root.host(), "A0", "default", Arc::new(Silent)).unwrap();
    let options = LoopOptions::default().with_max_iterations(n + 1);
    let start = Instant::now();
    let answer = runtime
        .block_on(agent.monologue(model, "go", &options))
        .unwrap();
    assert_eq!(answer, "done");
    start.elapsed() / (n as u32 + 1)
}

/// `n` iterations per run: the history, sent whole with every request, grows with `n`.
fn iteration(runtime: &tokio::runtime::Runtime, n: usize) {
    let mut line = Vec::new();
    for protocol in ["json", "native"] {
        let server = FakeLlm::start();
        let root = root(&server, protocol);
        let model = model(&root);
        let runs: Vec<Duration> = (0..12)
            .map(|_| {
                answers(protocol, n)
                    .into_iter()
                    .for_each(|a| server.push(a));
                monologue(runtime, &root, &model, n)
            })
            .skip(1) // warm up: load the libraries, open the connection
            .collect();
        line.push(format!(
            "{protocol} protocol {:.0} µs",
            median(runs).as_secs_f64() * 1e6
        ));
    }
    let server = FakeLlm::start();
    let root = root(&server, "json");
    let scripted: Vec<Duration> = (0..12)
        .map(|_| {
            let replies = (0..n)
                .map(|i| json!({"tool_name": "noop", "tool_args": {"a": i}}).to_string())
                .chain([
                    json!({"tool_name": "response", "tool_args": {"text": "done"}}).to_string(),
                ]);
            monologue(runtime, &root, &ScriptedModel::new(replies), n)
        })
        .skip(1)
        .collect();
    line.push(format!(
        "scripted model {:.0} µs",
        median(scripted).as_secs_f64() * 1e6
    ));
    println!(
        "one loop iteration with a no-op tool, server on loopback answering at once, {n} \
         per run, median of 11 runs: {}",
        line.join(", ")
    );
}

/// One request through the adapter alone (no loop): build the body, send it, read the stream.
fn request_alone(runtime: &tokio::runtime::Runtime) {
    let server = FakeLlm::start();
    let root = root(&server, "json");
    let model = model(&root);
    let system = toolhost::Secrets::empty().mask("You are A0.");
    let reply = json!({"tool_name": "noop", "tool_args": {}}).to_string();
    let times: Vec<Duration> = (0..201)
        .map(|_| {
            server.push(Answer::Whole(sse_bytes(&text_events(&reply, Some((1, 1))))));
            let request = toolhost::ModelRequest {
                system: &system,
                history: &[],
                tools: &[],
            };
            let start = Instant::now();
            runtime
                .block_on(model.respond(request, &mut |_| {}))
                .unwrap();
            start.elapsed()
        })
        .skip(1)
        .collect();
    println!(
        "one request through the adapter alone (empty history, loopback, 200 runs): median {:.0} µs",
        median(times).as_secs_f64() * 1e6
    );
}

/// Records when the first piece of the reply is shown.
#[derive(Default)]
struct FirstShown(Mutex<Option<Instant>>);

impl Output for FirstShown {
    fn print(&self, kind: OutputKind, _: &Masked) {
        if kind == OutputKind::ModelChunk {
            self.0.lock().unwrap().get_or_insert_with(Instant::now);
        }
    }
}

fn first_character(runtime: &tokio::runtime::Runtime) {
    let server = FakeLlm::start();
    let root = root(&server, "json");
    let model = model(&root);
    let reply = json!({"tool_name": "response", "tool_args": {"text": "done"}}).to_string();
    let times: Vec<Duration> = (0..51)
        .map(|_| {
            // Headers and the role chunk first, a pause, then the first text at the stamp.
            let mut pieces = sse(&text_events(&reply, None));
            pieces.insert(1, Piece::Pause(Duration::from_millis(20)));
            pieces.insert(2, Piece::Stamp);
            server.push(Answer::Stream(pieces));
            let shown = Arc::new(FirstShown::default());
            let agent = Agent::with_output(root.host(), "A0", "default", shown.clone()).unwrap();
            runtime
                .block_on(agent.monologue(&model, "go", &LoopOptions::default()))
                .unwrap();
            let sent = *server.stamps().last().unwrap();
            let first = shown.0.lock().unwrap().unwrap();
            first.saturating_duration_since(sent)
        })
        .skip(1)
        .collect();
    let mut sorted = times.clone();
    sorted.sort();
    println!(
        "first streamed character shown, from its bytes handed to the server's socket (loopback \
         included), 50 runs: median {:.0} µs, max {:.0} µs",
        median(times).as_secs_f64() * 1e6,
        sorted.last().unwrap().as_secs_f64() * 1e6
    );
}

/// One streamed event of 5, 10 and 20 MB read through the adapter alone, the body sent at
/// once (read in the pieces the socket gives): the time should grow in proportion to the size
/// (the SSE reader is linear).
fn large_event(runtime: &tokio::runtime::Runtime) {
    let server = FakeLlm::start();
    let root = root(&server, "json");
    root.write(
        "usr/models.toml",
        format!(
            "[models.bench]\nbase_url = \"{}\"\nmodel = \"m\"\nmax_event_bytes = 67108864\n\
             max_reply_bytes = 67108864\n",
            server.url()
        ),
    );
    let model = model(&root);
    let system = toolhost::Secrets::empty().mask("You are A0.");
    let mut line = Vec::new();
    for mb in [5, 10, 20] {
        let text = "x".repeat(mb * 1_000_000);
        let events = [chunk(json!({ "content": text }), Some("stop"))];
        let bytes = sse_bytes(&events);
        let times: Vec<Duration> = (0..5)
            .map(|_| {
                server.push(Answer::Whole(bytes.clone()));
                let request = toolhost::ModelRequest {
                    system: &system,
                    history: &[],
                    tools: &[],
                };
                let start = Instant::now();
                let reply = runtime
                    .block_on(model.respond(request, &mut |_| {}))
                    .unwrap();
                assert_eq!(reply.text.len(), text.len());
                start.elapsed()
            })
            .collect();
        line.push(format!("{mb} MB {:.2} s", median(times).as_secs_f64()));
    }
    println!(
        "one streamed event through the adapter alone (loopback), median of 5: {}",
        line.join(", ")
    );
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo test --benches` asks for a list of benchmarks; there are none to list.
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    if std::env::args().any(|a| a == "large-event") {
        return large_event(&runtime);
    }
    iteration(&runtime, 10);
    iteration(&runtime, 100);
    request_alone(&runtime);
    first_character(&runtime);
}
