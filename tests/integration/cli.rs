//! The `toolhost` command line, run as a user would.

use serde_json::Value;
use toolhost_tests::{Fixture, TestRoot};

fn demo_root() -> TestRoot {
    let root = TestRoot::new();
    root.tool("core", "response", Fixture::Response);
    root.tool(
        "plugins/example/agents/example",
        "response",
        Fixture::ProfileResponse,
    );
    root.tool("usr", "echo", Fixture::Echo);
    root.write("usr/tools/broken.so", b"");
    root.extension("core", "tool_execute_after", "_20_core", Fixture::NoopExt);
    root.extension("usr", "tool_execute_after", "_10_user", Fixture::NoopExt);
    root.extension(
        "usr",
        "tool_execute_after",
        "_30_old",
        Fixture::FutureVersion,
    );
    root
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn list_json_shows_layers_shadows_and_skipped_files() {
    let root = demo_root();
    let out = root.run_cli(&["list", "--profile", "example", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let tools = v["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 2);
    assert_eq!(tools[1]["name"], "response");
    assert_eq!(tools[1]["layer"], "profile");
    assert_eq!(
        tools[1]["file"],
        "plugins/example/agents/example/tools/response.so"
    );
    assert_eq!(
        tools[1]["shadows"],
        serde_json::json!(["core/tools/response.so"])
    );
    assert_eq!(tools[1]["risk_level"], "read");
    assert_eq!(v["skipped"][0]["file"], "usr/tools/broken.so");
    let after = &v["extensions"]["tool_execute_after"];
    assert_eq!(
        after[0]["file"],
        "usr/extensions/tool_execute_after/_10_user.so"
    );
    assert_eq!(after[1]["name"], "_20_core");
    assert_eq!(v["skipped"][0]["kind"], "empty");
    assert_eq!(
        v["skipped"][1]["file"],
        "usr/extensions/tool_execute_after/_30_old.so"
    );
    assert_eq!(v["skipped"][1]["kind"], "incompatible-version");
    assert_eq!(
        after.as_array().unwrap().len(),
        2,
        "the broken extension is not listed as running"
    );
}

#[test]
fn list_is_readable() {
    let out = demo_root().run_cli(&["list", "--profile", "example"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains(
            "response     read  [profile layer] plugins/example/agents/example/tools/response.so"
        ),
        "{text}"
    );
    assert!(text.contains("shadows core/tools/response.so"), "{text}");
    assert!(
        text.contains("  tool_execute_after:\n    _10_user "),
        "{text}"
    );
    assert!(
        text.contains("usr/tools/broken.so: the file is empty"),
        "{text}"
    );
}

#[test]
fn call_prints_the_response_and_the_override_shows() {
    let root = demo_root();
    let out = root.run_cli(&["call", "response", "--args", r#"{"text":"done"}"#]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "done\n");
    assert!(stderr(&out).contains("A0: Using tool 'response'"));

    let out = root.run_cli(&[
        "call",
        "response",
        "--profile",
        "example",
        "--args",
        r#"{"text":"done"}"#,
        "--json",
    ]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["message"], "done\n  -- A0 (profile 'example')");
    assert_eq!(v["break_loop"], true);
}

#[test]
fn errors_are_one_line_and_exit_non_zero() {
    let root = demo_root();
    for (args, says) in [
        (
            vec!["call", "response", "--args", "{}"],
            "error: tool 'response' failed (repairable error)",
        ),
        (
            vec!["call", "echo", "--args", "{not json"],
            "error: --args is not valid JSON",
        ),
        (
            vec!["call", "../etc/passwd"],
            "invalid tool name '../etc/passwd'",
        ),
        (
            vec!["call", "echo:fail", "--args", r#"{"kind":"timeout"}"#],
            "(timeout error): asked to fail",
        ),
        (
            vec!["list", "--profile", "../x"],
            "error: invalid profile name '../x'",
        ),
    ] {
        let out = root.run_cli(&args);
        assert!(!out.status.success(), "{args:?} should fail");
        let err = stderr(&out);
        let error_lines: Vec<_> = err.lines().filter(|l| l.starts_with("error")).collect();
        assert_eq!(error_lines.len(), 1, "{args:?}: {err}");
        assert!(error_lines[0].contains(says), "{args:?}: {err}");
        assert!(
            !err.contains("panicked") && !err.contains("backtrace"),
            "{err}"
        );
    }
    let out = std::process::Command::new(toolhost_tests::toolhost_bin())
        .args(["--root", "/nonexistent/root", "list"])
        .output()
        .unwrap();
    assert!(stderr(&out).starts_with("error: root folder /nonexistent/root does not exist"));
}

#[test]
fn a_panicking_tool_is_one_error_line() {
    let root = TestRoot::new();
    root.tool("usr", "panicky", Fixture::Panicky);
    let out = root.run_cli(&["call", "panicky:later"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("error: tool 'panicky:later' failed (internal error): panicked at"),
        "{err}"
    );
    assert!(!err.contains("backtrace"), "{err}");
}

#[test]
fn prompt_prints_the_tools_section() {
    let root = demo_root();
    root.write(
        "core/prompts/agent.system.tool.response.md",
        "### response\nFinal answer.",
    );
    let out = root.run_cli(&["prompt"]);
    assert_eq!(
        stdout(&out),
        "## Tools available:\n\n### echo\nTest fixture: echoes its arguments; methods sleep, progress, fail, context.\n\n### response\nFinal answer.\n"
    );
}

#[test]
fn call_masks_secrets_in_what_it_prints() {
    let root = TestRoot::new();
    root.tool("usr", "echo", Fixture::Echo);
    root.write("usr/secrets.env", "TOKEN=tok-12345678\n");
    let out = root.run_cli(&["call", "echo", "--args", r#"{"t": "tok-12345678"}"#]);
    let (stdout, stderr) = (stdout(&out), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stderr}");
    assert_eq!(stdout.trim(), r#"{"t":"§§secret(TOKEN)"}"#);
    assert!(!stderr.contains("tok-12345678"), "{stderr}");
    let out = root.run_cli(&[
        "call",
        "echo:fail",
        "--args",
        r#"{"message": "bad tok-12345678"}"#,
    ]);
    assert!(!String::from_utf8_lossy(&out.stderr).contains("tok-12345678"));
}

#[test]
fn completions_for_bash_are_a_valid_script_that_knows_every_command() {
    let out = TestRoot::new().run_cli(&["completions", "bash"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let script = stdout(&out);
    assert!(script.contains("complete -F _toolhost"), "{script}");
    for word in ["serve-mcp", "completions", "--max-iterations", "--secrets"] {
        assert!(script.contains(word), "no {word} in:\n{script}");
    }
    // bash itself parses it (`-n`: read, do not run).
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("toolhost.bash");
    std::fs::write(&file, &script).unwrap();
    let check = std::process::Command::new("bash")
        .arg("-n")
        .arg(&file)
        .output()
        .expect("bash");
    assert!(check.status.success(), "{}", stderr(&check));
}

#[test]
fn completions_for_an_unknown_shell_are_a_usage_error() {
    let out = TestRoot::new().run_cli(&["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("tcsh"), "{}", stderr(&out));
}

#[test]
fn the_man_page_is_roff_naming_every_command() {
    let out = TestRoot::new().run_cli(&["man"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let page = stdout(&out);
    assert!(page.contains(".TH toolhost 1"), "{page}");
    assert!(page.contains(".SH NAME"), "{page}");
    for command in [
        "list",
        "call",
        "run",
        "chat",
        "serve\\-mcp",
        "completions",
        "man",
    ] {
        assert!(page.contains(command), "no {command} in:\n{page}");
    }
}

#[test]
fn man_out_writes_a_page_per_command() {
    let dir = tempfile::tempdir().unwrap();
    let out = TestRoot::new().run_cli(&["man", "--out", dir.path().to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let run = std::fs::read_to_string(dir.path().join("toolhost-run.1")).unwrap();
    assert!(run.contains(".TH toolhost-run 1"), "{run}");
    assert!(run.contains("max\\-unusable"), "{run}");
    for page in ["toolhost.1", "toolhost-chat.1", "toolhost-audit-verify.1"] {
        assert!(dir.path().join(page).is_file(), "no {page}");
    }
}
