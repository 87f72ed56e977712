//! Files in the layers that are not what their names say: folders, links leading nowhere or in a
//! circle, FIFOs, devices, `/proc` files, huge sparse files, files written slowly. Each is one
//! clear line naming the file and the reason, and nothing blocks, allocates the file's claimed
//! size or gives up. Every call that could block runs under a deadline, so a regression fails
//! instead of hanging the test run.
#![cfg(unix)]

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use serde_json::json;
use toolhost::{Host, HostOptions, LoadError, LoadErrorKind, ReloadEvent};
use toolhost_tests::{block_on, toolhost_bin, wait_for, Fixture, TestRoot};

/// Runs `f` on its own thread and fails the test if it takes longer than `secs`.
fn within<T: Send + 'static>(secs: u64, what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(v) => v,
        Err(_) => panic!("{what} did not finish within {secs} s (blocked?)"),
    }
}

/// Runs `f` under a deadline, with the warnings it logs on its thread.
fn warnings_within<T: Send + 'static>(
    what: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> (T, Vec<String>) {
    within(20, what, move || {
        let buffer = Arc::new(std::sync::Mutex::new(Vec::<u8>::new()));
        let writer = buffer.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::WARN)
            .with_ansi(false)
            .without_time()
            .with_writer(move || Sink(writer.clone()))
            .finish();
        let value = tracing::subscriber::with_default(subscriber, f);
        let text = String::from_utf8(buffer.lock().unwrap().clone()).unwrap();
        (value, text.lines().map(str::to_owned).collect())
    })
}

struct Sink(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Sink {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Runs the `toolhost` binary on `root`, killed (and the test failed) after 30 s.
fn cli_within(root: &TestRoot, args: &[&str]) -> Output {
    let mut child = Command::new(toolhost_bin())
        .arg("--root")
        .arg(root.path())
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start toolhost");
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("toolhost {args:?} did not finish within 30 s (blocked?)");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}

fn mkfifo(path: &Path) -> PathBuf {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let status = Command::new("mkfifo").arg(path).status().expect("mkfifo");
    assert!(status.success(), "mkfifo {}", path.display());
    path.to_owned()
}

fn link(root: &TestRoot, rel: &str, target: impl AsRef<Path>) -> PathBuf {
    let path = root.path().join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    symlink(target, &path).unwrap();
    path
}

/// Puts `bad` at `usr/tools/bad.so` next to a good tool (with `options`); checks that `list`
/// skips it with `kind` and a reason containing `says`, and that calling `bad` fails with it.
fn check(
    options: HostOptions,
    bad: impl FnOnce(&TestRoot) -> PathBuf,
    kind: LoadErrorKind,
    says: &str,
) {
    let root = TestRoot::new();
    root.tool("usr", "good", Fixture::Echo);
    let path = bad(&root);
    let dir = root.path().to_owned();
    let (listing, call, good) = within(30, "list and call", move || {
        let host = Arc::new(Host::with_options(dir, options).unwrap());
        let agent = toolhost::Agent::new(host.clone(), "A0", "default").unwrap();
        let listing = host.list("default").skipped;
        let call = block_on(agent.call_tool("bad", json!({})));
        let good = block_on(agent.call_tool("good", json!({"x": 1})));
        (listing, call.map(|r| r.message), good.map(|r| r.message))
    });
    assert_eq!(listing.len(), 1, "{listing:?}");
    let error: &LoadError = &listing[0];
    assert_eq!((&error.path, error.kind), (&path, kind), "{error}");
    let line = error.to_string();
    assert!(
        line.starts_with(&format!("skipping {}: ", path.display())),
        "{line}"
    );
    assert!(line.contains(says), "{line:?} should contain {says:?}");
    assert!(!line.contains('\n'), "one line: {line}");
    let e = call.unwrap_err();
    assert!(
        e.message()
            .starts_with("tool 'bad' cannot be loaded: skipping "),
        "{}",
        e.message()
    );
    assert!(e.message().contains(says), "{}", e.message());
    assert_eq!(good.unwrap(), r#"{"x":1}"#);
}

const BAD: &str = "usr/tools/bad.so";

#[test]
fn a_folder_named_like_a_library() {
    let make = |r: &TestRoot| {
        let path = r.path().join(BAD);
        std::fs::create_dir_all(&path).unwrap();
        path
    };
    check(
        HostOptions::default(),
        make,
        LoadErrorKind::NotAFile,
        "a directory, not a regular file",
    );
}

#[test]
fn a_dangling_link() {
    let make = |r: &TestRoot| link(r, BAD, "nowhere.so");
    check(
        HostOptions::default(),
        make,
        LoadErrorKind::NotAFile,
        "nowhere.so, which does not exist",
    );
}

#[test]
fn a_link_loop() {
    let make = |r: &TestRoot| {
        link(r, "usr/tools/other.txt", "bad.so");
        link(r, BAD, "other.txt")
    };
    check(
        HostOptions::default(),
        make,
        LoadErrorKind::NotAFile,
        "a symbolic link loop",
    );
}

#[test]
fn a_link_to_itself() {
    let make = |r: &TestRoot| link(r, BAD, "bad.so");
    check(
        HostOptions::default(),
        make,
        LoadErrorKind::NotAFile,
        "a symbolic link loop",
    );
}

#[test]
fn a_chain_of_more_than_40_links() {
    let make = |r: &TestRoot| {
        r.write("usr/tools/l41", b"a real file at the end");
        for i in 1..41 {
            link(r, &format!("usr/tools/l{i}"), format!("l{}", i + 1));
        }
        link(r, BAD, "l1")
    };
    let says = "more than 40 symbolic links in a row (a loop?)";
    check(HostOptions::default(), make, LoadErrorKind::NotAFile, says);
}

#[test]
fn a_fifo() {
    let make = |r: &TestRoot| mkfifo(&r.path().join(BAD));
    check(
        HostOptions::default(),
        make,
        LoadErrorKind::NotAFile,
        "a named pipe (FIFO), not a regular file",
    );
}

#[test]
fn a_link_to_a_fifo() {
    let make = |r: &TestRoot| {
        let fifo = mkfifo(&r.path().join("elsewhere/pipe"));
        link(r, BAD, fifo)
    };
    check(
        HostOptions::default(),
        make,
        LoadErrorKind::NotAFile,
        "/elsewhere/pipe, a named pipe (FIFO)",
    );
}

#[test]
fn a_link_to_dev_zero() {
    let make = |r: &TestRoot| link(r, BAD, "/dev/zero");
    check(
        HostOptions::default(),
        make,
        LoadErrorKind::NotAFile,
        "a symbolic link to /dev/zero, a character device",
    );
}

#[test]
fn a_link_to_proc_pagemap() {
    let make = |r: &TestRoot| link(r, BAD, "/proc/self/pagemap");
    check(
        HostOptions::default(),
        make,
        LoadErrorKind::NotAFile,
        "(a /proc or /sys file?)",
    );
}

#[test]
fn a_sparse_100_gib_file_is_refused_by_its_size() {
    let make = |r: &TestRoot| {
        let path = r.write(BAD, b"");
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(100 << 30)
            .unwrap();
        path
    };
    let says = "the file is 107374182400 bytes, over the limit of 268435456 bytes \
                (HostOptions::max_library_bytes)";
    check(HostOptions::default(), make, LoadErrorKind::TooLarge, says);
}

#[test]
fn a_library_over_a_configured_cap() {
    // The cap sits just above the good tool's size (it grows with the fixture), and the bad
    // file is one byte over it.
    let good = std::fs::metadata(Fixture::Echo.path()).unwrap().len();
    let cap = good + 4096;
    let make = move |r: &TestRoot| r.write(BAD, vec![0u8; cap as usize + 1]);
    let options = HostOptions::default().with_max_library_bytes(cap);
    let says = format!(
        "the file is {} bytes, over the limit of {cap} bytes",
        cap + 1
    );
    check(options, make, LoadErrorKind::TooLarge, &says);
}

#[test]
fn list_shows_the_skipped_file_and_call_fails_with_its_reason() {
    let root = TestRoot::new();
    std::fs::create_dir_all(root.path().join(BAD)).unwrap();
    let out = cli_within(&root, &["list"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    let skipped = stdout
        .split_once("Skipped:\n")
        .expect("a Skipped section")
        .1;
    assert!(
        skipped.starts_with("  usr/tools/bad.so: a directory, not a regular file"),
        "{stdout}"
    );

    let out = cli_within(&root, &["call", "bad", "--args", "{}"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("cannot be loaded: skipping "), "{stderr}");
    assert!(
        stderr.contains("a directory, not a regular file"),
        "{stderr}"
    );
}

#[test]
fn a_fifo_as_secrets_file_is_one_warning_and_the_host_goes_on() {
    let root = TestRoot::new();
    root.tool("usr", "good", Fixture::Echo);
    let fifo = mkfifo(&root.path().join("usr/secrets.env"));
    let dir = root.path().to_owned();
    let (host, warnings) = warnings_within("Host::new", move || Host::new(dir).unwrap());
    assert!(host.secrets().is_empty());
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    let expected = format!(
        "cannot read {}: a named pipe (FIFO), not a regular file",
        fifo.display()
    );
    assert!(warnings[0].contains(&expected), "{warnings:?}");
    assert!(
        warnings[0].ends_with("running without secrets"),
        "{warnings:?}"
    );
    let out = cli_within(&root, &["call", "good", "--args", "{}"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn an_oversized_secrets_file_is_refused() {
    let root = TestRoot::new();
    root.write("usr/secrets.env", "A=1234567890\n".repeat(100_000));
    let dir = root.path().to_owned();
    let (host, warnings) = warnings_within("Host::new", move || Host::new(dir).unwrap());
    assert!(host.secrets().is_empty());
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("over the limit of 1048576 bytes (HostOptions::max_text_bytes)"),
        "{warnings:?}"
    );
}

#[test]
fn hostile_prompt_fragments_are_skipped_with_one_warning_each() {
    let root = TestRoot::new();
    root.write("usr/prompts/agent.system.main.md", "You are an agent.");
    let fifo = mkfifo(&root.path().join("usr/prompts/agent.system.fifo.md"));
    let zero = link(&root, "usr/prompts/agent.system.zero.md", "/dev/zero");
    let big = root.write("usr/prompts/agent.system.big.md", "x".repeat(2 << 20));
    let host = root.host();
    let (parts, warnings) = warnings_within("the system prompt", move || {
        host.system_prompt_parts("default")
    });
    assert_eq!(parts[0], "You are an agent.");
    assert_eq!(warnings.len(), 3, "{warnings:?}");
    let said = |path: &Path, what: &str| {
        let head = format!("skipping prompt {}: {what}", path.display());
        assert!(
            warnings.iter().any(|w| w.contains(&head)),
            "{head} in {warnings:?}"
        );
    };
    said(
        &big,
        "the file is 2097152 bytes, over the limit of 1048576 bytes",
    );
    said(&fifo, "a named pipe (FIFO), not a regular file");
    said(&zero, "a symbolic link to /dev/zero, a character device");
    let out = cli_within(&root, &["prompt"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_name_with_control_characters_is_echoed_escaped_on_one_line() {
    let root = TestRoot::new();
    let bad = root.path().join("usr/plugins/evil\n\x1b[31mred/tools/x.so");
    std::fs::create_dir_all(&bad).unwrap();
    let listing = root.host().list("default");
    assert_eq!(listing.skipped.len(), 1, "{:?}", listing.skipped);
    let line = listing.skipped[0].to_string();
    assert!(
        line.contains(r"usr/plugins/evil\n\u{1b}[31mred/tools/x.so: a directory"),
        "{line}"
    );
    assert!(!line.contains('\n') && !line.contains('\x1b'), "{line}");

    let out = cli_within(&root, &["list"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains('\x1b'), "{stdout}");
    let lines: Vec<&str> = stdout.lines().filter(|l| l.contains("x.so")).collect();
    assert_eq!(lines.len(), 1, "{stdout}");
    assert!(
        lines[0].starts_with(r"  usr/plugins/evil\n\u{1b}[31mred/tools/x.so: "),
        "{stdout}"
    );

    let e = toolhost::ToolName::parse("a\nb").unwrap_err();
    assert!(
        e.message().starts_with(r"invalid tool name 'a\nb'"),
        "{}",
        e.message()
    );
}

/// Writes `bytes` to `rel` in `chunks` appends, `pause` apart (each longer than the debounce).
fn write_slowly(root: &TestRoot, rel: &str, bytes: &[u8], chunks: usize, pause: Duration) {
    use std::io::Write;
    let path = root.path().join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    for (i, chunk) in bytes.chunks(bytes.len().div_ceil(chunks)).enumerate() {
        if i > 0 {
            std::thread::sleep(pause);
        }
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .unwrap();
        file.write_all(chunk).unwrap();
    }
}

/// The reload events about `name` from a watched host while `bytes` is written slowly to
/// `usr/tools/<name>.so`, until `done` says the last one came, plus a quiet second.
fn events_of_a_slow_write(bytes: Vec<u8>, done: impl Fn(&ReloadEvent) -> bool) -> Vec<String> {
    let root = TestRoot::new();
    root.tool("usr", "good", Fixture::Echo);
    let options = HostOptions::default()
        .with_debounce(Duration::from_millis(20))
        .with_settle(Duration::from_millis(400));
    let host = Arc::new(Host::with_options(root.path(), options).unwrap());
    host.list("default");
    let events = host.subscribe();
    let _watcher = host.watch().unwrap();
    write_slowly(
        &root,
        "usr/tools/slow.so",
        &bytes,
        10,
        Duration::from_millis(80),
    );
    let mut seen = Vec::new();
    wait_for("the slow file's report", || {
        while let Ok(event) = events.try_recv() {
            let last = done(&event);
            seen.push(event.to_string());
            if last {
                return Ok(());
            }
        }
        Err(seen.clone())
    });
    std::thread::sleep(Duration::from_secs(1));
    seen.extend(events.try_iter().map(|e| e.to_string()));
    seen.retain(|e| e.contains("slow.so"));
    seen
}

#[test]
fn a_library_written_slowly_is_reported_once_when_it_loads() {
    let bytes = std::fs::read(Fixture::Noop.path()).unwrap();
    let seen = within(60, "the slow write", move || {
        events_of_a_slow_write(bytes, |e| matches!(e, ReloadEvent::Loaded { .. }))
    });
    assert_eq!(seen.len(), 1, "{seen:#?}");
    assert!(seen[0].starts_with("loaded "), "{seen:#?}");
}

#[test]
fn a_broken_library_written_slowly_is_reported_once_when_it_settles() {
    let mut bytes = std::fs::read(Fixture::Noop.path()).unwrap();
    bytes.truncate(bytes.len() / 2);
    let seen = within(60, "the slow write", move || {
        events_of_a_slow_write(bytes, |e| matches!(e, ReloadEvent::Failed { .. }))
    });
    assert_eq!(seen.len(), 1, "{seen:#?}");
    assert!(seen[0].contains("truncated"), "{seen:#?}");
}
