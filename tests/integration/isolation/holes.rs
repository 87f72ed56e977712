//! Isolation without holes: no plugin code runs in the host when isolation is asked for, also
//! for files that appear while it runs; a worker's end is read from its wait status and the
//! limits the host set, never from what the plugin writes; a grace kill fails only the call
//! that overran; memory limits too small to start are refused; answers are cut in the worker;
//! workers load sealed in-memory copies; constructors have a time limit.

use std::sync::mpsc;
use std::time::Duration;

use plugin_api::ErrorKind;
use serde_json::json;
use toolhost::LIBRARY_EXTENSION;
use toolhost::{Host, HostOptions, ReloadEvent};
use toolhost_tests::{block_on, wait_for, Fixture, TestRoot};

use super::wait_gone;
use crate::watch_mode::WatchProcess;

/// The next `Failed` event of `events` for a file named `name`.
fn failure_of(events: &mpsc::Receiver<ReloadEvent>, name: &str) -> String {
    loop {
        match events.recv_timeout(Duration::from_secs(20)) {
            Ok(ReloadEvent::Failed { error, .. })
                if error.path.file_stem().is_some_and(|s| s == name) =>
            {
                return error.reason;
            }
            Ok(ReloadEvent::Loaded { path, .. }) if path.file_stem().is_some_and(|s| s == name) => {
                panic!("{} loaded, but its constructor faults", path.display())
            }
            Ok(_) => {}
            Err(e) => panic!("no event for {name}: {e}"),
        }
    }
}

/// A file that appears while the host runs is loaded in a worker when isolation is asked for,
/// by the flag or by the config: its constructor's fault ends the worker, not this process
/// (which is the test: a load in this process would end the test binary).
#[test]
fn a_library_that_appears_while_the_host_runs_is_constructed_only_in_a_worker() {
    for (options, config) in [
        (HostOptions::default().with_isolate_all(true), ""),
        (HostOptions::default(), "isolate = [\"usr\"]\n"),
    ] {
        let root = TestRoot::new();
        root.tool("usr", "echo", Fixture::Echo);
        root.write("usr/toolhost.toml", config);
        let host = std::sync::Arc::new(Host::with_options(root.path(), options).unwrap());
        assert_eq!(host.list("default").tools.len(), 1);
        let events = host.subscribe();
        let path = root.tool("usr", "faulty", Fixture::SegvInit);
        host.files_changed(&[path]);
        let reason = failure_of(&events, "faulty");
        assert!(
            reason.contains("its worker process did not start: the plugin process died: SIGSEGV"),
            "{config}: {reason}"
        );
        let echo = super::handle(&host, "echo");
        assert!(echo.is_isolated(), "{config}");
    }
}

/// The same through `toolhost --isolate watch`: the host reports the fault and goes on.
#[test]
fn watch_isolate_survives_a_library_whose_constructor_faults_appearing() {
    let root = TestRoot::new();
    root.tool("usr", "echo", Fixture::Echo);
    let mut watch = WatchProcess::isolated(&root);
    watch.expect_line("the header", |l| l.starts_with("watching "));
    root.tool("usr", "faulty", Fixture::SegvInit);
    let line = watch.expect_line("the failure", |l| l.contains("faulty"));
    assert!(line.contains("SIGSEGV"), "{line}");
    watch.send("echo {\"still\": \"here\"}");
    watch.expect_line("echo", |l| l == r#"{"still":"here"}"#);
    watch.send("/quit");
    assert!(watch.child.wait().expect("wait").success());
}

/// What a plugin writes on its standard error does not name its end: a forged out-of-memory
/// or stack-overflow line before a segmentation fault or an `exit(3)`.
#[test]
fn the_cause_of_a_workers_end_comes_from_its_wait_status_not_its_output() {
    let root = TestRoot::new();
    root.tool("usr", "crashy", Fixture::Crashy);
    root.write("usr/toolhost.toml", "isolate = [\"crashy\"]\n");
    let (agent, _) = root.agent("default");
    for (method, expected) in [
        (
            "forge_segv",
            "the plugin process died: SIGSEGV (segmentation fault)",
        ),
        ("forge_exit", "the plugin process exited with code 3"),
    ] {
        let e = block_on(agent.call_tool(&format!("crashy:{method}"), json!({}))).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Internal, "{method}: {}", e.message());
        // The cause, then the sandbox the tool ran in.
        let message = e.message();
        assert!(message.starts_with(expected), "{method}: {message}");
        assert!(
            message.ends_with("granted: nothing; see `toolhost inspect` for its sandbox)"),
            "{message}"
        );
    }
}

/// A worker that aborts while a child it forked holds its pipes is reported as the abort (not
/// as its call's timeout), and the child is killed with it.
#[test]
fn a_worker_that_aborts_beside_a_forked_child_is_reported_as_the_abort() {
    let root = TestRoot::new();
    root.tool("usr", "crashy", Fixture::Crashy);
    // Sandboxed, it may fork and write its file where granted.
    let files = root.path().join("files");
    std::fs::create_dir(&files).unwrap();
    root.write(
        "usr/toolhost.toml",
        format!(
            "isolate = [\"crashy\"]\n\n[tools.crashy]\ntimeout_seconds = 60\ngrant = [\"exec\", \"write:{}\"]\n",
            files.display()
        ),
    );
    let (agent, _) = root.agent("default");
    let pid_file = files.join("child.pid");
    let args = json!({"pid_file": pid_file.to_str().unwrap()});
    let e = block_on(agent.call_tool("crashy:fork_abort", args)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Internal, "{}", e.message());
    assert!(
        e.message()
            .starts_with("the plugin process died: SIGABRT (aborted)")
            && e.message()
                .contains("(the tool ran sandboxed; granted: exec, write:"),
        "{}",
        e.message()
    );
    let child: u32 = std::fs::read_to_string(&pid_file).unwrap().parse().unwrap();
    wait_gone(child);
    let r = block_on(agent.call_tool("crashy", json!({}))).unwrap();
    assert_eq!(r.message, "ok");
}

/// A call that overran its deadline and its grace period gets its worker killed only once no
/// other call runs there: a call that was running on that worker meanwhile (and had no
/// deadline) still answers, and later calls go to a new worker.
#[test]
fn a_grace_kill_fails_only_the_call_that_overran() {
    let extra = "grace_ms = 100\n\n[tools.crashy]\ntimeout_seconds = 0.3\n";
    let root = super::root_with_crashy(extra);
    // Its worker is sandboxed: the files it waits for are in a folder granted to it.
    let files = root.path().join("files");
    std::fs::create_dir(&files).unwrap();
    root.write(
        "usr/toolhost.toml",
        format!("isolate = [\"crashy\"]\n\n[isolation]\nmemory_mb = 256\n{extra}grant = [\"write:{}\"]\n", files.display()),
    );
    let (agent, _) = root.agent("default");
    let handle = super::handle(agent.host(), "crashy");
    let pid = handle.worker_pid().expect("a worker");
    // A call with no deadline, on the same worker, waiting for a file.
    let gate = files.join("gate");
    let waiting = {
        let (agent, handle) = (agent.clone(), handle.clone());
        let args = json!({"wait_for": gate.to_str().unwrap()});
        std::thread::spawn(move || block_on(agent.execute_bare(&handle, &args)))
    };
    let started = files.join("gate.started");
    wait_for("the waiting call to start", || match started.exists() {
        true => Ok(()),
        false => Err(()),
    });
    let e = block_on(agent.call_tool("crashy:spin", json!({}))).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Timeout, "{}", e.message());
    // Once the grace period is over, the spinning worker serves no new call.
    wait_for("the worker to be retired", || match handle.worker_pid() {
        Some(p) if p == pid => Err(p),
        other => Ok(other),
    });
    std::fs::write(&gate, "").unwrap();
    let answer = waiting.join().unwrap().expect("the waiting call answers");
    assert_eq!(answer.message, "waited");
    wait_gone(pid);
    let next: u32 = block_on(agent.call_tool("crashy:pid", json!({})))
        .unwrap()
        .message
        .parse()
        .unwrap();
    assert_ne!(next, pid);
}

/// `memory_mb` below what a worker needs to start is refused when the configuration is read,
/// with one line naming the key and the least value; the least value starts a worker.
#[test]
fn a_memory_limit_too_small_for_a_worker_is_refused_with_the_minimum() {
    let min = toolhost::config::MIN_WORKER_MEMORY_MB;
    for small in [1, 16, min - 1] {
        let root = TestRoot::new();
        root.tool("usr", "crashy", Fixture::Crashy);
        let config = format!("isolate = [\"crashy\"]\n\n[isolation]\nmemory_mb = {small}\n");
        root.write("usr/toolhost.toml", config);
        let out = root.run_cli(&["call", "crashy"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{small}: {stderr}");
        assert!(
            stderr.contains(&format!("[isolation] memory_mb = {small}"))
                && stderr.contains(&format!("enough for a worker to start, {min} or more")),
            "{small}: {stderr}"
        );
        assert!(!stderr.contains("SIGSEGV"), "{stderr}");
    }
    let root = TestRoot::new();
    root.tool("usr", "crashy", Fixture::Crashy);
    root.write(
        "usr/toolhost.toml",
        format!("isolate = [\"crashy\"]\n\n[isolation]\nmemory_mb = {min}\n"),
    );
    let (agent, _) = root.agent("default");
    let r = block_on(agent.call_tool("crashy", json!({}))).unwrap();
    assert_eq!(r.message, "ok");
}

/// An isolated tool's long answer is cut to `max_output` in its worker: only that much crosses
/// the pipe, and the note says where it was cut.
#[test]
fn an_isolated_answer_is_cut_to_max_output_in_its_worker() {
    let root = super::root_with_crashy("\n[limits]\nmax_output = 1000\n");
    let (agent, _) = root.agent("default");
    let r = block_on(agent.call_tool("crashy:big", json!({"mib": 8}))).unwrap();
    let total = 8 << 20;
    assert!(
        r.message.starts_with(&"x".repeat(1000)),
        "{}",
        &r.message[..1100]
    );
    assert_eq!(
        &r.message[1000..],
        format!(
            "\n[... {} more bytes cut (of {total}) by the tool's worker process]",
            total - 1000
        )
    );
}

/// The library a worker maps is a sealed in-memory file (or, with file copies, a file already
/// removed): no copy is left in the host's private folders.
#[test]
fn workers_load_sealed_in_memory_copies_and_leave_no_file() {
    for file_copies in [false, true] {
        let root = TestRoot::new();
        root.tool("usr", "crashy", Fixture::Crashy);
        let mut options = HostOptions::default().with_isolate_all(true);
        options.file_copies = file_copies;
        let host = Host::with_options(root.path(), options).unwrap();
        let handle = super::handle(&host, "crashy");
        let pid = handle.worker_pid().expect("a worker");
        let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
        let library: Vec<&str> = maps
            .lines()
            .filter(|l| l.contains("crashy") || l.contains("memfd:toolhost"))
            .collect();
        assert!(!library.is_empty(), "{maps}");
        for line in &library {
            match file_copies {
                false => assert!(line.contains("/memfd:toolhost:crashy"), "{line}"),
                true => assert!(line.ends_with("(deleted)"), "{line}"),
            }
        }
        if !file_copies {
            // The descriptor the worker loaded from is sealed against writes.
            let fd = std::fs::read_dir(format!("/proc/{pid}/fd"))
                .unwrap()
                .filter_map(Result::ok)
                .find(|e| {
                    std::fs::read_link(e.path())
                        .is_ok_and(|t| t.to_string_lossy().contains("memfd:toolhost"))
                })
                .expect("the worker holds the in-memory copy");
            let file = std::fs::File::open(fd.path()).unwrap();
            let seals =
                unsafe { libc::fcntl(std::os::fd::AsRawFd::as_raw_fd(&file), libc::F_GET_SEALS) };
            assert!(seals & libc::F_SEAL_WRITE != 0, "seals {seals:#x}");
        }
        let host_pid = std::process::id();
        for parent in ["/dev/shm".into(), std::env::temp_dir()] {
            for dir in std::fs::read_dir(&parent).unwrap().filter_map(Result::ok) {
                let name = dir.file_name().to_string_lossy().into_owned();
                if name.starts_with(&format!("toolhost-{host_pid}-")) && dir.path().is_dir() {
                    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
                    assert!(left.is_empty(), "{}: {left:?}", dir.path().display());
                }
            }
        }
        drop(handle);
    }
}

/// A constructor that blocks is given up on after the init limit, in this process and in a
/// worker: `list` goes on and names the limit.
#[test]
fn a_constructor_that_sleeps_is_given_up_on_at_the_init_limit() {
    for isolated in [false, true] {
        let root = TestRoot::new();
        root.tool("usr", "echo", Fixture::Echo);
        root.tool("usr", "slow", Fixture::SlowInit);
        let options = HostOptions::default()
            .with_isolate_all(isolated)
            .with_init_timeout(Duration::from_millis(500));
        let host = Host::with_options(root.path(), options).unwrap();
        let listing = host.list("default");
        let names: Vec<&str> = listing.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["echo"], "isolated: {isolated}");
        let reason = &listing
            .skipped
            .iter()
            .find(|e| e.path.file_stem().is_some_and(|s| s == "slow"))
            .expect("slow is skipped")
            .reason;
        let expected = match isolated {
            false => "its constructor did not return within 0.5 s ([limits] init_seconds)",
            true => {
                "did not load its library and create its tool within 0.5 s ([limits] init_seconds"
            }
        };
        assert!(reason.contains(expected), "{reason}");
    }
}

/// `[limits] init_seconds` in `usr/toolhost.toml` sets the limit for `toolhost list`.
#[test]
fn init_seconds_in_the_config_limits_list() {
    let root = TestRoot::new();
    root.tool("usr", "slow", Fixture::SlowInit);
    root.write("usr/toolhost.toml", "[limits]\ninit_seconds = 0.5\n");
    let out = root.run_cli(&["list"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        format!("{stdout}{stderr}").contains("its constructor did not return within 0.5 s"),
        "{stdout}\n{stderr}"
    );
}

/// `watch` prints its header once its watcher runs: a library added right after it is seen.
#[test]
fn a_library_added_right_after_the_watch_header_is_loaded() {
    let root = TestRoot::new();
    root.tool("usr", "echo", Fixture::Echo);
    let watch = WatchProcess::start(&root);
    watch.expect_line("the header", |l| l.starts_with("watching "));
    root.tool("usr", "noop", Fixture::Noop);
    let noop = format!("noop.{LIBRARY_EXTENSION}");
    let line = watch.expect_line("noop loaded", |l| l.contains(&noop));
    assert!(line.starts_with("loaded "), "{line}");
}

/// A mistake in the config hides what its `isolate` says: the host fails closed and loads the
/// profile's libraries in workers, never in its own process.
#[test]
fn a_config_mistake_keeps_library_code_out_of_the_host() {
    let root = TestRoot::new();
    root.tool("usr", "echo", Fixture::Echo);
    root.tool("usr", "faulty", Fixture::SegvInit);
    root.write(
        "usr/toolhost.toml",
        "isolate = [\"usr\"]\n\n[calls]\ntimeout = 3\n",
    );
    let host = root.host();
    let listing = host.list("default");
    let reason = &listing
        .skipped
        .iter()
        .find(|e| e.path.file_stem().is_some_and(|s| s == "faulty"))
        .expect("faulty is skipped")
        .reason;
    assert!(reason.contains("SIGSEGV"), "{reason}");
    let echo = super::handle(&host, "echo");
    assert!(echo.is_isolated());
}
