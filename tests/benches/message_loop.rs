//! The message loop's costs: secret masking (against the naive replace loop, same run), eight
//! parallel calls of a tool that sleeps 100 ms, and the overhead of one loop iteration.
//!
//! Run with `cargo bench -p toolhost-tests --bench message_loop`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use toolhost::output::Silent;
use toolhost::{Agent, LoopOptions, ScriptedModel, Secrets};
use toolhost_tests::{Fixture, TestRoot};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// A deterministic pseudo-random generator (xorshift), so every run masks the same text.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn token(&mut self, len: usize) -> String {
        const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789-_";
        (0..len)
            .map(|_| ALPHABET[(self.next() % ALPHABET.len() as u64) as usize] as char)
            .collect()
    }
}

fn masking() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let pairs: Vec<(String, String)> = (0..1000)
        .map(|i| {
            let len = 8 + (rng.next() % 33) as usize;
            (format!("KEY_{i}"), rng.token(len))
        })
        .collect();
    let secrets = Secrets::from_pairs(pairs.clone());
    // 64 KiB of words with a secret value every ~1 KiB.
    let mut text = String::new();
    while text.len() < 64 * 1024 {
        if rng.next() % 150 == 0 {
            text.push_str(&pairs[(rng.next() % 1000) as usize].1);
        } else {
            let len = 1 + (rng.next() % 9) as usize;
            text.push_str(&rng.token(len));
        }
        text.push(' ');
    }
    let mb = text.len() as f64 / 1e6;

    let fast: Vec<Duration> = (0..51)
        .map(|_| {
            let start = Instant::now();
            std::hint::black_box(secrets.mask(std::hint::black_box(&text)));
            start.elapsed()
        })
        .collect();
    // Agent Zero's way: every value, longest first, `str::replace` over the whole text.
    let mut by_length = pairs.clone();
    by_length.sort_by_key(|(_, v)| std::cmp::Reverse(v.len()));
    let naive: Vec<Duration> = (0..5)
        .map(|_| {
            let start = Instant::now();
            let mut out = text.clone();
            for (key, value) in &by_length {
                if out.contains(value.as_str()) {
                    out = out.replace(value.as_str(), &format!("§§secret({key})"));
                }
            }
            std::hint::black_box(out);
            start.elapsed()
        })
        .collect();
    let naive_plain: Vec<Duration> = (0..5)
        .map(|_| {
            let start = Instant::now();
            let mut out = text.clone();
            for (key, value) in &by_length {
                out = out.replace(value.as_str(), &format!("§§secret({key})"));
            }
            std::hint::black_box(out);
            start.elapsed()
        })
        .collect();
    assert_eq!(
        secrets.mask(&text),
        {
            let mut out = text.clone();
            for (key, value) in &by_length {
                out = out.replace(value.as_str(), &format!("§§secret({key})"));
            }
            out
        },
        "both ways must give the same text"
    );
    let (fast, naive, naive_plain) = (median(fast), median(naive), median(naive_plain));
    let rate = |d: Duration| mb / d.as_secs_f64();
    println!(
        "masking 64 KiB with 1,000 secrets: aho-corasick {:.0} µs ({:.0} MB/s); naive replace \
         loop {:.0} µs ({:.1} MB/s, {:.0}x slower); naive with a contains() check first {:.0} µs \
         ({:.1} MB/s, {:.0}x slower)",
        fast.as_secs_f64() * 1e6,
        rate(fast),
        naive_plain.as_secs_f64() * 1e6,
        rate(naive_plain),
        naive_plain.as_secs_f64() / fast.as_secs_f64(),
        naive.as_secs_f64() * 1e6,
        rate(naive),
        naive.as_secs_f64() / fast.as_secs_f64(),
    );
}

fn parallel(runtime: &tokio::runtime::Runtime) {
    let root = TestRoot::new();
    root.tool("usr", "echo", Fixture::Echo);
    let agent = Agent::with_output(root.host(), "A0", "default", Arc::new(Silent)).unwrap();
    let calls: Vec<_> = (0..8)
        .map(|_| json!({"tool_name": "echo:sleep", "tool_args": {"ms": 100}}))
        .collect();
    let args = json!({ "calls": calls });
    runtime
        .block_on(agent.call_tool("parallel", args.clone()))
        .unwrap(); // warm up: load the library, start its runtime
    let times: Vec<Duration> = (0..21)
        .map(|_| {
            let start = Instant::now();
            let r = runtime
                .block_on(agent.call_tool("parallel", args.clone()))
                .unwrap();
            assert!(!r.message.contains("\"error\""), "{}", r.message);
            start.elapsed()
        })
        .collect();
    let mut sorted = times.clone();
    sorted.sort();
    println!(
        "8 parallel calls of a tool that sleeps 100 ms, whole parallel call (21 runs): median \
         {:.1} ms, max {:.1} ms",
        median(times).as_secs_f64() * 1e3,
        sorted.last().unwrap().as_secs_f64() * 1e3
    );
}

fn iteration(runtime: &tokio::runtime::Runtime) {
    let root = TestRoot::new();
    root.tool("usr", "noop", Fixture::Noop);
    root.tool("core", "response", Fixture::Response);
    let host = root.host();
    const ITERATIONS: usize = 200;
    let reply = json!({"thoughts": ["again"], "headline": "Calling noop", "tool_name": "noop", "tool_args": {"a": 1}}).to_string();
    let run = |n: usize| {
        let agent = Agent::with_output(host.clone(), "A0", "default", Arc::new(Silent)).unwrap();
        // Each reply differs (the same reply twice is a "repeat").
        let mut replies: Vec<String> = (0..n)
            .map(|i| reply.replace("\"a\":1", &format!("\"a\":{i}")))
            .collect();
        replies.push(json!({"tool_name": "response", "tool_args": {"text": "done"}}).to_string());
        let model = ScriptedModel::new(replies);
        let options = LoopOptions::default().with_max_iterations(n + 1);
        let start = Instant::now();
        let answer = runtime
            .block_on(agent.monologue(&model, "go", &options))
            .unwrap();
        assert_eq!(answer, "done");
        start.elapsed()
    };
    run(10); // warm up
    let per: Vec<Duration> = (0..11)
        .map(|_| run(ITERATIONS) / ITERATIONS as u32)
        .collect();
    println!(
        "one loop iteration (system prompt, scripted reply streamed and masked, parse, full \
         lifecycle of a no-op tool, history and log), {ITERATIONS} per run, 11 runs: median {:.1} µs",
        median(per).as_secs_f64() * 1e6
    );
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo test --benches` asks for a list of benchmarks; there are none to list.
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    masking();
    parallel(&runtime);
    iteration(&runtime);
}
