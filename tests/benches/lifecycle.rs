//! The cost of one tool call: a direct in-process call, the bare ABI call, and the full
//! lifecycle (hooks, two extensions before and two after, intervention checks, log, history),
//! governed: the noop tool's 3-property schema validated, its breaker closed, the policy
//! "allow", on a call thread under its deadline. Without the audit (`[audit] enabled = false`)
//! and with it (the default). Without a tokio runtime `execute` runs on the caller's thread;
//! the "tokio runtime" row awaits the calls in `Runtime::block_on`, where `execute` runs on a
//! call thread under its deadline, and the "tokio task" row in a task of the runtime, built
//! with `run_calls_on_workers`, where it runs as another task of the same
//! worker under its deadline.
//! The `busy` group repeats the caller-thread, runtime and task rows with one and with two
//! threads spinning beside them, as on a machine whose cores are busy.
//!
//! Run with `cargo bench -p toolhost-tests --bench lifecycle`.

use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll, Waker};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use plugin_api::{Args, Response, ToolError};
use serde_json::json;
use toolhost::output::Silent;
use toolhost::{Agent, Host};
use toolhost_tests::{Fixture, TestRoot};

/// Polls a future that completes without waiting (every future here does).
fn ready<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    let mut cx = TaskContext::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
    }
}

/// The fixture tool's body, compiled into the benchmark: what `execute` does in-process.
struct Noop;
impl Noop {
    async fn execute(&self, args_json: &str) -> Result<Response, ToolError> {
        let _args = Args::from_json(args_json)?;
        Ok(Response::default())
    }
}

/// Times `iters` lifecycle calls of `noop`, with a fresh agent every 1,000 calls (not timed).
fn fresh_agents(host: &Arc<Host>, iters: u64, args: &serde_json::Value) -> Duration {
    in_batches(host, iters, |agent, n| {
        let start = Instant::now();
        for _ in 0..n {
            ready(agent.call_tool(black_box("noop"), args.clone())).unwrap();
        }
        start.elapsed()
    })
}

/// `n` calls of `noop` by `agent`, awaited one after the other; how long they took.
async fn timed_calls(agent: Arc<Agent>, n: u64, args: serde_json::Value) -> Duration {
    let start = Instant::now();
    for _ in 0..n {
        let call = agent.call_tool(black_box("noop"), args.clone());
        call.await.unwrap();
    }
    start.elapsed()
}

/// As [`fresh_agents`], awaited inside a tokio runtime, as the CLI and an embedding program
/// call: `execute` then runs on a call thread under its deadline (without a runtime it runs on
/// the caller's thread, with no deadline).
fn fresh_agents_on(
    runtime: &tokio::runtime::Runtime,
    host: &Arc<Host>,
    iters: u64,
    args: &serde_json::Value,
) -> Duration {
    in_batches(host, iters, |agent, n| {
        runtime.block_on(timed_calls(agent.clone(), n, args.clone()))
    })
}

/// As [`fresh_agents_on`], in a task of the runtime.
fn fresh_agents_in_task(
    runtime: &tokio::runtime::Runtime,
    host: &Arc<Host>,
    iters: u64,
    args: &serde_json::Value,
) -> Duration {
    in_batches(host, iters, |agent, n| {
        let task = runtime.spawn(timed_calls(agent.clone(), n, args.clone()));
        runtime.block_on(task).unwrap()
    })
}

/// `n` threads that spin until dropped: a machine whose cores are busy.
struct Busy {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Busy {
    fn start(n: usize) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = (0..n)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        Self { stop, threads }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Runs `iters` calls in batches of at most 1,000, each on a fresh agent (made untimed);
/// `batch` times its `n` calls.
fn in_batches(
    host: &Arc<Host>,
    iters: u64,
    batch: impl Fn(&Arc<Agent>, u64) -> Duration,
) -> Duration {
    let mut total = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let n = left.min(1000);
        left -= n;
        let agent = Agent::with_output(host.clone(), "A0", "default", Arc::new(Silent)).unwrap();
        total += batch(&agent, n);
    }
    total
}

/// Turns the audit off for every profile of `root`.
fn without_audit(root: &TestRoot) {
    root.write("usr/toolhost.toml", "[audit]\nenabled = false\n");
}

fn bench(c: &mut Criterion) {
    let root = TestRoot::new();
    without_audit(&root);
    root.tool("usr", "noop", Fixture::Noop);
    for point in ["tool_execute_before", "tool_execute_after"] {
        root.extension("usr", point, "_10_a", Fixture::NoopExt);
        root.extension("core", point, "_20_b", Fixture::NoopExt);
    }
    let agent = Agent::with_output(root.host(), "A0", "default", Arc::new(Silent)).unwrap();
    // Three properties, as the noop tool's schema declares them.
    let args = json!({"city": "Paris", "days": 3, "units": "metric"});
    // Warm the caches: the first call loads the libraries.
    ready(agent.call_tool("noop", args.clone())).unwrap();
    assert_eq!(
        agent
            .host()
            .extensions("default", "tool_execute_before")
            .len(),
        2
    );

    let args_json = args.to_string();
    let mut group = c.benchmark_group("call");
    group.bench_function("direct in-process", |b| {
        b.iter(|| ready(Noop.execute(black_box(&args_json))).unwrap())
    });
    let noop = agent
        .host()
        .resolve("default", "noop")
        .found
        .clone()
        .unwrap()
        .handle;
    group.bench_function("bare ABI execute", |b| {
        b.iter(|| ready(agent.execute_bare(black_box(&noop), &args)).unwrap())
    });
    let bare_root = TestRoot::new();
    without_audit(&bare_root);
    bare_root.tool("usr", "noop", Fixture::Noop);
    let plain = Agent::with_output(bare_root.host(), "A0", "default", Arc::new(Silent)).unwrap();
    ready(plain.call_tool("noop", args.clone())).unwrap();
    group.bench_function("full lifecycle, no extensions", |b| {
        b.iter_custom(|iters| fresh_agents(plain.host(), iters, &args))
    });

    // Calls made by its tasks run as tasks of its workers (the "tokio task" rows).
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    let runtime = toolhost::run_calls_on_workers(&mut builder)
        .enable_all()
        .build()
        .unwrap();
    group.bench_function("full lifecycle, no extensions, tokio runtime", |b| {
        b.iter_custom(|iters| fresh_agents_on(&runtime, plain.host(), iters, &args))
    });
    group.bench_function("full lifecycle, no extensions, tokio task", |b| {
        b.iter_custom(|iters| fresh_agents_in_task(&runtime, plain.host(), iters, &args))
    });

    let audited_root = TestRoot::new();
    audited_root.tool("usr", "noop", Fixture::Noop);
    let audited =
        Agent::with_output(audited_root.host(), "A0", "default", Arc::new(Silent)).unwrap();
    ready(audited.call_tool("noop", args.clone())).unwrap();
    group.bench_function("full lifecycle, no extensions, audited", |b| {
        b.iter_custom(|iters| fresh_agents(audited.host(), iters, &args))
    });

    // Each call adds a log item and a history entry; a fresh agent every 1,000 calls keeps the
    // measurement at a realistic session size instead of timing the growth of huge vectors.
    let host = agent.host().clone();
    group.bench_function("full lifecycle, 2+2 extensions", |b| {
        b.iter_custom(|iters| fresh_agents(&host, iters, &args))
    });
    group.finish();

    let mut busy = c.benchmark_group("busy");
    for spinning in [1, 2] {
        let _busy = Busy::start(spinning);
        busy.bench_function(format!("caller thread, {spinning} busy"), |b| {
            b.iter_custom(|iters| fresh_agents(plain.host(), iters, &args))
        });
        busy.bench_function(format!("tokio runtime, {spinning} busy"), |b| {
            b.iter_custom(|iters| fresh_agents_on(&runtime, plain.host(), iters, &args))
        });
        busy.bench_function(format!("tokio task, {spinning} busy"), |b| {
            b.iter_custom(|iters| fresh_agents_in_task(&runtime, plain.host(), iters, &args))
        });
    }
    busy.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
