//! `serve-mcp` as a service: answers on a kept-alive connection without the delayed-ACK stall
//! (`TCP_NODELAY`), `/ready` for a balancer, and a graceful stop on SIGTERM and SIGINT (over
//! HTTP and stdio): unready at once, the call in flight answered, new requests refused, the
//! process ending cleanly; a second signal ends it at once.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use toolhost_tests::balancer::{post_mcp_with, KeepAlive};
use toolhost_tests::{toolhost_bin, TestRoot};

use super::{root, HttpServer};

const TOKEN: (&str, &str) = ("Authorization", "Bearer tok-123456789");

fn port_of(server: &HttpServer) -> u16 {
    let authority = server.authority();
    authority
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("a port")
}

fn call_body(id: u64, name: &str, arguments: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": name, "arguments": arguments}})
    .to_string()
}

/// The JSON-RPC message of an answer's body (an event stream's `data:` line, or JSON).
fn message(body: &str) -> Value {
    let data = body
        .lines()
        .find_map(|l| l.strip_prefix("data: ").filter(|d| d.starts_with('{')))
        .unwrap_or(body);
    serde_json::from_str(data).unwrap_or_else(|e| panic!("not JSON-RPC ({e}): {body:?}"))
}

/// Waits for the line of the server's standard error that contains `needle` (the server may
/// have ended: its last lines are still read).
fn said(server: &HttpServer, needle: &str) {
    let mut seen = Vec::new();
    loop {
        match server.stderr.recv_timeout(Duration::from_secs(20)) {
            Ok(line) if line.contains(needle) => return,
            Ok(line) => seen.push(line),
            Err(_) => panic!("no line with {needle:?} on standard error: {seen:#?}"),
        }
    }
}

/// The one timed check of the project's tests, as the issue asks: a server that answers in
/// two writes without `TCP_NODELAY` makes every call on a kept-alive connection wait for the
/// client's delayed ACK (40 ms on Linux: measured here without it, a median of 48 ms); with it,
/// a no-op call takes a couple of milliseconds. A call on a new connection each time never
/// waits (closing flushes), so the same calls made that way, interleaved, are the baseline
/// under whatever load the machine has: the kept-alive median must be under 10 ms more than
/// it.
#[test]
fn calls_on_a_kept_alive_connection_do_not_wait_for_a_delayed_ack() {
    let root = root();
    let server = HttpServer::start(&root, &["--token-secret", "MCP_TOKEN", "--no-watch"]);
    let port = port_of(&server);
    let mut client = KeepAlive::new(port, &[TOKEN]);
    let (mut kept, mut fresh) = (Vec::new(), Vec::new());
    for id in 0..51u64 {
        let started = Instant::now();
        let (status, body) = client
            .post_mcp(&call_body(id, "echo", json!({"x": id})))
            .expect("an answer");
        let elapsed = started.elapsed();
        assert_eq!(status, 200, "{body}");
        assert_eq!(message(&body)["result"]["isError"], false, "{body}");
        let started = Instant::now();
        let answer = post_mcp_with(port, &[TOKEN], &call_body(id, "echo", json!({"x": id})))
            .expect("an answer");
        let alone = started.elapsed();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        // The first call opens the connection and loads the library: not counted.
        if id > 0 {
            kept.push(elapsed);
            fresh.push(alone);
        }
    }
    kept.sort();
    fresh.sort();
    let (median, baseline) = (kept[kept.len() / 2], fresh[fresh.len() / 2]);
    assert!(
        median < baseline + Duration::from_millis(10),
        "median {median:?} a call on one kept-alive connection, {baseline:?} on a new connection each (a delayed-ACK stall adds 40 ms): {kept:?}"
    );
}

#[test]
fn ready_answers_200_without_the_token_and_without_data() {
    let root = root();
    let server = HttpServer::start(&root, &["--token-secret", "MCP_TOKEN", "--no-watch"]);
    let mut client = KeepAlive::new(port_of(&server), &[]);
    let (status, body) = client.exchange("GET", "/ready", "").expect("/ready");
    assert_eq!((status, body.as_str()), (200, ""));
    let (status, _) = client.exchange("GET", "/metrics", "").expect("/metrics");
    assert_eq!(status, 401, "/metrics stays behind the token");
}

/// SIGTERM or SIGINT (`signal`) while a 1.5 s call is in flight: `/ready` answers 503 at once,
/// a connection made during the drain is still served, the call in flight is answered, and the
/// process exits 0 once it has; then nothing listens.
fn a_signal_stops_the_server_gracefully(signal: i32, name: &str) {
    let root = root();
    let mut server = HttpServer::start(
        &root,
        &[
            "--token-secret",
            "MCP_TOKEN",
            "--no-watch",
            "--drain-seconds",
            "1",
        ],
    );
    let port = port_of(&server);
    let slow = std::thread::spawn(move || {
        let mut client = KeepAlive::new(port, &[TOKEN]);
        client.post_mcp(&call_body(1, "versioned:sleep", json!({"ms": 1500})))
    });
    // The call reaches the server before or during the drain: either way it is served.
    std::thread::sleep(Duration::from_millis(300));
    server.signal(signal);
    let mut probe = KeepAlive::new(port, &[]);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (status, body) = probe.exchange("GET", "/ready", "").expect("/ready");
        assert_eq!(body, "", "no data in /ready");
        if status == 503 {
            break;
        }
        assert_eq!(status, 200);
        assert!(
            Instant::now() < deadline,
            "/ready never turned 503 after {name}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // A new connection during the drain: served (and closed after its answer).
    let mut late = KeepAlive::new(port, &[TOKEN]);
    let (status, body) = late
        .post_mcp(&call_body(2, "echo", json!({"x": 2})))
        .expect("served during the drain");
    assert_eq!(status, 200, "{body}");
    let (status, body) = slow.join().expect("the slow call").expect("its answer");
    assert_eq!(status, 200, "{body}");
    let answer = message(&body);
    assert_eq!(answer["result"]["isError"], false, "{body}");
    let status = server.wait(Duration::from_secs(30));
    assert!(status.success(), "{name}: exited with {status}");
    said(&server, &format!("{name}: stopping"));
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "still listening after it ended"
    );
}

#[test]
fn sigterm_drains_and_answers_the_call_in_flight_before_the_server_ends() {
    a_signal_stops_the_server_gracefully(libc::SIGTERM, "SIGTERM");
}

#[test]
fn sigint_drains_and_answers_the_call_in_flight_before_the_server_ends() {
    a_signal_stops_the_server_gracefully(libc::SIGINT, "SIGINT");
}

#[test]
fn a_second_signal_ends_the_server_at_once_and_the_grace_period_bounds_a_call() {
    let root = root();
    // A second signal: the 60 s call is not waited for.
    let mut server = HttpServer::start(
        &root,
        &[
            "--token-secret",
            "MCP_TOKEN",
            "--no-watch",
            "--drain-seconds",
            "0",
        ],
    );
    let port = port_of(&server);
    let _slow = std::thread::spawn(move || {
        let mut client = KeepAlive::new(port, &[TOKEN]);
        client.post_mcp(&call_body(1, "versioned:sleep", json!({"ms": 60_000})))
    });
    std::thread::sleep(Duration::from_millis(300));
    server.signal(libc::SIGTERM);
    std::thread::sleep(Duration::from_millis(300));
    server.signal(libc::SIGTERM);
    let status = server.wait(Duration::from_secs(20));
    assert_eq!(status.code(), Some(143), "{status}");

    // The grace period: the call is cancelled after 1 s, and the server ends cleanly.
    let mut server = HttpServer::start(
        &root,
        &[
            "--token-secret",
            "MCP_TOKEN",
            "--no-watch",
            "--drain-seconds",
            "0",
            "--grace-seconds",
            "1",
        ],
    );
    let port = port_of(&server);
    let _slow = std::thread::spawn(move || {
        let mut client = KeepAlive::new(port, &[TOKEN]);
        client.post_mcp(&call_body(1, "versioned:sleep", json!({"ms": 60_000})))
    });
    std::thread::sleep(Duration::from_millis(300));
    server.signal(libc::SIGTERM);
    let status = server.wait(Duration::from_secs(20));
    assert!(status.success(), "{status}");
    said(&server, "end of the grace period");
}

/// Over stdio: after SIGTERM a new request is refused (-32000), the call in flight is
/// answered, and the server ends with status 0.
#[test]
fn sigterm_over_stdio_answers_the_call_in_flight_and_refuses_new_requests() {
    let root: TestRoot = root();
    let mut child = Command::new(toolhost_bin())
        .arg("--root")
        .arg(root.path())
        .args(["serve-mcp", "--no-watch"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("serve-mcp");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let stderr = BufReader::new(child.stderr.take().expect("stderr"));
    let (tx, said) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut send = |message: Value| {
        writeln!(stdin, "{message}").expect("a line to the server");
    };
    send(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}}),
    );
    let initialized: Value =
        serde_json::from_str(&stdout.next().expect("an answer").expect("a line")).expect("JSON");
    assert_eq!(initialized["id"], 0, "{initialized}");
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "versioned:sleep", "arguments": {"ms": 3000}}}));
    std::thread::sleep(Duration::from_millis(300));
    let pid = i32::try_from(child.id()).expect("a pid");
    // SAFETY: kill(2) with the pid of our own child, not reaped yet.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    // Once the server has the signal (it says so on standard error), a new request.
    let mut seen = Vec::new();
    loop {
        match said.recv_timeout(Duration::from_secs(20)) {
            Ok(line) if line.contains("SIGTERM: stopping") => break,
            Ok(line) => seen.push(line),
            Err(_) => panic!("the server did not say it stops: {seen:#?}"),
        }
    }
    // The line is printed as the signal is taken; the reader learns of it a moment later,
    // so a request sent at that very moment may still be taken: the next ones are refused.
    let mut answers = std::collections::HashMap::new();
    let mut refused = None;
    for id in 2..22u64 {
        send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"}));
        loop {
            let line = stdout.next().expect("an answer").expect("a line");
            let message: Value = serde_json::from_str(&line).expect("JSON");
            let got = message["id"].as_u64();
            if let Some(got) = got {
                answers.insert(got, message);
            }
            if got == Some(id) {
                break;
            }
        }
        if answers[&id]["error"]["code"] == -32000 {
            refused = Some(id);
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    for line in stdout.by_ref().map_while(Result::ok) {
        let message: Value = serde_json::from_str(&line).expect("JSON");
        if let Some(id) = message["id"].as_u64() {
            answers.insert(id, message);
        }
    }
    let status = child.wait().expect("wait");
    let rest: Vec<String> = said.try_iter().collect();
    assert!(status.success(), "{status}: {rest:#?}");
    assert_eq!(answers[&1]["result"]["isError"], false, "{answers:#?}");
    assert!(
        refused.is_some(),
        "no request refused after SIGTERM: {answers:#?}"
    );
}
