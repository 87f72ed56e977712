use std::path::{Path, PathBuf};

use serde_json::json;

use super::*;

fn call(i: u64) -> AuditRecord {
    AuditRecord::Call(CallRecord {
        execution_id: format!("exec-{i}"),
        agent: "A0".into(),
        profile: "default".into(),
        tool: "echo".into(),
        method: i.is_multiple_of(2).then(|| "sleep".into()),
        layer: "usr".into(),
        file: "usr/tools/echo.so".into(),
        library_sha256: Some("ab".repeat(32)),
        args: json!({"text": format!("hello {i}"), "token": "§§secret(API_KEY)"}),
        approval: Some(ApprovalDecision {
            decision: Decision::Allowed,
            source: "policy: read allowed".into(),
        }),
        attempts: vec![Attempt {
            attempt: 1,
            error_kind: None,
            started_ms: 1_700_000_000_000 + i,
            duration_ms: 1.25,
        }],
        started_ms: 1_700_000_000_000 + i,
        ended_ms: 1_700_000_000_002 + i,
        duration_ms: 1.5,
        outcome: "success".into(),
        metadata: Some(json!({"bytes": 12})),
        stage: None,
        sandbox: None,
        refused: Vec::new(),
    })
}

fn approval(i: u64) -> AuditRecord {
    AuditRecord::Approval(ApprovalRecord {
        execution_id: format!("exec-{i}"),
        agent: "A0".into(),
        profile: "default".into(),
        tool: "shell".into(),
        method: None,
        args: json!({"command": "ls"}),
        decision: Decision::Denied,
        source: "user: denied".into(),
        time_ms: 1_700_000_000_000,
    })
}

fn breaker() -> AuditRecord {
    AuditRecord::Breaker(BreakerRecord {
        tool: "web".into(),
        profile: "default".into(),
        from: BreakerState::Closed,
        to: BreakerState::HalfOpen,
        reason: "cool-down over".into(),
        time_ms: 1_700_000_000_000,
    })
}

/// A log of `n` records (calls, with an approval and a breaker change among them).
fn log(n: u64) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let audit = Audit::open(dir.path(), AuditOptions::default()).unwrap();
    for i in 1..=n {
        let record = match i % 5 {
            3 => approval(i),
            4 => breaker(),
            _ => call(i),
        };
        audit.append(&record).unwrap();
    }
    let path = audit.path().to_owned();
    (dir, path)
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn write_lines(path: &Path, lines: &[String]) {
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

fn broken(path: &Path) -> Broken {
    let report = verify(path).unwrap();
    assert!(!report.is_intact());
    report.broken.unwrap()
}

#[test]
fn good_chain_verifies() {
    let (_dir, path) = log(10);
    let report = verify(&path).unwrap();
    assert_eq!(report.broken, None);
    assert_eq!(report.records, 10);
    let lines = lines(&path);
    let last: serde_json::Value = serde_json::from_str(&lines[9]).unwrap();
    assert_eq!(
        report.last,
        Some((10, last["hash"].as_str().unwrap().to_owned()))
    );
    assert!(
        lines[0].starts_with("{\"seq\":1,\"time_ms\":"),
        "{}",
        lines[0]
    );
    let header = format!(",\"prev\":\"{GENESIS_PREV}\",\"hash\":\"");
    assert!(lines[0].contains(&header), "{}", lines[0]);
    assert!(lines[0].contains("\",\"type\":\"call\",\"execution_id\":\"exec-1\""));
    assert!(lines[2].contains("\"type\":\"approval\""));
    assert!(lines[2].contains("\"at_ms\":1700000000000"));
}

#[test]
fn an_empty_log_is_intact() {
    let dir = tempfile::tempdir().unwrap();
    let audit = Audit::open(dir.path(), AuditOptions::default()).unwrap();
    let report = verify(audit.path()).unwrap();
    assert_eq!(
        (report.records, report.last, report.broken),
        (0, None, None)
    );
}

#[test]
fn an_edited_line_is_found() {
    let (_dir, path) = log(10);
    let mut lines = lines(&path);
    lines[6] = lines[6].replace("hello 7", "hello 8");
    write_lines(&path, &lines);
    let broken = broken(&path);
    assert_eq!(
        (broken.line, broken.seq, broken.kind),
        (7, Some(7), BrokenKind::Edited)
    );
    assert_eq!(
        broken.to_string(),
        "audit.jsonl:7 (seq 7): edited: its hash does not match its content"
    );
    assert_eq!(verify(&path).unwrap().records, 6);
}

#[test]
fn an_edited_hash_is_found() {
    let (_dir, path) = log(5);
    let mut lines = lines(&path);
    let at = lines[1].find("\"hash\":\"").unwrap() + 8;
    let digit = if &lines[1][at..=at] == "0" { "1" } else { "0" };
    lines[1].replace_range(at..=at, digit);
    write_lines(&path, &lines);
    let broken = broken(&path);
    assert_eq!((broken.line, broken.kind), (2, BrokenKind::Edited));
}

#[test]
fn a_rehashed_edit_breaks_the_next_link() {
    let (_dir, path) = log(6);
    let mut lines = lines(&path);
    // Edit line 4 and give it the right hash for its new content.
    let edited = lines[3].replace("cool-down over", "nothing happened");
    let header = chain::header(edited.as_bytes()).unwrap();
    let without = edited.replace(&format!("\"hash\":\"{}\",", header.hash), "");
    let mut out = Vec::new();
    let start = chain::Link {
        seq: 3,
        hash: header.prev.as_bytes().try_into().unwrap(),
    };
    let body = format!("{{{}", &without[without.find("\"type\"").unwrap()..]);
    chain::encode(&start, header.time_ms, body.as_bytes(), None, &mut out);
    lines[3] = String::from_utf8(out).unwrap().trim_end().to_owned();
    write_lines(&path, &lines);
    let broken = broken(&path);
    assert_eq!(
        (broken.line, broken.seq, broken.kind),
        (5, Some(5), BrokenKind::Edited)
    );
    assert!(broken.reason.contains("line 4's hash"), "{broken}");
}

#[test]
fn a_deleted_line_is_found() {
    let (_dir, path) = log(10);
    let mut lines = lines(&path);
    lines.remove(3);
    write_lines(&path, &lines);
    let broken = broken(&path);
    assert_eq!(
        (broken.line, broken.seq, broken.kind),
        (4, Some(5), BrokenKind::Missing)
    );
    assert_eq!(broken.reason, "record 4 was deleted or moved");
}

#[test]
fn a_deleted_first_line_is_found() {
    let (_dir, path) = log(3);
    let mut lines = lines(&path);
    lines.remove(0);
    write_lines(&path, &lines);
    let broken = broken(&path);
    assert_eq!(
        (broken.line, broken.seq, broken.kind),
        (1, Some(2), BrokenKind::Missing)
    );
}

#[test]
fn swapped_lines_are_found() {
    let (_dir, path) = log(10);
    let mut lines = lines(&path);
    lines.swap(2, 3);
    write_lines(&path, &lines);
    let broken = broken(&path);
    assert_eq!((broken.line, broken.seq), (3, Some(4)));
}

#[test]
fn a_repeated_line_is_found() {
    let (_dir, path) = log(5);
    let mut lines = lines(&path);
    lines.insert(3, lines[2].clone());
    write_lines(&path, &lines);
    let broken = broken(&path);
    assert_eq!(
        (broken.line, broken.seq, broken.kind),
        (4, Some(3), BrokenKind::OutOfOrder)
    );
}

#[test]
fn a_truncated_last_line_is_found() {
    let (_dir, path) = log(10);
    let text = std::fs::read_to_string(&path).unwrap();
    let last_start = text.trim_end().rfind('\n').unwrap() + 1;
    let cut = last_start + (text.len() - last_start) / 2;
    std::fs::write(&path, &text[..cut]).unwrap();
    let broken = broken(&path);
    assert_eq!((broken.line, broken.kind), (10, BrokenKind::Truncated));
    assert_eq!(verify(&path).unwrap().records, 9);
}

#[test]
fn a_cut_from_the_middle_is_found() {
    let (_dir, path) = log(10);
    let text = std::fs::read_to_string(&path).unwrap();
    let starts: Vec<usize> = text.match_indices('\n').map(|(i, _)| i + 1).collect();
    // From the middle of line 5 to the middle of line 7.
    let (from, to) = (starts[3] + 40, starts[5] + 90);
    std::fs::write(&path, format!("{}{}", &text[..from], &text[to..])).unwrap();
    let broken = broken(&path);
    assert_eq!(broken.line, 5, "{broken}");
}

#[test]
fn any_content_is_reported_without_panicking() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(FILE_NAME);
    let huge = vec![b'x'; MAX_LINE_BYTES + 10];
    let mut rng = 0x9e37_79b9_7f4a_7c15_u64;
    let noise: Vec<u8> = (0..4096)
        .map(|_| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng as u8
        })
        .collect();
    let cases: [(&[u8], BrokenKind); 6] = [
        (b"\n", BrokenKind::BadJson),
        (b"{}\n", BrokenKind::BadJson),
        (b"\xff\xfe{\"seq\":1}\n", BrokenKind::BadJson),
        (
            b"{\"seq\":1,\"time_ms\":1,\"prev\":\"x\",\"hash\":\"y\"}\n",
            BrokenKind::BadJson,
        ),
        (&huge, BrokenKind::TooLong),
        (&noise, BrokenKind::BadJson),
    ];
    for (bytes, kind) in cases {
        std::fs::write(&path, bytes).unwrap();
        let broken = broken(&path);
        assert_eq!((broken.line, broken.kind), (1, kind), "{broken}");
        // tail reads any content too.
        assert!(!tail(&path, 3).unwrap().is_empty());
    }
}

#[test]
fn the_writer_continues_the_chain_after_reopening_and_other_writers() {
    let (dir, path) = log(3);
    let first = Audit::open(
        dir.path(),
        AuditOptions {
            fsync: true,
            key: None,
        },
    )
    .unwrap();
    let second = Audit::open(dir.path(), AuditOptions::default()).unwrap();
    for i in 0..10 {
        let audit = if i % 3 == 0 { &first } else { &second };
        audit.append(&call(i)).unwrap();
    }
    let report = verify(&path).unwrap();
    assert_eq!((report.records, report.broken), (13, None));
}

/// One `Audit` shared by threads that append at once (a `serve-mcp` serving concurrent
/// calls): each record is written once, none is lost (one record used to replace another's
/// before it was written).
#[test]
fn records_appended_by_threads_at_once_are_each_written_once() {
    let (dir, path) = log(0);
    let audit = std::sync::Arc::new(Audit::open(dir.path(), AuditOptions::default()).unwrap());
    let threads: Vec<_> = (0..8u64)
        .map(|t| {
            let audit = audit.clone();
            std::thread::spawn(move || {
                for i in 0..200 {
                    audit.append(&call(t * 1000 + i)).unwrap();
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    let mut ids: Vec<String> = lines(&path)
        .iter()
        .map(|line| {
            let record: serde_json::Value = serde_json::from_str(line).unwrap();
            record["execution_id"].as_str().unwrap().to_owned()
        })
        .collect();
    ids.sort();
    let len = ids.len();
    ids.dedup();
    assert_eq!(
        (len, ids.len()),
        (1600, 1600),
        "records lost or written twice"
    );
    assert_eq!(verify(&path).unwrap().broken, None);
}

#[test]
fn a_damaged_last_line_begins_a_new_segment_and_the_damage_is_kept() {
    let (dir, path) = log(3);
    let text = std::fs::read_to_string(&path).unwrap();
    let torn = &text[..text.len() - 20];
    std::fs::write(&path, torn).unwrap();
    // Opening finds it: the file is kept as audit.1.jsonl, and a new segment begins.
    let audit = Audit::open(dir.path(), AuditOptions::default()).unwrap();
    audit.append(&breaker()).unwrap();
    let sealed = dir.path().join("audit.1.jsonl");
    assert_eq!(std::fs::read_to_string(&sealed).unwrap(), torn);
    let report = verify(&path).unwrap();
    assert_eq!(report.broken, None, "{report:?}");
    // Two good records before the torn third, the segment record, the breaker.
    assert_eq!(report.records, 4);
    assert_eq!(report.quarantined.len(), 1, "{report:?}");
    assert_eq!(report.quarantined[0].file, "audit.1.jsonl");
    assert_eq!(report.quarantined[0].line, 3);
    assert!(report.quarantined[0].reason.contains("no newline"));
    // A writer opened before the damage finds it at its next append, and so on.
    std::fs::write(
        &path,
        [std::fs::read(&path).unwrap(), b"not a record\n".to_vec()].concat(),
    )
    .unwrap();
    audit.append(&breaker()).unwrap();
    let report = verify(&path).unwrap();
    assert_eq!((report.broken, report.quarantined.len()), (None, 2));
    assert!(dir.path().join("audit.2.jsonl").is_file());
    // An over-long last line: the same.
    let huge = vec![b'x'; MAX_LINE_BYTES + 10];
    std::fs::write(&path, [std::fs::read(&path).unwrap(), huge].concat()).unwrap();
    audit.append(&breaker()).unwrap();
    let report = verify(&path).unwrap();
    assert_eq!((report.broken, report.quarantined.len()), (None, 3));
    assert!(report.quarantined[2].reason.contains("longer than"));
}

#[test]
fn a_record_larger_than_a_line_stores_its_largest_fields_apart() {
    let (dir, path) = log(2);
    let audit = Audit::open(dir.path(), AuditOptions::default()).unwrap();
    let AuditRecord::Call(mut big) = call(3) else {
        unreachable!()
    };
    big.args = json!({"text": "y".repeat(1_200_000)});
    audit.append(&AuditRecord::Call(big)).unwrap();
    audit.append(&call(4)).unwrap();
    let lines = lines(&path);
    assert!(lines.iter().all(|l| l.len() <= MAX_INLINE_BYTES + 1024));
    assert!(
        lines[2].contains("\"args\":\"(stored apart)\""),
        "{}",
        lines[2]
    );
    let report = verify(&path).unwrap();
    assert_eq!((report.records, report.broken), (4, None));
    // The value is in a file named by its hash; changing it is found.
    let blobs: Vec<_> = std::fs::read_dir(dir.path().join(BLOBS_DIR))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(blobs.len(), 1, "{blobs:?}");
    let stored = std::fs::read_to_string(&blobs[0]).unwrap();
    assert!(stored.starts_with("{\"text\":\"yyy"));
    std::fs::write(&blobs[0], stored.replace("yyy", "yyz")).unwrap();
    let broken = broken(&path);
    assert_eq!(
        (broken.line, broken.kind),
        (3, BrokenKind::StoredApart),
        "{broken}"
    );
    std::fs::remove_file(&blobs[0]).unwrap();
    assert!(broken_reason(&path).contains("does not exist"));
}

fn broken_reason(path: &Path) -> String {
    broken(path).to_string()
}

#[test]
fn records_cut_from_the_end_are_found_through_the_head() {
    let (dir, path) = log(10);
    let mut all = lines(&path);
    all.truncate(7);
    write_lines(&path, &all);
    let broken = broken(&path);
    assert_eq!(broken.kind, BrokenKind::Cut, "{broken}");
    assert!(
        broken.reason.contains("records 8 to 10 were deleted"),
        "{broken}"
    );
    std::fs::write(&path, b"").unwrap();
    assert_eq!(
        super::verify(&path).unwrap().broken.unwrap().kind,
        BrokenKind::Cut
    );
    // Without the head (deleted too), a kept copy of it finds the cut.
    std::fs::remove_file(dir.path().join(HEAD_FILE)).unwrap();
    write_lines(&path, &all);
    let (seq, hash) = {
        let (_d, p) = log(10);
        verify(&p).unwrap().last.unwrap()
    };
    let options = VerifyOptions {
        key: None,
        head: Some((seq, hash)),
    };
    let broken = verify_with(&path, &options).unwrap().broken.unwrap();
    assert_eq!(broken.kind, BrokenKind::Cut, "{broken}");
    assert!(broken.reason.contains("your copy of the head"), "{broken}");
}

/// Rewrites every line from `from` (0-based) on with `edit` applied and the hashes
/// recomputed: what a forger without the key can do.
fn rewrite(path: &Path, from: usize, edit: impl Fn(&str) -> String) {
    let old = lines(path);
    let mut out = Vec::new();
    let mut link = chain::Link::GENESIS;
    for (i, line) in old.iter().enumerate() {
        let header = chain::header(line.as_bytes()).unwrap();
        if i < from {
            link = header.link().unwrap();
            out.push(line.clone());
            continue;
        }
        let line = edit(line);
        let body = format!("{{{}", &line[line.find("\"type\"").unwrap()..]);
        let mut encoded = Vec::new();
        link = chain::encode(&link, header.time_ms, body.as_bytes(), None, &mut encoded);
        out.push(String::from_utf8(encoded).unwrap().trim_end().to_owned());
    }
    write_lines(path, &out);
    let dir = path.parent().unwrap();
    head::write_head(dir, &link, None, false).unwrap();
}

#[test]
fn a_rewrite_with_recomputed_hashes_is_found_with_the_key() {
    let key = AuditKey::new(b"0123456789abcdef-the-audit-key").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let options = AuditOptions {
        fsync: false,
        key: Some(key.clone()),
    };
    let audit = Audit::open(dir.path(), options).unwrap();
    for i in 1..=6 {
        audit.append(&call(i)).unwrap();
    }
    let path = audit.path().to_owned();
    let with_key = VerifyOptions {
        key: Some(key),
        head: None,
    };
    let report = verify_with(&path, &with_key).unwrap();
    assert_eq!(
        (report.broken, report.signed, report.key_checked),
        (None, 6, true)
    );
    // Edit record 4, recompute every hash after it (keeping the MACs of 1 to 3): the chain
    // alone cannot tell.
    rewrite(&path, 3, |l| l.replace("hello 4", "hello 5"));
    assert_eq!(verify(&path).unwrap().broken, None);
    let broken = verify_with(&path, &with_key).unwrap().broken.unwrap();
    assert_eq!(
        (broken.seq, broken.kind),
        (Some(4), BrokenKind::Unsigned),
        "{broken}"
    );
    // A wrong key, or a forged MAC, is found at the first record.
    let wrong = VerifyOptions {
        key: AuditKey::new(b"another key, also long enough"),
        head: None,
    };
    let broken = verify_with(&path, &wrong).unwrap().broken.unwrap();
    assert_eq!(
        (broken.seq, broken.kind),
        (Some(1), BrokenKind::BadMac),
        "{broken}"
    );
    // All MACs removed: the head has none, and the key finds that.
    rewrite(&path, 0, |l| l.to_owned());
    let broken = verify_with(&path, &with_key).unwrap().broken.unwrap();
    assert_eq!(broken.kind, BrokenKind::Head, "{broken}");
}

#[test]
fn a_start_with_no_end_is_unfinished_and_the_next_writer_says_so_once() {
    let (dir, path) = log(2);
    let audit = Audit::open(dir.path(), AuditOptions::default()).unwrap();
    let start = |pid: u32, id: &str| {
        AuditRecord::Start(StartRecord {
            execution_id: id.into(),
            pid,
            agent: "A0".into(),
            profile: "default".into(),
            tool: "crashy".into(),
            method: Some("abort".into()),
            args: json!({}),
            started_ms: 1,
        })
    };
    // A process that no longer exists, and this one (still running).
    audit.append(&start(999_999_999, "dead-1")).unwrap();
    audit.append(&start(std::process::id(), "alive-1")).unwrap();
    drop(audit);
    let report = verify(&path).unwrap();
    let ids: Vec<(&str, bool)> = report
        .unfinished
        .iter()
        .map(|u| (u.execution_id.as_str(), u.noted))
        .collect();
    assert_eq!(ids, [("dead-1", false), ("alive-1", false)]);
    let _next = Audit::open(dir.path(), AuditOptions::default()).unwrap();
    let _again = Audit::open(dir.path(), AuditOptions::default()).unwrap();
    let report = verify(&path).unwrap();
    let ids: Vec<(&str, bool)> = report
        .unfinished
        .iter()
        .map(|u| (u.execution_id.as_str(), u.noted))
        .collect();
    assert_eq!(ids, [("dead-1", true), ("alive-1", false)]);
    let noted = lines(&path)
        .iter()
        .filter(|l| l.contains("\"type\":\"unfinished\""))
        .count();
    assert_eq!(noted, 1, "said once");
}

#[cfg(unix)]
#[test]
fn a_fifo_in_the_logs_place_is_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(FILE_NAME);
    let c_path = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: a valid C string; mkfifo only creates a file.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
    let error = verify(&path).unwrap_err();
    assert!(error.to_string().contains("FIFO"), "{error}");
    let error = tail(&path, 3).unwrap_err();
    assert!(error.to_string().contains("FIFO"), "{error}");
    let error = Audit::open(dir.path(), AuditOptions::default()).unwrap_err();
    assert!(error.to_string().contains("FIFO"), "{error}");
}

#[test]
fn tail_returns_the_last_records_in_order() {
    let (_dir, path) = log(12);
    let entries = tail(&path, 4).unwrap();
    let seqs: Vec<u64> = entries
        .iter()
        .map(|line| match line {
            TailLine::Entry(entry) => entry.seq,
            TailLine::Unreadable(why) => panic!("{why}"),
        })
        .collect();
    assert_eq!(seqs, [9, 10, 11, 12]);
    let TailLine::Entry(entry) = &entries[0] else {
        unreachable!()
    };
    assert_eq!(entry.record, breaker());
    let TailLine::Entry(entry) = &entries[3] else {
        unreachable!()
    };
    assert_eq!(entry.record, call(12));
    assert_eq!(tail(&path, 100).unwrap().len(), 12);
    assert!(tail(&path, 0).unwrap().is_empty());
}

#[test]
fn tail_reports_unreadable_lines() {
    let (_dir, path) = log(2);
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str("garbage\n{\"seq\":3");
    std::fs::write(&path, text).unwrap();
    let entries = tail(&path, 3).unwrap();
    assert!(matches!(&entries[0], TailLine::Entry(e) if e.seq == 2));
    assert!(matches!(&entries[1], TailLine::Unreadable(why) if why.starts_with("not a record")));
    assert!(matches!(&entries[2], TailLine::Unreadable(why) if why.contains("cut off")));
}

#[test]
fn last_lines_reads_long_files_backwards() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lines");
    let text: String = (0..50_000).map(|i| format!("line {i}\n")).collect();
    std::fs::write(&path, &text).unwrap();
    let file = std::fs::File::open(&path).unwrap();
    let got = lines::last_lines(&file, text.len() as u64, 3).unwrap();
    let want: Vec<lines::RawLine> = (49_997..50_000)
        .map(|i| lines::RawLine::Complete(format!("line {i}").into_bytes()))
        .collect();
    assert_eq!(got, want);
}

#[test]
fn last_lines_reports_lines_too_long_to_read_back() {
    use lines::RawLine::{Complete, Incomplete, TooLong};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lines");
    let mut text = vec![b'x'; 3 * MAX_LINE_BYTES];
    text.extend_from_slice(b"\nshort\n\nend");
    std::fs::write(&path, &text).unwrap();
    let file = std::fs::File::open(&path).unwrap();
    let len = text.len() as u64;
    let got = lines::last_lines(&file, len, 4).unwrap();
    let end = Incomplete(b"end".to_vec());
    let want = [
        TooLong,
        Complete(b"short".to_vec()),
        Complete(Vec::new()),
        end.clone(),
    ];
    assert_eq!(got, want);
    assert_eq!(lines::last_lines(&file, len, 1).unwrap(), [end]);
    assert_eq!(
        lines::last_lines(&file, 1, 2).unwrap(),
        [Incomplete(b"x".to_vec())]
    );
    // The last line alone is past the limit read back: its start is never found.
    let len = 3 * MAX_LINE_BYTES as u64 + 1;
    assert_eq!(lines::last_lines(&file, len, 1).unwrap(), [TooLong]);
}

#[test]
#[cfg(unix)]
fn the_head_is_rewritten_in_place_and_a_reader_never_sees_half_of_one() {
    let dir = tempfile::tempdir().unwrap();
    let audit = std::sync::Arc::new(Audit::open(dir.path(), AuditOptions::default()).unwrap());
    audit.append(&call(1)).unwrap();
    let head = dir.path().join(HEAD_FILE);
    let inode = |p: &Path| {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(p).unwrap().ino()
    };
    let first = inode(&head);
    assert_eq!(
        std::fs::metadata(&head).unwrap().len(),
        head::HEAD_BYTES as u64
    );

    let writer = {
        let audit = audit.clone();
        std::thread::spawn(move || {
            for i in 2..=400 {
                audit.append(&call(i)).unwrap();
            }
        })
    };
    let mut seen = 0;
    while !writer.is_finished() {
        let read = head::read_head(dir.path()).unwrap().expect("a head");
        assert!(
            read.seq >= seen,
            "the head went back from {seen} to {}",
            read.seq
        );
        seen = read.seq;
    }
    writer.join().unwrap();
    assert_eq!(head::read_head(dir.path()).unwrap().unwrap().seq, 400);
    assert_eq!(inode(&head), first, "rewritten in place, not replaced");
    assert!(verify(audit.path()).unwrap().broken.is_none());
}

/// A writer that finds the log behind its head (cut, emptied, an older copy) appends a `cut`
/// record before its own, reports it once, and `verify` lists it on every later run.
#[test]
fn a_writer_records_a_cut_it_finds_and_verify_reports_it_ever_after() {
    let (dir, path) = log(10);
    let older = std::fs::read(&path).unwrap();
    {
        let audit = Audit::open(dir.path(), AuditOptions::default()).unwrap();
        audit.append(&call(11)).unwrap();
    }
    let mut all = lines(&path);
    all.truncate(8);
    write_lines(&path, &all);
    let audit = Audit::open(dir.path(), AuditOptions::default()).unwrap();
    let e = audit.append(&call(12)).unwrap_err();
    assert_eq!(e.kind, AuditErrorKind::Cut, "{e}");
    assert!(e.to_string().contains("records 9 to 11 are missing"), "{e}");
    // Reported once; the next append is plain.
    audit.append(&call(13)).unwrap();
    let report = verify(&path).unwrap();
    assert_eq!(report.broken, None);
    assert!(!report.is_intact());
    assert_eq!(report.cuts.len(), 1);
    assert_eq!(report.cuts[0].seq, 9);
    drop(audit);

    // Emptied, then an older copy: each is a cut of its own.
    std::fs::write(&path, b"").unwrap();
    let audit = Audit::open(dir.path(), AuditOptions::default()).unwrap();
    assert_eq!(
        audit.append(&call(14)).unwrap_err().kind,
        AuditErrorKind::Cut
    );
    drop(audit);
    let report = verify(&path).unwrap();
    assert!(
        report.cuts[0].reason.starts_with("the log was emptied"),
        "{report:?}"
    );
    std::fs::write(&path, &older).unwrap();
    let audit = Audit::open(dir.path(), AuditOptions::default()).unwrap();
    assert_eq!(
        audit.append(&call(15)).unwrap_err().kind,
        AuditErrorKind::Cut
    );
    let report = verify(&path).unwrap();
    assert_eq!(report.cuts.len(), 1, "{report:?}");
    assert!(
        report.cuts[0].reason.contains("replaced by another copy"),
        "{report:?}"
    );
}
