//! `toolhost inspect FILE`: what a library is and declares, or discovery's own one-line reason.

use serde_json::Value;
use toolhost_tests::{Fixture, TestRoot};

fn inspect(root: &TestRoot, file: &std::path::Path, json: bool) -> std::process::Output {
    let file = file.to_str().unwrap();
    match json {
        true => root.run_cli(&["inspect", file, "--json"]),
        false => root.run_cli(&["inspect", file]),
    }
}

#[test]
fn a_tool_shows_its_contract_metadata_size_and_hash() {
    let root = TestRoot::new();
    let file = root.tool("usr", "governed", Fixture::Governed);
    let out = inspect(&root, &file, false);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let contract = format!("plugin-abi {}", plugin_abi::ABI_VERSION);
    for expected in [
        contract.as_str(),
        "fx-governed",
        "kind         tool",
        "A governed test tool.",
        "risk         read",
        "schema       compiles",
    ] {
        assert!(text.contains(expected), "{expected}: {text}");
    }
    let out = inspect(&root, &file, true);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let bytes = std::fs::read(&file).unwrap();
    assert_eq!(v["size"], bytes.len() as u64);
    let sha = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&bytes));
    assert_eq!(v["sha256"], sha.as_str());
    assert_eq!(v["kind"], "tool");
    assert_eq!(v["schema_compiles"], true);
    assert_eq!(v["parameters"]["required"][0], "city");
}

#[test]
fn an_extension_and_a_schema_that_does_not_compile_are_shown_as_such() {
    let root = TestRoot::new();
    let ext = root.extension("usr", "tool_execute_after", "_10_x", Fixture::NoopExt);
    let v: Value = serde_json::from_slice(&inspect(&root, &ext, true).stdout).unwrap();
    assert_eq!(v["kind"], "extension");
    let bad = root.tool("usr", "bad", Fixture::BadSchema);
    let out = inspect(&root, &bad, false);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("schema       does NOT compile"), "{text}");
    // Discovery skips it with one line naming the file and the schema's mistake.
    let list = root.run_cli(&["list", "--json"]);
    let listing: Value = serde_json::from_slice(&list.stdout).unwrap();
    let skipped = &listing["skipped"][0];
    assert_eq!(skipped["kind"], "bad-schema", "{listing}");
    assert!(
        skipped["reason"].as_str().unwrap().contains("date"),
        "{listing}"
    );
}

#[test]
fn a_bad_file_gets_the_reason_discovery_gives() {
    let root = TestRoot::new();
    let file = root.write("usr/tools/broken.so", b"not a library at all");
    let out = inspect(&root, &file, false);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    let list = root.run_cli(&["list", "--json"]);
    let listing: Value = serde_json::from_slice(&list.stdout).unwrap();
    let reason = listing["skipped"][0]["reason"].as_str().unwrap();
    assert!(err.contains(reason), "{err} / {reason}");
    let future = root.tool("usr", "future", Fixture::FutureVersion);
    let err = String::from_utf8_lossy(&inspect(&root, &future, false).stderr).into_owned();
    assert!(err.contains("built against plugin-abi 1.0.0"), "{err}");
}
