//! What the sandbox costs an isolated tool, measured in one run with the two kinds of worker
//! taken in turn (so that a busy machine slows both alike): the start of a worker (a fresh
//! host resolving the tool: read, private copy, spawn, sandbox applied, library load, hello)
//! and the round trip of a no-op call, each with `sandbox = "off"` and sandboxed. Prints the
//! median of each, and the difference; and the median time a worker took to apply its sandbox,
//! as the worker measured it (`ToolSandbox::applied_in`): the cost itself, without the noise of
//! starting a process on a busy machine; and the median time the host took to set up a
//! sandboxed worker's limits (its control group, `ToolSandbox::bounded_in`).
//!
//! Run with `cargo bench --profile dev -p toolhost-tests --bench sandbox` (the sandbox is
//! applied by the kernel, so the profile changes little of the difference; `cargo bench`
//! builds with LTO).

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use toolhost::output::Silent;
use toolhost::Agent;
use toolhost_tests::{Fixture, TestRoot};

/// Worker starts of each kind.
const STARTS: usize = 60;
/// Calls of each kind.
const CALLS: usize = 4000;

fn root(sandboxed: bool) -> TestRoot {
    let root = TestRoot::new();
    root.tool("usr", "noop", Fixture::Noop);
    let sandbox = match sandboxed {
        true => "",
        false => "\n[tools.noop]\nsandbox = \"off\"\n",
    };
    root.write(
        "usr/toolhost.toml",
        format!("isolate = [\"noop\"]\n{sandbox}\n[audit]\nenabled = false\n"),
    );
    root
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn report(what: &str, off: Vec<Duration>, on: Vec<Duration>) {
    let (off, on) = (median(off), median(on));
    let diff = on.as_secs_f64() - off.as_secs_f64();
    println!(
        "{what:<28} no sandbox {:>10.1} µs   sandboxed {:>10.1} µs   difference {:>+9.1} µs ({:.2}x)",
        off.as_secs_f64() * 1e6,
        on.as_secs_f64() * 1e6,
        diff * 1e6,
        on.as_secs_f64() / off.as_secs_f64()
    );
}

fn main() {
    let roots = [root(false), root(true)];
    // Worker start, the two kinds in turn.
    let mut starts = [Vec::new(), Vec::new()];
    let mut applied = Vec::new();
    let mut bounded = Vec::new();
    let mut limits = String::new();
    for round in 0..STARTS {
        for i in [round % 2, 1 - round % 2] {
            let host = roots[i].host();
            let start = Instant::now();
            let found = host.resolve("default", "noop").found.clone().unwrap();
            starts[i].push(start.elapsed());
            assert!(found.handle.is_isolated());
            assert_eq!(found.handle.sandbox().is_some(), i == 1);
            if let Some(sandbox) = found.handle.sandbox() {
                applied.push(sandbox.applied_in.unwrap());
                bounded.push(sandbox.bounded_in.unwrap());
                limits = sandbox.limits.unwrap();
            }
            drop(found);
            drop(host);
        }
    }
    // Round trips on one worker of each kind.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let agents: Vec<Arc<Agent>> = roots
        .iter()
        .map(|r| Agent::with_output(r.host(), "A0", "default", Arc::new(Silent)).unwrap())
        .collect();
    let tools: Vec<_> = agents
        .iter()
        .map(|a| {
            a.host()
                .resolve("default", "noop")
                .found
                .clone()
                .unwrap()
                .handle
        })
        .collect();
    let args = json!({"city": "Paris", "days": 3});
    let mut calls = [Vec::new(), Vec::new()];
    for round in 0..CALLS + 100 {
        for i in [round % 2, 1 - round % 2] {
            let start = Instant::now();
            rt.block_on(agents[i].execute_bare(&tools[i], &args))
                .unwrap();
            if round >= 100 {
                calls[i].push(start.elapsed());
            }
        }
    }
    let [off, on] = starts;
    report("worker start", off, on);
    println!(
        "{:<28} {:>10.1} µs (median, as the worker measured it)",
        "sandbox applied",
        median(applied).as_secs_f64() * 1e6
    );
    println!(
        "{:<28} {:>10.1} µs (median, in the host: {limits})",
        "limits set up",
        median(bounded).as_secs_f64() * 1e6
    );
    let [off, on] = calls;
    report("isolated call round trip", off, on);
}
