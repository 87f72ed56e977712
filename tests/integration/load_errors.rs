//! Every kind of bad library is skipped with one clear reason; everything else keeps working.

use plugin_abi::ABI_VERSION;
use serde_json::json;
use toolhost::LoadErrorKind;
use toolhost_tests::{block_on, Fixture, TestRoot};

/// Puts `bad` at `usr/tools/bad.so` next to a good tool, checks the reason, and that the good
/// tool still answers and `bad` falls through to the next layer.
fn check_skipped(
    bad: impl FnOnce(&TestRoot) -> std::path::PathBuf,
    kind: LoadErrorKind,
    says: &str,
) {
    let root = TestRoot::new();
    root.tool("usr", "good", Fixture::Echo);
    root.tool("core", "bad", Fixture::Response); // the next layer's `bad`
    let path = bad(&root);
    let (agent, _) = root.agent("default");

    let listing = agent.host().list("default");
    assert_eq!(listing.skipped.len(), 1, "{:?}", listing.skipped);
    let error = &listing.skipped[0];
    assert_eq!(error.path, path);
    assert_eq!(error.kind, kind, "{error}");
    assert!(
        error.reason.contains(says),
        "reason {:?} should contain {says:?}",
        error.reason
    );
    let line = error.to_string();
    assert!(
        line.starts_with(&format!("skipping {}: ", path.display())),
        "{line}"
    );
    assert!(!line.contains('\n'), "one line: {line}");

    // The good tool still works, and `bad` resolves to the core library.
    let r = block_on(agent.call_tool("good", json!({"x": 1}))).unwrap();
    assert_eq!(r.message, r#"{"x":1}"#);
    let r = block_on(agent.call_tool("bad", json!({"text": "from core"}))).unwrap();
    assert_eq!(r.message, "from core");
    assert!(r.break_loop);
}

/// `major.minor` of a version.
fn minor_series(version: &str) -> String {
    let mut parts = version.split('.');
    match (parts.next(), parts.next()) {
        (Some(major), Some(minor)) => format!("{major}.{minor}"),
        _ => panic!("version {version:?} is not major.minor.patch"),
    }
}

/// What a plugin must be rebuilt against: this workspace's plugin-api series and the
/// plugin-abi series it speaks (the version the host checks), `plugin-api 0.5 (plugin-abi 0.5)`.
fn series() -> String {
    format!(
        "plugin-api {} (plugin-abi {})",
        minor_series(plugin_api::API_VERSION),
        minor_series(ABI_VERSION)
    )
}

#[test]
fn incompatible_layout() {
    check_skipped(
        |root| root.tool("usr", "bad", Fixture::IncompatibleLayout),
        LoadErrorKind::IncompatibleLayout,
        &format!(
            "built against an incompatible plugin-abi (the types' layout differs from \
             {ABI_VERSION}): rebuild it against {} (run with -v for the full report)",
            series()
        ),
    );
}

#[test]
fn incompatible_version() {
    check_skipped(
        |root| root.tool("usr", "bad", Fixture::FutureVersion),
        LoadErrorKind::IncompatibleVersion,
        &format!(
            "built against plugin-abi 1.0.0, but this host speaks plugin-abi {ABI_VERSION}: \
             rebuild the plugin against {}",
            series()
        ),
    );
}

#[test]
fn a_shared_library_that_is_not_a_plugin() {
    check_skipped(
        |root| root.tool("usr", "bad", Fixture::NotAPlugin),
        LoadErrorKind::NotAPlugin,
        "not a toolhost plugin",
    );
}

#[test]
fn a_truncated_library() {
    check_skipped(
        |root| {
            let bytes = std::fs::read(Fixture::Echo.path()).unwrap();
            root.write("usr/tools/bad.so", &bytes[..bytes.len() / 2])
        },
        LoadErrorKind::NotALibrary,
        "truncated",
    );
}

#[test]
fn a_truncated_library_without_section_headers() {
    // A stripped-down ELF (no section table) cut in half: the headers parse, so only the
    // segment check stands between the loader and a SIGBUS that would kill the host.
    check_skipped(
        |root| {
            let mut bytes = std::fs::read(Fixture::Echo.path()).unwrap();
            bytes.truncate(bytes.len() / 2);
            assert_eq!(&bytes[..5], b"\x7fELF\x02", "a 64-bit ELF fixture");
            bytes[0x28..0x30].fill(0); // e_shoff
            bytes[0x3c..0x40].fill(0); // e_shnum, e_shstrndx
            root.write("usr/tools/bad.so", &bytes)
        },
        LoadErrorKind::NotALibrary,
        "truncated: the library needs",
    );
}

#[test]
fn an_empty_file() {
    check_skipped(
        |root| root.write("usr/tools/bad.so", b""),
        LoadErrorKind::Empty,
        "empty",
    );
}

#[test]
fn a_text_file_with_a_library_name() {
    check_skipped(
        |root| root.write("usr/tools/bad.so", b"#!/bin/sh\necho not a library\n"),
        LoadErrorKind::NotALibrary,
        "not a loadable shared library (truncated or corrupt?)",
    );
}

#[test]
fn a_constructor_that_panics_at_load() {
    check_skipped(
        |root| root.tool("usr", "bad", Fixture::InitPanic),
        LoadErrorKind::InitFailed,
        "its initialisation failed: the tool's constructor: panicked at tests/fixtures/init_panic/src/lib.rs:",
    );
}

#[test]
fn an_extension_in_a_tools_folder() {
    check_skipped(
        |root| root.tool("usr", "bad", Fixture::NoopExt),
        LoadErrorKind::WrongKind,
        "is an extension, not a tool",
    );
}

#[test]
fn a_tool_whose_only_library_is_broken_is_an_error_not_unknown() {
    let root = TestRoot::new();
    let path = root.tool("usr", "broken", Fixture::FutureVersion);
    let (agent, _) = root.agent("default");
    let e = block_on(agent.call_tool("broken", json!({}))).unwrap_err();
    assert_eq!(e.kind(), plugin_api::ErrorKind::Dependency);
    assert!(
        e.message()
            .starts_with("tool 'broken' cannot be loaded: skipping "),
        "{}",
        e.message()
    );
    assert!(
        e.message().contains(&path.display().to_string()),
        "{}",
        e.message()
    );
}

#[test]
fn a_bad_extension_is_skipped_and_the_others_run() {
    let root = TestRoot::new();
    root.tool("core", "echo", Fixture::Echo);
    root.extension(
        "usr",
        "tool_execute_before",
        "_10_bad",
        Fixture::IncompatibleLayout,
    );
    root.extension(
        "usr",
        "tool_execute_before",
        "_20_good",
        Fixture::RecorderExt,
    );
    let (agent, _) = root.agent("default");
    block_on(agent.call_tool("echo", json!({}))).unwrap();
    assert_eq!(
        agent.loop_data("trace").unwrap(),
        json!(["tool_execute_before/_20_good"])
    );
}
