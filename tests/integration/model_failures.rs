//! Real models when things go wrong: rate limits and server errors, cut and malformed
//! streams, an interjection or a stop mid-stream, missing or refused keys, a dead server.

use std::time::{Duration, Instant};

use serde_json::json;
use toolhost::output::OutputKind;
use toolhost::{LogKind, LoopError, LoopOptions, ModelErrorKind, Role};
use toolhost_openai::{ModelsConfig, OpenAiModel};
use toolhost_tests::fake_llm::{chunk, sse, text_events, text_reply, Answer, FakeLlm, Piece};
use toolhost_tests::wait_for;

use super::models::{everything_written, model, request, root, run, KEY};

#[test]
fn a_429_with_retry_after_and_a_500_are_retried() {
    let server = FakeLlm::start();
    let limited = r#"{"error": {"message": "slow down"}}"#.to_owned();
    server.push(Answer::Status(
        429,
        vec![("retry-after", "1".to_owned())],
        limited,
    ));
    server.push(Answer::Status(500, Vec::new(), "oops".to_owned()));
    server.push(text_reply(
        &request("response", json!({"text": "Made it."})),
        None,
    ));
    let root = root(&server, "");
    let start = Instant::now();
    let (result, _, _) = run(&root, "Answer.");
    assert_eq!(result.unwrap(), "Made it.");
    assert_eq!(server.requests().len(), 3);
    assert!(
        start.elapsed() >= Duration::from_millis(950),
        "{:?}",
        start.elapsed()
    );
}

#[test]
fn a_cut_stream_and_a_malformed_chunk_fail_only_their_iteration() {
    let server = FakeLlm::start();
    let mut cut = sse(&text_events("{\"tool_name\": \"resp", None));
    cut.truncate(3); // the role chunk and two pieces of text, then the connection is cut
    server.push(Answer::Cut(cut));
    let mut malformed = sse(&[chunk(json!({"content": "Hi"}), None)]);
    malformed.insert(1, Piece::Bytes(b"data: {\"choices\": [oops\n\n".to_vec()));
    server.push(Answer::Stream(malformed));
    server.push(text_reply(
        &request("response", json!({"text": "Third time."})),
        None,
    ));
    let root = root(&server, "");
    let (result, agent, _) = run(&root, "Answer.");
    assert_eq!(result.unwrap(), "Third time.");
    let errors: Vec<_> = agent
        .log()
        .into_iter()
        .filter(|i| i.kind == LogKind::Error)
        .collect();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(
        errors[0].heading.contains("the stream was cut"),
        "{}",
        errors[0].heading
    );
    assert_eq!(errors[0].content, "{\"tool_nam");
    assert!(
        errors[1].heading.contains("not JSON"),
        "{}",
        errors[1].heading
    );
    // Neither broken reply joined the history.
    assert_eq!(
        agent
            .history()
            .iter()
            .filter(|m| m.role == Role::Ai)
            .count(),
        1
    );
}

#[test]
fn an_interjection_drops_the_stream_and_keeps_the_partial_reply() {
    let server = FakeLlm::start();
    let mut slow = sse(&text_events("I am thinking about it", None));
    slow.insert(3, Piece::Pause(Duration::from_secs(30)));
    server.push(Answer::Stream(slow));
    server.push(text_reply(
        &request("response", json!({"text": "Quick answer."})),
        None,
    ));
    let root = root(&server, "");
    let (agent, output) = root.agent("default");
    let model = model(&root, &agent);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let start = Instant::now();
    let looping = {
        let agent = agent.clone();
        runtime.spawn(async move {
            agent
                .monologue(&model, "Think.", &LoopOptions::default())
                .await
        })
    };
    wait_for("the first streamed text", || {
        let shown = output
            .lines()
            .iter()
            .any(|(k, t)| *k == OutputKind::ModelChunk && t.contains("I am"));
        if shown {
            Ok(())
        } else {
            Err(output.lines().len())
        }
    });
    agent.interject("Answer now.");
    assert_eq!(runtime.block_on(looping).unwrap().unwrap(), "Quick answer.");
    assert!(
        start.elapsed() < Duration::from_secs(20),
        "{:?}",
        start.elapsed()
    );
    let dropped = agent
        .log()
        .into_iter()
        .find(|i| i.heading.contains("dropped"))
        .expect("the partial reply in the log");
    assert!(dropped.content.starts_with("I am"), "{}", dropped.content);
    let history: Vec<String> = agent
        .history()
        .iter()
        .map(|m| m.content.to_string())
        .collect();
    assert!(
        history[1].starts_with("I am") && history[1].ends_with("(interrupted by the user)"),
        "{history:?}"
    );
    assert_eq!(history[2], "Answer now.");
}

#[test]
fn a_stop_drops_the_stream_and_ends_the_loop() {
    let server = FakeLlm::start();
    let mut slow = sse(&text_events("Hmm", None));
    slow.insert(1, Piece::Pause(Duration::from_secs(30)));
    server.push(Answer::Stream(slow));
    let root = root(&server, "");
    let (agent, _) = root.agent("default");
    let model = model(&root, &agent);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let looping = {
        let agent = agent.clone();
        runtime.spawn(async move {
            agent
                .monologue(&model, "Think.", &LoopOptions::default())
                .await
        })
    };
    wait_for("the request", || {
        if server.requests().is_empty() {
            Err(())
        } else {
            Ok(())
        }
    });
    agent.stop();
    let result =
        runtime.block_on(async { tokio::time::timeout(Duration::from_secs(10), looping).await });
    assert!(
        matches!(result, Ok(Ok(Err(LoopError::Stopped)))),
        "{result:?}"
    );
}

#[test]
fn a_missing_key_a_refused_key_and_a_dead_server_are_one_line_each() {
    let server = FakeLlm::start();
    let root = root(&server, "");
    // A key named but missing.
    root.write("usr/models.toml", "[models.k]\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\napi_key_env = \"TOOLHOST_TEST_UNSET_KEY\"\n");
    let models = ModelsConfig::load(&toolhost::Layout::new(root.path()), "default").unwrap();
    let error = OpenAiModel::new(
        models.get(None).unwrap().clone(),
        &toolhost::Secrets::empty(),
    )
    .unwrap_err();
    assert_eq!(error.kind(), ModelErrorKind::Key);
    assert!(
        error
            .to_string()
            .contains("TOOLHOST_TEST_UNSET_KEY (api_key_env) is not set: export"),
        "{error}"
    );
    // A server that echoes the key in its error: the key is cut out.
    let root = self::root(&server, "");
    let echoed = format!(r#"{{"error": {{"message": "Incorrect API key provided: {KEY}"}}}}"#);
    server.push(Answer::Status(401, Vec::new(), echoed));
    let (result, agent, output) = run(&root, "Hi");
    let error = result.unwrap_err().to_string();
    assert!(
        error.contains("401 Unauthorized") && error.contains("check the API key"),
        "{error}"
    );
    assert!(!error.contains(KEY) && !error.contains('\n'), "{error}");
    assert!(!everything_written(&root, &agent, &output).contains(KEY));
    // Nothing listens: the URL and the question.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = dead.local_addr().unwrap().port();
    drop(dead);
    root.write("usr/models.toml", format!("[models.d]\nbase_url = \"http://127.0.0.1:{port}/v1\"\nmodel = \"m\"\nmax_retries = 1\nretry_initial_ms = 1\n"));
    let (result, _, _) = run(&root, "Hi");
    let error = result.unwrap_err().to_string();
    let url = format!("cannot reach http://127.0.0.1:{port}/v1/chat/completions");
    assert!(
        error.starts_with(&url) && error.ends_with("is the server running?"),
        "{error}"
    );
}
