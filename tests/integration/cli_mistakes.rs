//! The command line refuses mistakes clearly: an unknown tool, profile, secrets file or script
//! header fails the command with one line saying what to do; a closed pipe ends it quietly.

use std::process::{Command, Stdio};

use toolhost_tests::{toolhost_bin, Fixture, TestRoot};

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn root() -> TestRoot {
    let root = TestRoot::new();
    root.tool("core", "response", Fixture::Response);
    root.tool("usr", "echo", Fixture::Echo);
    root
}

#[test]
fn calling_an_unknown_tool_prints_what_the_model_would_get_and_exits_3() {
    let root = root();
    let out = root.run_cli(&["call", "ehco"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.starts_with("Tool ehco not found"), "{stdout}");
    assert!(
        stderr(&out).contains("error: no tool 'ehco' in profile 'default'"),
        "{}",
        stderr(&out)
    );
    // A tool that fails is exit code 1, distinct from "no such tool".
    let out = root.run_cli(&["call", "echo:fail"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
}

#[test]
fn a_profile_that_no_layer_has_is_an_error_listing_the_known_ones() {
    let root = root();
    root.write("usr/agents/dev/toolhost.toml", "");
    for command in [
        &["list", "--profile", "dve"][..],
        &["call", "echo", "--profile", "dve"],
    ] {
        let out = root.run_cli(command);
        assert!(!out.status.success());
        let err = stderr(&out);
        assert!(
            err.contains("unknown profile 'dve'") && err.contains("known profiles: default, dev"),
            "{err}"
        );
    }
    assert!(root.run_cli(&["list", "--profile", "dev"]).status.success());
}

#[test]
fn a_missing_secrets_file_is_an_error_and_a_given_one_is_named_later() {
    let root = root();
    root.secret_extensions();
    let script = root.write("s.txt", "=== user\nhi\n=== model\n{\"tool_name\": \"response\", \"tool_args\": {\"text\": \"x\"}}\n");
    let script = script.to_str().unwrap();
    let out = root.run_cli(&["run", script, "--secrets", "nope.env"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("--secrets nope.env: no such file"),
        "{}",
        stderr(&out)
    );
    // An unknown key's message names the file that was given, not usr/secrets.env.
    let empty = root.write("empty.env", "");
    let out = root.run_cli(&["call", "echo", "--args", r#"{"x": "§§secret(KEY)"}"#]);
    assert!(stderr(&out).contains("usr/secrets.env"), "{}", stderr(&out));
    let given = "=== user\nhi\n=== model\n{\"tool_name\": \"echo\", \"tool_args\": {\"x\": \"§§secret(KEY)\"}}\n=== model\n{\"tool_name\": \"response\", \"tool_args\": {\"text\": \"x\"}}\n";
    let script = root.write("t.txt", given);
    let out = root.run_cli(&[
        "run",
        script.to_str().unwrap(),
        "--secrets",
        empty.to_str().unwrap(),
    ]);
    let all = format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
    assert!(all.contains("empty.env"), "{all}");
}

#[test]
fn an_unknown_script_header_is_an_error_with_its_line() {
    let root = root();
    let script = root.write("s.txt", "=== user\nhi\n=== bogus\nmore\n");
    let out = root.run_cli(&["run", script.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("s.txt:3: unknown block header '=== bogus'"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_tool_without_a_description_is_warned_about_in_list() {
    let root = root();
    root.tool("usr", "noop", Fixture::Noop); // declares no description
    let warnings = |root: &TestRoot| {
        let out = root.run_cli(&["list"]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let lines: Vec<String> = text.lines().map(str::to_owned).collect();
        let warned: Vec<String> = lines
            .windows(2)
            .filter(|w| w[1].contains("warning: no description"))
            .map(|w| w[0].split_whitespace().next().unwrap_or("").to_owned())
            .collect();
        (warned, text)
    };
    let (warned, text) = warnings(&root);
    assert_eq!(warned, ["noop"], "{text}");
    assert!(text.contains("ToolInfo::new"), "{text}");
    // A prompt fragment of its own is a description too.
    root.write(
        "usr/prompts/agent.system.tool.noop.md",
        "### noop\nDoes nothing.\n",
    );
    let (warned, text) = warnings(&root);
    assert!(warned.is_empty(), "{text}");
}

#[test]
fn a_closed_pipe_ends_the_output_quietly() {
    let root = root();
    // Enough tools for several lines: the reader is gone long before the first is written
    // (the child has only just been started), so more tools only add loading time (200 took
    // 30 s of a debug build).
    for i in 0..20 {
        root.tool("usr", &format!("t{i:03}"), Fixture::Echo);
    }
    let mut child = Command::new(toolhost_bin())
        .arg("--root")
        .arg(root.path())
        .arg("list")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take()); // the reader is gone before the first line
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{:?}", out.status);
    assert_eq!(stderr(&out), "", "no panic, no backtrace");
}

#[test]
fn completions_into_a_closed_pipe_end_quietly() {
    // The reader end is closed before the child starts: its first write fails, every time.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = Command::new(toolhost_bin())
        .args(["completions", "zsh"])
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert!(out.status.success(), "{:?}: {}", out.status, stderr(&out));
    assert_eq!(stderr(&out), "", "no panic, no backtrace");
}

#[test]
fn an_argument_mistake_starts_with_one_clear_line() {
    let root = root();
    let out = root.run_cli(&["call"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    let first = err.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("error: toolhost call: missing <NAME>"),
        "{err}"
    );
    let out = root.run_cli(&["list", "--bogus"]);
    let err = stderr(&out);
    let first = err.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("error: toolhost list: unexpected argument '--bogus'"),
        "{err}"
    );
}

#[test]
fn on_a_terminal_the_progress_line_ends_before_the_result() {
    let root = root();
    let args = "call echo:progress";
    let Some(shown) = root.run_on_terminal(args, "", true) else {
        return;
    };
    let result = shown
        .lines()
        .find(|l| l.contains("progressed"))
        .unwrap_or_else(|| panic!("no result line: {shown:?}"));
    assert!(
        !result.contains("almost there"),
        "the result ran into the progress line: {shown:?}"
    );
}

#[test]
fn yes_on_an_exec_tool_says_it_never_covers_exec_and_how_to_allow_it() {
    let root = root();
    root.tool("usr", "shell", Fixture::Exec);
    let out = root.run_cli(&["--yes", "call", "shell"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("policy asks, and --yes never approves an exec tool: allow it with [tools.shell] policy = \"allow\" in ")
            && err.contains("usr/toolhost.toml, or run on a terminal to be asked"),
        "{err}"
    );
    let out = root.run_cli(&["call", "shell"]);
    let err = stderr(&out);
    assert!(
        err.contains("there is no terminal to ask on: run on a terminal to be asked, pass --yes (write tools only), or allow it with [tools.shell] policy = \"allow\""),
        "{err}"
    );
    root.write("usr/toolhost.toml", "[tools.shell]\npolicy = \"allow\"\n");
    let out = root.run_cli(&["call", "shell"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "ran",
        "{}",
        stderr(&out)
    );
}

#[test]
fn call_in_a_folder_that_is_no_root_writes_nothing_there() {
    let elsewhere = TestRoot::new();
    let out = Command::new(toolhost_bin())
        .args(["call", "hello", "--args", "{}"])
        .current_dir(elsewhere.path())
        .env_remove("TOOLHOST_ROOT")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let left: Vec<_> = std::fs::read_dir(elsewhere.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "call created {left:?}");
}

#[test]
fn list_in_a_folder_that_is_no_root_suggests_root_and_toolhost_root() {
    let elsewhere = TestRoot::new();
    let out = Command::new(toolhost_bin())
        .arg("list")
        .current_dir(elsewhere.path())
        .env_remove("TOOLHOST_ROOT")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains(
            "(none: . has no core/, plugins/ or usr/ folder; pass --root, or set TOOLHOST_ROOT, to the folder that has them)"
        ),
        "{said}"
    );
    assert!(!said.contains("xtask"), "{said}");
    // A root whose plugins are not built yet still says to build them.
    let root = TestRoot::new();
    std::fs::create_dir_all(root.path().join("core/tools")).unwrap();
    let said = String::from_utf8_lossy(&root.run_cli(&["list"]).stdout).into_owned();
    assert!(said.contains("run `cargo xtask install`"), "{said}");
}

#[test]
fn usage_mistakes_exit_2_with_one_line() {
    let root = root();
    for (args, says) in [
        (
            &["call", "echo", "--args", "notjson"][..],
            "error: --args is not valid JSON (",
        ),
        (
            &["call", "echo", "--args", "[1]"],
            "error: --args must be a JSON object",
        ),
        (
            &["call", "echo", "--profile", "nope"],
            "error: unknown profile 'nope'",
        ),
        (&["call"], "error: toolhost call: missing <NAME>"),
        (
            &["new", "Bad-Name"],
            "error: invalid plugin name 'Bad-Name'",
        ),
        (
            &["run", "s.txt", "--secrets", "missing.env"],
            "error: --secrets missing.env: no such file",
        ),
    ] {
        let out = root.run_cli(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.lines().next().unwrap_or_default().starts_with(says),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn paths_under_the_default_root_are_shown_without_dot_slash() {
    let root = root();
    root.write("usr/tools/broken.so", "not a library");
    let out = Command::new(toolhost_bin())
        .args(["call", "broken"])
        .current_dir(root.path())
        .env_remove("TOOLHOST_ROOT")
        .output()
        .unwrap();
    let err = stderr(&out);
    assert!(err.contains("skipping usr/tools/broken.so"), "{err}");
    assert!(!err.contains("./usr"), "{err}");
}

#[test]
fn a_config_mistake_says_nothing_of_pinning_unless_the_file_turns_it_on() {
    let root = root();
    root.write("usr/toolhost.toml", "[calls]\ntimeout = 5\n");
    let err = stderr(&root.run_cli(&["call", "echo"]));
    assert!(err.contains("unknown key `timeout` in [calls]"), "{err}");
    assert!(!err.contains("pinning"), "{err}");
    root.write(
        "usr/toolhost.toml",
        "pinning = true\n[calls]\ntimeout = 5\n",
    );
    // The file still says `pinning = true`: pinning stays on (it fails closed), and says so.
    let err = stderr(&root.run_cli(&["call", "echo"]));
    assert!(
        err.contains("pinning stays on (the file still says pinning = true): fix it"),
        "{err}"
    );
}

#[test]
fn a_top_level_key_after_a_table_says_where_it_belongs() {
    let root = root();
    root.write(
        "usr/toolhost.toml",
        "[tools.danger]\npolicy = \"ask\"\nisolate = [\"danger\"]\n",
    );
    let err = stderr(&root.run_cli(&["call", "echo"]));
    assert!(
        err.contains("unknown key `isolate` in [tools.danger]")
            && err.contains(
                "`isolate` is a top-level key: move it above the first [table] of the file"
            ),
        "{err}"
    );
}

#[test]
fn a_temporary_folder_that_cannot_hold_library_copies_is_one_line_naming_it_and_tmpdir() {
    let root = root();
    // A regular file as TMPDIR: no folder can be made under it, whoever runs the test.
    let not_a_folder = root.write("not-a-folder", "");
    let out = Command::new(toolhost_bin())
        .arg("--root")
        .arg(root.path())
        .args(["call", "echo", "--args", "{\"text\": \"hi\"}"])
        .env("TMPDIR", &not_a_folder)
        .output()
        .expect("running toolhost");
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("cannot create the folder for loaded library copies")
            && err.contains(not_a_folder.to_str().unwrap())
            && err.contains("point TMPDIR at a writable folder"),
        "{err}"
    );
    assert_eq!(err.matches("cannot create the folder").count(), 1, "{err}");
}
