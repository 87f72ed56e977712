//! `toolhost new`: the scaffolded crate builds, its unit tests pass, the link in the layer
//! makes the next call run the build, and no tracked file of the repository changes.

use std::process::Command;

use toolhost_tests::{build_dir, Fixture, TestRoot};

/// A root (its core/ holds the built-in response tool) for `toolhost new`, whose crates depend
/// on the SDK copy the binary carries, unpacked in the tests' data folder.
pub(crate) fn root_with_plugin_api() -> TestRoot {
    let root = TestRoot::new();
    root.tool("core", "response", Fixture::Response);
    root
}

/// `cargo <args>` in `dir`, with a shared target folder (the crate's dependencies are built
/// once per test machine, not once per run), on one core: the other tests keep running beside
/// it, and the timing ones (reload) failed when a build took every core of a two-core machine.
fn cargo(dir: &std::path::Path, args: &[&str], target: &std::path::Path) -> std::process::Output {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(args)
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", target)
        .env("CARGO_BUILD_JOBS", "1")
        .output()
        .expect("running cargo")
}

#[test]
#[cfg(unix)] // the layer's link is a symbolic link
fn a_new_tool_builds_passes_its_tests_and_is_called_through_its_link() {
    let root = root_with_plugin_api();
    // The workspace's own target folder: the dependencies resolve to the versions of its
    // Cargo.lock with the features example-greet's library has, and the testkit has built
    // that library there already (plugins/example/tools/greet/tests/loaded.rs), so only the
    // scaffolded crate, its plugin-api and its test build are compiled (in a folder of its own
    // they took more than a minute of a fresh clone's first run, at the end of the tests).
    let target = build_dir().parent().unwrap().to_owned();
    let new = Command::new(toolhost_tests::toolhost_bin())
        .args(["--root"])
        .arg(root.path())
        .args(["new", "hello"])
        .env("CARGO_TARGET_DIR", &target)
        .env("XDG_DATA_HOME", toolhost_tests::data_home())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&new.stdout);
    assert!(
        new.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&new.stderr)
    );
    assert!(said.contains("cargo build && cargo test"), "{said}");
    let crate_dir = root.path().join("usr/tools/hello");
    for args in [&["build"][..], &["test"]] {
        let out = cargo(&crate_dir, args, &target);
        assert!(
            out.status.success(),
            "cargo {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let out = root.run_cli(&["call", "hello", "--args", r#"{"name": "Ada", "times": 2}"#]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "Hello, Ada!\nHello, Ada!"
    );
    // A misspelled argument is refused, with the names there are.
    let out = root.run_cli(&["call", "hello", "--args", r#"{"name": "Ada", "tims": 2}"#]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains(r#"unknown argument "tims": the arguments are "name", "times""#),
        "{said}"
    );
    // The descriptions the model reads are written for it, and the tool's is Cargo.toml's.
    let listed = root.run_cli(&["list", "--json"]);
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(listed.contains("Greets someone by name."), "{listed}");
    let prompt = root.run_cli(&["prompt"]);
    let prompt = String::from_utf8_lossy(&prompt.stdout);
    assert!(
        prompt.contains("The name of the person to greet"),
        "{prompt}"
    );
    assert!(
        !prompt.contains("is derived from this struct"),
        "a comment for the author: {prompt}"
    );
    let out = root.run_cli(&["call", "hello", "--args", r#"{"name": " "}"#]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("repairable error"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // An extension, and a name that is taken.
    let ext = root.run_cli(&["new", "stamp", "--extension", "tool_execute_after"]);
    assert!(
        ext.status.success(),
        "{}",
        String::from_utf8_lossy(&ext.stderr)
    );
    assert!(root
        .path()
        .join("usr/extensions/tool_execute_after/stamp/src/lib.rs")
        .is_file());
    let again = root.run_cli(&["new", "hello"]);
    assert!(String::from_utf8_lossy(&again.stderr).contains("already exists"));
}

#[test]
fn the_repository_keeps_user_crates_out_of_its_workspace() {
    let workspace = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap();
    let manifest = std::fs::read_to_string(workspace.join("Cargo.toml")).unwrap();
    assert!(manifest.contains("exclude = [\"usr\"]"), "{manifest}");
}

#[test]
fn same_named_crates_in_two_layers_never_share_a_library_and_list_warns_when_links_do() {
    if !cfg!(unix) {
        return; // the layer's link is a symbolic link
    }
    let root = root_with_plugin_api();
    // One shared CARGO_TARGET_DIR, as live-reload.md recommends: the user's greet and profile
    // p's override link to two different files in it.
    let shared = root.path().join("shared-target");
    for args in [&["new", "greet"][..], &["new", "greet", "--profile", "p"]] {
        let out = Command::new(toolhost_tests::toolhost_bin())
            .arg("--root")
            .arg(root.path())
            .args(args)
            .env("CARGO_TARGET_DIR", &shared)
            .env("XDG_DATA_HOME", toolhost_tests::data_home())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let user = std::fs::read_link(root.path().join("usr/tools/greet.so")).unwrap();
    let profile = std::fs::read_link(root.path().join("usr/agents/p/tools/greet.so")).unwrap();
    assert_ne!(user, profile);
    assert!(
        user.starts_with(&shared) && profile.starts_with(&shared),
        "{user:?} {profile:?}"
    );

    // Two layers' links to one file (made by hand): `list` says so.
    let other = TestRoot::new();
    let built = other.tool("usr", "echo", Fixture::Echo);
    let file = other.path().join("built-echo.so");
    std::fs::rename(&built, &file).unwrap();
    std::fs::create_dir_all(other.path().join("usr/agents/p/tools")).unwrap();
    for link in ["usr/tools/echo.so", "usr/agents/p/tools/echo.so"] {
        std::os::unix::fs::symlink(&file, other.path().join(link)).unwrap();
    }
    let out = other.run_cli(&["list", "--profile", "p"]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("warning: both links resolve to") && said.contains("built-echo.so"),
        "{said}"
    );
    let out = other.run_cli(&["list"]);
    assert!(!String::from_utf8_lossy(&out.stdout).contains("both links resolve"));
}
