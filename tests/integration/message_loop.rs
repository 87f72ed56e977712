//! The message loop: scripted model replies driving real plugins.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use toolhost::output::Captured;
use toolhost::{
    Agent, LoopError, LoopOptions, Role, ScriptedModel, Secrets, MISFORMAT_WARNING, REPEAT_WARNING,
};
use toolhost_tests::{wait_for, Fixture, TestRoot};

/// A root with the core `response` tool, `echo`, and the secret extensions.
fn root() -> TestRoot {
    let root = TestRoot::new();
    root.tool("core", "response", Fixture::Response);
    root.tool("usr", "echo", Fixture::Echo);
    root.secret_extensions();
    root
}

fn call(tool: &str, args: Value) -> String {
    json!({"thoughts": ["next"], "headline": format!("Calling {tool}"), "tool_name": tool, "tool_args": args}).to_string()
}

fn answer(text: &str) -> String {
    call("response", json!({ "text": text }))
}

fn run(
    root: &TestRoot,
    replies: Vec<String>,
    message: &str,
) -> (Result<String, LoopError>, Arc<Agent>, Arc<Captured>) {
    let (agent, output) = root.agent("default");
    let model = ScriptedModel::new(replies);
    let result =
        toolhost_tests::block_on(agent.monologue(&model, message, &LoopOptions::default()));
    (result, agent, output)
}

/// Starts a monologue on its own runtime; returns the agent, the runtime and the running loop.
fn start(
    root: &TestRoot,
    replies: Vec<String>,
    message: &'static str,
) -> (
    Arc<Agent>,
    tokio::runtime::Runtime,
    tokio::task::JoinHandle<Result<String, LoopError>>,
) {
    let (agent, _) = root.agent("default");
    let model = ScriptedModel::new(replies);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let looping = {
        let agent = agent.clone();
        runtime.spawn(async move {
            agent
                .monologue(&model, message, &LoopOptions::default())
                .await
        })
    };
    (agent, runtime, looping)
}

fn roles(agent: &Agent) -> Vec<Role> {
    agent.history().iter().map(|m| m.role).collect()
}

#[test]
fn a_session_runs_tools_until_the_response_ends_it() {
    let root = root();
    let (result, agent, _) = run(
        &root,
        vec![call("echo", json!({"q": 1})), answer("All done.")],
        "Echo something, then answer.",
    );
    assert_eq!(result.unwrap(), "All done.");
    use Role::*;
    assert_eq!(roles(&agent), [User, Ai, Tool, Ai, Tool]);
    let history = agent.history();
    assert_eq!(history[2].content, r#"{"q":1}"#);
    assert_eq!(history[2].tool_name.as_deref(), Some("echo"));
    let kinds: Vec<String> = agent
        .log()
        .iter()
        .map(|i| i.kind.as_str().to_owned())
        .collect();
    assert_eq!(
        kinds,
        ["user", "agent", "tool", "agent", "tool", "response"]
    );
    assert!(agent.log().iter().all(|i| i.finished));
    assert_eq!(agent.log()[1].heading, "Calling echo");
}

#[test]
fn lenient_replies_aliases_and_methods_are_understood() {
    let root = root();
    let (result, agent, _) = run(
        &root,
        vec![
            "Sure.\n```json\n{'tool': 'echo:lengths', parameters: {word: 'abc',},}\n```".to_owned(),
            "{\"name\": \"response\", \"args\": {\"text\": \"ok\"}}".to_owned(),
        ],
        "go",
    );
    assert_eq!(result.unwrap(), "ok");
    assert_eq!(agent.history()[2].content, r#"{"word":3}"#);
}

#[test]
fn misformat_and_repeat_warnings_go_back_and_unusable_replies_stop_the_loop() {
    let root = root();
    let echo = call("echo", json!({}));
    let (result, agent, _) = run(
        &root,
        vec![
            "I am not sure what to do.".to_owned(),
            echo.clone(),
            echo.clone(),
            "still no json".to_owned(),
            "{\"tool_args\": {}}".to_owned(),
            answer("never reached"),
        ],
        "go",
    );
    assert!(matches!(result, Err(LoopError::Unusable(3))), "{result:?}");
    let warnings: Vec<String> = agent
        .history()
        .iter()
        .filter(|m| m.role == Role::Warning)
        .map(|m| m.content.to_string())
        .collect();
    assert_eq!(
        warnings,
        [
            MISFORMAT_WARNING,
            REPEAT_WARNING,
            MISFORMAT_WARNING,
            MISFORMAT_WARNING
        ]
    );
}

#[test]
fn the_iteration_limit_ends_the_loop() {
    let root = root();
    let (agent, _) = root.agent("default");
    let replies = (0..10).map(|i| call("echo", json!({ "i": i })));
    let model = ScriptedModel::new(replies);
    let options = LoopOptions::default().with_max_iterations(4);
    let result = toolhost_tests::block_on(agent.monologue(&model, "go", &options));
    assert!(
        matches!(result, Err(LoopError::IterationLimit(4))),
        "{result:?}"
    );
    assert_eq!(model.remaining(), 6);
}

#[test]
fn a_repairable_error_becomes_a_warning_and_the_loop_goes_on() {
    let root = root();
    let (result, agent, _) = run(
        &root,
        vec![
            call(
                "echo:fail",
                json!({"kind": "repairable", "message": "missing 'q'"}),
            ),
            answer("fixed"),
        ],
        "go",
    );
    assert_eq!(result.unwrap(), "fixed");
    let warning = agent
        .history()
        .into_iter()
        .find(|m| m.role == Role::Warning)
        .unwrap();
    assert_eq!(
        warning.content,
        "Tool 'echo:fail' failed (repairable error): missing 'q'\nFix the call as the error \
         says, then call the tool again."
    );
    // The exact text the model saw is in the log.
    assert!(agent
        .log()
        .iter()
        .any(|i| i.kind == "warning" && i.content == warning.content));
}

#[test]
fn a_failure_of_any_kind_goes_back_to_the_model_marked_and_the_loop_goes_on() {
    let root = root();
    let kinds = ["business", "timeout", "dependency", "internal"];
    let mut replies: Vec<String> = kinds
        .iter()
        .map(|kind| {
            call(
                "echo:fail",
                json!({"kind": kind, "message": format!("{kind} trouble")}),
            )
        })
        .collect();
    replies.push(answer("worked around it"));
    let (result, agent, output) = run(&root, replies, "go");
    assert_eq!(result.unwrap(), "worked around it");
    let warnings: Vec<String> = agent
        .history()
        .into_iter()
        .filter(|m| m.role == Role::Warning)
        .map(|m| m.content.into_inner())
        .collect();
    assert_eq!(warnings.len(), 4, "{warnings:?}");
    for (kind, warning) in kinds.iter().zip(&warnings) {
        let head = format!("Tool 'echo:fail' failed ({kind} error): {kind} trouble\n");
        assert!(warning.starts_with(&head), "{warning}");
    }
    assert!(
        warnings[2].contains("do not repeat the same call now"),
        "{}",
        warnings[2]
    );
    // Each failure is printed, as before.
    let printed = format!("{:?}", output.lines());
    assert!(
        printed.contains("Warning: Tool 'echo:fail' failed (dependency error)"),
        "{printed}"
    );
}

#[test]
fn the_loop_stops_after_max_failed_calls_in_a_row() {
    let root = root();
    let fail = |message: &str| {
        call(
            "echo:fail",
            json!({"kind": "dependency", "message": message}),
        )
    };
    let (agent, _) = root.agent("default");
    // A success in between starts the count again.
    let model = ScriptedModel::new(vec![
        fail("one"),
        call("echo", json!({"q": 1})),
        fail("two"),
        fail("three"),
        answer("never"),
    ]);
    let options = LoopOptions::default().with_max_failed_calls(2);
    let result = toolhost_tests::block_on(agent.monologue(&model, "go", &options));
    match result {
        Err(error @ LoopError::FailedCalls { .. }) => {
            let line = error.to_string();
            assert!(
                line.starts_with("2 tool calls failed in a row; the last: tool 'echo:fail' failed (dependency error): three"),
                "{line}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(model.remaining(), 1);
    assert_eq!(agent.log().last().unwrap().kind, "error");
}

#[test]
fn the_breaker_counts_failures_across_the_session_and_hides_the_tool() {
    let root = root();
    root.write(
        "usr/toolhost.toml",
        "[breaker]\nfailures = 2\ncooldown_seconds = 1000\n",
    );
    let fail = |n: u32| {
        call(
            "echo:fail",
            json!({"kind": "dependency", "message": format!("db down {n}")}),
        )
    };
    let (agent, _) = root.agent("default");
    let listed = |agent: &Agent| {
        let specs = agent.host().tool_specs("default");
        let prompt = agent.host().tools_prompt("default");
        (
            specs.iter().any(|s| s.name == "echo"),
            prompt.contains("### echo"),
        )
    };
    assert_eq!(listed(&agent), (true, true));
    let model = ScriptedModel::new(vec![
        fail(1),
        fail(2),
        call("echo", json!({"q": 1})),
        answer("echo is down"),
    ]);
    let result = toolhost_tests::block_on(agent.monologue(&model, "go", &LoopOptions::default()));
    assert_eq!(result.unwrap(), "echo is down");
    let warnings: Vec<String> = agent
        .history()
        .into_iter()
        .filter(|m| m.role == Role::Warning)
        .map(|m| m.content.into_inner())
        .collect();
    assert_eq!(warnings.len(), 3, "{warnings:?}");
    assert!(
        warnings[2].contains("tool echo is unavailable until"),
        "{}",
        warnings[2]
    );
    // Open, the tool is neither a function nor in the tools prompt.
    assert_eq!(listed(&agent), (false, false));
}

#[test]
fn an_interjected_message_interrupts_the_tool_and_keeps_its_progress() {
    let root = root();
    let (agent, runtime, looping) = start(
        &root,
        vec![
            call("echo:wait", json!({"report": true})),
            answer("stopped waiting"),
        ],
        "wait a while",
    );
    wait_for("the tool to report progress", || {
        let steps = agent.loop_data("wait_steps").and_then(|v| v.as_u64());
        if steps.unwrap_or(0) >= 3 {
            Ok(())
        } else {
            Err(steps)
        }
    });
    agent.interject("Stop waiting and answer.");
    let result = runtime.block_on(looping).unwrap();
    assert_eq!(result.unwrap(), "stopped waiting");
    let history = agent.history();
    let interrupted = history
        .iter()
        .find(|m| m.role == Role::Tool && m.tool_name.as_deref() == Some("echo:wait"))
        .unwrap();
    assert!(
        interrupted
            .content
            .starts_with("(interrupted by the user) progress so far: step "),
        "{}",
        interrupted.content
    );
    let after = history
        .iter()
        .skip_while(|m| m.role != Role::Tool)
        .nth(1)
        .unwrap();
    assert_eq!(
        (after.role, after.content.as_str()),
        (Role::User, "Stop waiting and answer.")
    );
}

#[test]
fn a_paused_agent_waits_and_resumes() {
    let root = root();
    let (agent, runtime, looping) = start(
        &root,
        vec![call("echo:wait", json!({})), answer("done")],
        "go",
    );
    wait_for("the tool to start", || {
        agent.loop_data("wait_steps").ok_or("not started")
    });
    agent.pause();
    std::thread::sleep(Duration::from_millis(50));
    let paused_at = agent.loop_data("wait_steps");
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(
        agent.loop_data("wait_steps"),
        paused_at,
        "it went on while paused"
    );
    agent.resume();
    assert_eq!(runtime.block_on(looping).unwrap().unwrap(), "done");
    assert_eq!(agent.loop_data("wait_steps"), Some(json!(200)));
}

#[test]
fn a_stopped_agent_ends_the_loop() {
    let root = root();
    let (agent, runtime, looping) = start(
        &root,
        vec![call("echo:wait", json!({})), answer("never")],
        "go",
    );
    wait_for("the tool to start", || {
        agent.loop_data("wait_steps").ok_or("not started")
    });
    agent.stop();
    let result = runtime.block_on(looping).unwrap();
    assert!(matches!(result, Err(LoopError::Stopped)), "{result:?}");
}

#[test]
fn a_reply_with_more_calls_than_the_cap_runs_the_first_and_tells_the_model_of_the_rest() {
    let root = root();
    let calls: Vec<_> = (0..70)
        .map(|i| json!({"tool_name": "echo", "tool_args": {"n": i}}))
        .collect();
    let calls = json!({ "calls": calls });
    let (result, agent, _) = run(&root, vec![call("parallel", calls), answer("ok")], "go");
    assert_eq!(result.unwrap(), "ok");
    let tool_result = agent
        .history()
        .into_iter()
        .find(|m| m.tool_name.as_deref() == Some("parallel"))
        .unwrap();
    let results = tool_result.additional.unwrap()["results"].clone();
    let results = results.as_array().unwrap();
    assert_eq!(results.len(), toolhost::MAX_CALLS + 1);
    let ran = results.iter().filter(|r| r["state"] == "success").count();
    assert_eq!(ran, toolhost::MAX_CALLS);
    // Each ran in order: the first 64 arguments, echoed.
    assert!(
        results[63]["message"].as_str().unwrap().contains("63"),
        "{}",
        results[63]
    );
    let note = &results[toolhost::MAX_CALLS];
    assert_eq!(note["state"], "error", "{note}");
    let message = note["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("6 more calls were not run: one parallel request runs at most 64"),
        "{message}"
    );
}

#[test]
fn parallel_calls_come_back_in_order_with_state_and_duration() {
    let root = root();
    let calls = json!({"calls": [
        {"tool_name": "echo:sleep", "tool_args": {"ms": 60}},
        {"tool_name": "echo:fail", "tool_args": {"kind": "business", "message": "no"}},
        {"tool_name": "echo", "tool_args": {"x": 1}},
        {"tool_name": "parallel", "tool_args": {"calls": []}},
    ]});
    let (result, agent, _) = run(&root, vec![call("parallel", calls), answer("ok")], "go");
    assert_eq!(result.unwrap(), "ok");
    let tool_result = agent
        .history()
        .into_iter()
        .find(|m| m.tool_name.as_deref() == Some("parallel"))
        .unwrap();
    let results = &tool_result.additional.unwrap()["results"];
    let states: Vec<(&str, &str)> = results
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["tool_name"].as_str().unwrap(),
                r["state"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        states,
        [
            ("echo:sleep", "success"),
            ("echo:fail", "error"),
            ("echo", "success"),
            ("parallel", "error"),
        ]
    );
    assert!(results[0]["duration_ms"].as_f64().unwrap() >= 60.0);
    // The calls are reported in the combined result only.
    let tool_entries: Vec<Option<String>> = agent
        .history()
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| m.tool_name.clone())
        .collect();
    assert_eq!(
        tool_entries,
        [Some("parallel".to_owned()), Some("response".to_owned())]
    );
    assert_eq!(results[1]["error"]["message"], "no");
    assert!(results[3]["error"]["message"]
        .as_str()
        .unwrap()
        .contains("refused"));
}

#[test]
fn the_prompt_model_call_error_and_chain_end_points_fire_in_order() {
    let root = root();
    for point in [
        "message_loop_prompts_before",
        "message_loop_prompts_after",
        "before_main_llm_call",
        "util_model_call_before",
        "response_stream_end",
        "tool_execute_error",
        "error_format",
        "process_chain_end",
        "monologue_end",
    ] {
        root.extension("usr", point, "_50_rec", Fixture::RecorderExt);
    }
    let (result, agent, _) = run(
        &root,
        vec![
            call(
                "echo:fail",
                json!({"kind": "dependency", "message": "down"}),
            ),
            answer("ok"),
        ],
        "go",
    );
    assert_eq!(result.unwrap(), "ok");
    let trace: Vec<String> = serde_json::from_value(agent.loop_data("trace").unwrap()).unwrap();
    let points: Vec<&str> = trace.iter().map(|t| t.split('/').next().unwrap()).collect();
    let iteration = [
        "message_loop_prompts_before",
        "message_loop_prompts_after",
        "before_main_llm_call",
        "util_model_call_before",
        "response_stream_end",
    ];
    let mut expected: Vec<&str> = iteration.to_vec();
    expected.extend(["tool_execute_error", "error_format"]);
    expected.extend(iteration);
    expected.extend(["monologue_end", "process_chain_end"]);
    assert_eq!(points, expected);
}

#[test]
fn the_loop_fires_its_extension_points_in_order() {
    let root = root();
    for point in [
        "agent_init",
        "monologue_start",
        "monologue_end",
        "message_loop_start",
        "message_loop_end",
        "hist_add_before",
        "hist_add_tool_result",
        "error_format",
        "system_prompt",
    ] {
        root.extension("usr", point, "_50_rec", Fixture::RecorderExt);
    }
    let (result, agent, _) = run(
        &root,
        vec![
            call("echo:fail", json!({"kind": "repairable"})),
            answer("ok"),
        ],
        "go",
    );
    // The recorder appends to the message of any `response` data; here there is none.
    assert_eq!(result.unwrap(), "ok");
    let trace: Vec<String> = serde_json::from_value(agent.loop_data("trace").unwrap()).unwrap();
    let points: Vec<&str> = trace.iter().map(|t| t.split('/').next().unwrap()).collect();
    assert_eq!(
        points,
        [
            "agent_init",
            "monologue_start",
            "hist_add_before", // user
            "message_loop_start",
            "system_prompt",
            "hist_add_before", // ai
            "error_format",
            "hist_add_before", // warning
            "message_loop_end",
            "message_loop_start",
            "system_prompt",
            "hist_add_before", // ai
            "hist_add_tool_result",
            "message_loop_end",
            "monologue_end",
        ]
    );
}

#[test]
fn a_plugin_fires_a_point_of_its_own() {
    let root = root();
    root.extension("usr", "echo_custom", "_10_rec", Fixture::RecorderExt);
    let (agent, _) = root.agent("default");
    let r = toolhost_tests::block_on(agent.call_tool("echo:fire", json!({}))).unwrap();
    let out: Value = serde_json::from_str(&r.message).unwrap();
    assert_eq!(
        out,
        json!({"args": {"from": "echo", "seen_by": ["echo_custom/_10_rec"]}})
    );
}

#[test]
fn secrets_are_unmasked_in_nested_arguments_and_unknown_keys_are_repairable() {
    let root = root();
    root.write(
        "usr/secrets.env",
        "API_KEY=sk-0123456789\nUSER_NAME=ada-lovelace\n",
    );
    let (result, agent, _) = run(
        &root,
        vec![
            call(
                "echo:lengths",
                json!({"key": "§§secret(API_KEY)", "plain": "abc"}),
            ),
            call("echo", json!({"nested": {"list": ["§§secret(USER_NAME)"]}})),
            call("echo", json!({"x": "§§secret(NOPE)"})),
            answer("done"),
        ],
        "go",
    );
    assert_eq!(result.unwrap(), "done");
    let history = agent.history();
    let tools: Vec<&str> = history
        .iter()
        .filter(|m| m.role == Role::Tool || m.role == Role::Warning)
        .map(|m| m.content.as_str())
        .collect();
    // The tool got the 13-character value, not the placeholder.
    assert_eq!(tools[0], r#"{"key":13,"plain":3}"#);
    // The nested value reached the tool, and came back masked.
    assert_eq!(tools[1], r#"{"nested":{"list":["§§secret(USER_NAME)"]}}"#);
    assert!(tools[2].contains("§§secret(NOPE)"), "{}", tools[2]);
    assert!(tools[2].contains("API_KEY, USER_NAME"), "{}", tools[2]);
}

#[test]
fn no_secret_value_leaks_into_history_log_session_or_output() {
    const KEY: &str = "sk-live-4f9a8b7c6d5e";
    const PASSWORD: &str = "correct horse battery";
    let root = root();
    root.write(
        "usr/secrets.env",
        format!("API_KEY={KEY}\nPASSWORD=\"{PASSWORD}\"\n"),
    );
    let script = [
        // The model itself writes a value.
        format!(
            "I know the key is {KEY}. {}",
            call("echo", json!({"note": "hi"}))
        ),
        // Arguments through a placeholder, echoed back as the tool's output.
        call(
            "echo",
            json!({"auth": "Bearer §§secret(API_KEY)", "deep": [{"p": "§§secret(PASSWORD)"}]}),
        ),
        // Progress text.
        call(
            "echo:progress",
            json!({"text": format!("using {PASSWORD}")}),
        ),
        // A repairable error's text.
        call(
            "echo:fail",
            json!({"kind": "repairable", "message": format!("bad key {KEY}")}),
        ),
        // A parallel call.
        call(
            "parallel",
            json!({"calls": [{"tool_name": "echo", "tool_args": {"k": "§§secret(API_KEY)"}}]}),
        ),
        // The final answer.
        answer(&format!("done with {KEY}")),
    ];
    let out = root.run_script("Use my key §§secret(API_KEY).", &script);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    assert_eq!(stdout.trim(), "done with §§secret(API_KEY)");

    let mut session_text = String::new();
    for entry in std::fs::read_dir(root.path().join("usr/sessions")).unwrap() {
        for file in ["history.jsonl", "log.jsonl"] {
            let text = std::fs::read_to_string(entry.as_ref().unwrap().path().join(file)).unwrap();
            assert!(!text.is_empty(), "{file} is empty");
            session_text += &text;
        }
    }
    for (place, text) in [
        ("stdout", &stdout),
        ("stderr", &stderr),
        ("session", &session_text),
    ] {
        for secret in [KEY, PASSWORD] {
            assert!(
                !text.contains(secret),
                "{secret} leaked into {place}:\n{text}"
            );
        }
    }
    // And the placeholders did reach the places the values would have been.
    assert!(stderr.contains("Bearer §§secret(API_KEY)"), "{stderr}");
    assert!(session_text.contains("using §§secret(PASSWORD)"));
    assert!(session_text.contains("bad key §§secret(API_KEY)"));
    assert!(
        stderr.contains("I know the key is §§secret(API_KEY)"),
        "{stderr}"
    );
}

#[test]
fn the_session_is_saved_as_json_lines() {
    let root = root();
    let (agent, _) = root.agent("default");
    let dir = agent
        .record_session(&root.path().join("usr/sessions"))
        .unwrap();
    let model = ScriptedModel::new([call("echo", json!({"a": 1})), answer("fine")]);
    toolhost_tests::block_on(agent.monologue(&model, "go", &LoopOptions::default())).unwrap();
    let history: Vec<Value> = std::fs::read_to_string(dir.join("history.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let roles: Vec<&str> = history
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "ai", "tool", "ai", "tool"]);
    let log: Vec<Value> = std::fs::read_to_string(dir.join("log.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let last_of_tool = log.iter().rev().find(|i| i["kind"] == "tool").unwrap();
    assert_eq!(last_of_tool["finished"], true);
    for field in [
        "id", "kind", "heading", "content", "kvps", "progress", "finished",
    ] {
        assert!(last_of_tool.get(field).is_some(), "{field}");
    }
}

#[test]
fn secrets_set_by_an_embedding_host_are_masked_too() {
    let root = root();
    let (agent, _) = root.agent("default");
    agent.host().set_secrets(Secrets::from_pairs([(
        "T".to_owned(),
        "tok-999".to_owned(),
    )]));
    let model = ScriptedModel::new([answer("the token is tok-999")]);
    let result =
        toolhost_tests::block_on(agent.monologue(&model, "go", &LoopOptions::default())).unwrap();
    assert_eq!(result, "the token is §§secret(T)");
    assert!(agent
        .history()
        .iter()
        .all(|m| !m.content.contains("tok-999")));
}

#[test]
fn an_interjection_after_the_tool_finished_keeps_its_result() {
    let root = root();
    let (agent, runtime, looping) = start(
        &root,
        vec![call("echo:sleep", json!({"ms": 300})), answer("ok")],
        "go",
    );
    // Running `execute`, past the checks before it (an interjection before them would end
    // the call before it started).
    wait_for("the tool to run", || {
        agent.loop_data("sleeping").ok_or("not yet")
    });
    agent.interject("By the way: hello.");
    assert_eq!(runtime.block_on(looping).unwrap().unwrap(), "ok");
    let history = agent.history();
    let at = history
        .iter()
        .position(|m| m.content == "slept 300 ms")
        .expect("the real result");
    assert_eq!(history[at + 1].content, "By the way: hello.");
    assert_eq!(history[at + 1].role, Role::User);
}

#[test]
fn a_paused_agent_stays_paused_after_an_interjection() {
    let root = root();
    let (agent, runtime, looping) = start(
        &root,
        vec![call("echo:wait", json!({"report": true})), answer("done")],
        "go",
    );
    wait_for("the tool to start", || {
        agent.loop_data("wait_steps").ok_or("not started")
    });
    agent.pause();
    agent.interject("Note this.");
    wait_for("the message to join the history", || {
        agent
            .history()
            .iter()
            .any(|m| m.content == "Note this.")
            .then_some(())
            .ok_or("not yet")
    });
    std::thread::sleep(Duration::from_millis(100));
    let last = agent.history().last().cloned().unwrap();
    assert_eq!(
        last.content, "Note this.",
        "the model was asked while paused"
    );
    agent.resume();
    assert_eq!(runtime.block_on(looping).unwrap().unwrap(), "done");
}

#[test]
fn a_message_sent_between_monologues_waits_for_the_next_one() {
    let root = root();
    let (agent, _) = root.agent("default");
    agent.interject("Also: be brief.");
    // Outside a monologue nothing is interrupted.
    toolhost_tests::block_on(agent.call_tool("echo", json!({}))).unwrap();
    let model = ScriptedModel::new([answer("brief")]);
    let result = toolhost_tests::block_on(agent.monologue(&model, "go", &LoopOptions::default()));
    assert_eq!(result.unwrap(), "brief");
    let users: Vec<String> = agent
        .history()
        .iter()
        .filter(|m| m.role == Role::User)
        .map(|m| m.content.to_string())
        .collect();
    assert_eq!(users, ["go", "Also: be brief."]);
}

#[test]
fn a_failed_call_finishes_its_log_item_with_the_error() {
    let root = root();
    let (agent, _) = root.agent("default");
    let e = toolhost_tests::block_on(agent.call_tool("echo:fail", json!({"message": "nope"})))
        .unwrap_err();
    assert_eq!(e.message(), "nope");
    let item = agent.log().pop().unwrap();
    assert!(item.finished);
    assert_eq!(item.content, "error (business): nope");
}

#[test]
fn a_cancelled_monologue_leaves_the_agent_usable() {
    let root = root();
    let (agent, _) = root.agent("default");
    let model = ScriptedModel::new([call("echo:wait", json!({})), answer("never")]);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let cancelled = runtime.block_on(async {
        tokio::time::timeout(
            Duration::from_millis(100),
            agent.monologue(&model, "go", &LoopOptions::default()),
        )
        .await
    });
    assert!(
        cancelled.is_err(),
        "the monologue should have been cut short"
    );
    agent.interject("later");
    // No monologue runs, so nothing is interrupted.
    runtime
        .block_on(agent.call_tool("echo", json!({})))
        .unwrap();
}

#[test]
fn a_secret_with_quotes_is_masked_inside_parallel_results() {
    let root = root();
    root.write("usr/secrets.env", "P='pa\"ss\\\\wo-rd'\n");
    let calls = json!({"calls": [{"tool_name": "echo", "tool_args": {"p": "§§secret(P)"}}]});
    let (result, agent, _) = run(&root, vec![call("parallel", calls), answer("ok")], "go");
    assert_eq!(result.unwrap(), "ok");
    let value = agent.host().secrets().get("P").unwrap().to_owned();
    assert!(value.contains('"') && value.contains('\\'), "{value}");
    let text = serde_json::to_string(&agent.history()).unwrap() + &format!("{:?}", agent.log());
    assert!(text.contains("§§secret(P)"));
    for leaked in ["pa\\\"ss", "pa\"ss", "ss\\\\\\\\wo", "wo-rd"] {
        assert!(!text.contains(leaked), "{leaked} in {text}");
    }
}
