//! `toolhost add` of a signed package of about 1 MB, from a fresh root that trusts its key:
//! verify (signature, every hash, compat, triple), unpack into staging, install with one
//! rename and write the lock; then the first `toolhost call` of its tool. Each step is a
//! whole `toolhost` process, as a user runs it.
//!
//! Run with `cargo bench -p toolhost-tests --bench package_add --profile dev`: the package is
//! the `echo` fixture as the profile builds it (the dev profile's library is about 3 MB and its
//! archive about 1 MB; the bench profile's LTO build takes twenty minutes on this machine and
//! its library is 1 MB). A plain bench binary: a round is three processes, so criterion's
//! sampling would add nothing but time.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Instant;

use toolhost_tests::{toolhost_bin, Fixture, TestRoot};

const ROUNDS: usize = 20;

/// The median and the 90th percentile of `values`.
fn quantiles(mut values: Vec<f64>) -> (f64, f64) {
    values.sort_by(f64::total_cmp);
    let p90 = (values.len() * 9).div_ceil(10).saturating_sub(1);
    (values[values.len() / 2], values[p90])
}

fn toolhost(root: &Path, args: &[&str]) -> Output {
    let out = Command::new(toolhost_bin())
        .arg("--root")
        .arg(root)
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("running toolhost");
    assert!(
        out.status.success(),
        "toolhost {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo test --benches` asks for a list of benchmarks; there are none to list.
    }
    let work = tempfile::tempdir().unwrap();
    let plugin = work.path().join("echo");
    std::fs::create_dir_all(plugin.join("tools")).unwrap();
    std::fs::create_dir_all(plugin.join("prompts")).unwrap();
    let library = plugin.join(format!("tools/echo.{}", toolhost::LIBRARY_EXTENSION));
    std::fs::copy(Fixture::Echo.path(), &library).unwrap();
    std::fs::write(
        plugin.join("prompts/agent.system.tool.echo.md"),
        "### echo\nechoes its arguments\n",
    )
    .unwrap();
    std::fs::write(
        plugin.join("toolhost-plugin.toml"),
        "name = \"echo\"\nversion = \"1.0.0\"\ndescription = \"Echoes.\"\n",
    )
    .unwrap();
    let (keys, dist) = (work.path().join("keys"), work.path().join("dist"));
    let none = TestRoot::new();
    let keys_dir = keys.to_str().unwrap();
    toolhost(
        none.path(),
        &["keygen", "--out", keys_dir, "--name", "k", "--no-password"],
    );
    let key = keys.join("k.key");
    toolhost(
        none.path(),
        &[
            "pack",
            plugin.to_str().unwrap(),
            "--out",
            dist.to_str().unwrap(),
            "--sign",
            key.to_str().unwrap(),
        ],
    );
    let archive = dist.join("echo-1.0.0.tar.gz");
    let archive_text = archive.to_str().unwrap();
    let public = keys.join("k.pub");

    let (mut add, mut call, mut both) = (Vec::new(), Vec::new(), Vec::new());
    let mut floor = Vec::new();
    for _ in 0..ROUNDS {
        let root = TestRoot::new();
        toolhost(root.path(), &["trust", "add", public.to_str().unwrap()]);
        // The floor of any command: a process that starts, reads the (empty) lock and ends.
        let started = Instant::now();
        toolhost(root.path(), &["installed"]);
        floor.push(started.elapsed().as_secs_f64() * 1e3);
        let started = Instant::now();
        toolhost(root.path(), &["add", archive_text, "--yes"]);
        let added = started.elapsed();
        let answer = toolhost(root.path(), &["call", "echo", "--args", r#"{"x":1}"#]);
        let total = started.elapsed();
        assert!(String::from_utf8_lossy(&answer.stdout).contains("\"x\""));
        add.push(added.as_secs_f64() * 1e3);
        call.push((total - added).as_secs_f64() * 1e3);
        both.push(total.as_secs_f64() * 1e3);
    }
    let size = |p: &Path| std::fs::metadata(p).unwrap().len();
    println!(
        "toolhost add of a signed package ({} byte library, {} byte archive), then the first call; {ROUNDS} rounds, each a fresh root:",
        size(&library),
        size(&archive)
    );
    for (what, values) in [
        ("add ARCHIVE --yes (verify + install)", add),
        ("first call of its tool", call),
        ("both", both),
        ("(floor: `toolhost installed`, empty)", floor),
    ] {
        let (median, p90) = quantiles(values);
        println!("  {what:38} median {median:7.1} ms   p90 {p90:7.1} ms");
    }
}
