//! The author loop of `toolhost dev`: from saving a source file of a small plugin (the crate
//! `toolhost new` makes) to its new answer, and how it splits into cargo's incremental build
//! and the load after it.
//!
//! Run with `cargo bench -p toolhost-tests --bench dev_loop`. A plain bench binary: each round
//! is a real `cargo build` (debug profile, as `toolhost new` links it), so rounds take about a
//! second and criterion's sampling would take minutes. The crate's dependencies are compiled
//! once, in the workspace's target folder (`build.build-dir`), before the first round.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use toolhost_tests::{build_dir, toolhost_bin, TestRoot};

const ROUNDS: usize = 15;

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// The next line of `lines` that satisfies `pred`.
fn line_where(lines: &mpsc::Receiver<String>, what: &str, pred: impl Fn(&str) -> bool) -> String {
    loop {
        match lines.recv_timeout(Duration::from_secs(600)) {
            Ok(line) if pred(&line) => return line,
            Ok(_) => {}
            Err(_) => panic!("toolhost dev printed no line {what}"),
        }
    }
}

/// `built usr/tools/NAME in 0.84 s, live 3.1 ms later` -> (0.84 s, 3.1 ms), in milliseconds.
fn build_and_load(line: &str) -> (f64, f64) {
    let numbers: Vec<f64> = line
        .split([' ', ','])
        .filter_map(|w| w.parse().ok())
        .collect();
    (numbers[0] * 1e3, numbers[1])
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo test --benches` asks for a list of benchmarks; there are none to list.
    }
    let root = TestRoot::new();
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(workspace.join("plugin-api"), root.path().join("plugin-api"))
        .unwrap();
    let new = Command::new(toolhost_bin())
        .arg("--root")
        .arg(root.path())
        .args(["new", "quill"])
        .env_remove("CARGO_TARGET_DIR")
        .output()
        .expect("toolhost new");
    assert!(new.status.success(), "{new:?}");
    let source = root.path().join("usr/tools/quill/src/lib.rs");
    let original = std::fs::read_to_string(&source).unwrap();

    let shared = build_dir().parent().unwrap().join("debug");
    let mut dev = Command::new(toolhost_bin())
        .arg("--root")
        .arg(root.path())
        .arg("dev")
        .env_remove("CARGO_TARGET_DIR")
        .env("CARGO_BUILD_BUILD_DIR", shared.parent().unwrap())
        .env("NO_COLOR", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("toolhost dev");
    let mut stdin = dev.stdin.take().unwrap();
    let stdout = dev.stdout.take().unwrap();
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    line_where(&lines, "for the first build", |l| {
        l.starts_with("built usr/tools/quill")
    });

    let (mut answers, mut cargo, mut load) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        let text = original.replace("\"Hello, {}!\"", &format!("\"Hello v{round}, {{}}!\""));
        let saved = Instant::now();
        std::fs::write(&source, text).unwrap();
        let built = line_where(&lines, "for the build", |l| {
            l.starts_with("built usr/tools/quill")
        });
        writeln!(stdin, r#"quill {{"name": "Ada"}}"#).unwrap();
        let answer_line = line_where(&lines, "with an answer", |l| l.starts_with("Hello"));
        assert_eq!(
            answer_line,
            format!("Hello v{round}, Ada!"),
            "after {built}"
        );
        answers.push(saved.elapsed().as_secs_f64() * 1e3);
        let (build_ms, load_ms) = build_and_load(&built);
        cargo.push(build_ms);
        load.push(load_ms);
    }
    writeln!(stdin, "/quit").unwrap();
    let _ = dev.wait();
    println!("toolhost dev, {ROUNDS} saves of a `toolhost new` crate (medians):");
    println!("  save -> new answer      {:8.0} ms", median(answers));
    println!("  cargo build             {:8.0} ms", median(cargo));
    println!("  load after the build    {:8.1} ms", median(load));
}
