//! A small OpenAI-compatible server for the tests and benchmarks (hyper): each request to
//! `/v1/chat/completions` gets the next scripted [`Answer`], byte for byte (pieces sent as
//! separate writes, pauses, a connection cut mid-body), and every request is recorded.
//!
//! ```no_run
//! use toolhost_tests::fake_llm::{text_reply, FakeLlm};
//!
//! let server = FakeLlm::start();
//! server.push(text_reply("Hello", None));
//! println!("{}", server.url()); // http://127.0.0.1:PORT/v1
//! ```

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::{Request, Response};
use serde_json::{json, Value};

/// A piece of a streamed answer.
#[derive(Debug, Clone)]
pub enum Piece {
    /// Bytes written as one piece (a short pause follows, so each is its own read).
    Bytes(Vec<u8>),
    /// A pause.
    Pause(Duration),
    /// Records the time ([`FakeLlm::stamps`]) just as the next piece of bytes is sent.
    Stamp,
}

/// What the server answers to one request.
#[derive(Debug, Clone)]
pub enum Answer {
    /// `text/event-stream`: the pieces, then the body ends.
    Stream(Vec<Piece>),
    /// A whole `text/event-stream` body, sent at once.
    Whole(Vec<u8>),
    /// The pieces, then the connection is cut (the body never ends).
    Cut(Vec<Piece>),
    /// `text/event-stream` that never ends: the bytes again and again, a millisecond apart,
    /// until the client goes away.
    Endless(Vec<u8>),
    /// A status, headers and a body.
    Status(u16, Vec<(&'static str, String)>, String),
    /// A JSON body (a non-streamed reply).
    Json(Value),
}

/// A request the server received.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// Its headers, names in lower case.
    pub headers: Vec<(String, String)>,
    /// Its JSON body.
    pub body: Value,
    /// Its body as sent (the order of its keys kept).
    pub text: String,
}

#[derive(Default)]
struct State {
    answers: Mutex<VecDeque<Answer>>,
    requests: Mutex<Vec<Recorded>>,
    stamps: Mutex<Vec<std::time::Instant>>,
    connections: std::sync::atomic::AtomicUsize,
}

/// The server; it stops when dropped.
pub struct FakeLlm {
    port: u16,
    state: Arc<State>,
    _runtime: tokio::runtime::Runtime,
}

type Body = BoxBody<Bytes, std::io::Error>;

impl FakeLlm {
    /// Starts a server on a free port of 127.0.0.1.
    pub fn start() -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("server runtime");
        let state = Arc::new(State::default());
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("bind");
        let port = listener.local_addr().expect("address").port();
        let served = state.clone();
        runtime.spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let _ = stream.set_nodelay(true);
                served
                    .connections
                    .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let state = served.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req| answer(req, state.clone()));
                    let io = hyper_util::rt::TokioIo::new(stream);
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(io, service)
                        .await;
                });
            }
        });
        Self {
            port,
            state,
            _runtime: runtime,
        }
    }

    /// `http://127.0.0.1:PORT/v1`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    /// Queues an answer.
    pub fn push(&self, answer: Answer) {
        self.state.answers.lock().unwrap().push_back(answer);
    }

    /// How many connections clients opened.
    pub fn connections(&self) -> usize {
        self.state
            .connections
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// When each [`Piece::Stamp`] was reached.
    pub fn stamps(&self) -> Vec<std::time::Instant> {
        self.state.stamps.lock().unwrap().clone()
    }

    /// The requests so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.state.requests.lock().unwrap().clone()
    }
}

async fn answer(req: Request<Incoming>, state: Arc<State>) -> Result<Response<Body>, Infallible> {
    let headers = req
        .headers()
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_owned(),
                v.to_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    let bytes = req
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let text = String::from_utf8_lossy(&bytes).into_owned();
    state.requests.lock().unwrap().push(Recorded {
        headers,
        body,
        text,
    });
    let next = state.answers.lock().unwrap().pop_front();
    let response = match next {
        None => status(
            400,
            Vec::new(),
            r#"{"error": {"message": "the fake server has no more answers"}}"#.to_owned(),
        ),
        Some(Answer::Status(code, headers, body)) => status(code, headers, body),
        Some(Answer::Json(value)) => status(
            200,
            vec![("content-type", "application/json".to_owned())],
            value.to_string(),
        ),
        Some(Answer::Whole(bytes)) => {
            let mut response = status(200, Vec::new(), String::new());
            let body = Full::new(Bytes::from(bytes))
                .map_err(|never| match never {})
                .boxed();
            *response.body_mut() = body;
            response
                .headers_mut()
                .insert("content-type", "text/event-stream".parse().unwrap());
            response
        }
        Some(Answer::Stream(pieces)) => streamed(pieces, false, state.clone()),
        Some(Answer::Cut(pieces)) => streamed(pieces, true, state.clone()),
        Some(Answer::Endless(bytes)) => endless(bytes),
    };
    Ok(response)
}

fn status(code: u16, headers: Vec<(&'static str, String)>, body: String) -> Response<Body> {
    let mut response = Response::builder().status(code);
    for (name, value) in headers {
        response = response.header(name, value);
    }
    let body = Full::new(Bytes::from(body))
        .map_err(|never| match never {})
        .boxed();
    response.body(body).expect("response")
}

fn streamed(pieces: Vec<Piece>, cut: bool, state: Arc<State>) -> Response<Body> {
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, std::io::Error>>(4);
    tokio::spawn(async move {
        let (mut after_bytes, mut stamp) = (false, false);
        for piece in pieces {
            match piece {
                Piece::Bytes(bytes) => {
                    // A pause between two pieces makes each its own read; none after the last.
                    if after_bytes {
                        tokio::time::sleep(Duration::from_millis(2)).await;
                    }
                    if std::mem::take(&mut stamp) {
                        state.stamps.lock().unwrap().push(std::time::Instant::now());
                    }
                    if tx.send(Ok(Frame::data(Bytes::from(bytes)))).await.is_err() {
                        return;
                    }
                    after_bytes = true;
                }
                Piece::Pause(pause) => {
                    tokio::time::sleep(pause).await;
                    after_bytes = false;
                }
                Piece::Stamp => stamp = true,
            }
        }
        if cut {
            // Cut once the pieces have surely been read.
            tokio::time::sleep(Duration::from_millis(20)).await;
            let _ = tx.send(Err(std::io::Error::other("cut"))).await;
        }
    });
    event_stream(rx)
}

/// An event-stream response whose body is what comes on `rx`, until it closes.
fn event_stream(
    rx: tokio::sync::mpsc::Receiver<Result<Frame<Bytes>, std::io::Error>>,
) -> Response<Body> {
    let frames =
        futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|f| (f, rx)) });
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(StreamBody::new(frames).boxed())
        .expect("response")
}

fn endless(bytes: Vec<u8>) -> Response<Body> {
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, std::io::Error>>(4);
    tokio::spawn(async move {
        let bytes = Bytes::from(bytes);
        while tx.send(Ok(Frame::data(bytes.clone()))).await.is_ok() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    });
    event_stream(rx)
}

/// A `chat.completion.chunk` with `delta` (and `finish_reason`, if given).
pub fn chunk(delta: Value, finish: Option<&str>) -> Value {
    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "fake",
           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
}

/// Each event as `data: <json>\n\n`, then `data: [DONE]`, one piece each.
pub fn sse(events: &[Value]) -> Vec<Piece> {
    events
        .iter()
        .map(|e| format!("data: {e}\n\n"))
        .chain(["data: [DONE]\n\n".to_owned()])
        .map(|s| Piece::Bytes(s.into_bytes()))
        .collect()
}

/// The usage chunk: empty `choices`.
pub fn usage_chunk(prompt: u64, completion: u64) -> Value {
    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [],
           "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}})
}

/// The events of a text reply: a role-only first chunk, the text in pieces of 5 characters,
/// the finish, and a usage chunk if `usage` is given.
pub fn text_events(text: &str, usage: Option<(u64, u64)>) -> Vec<Value> {
    let chars: Vec<char> = text.chars().collect();
    let mut events = vec![chunk(json!({"role": "assistant"}), None)];
    for piece in chars.chunks(5) {
        events.push(chunk(
            json!({"content": piece.iter().collect::<String>()}),
            None,
        ));
    }
    events.push(chunk(json!({}), Some("stop")));
    events.extend(usage.map(|(p, c)| usage_chunk(p, c)));
    events
}

/// The bytes of a whole event stream: each event as `data: <json>\n\n`, then `[DONE]`.
pub fn sse_bytes(events: &[Value]) -> Vec<u8> {
    let mut bytes = Vec::new();
    for e in events {
        bytes.extend(format!("data: {e}\n\n").into_bytes());
    }
    bytes.extend(b"data: [DONE]\n\n");
    bytes
}

/// A streamed text reply.
pub fn text_reply(text: &str, usage: Option<(u64, u64)>) -> Answer {
    Answer::Stream(sse(&text_events(text, usage)))
}

/// A streamed reply of native tool calls `(id, name, arguments)`: each call's id, type and
/// name first with empty arguments, then its arguments in pieces of 4 characters, the calls'
/// pieces interleaved.
pub fn tool_calls_reply(calls: &[(&str, &str, &str)]) -> Answer {
    let mut events = vec![chunk(json!({"role": "assistant"}), None)];
    for (i, (id, name, _)) in calls.iter().enumerate() {
        let call = json!({"index": i, "id": id, "type": "function", "function": {"name": name, "arguments": ""}});
        events.push(chunk(json!({"tool_calls": [call]}), None));
    }
    let pieces: Vec<Vec<String>> = calls
        .iter()
        .map(|(_, _, args)| {
            args.chars()
                .collect::<Vec<_>>()
                .chunks(4)
                .map(|c| c.iter().collect())
                .collect()
        })
        .collect();
    for step in 0..pieces.iter().map(Vec::len).max().unwrap_or(0) {
        for (i, call) in pieces.iter().enumerate() {
            if let Some(piece) = call.get(step) {
                let call = json!({"index": i, "function": {"arguments": piece}});
                events.push(chunk(json!({"tool_calls": [call]}), None));
            }
        }
    }
    events.push(chunk(json!({}), Some("tool_calls")));
    events.push(usage_chunk(20, 10));
    Answer::Stream(sse(&events))
}
