//! Crashes through the `toolhost` binary: `call`, `run` and `watch` with isolated tools; and
//! the worker of a host that was killed exits.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::json;
use toolhost_tests::{toolhost_bin, Fixture, TestRoot};

use super::crashes::CRASHES;
use super::{root_with_crashy, wait_gone};

/// A running `toolhost --isolate watch`, its standard input and its output lines.
pub(super) struct Watch {
    pub(super) child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
}

impl Watch {
    pub(super) fn start(root: &TestRoot) -> Self {
        let mut child = Command::new(toolhost_bin())
            .arg("--root")
            .arg(root.path())
            .args(["--isolate", "watch"])
            .env("NO_COLOR", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start toolhost watch");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self {
            child,
            stdin,
            lines,
        }
    }

    pub(super) fn send(&mut self, line: &str) {
        writeln!(self.stdin, "{line}").expect("write to watch");
        self.stdin.flush().expect("flush");
    }

    /// Reads lines until one satisfies `pred` (20 s at most); returns it.
    pub(super) fn expect_line(&self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if pred(&line) => return line,
                Ok(line) => seen.push(line),
                Err(_) => panic!("no line {what} within 20 s; saw {seen:?}"),
            }
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn call_reports_each_crash_as_its_error() {
    let root = root_with_crashy("");
    for (method, expected) in CRASHES {
        let out = root.run_cli(&["call", &format!("crashy:{method}")]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{method}: {stderr}");
        assert!(stderr.contains("(internal error)"), "{method}: {stderr}");
        assert!(stderr.contains(expected), "{method}: {stderr}");
    }
    // --isolate isolates a tool the config does not name.
    let out = root.run_cli(&["--isolate", "list"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("usr/tools/echo.so (isolated: runs in a worker process)"),
        "{stdout}"
    );
    let out = root.run_cli(&["list"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("usr/tools/crashy.so (isolated"), "{stdout}");
    assert!(!stdout.contains("usr/tools/echo.so (isolated"), "{stdout}");
}

#[test]
fn run_goes_on_after_each_crash() {
    let root = root_with_crashy("");
    // A crash is an internal error: as any internal error, it ends the loop that called the
    // tool directly; inside `parallel`, the calls after it go on in the same process.
    let mut replies = Vec::new();
    for (method, _) in CRASHES {
        let calls = json!([
            {"tool_name": format!("crashy:{method}"), "tool_args": {}},
            {"tool_name": "echo", "tool_args": {"after": method}},
        ]);
        replies.push(
            json!({"tool_name": "parallel", "tool_args": {"calls": calls, "max_concurrent": 1}})
                .to_string(),
        );
        replies.push(json!({"tool_name": "crashy", "tool_args": {}}).to_string());
    }
    replies.push(json!({"tool_name": "crashy:segv", "tool_args": {}}).to_string());
    let out = root.run_script("Crash, then go on.", &replies);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("error: tool 'crashy:segv' failed (internal error): the plugin process died: SIGSEGV (segmentation fault)"),
        "{stderr}"
    );
    let session = session_text(&root);
    for (method, expected) in CRASHES {
        assert!(
            session.contains(expected),
            "{method} missing from the session"
        );
        assert!(
            session.contains(&format!("after\\\":\\\"{method}")),
            "echo after {method}: {session}"
        );
    }
    let again = r#"{"role":"tool","content":"ok","tool_name":"crashy""#;
    assert!(session.matches(again).count() >= CRASHES.len(), "{session}");
}

/// Every file of the saved session, as one text.
fn session_text(root: &TestRoot) -> String {
    let mut text = String::new();
    let mut dirs = vec![root.path().join("usr/sessions")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            match path.is_dir() {
                true => dirs.push(path),
                false => text += &std::fs::read_to_string(&path).unwrap_or_default(),
            }
        }
    }
    text
}

#[test]
fn watch_goes_on_after_each_crash() {
    let root = root_with_crashy("");
    let mut watch = Watch::start(&root);
    watch.expect_line("announcing the tools", |l| l.starts_with("watching "));
    for (method, expected) in CRASHES {
        watch.send(&format!("crashy:{method}"));
        let line = watch.expect_line("the crash", |l| l.starts_with("error: "));
        assert!(
            line.contains(expected) && line.ends_with("(internal error)"),
            "{line}"
        );
        watch.send("echo {\"after\": 1}");
        watch.expect_line("echo", |l| l == r#"{"after":1}"#);
        watch.send("crashy");
        watch.expect_line("crashy again", |l| l == "ok");
    }
    watch.send("/quit");
    assert!(watch.child.wait().expect("wait").success());
}

#[test]
fn the_worker_of_a_killed_host_exits() {
    let root = TestRoot::new();
    root.tool("usr", "crashy", Fixture::Crashy);
    let mut watch = Watch::start(&root);
    watch.expect_line("announcing the tools", |l| l.starts_with("watching "));
    watch.send("crashy:pid");
    let pid: u32 = watch
        .expect_line("the worker's pid", |l| l.parse::<u32>().is_ok())
        .parse()
        .unwrap();
    assert_ne!(pid, watch.child.id());
    assert!(super::alive(pid));
    watch.child.kill().expect("kill the host");
    watch.child.wait().expect("reap the host");
    wait_gone(pid);
}
