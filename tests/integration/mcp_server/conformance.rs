//! The official MCP conformance suite (`@modelcontextprotocol/conformance`, pinned, on the
//! Node 22 it needs) against `toolhost serve-mcp --http --profile conformance`, serving the
//! built-in plugin `plugins/conformance/`: with `--sessions`, every active server scenario of
//! 0.1.16 (protocol 2025-11-25); stateless, every scenario 0.2.0-alpha.12 scores for
//! 2026-07-28. Every tool a scenario calls must have been called (its audit record), so that
//! no scenario passes by accident.

use std::path::Path;
use std::process::{Command, Stdio};

use toolhost_tests::{peers, Fixture, TestRoot};

use super::{audited_calls, drain, HttpServer};

/// The profile folder of the conformance plugin, in the workspace and in a root.
const PROFILE_DIR: &str = "plugins/conformance/agents/conformance";

/// How many server scenarios the pinned suite runs by default (32 listed, 2 pending).
const ACTIVE_SCENARIOS: usize = 30;

/// A root with the conformance plugin as `cargo xtask install` leaves it: its prompts and
/// resources, and each tool's built library beside where its crate is.
fn conformance_root() -> TestRoot {
    let root = TestRoot::new();
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace");
    let plugin = workspace.join("plugins/conformance");
    copy_tree(&plugin, &root.path().join("plugins/conformance"));
    for fixture in Fixture::ALL {
        let Some(name) = fixture.package().strip_prefix("conformance-") else {
            continue;
        };
        root.tool(PROFILE_DIR, &name.replace('-', "_"), fixture);
    }
    root
}

/// The tools of the conformance plugin, by name.
fn conformance_tools() -> Vec<String> {
    Fixture::ALL
        .iter()
        .filter_map(|f| f.package().strip_prefix("conformance-"))
        .map(|name| name.replace('-', "_"))
        .collect()
}

/// The tools only the 2026-07-28 scenarios call (those of `InputRequiredResult`s, the
/// stateless diagnostics, the `x-mcp-header` one, the Tasks extension's fixtures).
fn only_2026(tool: &str) -> bool {
    tool.starts_with("test_input_required_result_")
        || ["test_missing_capability", "test_streaming_elicitation"].contains(&tool)
        || ["test_logging_tool", "test_header_echo"].contains(&tool)
        || ["greet", "slow_compute", "failing_job", "protocol_error_job"].contains(&tool)
        || ["confirm_delete", "multi_input", "test_tool_with_task"].contains(&tool)
}

/// The tools only the 2025-11-25 scenarios call: sampling and elicitation sent as requests
/// to the client, and log messages after `logging/setLevel`.
fn only_2025(tool: &str) -> bool {
    tool.starts_with("test_elicitation")
        || ["test_sampling", "test_tool_with_logging"].contains(&tool)
}

/// Copies the files of `from` into `to`, leaving out the tools' crates (their libraries are
/// the fixtures).
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("a folder of the root");
    for entry in std::fs::read_dir(from)
        .expect("the conformance plugin")
        .flatten()
    {
        let path = entry.path();
        let dest = to.join(entry.file_name());
        if path.join("Cargo.toml").is_file() {
            continue;
        }
        if path.is_dir() {
            copy_tree(&path, &dest);
        } else {
            std::fs::copy(&path, &dest).expect("a file of the conformance plugin");
        }
    }
}

/// One scenario's line of the suite's summary: `✓ name: 3 passed, 0 failed`.
#[derive(Debug)]
struct Scenario {
    passed: bool,
    line: String,
}

fn scenarios(summary: &str) -> Vec<Scenario> {
    summary
        .lines()
        .filter_map(|line| {
            let line = line.trim();
            let (passed, rest) = match line.chars().next()? {
                '✓' => (true, &line['✓'.len_utf8()..]),
                '✗' => (false, &line['✗'.len_utf8()..]),
                _ => return None,
            };
            let (_name, counts) = rest.trim().split_once(": ")?;
            counts.contains("passed").then(|| Scenario {
                passed,
                line: line.to_owned(),
            })
        })
        .collect()
}

#[test]
fn every_active_scenario_of_the_official_conformance_suite_passes() {
    let node = peers::node22();
    let suite = peers::conformance();
    let root = conformance_root();
    let server = HttpServer::start(&root, &["--profile", "conformance", "--sessions"]);
    let mut child = Command::new(&node)
        .arg(&suite)
        .args(["server", "--url", &server.url])
        .arg("-o")
        .arg(root.path().join("conformance-results"))
        .current_dir(root.path())
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the conformance suite");
    let stdout = drain(child.stdout.take().expect("stdout"));
    let stderr = drain(child.stderr.take().expect("stderr"));
    child.wait().expect("the suite's exit");
    let (stdout, stderr) = (
        stdout.join().expect("stdout"),
        stderr.join().expect("stderr"),
    );
    let results = scenarios(&stdout);
    for scenario in &results {
        eprintln!("conformance: {}", scenario.line);
    }
    let failed: Vec<&Scenario> = results.iter().filter(|s| !s.passed).collect();
    assert!(
        failed.is_empty() && results.len() == ACTIVE_SCENARIOS,
        "{} of {ACTIVE_SCENARIOS} scenarios reported, failed: {:?}\n--- suite output (tail):\n{}\n--- stderr:\n{stderr}",
        results.len(),
        failed.iter().map(|s| &s.line).collect::<Vec<_>>(),
        tail(&stdout, 120)
    );
    assert!(
        stdout.contains(&format!(
            "Total: {} passed, 0 failed",
            total_checks(&results)
        )),
        "the suite's total line: {}",
        tail(&stdout, 3)
    );
    // Each tool a scenario calls was called, through the lifecycle (its audit record); the
    // JSON Schema 2020-12 tool is only listed (its scenario is pending in 0.1.16).
    for tool in conformance_tools() {
        if tool == "json_schema_2020_12_tool" || only_2026(&tool) {
            continue;
        }
        let calls = audited_calls(&root, &tool);
        assert!(!calls.is_empty(), "no scenario called {tool}");
    }
    let failure = &audited_calls(&root, "test_error_handling")[0];
    assert_eq!(failure["outcome"], "business", "{failure}");
}

/// The sum of every scenario's passed checks, as the suite's total line gives it.
fn total_checks(results: &[Scenario]) -> usize {
    results
        .iter()
        .filter_map(|s| {
            let counts = s.line.rsplit_once(": ")?.1;
            counts.split(' ').next()?.parse::<usize>().ok()
        })
        .sum()
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// How many server scenarios 0.2.0-alpha.12 scores for 2026-07-28 (50 run, 13 not scored:
/// the Tasks extension's 10, and 3 pending or added after the release).
const SCORED_2026_SCENARIOS: usize = 37;

/// The Tasks extension's scenarios that must pass in the same run (each check run). Not
/// among them: `tasks-status-notifications`, pending in the suite (its one check is skipped
/// by the suite itself, see [`TASKS_PENDING`]).
const TASKS_SCENARIOS: [&str; 9] = [
    "tasks-lifecycle",
    "tasks-capability-negotiation",
    "tasks-wire-fields",
    "tasks-request-state-removal",
    "tasks-mrtr-input",
    "tasks-request-headers",
    "tasks-dispatch-and-envelope",
    "tasks-required-task-error",
    // A tool that asks in `InputRequiredResult` rounds, then becomes a task
    // (`ToolInfo::input_before_task`).
    "tasks-mrtr-composition",
];

/// The Tasks scenario the suite runs without checking anything: pending in the suite.
const TASKS_PENDING: &str = "tasks-status-notifications";

/// The checks of the 2026-07-28 run that may warn: SHOULDs that need a tool changing the
/// served tool and prompt lists (`test_trigger_tool_change`, `test_trigger_prompt_change`),
/// which the conformance plugin does not have (a reload notifies listeners: see stateless.rs).
const ALLOWED_WARNINGS: [&str; 2] = [
    "sep-2575-server-sends-prompts-list-changed-on-subscription",
    "sep-2575-server-sends-tools-list-changed-on-subscription",
];

#[test]
fn every_scored_2026_scenario_of_the_official_conformance_suite_passes() {
    let node = peers::node22();
    let suite = peers::conformance_2026();
    let root = conformance_root();
    // Stateless, as serve-mcp is by default.
    let server = HttpServer::start(&root, &["--profile", "conformance"]);
    let results_dir = root.path().join("conformance-results");
    let out = Command::new(&node)
        .arg(&suite)
        .args([
            "server",
            "--url",
            &server.url,
            "--requirements",
            "2026-07-28",
        ])
        .arg("-o")
        .arg(&results_dir)
        .current_dir(root.path())
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .expect("the conformance suite");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    // The scored scenarios are those of the summary before its "Not scored" block.
    let summary = stdout
        .split_once("=== SUMMARY ===")
        .map_or("", |(_, after)| after);
    let scored = summary
        .split_once("Not scored for 2026-07-28")
        .map_or(summary, |(before, _)| before);
    let unscored = summary
        .split_once("Not scored for 2026-07-28")
        .map_or("", |(_, after)| after);
    let unscored: Vec<&str> = unscored
        .lines()
        .filter_map(|l| l.trim().get(4..)?.split_once(" ("))
        .map(|(name, _)| name)
        .collect();
    let results: Vec<Scenario> = scenarios(scored)
        .into_iter()
        .filter(|s| {
            !unscored
                .iter()
                .any(|name| s.line.contains(&format!(" {name}:")))
        })
        .collect();
    for scenario in &results {
        eprintln!("conformance 2026-07-28: {}", scenario.line);
    }
    let failed: Vec<&Scenario> = results.iter().filter(|s| !s.passed).collect();
    assert!(
        failed.is_empty() && results.len() == SCORED_2026_SCENARIOS,
        "{} of {SCORED_2026_SCENARIOS} scored scenarios reported, failed: {:?}\n--- suite output (tail):\n{}\n--- stderr:\n{stderr}",
        results.len(),
        failed.iter().map(|s| &s.line).collect::<Vec<_>>(),
        tail(&stdout, 120)
    );
    // Every check of the scored scenarios ran: none skipped or untestable, no warning but the
    // allowed ones.
    let mut bad = Vec::new();
    let mut tasks_seen = Vec::new();
    let mut pending_seen = false;
    for entry in std::fs::read_dir(&results_dir)
        .expect("the results")
        .flatten()
    {
        let name = entry.file_name().to_string_lossy().into_owned();
        let task = TASKS_SCENARIOS
            .iter()
            .find(|t| name.starts_with(&format!("server-{t}-")));
        if let Some(task) = task {
            tasks_seen.push(*task);
        } else if name.starts_with(&format!("server-{TASKS_PENDING}-")) {
            // Still pending in the suite: each of its checks skipped by the suite itself.
            let checks = std::fs::read(entry.path().join("checks.json")).unwrap_or_default();
            let checks: Vec<serde_json::Value> =
                serde_json::from_slice(&checks).unwrap_or_default();
            pending_seen = true;
            assert!(
                !checks.is_empty() && checks.iter().all(|c| c["status"] == "SKIPPED"),
                "{TASKS_PENDING} is no longer pending in the suite: {checks:#?}"
            );
            continue;
        } else if unscored
            .iter()
            .any(|u| name.starts_with(&format!("server-{u}-")))
        {
            continue;
        }
        let checks = std::fs::read(entry.path().join("checks.json")).unwrap_or_default();
        let checks: Vec<serde_json::Value> = serde_json::from_slice(&checks).unwrap_or_default();
        for check in checks {
            let (id, status) = (check["id"].as_str().unwrap_or(""), &check["status"]);
            let fine = status == "SUCCESS"
                || status == "INFO"
                || (status == "WARNING" && ALLOWED_WARNINGS.contains(&id));
            if !fine {
                bad.push(format!("{name}: {id} {status} {}", check["errorMessage"]));
            }
        }
    }
    assert!(bad.is_empty(), "checks that did not pass: {bad:#?}");
    tasks_seen.sort_unstable();
    let mut tasks = TASKS_SCENARIOS.to_vec();
    tasks.sort_unstable();
    assert_eq!(tasks_seen, tasks, "the Tasks scenarios that ran");
    assert!(pending_seen, "{TASKS_PENDING} did not run");
    // Each tool a 2026-07-28 scenario calls was called, through the lifecycle.
    for tool in conformance_tools() {
        if tool == "json_schema_2020_12_tool" || only_2025(&tool) {
            continue;
        }
        let calls = audited_calls(&root, &tool);
        assert!(!calls.is_empty(), "no 2026-07-28 scenario called {tool}");
    }
}

/// The Skills extension's three scenarios (0.2.0-alpha.12 runs an extension's scenario only
/// when asked by name, `--force`), against the skill the conformance plugin carries
/// (`skills/trip-planner/`): each passes with every check run, none skipped.
#[test]
fn the_skills_scenarios_of_the_official_conformance_suite_pass() {
    let node = peers::node22();
    let suite = peers::conformance_2026();
    let root = conformance_root();
    let server = HttpServer::start(&root, &["--profile", "conformance"]);
    for scenario in [
        "sep-2640-skills-directory",
        "sep-2640-skills-enumeration",
        "sep-2640-skills-manifest",
    ] {
        let results = root.path().join(format!("results-{scenario}"));
        let out = Command::new(&node)
            .arg(&suite)
            .args(["server", "--url", &server.url, "--scenario", scenario])
            .args(["--spec-version", "2026-07-28", "--force", "-o"])
            .arg(&results)
            .current_dir(root.path())
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .output()
            .expect("the conformance suite");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let passed = stdout
            .lines()
            .find_map(|l| l.trim().strip_prefix("Passed: "))
            .unwrap_or_else(|| panic!("{scenario}: no Passed line:\n{}", tail(&stdout, 60)));
        let (counts, _) = passed.split_once(',').unwrap_or((passed, ""));
        let (ok, all) = counts.split_once('/').expect("P/T");
        assert!(
            ok == all && ok != "0" && passed.contains("0 failed, 0 warnings"),
            "{scenario}: {passed}\n{}",
            tail(&stdout, 60)
        );
        assert!(
            !stdout.contains("SKIPPED"),
            "{scenario}: a check skipped\n{stdout}"
        );
    }
}
