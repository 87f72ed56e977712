//! The cost of one audit-log append of a typical call record (about 870 bytes on disk):
//! without fsync, with fsync (`sync_data` after each record), and after another writer
//! appended (the tail is read again first).
//!
//! Run with `cargo bench -p toolhost-tests --bench audit`.

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use toolhost::audit::{Audit, AuditOptions};
use toolhost_tests::audit::call_record;

/// Records per log: each batch writes a fresh log, so the file stays small.
const BATCH: u64 = 10_000;

/// Times `iters` appends with `options`, in logs of at most [`BATCH`] records; opening each
/// log is not timed.
fn appends(iters: u64, options: AuditOptions) -> Duration {
    let record = call_record("bench", 1);
    let mut total = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let n = left.min(BATCH);
        left -= n;
        let dir = tempfile::tempdir().expect("temp dir");
        let audit = Audit::open(dir.path(), options.clone()).expect("open");
        let start = Instant::now();
        for _ in 0..n {
            audit.append(&record).expect("append");
        }
        total += start.elapsed();
    }
    total
}

/// Times `iters` appends, each right after another writer's (not timed).
fn appends_after_another_writer(iters: u64) -> Duration {
    let record = call_record("bench", 1);
    let mut total = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let n = left.min(BATCH / 2);
        left -= n;
        let dir = tempfile::tempdir().expect("temp dir");
        let ours = Audit::open(dir.path(), AuditOptions::default()).expect("open");
        let other = Audit::open(dir.path(), AuditOptions::default()).expect("open");
        for _ in 0..n {
            other.append(&record).expect("append");
            let start = Instant::now();
            ours.append(&record).expect("append");
            total += start.elapsed();
        }
    }
    total
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("audit append");
    group.bench_function("no fsync", |b| {
        b.iter_custom(|iters| appends(iters, AuditOptions::default()))
    });
    group.bench_function("after another writer", |b| {
        b.iter_custom(appends_after_another_writer)
    });
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(10));
    group.bench_function("fsync", |b| {
        b.iter_custom(|iters| {
            let options = AuditOptions {
                fsync: true,
                key: None,
            };
            appends(iters, options)
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
