//! Fleet throughput: calls per second of the no-op tool through HAProxy with 1, 2 and 3
//! `toolhost serve-mcp --http` instances over one root (the fleet page's config), next to one
//! instance without the balancer, in one run. [`CLIENTS`] clients call back to back for
//! [`WINDOW`], each call a new connection (`Connection: close`, as the fleet test's clients);
//! [`ROUNDS`] rounds per row, the median printed.
//!
//! Run with `cargo bench -p toolhost-tests --bench fleet` (needs `haproxy`).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use toolhost_tests::balancer::{post_mcp, Balancer};
use toolhost_tests::{peers, toolhost_bin, Fixture, TestRoot};

const CLIENTS: usize = 16;
const WINDOW: Duration = Duration::from_secs(3);
const ROUNDS: usize = 3;

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

/// One `tools/call` of `noop` through `port`; panics unless it succeeded.
fn call(port: u16, id: u64) {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"noop","arguments":{{}}}}}}"#
    );
    let answer = post_mcp(port, &body).expect("an answer");
    assert!(
        answer.starts_with("HTTP/1.1 200") && answer.contains(r#""isError":false"#),
        "{answer}"
    );
}

/// Calls per second through `port`, [`CLIENTS`] clients for [`WINDOW`].
fn throughput(port: u16) -> f64 {
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let (stop, done) = (stop.clone(), done.clone());
            std::thread::spawn(move || {
                let mut id = (c as u64) << 32;
                while !stop.load(Ordering::Relaxed) {
                    id += 1;
                    call(port, id);
                    done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let start = Instant::now();
    std::thread::sleep(WINDOW);
    let counted = done.load(Ordering::Relaxed);
    let took = start.elapsed();
    stop.store(true, Ordering::Relaxed);
    for client in clients {
        client.join().expect("a client");
    }
    counted as f64 / took.as_secs_f64()
}

fn median(port: u16) -> f64 {
    throughput(port); // warm-up
    let mut rounds: Vec<f64> = (0..ROUNDS).map(|_| throughput(port)).collect();
    rounds.sort_by(f64::total_cmp);
    rounds[ROUNDS / 2]
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
    println!(
        "fleet/one instance, no balancer: {:.0} calls/s",
        median(ports[0])
    );
    for n in 1..=3 {
        let haproxy = Balancer::start(&root, &ports[..n]);
        println!(
            "fleet/haproxy, {n} instance(s): {:.0} calls/s",
            median(haproxy.port)
        );
    }
}
