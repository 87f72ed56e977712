//! Pinned libraries: `toolhost pin` writes usr/plugins.lock; with `pinning = true` a library
//! that is not pinned, or whose bytes changed, is refused with one line, and `watch` says so.

use serde_json::json;
use toolhost::{LoadErrorKind, LIBRARY_EXTENSION};
use toolhost_tests::{block_on, Fixture, TestRoot};

use super::watch_mode::WatchProcess;

fn pinned_root() -> TestRoot {
    let root = TestRoot::new();
    root.tool("usr", "echo", Fixture::Echo);
    root.tool("core", "response", Fixture::Response);
    root.extension("core", "tool_execute_before", "_10_noop", Fixture::NoopExt);
    root.write("usr/toolhost.toml", "pinning = true\n");
    let out = root.run_cli(&["pin"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("pinned 3 libraries in"), "{stdout}");
    root
}

#[test]
fn pin_writes_every_library_of_the_layers_and_check_compares() {
    let root = pinned_root();
    let lock = std::fs::read_to_string(root.path().join("usr/plugins.lock")).unwrap();
    for file in [
        "usr/tools/echo",
        "core/tools/response",
        "core/extensions/tool_execute_before/_10_noop",
    ] {
        assert!(
            lock.contains(&format!("\"{file}.{LIBRARY_EXTENSION}\" = \"sha256:")),
            "{lock}"
        );
    }
    let out = root.run_cli(&["pin", "--check"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    root.tool("usr", "new", Fixture::Echo);
    root.replace(
        &format!("usr/tools/echo.{LIBRARY_EXTENSION}"),
        Fixture::Response,
    );
    let out = root.run_cli(&["pin", "--check"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("not pinned   usr/tools/new."), "{stdout}");
    assert!(stdout.contains("changed      usr/tools/echo."), "{stdout}");
}

#[test]
fn an_unpinned_or_changed_library_is_refused_with_one_line() {
    let root = pinned_root();
    let unpinned = root.tool("usr", "stranger", Fixture::Echo);
    let changed = root.replace(
        &format!("usr/tools/echo.{LIBRARY_EXTENSION}"),
        Fixture::Response,
    );
    let (agent, _) = root.agent("default");

    let listing = agent.host().list("default");
    let mut refused: Vec<_> = listing.skipped.iter().collect();
    refused.sort_by(|a, b| a.path.cmp(&b.path));
    assert_eq!(refused.len(), 2, "{refused:?}");
    assert_eq!(
        (&refused[0].path, refused[0].kind),
        (&changed, LoadErrorKind::Unpinned)
    );
    assert!(
        refused[0]
            .reason
            .contains("its bytes changed since it was pinned"),
        "{}",
        refused[0]
    );
    assert_eq!(
        (&refused[1].path, refused[1].kind),
        (&unpinned, LoadErrorKind::Unpinned)
    );
    assert!(
        refused[1].reason.contains("not pinned in usr/plugins.lock"),
        "{}",
        refused[1]
    );
    assert!(!refused[1].to_string().contains('\n'));

    // The pinned tool still answers; a call of the refused one fails with the reason.
    let r = block_on(agent.call_tool("response", json!({"text": "pinned"}))).unwrap();
    assert_eq!(r.message, "pinned");
    let e = block_on(agent.call_tool("stranger", json!({}))).unwrap_err();
    assert_eq!(e.kind(), toolhost::ErrorKind::Dependency);
    assert!(
        e.message().contains("not pinned in usr/plugins.lock"),
        "{e:?}"
    );

    // `list` on the command line shows the refusal.
    let out = root.run_cli(&["list"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("not pinned in usr/plugins.lock"),
        "{stdout}"
    );

    // --allow-unpinned lets development go on, with a warning.
    let out = root.run_cli(&[
        "--allow-unpinned",
        "call",
        "stranger",
        "--args",
        r#"{"a":1}"#,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), r#"{"a":1}"#);
    assert!(String::from_utf8_lossy(&out.stderr).contains("loaded although"));
}

#[test]
fn without_pinning_the_lock_is_not_enforced() {
    let root = pinned_root();
    root.write("usr/toolhost.toml", "pinning = false\n");
    root.tool("usr", "stranger", Fixture::Echo);
    let (agent, _) = root.agent("default");
    let r = block_on(agent.call_tool("stranger", json!({"b": 2}))).unwrap();
    assert_eq!(r.message, r#"{"b":2}"#);
}

#[test]
fn watch_reports_a_pin_violation_and_loads_the_build_once_pinned() {
    let root = pinned_root();
    let mut watch = WatchProcess::start(&root);
    watch.expect_line("the start", |l| l.contains("2 tools (echo, response)"));
    // Answered once the watcher runs (it starts after the first lines).
    watch.send(r#"echo {"first": 1}"#);
    watch.expect_line("the first answer", |l| l.contains(r#"{"first":1}"#));
    root.replace_like_cargo(
        &format!("usr/tools/echo.{LIBRARY_EXTENSION}"),
        Fixture::Response,
    );
    watch.expect_line("the pin violation", |l| {
        l.contains("echo") && l.contains("bytes changed since it was pinned")
    });
    // The pinned build keeps serving.
    watch.send(r#"echo {"still": "echo"}"#);
    watch.expect_line("the old build's answer", |l| {
        l.contains(r#"{"still":"echo"}"#)
    });
    // Pinning the new build lets it load, without another rebuild.
    let out = root.run_cli(&["pin"]);
    assert!(out.status.success());
    watch.expect_line("the reload", |l| {
        l.contains("reloaded") && l.contains("echo")
    });
    watch.send(r#"echo {"text": "now response"}"#);
    watch.expect_line("the new build's answer", |l| l.contains("now response"));
}
