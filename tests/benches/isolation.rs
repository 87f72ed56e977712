//! Isolated plugins: a no-op call in a worker process (with and without its sandbox) against
//! the same call in the host's process and the direct Rust call, in one run; calls per second
//! on one worker; and the start of a worker (load of an isolated tool: read, private copy,
//! spawn, sandbox, library load, hello), with and without the sandbox.
//!
//! Run with `cargo bench -p toolhost-tests --bench isolation` (or `--profile dev` for a quick
//! comparison of the sandbox's cost in the same run).

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use plugin_api::{Args, Response, ToolError};
use serde_json::json;
use toolhost::output::Silent;
use toolhost::{Agent, Host};
use toolhost_tests::{Fixture, TestRoot};

/// The fixture tool's body, compiled into the benchmark: what `execute` does in-process.
struct Noop;
impl Noop {
    async fn execute(&self, args_json: &str) -> Result<Response, ToolError> {
        let _args = Args::from_json(args_json)?;
        Ok(Response::default())
    }
}

/// Where the noop tool runs.
#[derive(Clone, Copy)]
enum Runs {
    InProcess,
    /// In a worker, `sandbox = "off"`.
    Isolated,
    /// In a sandboxed worker (the default of an isolated tool).
    Sandboxed,
}

/// A root with the noop tool, run as `runs` says, without the audit.
fn root(runs: Runs) -> TestRoot {
    let root = TestRoot::new();
    root.tool("usr", "noop", Fixture::Noop);
    let config = match runs {
        Runs::InProcess => "",
        Runs::Isolated => "isolate = [\"noop\"]\n\n[tools.noop]\nsandbox = \"off\"\n\n",
        Runs::Sandboxed => "isolate = [\"noop\"]\n\n",
    };
    root.write(
        "usr/toolhost.toml",
        format!("{config}[audit]\nenabled = false\n"),
    );
    root
}

fn agent(root: &TestRoot) -> Arc<Agent> {
    Agent::with_output(root.host(), "A0", "default", Arc::new(Silent)).unwrap()
}

fn bench_calls(c: &mut Criterion, rt: &tokio::runtime::Runtime) {
    let args = json!({"city": "Paris", "days": 3, "units": "metric"});
    let args_json = args.to_string();
    let (in_root, iso_root) = (root(Runs::InProcess), root(Runs::Isolated));
    let sandbox_root = root(Runs::Sandboxed);
    let (local, isolated) = (agent(&in_root), agent(&iso_root));
    let sandboxed = agent(&sandbox_root);
    rt.block_on(local.call_tool("noop", args.clone())).unwrap();
    rt.block_on(isolated.call_tool("noop", args.clone()))
        .unwrap();
    rt.block_on(sandboxed.call_tool("noop", args.clone()))
        .unwrap();
    let handle = |a: &Agent| {
        a.host()
            .resolve("default", "noop")
            .found
            .clone()
            .unwrap()
            .handle
    };
    let (local_tool, isolated_tool) = (handle(&local), handle(&isolated));
    let sandboxed_tool = handle(&sandboxed);
    assert!(isolated_tool.is_isolated() && !local_tool.is_isolated());
    assert!(isolated_tool.sandbox().is_none() && sandboxed_tool.sandbox().is_some());

    let mut group = c.benchmark_group("isolation");
    group.bench_function("direct in-process", |b| {
        b.iter(|| rt.block_on(Noop.execute(black_box(&args_json))).unwrap())
    });
    group.bench_function("bare execute, in-process", |b| {
        b.iter(|| {
            rt.block_on(local.execute_bare(black_box(&local_tool), &args))
                .unwrap()
        })
    });
    group.bench_function("bare execute, isolated", |b| {
        b.iter(|| {
            rt.block_on(isolated.execute_bare(black_box(&isolated_tool), &args))
                .unwrap()
        })
    });
    group.bench_function("bare execute, isolated and sandboxed", |b| {
        b.iter(|| {
            rt.block_on(sandboxed.execute_bare(black_box(&sandboxed_tool), &args))
                .unwrap()
        })
    });
    group.bench_function("governed lifecycle, in-process", |b| {
        b.iter_custom(|iters| fresh_agents(rt, local.host(), iters, &args))
    });
    group.bench_function("governed lifecycle, isolated", |b| {
        b.iter_custom(|iters| fresh_agents(rt, isolated.host(), iters, &args))
    });
    group.finish();

    // Calls per second on one worker: 64 bare calls in flight at once.
    let mut group = c.benchmark_group("isolation throughput");
    group.throughput(Throughput::Elements(64));
    group.bench_function("64 concurrent bare calls, one worker", |b| {
        b.iter(|| {
            rt.block_on(async {
                let mut set = tokio::task::JoinSet::new();
                for _ in 0..64 {
                    let (agent, tool, args) =
                        (isolated.clone(), isolated_tool.clone(), args.clone());
                    set.spawn(async move { agent.execute_bare(&tool, &args).await.unwrap() });
                }
                while set.join_next().await.is_some() {}
            })
        })
    });
    group.finish();
}

/// Times `iters` governed calls of `noop`, with a fresh agent every 1,000 calls (not timed).
fn fresh_agents(
    rt: &tokio::runtime::Runtime,
    host: &Arc<Host>,
    iters: u64,
    args: &serde_json::Value,
) -> Duration {
    let mut total = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let n = left.min(1000);
        left -= n;
        let agent = Agent::with_output(host.clone(), "A0", "default", Arc::new(Silent)).unwrap();
        let start = Instant::now();
        rt.block_on(async {
            for _ in 0..n {
                agent
                    .call_tool(black_box("noop"), args.clone())
                    .await
                    .unwrap();
            }
        });
        total += start.elapsed();
    }
    total
}

/// The start of a worker: a fresh host resolves the isolated tool (its file read and hashed,
/// a private copy made, the worker spawned, its sandbox applied, the library loaded there, the
/// hello read).
fn bench_start(c: &mut Criterion) {
    let mut group = c.benchmark_group("isolation start");
    group.sample_size(20);
    for (name, runs) in [
        ("worker start (isolated tool load)", Runs::Isolated),
        ("worker start, sandboxed", Runs::Sandboxed),
    ] {
        let root = root(runs);
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let host = root.host();
                    let start = Instant::now();
                    let found = host.resolve("default", "noop").found.clone().unwrap();
                    total += start.elapsed();
                    assert!(found.handle.is_isolated());
                    drop(found);
                    drop(host); // not timed: the worker exits once its stdin closes
                }
                total
            })
        });
    }
    group.finish();
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    bench_calls(c, &rt);
    bench_start(c);
}

criterion_group!(benches, bench);
criterion_main!(benches);
