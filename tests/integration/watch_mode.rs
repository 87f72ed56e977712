//! `toolhost watch`: the development loop, driven through the real binary's stdin and stdout.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use toolhost_tests::{toolhost_bin, Fixture, TestRoot};

const TOOL: &str = "usr/tools/ver.so";

/// A running `toolhost watch` with its standard input and output lines.
pub(super) struct WatchProcess {
    pub(super) child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
    /// How long [`expect_line`](Self::expect_line) waits.
    patience: Duration,
    /// Its standard error so far (the log), line by line.
    logged: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    /// Its standard output so far, line by line (read or not by `expect_line`).
    printed: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl WatchProcess {
    pub(super) fn start(root: &TestRoot) -> Self {
        Self::start_with(root, &[], Duration::from_secs(10))
    }

    /// `toolhost --isolate watch`: every tool in a worker (which takes longer to start).
    pub(super) fn isolated(root: &TestRoot) -> Self {
        Self::start_with(root, &["--isolate"], Duration::from_secs(20))
    }

    /// `toolhost [OPTIONS] watch`, each expected line waited for `patience` at most.
    pub(super) fn start_with(root: &TestRoot, options: &[&str], patience: Duration) -> Self {
        let mut command = Command::new(toolhost_bin());
        command.args(options).arg("watch");
        Self::spawn(root, command, patience)
    }

    /// `command` (a `toolhost` subcommand that reads calls from standard input, as `watch`
    /// and `dev` do) run in `root`; [`expect_line`](Self::expect_line) waits `patience`.
    pub(super) fn spawn(root: &TestRoot, mut command: Command, patience: Duration) -> Self {
        let mut child = command
            .env("TOOLHOST_ROOT", root.path())
            .env("NO_COLOR", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start toolhost");
        let stderr = BufReader::new(child.stderr.take().expect("stderr"));
        let logged = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = logged.clone();
        std::thread::spawn(move || {
            for line in stderr.lines().map_while(Result::ok) {
                log.lock().unwrap().push(line);
            }
        });
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        let printed = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let out = printed.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                out.lock().unwrap().push(line.clone());
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self {
            child,
            stdin,
            lines,
            patience,
            logged,
            printed,
        }
    }

    /// What it logged on standard error so far.
    pub(super) fn logged(&self) -> Vec<String> {
        self.logged.lock().unwrap().clone()
    }

    /// What it printed on standard output so far.
    pub(super) fn printed(&self) -> Vec<String> {
        self.printed.lock().unwrap().clone()
    }

    pub(super) fn send(&mut self, line: &str) {
        writeln!(self.stdin, "{line}").expect("write to watch");
        self.stdin.flush().expect("flush");
    }

    /// Reads lines until one satisfies `pred` (10 s at most, 20 s isolated, or the patience it
    /// was spawned with); returns it.
    pub(super) fn expect_line(&self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + self.patience;
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if pred(&line) => return line,
                Ok(line) => seen.push(line),
                Err(_) => panic!("no line {what} within {:?}; saw {seen:?}", self.patience),
            }
        }
    }
}

impl Drop for WatchProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn watch_reports_a_rebuild_and_the_next_call_runs_the_new_code() {
    let root = TestRoot::new();
    root.copy(Fixture::Versioned, TOOL);
    let mut watch = WatchProcess::start(&root);
    watch.expect_line("announcing the tools", |l| {
        l.starts_with("watching ") && l.contains("1 tool (ver)")
    });
    watch.send("ver");
    watch.expect_line("answering v1", |l| l == "v1");

    root.replace_like_cargo(TOOL, Fixture::VersionedV2);
    let report = watch.expect_line("reporting the reload", |l| l.starts_with("reloaded "));
    assert!(
        report.starts_with(
            "reloaded usr/tools/ver.so [layer usr]: 0.1.0 (generation 1) -> 0.2.0 (generation 2) in "
        ),
        "{report}"
    );
    watch.send("ver");
    watch.expect_line("answering v2", |l| l == "v2");

    watch.send("ver:sleep {\"ms\": 1}");
    watch.expect_line("answering a method call with arguments", |l| l == "v2");
    watch.send("ver {not json");
    watch.expect_line("refusing bad JSON", |l| {
        l.starts_with("error: the arguments are not valid JSON")
    });

    root.replace_bytes(TOOL, b"not a library");
    let report = watch.expect_line("reporting the failed reload", |l| {
        l.starts_with("reload of")
    });
    assert!(
        report.contains("failed, still serving 0.2.0 (generation 2)"),
        "{report}"
    );
    watch.send("ver");
    watch.expect_line("still answering v2", |l| l == "v2");
    // Reported once: on standard output, not again as a warning in the log.
    let logged = watch.logged();
    assert!(logged.iter().all(|l| !l.contains("ver.so")), "{logged:?}");

    watch.send("/quit");
    let status = watch.child.wait().expect("wait");
    assert!(status.success());
}

/// The pids of `parent`'s child processes that are isolated tools' workers.
fn workers_of(parent: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        // `pid (comm) state ppid ...`: after the last `)`.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let worker =
            String::from_utf8_lossy(&cmdline).contains(toolhost::isolation::WORKER_COMMAND);
        if ppid == Some(parent) && worker {
            found.push(pid);
        }
    }
    found
}

/// SIGTERM while a call runs: no new line is read, the call's answer is printed, the workers
/// are stopped and `watch` exits 0.
#[test]
fn sigterm_lets_the_call_running_finish_then_stops_the_workers() {
    let root = TestRoot::new();
    root.copy(Fixture::Versioned, TOOL);
    let mut watch = WatchProcess::isolated(&root);
    watch.expect_line("announcing the tools", |l| l.starts_with("watching "));
    watch.send("ver");
    watch.expect_line("answering v1", |l| l == "v1");
    let workers = workers_of(watch.child.id());
    assert!(!workers.is_empty(), "no worker process");
    watch.send("ver:sleep {\"ms\": 1500}");
    std::thread::sleep(Duration::from_millis(300));
    let pid = i32::try_from(watch.child.id()).expect("a pid");
    // SAFETY: kill(2) with the pid of our own child, not reaped yet.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    watch.expect_line("the call's answer", |l| l == "v1");
    let status = watch.child.wait().expect("wait");
    assert!(status.success(), "{status}: {:?}", watch.logged());
    let deadline = Instant::now() + Duration::from_secs(10);
    while workers
        .iter()
        .any(|w| std::path::Path::new(&format!("/proc/{w}")).exists())
    {
        assert!(
            Instant::now() < deadline,
            "workers {workers:?} still running"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let logged = watch.logged();
    assert!(
        logged.iter().any(|l| l.contains("SIGTERM: stopping")),
        "{logged:?}"
    );
}
