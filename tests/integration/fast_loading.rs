//! Loading without a file copy (Linux: an in-memory file) and without repeating abi_stable's
//! layout walk for bytes that passed it before (`usr/.cache/checked-layouts`).

use std::path::Path;

use serde_json::json;
use toolhost::{Host, LoadErrorKind};
use toolhost_tests::{block_on, Fixture, TestRoot};

const RECORD: &str = "usr/.cache/checked-layouts";

/// The record lines of the root (the header and blank lines left out).
fn records(root: &TestRoot) -> Vec<String> {
    std::fs::read_to_string(root.path().join(RECORD))
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(str::to_owned)
        .collect()
}

fn call(host: std::sync::Arc<Host>, tool: &str) -> String {
    let silent = std::sync::Arc::new(toolhost::output::Silent);
    let agent = toolhost::Agent::with_output(host, "A0", "default", silent).unwrap();
    block_on(agent.call_tool(tool, json!({"n": 1})))
        .unwrap()
        .message
}

#[cfg(target_os = "linux")]
#[test]
fn a_library_loads_from_an_in_memory_file_and_leaves_no_copy() {
    let root = TestRoot::new();
    // A name no other test uses: the mapping's name says which library it is.
    root.tool("usr", "memfd_check", Fixture::Echo);
    let host = root.host();
    assert!(host.resolve("default", "memfd_check").found.is_some());
    let stats = host.load_stats();
    assert_eq!((stats.in_memory, stats.copied), (1, 0), "{stats:?}");
    // The mapping is the in-memory file's, named after the library.
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    assert!(
        maps.contains("/memfd:toolhost:memfd_check.so"),
        "no mapping of an in-memory file named after the library"
    );
    // Nothing was written to the private folders.
    let prefix = format!("toolhost-{}-", std::process::id());
    for parent in [Path::new("/dev/shm").to_owned(), std::env::temp_dir()] {
        for dir in std::fs::read_dir(&parent).into_iter().flatten().flatten() {
            if !dir.file_name().to_string_lossy().starts_with(&prefix) {
                continue;
            }
            for file in std::fs::read_dir(dir.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                let name = file.file_name().to_string_lossy().into_owned();
                assert!(!name.ends_with("-memfd_check.so"), "a copy: {name}");
            }
        }
    }
    assert_eq!(call(host, "memfd_check"), r#"{"n":1}"#);
}

#[cfg(target_os = "linux")]
#[test]
fn each_rebuild_is_a_new_image_though_descriptor_numbers_repeat() {
    // Many loads in one process: descriptor numbers are reused, and each load must still get
    // its own bytes (the dynamic loader matches a name it has seen before opening anything).
    let root = TestRoot::new();
    let path = root.tool("usr", "ver", Fixture::Versioned);
    let host = root.host();
    for round in 0..6 {
        let (fixture, answer) = match round % 2 {
            0 => (Fixture::Versioned, "v1"),
            _ => (Fixture::VersionedV2, "v2"),
        };
        let temp = path.with_extension("tmp");
        std::fs::copy(fixture.path(), &temp).unwrap();
        std::fs::rename(&temp, &path).unwrap();
        host.files_changed(std::slice::from_ref(&path));
        let message = call(host.clone(), "ver");
        assert!(message.contains(answer), "round {round}: {message}");
    }
    assert!(host.load_stats().in_memory >= 6, "{:?}", host.load_stats());
}

#[test]
fn the_second_load_of_the_same_bytes_skips_the_layout_check() {
    let root = TestRoot::new();
    root.tool("usr", "first", Fixture::Echo);
    root.tool("usr", "same_bytes", Fixture::Echo);

    let host = root.host();
    assert!(host.resolve("default", "first").found.is_some());
    let stats = host.load_stats();
    assert_eq!(
        (stats.layout_checks, stats.layout_checks_skipped),
        (1, 0),
        "cold: {stats:?}"
    );
    assert_eq!(records(&root).len(), 1, "recorded once it passed");
    // The same bytes under another name, in the same host: not walked again.
    assert!(host.resolve("default", "same_bytes").found.is_some());
    let stats = host.load_stats();
    assert_eq!((stats.layout_checks, stats.layout_checks_skipped), (1, 1));
    assert_eq!(records(&root).len(), 1);

    // A new host (as a new process would be) reads the record.
    let host = root.host();
    assert!(host.resolve("default", "first").found.is_some());
    let stats = host.load_stats();
    assert_eq!(
        (stats.layout_checks, stats.layout_checks_skipped),
        (0, 1),
        "warm: {stats:?}"
    );
    assert_eq!(call(host, "first"), r#"{"n":1}"#);
}

#[test]
fn a_bad_layout_is_refused_cold_and_warm_and_never_recorded() {
    let root = TestRoot::new();
    root.tool("usr", "good", Fixture::Echo);
    root.tool("usr", "bad", Fixture::IncompatibleLayout);
    let mut reasons = Vec::new();
    for _ in 0..3 {
        let host = root.host();
        let listing = host.list("default");
        assert_eq!(listing.skipped.len(), 1, "{:?}", listing.skipped);
        let error = &listing.skipped[0];
        assert_eq!(error.kind, LoadErrorKind::IncompatibleLayout, "{error}");
        reasons.push(error.to_string());
        // The bad one is walked every time; the good one only the first time.
        assert!(
            host.load_stats().layout_checks >= 1,
            "{:?}",
            host.load_stats()
        );
        assert_eq!(records(&root).len(), 1, "only the good library is recorded");
    }
    assert!(reasons.iter().all(|r| *r == reasons[0]), "{reasons:?}");
    assert!(
        reasons[0].contains("rebuild it against plugin-api"),
        "{}",
        reasons[0]
    );
    assert!(!reasons[0].contains('\n'));
}

#[test]
fn a_corrupt_record_file_is_ignored_and_replaced() {
    let root = TestRoot::new();
    root.tool("usr", "echo", Fixture::Echo);
    let garbage = "# toolhost\nnot a record\n0123 4567 89ab\n\u{fffd}\u{fffd}\n";
    root.write(RECORD, garbage);
    let host = root.host();
    assert_eq!(call(host.clone(), "echo"), r#"{"n":1}"#);
    assert_eq!(host.load_stats().layout_checks, 1);
    assert_eq!(records(&root).len(), 1, "the bad lines are dropped");

    // Bytes that are not text at all: ignored the same way.
    root.write(RECORD, [0xff, 0xfe, 0x00, 0x41]);
    let host = root.host();
    assert_eq!(call(host.clone(), "echo"), r#"{"n":1}"#);
    assert_eq!(host.load_stats().layout_checks, 1);

    // A record that cannot be written (its folder is a file): loading works, and the check
    // runs again next time.
    std::fs::remove_dir_all(root.path().join("usr/.cache")).unwrap();
    root.write("usr/.cache", "a file");
    for _ in 0..2 {
        let host = root.host();
        assert_eq!(call(host.clone(), "echo"), r#"{"n":1}"#);
        assert_eq!(host.load_stats().layout_checks, 1);
    }
}

#[test]
fn a_record_made_for_other_bytes_does_not_skip_the_check() {
    // The record holds the good library; a rebuild with new bytes at the same path is walked.
    let root = TestRoot::new();
    let path = root.tool("usr", "ver", Fixture::Versioned);
    let host = root.host();
    assert!(host.resolve("default", "ver").found.is_some());
    std::fs::copy(
        Fixture::IncompatibleLayout.path(),
        root.path().join("usr/tools/x.tmp"),
    )
    .unwrap();
    std::fs::rename(root.path().join("usr/tools/x.tmp"), &path).unwrap();
    host.files_changed(std::slice::from_ref(&path));
    let resolution = host.resolve("default", "ver");
    // The previous build keeps serving; the new one was refused by the walk.
    assert!(resolution.found.is_some());
    let stats = host.load_stats();
    assert_eq!(
        (stats.layout_checks, stats.layout_checks_skipped),
        (2, 0),
        "{stats:?}"
    );
    assert_eq!(records(&root).len(), 1);
}
