//! A skipped test is never a silent pass: this binary, run again on one test that skips, says
//! so past the harness's capture and counts it at the end; under `CI=true` the test fails.

use std::process::Command;

/// Skips, as a test whose tool is missing does. Run only by the tests below (`--ignored`).
#[test]
#[ignore = "run by a_skipped_test_is_said_past_the_capture_and_counted_at_the_end"]
fn a_test_that_skips() {
    toolhost_tests::skip::skipped("`nothing` is missing: this test needs it");
}

/// This test binary, running only [`a_test_that_skips`], with `CI` set to `ci`.
fn run_the_skipping_test(ci: &str) -> std::process::Output {
    let this = std::env::current_exe().expect("the test binary's path");
    Command::new(this)
        .args(["--ignored", "--exact", "skips::a_test_that_skips"])
        .env("CI", ci)
        .output()
        .expect("running the test binary again")
}

#[test]
fn a_skipped_test_is_said_past_the_capture_and_counted_at_the_end() {
    let run = run_the_skipping_test("false");
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stdout}\n{stderr}");
    // The control: the harness ran the test, and reports it as passed.
    assert!(stdout.contains("1 passed"), "{stdout}");
    let line = "SKIPPED skips::a_test_that_skips: `nothing` is missing: this test needs it";
    assert!(stderr.contains(line), "{stderr}");
    let count = "1 test(s) SKIPPED, not passed (under CI=true they fail):\n  \
                 skips::a_test_that_skips: `nothing` is missing";
    assert!(stderr.contains(count), "{stderr}");
}

#[test]
fn a_test_that_would_skip_fails_under_ci() {
    let run = run_the_skipping_test("true");
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(!run.status.success(), "{stdout}");
    assert!(
        stdout.contains("under CI=true this test must run, not skip"),
        "{stdout}"
    );
}
