//! Governance of every call: schema validation with defaults, deadlines that hold for tools
//! that never await, cancellation seen by cooperative tools, retries with backoff, the circuit
//! breaker, readiness and result metadata. Real plugins (`fx-governed`), real loader.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;
use toolhost::{ErrorKind, RiskLevel};
use toolhost_tests::{block_on, toolhost_bin, Fixture, TestRoot};

/// A root with `response` and the governed test tool (1 s deadline).
pub(super) fn root() -> TestRoot {
    let root = TestRoot::new();
    root.tool("core", "response", Fixture::Response);
    root.tool("usr", "governed", Fixture::Governed);
    root
}

#[test]
fn arguments_are_validated_with_every_failing_path_and_defaults_filled_in() {
    let root = root();
    let (agent, _) = root.agent("default");
    let e =
        block_on(agent.call_tool("governed", json!({"top": "2", "units": "kelvin"}))).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Validation);
    for part in [
        "/: missing required property \"city\"",
        "/top: must be of type null or integer, got \"2\"",
        "/units: must be one of \"metric\", \"imperial\", got \"kelvin\"",
    ] {
        assert!(e.message().contains(part), "{part} in {}", e.message());
    }
    let r = block_on(agent.call_tool("governed", json!({"city": "Oslo"}))).unwrap();
    let echoed: serde_json::Value = serde_json::from_str(&r.message).unwrap();
    assert_eq!(echoed, json!({"city": "Oslo", "units": "metric"}));
}

#[test]
fn a_tool_declares_its_schema_from_a_typed_struct_and_no_risk_means_write() {
    let root = root();
    root.tool("usr", "echo", Fixture::Echo);
    let host = root.host();
    let governed = host.resolve("default", "governed").found.clone().unwrap();
    let info = governed.handle.info();
    assert_eq!(info.parameters["required"], json!(["city"]));
    assert_eq!(info.risk_level, RiskLevel::Read);
    let echo = host.resolve("default", "echo").found.clone().unwrap();
    assert_eq!(echo.handle.info().risk_level, RiskLevel::Write);
}

#[test]
fn a_spinning_tool_times_out_at_its_deadline_and_is_counted_until_it_returns() {
    let root = root();
    let (agent, _) = root.agent("default");
    // Loaded first, so the time measured is the call's alone (not the load's, slow on a busy
    // machine).
    block_on(agent.call_tool("governed", json!({"city": "warm"}))).unwrap();
    let started = Instant::now();
    let e =
        block_on(agent.call_tool("governed:spin", json!({"city": "x", "ms": 2500}))).unwrap_err();
    let took = started.elapsed();
    assert_eq!(e.kind(), ErrorKind::Timeout, "{e}");
    assert!(e.message().contains("did not answer within 1 s"), "{e}");
    assert!(
        took < Duration::from_millis(1500),
        "control came back after {took:?}"
    );
    assert!(toolhost::governance::overdue() >= 1);
    // The abandoned call's thread returns when the plugin does; the host keeps serving.
    let r = block_on(agent.call_tool("governed", json!({"city": "y"}))).unwrap();
    assert!(r.message.contains("\"y\""));
}

#[test]
fn a_tool_awaiting_forever_times_out_and_a_cooperative_one_sees_the_cancellation() {
    let root = root();
    let (agent, _) = root.agent("default");
    let e = block_on(agent.call_tool("governed:forever", json!({"city": "x"}))).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Timeout);
    let note = root.path().join("note.txt");
    let args = json!({"city": "x", "note": note.to_str().unwrap()});
    let e = block_on(agent.call_tool("governed:cooperative", args)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Timeout);
    let seen = toolhost_tests::wait_for_text("the tool to see its cancellation", &note);
    assert_eq!(seen, "cancelled true");
}

#[test]
fn call_returns_at_the_deadline_with_a_timeout_error() {
    let root = root();
    let started = Instant::now();
    let out = root.run_cli(&[
        "call",
        "governed:spin",
        "--args",
        r#"{"city": "x", "ms": 20000}"#,
    ]);
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("(timeout error)"), "{stderr}");
    // A 20 s call cut at its 1 s deadline: a wide margin for a loaded machine's process start.
    assert!(took < Duration::from_secs(10), "call took {took:?}");
}

#[test]
fn ctrl_c_in_run_ends_a_spinning_call_at_once_and_saves_the_session() {
    let root = root();
    let script = root.write(
        "script.txt",
        format!(
            "=== user\nSpin.\n=== model\n{}\n",
            json!({"tool_name": "governed:spin", "tool_args": {"city": "x", "ms": 20000}})
        ),
    );
    let mut child = Command::new(toolhost_bin())
        .arg("--root")
        .arg(root.path())
        .args(["run", script.to_str().unwrap()])
        .env("TOOLHOST_FX_TIMEOUT", "60")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(800));
    let signalled = Instant::now();
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let _stdin = child.stdin.take();
    let out = child.wait_with_output().unwrap();
    let took = signalled.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        took < Duration::from_secs(3),
        "stopping took {took:?}: {stderr}"
    );
    assert!(stderr.contains("session saved in"), "{stderr}");
}

#[test]
fn infrastructure_failures_are_retried_with_backoff_and_others_are_not() {
    let root = root();
    root.write("usr/toolhost.toml", "[tools.governed]\nmax_retries = 2\n");
    let (agent, _) = root.agent("default");
    let started = Instant::now();
    let args = json!({"city": "x", "key": "a", "fail_times": 2, "kind": "dependency"});
    let r = block_on(agent.call_tool("governed:flaky", args)).unwrap();
    assert_eq!(r.message, "succeeded on call 3");
    // Two retries: 100–200 ms, then 200–400 ms.
    assert!(started.elapsed() >= Duration::from_millis(300));
    let retries: Vec<_> = agent
        .log()
        .into_iter()
        .filter(|i| i.heading.contains("Retrying tool 'governed:flaky'"))
        .collect();
    assert_eq!(retries.len(), 2);
    assert!(retries[0]
        .content
        .contains("after dependency error: failure 1"));

    let args = json!({"city": "x", "key": "b", "fail_times": 1, "kind": "business"});
    let e = block_on(agent.call_tool("governed:flaky", args)).unwrap_err();
    assert_eq!((e.kind(), e.message()), (ErrorKind::Business, "failure 1"));
}

#[test]
fn the_breaker_opens_hides_the_tool_answers_at_once_and_a_new_build_closes_it() {
    let root = root();
    root.write("usr/toolhost.toml", "[tools.governed]\nmax_retries = 2\n");
    let host = root.host();
    let agent = toolhost::Agent::new(host.clone(), "A0", "default").unwrap();
    // Each call makes 3 attempts (2 retries): two calls make 6 failures, the breaker opens at 5.
    for key in ["c", "d"] {
        let args = json!({"city": "x", "key": key, "fail_times": 100, "kind": "internal"});
        let e = block_on(agent.call_tool("governed:flaky", args)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Internal);
    }
    let started = Instant::now();
    let e = block_on(agent.call_tool("governed", json!({"city": "x"}))).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Dependency);
    assert!(
        e.message().contains("tool governed is unavailable until"),
        "{e}"
    );
    assert!(
        e.message().contains("after 5 failures (last: failure"),
        "{e}"
    );
    assert!(started.elapsed() < Duration::from_millis(200));
    assert!(!host.tools_prompt("default").contains("governed"));
    let open = host.resolve("default", "governed").found.clone().unwrap();
    assert_eq!(open.handle.breaker_state().name(), "open");
    assert!(open
        .handle
        .unavailable()
        .unwrap()
        .starts_with("circuit breaker open until"));
    // A new build of the tool (other bytes) starts with its breaker closed.
    let _watcher = host.watch().unwrap();
    let mut bytes = std::fs::read(Fixture::Governed.path()).unwrap();
    bytes.extend_from_slice(b"another build");
    let rel = format!("usr/tools/governed.{}", std::env::consts::DLL_EXTENSION);
    root.replace_bytes(&rel, &bytes);
    toolhost_tests::wait_for("the new build", || {
        let found = host
            .resolve("default", "governed")
            .found
            .clone()
            .ok_or("none")?;
        match found.handle.generation() > open.handle.generation() {
            true => Ok(found),
            false => Err("the old build"),
        }
    });
    let fresh = host.resolve("default", "governed").found.clone().unwrap();
    assert_eq!(fresh.handle.breaker_state().name(), "closed");
    block_on(agent.call_tool("governed", json!({"city": "x"}))).unwrap();
}

#[test]
fn a_tool_that_is_not_ready_is_hidden_listed_with_its_reason_and_refused() {
    let root = root();
    let (agent, _) = root.agent("default");
    block_on(agent.call_tool("governed:unready", json!({"city": "x"}))).unwrap();
    // Bad arguments are told as such first: validation comes before readiness.
    let e = block_on(agent.call_tool("governed", json!({}))).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Validation, "{}", e.message());
    let e = block_on(agent.call_tool("governed", json!({"city": "x"}))).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Dependency);
    assert_eq!(
        e.message(),
        "tool governed is not ready: GOVERNED_KEY not configured"
    );
    let host = agent.host();
    assert!(!host.tools_prompt("default").contains("governed"));
    let found = host.resolve("default", "governed").found.clone().unwrap();
    assert_eq!(
        found.handle.unavailable().as_deref(),
        Some("not ready: GOVERNED_KEY not configured")
    );
}

#[test]
fn result_metadata_goes_to_the_log_and_never_to_the_model() {
    let root = root();
    let (agent, _) = root.agent("default");
    let r = block_on(agent.call_tool("governed:metadata", json!({"city": "Oslo"}))).unwrap();
    assert_eq!(r.message, "with metadata");
    let item = agent
        .log()
        .into_iter()
        .find(|i| i.heading.contains("governed:metadata"))
        .unwrap();
    assert_eq!(item.metadata.as_ref().unwrap().get()["rows"], 3);
    assert!(agent.history().iter().all(|m| !m.content.contains("rows")));
}

#[test]
fn the_config_allows_and_denies_tools_by_name_and_capability() {
    let root = root();
    root.tool("usr", "echo", Fixture::Echo);
    root.write("usr/toolhost.toml", "[access]\ndeny = [\"echo\"]\n");
    let (agent, _) = root.agent("default");
    let e = block_on(agent.call_tool("echo", json!({}))).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Repairable);
    assert!(e.message().contains("tool echo is not allowed"), "{e}");
    let prompt = agent.host().tools_prompt("default");
    assert!(
        !prompt.contains("echo") && prompt.contains("governed"),
        "{prompt}"
    );
    block_on(agent.call_tool("governed", json!({"city": "x"}))).unwrap();
    // `list` says why, and which policy applies where it is not "allow".
    root.write(
        "usr/toolhost.toml",
        "[access]\ndeny = [\"echo\"]\n[policy]\nwrite = \"ask\"\n",
    );
    let out = root.run_cli(&["list"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("not allowed: tool `echo` is denied by \"echo\" in usr/toolhost.toml"),
        "{text}"
    );
    assert!(
        text.contains("policy: ask (usr/toolhost.toml:4 [policy] write)"),
        "{text}"
    );
    let out = root.run_cli(&["list", "--json"]);
    let listing: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let echo = &listing["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "echo");
    assert!(echo.unwrap()["denied"].as_str().is_some(), "{listing}");
    assert_eq!(echo.unwrap()["policy"], "ask");
}

#[test]
fn the_policy_denies_asks_without_a_terminal_and_yes_approves_writes_only() {
    let root = root();
    root.tool("usr", "echo", Fixture::Echo);
    root.write(
        "usr/toolhost.toml",
        "[policy]\nwrite = \"ask\"\n[tools.governed]\npolicy = \"deny\"\n",
    );
    let (agent, _) = root.agent("default");
    let e = block_on(agent.call_tool("governed", json!({"city": "x"}))).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Repairable);
    assert!(
        e.message()
            .contains("was not approved (policy: usr/toolhost.toml:4 [tools.governed] policy"),
        "{e}"
    );
    let e = block_on(agent.call_tool("echo", json!({"a": 1}))).unwrap_err();
    assert!(e.message().contains("no terminal to ask on"), "{e}");
    agent.approve_writes(true);
    block_on(agent.call_tool("echo", json!({"a": 1}))).unwrap();
    // Each decision that was not a plain "allow" is a log item saying where it came from.
    let notes: Vec<(String, String)> = agent
        .log()
        .into_iter()
        .map(|i| (i.heading.into_inner(), i.content.into_inner()))
        .filter(|(heading, _)| heading.starts_with("Call of tool"))
        .collect();
    let expected = [
        (
            "Call of tool 'governed' denied",
            "policy: usr/toolhost.toml",
        ),
        (
            "Call of tool 'echo' denied",
            "policy asks, and there is no terminal",
        ),
        ("Call of tool 'echo' approved", "--yes (write)"),
    ];
    assert_eq!(notes.len(), expected.len(), "{notes:?}");
    for ((heading, source), (want_heading, want_source)) in notes.iter().zip(expected) {
        assert_eq!(heading, want_heading);
        assert!(source.starts_with(want_source), "{source}");
    }
}

#[test]
fn a_mistake_in_the_config_is_one_line_naming_the_file_line_and_key() {
    let root = root();
    root.write("usr/toolhost.toml", "[calls]\ntimeout = 5\n");
    let out = root.run_cli(&["call", "governed", "--args", r#"{"city": "x"}"#]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error")).collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    assert!(
        errors[0].contains("usr/toolhost.toml:2: unknown key `timeout` in [calls]"),
        "{stderr}"
    );
}

#[test]
fn on_a_terminal_the_user_approves_once_or_always_or_denies() {
    let root = root();
    root.tool("usr", "echo", Fixture::Echo);
    root.write("usr/toolhost.toml", "# mine\n[policy]\nwrite = \"ask\"\n");
    let call = r#"call echo --args '{"token": "x"}'"#;
    let Some(shown) = root.run_on_terminal(call, "d\n", false) else {
        return;
    };
    assert!(
        shown.contains("wants to call tool 'echo' (risk write)"),
        "{shown}"
    );
    assert!(shown.contains("was not approved (user: denied)"), "{shown}");
    let shown = root.run_on_terminal(call, "a\n", false).unwrap();
    assert!(shown.contains("\"token\""), "{shown}");
    assert!(
        shown.contains("approved always: saving [tools.echo] policy = \"allow\" in ")
            && shown.contains("usr/toolhost.toml"),
        "{shown}"
    );
    let saved = std::fs::read_to_string(root.path().join("usr/toolhost.toml")).unwrap();
    assert!(
        saved.starts_with("# mine") && saved.contains("[tools.echo]"),
        "{saved}"
    );
    // Saved: no question the next time.
    let out = root.run_cli(&["call", "echo", "--args", "{}"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn every_call_is_audited_masked_and_the_chain_verifies() {
    let root = root();
    root.write("usr/secrets.env", "TOKEN=s3cr3t-value-42\n");
    let ok = root.run_cli(&[
        "call",
        "governed",
        "--args",
        r#"{"city": "s3cr3t-value-42"}"#,
    ]);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let bad = root.run_cli(&["call", "governed", "--args", r#"{"units": "kelvin"}"#]);
    assert!(!bad.status.success());
    let log = std::fs::read_to_string(root.path().join("usr/audit/audit.jsonl")).unwrap();
    assert!(!log.contains("s3cr3t-value-42"), "{log}");
    let records: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|r: &serde_json::Value| r["type"] == "call")
        .collect();
    assert_eq!(records.len(), 2, "{log}");
    assert_eq!(records[0]["tool"], "governed");
    assert_eq!(records[0]["outcome"], "success");
    assert_eq!(records[0]["layer"], "user");
    assert_eq!(records[0]["attempts"].as_array().unwrap().len(), 1);
    assert_eq!(records[0]["library_sha256"].as_str().unwrap().len(), 64);
    assert_eq!(records[1]["outcome"], "validation");
    let verify = root.run_cli(&["audit", "verify"]);
    assert!(
        verify.status.success(),
        "{}",
        String::from_utf8_lossy(&verify.stdout)
    );
}
