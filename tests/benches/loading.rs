//! Loading costs: one plugin library (private copy in memory or in a file, checks, dlopen,
//! layout check walked or skipped, instance), and `list` over 200 tool libraries, in-process
//! and through the CLI: loading every library, and with the metadata cache cold (`usr/.cache`
//! removed first) and warm.
//!
//! Run with `cargo bench -p toolhost-tests --bench loading`. A plain bench binary: each load
//! maps a new copy that is never unloaded, so the iteration counts are fixed and small.

use std::process::Command;
use std::time::{Duration, Instant};

use toolhost::{Host, HostOptions};
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

    // One library, each time in a fresh host so nothing but the record of checked layouts is
    // kept. Four ways, taken in turn in each round so that the machine's load hits all alike:
    // mapped from a file copy (`HostOptions::file_copies`, as before in-memory files) or from an
    // in-memory file; with abi_stable's layout walk (no record: cold) or without (warm).
    let root = TestRoot::new();
    root.tool("usr", "noop", Fixture::Noop);
    let record = root.path().join("usr/.cache/checked-layouts");
    let load = |copy: bool, warm: bool| {
        if !warm {
            let _ = std::fs::remove_file(&record);
        }
        let options = HostOptions::default().with_file_copies(copy);
        let host = Host::with_options(root.path(), options).unwrap();
        let start = Instant::now();
        let found = host.resolve("default", "noop").found.is_some();
        let took = start.elapsed();
        assert!(found);
        let stats = host.load_stats();
        assert_eq!(stats.copied == 1, copy, "{stats:?}");
        assert_eq!(stats.layout_checks_skipped == 1, warm, "{stats:?}");
        took
    };
    // The first load of the process also computes the host's contract identity (once).
    let first = load(false, false);
    let ways = [
        (true, false, "file copy, layout walked (before)"),
        (false, false, "in-memory file, layout walked (cold record)"),
        (true, true, "file copy, walk skipped"),
        (
            false,
            true,
            "in-memory file, walk skipped (warm record: the usual case)",
        ),
    ];
    let mut loads = vec![Vec::new(); ways.len()];
    for _ in 0..101 {
        for (i, (copy, warm, _)) in ways.iter().enumerate() {
            loads[i].push(load(*copy, *warm));
        }
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
    // `Host::list` does not fill the metadata cache: one catalog does (the 200 files hold the
    // same bytes, so it loads one or two of them and hashes the others).
    Host::new(root.path()).unwrap().catalog("default");
    let mut warm_catalog = Vec::new();
    for _ in 0..7 {
        let host = Host::new(root.path()).unwrap();
        let start = Instant::now();
        let catalog = host.catalog("default");
        warm_catalog.push(start.elapsed());
        assert_eq!((catalog.tools.len(), host.generations().loaded), (200, 0));
    }
    let cache = root.path().join("usr/.cache");
    let list = |args: &[&str], cold: bool| {
        let mut runs = Vec::new();
        for _ in 0..7 {
            if cold {
                let _ = std::fs::remove_dir_all(&cache);
            }
            let start = Instant::now();
            let out = Command::new(toolhost_bin())
                .arg("--root")
                .arg(root.path())
                .args(args)
                .output()
                .unwrap();
            runs.push(start.elapsed());
            assert!(out.status.success());
        }
        runs
    };
    let cli = list(&["list", "--load"], false);
    let cold = list(&["list"], true);
    list(&["list"], false); // fills the cache for the CLI's own contract
    let warm = list(&["list"], false);

    println!("| measurement | median | other |");
    println!("|---|---|---|");
    for ((_, _, what), loads) in ways.iter().zip(loads) {
        println!(
            "| load one plugin library ({} KiB, 101 loads): {what} | {:.0} µs | p90 {:.0} µs |",
            size / 1024,
            median(loads.clone()).as_secs_f64() * 1e6,
            percentile(loads, 0.9).as_secs_f64() * 1e6
        );
    }
    println!(
        "| the first load of the process (in-memory file, walked; computes the contract identity) | {:.0} µs | one sample |",
        first.as_secs_f64() * 1e6
    );
    println!(
        "| `Host::list` over 200 tool libraries (7 runs) | {:.1} ms | min {:.1} ms |",
        median(lists.clone()).as_secs_f64() * 1e3,
        lists.iter().min().unwrap().as_secs_f64() * 1e3
    );
    let ms = |label: &str, runs: Vec<Duration>| {
        println!(
            "| {label} | {:.1} ms | min {:.1} ms |",
            median(runs.clone()).as_secs_f64() * 1e3,
            runs.iter().min().unwrap().as_secs_f64() * 1e3
        );
    };
    ms(
        "`Host::catalog` over 200 tool libraries, warm metadata cache (7 runs)",
        warm_catalog,
    );
    ms(
        "`toolhost list --load` over 200 tool libraries, whole process (7 runs)",
        cli,
    );
    ms(
        "`toolhost list` over 200 tool libraries, whole process, cold metadata cache (7 runs)",
        cold,
    );
    ms(
        "`toolhost list` over 200 tool libraries, whole process, warm metadata cache (7 runs)",
        warm,
    );
}
