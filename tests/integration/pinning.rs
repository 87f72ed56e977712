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

/// `toolhost list`'s standard output and error.
fn list(root: &TestRoot) -> (String, String) {
    let out = root.run_cli(&["list"]);
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (text(&out.stdout), text(&out.stderr))
}

#[test]
fn a_mistake_elsewhere_in_the_config_keeps_pinning_on() {
    let root = pinned_root();
    root.tool("usr", "stranger", Fixture::Echo);
    // A typo in a table, then a TOML syntax error below `pinning = true`: pinning stays on.
    for text in [
        "pinning = true\n[calls]\ntimout = 3\n",
        "pinning = true\n[calls\n",
    ] {
        root.write("usr/toolhost.toml", text);
        let (stdout, stderr) = list(&root);
        assert!(
            stdout.contains("stranger") && stdout.contains("not pinned in usr/plugins.lock"),
            "{text}: {stdout}"
        );
        assert!(!stderr.contains("pinning is off"), "{stderr}");
        let echo = stdout
            .lines()
            .find(|l| l.contains("echo"))
            .unwrap_or_default();
        assert!(!echo.contains("not pinned"), "{stdout}");
        // A call says the same, and the config's own mistake, on one line each.
        let out = root.run_cli(&["call", "stranger"]);
        assert!(!out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("pinning stays on"), "{stderr}");
        assert!(names_a_line_of_the_config(&stderr), "{stderr}");
    }
}

#[test]
fn a_config_that_hides_whether_pinning_is_on_refuses_every_library() {
    let root = pinned_root();
    for text in [
        "pinning = tru\n",
        "pinning = \"yes\"\n",
        "[calls\npinning = true\n",
    ] {
        root.write("usr/toolhost.toml", text);
        let (stdout, stderr) = list(&root);
        // Every library, pinned or not, is refused with the reason and what to do.
        for tool in ["echo", "response"] {
            let line = stdout
                .lines()
                .find(|l| l.contains(tool))
                .unwrap_or_default();
            assert!(
                line.contains("pinning cannot be read from it"),
                "{text}: {tool}: {stdout}"
            );
        }
        assert!(
            names_a_line_of_the_config(&stderr)
                && stderr.contains("no library is loaded until the file is fixed"),
            "{text}: {stderr}"
        );
        assert_eq!(
            stderr.matches("pinning cannot be read").count(),
            1,
            "{stderr}"
        );
        // Through the host: nothing loaded, nothing constructed.
        let host = root.host();
        let listing = host.list("default");
        assert!(
            listing.tools.is_empty(),
            "{} tools listed",
            listing.tools.len()
        );
        assert_eq!(host.generations().loaded, 0);
    }
    // --allow-unpinned loads them while developing, with a warning.
    let out = root.run_cli(&["--allow-unpinned", "list"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains("pinning cannot be read"), "{stdout}");
}

#[test]
fn a_mistake_in_a_config_without_pinning_says_nothing_about_pinning() {
    let root = TestRoot::new();
    root.tool("usr", "echo", Fixture::Echo);
    root.tool("core", "response", Fixture::Response);
    for text in [
        "[calls]\ntimout = 3\n",
        "[calls\n",
        "pinning = false\n[calls\n",
    ] {
        root.write("usr/toolhost.toml", text);
        let out = root.run_cli(&["call", "echo"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(names_a_line_of_the_config(&stderr), "{text}: {stderr}");
        assert!(!stderr.contains("pinning"), "{text}: {stderr}");
        let (stdout, stderr) = list(&root);
        assert!(!stderr.contains("pinning"), "{text}: {stderr}");
        assert!(!stdout.contains("pinning"), "{text}: {stdout}");
    }
}

/// Whether `text` names a line of usr/toolhost.toml (`usr/toolhost.toml:3`).
fn names_a_line_of_the_config(text: &str) -> bool {
    let file = "usr/toolhost.toml:";
    text.match_indices(file)
        .any(|(at, _)| text[at + file.len()..].starts_with(|c: char| c.is_ascii_digit()))
}
