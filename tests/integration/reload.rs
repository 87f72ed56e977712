//! Live reload: real rebuilds swapped in under a watching host, with bounded waits.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use toolhost::output::Silent;
use toolhost::{Agent, Generations, Host, ReloadEvent, Served, Watcher};
use toolhost_tests::{wait_for, wait_for_value, Fixture, TestRoot};

const TOOL: &str = "usr/tools/ver.so";

/// A watching host over a test root, with a runtime to call it from.
struct Live {
    root: TestRoot,
    host: Arc<Host>,
    events: mpsc::Receiver<ReloadEvent>,
    /// Events received and not yet passed over by [`Live::wait_event`].
    unread: Mutex<VecDeque<ReloadEvent>>,
    /// Every event received, as printed: said when a wait fails.
    history: Mutex<Vec<String>>,
    runtime: tokio::runtime::Runtime,
    _watcher: Watcher,
}

impl Live {
    fn new(root: TestRoot) -> Self {
        let host = root.host();
        let events = host.subscribe();
        let watcher = host.watch().expect("watch");
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        Self {
            root,
            host,
            events,
            unread: Mutex::default(),
            history: Mutex::default(),
            runtime,
            _watcher: watcher,
        }
    }

    fn agent(&self, profile: &str) -> Arc<Agent> {
        Agent::with_output(self.host.clone(), "A0", profile, Arc::new(Silent)).expect("agent")
    }

    /// The message of calling `request` with `args`, or the error's text.
    fn call(&self, profile: &str, request: &str, args: Value) -> String {
        let agent = self.agent(profile);
        match self.runtime.block_on(agent.call_tool(request, args)) {
            Ok(r) => r.message,
            Err(e) => format!("error: {e}"),
        }
    }

    /// Waits until calling `request` answers `expected`. If it never does, says what it
    /// answered, why any file of that name was skipped, and every reload event so far.
    fn wait_answer(&self, profile: &str, request: &str, expected: &str) {
        let what = format!("{request} to answer {expected}");
        wait_for(&what, || {
            let answer = self.call(profile, request, json!({}));
            if answer == expected {
                return Ok(());
            }
            let skipped: Vec<String> = (self.host.resolve(profile, request).skipped.iter())
                .map(ToString::to_string)
                .collect();
            self.receive();
            let history = self.history.lock().unwrap().clone();
            Err(format!(
                "answer {answer:?}; skipped {skipped:?}; reload events {history:?}"
            ))
        });
    }

    /// Moves the events sent so far into `unread` and `history`.
    fn receive(&self) {
        let mut unread = self.unread.lock().unwrap();
        while let Ok(event) = self.events.try_recv() {
            self.history.lock().unwrap().push(event.to_string());
            unread.push_back(event);
        }
    }

    /// The next event that `pick` accepts; others are skipped.
    fn wait_event<T>(&self, what: &str, mut pick: impl FnMut(&ReloadEvent) -> Option<T>) -> T {
        let mut seen = Vec::new();
        wait_for(what, || {
            self.receive();
            loop {
                let next = self.unread.lock().unwrap().pop_front();
                let Some(event) = next else { break };
                if let Some(v) = pick(&event) {
                    return Ok(v);
                }
                seen.push(event.to_string());
            }
            Err(seen.clone())
        })
    }

    fn extensions_seen(&self) -> Value {
        let answer = self.call("default", "echo", json!({}));
        let args: Value = serde_json::from_str(&answer).unwrap_or(Value::Null);
        args.get("seen_by").cloned().unwrap_or(json!([]))
    }
}

fn served(version: &str, generation: u64) -> Served {
    Served {
        version: version.to_owned(),
        generation,
    }
}

#[test]
fn a_build_renamed_into_place_is_live_at_once() {
    let root = TestRoot::new();
    root.copy(Fixture::Versioned, TOOL);
    let live = Live::new(root);
    assert_eq!(live.call("default", "ver", json!({})), "v1");

    live.root.replace(TOOL, Fixture::VersionedV2);

    live.wait_answer("default", "ver", "v2");
    let (old, new) = live.wait_event("the reload event", |e| match e {
        ReloadEvent::Loaded { old, new, .. } if old.is_some() => Some((old.clone(), new.clone())),
        _ => None,
    });
    assert_eq!(old, Some(served("0.1.0", 1)));
    assert_eq!(new, served("0.2.0", 2));
}

#[test]
fn cargos_delete_and_hard_link_is_picked_up() {
    let root = TestRoot::new();
    root.copy(Fixture::Versioned, TOOL);
    let live = Live::new(root);
    assert_eq!(live.call("default", "ver", json!({})), "v1");

    live.root.replace_like_cargo(TOOL, Fixture::VersionedV2);
    live.wait_answer("default", "ver", "v2");

    live.root.replace_like_cargo(TOOL, Fixture::Versioned);
    live.wait_answer("default", "ver", "v1");
}

#[test]
fn a_library_linked_to_a_build_output_reloads_when_cargo_rewrites_the_output() {
    // The development loop: `usr/tools/ver.so` is a symbolic link to the crate's build output.
    let root = TestRoot::new();
    let output = root.copy(Fixture::Versioned, "target/debug/libver.so");
    std::fs::create_dir_all(root.path().join("usr/tools")).unwrap();
    std::os::unix::fs::symlink(&output, root.path().join(TOOL)).unwrap();
    let live = Live::new(root);
    assert_eq!(live.call("default", "ver", json!({})), "v1");

    live.root
        .replace_like_cargo("target/debug/libver.so", Fixture::VersionedV2);

    live.wait_answer("default", "ver", "v2");
}

#[test]
fn an_override_added_then_removed() {
    let root = TestRoot::new();
    root.copy(Fixture::Versioned, "core/tools/ver.so");
    let live = Live::new(root);
    assert_eq!(live.call("dev", "ver", json!({})), "v1");

    // The profile's folder does not exist yet: the watcher sees it created.
    let profile_tool = "usr/agents/dev/tools/ver.so";
    live.root.replace(profile_tool, Fixture::VersionedV2);
    live.wait_answer("dev", "ver", "v2");
    assert_eq!(live.call("default", "ver", json!({})), "v1");

    std::fs::remove_file(live.root.path().join(profile_tool)).unwrap();
    live.wait_answer("dev", "ver", "v1");
    live.wait_event("the removal event", |e| match e {
        ReloadEvent::Removed { path } if path.ends_with(profile_tool) => Some(()),
        _ => None,
    });
}

#[test]
fn a_plugin_dropped_into_a_new_user_folder_is_callable() {
    let root = TestRoot::new();
    let live = Live::new(root);
    assert!(live.host.resolve("default", "echo").found.is_none());

    live.root.replace("usr/tools/echo.so", Fixture::Echo);

    live.wait_event("echo to be loaded", |e| match e {
        ReloadEvent::Loaded {
            path, old: None, ..
        } if path.ends_with("usr/tools/echo.so") => Some(()),
        _ => None,
    });
    assert_eq!(live.call("default", "echo", json!({"a": 1})), r#"{"a":1}"#);
}

#[test]
fn extensions_added_renamed_and_removed() {
    const POINT: &str = "tool_execute_before";
    let root = TestRoot::new();
    root.tool("core", "echo", Fixture::Echo);
    root.extension("usr", POINT, "_20_b", Fixture::RecorderExt);
    let live = Live::new(root);
    assert_eq!(live.extensions_seen(), json!([format!("{POINT}/_20_b")]));
    let ext = |name: &str| format!("usr/extensions/{POINT}/{name}.so");

    live.root.replace(&ext("_10_a"), Fixture::RecorderExt);
    let expected = json!([format!("{POINT}/_10_a"), format!("{POINT}/_20_b")]);
    wait_for_value("_10_a to run first", expected, || live.extensions_seen());

    let dir = live.root.path().join(format!("usr/extensions/{POINT}"));
    std::fs::rename(dir.join("_20_b.so"), dir.join("_05_c.so")).unwrap();
    let expected = json!([format!("{POINT}/_05_c"), format!("{POINT}/_10_a")]);
    wait_for_value(
        "the renamed extension to run at its new place",
        expected,
        || live.extensions_seen(),
    );

    std::fs::remove_file(dir.join("_10_a.so")).unwrap();
    let expected = json!([format!("{POINT}/_05_c")]);
    wait_for_value("the removed extension to stop", expected, || {
        live.extensions_seen()
    });
}

#[test]
fn a_broken_rebuild_keeps_the_last_good_version_until_it_is_fixed() {
    let root = TestRoot::new();
    root.copy(Fixture::Versioned, TOOL);
    let live = Live::new(root);
    assert_eq!(live.call("default", "ver", json!({})), "v1");
    let v2 = std::fs::read(Fixture::VersionedV2.path()).unwrap();

    for (broken, why) in [
        (v2[..v2.len() / 2].to_vec(), "truncated"),
        (
            std::fs::read(Fixture::InitPanic.path()).unwrap(),
            "panics at init",
        ),
        (
            std::fs::read(Fixture::FutureVersion.path()).unwrap(),
            "incompatible",
        ),
    ] {
        live.root.replace_bytes(TOOL, &broken);
        let kept = live.wait_event(&format!("the {why} build to fail"), |e| match e {
            ReloadEvent::Failed { kept, .. } => Some(kept.clone()),
            _ => None,
        });
        assert_eq!(kept, Some(served("0.1.0", 1)), "{why}");
        assert_eq!(live.call("default", "ver", json!({})), "v1", "{why}");
    }

    live.root.replace(TOOL, Fixture::VersionedV2);
    live.wait_answer("default", "ver", "v2");
}

#[test]
fn a_file_written_in_place_is_never_loaded_half_written() {
    let root = TestRoot::new();
    root.copy(Fixture::Versioned, TOOL);
    let live = Live::new(root);
    assert_eq!(live.call("default", "ver", json!({})), "v1");
    let v2 = std::fs::read(Fixture::VersionedV2.path()).unwrap();
    let path = live.root.path().join(TOOL);

    // Half the new build, then a pause longer than the debounce, then the rest.
    std::fs::write(&path, &v2[..v2.len() / 2]).unwrap();
    live.wait_event("the half-written file to be refused", |e| match e {
        ReloadEvent::Failed { kept: Some(_), .. } => Some(()),
        _ => None,
    });
    assert_eq!(live.call("default", "ver", json!({})), "v1");
    std::fs::write(&path, &v2).unwrap();

    live.wait_answer("default", "ver", "v2");
}

#[test]
fn identical_bytes_are_not_loaded_again() {
    let root = TestRoot::new();
    let path = root.copy(Fixture::Versioned, TOOL);
    let host = root.host();
    let agent = Agent::with_output(host.clone(), "A0", "default", Arc::new(Silent)).unwrap();
    toolhost_tests::block_on(agent.call_tool("ver", json!({}))).unwrap();
    assert_eq!(host.generations().loaded, 1);

    // Same bytes, new inode and time (cargo's hard link after a no-op relink).
    root.replace_like_cargo(TOOL, Fixture::Versioned);
    host.files_changed(std::slice::from_ref(&path));
    assert_eq!(host.generations().loaded, 1);

    root.replace_like_cargo(TOOL, Fixture::VersionedV2);
    host.files_changed(std::slice::from_ref(&path));
    assert_eq!(host.generations().loaded, 2);
}

#[test]
fn a_running_call_finishes_on_its_generation_which_then_shuts_down() {
    let root = TestRoot::new();
    root.copy(Fixture::Versioned, TOOL);
    let live = Live::new(root);
    let agent = live.agent("default");
    let tid = live.call("default", "ver:runtime_thread", json!({}));
    let thread = Path::new("/proc/self/task").join(&tid);
    assert!(thread.exists(), "v1's runtime thread {tid}");

    let running = {
        let agent = agent.clone();
        live.runtime
            .spawn(async move { agent.call_tool("ver:sleep", json!({"ms": 1500})).await })
    };
    // The call holds v1 once it is the agent's current tool (set after the lookup). It sleeps
    // long enough for the reload below to be served on a busy machine while it still runs.
    wait_for("the call to start on v1", || {
        agent
            .current_tool()
            .filter(|t| t == "ver:sleep")
            .ok_or("not yet")
    });
    live.root.replace(TOOL, Fixture::VersionedV2);
    live.wait_answer("default", "ver", "v2");

    // v2 serves new calls while the running call still holds v1 and its runtime.
    assert!(thread.exists(), "v1's runtime stopped under a running call");
    let answer = live.runtime.block_on(running).unwrap().unwrap();
    assert_eq!(answer.message, "v1");

    // The last call of v1 has ended: its shutdown hook stops its runtime thread.
    wait_for("v1's runtime thread to stop", || {
        if thread.exists() {
            Err(live.host.generations())
        } else {
            Ok(())
        }
    });
    wait_for_value(
        "the count of live generations to drop",
        Generations { loaded: 2, live: 1 },
        || live.host.generations(),
    );
}

#[test]
fn a_reload_storm_fails_no_call() {
    let root = TestRoot::new();
    root.copy(Fixture::Versioned, TOOL);
    let live = Live::new(root);
    assert_eq!(live.call("default", "ver", json!({})), "v1");
    let stop = Arc::new(AtomicBool::new(false));
    let calls = Arc::new(AtomicUsize::new(0));
    let callers: Vec<_> = (0..4)
        .map(|_| {
            let agent = live.agent("default");
            let (stop, calls) = (stop.clone(), calls.clone());
            live.runtime.spawn(async move {
                let mut failures = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    match agent.call_tool("ver", json!({})).await {
                        Ok(r) if r.message == "v1" || r.message == "v2" => {}
                        Ok(r) => failures.push(format!("answer {}", r.message)),
                        Err(e) => failures.push(e.to_string()),
                    }
                    calls.fetch_add(1, Ordering::Relaxed);
                    tokio::task::yield_now().await;
                }
                failures
            })
        })
        .collect();

    for i in 0..50 {
        let fixture = if i % 2 == 0 {
            Fixture::VersionedV2
        } else {
            Fixture::Versioned
        };
        if i % 3 == 0 {
            live.root.replace_like_cargo(TOOL, fixture);
        } else {
            live.root.replace(TOOL, fixture);
        }
        if i % 5 == 0 {
            // Every fifth swap is served before the storm goes on, so at least ten builds are
            // loaded however busy the machine is (the watcher merges a burst of swaps into one
            // load, and a busy machine makes the bursts longer).
            let version = if i % 2 == 0 { "v2" } else { "v1" };
            live.wait_answer("default", "ver", version);
        } else {
            std::thread::sleep(Duration::from_millis(15));
        }
    }
    // The last swap put v1 in place.
    live.wait_answer("default", "ver", "v1");
    stop.store(true, Ordering::Relaxed);
    for caller in callers {
        let failures = live.runtime.block_on(caller).unwrap();
        assert!(
            failures.is_empty(),
            "{} failed calls, the first: {:?}",
            failures.len(),
            &failures[..failures.len().min(2)]
        );
    }
    assert!(calls.load(Ordering::Relaxed) > 100);
    let generations = live.host.generations();
    assert!(generations.loaded >= 10, "{generations:?}");
    // Old generations are shut down once no call holds them.
    wait_for_value("old generations to shut down", 1, || {
        live.host.generations().live
    });
}

#[test]
fn switching_a_plugin_off_and_on_moves_the_tool_between_layers() {
    let root = TestRoot::new();
    root.copy(Fixture::Versioned, "core/tools/ver.so");
    root.copy(Fixture::VersionedV2, "plugins/web/tools/ver.so");
    let live = Live::new(root);
    assert_eq!(live.call("default", "ver", json!({})), "v2");

    let toggle = live.root.write("plugins/web/.toggle-0", "");
    live.wait_answer("default", "ver", "v1");

    std::fs::remove_file(toggle).unwrap();
    live.wait_answer("default", "ver", "v2");
}

/// `ver` v1 in core, overridden by v2 in profiles `dev` and `ops`, each called once.
fn two_profiles_over_core() -> Live {
    let root = TestRoot::new();
    root.copy(Fixture::Versioned, "core/tools/ver.so");
    root.copy(Fixture::VersionedV2, "usr/agents/dev/tools/ver.so");
    root.copy(Fixture::VersionedV2, "usr/agents/ops/tools/ver.so");
    let live = Live::new(root);
    assert_eq!(live.call("dev", "ver", json!({})), "v2");
    assert_eq!(live.call("ops", "ver", json!({})), "v2");
    live
}

#[test]
fn removing_or_renaming_a_profile_folder_falls_back() {
    let live = two_profiles_over_core();

    std::fs::remove_dir_all(live.root.path().join("usr/agents/dev")).unwrap();
    live.wait_answer("dev", "ver", "v1");

    // A rename reports no event for the files inside, only for the folder.
    let agents = live.root.path().join("usr/agents");
    std::fs::rename(agents.join("ops"), agents.join("ops-old")).unwrap();
    live.wait_answer("ops", "ver", "v1");
}

#[test]
fn a_folder_removed_just_after_another_change_falls_back() {
    let live = two_profiles_over_core();
    let debounce = live.host.options().debounce;

    // An unrelated change (as the first call's `usr/audit/` is) is handled while the folder is
    // already gone but before the folder's own events come: the watcher finds it gone then.
    live.root.write("usr/notes.md", "one");
    std::thread::sleep(debounce / 2);
    std::fs::remove_dir_all(live.root.path().join("usr/agents/dev")).unwrap();
    live.wait_answer("dev", "ver", "v1");

    // The same for a `tools` folder inside a profile folder that stays.
    live.root.write("usr/notes.md", "two");
    std::thread::sleep(debounce / 2);
    std::fs::remove_dir_all(live.root.path().join("usr/agents/ops/tools")).unwrap();
    live.wait_answer("ops", "ver", "v1");
}

#[test]
fn a_folder_removed_and_recreated_at_once_is_still_watched() {
    let root = TestRoot::new();
    root.copy(Fixture::Versioned, "usr/agents/dev/tools/ver.so");
    let live = Live::new(root);
    assert_eq!(live.call("dev", "ver", json!({})), "v1");

    // Faster than the debounce: the watcher sees the folder change once.
    let dir = live.root.path().join("usr/agents/dev/tools");
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(Fixture::VersionedV2.path(), dir.join("ver.so")).unwrap();
    live.wait_answer("dev", "ver", "v2");

    // Later changes in the new folder are still seen.
    live.root
        .replace("usr/agents/dev/tools/ver.so", Fixture::Versioned);
    live.wait_answer("dev", "ver", "v1");
}

#[test]
fn a_link_made_before_the_first_build_follows_the_builds() {
    let root = TestRoot::new();
    std::fs::create_dir_all(root.path().join("usr/tools")).unwrap();
    std::fs::create_dir_all(root.path().join("target/debug")).unwrap();
    let output = root.path().join("target/debug/libver.so");
    std::os::unix::fs::symlink("../../target/debug/libver.so", root.path().join(TOOL)).unwrap();
    let live = Live::new(root);

    std::fs::copy(Fixture::Versioned.path(), &output).unwrap();
    live.wait_answer("default", "ver", "v1");

    live.root
        .replace_like_cargo("target/debug/libver.so", Fixture::VersionedV2);
    live.wait_answer("default", "ver", "v2");
}

#[test]
fn a_profile_folder_that_is_a_link_is_watched() {
    let root = TestRoot::new();
    let elsewhere = TestRoot::new();
    elsewhere.copy(Fixture::Versioned, "dev/tools/ver.so");
    std::fs::create_dir_all(root.path().join("usr/agents")).unwrap();
    std::os::unix::fs::symlink(
        elsewhere.path().join("dev"),
        root.path().join("usr/agents/dev"),
    )
    .unwrap();
    let live = Live::new(root);
    assert_eq!(live.call("dev", "ver", json!({})), "v1");

    elsewhere.replace("dev/tools/ver.so", Fixture::VersionedV2);
    live.wait_answer("dev", "ver", "v2");
}

#[test]
fn a_switched_off_plugin_is_not_loaded_when_rebuilt() {
    let root = TestRoot::new();
    root.copy(Fixture::Versioned, "core/tools/ver.so");
    root.write("plugins/web/.toggle-0", "");
    let live = Live::new(root);
    assert_eq!(live.call("default", "ver", json!({})), "v1");

    live.root
        .replace("plugins/web/tools/ver.so", Fixture::VersionedV2);
    // A later change elsewhere marks the point by which the first was handled.
    live.root
        .write("core/prompts/agent.system.tool.ver.md", "ver");
    live.wait_event("the prompt change", |e| match e {
        ReloadEvent::Changed { path } if path.ends_with("agent.system.tool.ver.md") => Some(()),
        _ => None,
    });
    assert_eq!(live.host.generations().loaded, 1);
    assert_eq!(live.call("default", "ver", json!({})), "v1");
}

/// What the host logs at warning level while `f` runs on this thread.
fn warnings_during(f: impl FnOnce()) -> Vec<String> {
    #[derive(Clone, Default)]
    struct Buffer(Arc<std::sync::Mutex<Vec<u8>>>);
    impl std::io::Write for Buffer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let buffer = Buffer::default();
    let writer = buffer.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::WARN)
        .with_ansi(false)
        .without_time()
        .with_writer(move || writer.clone())
        .finish();
    tracing::subscriber::with_default(subscriber, f);
    let text = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
    text.lines().map(str::to_owned).collect()
}

#[test]
fn a_failed_rebuild_is_one_clear_line_and_generations_warn_past_the_limit() {
    let root = TestRoot::new();
    let path = root.copy(Fixture::Versioned, TOOL);
    let host = Arc::new(
        Host::with_options(
            root.path(),
            toolhost::HostOptions::default().with_warn_generations(3),
        )
        .unwrap(),
    );
    let warnings = warnings_during(|| {
        host.resolve("default", "ver");
        for fixture in [
            Fixture::VersionedV2,
            Fixture::Versioned,
            Fixture::VersionedV2,
        ] {
            root.replace(TOOL, fixture);
            host.files_changed(std::slice::from_ref(&path));
        }
    });
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    // Four loads with a threshold of 3: one warning, at the third.
    assert!(
        warnings[0].contains("3 library generations have been loaded"),
        "{warnings:?}"
    );

    let warnings = warnings_during(|| {
        root.replace_bytes(TOOL, b"not a library");
        host.files_changed(std::slice::from_ref(&path));
    });
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    let line = &warnings[0];
    assert!(line.contains(&path.display().to_string()), "{line}");
    assert!(
        line.contains("still serving 0.2.0 (generation 4)"),
        "{line}"
    );
    assert!(line.contains("rebuild it or remove it"), "{line}");
}

/// Writes a prompt fragment and waits for its event: by then the watcher has most likely seen
/// what was done before (events of one debounce period may come in any order), so the next
/// step is made after the previous one was looked at.
fn handled(live: &Live, step: usize) {
    let file = format!("usr/prompts/agent.system.step{step}.md");
    live.root.write(&file, "step");
    live.wait_event("the step's prompt event", |e| match e {
        ReloadEvent::Changed { path } if path.ends_with(&file) => Some(()),
        _ => None,
    });
}

#[test]
fn a_link_whose_target_folders_appear_one_at_a_time_is_loaded_and_announced() {
    // `toolhost new` while a host watches: the link is there, the crate's folder too, but
    // not `target/` or `target/debug/`, which the first build makes one after the other.
    let root = TestRoot::new();
    for dir in ["usr/tools/ver", "usr/prompts"] {
        std::fs::create_dir_all(root.path().join(dir)).unwrap();
    }
    std::os::unix::fs::symlink("ver/target/debug/libver.so", root.path().join(TOOL)).unwrap();
    let live = Live::new(root);
    // A profile looked at, as `toolhost watch` does when it lists the tools.
    assert!(live
        .call("default", "ver", json!({}))
        .starts_with("error: "));
    for (step, dir) in ["usr/tools/ver/target", "usr/tools/ver/target/debug"]
        .into_iter()
        .enumerate()
    {
        std::fs::create_dir(live.root.path().join(dir)).unwrap();
        handled(&live, step);
    }
    live.root
        .copy(Fixture::Versioned, "usr/tools/ver/target/debug/libver.so");
    let report = live.wait_event("the first build's load", |e| match e {
        ReloadEvent::Loaded {
            path, old: None, ..
        } if path.ends_with(TOOL) => Some(e.report(live.host.root()).to_string()),
        _ => None,
    });
    assert!(
        report.starts_with("loaded usr/tools/ver.so [layer usr]: 0.1.0 (generation 1) in "),
        "{report}"
    );
    assert_eq!(live.call("default", "ver", json!({})), "v1");
    live.root
        .replace_like_cargo("usr/tools/ver/target/debug/libver.so", Fixture::VersionedV2);
    live.wait_event("the rebuild's reload", |e| match e {
        ReloadEvent::Loaded {
            path, old: Some(_), ..
        } if path.ends_with(TOOL) => Some(()),
        _ => None,
    });
    assert_eq!(live.call("default", "ver", json!({})), "v2");
}

#[test]
fn a_profile_folder_made_step_by_step_is_announced_and_its_tool_loaded() {
    let root = TestRoot::new();
    root.copy(Fixture::Versioned, "core/tools/ver.so");
    // `usr/` is there and watched from the start (a call's audit record may create it
    // otherwise, and a folder made in it before that is seen is looked at without an event).
    std::fs::create_dir_all(root.path().join("usr")).unwrap();
    let live = Live::new(root);
    assert_eq!(live.call("p1", "ver", json!({})), "v1");
    // Each folder's own event says the watcher saw it before the next one is made.
    let mut reports = Vec::new();
    for dir in ["usr/agents", "usr/agents/p1", "usr/agents/p1/tools"] {
        std::fs::create_dir(live.root.path().join(dir)).unwrap();
        live.wait_event("the new folder", |e| {
            reports.push(e.report(live.host.root()).to_string());
            match e {
                ReloadEvent::Changed { path } if path.ends_with(dir) => Some(()),
                _ => None,
            }
        });
    }
    let profile = "new profile 'p1': `--profile p1` uses it";
    if !reports.iter().any(|r| r == profile) {
        live.wait_event("the new profile", |e| {
            reports.push(e.report(live.host.root()).to_string());
            matches!(e, ReloadEvent::ProfileAdded { .. }).then_some(())
        });
    }
    assert_eq!(
        reports.iter().filter(|r| *r == profile).count(),
        1,
        "{reports:?}"
    );
    assert!(
        reports.iter().any(|r| r == "new folder usr/agents/p1"),
        "{reports:?}"
    );
    live.root
        .copy(Fixture::VersionedV2, "usr/agents/p1/tools/ver.so");
    let report = live.wait_event("the profile's tool", |e| match e {
        ReloadEvent::Loaded { path, .. } if path.ends_with("p1/tools/ver.so") => {
            Some(e.report(live.host.root()).to_string())
        }
        _ => None,
    });
    assert!(
        report.starts_with("loaded usr/agents/p1/tools/ver.so [layer usr/agents/p1]: 0.2.0"),
        "{report}"
    );
    assert_eq!(live.call("p1", "ver", json!({})), "v2");
    assert_eq!(live.call("default", "ver", json!({})), "v1");
}

/// `renameat2(from, to, RENAME_EXCHANGE)`: the two folders trade places in one step, as
/// `toolhost update` puts a new version in place.
#[cfg(target_os = "linux")]
fn exchange(from: &Path, to: &Path) {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &Path| CString::new(p.as_os_str().as_bytes()).unwrap();
    let (from, to) = (c(from), c(to));
    // SAFETY: two NUL-terminated paths, relative to no directory file descriptor.
    let done = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            from.as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    assert_eq!(done, 0, "{}", std::io::Error::last_os_error());
}

#[cfg(target_os = "linux")]
#[test]
fn a_plugin_folder_swapped_in_one_step_is_loaded_though_the_old_one_is_kept() {
    let root = TestRoot::new();
    root.copy(Fixture::Versioned, "usr/plugins/p/tools/ver.so");
    let live = Live::new(root);
    assert_eq!(live.call("default", "ver", json!({})), "v1");

    // The new version staged outside the layers, then swapped in; the old folder is kept
    // where the new one was, so the watch of its `tools/` folder sees nothing of the new one.
    let staged = live
        .root
        .copy(Fixture::VersionedV2, ".staging/p/tools/ver.so");
    let staged = staged.parent().and_then(Path::parent).unwrap().to_owned();
    exchange(&staged, &live.root.path().join("usr/plugins/p"));
    let (old, new) = live.wait_event("the new build's reload", |e| match e {
        ReloadEvent::Loaded { path, old, new, .. }
            if old.is_some() && path.ends_with("p/tools/ver.so") =>
        {
            Some((old.clone(), new.clone()))
        }
        _ => None,
    });
    assert_eq!((old, new), (Some(served("0.1.0", 1)), served("0.2.0", 2)));
    live.wait_answer("default", "ver", "v2");
    // The new folder's `tools/` is watched, not the old one's: a rebuild there is seen.
    live.root
        .replace("usr/plugins/p/tools/ver.so", Fixture::Versioned);
    live.wait_answer("default", "ver", "v1");
}
