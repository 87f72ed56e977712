//! A reload of an isolated tool starts a new worker and the old one exits, so memory comes
//! back: after 100 reloads the host and its workers use no more than after the first.

use std::time::Duration;

use toolhost_tests::{wait_for, Fixture, TestRoot};

use super::super::watch_mode::WatchProcess;

const TOOL: &str = "usr/tools/ver.so";

/// Resident memory of process `pid`, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// The live child processes of `pid`.
fn children(pid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(child) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let Some((_, rest)) = stat.rsplit_once(") ") else {
            continue;
        };
        let mut fields = rest.split(' ');
        let state = fields.next().unwrap_or("Z");
        if state != "Z" && fields.next() == Some(pid.to_string().as_str()) {
            found.push(child);
        }
    }
    found
}

/// Host and workers: resident KiB, once exactly one worker is left.
fn settled_rss(host: u32) -> (u64, u64) {
    let workers = wait_for("the old workers to exit", || match children(host) {
        w if w.len() == 1 => Ok(w),
        w => Err(w),
    });
    std::thread::sleep(Duration::from_millis(200));
    (rss_kib(host), workers.iter().map(|w| rss_kib(*w)).sum())
}

#[test]
fn a_hundred_reloads_of_an_isolated_tool_keep_memory_bounded() {
    let root = TestRoot::new();
    root.copy(Fixture::Versioned, TOOL);
    let mut watch = WatchProcess::isolated(&root);
    watch.expect_line("announcing the tools", |l| l.starts_with("watching "));
    // Answered once the watcher runs: a rebuild from now on is seen.
    watch.send("ver");
    watch.expect_line("the first build's answer", |l| l == "v1");
    let host = watch.child.id();
    let mut first = None;
    for n in 1..=100u32 {
        let (fixture, answer) = match n % 2 {
            1 => (Fixture::VersionedV2, "v2"),
            _ => (Fixture::Versioned, "v1"),
        };
        root.replace(TOOL, fixture);
        watch.expect_line("the reload", |l| l.starts_with("reloaded "));
        watch.send("ver");
        watch.expect_line("the new build's answer", |l| l == answer);
        if n == 1 {
            first = Some(settled_rss(host));
        }
    }
    let (host_first, workers_first) = first.unwrap();
    let (host_last, workers_last) = settled_rss(host);
    eprintln!(
        "isolated reloads: host {host_first} -> {host_last} KiB, worker {workers_first} -> {workers_last} KiB (after reload 1 -> 100)"
    );
    // In this process, 100 generations would keep 100 mapped libraries (tens of MiB): here
    // the total may only drift by allocator noise.
    let (before, after) = (host_first + workers_first, host_last + workers_last);
    assert!(
        after <= before + 2048,
        "{before} KiB after reload 1, {after} KiB after 100"
    );
    assert_eq!(children(host).len(), 1, "one worker left");
}
