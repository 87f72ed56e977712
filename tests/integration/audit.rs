//! The audit log through the `toolhost audit` commands, and two host processes appending to
//! one log at once.

use std::path::PathBuf;
use std::process::Command;

use toolhost::audit::{self, Audit, AuditOptions, AuditRecord, TailLine, FILE_NAME};
use toolhost::Layout;
use toolhost_tests::audit::call_record;
use toolhost_tests::{Fixture, TestRoot};

/// A root whose audit log holds `n` records written by the library.
fn root_with_log(n: u64) -> (TestRoot, PathBuf) {
    let root = TestRoot::new();
    let audit = Audit::open(
        &Layout::new(root.path()).audit_dir(),
        AuditOptions::default(),
    )
    .expect("open the log");
    for i in 1..=n {
        audit.append(&call_record("test", i)).expect("append");
    }
    let path = audit.path().to_owned();
    (root, path)
}

fn edit_lines(path: &std::path::Path, edit: impl FnOnce(&mut Vec<String>)) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    edit(&mut lines);
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn audit_verify_reports_an_intact_chain() {
    let (root, _) = root_with_log(25);
    let out = root.run_cli(&["audit", "verify"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let text = stdout(&out);
    let (first, head) = text.split_once('\n').unwrap();
    assert_eq!(first, "audit: 25 records, chain intact");
    let report = audit::verify(&root.path().join("usr/audit").join(FILE_NAME)).unwrap();
    let (seq, hash) = report.last.unwrap();
    assert!(
        head.starts_with(&format!("head: {seq}:{hash} (keep a copy")),
        "{head}"
    );
}

#[test]
fn audit_verify_names_an_edited_line() {
    let (root, path) = root_with_log(10);
    edit_lines(&path, |lines| {
        lines[6] = lines[6].replace("some sixty bytes", "some sixty bytez");
    });
    let out = root.run_cli(&["audit", "verify"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert_eq!(
        stdout(&out),
        "usr/audit/audit.jsonl:7 (seq 7): edited: its hash does not match its content\n"
    );
}

#[test]
fn audit_verify_names_a_deleted_line() {
    let (root, path) = root_with_log(10);
    edit_lines(&path, |lines| {
        lines.remove(3);
    });
    let out = root.run_cli(&["audit", "verify"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert_eq!(
        stdout(&out),
        "usr/audit/audit.jsonl:4 (seq 5): missing: record 4 was deleted or moved\n"
    );
}

#[test]
fn audit_verify_without_a_log_is_an_error_naming_it() {
    let root = TestRoot::new();
    let out = root.run_cli(&["audit", "verify"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("usr/audit/audit.jsonl: cannot open it"),
        "{stderr}"
    );
}

#[test]
fn audit_tail_prints_one_line_per_record() {
    let (root, _) = root_with_log(30);
    let out = root.run_cli(&["audit", "tail", "-n", "3"]);
    assert!(out.status.success(), "{out:?}");
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    for (line, seq) in lines.iter().zip(28..) {
        assert!(line.contains(&format!("#{seq} ")), "{line}");
        for part in [
            " call ",
            "echo:sleep",
            "success",
            "2.5 ms",
            "allowed (policy: read allowed)",
        ] {
            assert!(line.contains(part), "{part} in {line}");
        }
    }
    let default = root.run_cli(&["audit", "tail"]);
    assert_eq!(stdout(&default).lines().count(), 20);
}

/// Two processes append 2,000 records each to one log at the same time: the chain holds all
/// 4,000, whole and in order, with each writer's records in its own order.
#[test]
fn two_processes_appending_at_once_keep_the_chain_whole() {
    const EACH: u64 = 2_000;
    let root = TestRoot::new();
    let dir = Layout::new(root.path()).audit_dir();
    // The start signal goes in the folder: make it before either writer does.
    std::fs::create_dir_all(&dir).expect("mkdir");
    let writer = |name: &str| {
        Command::new(env!("CARGO_BIN_EXE_audit_writer"))
            .arg(&dir)
            .arg(EACH.to_string())
            .arg(name)
            .spawn()
            .expect("start audit_writer")
    };
    let (mut a, mut b) = (writer("a"), writer("b"));
    std::fs::write(dir.join("go"), b"").expect("start both");
    let (a, b) = (a.wait().expect("writer a"), b.wait().expect("writer b"));
    assert!(a.success() && b.success(), "writers ended with {a} and {b}");

    let path = dir.join(FILE_NAME);
    let report = audit::verify(&path).expect("verify");
    assert_eq!(report.broken, None);
    assert_eq!(report.records, 2 * EACH);
    let out = root.run_cli(&["audit", "verify"]);
    assert!(stdout(&out).starts_with("audit: 4000 records, chain intact\nhead: 4000:"));

    let mut next = [1, 1];
    let mut switches = 0;
    let mut previous = None;
    for line in audit::tail(&path, 2 * EACH as usize).expect("tail") {
        let TailLine::Entry(entry) = line else {
            panic!("unreadable line: {line:?}")
        };
        let AuditRecord::Call(call) = entry.record else {
            panic!("not a call: {:?}", entry.record)
        };
        let (name, i) = call.execution_id.split_once('-').expect("<writer>-<i>");
        let writer = usize::from(name == "b");
        assert_eq!(
            i.parse::<u64>().unwrap(),
            next[writer],
            "{}",
            call.execution_id
        );
        next[writer] += 1;
        switches += usize::from(previous.is_some_and(|p| p != writer));
        previous = Some(writer);
    }
    assert_eq!(next, [EACH + 1, EACH + 1]);
    // The two really ran at once: their records alternate, not one block after the other.
    assert!(switches > 1, "only {switches} switch between the writers");
    eprintln!("{switches} switches between the two writers");
}

/// The `type`, `decision` and `execution_id` of each record in the root's audit log.
fn records_of(root: &TestRoot) -> Vec<(String, String, String)> {
    let text = std::fs::read_to_string(root.path().join("usr/audit").join(FILE_NAME)).unwrap();
    text.lines()
        .map(|line| {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            let field = |k: &str| v[k].as_str().unwrap_or_default().to_owned();
            let decision = match v["decision"].as_str() {
                Some(d) => d.to_owned(),
                None => v["approval"]["decision"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            };
            (field("type"), decision, field("execution_id"))
        })
        .collect()
}

#[test]
fn a_denied_approval_has_its_own_record_before_the_calls() {
    let root = TestRoot::new();
    root.tool("usr", "shell", Fixture::Exec);
    // `exec` asks; with no terminal to ask on, the call is denied.
    let out = root.run_cli(&["call", "shell"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let records = records_of(&root);
    let kinds: Vec<&str> = records.iter().map(|(t, _, _)| t.as_str()).collect();
    assert_eq!(kinds, ["approval", "call"], "{records:?}");
    assert_eq!(records[0].1, "denied", "{records:?}");
    assert_eq!(records[1].1, "denied", "{records:?}");
    assert_eq!(records[0].2, records[1].2, "one execution id: {records:?}");
    // An allowed call by the policy needs no approval record.
    root.write("usr/toolhost.toml", "[tools.shell]\npolicy = \"allow\"\n");
    let out = root.run_cli(&["call", "shell"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let kinds: Vec<String> = records_of(&root).into_iter().map(|(t, _, _)| t).collect();
    assert_eq!(kinds, ["approval", "call", "start", "call"]);
}
