//! Numbers from outside never panic the host: every numeric key of `models.toml` with the
//! extremes through its real loader, `toolhost.toml` extremes through the real command line,
//! the longest durations the configuration takes through a real breaker trip and a real call,
//! and `Retry-After` / `retry-after-ms` extremes from a real local HTTP server. (Every numeric
//! key of `toolhost.toml` with every extreme, through the real loader: the unit test
//! `config::tests::errors::every_numeric_key_refuses_the_extremes_with_one_line`.)

use serde_json::json;
use toolhost::{ErrorKind, LoopError};
use toolhost_openai::ModelsConfig;
use toolhost_tests::fake_llm::{text_reply, Answer, FakeLlm};
use toolhost_tests::{block_on, Fixture, TestRoot};

use super::models::{request, root as model_root, run};

/// `nan`, `inf`, `-inf`, `-0`, tiny, huge, past TOML's integers, negative, a string.
const EXTREMES: [&str; 12] = [
    "nan",
    "+nan",
    "inf",
    "-inf",
    "-0.0",
    "1e-300",
    "1e-10",
    "1e300",
    "1e19",
    "18446744073709551615",
    "-1",
    "\"30\"",
];

/// A root whose `usr/models.toml` has one model, `fake`, with `line`.
fn models_toml(server: &FakeLlm, line: &str) -> TestRoot {
    let root = TestRoot::new();
    let url = server.url();
    let text = format!("[models.fake]\nbase_url = \"{url}\"\nmodel = \"fake-1\"\n{line}\n");
    root.write("usr/models.toml", text);
    root
}

#[test]
fn every_numeric_key_of_models_toml_refuses_the_extremes_naming_the_file_and_key() {
    let server = FakeLlm::start();
    let keys = [
        "timeout_seconds",
        "retry_initial_ms",
        "context_tokens",
        "max_tokens",
        "max_retries",
        "temperature",
    ];
    for key in keys {
        for value in EXTREMES {
            // -0 and tiny numbers are temperatures (of about 0).
            if key == "temperature" && ["-0.0", "1e-300", "1e-10"].contains(&value) {
                continue;
            }
            let root = models_toml(&server, &format!("{key} = {value}"));
            let loaded = std::panic::catch_unwind(|| {
                ModelsConfig::load(&toolhost::Layout::new(root.path()), "default")
            });
            let Ok(loaded) = loaded else {
                panic!("{key} = {value} panicked the loader");
            };
            let Err(error) = loaded else {
                panic!("{key} = {value} was accepted");
            };
            let line = error.to_string();
            assert!(!line.contains('\n'), "{line}");
            assert!(line.contains("models.toml"), "{key} = {value}: {line}");
            // A value TOML itself cannot hold is a syntax error on the file; any other names
            // the key.
            if value != "18446744073709551615" {
                assert!(line.contains(key), "{key} = {value}: {line}");
            }
        }
    }
    // The ranges the check names.
    for (text, end) in [
        ("timeout_seconds = 0", "not greater than 0; fix it"),
        ("timeout_seconds = -1", "not greater than 0; fix it"),
        (
            "timeout_seconds = 1e-10",
            "rounds to no time at all; fix it",
        ),
        ("timeout_seconds = 1e19", "(about 31 years); fix it"),
        ("timeout_seconds = nan", "not a finite number; fix it"),
        ("context_tokens = 0", "below the least, 1; fix it"),
        ("temperature = 3.5", "above the most, 2; fix it"),
        (
            "retry_initial_ms = 1000000000001",
            "(about 31 years); fix it",
        ),
    ] {
        let root = models_toml(&server, text);
        let error = ModelsConfig::load(&toolhost::Layout::new(root.path()), "default")
            .expect_err(text)
            .to_string();
        let key = text.split(' ').next().unwrap_or_default();
        assert!(
            error.contains(&format!("usr/models.toml: [models.fake] {key} = ")),
            "{error}"
        );
        assert!(error.ends_with(end), "{text}: {error}");
    }
}

#[test]
fn toolhost_toml_extremes_are_refused_by_the_command_line_with_one_line() {
    let root = TestRoot::new();
    root.tool("core", "response", Fixture::Response);
    root.tool("usr", "echo", Fixture::Echo);
    for (table, key, value) in [
        ("calls", "timeout_seconds", "1e19"),
        ("breaker", "cooldown_seconds", "1e19"),
        ("calls", "timeout_seconds", "1e-10"),
        ("tools.echo", "timeout_seconds", "nan"),
        ("isolation", "grace_ms", "9223372036854775807"),
    ] {
        root.write("usr/toolhost.toml", format!("[{table}]\n{key} = {value}\n"));
        let out = root.run_cli(&["call", "echo", "--args", r#"{"text": "hi"}"#]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_ne!(
            out.status.code(),
            Some(101),
            "{key} = {value} panicked: {stderr}"
        );
        assert!(!out.status.success(), "{key} = {value}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
        let want = format!("usr/toolhost.toml:2: [{table}] {key} = {value}: expected");
        assert!(stderr.contains(&want), "{want} in {stderr}");
    }
}

#[test]
fn the_longest_cool_down_and_deadline_trip_and_run_without_overflow() {
    let root = TestRoot::new();
    root.tool("usr", "governed", Fixture::Governed);
    root.write(
        "usr/toolhost.toml",
        "[calls]\ntimeout_seconds = 1e9\nbackoff_max_ms = 1000000000000\n\
         [breaker]\nfailures = 1\ncooldown_seconds = 1000000000\n",
    );
    let (agent, _) = root.agent("default");
    let args = json!({"city": "x", "key": "a", "fail_times": 100, "kind": "dependency"});
    let e = block_on(agent.call_tool("governed:flaky", args)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Dependency, "{e}");
    // The breaker opened for 31 years: refused, with the time it opens again.
    let e = block_on(agent.call_tool("governed", json!({"city": "x"}))).unwrap_err();
    assert!(e.message().contains("is unavailable until"), "{e}");
    // Another tool under the same longest deadline answers.
    root.tool("usr", "echo", Fixture::Echo);
    let (agent, _) = root.agent("default");
    let answer = block_on(agent.call_tool("echo", json!({"text": "hi"}))).unwrap();
    assert!(answer.message.contains("hi"), "{}", answer.message);
}

#[test]
fn retry_after_extremes_from_a_real_server_never_panic() {
    let limited = || r#"{"error": {"message": "slow down"}}"#.to_owned();
    // A wait that is not a number, negative or tiny: the backoff (or no wait) applies, and
    // the request is sent again.
    for (name, value) in [
        ("retry-after", "NaN"),
        ("retry-after-ms", "nan"),
        ("retry-after", "-inf"),
        ("retry-after-ms", "-1e300"),
        ("retry-after-ms", "1e-300"),
        ("retry-after", "-0"),
        ("retry-after", "soon"),
        ("retry-after-ms", "18446744073709551615e-20"),
    ] {
        let server = FakeLlm::start();
        server.push(Answer::Status(
            429,
            vec![(name, value.to_owned())],
            limited(),
        ));
        let reply = request("response", json!({"text": "Made it."}));
        server.push(text_reply(&reply, None));
        let root = model_root(&server, "");
        let (result, _, _) = run(&root, "Answer.");
        assert_eq!(result.unwrap(), "Made it.", "{name}: {value}");
        assert_eq!(server.requests().len(), 2, "{name}: {value}");
    }
    // A wait past any reason (`inf`, `1e300`, u64::MAX): not waited for; the request fails
    // saying how long the server asked for, capped at the longest duration.
    for (name, value) in [
        ("retry-after-ms", "1e300"),
        ("retry-after-ms", "inf"),
        ("retry-after", "1e300"),
        ("retry-after", "18446744073709551615"),
    ] {
        let server = FakeLlm::start();
        server.push(Answer::Status(
            429,
            vec![(name, value.to_owned())],
            limited(),
        ));
        let root = model_root(&server, "");
        let (result, _, _) = run(&root, "Answer.");
        let error = match result {
            Err(LoopError::Model(error)) => error.to_string(),
            other => panic!("{name}: {value}: {other:?}"),
        };
        assert!(
            error.contains("the server asks to wait 1000000000 s: try again later"),
            "{name}: {value}: {error}"
        );
        assert_eq!(server.requests().len(), 1, "{name}: {value}");
    }
}
