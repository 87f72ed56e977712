//! `toolhost run`: a scripted session through the real binary, with typed interjections,
//! Ctrl-C, and plain output when standard error is not a terminal.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::json;
use toolhost_tests::{toolhost_bin, Fixture, TestRoot};

fn root_with_script(replies: &[serde_json::Value]) -> (TestRoot, std::path::PathBuf) {
    let root = TestRoot::new();
    root.tool("core", "response", Fixture::Response);
    root.tool("usr", "echo", Fixture::Echo);
    let mut script = String::from("# test\n=== user\nWait, then answer.\n");
    for reply in replies {
        script += &format!("=== model\n{reply}\n");
    }
    let path = root.write("script.txt", script);
    (root, path)
}

fn wait_call() -> serde_json::Value {
    json!({"tool_name": "echo:wait", "tool_args": {"report": true}})
}

fn answer(text: &str) -> serde_json::Value {
    json!({"tool_name": "response", "tool_args": {"text": text}})
}

/// Starts `toolhost run`; returns the child and a channel of its standard error lines.
fn start(
    root: &TestRoot,
    script: &std::path::Path,
) -> (std::process::Child, mpsc::Receiver<String>) {
    let mut child = Command::new(toolhost_bin())
        .arg("--root")
        .arg(root.path())
        .arg("run")
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start toolhost run");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    (child, rx)
}

fn wait_line(
    lines: &mpsc::Receiver<String>,
    what: &str,
    pred: impl Fn(&str) -> bool,
) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut seen = Vec::new();
    loop {
        match lines.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(line) => {
                let hit = pred(&line);
                seen.push(line);
                if hit {
                    return seen;
                }
            }
            Err(_) => panic!("no line {what} within 10 s; saw {seen:?}"),
        }
    }
}

fn session_history(root: &TestRoot) -> String {
    let sessions = root.path().join("usr/sessions");
    let dir = std::fs::read_dir(&sessions)
        .expect("a sessions folder")
        .next()
        .expect("a session")
        .unwrap()
        .path();
    std::fs::read_to_string(dir.join("history.jsonl")).unwrap()
}

#[test]
fn a_typed_line_interjects_and_the_session_goes_on() {
    let (root, script) = root_with_script(&[wait_call(), answer("answered early")]);
    let (mut child, lines) = start(&root, &script);
    wait_line(&lines, "showing progress", |l| l.contains("... step"));
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "Stop waiting and answer now.").unwrap();
    stdin.flush().unwrap();
    let rest = wait_line(&lines, "naming the session", |l| {
        l.starts_with("session saved in")
    });
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{rest:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "answered early"
    );
    assert!(
        rest.iter()
            .any(|l| l == "User (interjected): Stop waiting and answer now."),
        "{rest:?}"
    );
    let history = session_history(&root);
    assert!(
        history.contains("(interrupted by the user) progress so far: step "),
        "{history}"
    );
    assert!(
        history.contains("Stop waiting and answer now."),
        "{history}"
    );
}

#[test]
fn ctrl_c_stops_cleanly_with_the_session_saved() {
    let (root, script) = root_with_script(&[wait_call(), answer("never")]);
    let (child, lines) = start(&root, &script);
    wait_line(&lines, "showing progress", |l| l.contains("... step"));
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let rest = wait_line(&lines, "naming the session", |l| {
        l.starts_with("session saved in")
    });
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{rest:?}");
    assert!(
        rest.iter().any(|l| l == "error: stopped by the user"),
        "{rest:?}"
    );
    assert!(String::from_utf8_lossy(&out.stdout).trim().is_empty());
    assert!(session_history(&root).contains("Wait, then answer."));
}

#[test]
fn output_that_is_not_a_terminal_has_no_control_codes() {
    let (root, script) = root_with_script(&[
        json!({"tool_name": "echo:progress", "tool_args": {"text": "working"}}),
        answer("plain"),
    ]);
    let out = root.run_cli(&["run", script.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("  ... working"), "{stderr}");
    assert!(!stderr.contains('\x1b'), "{stderr:?}");
    assert!(!stderr.contains('\r'), "{stderr:?}");
}

/// A full disk: `usr/sessions/` on a 256 KiB file system (a tmpfs, mounted as root), and a
/// session of 200 calls that needs more. The run stops with an error that says so and a
/// non-zero exit, and the record is whole up to there: every line of `history.jsonl` and
/// `log.jsonl` is a whole record.
#[test]
fn a_full_disk_stops_the_session_with_its_record_whole() {
    let text = "x".repeat(2000);
    let calls: Vec<serde_json::Value> = (0..200)
        .map(|i| json!({"tool_name": "echo", "tool_args": {"text": format!("{i} {text}")}}))
        .chain([answer("done")])
        .collect();
    let (root, script) = root_with_script(&calls);
    let sessions = root.path().join("usr/sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=256k", "tmpfs"])
        .arg(&sessions)
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        toolhost_tests::skip::skipped("cannot mount a small tmpfs (`mount -t tmpfs` needs root)");
        return;
    }
    struct Unmount(std::path::PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(sessions.clone());
    let out = Command::new(toolhost_bin())
        .arg("--root")
        .arg(root.path())
        .arg("run")
        .arg(&script)
        .arg("--max-iterations")
        .arg("300")
        .output()
        .expect("toolhost run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("No space left on device") && stderr.contains("stopping"),
        "{stderr}"
    );
    let session = std::fs::read_dir(&sessions)
        .unwrap()
        .next()
        .expect("a session folder")
        .unwrap()
        .path();
    for file in ["history.jsonl", "log.jsonl"] {
        let written = std::fs::read_to_string(session.join(file)).unwrap();
        assert!(
            written.is_empty() || written.ends_with('\n'),
            "{file} ends mid-record"
        );
        for line in written.lines() {
            assert!(
                serde_json::from_str::<serde_json::Value>(line).is_ok(),
                "{file}: a torn record: {line:.80}"
            );
        }
    }
}
