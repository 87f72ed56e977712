//! The metadata cache (usr/.cache/metadata.json): `list` and the tools prompt show libraries
//! whose bytes the cache knows without loading them, and the same rows as a cold `list`.

use serde_json::{json, Value};
use toolhost::{Catalog, Host, LoadErrorKind, LIBRARY_EXTENSION};
use toolhost_tests::{block_on, Fixture, TestRoot};

fn root() -> TestRoot {
    let root = TestRoot::new();
    root.tool("core", "response", Fixture::Response);
    root.tool("usr", "echo", Fixture::Echo);
    root.tool("usr", "old", Fixture::FutureVersion);
    root.tool("usr", "layout", Fixture::IncompatibleLayout);
    root.tool("usr", "misplaced", Fixture::NoopExt);
    root.extension("usr", "tool_execute_after", "_10_noop", Fixture::NoopExt);
    root
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `toolhost -v list ARGS`: its output, and how many libraries it looked at through the loader
/// (its own debug line).
fn list(root: &TestRoot, args: &[&str]) -> (String, usize) {
    let out = root.run_cli(&[&["-v", "list"], args].concat());
    let (text, log) = (stdout(&out), stderr(&out));
    assert!(out.status.success(), "{text}{log}");
    let loads = log
        .lines()
        .find_map(|l| {
            let rest = l.split("list: ").nth(1)?;
            rest.strip_suffix(" libraries looked at through the loader")
                .or_else(|| rest.strip_suffix(" library looked at through the loader"))
        })
        .unwrap_or_else(|| panic!("no count in {log}"))
        .parse()
        .unwrap();
    (text, loads)
}

/// The rows of a catalog, for comparing a cold one with a warm one.
fn rows(catalog: &Catalog) -> Vec<String> {
    let tools = catalog.tools.iter().map(|t| {
        let info = serde_json::to_string(t.info()).unwrap();
        let ready = t.readiness().is_ready();
        let (package, version, contract) = (t.package(), t.version(), t.contract());
        format!(
            "{} {:?} {info} {package} {version} {contract} {ready}",
            t.name, t.path
        )
    });
    let extensions = catalog.extensions.iter().flat_map(|(point, run)| {
        run.iter()
            .map(move |e| format!("{point} {} {:?} {:?}", e.name, e.path, e.info))
    });
    let skipped = catalog.skipped.iter().map(|e| e.to_string());
    tools.chain(extensions).chain(skipped).collect()
}

#[test]
fn a_warm_list_loads_no_library_and_shows_what_a_cold_one_shows() {
    let root = root();
    let (cold, loads) = list(&root, &["--json"]);
    assert_eq!(loads, 6, "every library is loaded once: {cold}");
    assert!(root.path().join("usr/.cache/metadata.json").is_file());
    let (warm, loads) = list(&root, &["--json"]);
    assert_eq!(loads, 0, "a warm list loads nothing");
    assert_eq!(warm, cold);
    let v: Value = serde_json::from_str(&warm).unwrap();
    assert_eq!(v["tools"].as_array().unwrap().len(), 2, "{warm}");
    assert_eq!(v["skipped"].as_array().unwrap().len(), 3, "{warm}");
    // The text form too; `--load` loads everything and shows the same.
    let (text, loads) = list(&root, &[]);
    assert_eq!(loads, 0);
    let (loaded, loads) = list(&root, &["--load"]);
    assert_eq!(loads, 6);
    assert_eq!(text, loaded);
    assert!(text.contains("echo"), "{text}");

    // In one process: a second host maps no library, and lists the same rows.
    let first = Host::new(root.path()).unwrap();
    let cold = first.catalog("default");
    assert_eq!(cold.loads, 6);
    let second = Host::new(root.path()).unwrap();
    let warm = second.catalog("default");
    assert_eq!(warm.loads, 0);
    assert_eq!(second.generations().loaded, 0, "no library was mapped");
    assert_eq!(rows(&warm), rows(&cold));
    assert!(warm.tools.iter().all(|t| t.handle().is_none()));
    assert_eq!(
        second.tools_prompt("default"),
        first.tools_prompt("default")
    );
    assert_eq!(second.generations().loaded, 0, "nor by the tools prompt");
    // A call loads as always.
    let (agent, _) = root.agent("default");
    let r = block_on(agent.call_tool("response", json!({"text": "hi"}))).unwrap();
    assert_eq!(r.message, "hi");
}

#[test]
fn a_changed_library_is_read_again_and_shown_with_its_new_metadata() {
    let root = TestRoot::new();
    let rel = format!("usr/tools/versioned.{LIBRARY_EXTENSION}");
    root.copy(Fixture::Versioned, &rel);
    let (before, _) = list(&root, &["--json"]);
    let v: Value = serde_json::from_str(&before).unwrap();
    assert_eq!(v["tools"][0]["version"], "0.1.0");
    list(&root, &["--json"]);
    root.replace(&rel, Fixture::VersionedV2);
    let (after, loads) = list(&root, &["--json"]);
    assert_eq!(loads, 1);
    let v: Value = serde_json::from_str(&after).unwrap();
    assert_eq!(v["tools"][0]["version"], "0.2.0", "{after}");
    assert_eq!(v["tools"][0]["package"], "fx-versioned-v2");
    // Back to the first build: its bytes are known, so nothing is loaded.
    root.replace(&rel, Fixture::Versioned);
    let (again, loads) = list(&root, &["--json"]);
    assert_eq!((again, loads), (before, 0));
}

#[test]
fn a_corrupt_or_unwritable_cache_is_ignored() {
    let root = root();
    let (cold, _) = list(&root, &["--json"]);
    let cache = root.path().join("usr/.cache/metadata.json");
    std::fs::write(&cache, b"{\"format\": 1, \"files\": [not json").unwrap();
    let (text, loads) = list(&root, &["--json"]);
    assert_eq!((&text, loads), (&cold, 6));
    let rewritten: Value = serde_json::from_slice(&std::fs::read(&cache).unwrap()).unwrap();
    assert_eq!(rewritten["format"], 1);
    assert_eq!(list(&root, &["--json"]), (cold.clone(), 0));

    // A cache folder that cannot be made (a file is in the way): the command still works.
    std::fs::remove_dir_all(root.path().join("usr/.cache")).unwrap();
    root.write("usr/.cache", "not a folder");
    assert_eq!(list(&root, &["--json"]), (cold.clone(), 6));
    assert_eq!(list(&root, &["--json"]), (cold, 6));
}

#[test]
fn a_bad_library_is_skipped_with_the_same_reason_from_the_cache() {
    let root = root();
    let cold = Host::new(root.path()).unwrap().catalog("default");
    let warm = Host::new(root.path()).unwrap().catalog("default");
    assert_eq!(warm.loads, 0);
    let kinds: Vec<LoadErrorKind> = warm.skipped.iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        [
            LoadErrorKind::IncompatibleLayout,
            LoadErrorKind::WrongKind,
            LoadErrorKind::IncompatibleVersion
        ]
    );
    let lines = |c: &Catalog| c.skipped.iter().map(|e| e.to_string()).collect::<Vec<_>>();
    assert_eq!(lines(&warm), lines(&cold));
    assert!(lines(&warm).iter().all(|l| !l.contains('\n')));
    // The same bytes in an extensions folder are another role: loaded, and they run there.
    root.copy(
        Fixture::NoopExt,
        &format!("usr/extensions/monologue_start/_20_more.{LIBRARY_EXTENSION}"),
    );
    let host = Host::new(root.path()).unwrap();
    let more = host.catalog("default");
    assert_eq!(
        more.loads, 0,
        "the noop extension's bytes are known as an extension"
    );
    assert_eq!(more.extensions.len(), 2);
}

#[test]
fn a_tool_cached_as_not_ready_is_checked_again() {
    let root = TestRoot::new();
    root.tool("usr", "governed", Fixture::Governed);
    let (agent, _) = root.agent("default");
    block_on(agent.call_tool("governed:unready", json!({"city": "x"}))).unwrap();
    // This host holds the tool, which is not ready now: the cache records that.
    let catalog = agent.host().catalog("default");
    assert!(catalog.tools[0]
        .unavailable()
        .unwrap()
        .contains("not ready"));
    assert!(!agent.host().tools_prompt("default").contains("governed"));

    // A new host does not trust it: it loads the library and asks (a fresh copy is ready).
    let host = Host::new(root.path()).unwrap();
    let catalog = host.catalog("default");
    assert_eq!(catalog.loads, 1);
    assert!(catalog.tools[0].handle().is_some());
    assert_eq!(catalog.tools[0].unavailable(), None);
    assert!(host.tools_prompt("default").contains("governed"));
    // Ready when last loaded: the next host trusts the cache.
    let host = Host::new(root.path()).unwrap();
    assert_eq!(host.catalog("default").loads, 0);
    assert_eq!(host.generations().loaded, 0);
}

#[test]
fn pinning_refuses_an_unpinned_library_whose_bytes_the_cache_knows() {
    let root = TestRoot::new();
    root.tool("usr", "echo", Fixture::Echo);
    root.write("usr/toolhost.toml", "pinning = true\n");
    let out = root.run_cli(&["pin"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let (_, loads) = list(&root, &["--json"]);
    assert_eq!(loads, 1);
    // The same bytes under another name: known to the cache, but not pinned.
    root.tool("usr", "stranger", Fixture::Echo);
    let (text, loads) = list(&root, &["--json"]);
    assert_eq!(loads, 0);
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["tools"].as_array().unwrap().len(), 1, "{text}");
    assert_eq!(v["skipped"][0]["kind"], "unpinned", "{text}");
    assert!(v["skipped"][0]["reason"]
        .as_str()
        .unwrap()
        .contains("not pinned in usr/plugins.lock"));
    // Changed bytes under a pinned name are refused too.
    root.replace(
        &format!("usr/tools/echo.{LIBRARY_EXTENSION}"),
        Fixture::Response,
    );
    let (text, _) = list(&root, &["--json"]);
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["tools"].as_array().unwrap().len(), 0, "{text}");
    assert_eq!(v["skipped"].as_array().unwrap().len(), 2, "{text}");
}
