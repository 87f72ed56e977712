//! Loading costs: one plugin library (copy, checks, dlopen, layout check, instance), and
//! `list` over 200 tool libraries, in-process and through the CLI.
//!
//! Run with `cargo bench -p toolhost-tests --bench loading`. A plain bench binary: each load
//! maps a new copy that is never unloaded, so the iteration counts are fixed and small.

use std::process::Command;
use std::time::{Duration, Instant};

use toolhost::Host;
use toolhost_tests::{toolhost_bin, Fixture, TestRoot};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn percentile(mut v: Vec<Duration>, p: f64) -> Duration {
    v.sort();
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo test --benches` asks for a list of benchmarks; there are none to list.
    }
    let size = std::fs::metadata(Fixture::Noop.path()).unwrap().len();

    // One library, each time in a fresh host so nothing is cached.
    let root = TestRoot::new();
    root.tool("usr", "noop", Fixture::Noop);
    let mut loads = Vec::new();
    for _ in 0..101 {
        let host = Host::new(root.path()).unwrap();
        let start = Instant::now();
        let found = host.resolve("default", "noop").found.is_some();
        loads.push(start.elapsed());
        assert!(found);
    }

    // 200 copies of one library under 200 names.
    let root = TestRoot::new();
    for i in 0..200 {
        root.tool("usr", &format!("tool_{i:03}"), Fixture::Noop);
    }
    let mut lists = Vec::new();
    for _ in 0..7 {
        let host = Host::new(root.path()).unwrap();
        let start = Instant::now();
        let n = host.list("default").tools.len();
        lists.push(start.elapsed());
        assert_eq!(n, 200);
    }
    let mut cli = Vec::new();
    for _ in 0..7 {
        let start = Instant::now();
        let out = Command::new(toolhost_bin())
            .args(["--root".as_ref(), root.path().as_os_str(), "list".as_ref()])
            .output()
            .unwrap();
        cli.push(start.elapsed());
        assert!(out.status.success());
    }

    println!("| measurement | median | other |");
    println!("|---|---|---|");
    println!(
        "| load one plugin library ({} KiB, 101 loads) | {:.0} µs | p90 {:.0} µs |",
        size / 1024,
        median(loads.clone()).as_secs_f64() * 1e6,
        percentile(loads, 0.9).as_secs_f64() * 1e6
    );
    println!(
        "| `Host::list` over 200 tool libraries (7 runs) | {:.1} ms | min {:.1} ms |",
        median(lists.clone()).as_secs_f64() * 1e3,
        lists.iter().min().unwrap().as_secs_f64() * 1e3
    );
    println!(
        "| `toolhost list` over 200 tool libraries, whole process (7 runs) | {:.1} ms | min {:.1} ms |",
        median(cli.clone()).as_secs_f64() * 1e3,
        cli.iter().min().unwrap().as_secs_f64() * 1e3
    );
}
