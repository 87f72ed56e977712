//! Peak memory of the host for one long tool answer: `toolhost call echo:big` with answers of
//! 50, 100 and 200 MB, each in a fresh process, its peak resident size read from the kernel
//! (`getrusage` of the finished child). The host cuts what goes on to the model and the
//! history at `max_output` bytes right after `execute`, so the peak should stay within about
//! twice the answer (the plugin's copy and the host's, while the answer crosses over).
//!
//! Run with `cargo bench -p toolhost-tests --bench large_output` (Linux).

use std::process::Command;

use toolhost_tests::{toolhost_bin, Fixture, TestRoot};

/// Peak resident size of the children that have ended so far, in bytes (Linux: KiB units).
fn children_peak() -> u64 {
    // SAFETY: getrusage only writes the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) };
    usage.ru_maxrss as u64 * 1024
}

/// Runs `toolhost call echo:big` for an answer of `bytes` and returns its peak RSS. Done in a
/// child of this bench (itself run again), so that the cargo build of the fixtures, another
/// child of the bench, does not count.
fn measure(root: &std::path::Path, bytes: u64) -> u64 {
    let out = Command::new(std::env::current_exe().expect("bench binary"))
        .env("LARGE_OUTPUT_ROOT", root)
        .env("LARGE_OUTPUT_BYTES", bytes.to_string())
        .output()
        .expect("running the measuring child");
    let text = String::from_utf8_lossy(&out.stdout);
    text.trim()
        .parse()
        .unwrap_or_else(|_| panic!("no peak reported: {text}"))
}

/// The measuring child: one `toolhost call`, then its peak.
fn child(root: &str, bytes: &str) {
    let status = Command::new(toolhost_bin())
        .args(["--root", root, "call", "echo:big", "--args"])
        .arg(format!("{{\"bytes\": {bytes}}}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("running toolhost");
    assert!(status.success(), "toolhost call failed");
    println!("{}", children_peak());
}

fn main() {
    if let (Ok(root), Ok(bytes)) = (
        std::env::var("LARGE_OUTPUT_ROOT"),
        std::env::var("LARGE_OUTPUT_BYTES"),
    ) {
        return child(&root, &bytes);
    }
    let root = TestRoot::new();
    root.tool("usr", "echo", Fixture::Echo); // builds the fixtures and toolhost first
    println!("answer     peak RSS   peak / answer");
    for mb in [50u64, 100, 200] {
        let bytes = mb * 1_000_000;
        let peak = measure(root.path(), bytes);
        println!(
            "{mb:>4} MB   {:>7.1} MB   {:.2}",
            peak as f64 / 1e6,
            peak as f64 / bytes as f64
        );
    }
}
