//! Crashes through the `toolhost` binary: `call`, `run` and `watch` with isolated tools; and
//! the worker of a host that was killed exits.

use serde_json::json;
use toolhost_tests::{Fixture, TestRoot};

use super::super::watch_mode::WatchProcess;
use super::crashes::CRASHES;
use super::{root_with_crashy, wait_gone};

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
        stdout.contains("usr/tools/echo.so (isolated, sandboxed; granted: nothing)"),
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
    // A crash is an internal error: as any failure, it goes back to the model when the loop
    // called the tool directly; inside `parallel`, the calls after it go on in the same process.
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
        stderr.contains("Warning: Tool 'crashy:segv' failed (internal error): the plugin process died: SIGSEGV (segmentation fault)"),
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
    let mut watch = WatchProcess::isolated(&root);
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
    let mut watch = WatchProcess::isolated(&root);
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
