//! The author's loop with real cargo: a crate made by `toolhost new` while a host runs is
//! loaded at its first `cargo build` and reloaded at each rebuild, under `toolhost watch` and
//! under `toolhost serve-mcp --http` (whose `tools/list` then shows the new description).

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use toolhost_tests::{build_dir, TestRoot};

use crate::mcp_server::HttpServer;
use crate::new_plugin::root_with_plugin_api;
use crate::watch_mode::WatchProcess;

/// `toolhost new NAME` in `root`, as a user types it: the link points into the crate's own
/// `target/debug/`, which does not exist yet.
fn new_crate(root: &TestRoot, name: &str) -> std::path::PathBuf {
    let out = Command::new(toolhost_tests::toolhost_bin())
        .arg("--root")
        .arg(root.path())
        .args(["new", name])
        .env_remove("CARGO_TARGET_DIR")
        .env("XDG_DATA_HOME", toolhost_tests::data_home())
        .output()
        .expect("toolhost new");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = root.path().join("usr/tools").join(name);
    assert!(!dir.join("target").exists());
    dir
}

/// `cargo build` in `dir`. The intermediate files go to the workspace's target folder
/// (`build.build-dir`), where the testkit built the dependencies already, so only the crate is
/// compiled; its library lands in the crate's own `target/debug/`, made by this build. On one
/// core: the other tests keep running beside it.
fn cargo_build(dir: &Path) {
    let shared = build_dir().parent().expect("target folder");
    let out = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .arg("build")
        .current_dir(dir)
        .env_remove("CARGO_TARGET_DIR")
        .env("CARGO_BUILD_BUILD_DIR", shared)
        .env("CARGO_BUILD_JOBS", "1")
        .output()
        .expect("running cargo");
    assert!(
        out.status.success(),
        "cargo build in {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Replaces `from` with `to` in the crate's file `rel`.
fn edit(dir: &Path, rel: &str, from: &str, to: &str) {
    let path = dir.join(rel);
    let text = std::fs::read_to_string(&path).expect("read source");
    assert!(text.contains(from), "{rel} has no {from:?}");
    std::fs::write(&path, text.replace(from, to)).expect("write source");
}

#[test]
#[cfg(unix)] // the layer's link is a symbolic link
fn a_crate_made_while_watch_runs_is_loaded_at_its_first_build_and_at_each_rebuild() {
    let root = root_with_plugin_api();
    let mut watch = WatchProcess::start(&root);
    watch.expect_line("announcing the tools", |l| l.starts_with("watching "));
    let dir = new_crate(&root, "ghost");
    let line = watch.expect_line("saying the link leads nowhere yet", |l| {
        l.starts_with("cannot load usr/tools/ghost.so [layer usr]: ")
    });
    // The next step is the build, not removing the link.
    assert!(
        line.contains("not built yet: run `cargo build` in its crate")
            && !line.contains("remove it"),
        "{line}"
    );

    cargo_build(&dir);
    let loaded = watch.expect_line("the first build's load", |l| l.contains("ghost.so"));
    assert!(
        loaded.starts_with("loaded usr/tools/ghost.so [layer usr]: 0.1.0 (generation 1) in "),
        "{loaded}"
    );
    watch.send(r#"ghost {"name": "Ada"}"#);
    watch.expect_line("the first build's answer", |l| l == "Hello, Ada!");

    edit(&dir, "src/lib.rs", "\"Hello, {}!\"", "\"Hi there, {}!\"");
    cargo_build(&dir);
    let reloaded = watch.expect_line("the rebuild's reload", |l| l.contains("ghost.so"));
    assert!(
        reloaded.starts_with(
            "reloaded usr/tools/ghost.so [layer usr]: 0.1.0 (generation 1) -> 0.1.0 (generation 2) in "
        ),
        "{reloaded}"
    );
    watch.send(r#"ghost {"name": "Ada"}"#);
    watch.expect_line("the rebuild's answer", |l| l == "Hi there, Ada!");
    let logged = watch.logged();
    assert!(
        logged.iter().all(|l| !l.contains("ghost.so")),
        "reported once, not again in the log: {logged:?}"
    );
}

/// The description `tools/list` gives `name`, waiting (at most 60 s: a notice of an earlier
/// change may come first) until it is `expected`.
async fn listed_description(
    client: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
    name: &str,
    expected: &str,
) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let tools = client.list_all_tools().await.expect("tools/list");
        let found = tools
            .iter()
            .find(|t| t.name == name)
            .and_then(|t| t.description.as_deref().map(str::to_owned));
        if found.as_deref() == Some(expected) {
            return;
        }
        assert!(Instant::now() < deadline, "{name}: {found:?}; {tools:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The next line of the server's log that mentions `file`.
fn logged_line(server: &HttpServer, file: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match server.stderr.recv_timeout(left) {
            Ok(line) if line.contains(file) => return line,
            Ok(line) => seen.push(line),
            Err(_) => panic!("no line about {file}; saw {seen:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg(unix)]
async fn a_crate_made_while_serve_mcp_runs_is_listed_with_each_builds_description() {
    let root = root_with_plugin_api();
    let server = HttpServer::start(&root, &["--allow-writes-without-token"]);
    let _ = rustls::crypto::ring::default_provider().install_default();
    let transport = rmcp::transport::StreamableHttpClientTransport::from_uri(server.url.clone());
    let client = ().serve(transport).await.expect("initialize");
    let names: Vec<String> = client
        .list_all_tools()
        .await
        .expect("tools/list")
        .into_iter()
        .map(|t| t.name.into_owned())
        .collect();
    assert!(!names.contains(&"spook".to_owned()), "{names:?}");

    let dir = new_crate(&root, "spook");
    let line = logged_line(&server, "spook.so");
    assert!(
        line.starts_with("cannot load usr/tools/spook.so [layer usr]: "),
        "{line}"
    );
    let build = dir.clone();
    tokio::task::spawn_blocking(move || cargo_build(&build))
        .await
        .unwrap();
    let line = logged_line(&server, "spook.so");
    assert!(
        line.starts_with("loaded usr/tools/spook.so [layer usr]: 0.1.0 (generation 1) in "),
        "{line}"
    );
    listed_description(&client, "spook", "Greets someone by name.").await;

    edit(
        &dir,
        "Cargo.toml",
        "description = \"Greets someone by name.\"",
        "description = \"Greets a guest by name, warmly.\"",
    );
    let build = dir.clone();
    tokio::task::spawn_blocking(move || cargo_build(&build))
        .await
        .unwrap();
    let line = logged_line(&server, "spook.so");
    assert!(
        line.starts_with("reloaded usr/tools/spook.so [layer usr]: 0.1.0 (generation 1) -> "),
        "{line}"
    );
    listed_description(&client, "spook", "Greets a guest by name, warmly.").await;
    client.cancel().await.expect("close");
}

/// `toolhost dev` in `root`, building with the workspace's build folder on one core (as
/// [`cargo_build`] does: its cargo inherits this environment).
fn start_dev(root: &TestRoot, args: &[&str]) -> WatchProcess {
    let shared = build_dir().parent().expect("target folder").to_owned();
    let mut command = Command::new(toolhost_tests::toolhost_bin());
    command
        .arg("dev")
        .args(args)
        .env_remove("CARGO_TARGET_DIR")
        .env("CARGO_BUILD_BUILD_DIR", shared)
        .env("CARGO_BUILD_JOBS", "1");
    // A first build compiles the crate itself (its dependencies are built already).
    WatchProcess::spawn(root, command, Duration::from_secs(300))
}

#[test]
#[cfg(unix)] // the layer's link is a symbolic link
fn dev_builds_each_saved_crate_keeps_the_last_good_build_and_finds_crates_made_meanwhile() {
    let root = root_with_plugin_api();
    let dir = new_crate(&root, "quill");
    let mut dev = start_dev(&root, &[]);
    dev.expect_line("the first build", |l| {
        l.starts_with("built usr/tools/quill in ")
    });
    dev.send(r#"quill {"name": "Ada"}"#);
    dev.expect_line("the first build's answer", |l| l == "Hello, Ada!");

    // A save as `sed -i` makes it (a temporary file renamed over the source): built once,
    // reloaded and answered with no cargo run by hand.
    let text = std::fs::read_to_string(dir.join("src/lib.rs")).unwrap();
    let temporary = dir.join("src/sedq8Zx1K");
    std::fs::write(
        &temporary,
        text.replace("\"Hello, {}!\"", "\"Hi there, {}!\""),
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(30));
    std::fs::rename(&temporary, dir.join("src/lib.rs")).unwrap();
    // Two lines, in either order: the build's, and the host's reload line.
    let mut lines: Vec<String> = (0..2)
        .map(|_| dev.expect_line("about the save's build", |l| l.contains("usr/tools/quill")))
        .collect();
    lines.sort();
    assert!(
        lines[0].starts_with("built usr/tools/quill in ") && lines[0].ends_with(" ms later"),
        "{lines:?}"
    );
    assert!(
        lines[1].starts_with("reloaded usr/tools/quill.so [layer usr]: 0.1.0 (generation 1) -> "),
        "{lines:?}"
    );
    dev.send(r#"quill {"name": "Ada"}"#);
    dev.expect_line("the new answer", |l| l == "Hi there, Ada!");

    // A save that does not compile: cargo's error is shown, the last good build serves.
    edit(
        &dir,
        "src/lib.rs",
        "\"Hi there, {}!\"",
        "\"Hi there, {}!\" +",
    );
    dev.expect_line("the failed build", |l| {
        l == "build of usr/tools/quill failed (cargo's errors are above): the last good build \
              keeps serving"
    });
    let logged = dev.logged().join("\n");
    assert!(
        logged.contains("error"),
        "cargo's errors on stderr: {logged}"
    );
    dev.send(r#"quill {"name": "Ada"}"#);
    dev.expect_line("the last good build's answer", |l| l == "Hi there, Ada!");

    // A crate made while dev runs is found and built without a cargo run by hand.
    new_crate(&root, "inkpot");
    dev.expect_line("the new crate's build", |l| {
        l.starts_with("built usr/tools/inkpot in ")
    });
    dev.send(r#"inkpot {"name": "Grace"}"#);
    dev.expect_line("the new crate's answer", |l| l == "Hello, Grace!");

    dev.send("/quit");
    assert!(dev.child.wait().expect("wait").success());
    // One build per save: cargo's own reads and writes are not saves.
    let printed = dev.printed();
    let builds = |name: &str| {
        let built = format!("built usr/tools/{name} in ");
        printed.iter().filter(|l| l.starts_with(&built)).count()
    };
    assert_eq!((builds("quill"), builds("inkpot")), (2, 1), "{printed:#?}");
}

#[test]
fn dev_in_the_repository_builds_no_built_in_crate() {
    let root = root_with_plugin_api();
    // A built-in as in the repository: core/tools/NAME.so beside its crate core/tools/NAME/
    // (a workspace member, built by `cargo xtask install`). Its Cargo.toml does not parse: a
    // build of it would fail at once and say so.
    root.tool("core", "builtin", toolhost_tests::Fixture::Echo);
    root.write("core/tools/builtin/Cargo.toml", "not a manifest");
    let mut dev = start_dev(&root, &[]);
    dev.expect_line("announcing the tools", |l| l.starts_with("watching "));
    std::thread::sleep(Duration::from_secs(3));
    dev.send("/quit");
    assert!(dev.child.wait().expect("wait").success());
    let printed = dev.printed();
    assert!(
        !printed.iter().any(|l| l.contains("core/tools/builtin")),
        "{printed:#?}"
    );
}

#[test]
fn dev_names_a_folder_without_a_cargo_toml_and_exits_2() {
    let root = root_with_plugin_api();
    let out = Command::new(toolhost_tests::toolhost_bin())
        .arg("--root")
        .arg(root.path())
        .args(["dev", "no/such/crate"])
        .output()
        .expect("toolhost dev");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.trim(),
        "error: toolhost dev no/such/crate: no Cargo.toml there (name the folder of a plugin crate)"
    );
}
