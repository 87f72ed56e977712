//! `serve-mcp` as a service, in one run:
//!
//! - HTTP: calls per second of the no-op tool and each call's time (p50, p99), [`CLIENTS`]
//!   clients calling back to back for [`WINDOW`]: one instance without the balancer, and three
//!   behind HAProxy (the fleet page's config); each on kept-alive connections (as a pooling
//!   client, or HAProxy, keeps them), and with a connection per call (`Connection: close`).
//!   [`ROUNDS`] rounds per row after a warm-up; the round with the median rate is printed.
//! - stdio: the round trip of one `tools/call` of a no-op tool, sequential, by the Python
//!   SDK's client (`mcp` 2.3.0) against `toolhost serve-mcp` and against the same SDK's
//!   `MCPServer` (FastMCP) serving a no-op tool; the two alternate, [`ROUNDS`] rounds of
//!   [`STDIO_CALLS`] calls each, the median of the rounds' p50 and p99 printed.
//!
//! Run with `cargo bench -p toolhost-tests --bench fleet` (needs `haproxy`, installed where
//! missing, and Python for the `mcp` package).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use toolhost_tests::balancer::{post_mcp, Balancer, KeepAlive};
use toolhost_tests::{peers, toolhost_bin, Fixture, TestRoot};

const CLIENTS: usize = 16;
const WINDOW: Duration = Duration::from_secs(3);
const ROUNDS: usize = 3;
const STDIO_CALLS: usize = 500;

/// A child process, killed when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `toolhost serve-mcp --http 127.0.0.1:0` over `root`: the process and its port.
fn instance(root: &TestRoot) -> (Killed, u16) {
    let mut child = Command::new(toolhost_bin())
        .arg("--root")
        .arg(root.path())
        .args(["serve-mcp", "--no-watch", "--http", "127.0.0.1:0"])
        .arg("--allow-writes-without-token")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("serve-mcp --http");
    let mut stderr = BufReader::new(child.stderr.take().expect("stderr"));
    let mut line = String::new();
    let port = loop {
        line.clear();
        let read = stderr.read_line(&mut line).expect("stderr");
        assert!(read > 0, "serve-mcp exited before listening");
        if let Some(url) = line.trim().strip_prefix("toolhost: serving MCP on ") {
            let authority = url.trim_start_matches("http://").trim_end_matches("/mcp");
            break authority.rsplit(':').next().unwrap().parse().unwrap();
        }
    };
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    (Killed(child), port)
}

fn body(id: u64) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"noop","arguments":{{}}}}}}"#
    )
}

/// How a client reaches the server.
#[derive(Clone, Copy)]
enum Connections {
    KeptAlive,
    OnePerCall,
}

/// One round: calls per second through `port`, and every call's time.
fn round(port: u16, connections: Connections) -> (f64, Vec<Duration>) {
    let stop = Arc::new(AtomicBool::new(false));
    let times = Arc::new(Mutex::new(Vec::new()));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let (stop, times) = (stop.clone(), times.clone());
            std::thread::spawn(move || {
                let mut mine = Vec::new();
                let mut client = KeepAlive::new(port, &[]);
                let mut id = (c as u64) << 32;
                while !stop.load(Ordering::Relaxed) {
                    id += 1;
                    let started = Instant::now();
                    let answer = match connections {
                        Connections::KeptAlive => client.post_mcp(&body(id)).map(|(_, b)| b),
                        Connections::OnePerCall => post_mcp(port, &body(id)),
                    };
                    let answer = answer.expect("an answer");
                    assert!(answer.contains(r#""isError":false"#), "{answer}");
                    mine.push(started.elapsed());
                }
                times.lock().expect("times").extend(mine);
            })
        })
        .collect();
    let start = Instant::now();
    std::thread::sleep(WINDOW);
    stop.store(true, Ordering::Relaxed);
    for client in clients {
        client.join().expect("a client");
    }
    let took = start.elapsed();
    let mut times = std::mem::take(&mut *times.lock().expect("times"));
    times.sort();
    (times.len() as f64 / took.as_secs_f64(), times)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let at = ((sorted.len() as f64 * p) as usize).min(sorted.len().saturating_sub(1));
    sorted.get(at).copied().unwrap_or_default()
}

fn report(what: &str, port: u16, connections: Connections) {
    round(port, connections); // warm-up
    let mut rounds: Vec<(f64, Vec<Duration>)> =
        (0..ROUNDS).map(|_| round(port, connections)).collect();
    rounds.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (rate, times) = &rounds[ROUNDS / 2];
    let all: Vec<String> = rounds.iter().map(|r| format!("{:.0}", r.0)).collect();
    println!(
        "fleet/{what}: {rate:.0} calls/s (rounds {}), p50 {:.2} ms, p99 {:.2} ms",
        all.join(", "),
        percentile(times, 0.5).as_secs_f64() * 1e3,
        percentile(times, 0.99).as_secs_f64() * 1e3,
    );
}

/// The Python client: `command args...` served over stdio, `calls` calls of `tool`; prints
/// `{"p50": ms, "p99": ms}`.
const CLIENT: &str = r#"
import json, sys, time
import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

async def main():
    calls, tool, command, args = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4:]
    params = StdioServerParameters(command=command, args=args)
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            for _ in range(50):
                await session.call_tool(tool, {})
            times = []
            for _ in range(calls):
                started = time.perf_counter()
                result = await session.call_tool(tool, {})
                times.append(time.perf_counter() - started)
                assert not result.is_error, result
    times.sort()
    print(json.dumps({"p50": times[len(times) // 2] * 1e3, "p99": times[int(len(times) * 0.99)] * 1e3}))

anyio.run(main)
"#;

/// The same SDK's server with one no-op tool.
const FASTMCP: &str = r#"
from mcp.server.mcpserver import MCPServer

app = MCPServer("noop")

@app.tool()
def noop() -> str:
    """Does nothing."""
    return "ok"

app.run("stdio")
"#;

/// One round of the Python client against `server` (a command): p50 and p99 in ms.
fn stdio_round(client: &std::path::Path, tool: &str, server: &[&str]) -> (f64, f64) {
    let out = Command::new(peers::mcp_python())
        .arg(client)
        .arg(STDIO_CALLS.to_string())
        .arg(tool)
        .args(server)
        .stderr(Stdio::null())
        .output()
        .expect("the Python client");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().last().unwrap_or_default();
    let parsed: serde_json::Value =
        serde_json::from_str(line).unwrap_or_else(|e| panic!("the client's answer ({e}): {text}"));
    (
        parsed["p50"].as_f64().expect("p50"),
        parsed["p99"].as_f64().expect("p99"),
    )
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn stdio_rows(root: &TestRoot) {
    let client = root.write("stdio_client.py", CLIENT);
    let fastmcp = root.write("fastmcp_noop.py", FASTMCP);
    let python = peers::mcp_python();
    let bin = toolhost_bin();
    let toolhost = [
        bin.to_str().expect("a path"),
        "--root",
        root.path().to_str().expect("a path"),
        "serve-mcp",
        "--no-watch",
    ];
    let fast = [
        python.to_str().expect("a path"),
        fastmcp.to_str().expect("a path"),
    ];
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        ours.push(stdio_round(&client, "noop", &toolhost));
        theirs.push(stdio_round(&client, "noop", &fast));
    }
    for (what, rounds) in [
        ("toolhost serve-mcp", &ours),
        ("Python SDK MCPServer (FastMCP)", &theirs),
    ] {
        let p50 = median(rounds.iter().map(|r| r.0).collect());
        let p99 = median(rounds.iter().map(|r| r.1).collect());
        let all: Vec<String> = rounds.iter().map(|r| format!("{:.3}", r.0)).collect();
        println!(
            "fleet/stdio round trip, Python client, {what}: p50 {p50:.3} ms (rounds {}), p99 {p99:.3} ms",
            all.join(", ")
        );
    }
}

fn main() {
    // `cargo bench` passes `--bench`; a filter that excludes this bench skips it.
    if std::env::args()
        .skip(1)
        .any(|a| !a.starts_with('-') && !"fleet".contains(&*a))
    {
        return;
    }
    if !peers::haproxy() {
        return;
    }
    let root = TestRoot::new();
    root.tool("usr", "noop", Fixture::Noop);
    let instances: Vec<(Killed, u16)> = (0..3).map(|_| instance(&root)).collect();
    let ports: Vec<u16> = instances.iter().map(|(_, p)| *p).collect();
    let haproxy = Balancer::start(&root, &ports);
    for (what, connections) in [
        ("kept-alive connections", Connections::KeptAlive),
        ("a connection per call", Connections::OnePerCall),
    ] {
        report(
            &format!("one instance, no balancer, {what}"),
            ports[0],
            connections,
        );
        report(
            &format!("three instances behind HAProxy, {what}"),
            haproxy.port,
            connections,
        );
    }
    drop(haproxy);
    drop(instances);
    stdio_rows(&root);
}
