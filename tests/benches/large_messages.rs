//! Peak memory of the host for large messages, each in a fresh process whose peak resident
//! size the kernel reports (`wait4`), against the same process with a one-byte message:
//!
//! - **MCP answer**: `toolhost --yes call big.big`, the tool of a stdio MCP server (Python,
//!   JSON-RPC by hand) answering one text block of N bytes;
//! - **serve-mcp argument**: `toolhost serve-mcp` over stdio, a `tools/call` of the `noop`
//!   fixture with one string argument of N bytes (`--max-body-bytes` raised to let it in);
//! - **model token**: `toolhost chat`, a model server (Python, OpenAI-compatible, streamed)
//!   sending its whole JSON reply, a `response` of N bytes, as one event;
//! - **HTTP MCP answer**: `toolhost --yes call remote.echo`, the tool of a streamable HTTP
//!   MCP server (`toolhost serve-mcp --http`, the `echo` fixture given `answer_bytes`)
//!   answering N bytes;
//! - **serve-mcp HTTP, 48 clients**: `toolhost serve-mcp --http`, 48 clients each POSTing at
//!   once a `tools/call` of `noop` with one string argument of N bytes (the size column is the
//!   48 bodies together).
//!
//! Each row says the peak, what the message added to it and that as a multiple of N. Linux
//! only. Run with `cargo bench -p toolhost-tests --profile dev --bench large_messages`
//! (memory does not depend on optimisation; the dev profile saves the release build), and
//! `-- NAME` to run only the cases whose name holds NAME.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use toolhost_tests::{toolhost_bin, Fixture, TestRoot};

/// A stdio MCP server whose one tool, `big`, answers `BIG_BYTES` bytes of text.
const MCP_SERVER: &str = r#"import json, os, sys
N = int(os.environ["BIG_BYTES"])
def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n"); sys.stdout.flush()
for line in sys.stdin:
    msg = json.loads(line)
    mid, method = msg.get("id"), msg.get("method")
    if mid is None: continue
    if method == "initialize":
        r = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
             "serverInfo": {"name": "big", "version": "1"}}
    elif method == "tools/list":
        r = {"tools": [{"name": "big", "description": "a big answer", "inputSchema": {"type": "object"}}]}
    elif method == "tools/call":
        r = {"content": [{"type": "text", "text": "x" * N}]}
    else:
        r = {}
    send({"jsonrpc": "2.0", "id": mid, "result": r})
"#;

/// An OpenAI-compatible model server streaming one reply, a `response` of `TOKEN_BYTES`
/// bytes, as one event; it prints its port first.
const MODEL_SERVER: &str = r#"import json, os, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
N = int(os.environ["TOKEN_BYTES"])
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        reply = json.dumps({"thoughts": ["answering"], "tool_name": "response",
                            "tool_args": {"text": "x" * N}})
        chunk = lambda delta, end: json.dumps({"id": "1", "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta, "finish_reason": end}]})
        body = ("data: " + chunk({"role": "assistant", "content": reply}, None) + "\n\ndata: "
                + chunk({}, "stop") + "\n\ndata: [DONE]\n\n").encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
server = HTTPServer(("127.0.0.1", 0), H)
print(server.server_address[1], flush=True)
server.serve_forever()
"#;

/// Waits for `child` and returns its peak resident size in bytes.
fn peak_of(child: Child) -> u64 {
    let pid = child.id() as libc::pid_t;
    // SAFETY: wait4 writes the status and usage it is given, for a child of this process
    // that `Child` has not reaped (it is not waited for through `Child`).
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let mut status = 0;
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(waited, pid, "wait4: {}", std::io::Error::last_os_error());
    std::mem::forget(child); // reaped above
    usage.ru_maxrss as u64 * 1024
}

fn mcp_answer(root: &Path, bytes: u64) -> u64 {
    let child = Command::new(toolhost_bin())
        .args([
            "--root",
            &root.to_string_lossy(),
            "--yes",
            "call",
            "big.big",
        ])
        .env("BIG_BYTES", bytes.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("running toolhost call");
    peak_of(child)
}

fn serve_mcp_argument(root: &Path, bytes: u64) -> u64 {
    let max = (bytes + (1 << 20)).to_string();
    let root = root.to_string_lossy();
    let mut child = Command::new(toolhost_bin())
        .args(["--root", &root, "serve-mcp", "--max-body-bytes", &max])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("running toolhost serve-mcp");
    let mut input = child.stdin.take().expect("its input");
    let mut output = BufReader::new(child.stdout.take().expect("its output"));
    let mut answer = |id: u64| loop {
        let mut line = String::new();
        assert!(
            output.read_line(&mut line).expect("its answer") > 0,
            "serve-mcp ended"
        );
        let message: serde_json::Value = serde_json::from_str(&line).expect("JSON");
        if message["id"] == id {
            assert!(message.get("error").is_none(), "{line}");
            break;
        }
    };
    let hello = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}"#;
    writeln!(input, "{hello}").unwrap();
    answer(1);
    writeln!(
        input,
        r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
    )
    .unwrap();
    let text = "y".repeat(bytes as usize);
    let call = serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "noop", "arguments": {"text": text}}});
    writeln!(input, "{call}").unwrap();
    drop((call, text));
    answer(2);
    drop(input);
    peak_of(child)
}

fn model_token(root: &Path, bytes: u64) -> u64 {
    let mut server = Command::new("python3")
        .args(["-c", MODEL_SERVER])
        .env("TOKEN_BYTES", bytes.to_string())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 runs the model server");
    let mut port = String::new();
    BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut port)
        .unwrap();
    let models = format!(
        "default = \"m\"\n[models.m]\nbase_url = \"http://127.0.0.1:{}/v1\"\nmodel = \"m\"\n\
         tool_protocol = \"json\"\nmax_event_bytes = {}\n",
        port.trim(),
        bytes + (1 << 20)
    );
    std::fs::create_dir_all(root.join("usr")).unwrap();
    std::fs::write(root.join("usr/models.toml"), models).unwrap();
    let mut child = Command::new(toolhost_bin())
        .args(["--root", &root.to_string_lossy(), "chat"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("running toolhost chat");
    writeln!(child.stdin.take().unwrap(), "hi").unwrap();
    let peak = peak_of(child);
    let _ = server.kill();
    let _ = server.wait();
    peak
}

/// `toolhost serve-mcp --http 127.0.0.1:0` of `root` with `args`: the child and its address.
fn serve_http(root: &Path, args: &[&str]) -> (Child, String) {
    let mut child = Command::new(toolhost_bin())
        .arg("--root")
        .arg(root)
        .args(["--max-output", "100000000", "serve-mcp", "--no-watch"])
        .args(["--http", "127.0.0.1:0", "--allow-writes-without-token"])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running toolhost serve-mcp --http");
    let mut stderr = BufReader::new(child.stderr.take().expect("its errors"));
    let mut line = String::new();
    let url = loop {
        line.clear();
        assert!(stderr.read_line(&mut line).unwrap() > 0, "serve-mcp ended");
        if let Some(url) = line.trim().strip_prefix("toolhost: serving MCP on ") {
            break url.to_owned();
        }
    };
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    (child, url)
}

fn http_mcp_answer(root: &Path, bytes: u64) -> u64 {
    let (mut server, url) = serve_http(root, &[]);
    let client = TestRoot::new();
    let servers = serde_json::json!({"mcpServers": {"remote": {"url": url}}});
    client.write("usr/mcp.json", servers.to_string());
    let args = format!(r#"{{"answer_bytes": {bytes}}}"#);
    let child = Command::new(toolhost_bin())
        .arg("--root")
        .arg(client.path())
        .args(["--yes", "call", "remote.echo"])
        .args(["--args", &args])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("running toolhost call");
    let peak = peak_of(child);
    let _ = server.kill();
    let _ = server.wait();
    peak
}

/// 48 clients at once, each a `tools/call` of `noop` with a string of `bytes / 48` bytes.
fn serve_mcp_http_clients(root: &Path, bytes: u64) -> u64 {
    const CLIENTS: u64 = 48;
    let each = (bytes / CLIENTS).max(1);
    let max = (each + (1 << 20)).to_string();
    let (child, url) = serve_http(root, &["--max-body-bytes", &max]);
    let authority = url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();
    let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "noop", "arguments": {"text": "y".repeat(each as usize)}}})
    .to_string();
    let body = std::sync::Arc::new(body);
    let start = std::sync::Arc::new(std::sync::Barrier::new(CLIENTS as usize));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let (body, start, authority) = (body.clone(), start.clone(), authority.clone());
            std::thread::spawn(move || {
                let mut stream = std::net::TcpStream::connect(&authority).expect("connect");
                let head = format!(
                    "POST /mcp HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                start.wait();
                stream.write_all(head.as_bytes()).expect("request");
                stream.write_all(body.as_bytes()).expect("body");
                let mut answer = String::new();
                std::io::Read::read_to_string(&mut stream, &mut answer).expect("answer");
                assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
            })
        })
        .collect();
    drop(body);
    for client in clients {
        client.join().expect("a client");
    }
    // SAFETY: a signal to a child of this process that has not been reaped.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    peak_of(child)
}

fn main() {
    let mcp = TestRoot::new();
    mcp.write("usr/server.py", MCP_SERVER);
    let server = mcp.path().join("usr/server.py");
    let servers =
        serde_json::json!({"mcpServers": {"big": {"command": "python3", "args": [server]}}});
    mcp.write("usr/mcp.json", servers.to_string());
    let served = TestRoot::new();
    served.tool("usr", "noop", Fixture::Noop); // builds the fixtures and toolhost first
    served.tool("usr", "echo", Fixture::Echo);
    let chat = TestRoot::new();
    chat.tool("core", "response", Fixture::Response);

    type Case = fn(&Path, u64) -> u64;
    let cases: [(&str, &Path, Case, [u64; 2]); 5] = [
        (
            "MCP answer",
            mcp.path(),
            mcp_answer,
            [5_000_000, 15_000_000],
        ),
        (
            "serve-mcp argument",
            served.path(),
            serve_mcp_argument,
            [3_000_000, 9_000_000],
        ),
        (
            "model token",
            chat.path(),
            model_token,
            [5_000_000, 10_000_000],
        ),
        (
            "HTTP MCP answer",
            served.path(),
            http_mcp_answer,
            [5_000_000, 15_000_000],
        ),
        (
            "serve-mcp HTTP x48",
            served.path(),
            serve_mcp_http_clients,
            [24_000_000, 96_000_000],
        ),
    ];
    println!("case                  size      peak RSS   added      added / size");
    // `cargo bench … --bench large_messages -- HTTP` runs the cases whose name holds `HTTP`.
    let only: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    for (name, root, case, sizes) in cases {
        if !only.is_empty() && !only.iter().any(|o| name.contains(o.as_str())) {
            continue;
        }
        let floor = case(root, 1);
        println!("{name:<20} {:>6}    {:>7.1} MB", "1 B", floor as f64 / 1e6);
        for bytes in sizes {
            let peak = case(root, bytes);
            let added = peak.saturating_sub(floor);
            println!(
                "{name:<20} {:>4} MB   {:>7.1} MB   {:>6.1} MB   {:.2}",
                bytes / 1_000_000,
                peak as f64 / 1e6,
                added as f64 / 1e6,
                added as f64 / bytes as f64
            );
        }
    }
}
