//! A model server cannot make one reply unbounded: a stream that never ends stops at
//! `max_reply_bytes` (its partial reply kept up to that cap), empty events sent forever stop
//! at `max_reply_seconds`, and one event over `max_event_bytes` is refused while a large one
//! under it is read whole. Each broken reply fails only its iteration.

use serde_json::json;
use toolhost::{LogItem, LogKind};
use toolhost_tests::fake_llm::{chunk, sse, text_reply, Answer, FakeLlm};

use super::models::{request, root, run};

/// The reply that ends the loop after a broken one.
fn answer(server: &FakeLlm) {
    server.push(text_reply(
        &request("response", json!({"text": "Done."})),
        None,
    ));
}

/// The log's error items (one per broken reply).
fn errors(log: Vec<LogItem>) -> Vec<LogItem> {
    log.into_iter()
        .filter(|i| i.kind == LogKind::Error)
        .collect()
}

#[test]
fn a_stream_that_never_ends_stops_at_max_reply_bytes_and_keeps_its_text_up_to_the_cap() {
    let server = FakeLlm::start();
    let event = format!(
        "data: {}\n\n",
        chunk(json!({"content": "abcdefghij"}), None)
    );
    server.push(Answer::Endless(event.into_bytes()));
    answer(&server);
    let root = root(&server, "max_reply_bytes = 20000\ntimeout_seconds = 30");
    let (result, agent, _) = run(&root, "Answer.");
    assert_eq!(result.unwrap(), "Done.");
    let errors = errors(agent.log());
    assert_eq!(errors.len(), 1, "{errors:?}");
    let heading = &errors[0].heading;
    assert!(
        heading.contains("longer than 20000 bytes (max_reply_bytes of model 'fake'"),
        "{heading}"
    );
    let partial = &errors[0].content;
    assert!(
        !partial.is_empty() && partial.len() < 20000,
        "{}",
        partial.len()
    );
    assert!(partial.chars().all(|c| "abcdefghij".contains(c)));
}

#[test]
fn empty_events_sent_forever_stop_at_max_reply_seconds() {
    let server = FakeLlm::start();
    server.push(Answer::Endless(b"data: \n\n: keep-alive\n\n".to_vec()));
    answer(&server);
    let root = root(&server, "max_reply_seconds = 1\ntimeout_seconds = 30");
    let (result, agent, _) = run(&root, "Answer.");
    assert_eq!(result.unwrap(), "Done.");
    let errors = errors(agent.log());
    assert_eq!(errors.len(), 1, "{errors:?}");
    let heading = &errors[0].heading;
    assert!(
        heading.contains("took longer than 1 s in all (max_reply_seconds of model 'fake'"),
        "{heading}"
    );
}

#[test]
fn one_event_over_max_event_bytes_is_refused_and_a_large_one_under_it_is_read_whole() {
    let server = FakeLlm::start();
    let big = "x".repeat(1_500_000);
    let over = request("response", json!({ "text": big }));
    server.push(Answer::Stream(sse(&[chunk(
        json!({ "content": over }),
        Some("stop"),
    )])));
    let under = request("response", json!({ "text": &big[..900_000] }));
    // Sent as one piece of the body (and so read in as few reads as the transport makes).
    let whole =
        toolhost_tests::fake_llm::sse_bytes(&[chunk(json!({ "content": under }), Some("stop"))]);
    server.push(Answer::Whole(whole));
    let root = root(&server, "max_event_bytes = 1048576");
    let (result, agent, _) = run(&root, "Answer.");
    let answer = result.unwrap();
    assert!(
        answer.starts_with("xxxx"),
        "{}",
        &answer[..20.min(answer.len())]
    );
    let errors = errors(agent.log());
    assert_eq!(errors.len(), 1, "{errors:?}");
    let heading = &errors[0].heading;
    assert!(
        heading.contains("one event of the stream is longer than 1048576 bytes (max_event_bytes"),
        "{heading}"
    );
}
