//! `toolhost-testkit`, the plugin authors' loader helper: it builds a crate's library, loads it
//! through the real host, and reports a library the host refuses as one line.

use std::path::PathBuf;

use serde_json::json;
use toolhost_testkit::{load_built_tool, Loader, TestkitError};
use toolhost_tests::block_on;

fn fixture_dir(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name)
}

/// A fixture as `build_dir` built it. Not rebuilt by the testkit: a build of one fixture
/// resolves its dependencies' features on its own, so it could relink the library, and
/// replace `target/debug/lib<fixture>.so`, while other tests of this binary copy it.
/// (greet's own integration test, a binary of its own, covers the build.)
fn load_fixture(name: &str) -> Loader {
    toolhost_tests::build_dir();
    Loader::new(fixture_dir(name)).without_build()
}

#[test]
fn a_built_fixture_loads_under_its_folder_name_and_answers() {
    let echo = load_fixture("echo")
        .load()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(echo.name(), "echo");
    assert_eq!(echo.handle().package(), "fx-echo");
    assert!(echo.root().join("usr/tools/echo.so").is_file() || cfg!(not(target_os = "linux")));
    // A second library in the same process is its own module, not abi_stable's cached first.
    let noop = load_fixture("noop").name("quiet").load().unwrap();
    assert_eq!(noop.handle().package(), "fx-noop");
    assert_eq!(
        block_on(noop.call("quiet", json!({"x": 1})))
            .unwrap()
            .message,
        ""
    );
    let answer = block_on(echo.call("echo", json!({"x": 1}))).unwrap();
    assert_eq!(answer.message, r#"{"x":1}"#);
}

#[test]
fn a_library_the_host_refuses_is_one_line() {
    for (fixture, says) in [
        ("not_a_plugin", "not a toolhost plugin"),
        (
            "incompatible_layout",
            "built against an incompatible plugin-abi",
        ),
    ] {
        let error = load_fixture(fixture).load().unwrap_err();
        assert!(matches!(error, TestkitError::Load(_)), "{error:?}");
        let line = error.to_string();
        assert!(line.starts_with("skipping "), "{line}");
        assert!(line.contains(says), "{line}");
        assert!(!line.contains('\n'), "one line: {line}");
    }
}

#[test]
fn a_crate_that_is_not_a_plugin_crate_is_one_line() {
    let error = load_built_tool(env!("CARGO_MANIFEST_DIR")).unwrap_err();
    assert!(
        matches!(error, TestkitError::NotACdylib { .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("cdylib"), "{error}");
    let error = Loader::new("/no/such/crate").load().unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("cannot read /no/such/crate/Cargo.toml"),
        "{error}"
    );
}

#[test]
fn a_crate_that_does_not_compile_is_its_first_error() {
    let dir = tempfile::tempdir().unwrap();
    let krate = dir.path().join("broken");
    std::fs::create_dir_all(krate.join("src")).unwrap();
    let manifest = "[package]\nname = \"broken\"\nedition = \"2021\"\n[workspace]\n\
                    [lib]\ncrate-type = [\"cdylib\"]\n";
    std::fs::write(krate.join("Cargo.toml"), manifest).unwrap();
    std::fs::write(krate.join("src/lib.rs"), "fn f() -> u8 { nope }\n").unwrap();
    let error = load_built_tool(&krate).unwrap_err();
    let line = error.to_string();
    assert!(
        line.starts_with("building crate 'broken' failed: error"),
        "{line}"
    );
    assert!(line.contains("nope"), "{line}");
    assert!(!line.contains('\n'), "one line: {line}");
}
