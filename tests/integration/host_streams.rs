//! The host's streams belong to the host: an in-process tool that closes fd 1 neither loses
//! the host's answer nor gets it written into the audit log or a session file (the host
//! prints through a private descriptor, and keeps its files above the low ones), and a tool
//! that calls `exit(0)` during `toolhost call` is reported as the call's fatal error.

use std::process::Output;

use toolhost_tests::{Fixture, TestRoot};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn root() -> TestRoot {
    let root = TestRoot::new();
    root.tool("core", "response", Fixture::Response);
    root.tool("usr", "crashy", Fixture::Crashy);
    root
}

/// Every file under `usr/` (the libraries, the audit log, the sessions), as text.
fn files_under_usr(root: &TestRoot) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut dirs = vec![root.path().join("usr")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if let Ok(bytes) = std::fs::read(&path) {
                found.push((path.display().to_string(), text(&bytes)));
            }
        }
    }
    found
}

fn verified(root: &TestRoot) -> Output {
    let out = root.run_cli(&["audit", "verify"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    out
}

#[test]
fn a_tool_that_closes_fd_1_leaves_the_answer_on_standard_output_and_out_of_the_audit() {
    let root = root();
    let out = root.run_cli(&["call", "crashy:close_stdout"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "closed\n");
    // A session of two calls: the second's answer and the final one still reach standard
    // output, and no file of the host got them.
    let script = root.write(
        "script.txt",
        "=== user\nGo.\n=== model\n{\"tool_name\": \"crashy:close_stdout\", \"tool_args\": {}}\n\
         === model\n{\"tool_name\": \"crashy\", \"tool_args\": {}}\n\
         === model\n{\"tool_name\": \"response\", \"tool_args\": {\"text\": \"final-answer-7\"}}\n",
    );
    let out = root.run_cli(&["run", &script.to_string_lossy()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "final-answer-7\n");
    let logs: Vec<_> = files_under_usr(&root)
        .into_iter()
        .filter(|(path, _)| path.ends_with(".jsonl"))
        .collect();
    assert!(logs.len() >= 3, "the audit log and a session's two files");
    for (path, content) in logs {
        for line in content.lines() {
            assert!(
                serde_json::from_str::<serde_json::Value>(line).is_ok(),
                "{path} holds a line that is not the host's own: {line}"
            );
        }
    }
    verified(&root);
}

#[test]
fn a_tool_that_calls_exit_fails_the_call_with_a_line_that_says_so() {
    let root = root();
    let out = root.run_cli(&["call", "crashy:exit"]);
    assert_eq!(out.status.code(), Some(5), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("error: tool 'crashy:exit' ended the process (it called exit)"),
        "{stderr}"
    );
    assert_eq!(text(&out.stdout), "");
    let stdout = text(&verified(&root).stdout);
    assert!(stdout.contains("started, never finished"), "{stdout}");
}
