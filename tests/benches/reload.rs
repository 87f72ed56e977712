//! Live reload: how long from the last step of writing a rebuilt library to the first call
//! answered by the new code, and how much memory each retained generation keeps.
//!
//! Run with `cargo bench -p toolhost-tests --bench reload`. A plain bench binary: every reload
//! maps a new generation that is never unmapped, so the counts are fixed.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use toolhost::output::Silent;
use toolhost::{Agent, Host};
use toolhost_tests::{Fixture, TestRoot};

const TOOL: &str = "usr/tools/ver.so";
const SWAPS: usize = 100;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

/// A field of `/proc/self/status` or `/proc/meminfo`, in KiB.
fn kib(file: &str, field: &str) -> u64 {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap_or(0)
}

fn answer(runtime: &tokio::runtime::Runtime, agent: &Arc<Agent>) -> String {
    runtime
        .block_on(agent.call_tool("ver", json!({})))
        .map(|r| r.message)
        .unwrap_or_else(|e| format!("error: {e}"))
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo test --benches` asks for a list of benchmarks; there are none to list.
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let builds = [(Fixture::Versioned, "v1"), (Fixture::VersionedV2, "v2")];

    // Latency, through the watcher, with the default debounce.
    for (pattern, cargo) in [
        ("rename into place", false),
        ("cargo's delete + hard link", true),
    ] {
        let root = TestRoot::new();
        root.copy(Fixture::Versioned, TOOL);
        let host = root.host();
        let _watcher = host.watch().unwrap();
        let agent = Agent::with_output(host.clone(), "A0", "default", Arc::new(Silent)).unwrap();
        assert_eq!(answer(&runtime, &agent), "v1");
        let mut latencies = Vec::new();
        for i in 1..=SWAPS {
            let (fixture, expected) = builds[i % 2];
            // Everything up to the final step is done before the clock starts.
            let started = if cargo {
                root.replace_like_cargo(TOOL, fixture);
                Instant::now()
            } else {
                let bytes = std::fs::read(fixture.path()).unwrap();
                let tmp = root.path().join("usr/tools/ver.so.tmp");
                std::fs::write(&tmp, bytes).unwrap();
                std::fs::rename(&tmp, root.path().join(TOOL)).unwrap();
                Instant::now()
            };
            loop {
                if answer(&runtime, &agent) == expected {
                    break;
                }
                assert!(
                    started.elapsed() < Duration::from_secs(10),
                    "swap {i} never answered"
                );
                std::thread::sleep(Duration::from_micros(200));
            }
            latencies.push(started.elapsed());
            std::thread::sleep(Duration::from_millis(20));
        }
        latencies.sort();
        println!(
            "reload latency, {pattern} ({SWAPS} swaps, debounce {}): median {}, p90 {}, p99 {}, \
             max {}",
            ms(host.options().debounce),
            ms(percentile(&latencies, 0.5)),
            ms(percentile(&latencies, 0.9)),
            ms(percentile(&latencies, 0.99)),
            ms(*latencies.last().unwrap()),
        );
    }

    // Memory: reload one plugin many times (synchronously, no watcher), calling each generation
    // so that its runtime starts, then compare resident memory with the library's file size.
    let root = TestRoot::new();
    let path = root.copy(Fixture::Versioned, TOOL);
    let host = Arc::new(Host::new(root.path()).unwrap());
    let agent = Agent::with_output(host.clone(), "A0", "default", Arc::new(Silent)).unwrap();
    let swap = |i: usize| {
        let (fixture, expected) = builds[i % 2];
        root.replace(TOOL, fixture);
        host.files_changed(std::slice::from_ref(&path));
        assert_eq!(answer(&runtime, &agent), expected);
    };
    // Warm up: both builds' pages in the page cache, allocator arenas grown.
    for i in 0..4 {
        swap(i);
    }
    std::thread::sleep(Duration::from_millis(100));
    let status = "/proc/self/status";
    let (rss0, anon0, file0, shmem0) = (
        kib(status, "VmRSS"),
        kib(status, "RssAnon"),
        kib(status, "RssFile"),
        kib(status, "RssShmem"),
    );
    let system_shmem0 = kib("/proc/meminfo", "Shmem");
    let before = host.generations();
    for i in 0..SWAPS {
        swap(i);
    }
    std::thread::sleep(Duration::from_millis(100));
    let after = host.generations();
    let generations = after.loaded - before.loaded;
    let per = |now: u64, then: u64| (now as f64 - then as f64) / generations as f64;
    let size_kib = std::fs::metadata(Fixture::VersionedV2.path())
        .unwrap()
        .len() as f64
        / 1024.0;
    let rss = per(kib(status, "VmRSS"), rss0);
    let system_shmem = per(kib("/proc/meminfo", "Shmem"), system_shmem0);
    println!(
        "memory per retained generation ({generations} reloads of a {size_kib:.0} KiB library, \
         {} still live): resident {rss:.0} KiB = {:.2}x the file (anonymous {:.0} KiB, \
         file-backed {:.0} KiB, shared {:.0} KiB); system-wide shared memory {system_shmem:.0} \
         KiB ({:.2}x the file)",
        after.live,
        rss / size_kib,
        per(kib(status, "RssAnon"), anon0),
        per(kib(status, "RssFile"), file0),
        per(kib(status, "RssShmem"), shmem0),
        system_shmem / size_kib,
    );
}
