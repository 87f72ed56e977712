//! Long tool answers: cut for the model and the history, whole (and masked) in the session.

use std::sync::Arc;

use serde_json::json;
use toolhost::output::Silent;
use toolhost::{Agent, Host, HostOptions, Role, Secrets};
use toolhost_tests::{block_on, Fixture, TestRoot};

fn agent_with_limit(root: &TestRoot, bytes: usize) -> Arc<Agent> {
    let options = HostOptions::default().with_max_output(bytes);
    let host = Arc::new(Host::with_options(root.path(), options).unwrap());
    Agent::with_output(host, "A0", "default", Arc::new(Silent)).unwrap()
}

#[test]
fn a_long_answer_is_cut_with_a_note_and_kept_whole_in_the_session() {
    let root = TestRoot::new();
    root.tool("usr", "echo", Fixture::Echo);
    let agent = agent_with_limit(&root, 100);
    agent.host().set_secrets(Secrets::from_pairs([(
        "HEX".to_owned(),
        "89abcdef0123".to_owned(),
    )]));
    let session = agent
        .record_session(&root.path().join("usr/sessions"))
        .unwrap();
    let r = block_on(agent.call_tool("echo:big", json!({"bytes": 1000}))).unwrap();

    assert!(r.message.starts_with(&"0123456789abcdef".repeat(6)[..96]));
    assert!(
        r.message.contains("900 more bytes cut (of 1000)") && r.message.contains("outputs/1.txt"),
        "{}",
        r.message
    );
    let history = agent.history().pop().unwrap();
    assert_eq!(history.role, Role::Tool);
    assert!(history.content.len() < 300, "{}", history.content);
    let whole = std::fs::read_to_string(session.join("outputs/1.txt")).unwrap();
    assert!(
        !whole.contains("89abcdef0123"),
        "the saved answer is masked"
    );
    let unmasked = whole.replace("§§secret(HEX)", "89abcdef0123");
    assert_eq!(unmasked, "0123456789abcdef".repeat(62) + "01234567");
}

#[test]
fn without_a_session_the_note_says_only_how_much_was_cut() {
    let root = TestRoot::new();
    root.tool("usr", "echo", Fixture::Echo);
    let agent = agent_with_limit(&root, 10);
    let r = block_on(agent.call_tool("echo:big", json!({"bytes": 64}))).unwrap();
    assert_eq!(r.message, "0123456789\n[... 54 more bytes cut (of 64)]");
    // An answer within the limit is left alone.
    let r = block_on(agent.call_tool("echo:big", json!({"bytes": 10}))).unwrap();
    assert_eq!(r.message, "0123456789");
}

#[test]
fn the_cli_takes_the_limit() {
    let root = TestRoot::new();
    root.tool("usr", "echo", Fixture::Echo);
    let out = root.run_cli(&[
        "--max-output",
        "4",
        "call",
        "echo:big",
        "--args",
        r#"{"bytes": 9}"#,
    ]);
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout.trim_end(), "0123\n[... 5 more bytes cut (of 9)]");
}

#[test]
fn the_config_sets_the_limit_per_profile_and_the_cli_wins_over_it() {
    let root = TestRoot::new();
    root.tool("usr", "echo", Fixture::Echo);
    root.write("usr/toolhost.toml", "[limits]\nmax_output = 6\n");
    root.write("usr/agents/dev/toolhost.toml", "[limits]\nmax_output = 3\n");
    let call = |global: &[&str], profile: &str| {
        let mut args = global.to_vec();
        args.extend(["call", "echo:big", "--profile", profile]);
        args.extend(["--args", r#"{"bytes": 9}"#]);
        let out = root.run_cli(&args);
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).trim_end().to_owned()
    };
    assert_eq!(
        call(&[], "default"),
        "012345\n[... 3 more bytes cut (of 9)]"
    );
    assert_eq!(call(&[], "dev"), "012\n[... 6 more bytes cut (of 9)]");
    assert_eq!(
        call(&["--max-output", "4"], "dev"),
        "0123\n[... 5 more bytes cut (of 9)]"
    );
}

#[test]
fn the_examples_truncation_is_the_example_profiles_and_max_output_is_the_limit_elsewhere() {
    // The example plugin where the repository puts it: its truncation extension (1,000
    // characters) belongs to its profile `example`, so every other profile answers up to
    // `--max-output` / `[limits] max_output`.
    let root = TestRoot::new();
    root.tool("usr", "echo", Fixture::Echo);
    root.extension(
        "plugins/example/agents/example",
        "tool_execute_after",
        "_50_truncate_output",
        Fixture::TruncateOutput,
    );
    let call = |extra: &[&str]| {
        let mut args = vec!["call", "echo:big", "--args", r#"{"bytes": 5000}"#];
        args.extend_from_slice(extra);
        let out = root.run_cli(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim_end().to_owned()
    };
    assert_eq!(call(&[]).len(), 5000, "a plain profile answers whole");
    let cut = call(&["--max-output", "2000"]);
    assert!(
        cut.ends_with("[... 3000 more bytes cut (of 5000)]"),
        "{cut}"
    );
    root.write("usr/toolhost.toml", "[limits]\nmax_output = 3000\n");
    let cut = call(&[]);
    assert!(
        cut.ends_with("[... 2000 more bytes cut (of 5000)]"),
        "{cut}"
    );
    let demo = call(&["--profile", "example", "--max-output", "200000"]);
    assert!(
        demo.ends_with("... (4000 more characters cut by _50_truncate_output)"),
        "{demo}"
    );
}
