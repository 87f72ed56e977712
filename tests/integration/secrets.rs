//! Secrets stay masked in every common encoding: a probe tool returns a value in each of them
//! through `toolhost run`, and no form of it shows anywhere.

use serde_json::json;
use toolhost_tests::{Fixture, TestRoot};

#[path = "../fixtures/encoder/src/encodings.rs"]
#[allow(dead_code)]
pub(crate) mod encodings;

const KEY: &str = "sk-live-4f9a8b7c6d5e";
/// Changes under every encoding: non-ASCII, a space, a slash, quotes, `&<>` and `+`.
const PASSWORD: &str = "pä$$ w/\"rd'&<x>+1";

fn call(tool: &str, args: serde_json::Value) -> String {
    json!({"thoughts": ["next"], "headline": format!("Calling {tool}"), "tool_name": tool, "tool_args": args}).to_string()
}

/// A root with `response`, `encoder`, `echo`, the secret extensions and `secrets`.
fn root_with(secrets: &str) -> TestRoot {
    let root = TestRoot::new();
    root.tool("core", "response", Fixture::Response);
    root.tool("usr", "encoder", Fixture::Encoder);
    root.tool("usr", "echo", Fixture::Echo);
    root.secret_extensions();
    root.write("usr/secrets.env", secrets);
    root
}

/// Runs the replies through `toolhost run`; returns stdout, stderr and the session files (the
/// last reply answers "done").
fn run(root: &TestRoot, replies: &[String]) -> Vec<(&'static str, String)> {
    let out = root.run_script("Encode my secrets.", replies);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    assert_eq!(stdout.trim(), "done");
    let mut places = vec![("stdout", stdout), ("stderr", stderr)];
    for entry in std::fs::read_dir(root.path().join("usr/sessions")).unwrap() {
        for file in ["history.jsonl", "log.jsonl"] {
            let text = std::fs::read_to_string(entry.as_ref().unwrap().path().join(file)).unwrap();
            places.push(("session", text));
        }
    }
    places
}

/// Everything a run of the probe left for a person to read.
fn run_probe() -> Vec<(&'static str, String)> {
    let root = root_with(&format!("API_KEY={KEY}\nPASSWORD={PASSWORD}\n"));
    let replies = [
        call("encoder", json!({"text": "§§secret(API_KEY)"})),
        call("encoder", json!({"text": "§§secret(PASSWORD)"})),
        call(
            "encoder",
            json!({"text": "a §§secret(PASSWORD) in a sentence"}),
        ),
        call("response", json!({"text": "done"})),
    ];
    run(&root, &replies)
}

#[test]
fn no_encoding_of_a_secret_shows_through_toolhost_run() {
    let places = run_probe();
    let (_, stderr) = &places[1];
    // The probe did run, and its lines came back with placeholders.
    assert!(stderr.contains("base64 inside, offset 2: "), "{stderr}");
    assert!(stderr.contains("html hex: §§secret(PASSWORD)"), "{stderr}");
    let mut checked = 0;
    for value in [KEY, PASSWORD] {
        for probe in encodings::probes(value) {
            for (place, text) in &places {
                assert!(
                    !text.contains(&probe.secret),
                    "{value} as {} ({}) shows in {place}:\n{text}",
                    probe.label,
                    probe.secret
                );
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 44);
}

#[test]
fn placeholders_in_object_keys_are_filled_in() {
    // A value too short to be masked shows what the tool received.
    let root = root_with("SHORT=abc\n");
    let args = json!({"§§secret(SHORT)": 1, "n": {"x-§§secret(SHORT)": 2}});
    let places = run(
        &root,
        &[
            call("echo", args),
            call("response", json!({"text": "done"})),
        ],
    );
    let (_, stderr) = &places[1];
    assert!(stderr.contains(r#"{"abc":1,"n":{"x-abc":2}}"#), "{stderr}");
}

#[test]
fn the_live_log_says_which_secrets_reached_a_tool_but_not_their_values() {
    let root = root_with(&format!("API_KEY={KEY}\nPASSWORD={PASSWORD}\n"));
    let replies = [
        call(
            "echo",
            json!({"a": "§§secret(API_KEY)", "b": ["§§secret(PASSWORD)"]}),
        ),
        call("echo", json!({"plain": "no secret here"})),
        call("response", json!({"text": "done"})),
    ];
    let places = run(&root, &replies);
    let stderr = &places[1].1;
    let filled: Vec<&str> = stderr.lines().filter(|l| l.contains("filled in")).collect();
    assert_eq!(
        filled,
        ["  ... secrets API_KEY, PASSWORD filled in"],
        "{stderr}"
    );
    assert!(!stderr.contains(KEY), "{stderr}");
}

#[test]
fn a_malformed_line_is_skipped_by_number_and_the_good_lines_stay_masked() {
    let text =
        format!("API_KEY={KEY}\nnot a pair, {KEY}\n# a comment\nPASSWORD={PASSWORD}\n-x=1\n");
    let root = root_with(&text);
    let replies = [
        call("encoder", json!({"text": "§§secret(API_KEY)"})),
        call("encoder", json!({"text": "§§secret(PASSWORD)"})),
        call("response", json!({"text": "done"})),
    ];
    let places = run(&root, &replies);
    let (_, stderr) = &places[1];
    // One line per bad line, naming the file and the line, never its text.
    for line in [2, 5] {
        let want = format!("usr/secrets.env:{line} is not KEY=VALUE");
        assert_eq!(stderr.matches(&want).count(), 1, "{want} in {stderr}");
    }
    assert!(
        stderr.contains("skipped, the other lines are in force"),
        "{stderr}"
    );
    // The good lines are in force: the tool got the values, and no form of them shows.
    assert!(stderr.contains("html hex: §§secret(PASSWORD)"), "{stderr}");
    for value in [KEY, PASSWORD] {
        for probe in encodings::probes(value) {
            for (place, text) in &places {
                assert!(
                    !text.contains(&probe.secret),
                    "{value} as {} shows in {place}:\n{text}",
                    probe.label
                );
            }
        }
    }
    // The same for a file given with --secrets.
    let given = root.write("given.env", &text);
    root.write("usr/secrets.env", "");
    let script = root.write("script.txt", "=== user\nGo.\n=== model\n{\"tool_name\": \"echo\", \"tool_args\": {\"k\": \"§§secret(API_KEY)\"}}\n=== model\n{\"tool_name\": \"response\", \"tool_args\": {\"text\": \"done\"}}\n");
    let (script, given) = (script.to_string_lossy(), given.to_string_lossy());
    let out = root.run_cli(&["run", &script, "--secrets", &given]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("given.env:2 is not KEY=VALUE"), "{stderr}");
    assert!(!stderr.contains(KEY) && !String::from_utf8_lossy(&out.stdout).contains(KEY));
    assert!(stderr.contains("§§secret(API_KEY)"), "{stderr}");
}
