//! JSON-RPC as its specification says, on both transports: a message that is not JSON, not a
//! request, or a known method with parameters of the wrong shape gets its error (with the id
//! when it has a usable one, else `null`), batches are refused, an over-long line is refused
//! and the next one served, and what a tool prints never reaches the client; over HTTP the errors are 400 with a JSON-RPC body, and the server
//! bounds how long a client may keep a connection idle and how many it may hold.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{json, Value};
use toolhost_tests::toolhost_bin;

use super::{root, HttpServer};

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;

/// Each bad message, and the code and id of the error it must get.
fn bad_messages() -> Vec<(String, i64, Value)> {
    let deep = format!(
        r#"{{"jsonrpc":"2.0","id":"deep","method":"tools/call","params":{{"name":"echo","arguments":{{"x":{}{}}}}}}}"#,
        "[".repeat(20_000),
        "]".repeat(20_000)
    );
    vec![
        ("not json".into(), -32700, Value::Null),
        (deep, -32700, Value::Null),
        (
            r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#.into(),
            -32600,
            json!(1),
        ),
        (
            r#"{"jsonrpc":"2.0","id":2,"method":"ping","params":5}"#.into(),
            -32600,
            json!(2),
        ),
        (
            r#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#.into(),
            -32600,
            Value::Null,
        ),
        (
            r#"[{"jsonrpc":"2.0","id":3,"method":"ping"}]"#.into(),
            -32600,
            Value::Null,
        ),
        (
            r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":5}}"#.into(),
            -32602,
            json!(4),
        ),
    ]
}

/// Reads JSON lines from the server's stdout until `want` answers came (at most 60 s: this
/// machine is shared; a server that never answers fails the test instead of hanging it).
fn read_answers(lines: &mpsc::Receiver<String>, want: usize) -> Vec<Value> {
    let mut answers = Vec::new();
    while answers.len() < want {
        let line = lines
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| {
                panic!("only {} of {want} answers came: {answers:?}", answers.len())
            });
        let value: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("the server wrote a line that is not JSON ({e}): {line}"));
        if value.get("method").is_none() {
            answers.push(value); // not one of the server's own notifications
        }
    }
    answers
}

/// `toolhost --root ROOT ARGS` (a `serve-mcp` over stdio): the child, its output's lines as
/// they come, and its input.
fn serve_stdio(
    root: &toolhost_tests::TestRoot,
    args: &[&str],
) -> (
    std::process::Child,
    mpsc::Receiver<String>,
    std::process::ChildStdin,
) {
    let mut child = Command::new(toolhost_bin())
        .arg("--root")
        .arg(root.path())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("toolhost serve-mcp");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let stdin = child.stdin.take().expect("stdin");
    (child, lines, stdin)
}

/// Writes `line` and its end, at once.
fn send_line(stdin: &mut std::process::ChildStdin, line: &str) {
    stdin.write_all(line.as_bytes()).expect("write");
    stdin.write_all(b"\n").expect("write");
    stdin.flush().expect("flush");
}

#[test]
fn over_stdio_every_bad_message_gets_its_error_and_good_ones_are_still_served() {
    let root = root();
    let (mut child, lines, mut stdin) =
        serve_stdio(&root, &["serve-mcp", "--max-body-bytes", "65536"]);
    let mut send = |line: &str| send_line(&mut stdin, line);
    send(INITIALIZE);
    let init = read_answers(&lines, 1);
    assert_eq!(init[0]["id"], "init", "{init:?}");
    send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    for (message, code, id) in bad_messages() {
        send(&message);
        let answer = read_answers(&lines, 1).remove(0);
        let shown: String = message.chars().take(80).collect();
        assert_eq!(answer["error"]["code"], code, "{shown}: {answer}");
        assert_eq!(answer["jsonrpc"], "2.0", "{answer}");
        let object = answer.as_object().expect("an object");
        assert!(object.contains_key("id"), "no id member: {answer}");
        assert_eq!(answer["id"], id, "{shown}: {answer}");
    }
    // A line over --max-body-bytes is refused with the limit named, and skipped: the next
    // request is answered.
    let long = format!(
        r#"{{"jsonrpc":"2.0","id":5,"method":"ping","params":{{"pad":"{}"}}}}"#,
        "x".repeat(70_000)
    );
    send(&long);
    let answer = read_answers(&lines, 1).remove(0);
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    let text = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(
        text.contains("65536") && text.contains("--max-body-bytes"),
        "{answer}"
    );
    send(
        r#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"echo","arguments":{"text":"still here"}}}"#,
    );
    let answer = read_answers(&lines, 1).remove(0);
    assert_eq!(answer["id"], 6, "{answer}");
    assert!(
        answer["result"].to_string().contains("still here"),
        "{answer}"
    );
    // What a tool prints goes to the log: the client reads JSON-RPC alone, and no forged
    // answer.
    send(
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo:print","arguments":{"id":8}}}"#,
    );
    let answer = read_answers(&lines, 1).remove(0);
    assert_eq!(answer["id"], 7, "{answer}");
    assert!(answer["result"].to_string().contains("printed"), "{answer}");
    send(r#"{"jsonrpc":"2.0","id":8,"method":"ping"}"#);
    let answer = read_answers(&lines, 1).remove(0);
    let pong = json!({"jsonrpc": "2.0", "id": 8, "result": {}});
    assert_eq!(answer, pong, "a forged answer came first");

    drop(stdin);
    let status = child.wait().expect("wait");
    assert!(
        status.success(),
        "serve-mcp ended with {status} at the end of its input"
    );
}

/// POSTs `body`; returns the status and the body of the answer.
fn post(server: &HttpServer, body: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(server.authority()).expect("connect");
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        server.authority(),
        body.len()
    );
    stream.write_all(request.as_bytes()).expect("request");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("answer");
    let status = answer[9..12].parse().expect("a status");
    let body = answer
        .split("\r\n\r\n")
        .nth(1)
        .unwrap_or_default()
        .to_owned();
    (status, body)
}

#[test]
fn over_http_a_bad_message_is_400_with_a_json_rpc_error() {
    let root = root();
    let server = HttpServer::start(&root, &["--allow-writes-without-token"]);
    for (message, code, id) in bad_messages() {
        let (status, body) = post(&server, &message);
        let shown: String = message.chars().take(80).collect();
        assert_eq!(status, 400, "{shown}: {body}");
        let answer: Value = serde_json::from_str(&body)
            .unwrap_or_else(|e| panic!("{shown}: not a JSON-RPC body ({e}): {body}"));
        assert_eq!(answer["error"]["code"], code, "{shown}: {answer}");
        assert_eq!(answer["id"], id, "{shown}: {answer}");
    }
    let (status, body) = post(&server, INITIALIZE);
    assert_eq!(status, 200, "{body}");
}

#[test]
fn over_http_with_sessions_a_delete_of_a_session_never_issued_is_404() {
    let root = root();
    let server = HttpServer::start(&root, &["--sessions", "--allow-writes-without-token"]);
    let mut stream = TcpStream::connect(server.authority()).expect("connect");
    let request = format!(
        "DELETE /mcp HTTP/1.1\r\nHost: {}\r\nMcp-Session-Id: never-issued\r\nMCP-Protocol-Version: 2025-06-18\r\nConnection: close\r\n\r\n",
        server.authority()
    );
    stream.write_all(request.as_bytes()).expect("request");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("answer");
    assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
}

/// Reads from `stream` until it ends; `true` if the server closed it (within 30 s).
fn closed_by_server(mut stream: TcpStream) -> bool {
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let mut sink = Vec::new();
    stream.read_to_end(&mut sink).is_ok()
}

#[test]
fn over_http_idle_connections_are_closed_and_those_over_the_cap_get_503() {
    let root = root();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let host = std::sync::Arc::new(toolhost::Host::new(root.path()).expect("host"));
    let server = toolhost_mcp_server::McpServer::new(host, "default").expect("server");
    let options = toolhost_mcp_server::HttpOptions::new("127.0.0.1:0".parse().expect("addr"))
        .with_header_timeout(Duration::from_millis(500))
        .with_max_connections(2);
    let bound = runtime.block_on(server.bind_http(options)).expect("bind");
    let addr = bound.local_addr().expect("addr");
    runtime.spawn(bound.serve(server, std::future::pending()));
    // Two connections that never send a request hold the two places.
    let idle: Vec<TcpStream> = (0..2)
        .map(|_| TcpStream::connect(addr).expect("connect"))
        .collect();
    std::thread::sleep(Duration::from_millis(100));
    let mut third = TcpStream::connect(addr).expect("connect");
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{INITIALIZE}",
        INITIALIZE.len()
    );
    third.write_all(request.as_bytes()).expect("request");
    let mut answer = String::new();
    third.read_to_string(&mut answer).expect("answer");
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("retry-after: 1"),
        "{answer}"
    );
    // The idle ones are closed by the server (header timeout), which frees the places.
    for stream in idle {
        assert!(closed_by_server(stream), "an idle connection was kept open");
    }
    let mut fourth = TcpStream::connect(addr).expect("connect");
    fourth.write_all(request.as_bytes()).expect("request");
    let mut answer = String::new();
    fourth.read_to_string(&mut answer).expect("answer");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

/// Errors as the MCP specification says: a request before `initialize` is refused with an
/// error (here rmcp's: without a session, a request must carry the 2026-07-28 `_meta`), an
/// unknown tool is invalid params (`-32602`) and not a call of the Unknown tool, and so is a
/// tool only an agent may call: the `response` tool, and any tool that declares itself
/// agent-only (the example profile's signed response, installed here as `finish`). Neither is
/// listed.
#[test]
fn unknown_and_agent_only_tools_are_protocol_errors_and_requests_before_initialize_are_refused() {
    use toolhost_tests::Fixture;
    let root = root();
    root.tool("core", "response", Fixture::Response);
    root.tool("usr", "finish", Fixture::ProfileResponse);
    let mut child = Command::new(toolhost_bin())
        .arg("--root")
        .arg(root.path())
        .arg("serve-mcp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("toolhost serve-mcp");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut stdin = child.stdin.take().expect("stdin");
    let mut send = |line: &str| {
        stdin.write_all(line.as_bytes()).expect("write");
        stdin.write_all(b"\n").expect("write");
        stdin.flush().expect("flush");
    };
    send(r#"{"jsonrpc":"2.0","id":"early","method":"tools/list"}"#);
    let early = read_answers(&lines, 1).remove(0);
    assert_eq!(early["id"], "early", "{early}");
    assert!(early["error"]["code"].is_i64(), "{early}");
    send(INITIALIZE);
    assert_eq!(read_answers(&lines, 1)[0]["id"], "init");
    send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    for (id, name) in [(1, "no_such_tool"), (2, "response"), (3, "finish")] {
        send(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{name}","arguments":{{"text":"x"}}}}}}"#
        ));
        let answer = read_answers(&lines, 1).remove(0);
        assert_eq!(answer["id"], id, "{answer}");
        assert_eq!(answer["error"]["code"], -32602, "{name}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert_eq!(message, format!("Unknown tool: {name}"), "{answer}");
    }
    // A client's text echoed in an error is masked and bounded: a name holding a secret, a
    // megabyte of method name.
    send(&format!(
        r#"{{"jsonrpc":"2.0","id":"s","method":"tools/call","params":{{"name":"x{}","arguments":{{}}}}}}"#,
        super::SECRET
    ));
    let answer = read_answers(&lines, 1).remove(0);
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(!answer.to_string().contains(super::SECRET), "{answer}");
    assert!(message.starts_with("Unknown tool: x§§secret("), "{answer}");
    let huge = "m".repeat(1 << 20);
    send(&format!(
        r#"{{"jsonrpc":"2.0","id":"m","method":"{huge}"}}"#
    ));
    let answer = read_answers(&lines, 1).remove(0);
    assert_eq!(
        answer["error"]["code"],
        -32601,
        "{}",
        &answer.to_string()[..300]
    );
    assert!(
        answer.to_string().len() < 1000,
        "bounded: {} bytes",
        answer.to_string().len()
    );
    send(r#"{"jsonrpc":"2.0","id":4,"method":"tools/list"}"#);
    let listed = read_answers(&lines, 1).remove(0);
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"echo"), "{names:?}");
    assert!(
        !names.contains(&"response") && !names.contains(&"finish"),
        "{names:?}"
    );
    // A tool's own failure is a result with isError, its message masked.
    send(&format!(
        r#"{{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{{"name":"echo:fail","arguments":{{"message":"no luck with {}"}}}}}}"#,
        super::SECRET
    ));
    let failed = read_answers(&lines, 1).remove(0);
    assert_eq!(failed["result"]["isError"], true, "{failed}");
    let text = failed["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("no luck with §§secret(API_KEY)"), "{failed}");
    drop(stdin);
    let _ = child.wait();
}

/// A call whose line is mostly one long argument is parsed with the line's own buffer
/// becoming that argument (`toolhost::long_string`): the tool must get it exactly as sent,
/// every escape decoded; a long argument that is not valid JSON text gets the usual parse
/// error, and the server goes on.
#[test]
fn over_stdio_a_long_argument_arrives_whole_and_a_broken_one_gets_the_usual_error() {
    let root = root();
    let args = [
        "--max-output",
        "16000000",
        "serve-mcp",
        "--max-body-bytes",
        "16000000",
    ];
    let (mut child, lines, mut stdin) = serve_stdio(&root, &args);
    let mut send = |line: &str| send_line(&mut stdin, line);
    send(INITIALIZE);
    read_answers(&lines, 1);
    send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    let long = "line\n\"quoted\" \\ tab\t é 😀 \u{1} / end ".repeat(70_000);
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"n": 1, "text": long}}});
    let line = call.to_string();
    assert!(
        line.len() > 2 << 20,
        "{} bytes: not a long line",
        line.len()
    );
    send(&line);
    let answer = read_answers(&lines, 1).remove(0);
    assert_eq!(answer["id"], 1, "{}", &answer.to_string()[..200]);
    let echoed = answer["result"]["content"][0]["text"]
        .as_str()
        .expect("a text answer");
    let echoed: Value = serde_json::from_str(echoed).expect("echo answers its arguments' JSON");
    assert!(
        echoed["text"] == long,
        "the long argument changed on its way"
    );
    assert_eq!(echoed["n"], 1);

    // A lone surrogate inside the long argument: not JSON text, the usual parse error.
    let broken = line.replacen("end", "\\ud800", 1);
    assert_ne!(broken, line);
    send(&broken);
    let answer = read_answers(&lines, 1).remove(0);
    assert_eq!(answer["error"]["code"], -32700, "{answer}");
    send(r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#);
    let answer = read_answers(&lines, 1).remove(0);
    assert_eq!(answer["id"], 2, "{answer}");
    drop(stdin);
    assert!(child.wait().expect("wait").success());
}
