//! The audit survives its own writer and its readers: records of any size, a torn last line,
//! an unwritable folder (with `[audit] required` on and off, and `serve-mcp`'s default), a
//! cut tail, a rewrite with recomputed hashes (found with the key), a call that kills its
//! process, and every early way a call can fail. Real plugins, the real `toolhost` binary.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::{json, Value};
use toolhost::audit::{self, Audit, AuditOptions, TailLine, FILE_NAME, HEAD_FILE};
use toolhost::Layout;
use toolhost_tests::{block_on, toolhost_bin, Fixture, TestRoot};

fn root() -> TestRoot {
    let root = TestRoot::new();
    root.tool("usr", "echo", Fixture::Echo);
    root
}

fn log_path(root: &TestRoot) -> std::path::PathBuf {
    Layout::new(root.path()).audit_dir().join(FILE_NAME)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The records of the log (its current segment), as JSON.
fn records(root: &TestRoot) -> Vec<Value> {
    std::fs::read_to_string(log_path(root))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn call(root: &TestRoot, args: &[&str]) -> Output {
    root.run_cli(&[&["call"], args].concat())
}

fn verify(root: &TestRoot) -> Output {
    root.run_cli(&["audit", "verify"])
}

#[test]
fn a_large_argument_is_stored_apart_and_later_calls_verify_clean() {
    let root = root();
    let (agent, _) = root.agent("default");
    let big = "x".repeat(1_200_000);
    block_on(agent.call_tool("echo", json!({"text": big}))).unwrap();
    for i in 0..3 {
        block_on(agent.call_tool("echo", json!({"text": format!("after {i}")}))).unwrap();
    }
    assert!(
        agent.audit_failure().is_none(),
        "{:?}",
        agent.audit_failure()
    );
    let log = std::fs::read_to_string(log_path(&root)).unwrap();
    assert!(
        log.lines().all(|l| l.len() < audit::MAX_LINE_BYTES),
        "a line too long"
    );
    let out = verify(&root);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    // 4 calls, each a start and an end.
    assert!(
        text(&out.stdout).starts_with("audit: 8 records, chain intact\n"),
        "{}",
        text(&out.stdout)
    );
    // The argument is there, whole, in the file the record names.
    let start = &records(&root)[0];
    assert_eq!(start["type"], "start");
    assert_eq!(start["args"], "(stored apart)");
    let sha = start["apart"]["args"]["sha256"].as_str().unwrap();
    let stored = std::fs::read(
        Layout::new(root.path())
            .audit_dir()
            .join(audit::BLOBS_DIR)
            .join(format!("{sha}.json")),
    )
    .unwrap();
    let value: Value = serde_json::from_slice(&stored).unwrap();
    assert_eq!(value["text"].as_str().unwrap().len(), 1_200_000);
}

#[test]
fn a_torn_last_line_is_kept_aside_and_auditing_goes_on() {
    let root = root();
    assert!(call(&root, &["echo"]).status.success());
    let path = log_path(&root);
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    file.write_all(br#"{"seq":3,"time_ms":1,"prev":"ab"#)
        .unwrap();
    drop(file);
    let out = call(&root, &["echo"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("kept in audit.1.jsonl, and a new segment begins at seq 3"),
        "{}",
        text(&out.stderr)
    );
    assert!(call(&root, &["echo"]).status.success());
    let out = verify(&root);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("quarantined: usr/audit/audit.1.jsonl from line 3: 31 bytes"),
        "{stdout}"
    );
    // 2 records before the damage, the segment's first, 2 calls of 2 records.
    assert!(
        stdout.contains("audit: 7 records, chain intact"),
        "{stdout}"
    );
}

#[test]
fn an_unwritable_audit_is_reported_by_call_and_refused_when_required() {
    let root = root();
    // The folder cannot be made (a file is in its place): the same for root as for anyone.
    root.write("usr/audit", "not a folder");
    let out = call(&root, &["echo", "--args", r#"{"text": "hi"}"#]);
    assert_eq!(out.status.code(), Some(4), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("hi"), "the tool ran");
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("error: the call's audit record could not be written: audit log"),
        "{stderr}"
    );
    root.write("usr/toolhost.toml", "[audit]\nrequired = true\n");
    let out = call(&root, &["echo", "--args", r#"{"text": "hi"}"#]);
    assert_eq!(out.status.code(), Some(4), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("tool echo was not run: its audit record cannot be written"),
        "{stderr}"
    );
    assert!(!text(&out.stdout).contains("hi"), "the tool did not run");
}

/// Runs `toolhost serve-mcp` over stdio, calls `tool` with `args` and returns the result.
fn serve_mcp_call(root: &TestRoot, tool: &str, args: Value) -> Value {
    let mut child = Command::new(toolhost_bin())
        .arg("--root")
        .arg(root.path())
        .args(["serve-mcp", "--no-watch"])
        .env("NO_COLOR", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("serve-mcp");
    let mut stdin = child.stdin.take().unwrap();
    let requests = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": tool, "arguments": args}}),
    ];
    for request in requests {
        writeln!(stdin, "{request}").unwrap();
    }
    stdin.flush().unwrap();
    let mut found = None;
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let message: Value = serde_json::from_str(&line.unwrap()).unwrap();
        if message["id"] == 2 {
            found = Some(message);
            break;
        }
    }
    drop(stdin);
    let _ = child.kill();
    let _ = child.wait();
    found.expect("an answer to tools/call")
}

#[test]
fn serve_mcp_refuses_a_call_it_cannot_audit_and_says_why_in_the_result() {
    let root = root();
    root.write("usr/audit", "not a folder");
    let answer = serve_mcp_call(&root, "echo", json!({"text": "hi"}));
    let result = &answer["result"];
    assert_eq!(result["isError"], true, "{answer}");
    let message = result["content"][0]["text"].as_str().unwrap();
    assert!(
        message.contains("was not run: its audit record cannot be written"),
        "{message}"
    );
    let why = result["_meta"][toolhost_mcp_server::AUDIT_ERROR_META]
        .as_str()
        .unwrap();
    assert!(why.starts_with("audit log "), "{why}");
    // Off in the config: the call runs, and the client is told its record is missing.
    root.write("usr/toolhost.toml", "[audit]\nrequired = false\n");
    let answer = serve_mcp_call(&root, "echo", json!({"text": "hi"}));
    let result = &answer["result"];
    assert_ne!(result["isError"], true, "{answer}");
    assert!(result["_meta"][toolhost_mcp_server::AUDIT_ERROR_META].is_string());
}

#[test]
fn records_deleted_from_the_end_or_all_of_them_are_detected() {
    let root = root();
    for _ in 0..3 {
        assert!(call(&root, &["echo"]).status.success());
    }
    let out = verify(&root);
    let stdout = text(&out.stdout);
    let head = stdout
        .lines()
        .find_map(|l| l.strip_prefix("head: "))
        .and_then(|l| l.split_whitespace().next())
        .expect("the head printed")
        .to_owned();
    assert!(head.starts_with("6:"), "{stdout}");
    let path = log_path(&root);
    let log = std::fs::read_to_string(&path).unwrap();
    let kept: Vec<&str> = log.lines().take(4).collect();
    std::fs::write(&path, kept.join("\n") + "\n").unwrap();
    let out = verify(&root);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stdout),
        "usr/audit/audit.jsonl (seq 4): cut: the head (head.json) says the chain ends at seq 6: \
         records 5 to 6 were deleted from the end\n"
    );
    std::fs::write(&path, "").unwrap();
    let out = verify(&root);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stdout).contains("records 1 to 6 were deleted"));
    // The head deleted too: the copy kept elsewhere still finds it.
    std::fs::remove_file(path.with_file_name(HEAD_FILE)).unwrap();
    std::fs::write(&path, kept.join("\n") + "\n").unwrap();
    let out = root.run_cli(&["audit", "verify", "--head", &head]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    assert!(
        text(&out.stdout).contains(
            "cut: your copy of the head says the chain reached seq 6: records 5 to 6 were deleted"
        ),
        "{}",
        text(&out.stdout)
    );
}

const KEY_VAR: &str = "TOOLHOST_TEST_AUDIT_KEY";

fn with_key(root: &TestRoot, args: &[&str]) -> Output {
    Command::new(toolhost_bin())
        .arg("--root")
        .arg(root.path())
        .args(args)
        .env("NO_COLOR", "1")
        .env(KEY_VAR, "a secret of more than sixteen bytes")
        .output()
        .expect("running toolhost")
}

/// Rewrites the log at `path` with record `seq`'s tool renamed and every hash recomputed, as
/// anyone who can write the folder can (without the key): a fresh log, written record by
/// record, put in place with its head.
fn rewrite_without_the_key(path: &Path, seq: u64) {
    let entries = audit::tail(path, 1000).unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let forged = Audit::open(scratch.path(), AuditOptions::default()).unwrap();
    for line in entries {
        let TailLine::Entry(mut entry) = line else {
            panic!("{line:?}")
        };
        if entry.seq == seq {
            if let audit::AuditRecord::Call(call) = &mut entry.record {
                call.outcome = "forged".into();
            }
        }
        forged.append(&entry.record).unwrap();
    }
    std::fs::copy(forged.path(), path).unwrap();
    std::fs::copy(
        scratch.path().join(HEAD_FILE),
        path.with_file_name(HEAD_FILE),
    )
    .unwrap();
}

#[test]
fn a_rewrite_with_recomputed_hashes_is_detected_with_the_key() {
    let root = root();
    root.write(
        "usr/toolhost.toml",
        format!("[audit]\nkey_env = \"{KEY_VAR}\"\n"),
    );
    for _ in 0..3 {
        let out = with_key(&root, &["call", "echo"]);
        assert!(out.status.success(), "{}", text(&out.stderr));
    }
    let out = with_key(&root, &["audit", "verify"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    assert!(
        text(&out.stdout).contains("6 records, chain intact, 6 MACs checked with the key"),
        "{}",
        text(&out.stdout)
    );
    // Without the key, the variable unset: refused, with the reason.
    let out = verify(&root);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains(&format!("{KEY_VAR} ([audit] key_env) is not set")));

    rewrite_without_the_key(&log_path(&root), 4);
    // The chain alone holds (the head was rewritten too): what the key is for.
    let report = audit::verify(&log_path(&root)).unwrap();
    assert_eq!((report.records, report.broken), (6, None));
    let out = with_key(&root, &["audit", "verify"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    assert!(
        text(&out.stdout).contains(": head: the head (head.json) has no MAC"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn a_call_that_kills_its_process_is_started_and_never_finished() {
    let root = root();
    root.tool("usr", "crashy", Fixture::Crashy);
    assert!(call(&root, &["echo"]).status.success());
    let out = call(&root, &["crashy:abort"]);
    assert!(!out.status.success(), "aborted");
    let out = verify(&root);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("started, never finished: seq 3 tool crashy")
            && stdout.contains("no record of its end"),
        "{stdout}"
    );
    // The next host that opens the log says so once, and notes it.
    let out = call(&root, &["echo"]);
    assert!(out.status.success());
    assert!(
        text(&out.stderr).contains("the call of tool crashy")
            && text(&out.stderr).contains("started and never finished: its process"),
        "{}",
        text(&out.stderr)
    );
    let out = call(&root, &["echo"]);
    assert!(!text(&out.stderr).contains("never finished"), "said once");
    let stdout = text(&verify(&root).stdout);
    assert!(
        stdout.contains("started, never finished: seq 3 tool crashy")
            && stdout.contains("its process ended"),
        "{stdout}"
    );
}

#[test]
fn every_call_is_audited_whatever_step_it_fails_at() {
    let root = root();
    root.tool("usr", "governed", Fixture::Governed);
    root.tool("usr", "hidden", Fixture::Noop);
    root.write("usr/toolhost.toml", "[access]\ndeny = [\"hidden\"]\n");
    root.write(
        "usr/mcp.json",
        r#"{"mcpServers": {"gone": {"command": "/nonexistent/mcp-server"}}}"#,
    );
    let (agent, _) = root.agent("default");
    let failures = [
        ("no_such_tool", json!({})),
        ("gone.tool", json!({})),
        ("hidden", json!({})),
        ("governed", json!({"units": "kelvin"})),
        ("echo", json!("not an object")),
    ];
    for (tool, args) in failures {
        let _ = block_on(agent.call_tool(tool, args));
    }
    // A failing `tool_execute_before` extension, installed now (the host sees the new file).
    root.extension(
        "usr",
        "tool_execute_before",
        "_10_boom",
        Fixture::PanickyExt,
    );
    let (later, _) = root.agent("default");
    assert!(block_on(later.call_tool("echo", json!({}))).is_err());
    let calls: Vec<(String, String, String)> = records(&root)
        .into_iter()
        .filter(|r| r["type"] == "call")
        .map(|r| {
            let text = |k: &str| r[k].as_str().unwrap_or("-").to_owned();
            (text("tool"), text("outcome"), text("stage"))
        })
        .collect();
    let expected = [
        ("no_such_tool", "unknown_tool", "resolve"),
        ("gone.tool", "dependency", "resolve"),
        ("hidden", "repairable", "admit"),
        ("governed", "validation", "-"),
        ("echo", "repairable", "resolve"),
        ("echo", "internal", "before"),
    ];
    let expected: Vec<(String, String, String)> = expected
        .iter()
        .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
        .collect();
    assert_eq!(calls, expected);
    assert_eq!(verify(&root).status.code(), Some(0));
}

/// The records' `type`s of the log, in order.
fn types(root: &TestRoot) -> Vec<String> {
    records(root)
        .iter()
        .map(|r| r["type"].as_str().unwrap_or("").to_owned())
        .collect()
}

/// `audit verify` fails, listing `expected` among its `cut:` lines, and never says the chain
/// is intact.
fn cut_reported(root: &TestRoot, expected: &str) -> String {
    let out = verify(root);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(!stdout.contains("chain intact"), "{stdout}");
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("cut: usr/audit/audit.jsonl seq ") && l.contains(expected)),
        "{expected:?} in {stdout}"
    );
    stdout
}

#[test]
fn a_cut_an_emptied_log_or_an_older_copy_is_recorded_and_reported_on_every_later_run() {
    let root = root();
    let path = log_path(&root);
    for _ in 0..2 {
        assert!(call(&root, &["echo"]).status.success());
    }
    let older = std::fs::read(&path).unwrap();
    assert!(call(&root, &["echo"]).status.success());

    // The last 3 records deleted, then one call: its writer records the cut first.
    let log = std::fs::read_to_string(&path).unwrap();
    let kept: Vec<&str> = log.lines().take(3).collect();
    std::fs::write(&path, kept.join("\n") + "\n").unwrap();
    let out = call(&root, &["echo", "--args", r#"{"text": "after the cut"}"#]);
    assert!(text(&out.stdout).contains("after the cut"), "the tool ran");
    assert!(
        text(&out.stderr).contains("records 4 to 6 are missing"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(types(&root)[3], "cut");
    cut_reported(&root, "records 4 to 6 are missing");
    // Reported on every later run, however many calls follow.
    for _ in 0..2 {
        assert!(call(&root, &["echo"]).status.success());
        cut_reported(&root, "records 4 to 6 are missing");
    }

    // The log emptied: the next writer finds it against the head.
    std::fs::write(&path, "").unwrap();
    assert!(call(&root, &["echo"]).status.code() == Some(4));
    assert_eq!(types(&root), ["cut", "start", "call"]);
    assert!(call(&root, &["echo"]).status.success());
    cut_reported(&root, "the log was emptied");

    // Replaced by an older copy.
    std::fs::write(&path, &older).unwrap();
    call(&root, &["echo"]);
    cut_reported(&root, "missing: the log ends at seq 4");

    // With `[audit] required = true`, the call that finds a cut is refused.
    root.write("usr/toolhost.toml", "[audit]\nrequired = true\n");
    let log = std::fs::read_to_string(&path).unwrap();
    let kept: Vec<&str> = log.lines().take(2).collect();
    std::fs::write(&path, kept.join("\n") + "\n").unwrap();
    let out = call(&root, &["echo", "--args", r#"{"text": "refused"}"#]);
    assert_eq!(out.status.code(), Some(4), "{}", text(&out.stderr));
    assert!(
        !text(&out.stdout).contains("refused"),
        "the tool did not run"
    );
    assert!(
        text(&out.stderr).contains("tool echo was not run: its audit record cannot be written"),
        "{}",
        text(&out.stderr)
    );
    cut_reported(&root, "are missing");
    // The next call, with nothing more cut, runs.
    assert!(call(&root, &["echo"]).status.success());
}

/// Sends `n` `tools/call` requests of `echo` at once to a `serve-mcp` over stdio, and waits
/// for every answer.
fn serve_mcp_calls(root: &TestRoot, n: u64) -> std::thread::JoinHandle<()> {
    let mut child = Command::new(toolhost_bin())
        .arg("--root")
        .arg(root.path())
        .args(["serve-mcp", "--no-watch"])
        .env("NO_COLOR", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("serve-mcp");
    std::thread::spawn(move || {
        let mut stdin = child.stdin.take().unwrap();
        let mut requests = vec![
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "test", "version": "1"}}}),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        ];
        for id in 1..=n {
            requests.push(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": format!("call {id}")}}}));
        }
        let mut batch = String::new();
        for request in requests {
            batch.push_str(&format!("{request}\n"));
        }
        stdin.write_all(batch.as_bytes()).unwrap();
        stdin.flush().unwrap();
        let mut answered = 0;
        for line in BufReader::new(child.stdout.take().unwrap()).lines() {
            let message: Value = serde_json::from_str(&line.unwrap()).unwrap();
            if message["id"].as_u64().is_some_and(|id| id > 0) {
                answered += 1;
                if answered == n {
                    break;
                }
            }
        }
        drop(stdin);
        let _ = child.kill();
        let _ = child.wait();
    })
}

#[test]
fn execution_ids_are_unique_across_processes_and_threads_every_start_has_one_call() {
    const PROCESSES: u64 = 4;
    const CALLS: u64 = 40;
    let root = root();
    let servers: Vec<_> = (0..PROCESSES)
        .map(|_| serve_mcp_calls(&root, CALLS))
        .collect();
    for server in servers {
        server.join().expect("a server's calls");
    }
    let mut starts = std::collections::BTreeMap::<String, usize>::new();
    let mut calls = std::collections::BTreeMap::<String, usize>::new();
    for record in records(&root) {
        let id = record["execution_id"].as_str().unwrap_or("").to_owned();
        match record["type"].as_str() {
            Some("start") => *starts.entry(id).or_default() += 1,
            Some("call") => *calls.entry(id).or_default() += 1,
            _ => {}
        }
    }
    assert_eq!(starts.len() as u64, PROCESSES * CALLS, "distinct start ids");
    assert!(starts.values().all(|&n| n == 1), "a start id repeated");
    assert_eq!(starts, calls, "every start has exactly one call");
}
