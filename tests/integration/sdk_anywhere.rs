//! The plugin SDK anywhere (issue 59): the `toolhost` binary alone, copied into a fresh folder,
//! scaffolds a plugin outside any checkout of this repository, the plugin builds with
//! `cargo --offline` against the SDK copy the binary carries, and a root calls it; the
//! scaffold's fields are bounded, and its extremes answer.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use toolhost_tests::{build_dir, shell_env};

/// The workspace (this checkout): nothing a scaffolded crate builds may come from it.
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .canonicalize()
        .unwrap()
}

/// `toolhost` as installed in `bin`, run in `dir`, with `data` as its data folder and nothing
/// that points into this checkout in its environment.
fn installed(bin: &Path, dir: &Path, data: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(bin.join("toolhost"));
    shell_env::as_from_a_shell(&mut cmd);
    cmd.args(args)
        .current_dir(dir)
        .env_remove("TOOLHOST_ROOT")
        .env("XDG_DATA_HOME", data)
        .env("NO_COLOR", "1")
        .output()
        .expect("running the installed toolhost")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `cargo build --offline` in `dir`, its intermediate files in `target` (kept between runs in
/// the workspace's target folder: the dependencies are compiled once per machine), on one core.
fn cargo_offline(dir: &Path, target: &Path, args: &[&str]) -> Output {
    let mut cargo = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    shell_env::as_from_a_shell(&mut cargo);
    cargo
        .args(args)
        .arg("--offline")
        .current_dir(dir)
        .env_remove("CARGO_TARGET_DIR")
        .env("CARGO_BUILD_BUILD_DIR", target)
        .env("CARGO_BUILD_JOBS", "1")
        .output()
        .expect("running cargo")
}

#[test]
fn the_installed_binary_alone_scaffolds_builds_offline_and_calls_a_plugin() {
    if !cfg!(unix) {
        return; // the root's link is a symbolic link
    }
    let fresh = tempfile::Builder::new()
        .prefix("toolhost-installed-")
        .tempdir()
        .unwrap();
    let fresh = fresh.path().canonicalize().unwrap();
    // Installed: the binary copied into a folder of its own, away from the checkout.
    let bin = fresh.join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::fs::copy(toolhost_tests::toolhost_bin(), bin.join("toolhost")).unwrap();
    let data = fresh.join("data");
    let work = fresh.join("work");
    std::fs::create_dir(&work).unwrap();

    // Outside a root: a standalone crate, and how to point a root at it.
    let out = installed(&bin, &work, &data, &["new", "hello"]);
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("standalone"), "{said}");
    let link_line = said
        .lines()
        .find(|l| l.contains("ln -s "))
        .unwrap_or_else(|| panic!("no `ln -s` in what new said: {said}"));
    let crate_dir = work.join("hello");
    let manifest = std::fs::read_to_string(crate_dir.join("Cargo.toml")).unwrap();
    assert!(
        !manifest.contains(&*workspace().to_string_lossy()),
        "the scaffold points into the checkout: {manifest}"
    );
    assert!(manifest.contains(&*data.to_string_lossy()), "{manifest}");

    let target = build_dir().parent().unwrap().join("sdk-anywhere");
    for args in [&["build"][..], &["test"]] {
        let out = cargo_offline(&crate_dir, &target, args);
        assert!(
            out.status.success(),
            "cargo {args:?} --offline: {}",
            text(&out)
        );
        assert!(
            !String::from_utf8_lossy(&out.stderr).contains("warning"),
            "the scaffold builds without warnings: {}",
            text(&out)
        );
    }
    // Nothing it compiled came from this checkout: every source in the build's dep-info files
    // is the crate's, the unpacked SDK's or the registry's.
    let mut dep_infos = 0;
    for entry in std::fs::read_dir(target.join("debug/deps")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.extension().is_some_and(|e| e == "d")
            && (name.starts_with("hello_") || name.starts_with("plugin_a"))
        {
            let deps = std::fs::read_to_string(&path).unwrap();
            if deps.contains(&*crate_dir.to_string_lossy())
                || deps.contains(&*data.to_string_lossy())
            {
                dep_infos += 1;
                // The files before each `: ` are the build's outputs (in the workspace's target
                // folder); the ones after it are what it read.
                let read = deps.replace(&*target.to_string_lossy(), "");
                assert!(
                    !read.contains(&format!("{}/", workspace().display())),
                    "{} names a file of the checkout: {deps}",
                    path.display()
                );
            }
        }
    }
    assert!(
        dep_infos >= 3,
        "the build's dep-info files of hello and the SDK: {dep_infos}"
    );

    // A root (a folder with usr/) pointed at it as `new` said.
    let root = fresh.join("agent");
    let link_cmd = link_line.trim().replace("ROOT", &root.to_string_lossy());
    let status = Command::new("sh")
        .arg("-c")
        .arg(&link_cmd)
        .status()
        .unwrap();
    assert!(status.success(), "{link_cmd}");
    let call = |args: &str| installed(&bin, &root, &data, &["call", "hello", "--args", args]);
    let out = call(r#"{"name": "Ada"}"#);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "Hello, Ada!");

    // The extremes of every field answer; one past them is refused before the tool runs.
    let longest = "é".repeat(100);
    let out = call(&format!(r#"{{"name": "{longest}", "times": 100}}"#));
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 100);
    let out = call(r#"{"name": "A", "times": 1}"#);
    assert!(out.status.success(), "{}", text(&out));
    for (args, refusal) in [
        (format!(r#"{{"name": "{longest}é"}}"#), "/name"),
        (r#"{"name": ""}"#.to_owned(), "/name"),
        (r#"{"name": "Ada", "times": 101}"#.to_owned(), "/times"),
        (r#"{"name": "Ada", "times": 0}"#.to_owned(), "/times"),
        (
            r#"{"name": "Ada", "times": 4000000000}"#.to_owned(),
            "/times",
        ),
    ] {
        let out = call(&args);
        let said = text(&out);
        assert_eq!(out.status.code(), Some(1), "{args}: {said}");
        assert!(
            said.contains("validation error") && said.contains(refusal),
            "{args}: {said}"
        );
        assert!(!said.contains("greeting"), "the tool ran: {said}");
    }

    // The README's hello world: a root made of an empty usr/, `new`, `cargo build`, `call`.
    let readme = fresh.join("readme-agent");
    std::fs::create_dir_all(readme.join("usr")).unwrap();
    let out = installed(&bin, &readme, &data, &["new", "hello"]);
    assert!(out.status.success(), "{}", text(&out));
    let out = cargo_offline(&readme.join("usr/tools/hello"), &target, &["build"]);
    assert!(out.status.success(), "{}", text(&out));
    let out = installed(
        &bin,
        &readme,
        &data,
        &["call", "hello", "--args", r#"{"name": "Ada"}"#],
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "Hello, Ada!",
        "{}",
        text(&out)
    );

    // The SDK is unpacked once per version: a second crate uses the same copy.
    let out = installed(&bin, &work, &data, &["new", "again"]);
    assert!(out.status.success(), "{}", text(&out));
    let copies = std::fs::read_dir(data.join("toolhost/sdk"))
        .unwrap()
        .count();
    assert_eq!(copies, 1);
}
