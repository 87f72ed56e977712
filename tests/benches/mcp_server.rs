//! A no-op tool served over MCP (`toolhost serve-mcp`), called by rmcp's client: the
//! round-trip of one `tools/call` (median and p99, one client, sequential) over stdio and
//! over streamable HTTP on loopback (stateless, and with sessions), and the throughput of 8
//! concurrent clients (stdio: 8 server processes; HTTP: one server). Every call runs the
//! whole lifecycle on the server, audit included.
//!
//! Run with `cargo bench -p toolhost-tests --bench mcp_server`. With
//! `TOOLHOST_BENCH_AGAINST=DIR` (the profile folder of another build of this workspace,
//! holding its `toolhost` and `libfx_noop.so`) the round trips of both builds are measured in
//! the same run, alternately, so they can be compared.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use serde_json::json;
use toolhost_tests::{toolhost_bin, Fixture, TestRoot};

/// Sequential calls measured per transport (after a warm-up of a tenth as many).
const CALLS: usize = 2000;
/// Concurrent clients for the throughput runs.
const CLIENTS: usize = 8;
/// How long each throughput run lasts.
const RUN: Duration = Duration::from_secs(3);

type Client = RunningService<RoleClient, ()>;

async fn call(client: &Client) {
    let args = json!({"city": "Paris"});
    let serde_json::Value::Object(args) = args else {
        unreachable!()
    };
    let params = CallToolRequestParams::new("noop").with_arguments(args);
    let result = client.call_tool(params).await.expect("tools/call");
    assert_eq!(result.is_error, Some(false), "{result:?}");
}

/// A build of the server: its binary, a root with its own no-op tool, and what its HTTP
/// listener needs to serve a `write` tool without a token.
struct Build {
    name: &'static str,
    bin: std::path::PathBuf,
    root: TestRoot,
    http_args: &'static [&'static str],
}

impl Build {
    /// This build.
    fn this() -> Self {
        let root = TestRoot::new();
        root.tool("usr", "noop", Fixture::Noop);
        Self {
            name: "this build",
            bin: toolhost_bin(),
            root,
            http_args: &["--allow-writes-without-token"],
        }
    }

    /// The build in `TOOLHOST_BENCH_AGAINST`, if set; given `--allow-writes-without-token`
    /// when it has the flag (a build from before it served every tool without a token).
    fn against() -> Option<Self> {
        let dir = std::path::PathBuf::from(std::env::var_os("TOOLHOST_BENCH_AGAINST")?);
        let root = TestRoot::new();
        let library = format!("libfx_noop.{}", toolhost::LIBRARY_EXTENSION);
        root.replace_bytes(
            &format!("usr/tools/noop.{}", toolhost::LIBRARY_EXTENSION),
            &std::fs::read(dir.join(library)).expect("the other build's libfx_noop"),
        );
        let bin = dir.join("toolhost");
        let help = Command::new(&bin)
            .args(["serve-mcp", "--help"])
            .output()
            .expect("the other build's toolhost");
        let flag = "--allow-writes-without-token";
        let http_args: &'static [&'static str] =
            match String::from_utf8_lossy(&help.stdout).contains(flag) {
                true => &["--allow-writes-without-token"],
                false => &[],
            };
        Some(Self {
            name: "other build",
            bin,
            root,
            http_args,
        })
    }
}

async fn stdio_client(root: &TestRoot) -> Client {
    stdio_client_of(&toolhost_bin(), root).await
}

async fn stdio_client_of(bin: &std::path::Path, root: &TestRoot) -> Client {
    let mut command = tokio::process::Command::new(bin);
    command
        .arg("--root")
        .arg(root.path())
        .args(["serve-mcp", "--no-watch"]);
    let transport = TokioChildProcess::new(command).expect("serve-mcp");
    ().serve(transport).await.expect("initialize")
}

async fn http_client(url: &str) -> Client {
    // rmcp's reqwest has no crypto provider of its own (a provider set earlier stays).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let transport = StreamableHttpClientTransport::from_uri(url.to_owned());
    ().serve(transport).await.expect("initialize")
}

/// `toolhost serve-mcp --http 127.0.0.1:0 ARGS`, killed when dropped.
struct HttpServer {
    child: Child,
    url: String,
}

impl HttpServer {
    fn start(root: &TestRoot, args: &[&str]) -> Self {
        Self::start_of(
            &toolhost_bin(),
            root,
            &["--allow-writes-without-token"],
            args,
        )
    }

    fn start_of(bin: &std::path::Path, root: &TestRoot, own: &[&str], args: &[&str]) -> Self {
        let child = Command::new(bin)
            .arg("--root")
            .arg(root.path())
            .args(["serve-mcp", "--no-watch", "--http", "127.0.0.1:0"])
            .args(own)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("serve-mcp --http");
        let mut server = Self {
            child,
            url: String::new(),
        };
        let mut stderr = BufReader::new(server.child.stderr.take().expect("stderr"));
        let mut line = String::new();
        while server.url.is_empty() {
            line.clear();
            let read = stderr.read_line(&mut line).expect("stderr");
            assert!(read > 0, "serve-mcp exited before listening");
            if let Some(url) = line.trim().strip_prefix("toolhost: serving MCP on ") {
                server.url = url.to_owned();
            }
        }
        std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
        server
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Median and p99 of `CALLS` sequential calls, in µs.
async fn round_trips(client: &Client) -> (f64, f64) {
    for _ in 0..CALLS / 10 {
        call(client).await;
    }
    let mut times = Vec::with_capacity(CALLS);
    for _ in 0..CALLS {
        let start = Instant::now();
        call(client).await;
        times.push(start.elapsed().as_secs_f64() * 1e6);
    }
    times.sort_by(f64::total_cmp);
    (times[CALLS / 2], times[CALLS * 99 / 100])
}

/// Calls per second of `clients` calling back to back for [`RUN`].
async fn throughput(clients: Vec<Client>) -> f64 {
    for client in &clients {
        call(client).await; // warm
    }
    let start = Instant::now();
    let tasks: Vec<_> = clients
        .into_iter()
        .map(|client| {
            tokio::spawn(async move {
                let mut n = 0u64;
                while start.elapsed() < RUN {
                    call(&client).await;
                    n += 1;
                }
                let _ = client.cancel().await;
                n
            })
        })
        .collect();
    let mut total = 0;
    for task in tasks {
        total += task.await.expect("client task");
    }
    total as f64 / start.elapsed().as_secs_f64()
}

fn report(what: &str, (median, p99): (f64, f64)) {
    println!("mcp_server/{what}: median {median:.0} µs, p99 {p99:.0} µs");
}

/// Rounds of the comparison of two builds.
const ROUNDS: usize = 5;

/// The round trips of each build, alternately ([`ROUNDS`] rounds per transport), then per
/// build and transport the median of its rounds' medians.
async fn compare(builds: &[Build]) {
    let mut medians = vec![[Vec::new(), Vec::new()]; builds.len()];
    for round in 1..=ROUNDS {
        for (b, build) in builds.iter().enumerate() {
            let client = stdio_client_of(&build.bin, &build.root).await;
            let what = format!("{} (round {round}): stdio round trip", build.name);
            let measured = round_trips(&client).await;
            report(&what, measured);
            medians[b][0].push(measured.0);
            let _ = client.cancel().await;
        }
        for (b, build) in builds.iter().enumerate() {
            let server = HttpServer::start_of(&build.bin, &build.root, build.http_args, &[]);
            let client = http_client(&server.url).await;
            let what = format!(
                "{} (round {round}): http (stateless) round trip",
                build.name
            );
            let measured = round_trips(&client).await;
            report(&what, measured);
            medians[b][1].push(measured.0);
            let _ = client.cancel().await;
        }
    }
    for (build, [stdio, http]) in builds.iter().zip(&mut medians) {
        for (transport, rounds) in [("stdio", stdio), ("http (stateless)", http)] {
            rounds.sort_by(f64::total_cmp);
            let median = rounds[rounds.len() / 2];
            println!(
                "mcp_server/{}: {transport} round trip, median of {ROUNDS} rounds' medians: {median:.0} µs",
                build.name
            );
        }
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if let Some(other) = Build::against() {
        compare(&[Build::this(), other]).await;
        return;
    }
    let root = TestRoot::new();
    root.tool("usr", "noop", Fixture::Noop);

    let client = stdio_client(&root).await;
    report("stdio round trip", round_trips(&client).await);
    let _ = client.cancel().await;

    for (name, args) in [
        ("http (stateless)", &[][..]),
        ("http (sessions)", &["--sessions"][..]),
    ] {
        let server = HttpServer::start(&root, args);
        let url = server.url.clone();
        let client = http_client(&url).await;
        report(&format!("{name} round trip"), round_trips(&client).await);
        let _ = client.cancel().await;
        let mut clients = Vec::new();
        for _ in 0..CLIENTS {
            clients.push(http_client(&url).await);
        }
        let rate = throughput(clients).await;
        println!("mcp_server/{name} throughput, {CLIENTS} clients: {rate:.0} calls/s");
        drop(server);
    }

    let mut clients = Vec::new();
    for _ in 0..CLIENTS {
        clients.push(stdio_client(&root).await);
    }
    let rate = throughput(clients).await;
    println!(
        "mcp_server/stdio throughput, {CLIENTS} clients (a server process each): {rate:.0} calls/s"
    );
}
