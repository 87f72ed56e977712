//! A plugin granted nothing reaches nothing: not the host's limits, priority or scheduling,
//! not a secret it was not granted, not the host's environment, not the metadata of a file,
//! not unbounded memory, threads or processes, and no process of its outlives its worker.
//!
//! Each attack runs through a real hostile library twice: as the package `hostile` installed
//! by `toolhost add` (signed, packed and added as a user does) and as `iso` under
//! `isolate = [...]`. Where an attack is harmless to try on this test's own process, the same
//! library isolated without a sandbox (`loose`) shows that it works there, so the sandbox is
//! what stops it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

use plugin_api::ErrorKind;
use serde_json::{json, Value};
use toolhost::Agent;
use toolhost_tests::{block_on, toolhost_bin, Fixture, TestRoot};

use super::{alive, wait_gone};

const EPERM: &str = "(errno 1)";
const EACCES: &str = "(errno 13)";
/// The two ways code you did not write runs sandboxed: a package and `isolate`.
const SANDBOXED: [&str; 2] = ["hostile", "iso"];
/// The secrets of every root here.
const SECRETS: &str = "GRANTED_KEY=granted-value-1234\nOTHER_KEY=other-secret-5678\n";

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A root with the hostile tool as the package `hostile` (installed by `toolhost add`; its
/// manifest declares the secret `GRANTED_KEY`), as `iso` (isolated, granted
/// `secret:GRANTED_KEY` and `env:GRANTED_VAR`), as `exe` (isolated, granted `exec`) and as
/// `loose` (isolated, `sandbox = "off"`); `echo` in the host's process; the core's secret
/// extensions. `extra` is added to `usr/toolhost.toml`. Also returns what `add` printed.
fn confined_root(extra: &str) -> (TestRoot, String) {
    confined_root_with(extra, false)
}

/// [`confined_root`], the package shipping the hostile extension `_20_peek` at
/// `tool_execute_before` too if `peek` (it runs for every tool's call, after the core's
/// unmasking).
fn confined_root_with(extra: &str, peek: bool) -> (TestRoot, String) {
    let root = TestRoot::new();
    let work = tempfile::tempdir().unwrap();
    let keys = work.path().join("keys");
    let dir = keys.to_str().unwrap();
    ok(&root.run_cli(&["keygen", "--out", dir, "--name", "me", "--no-password"]));
    let folder = work.path().join("hostile");
    std::fs::create_dir_all(folder.join("tools")).unwrap();
    std::fs::copy(
        Fixture::Hostile.path(),
        folder.join(format!("tools/hostile.{}", toolhost::LIBRARY_EXTENSION)),
    )
    .unwrap();
    if peek {
        let point = folder.join("extensions/tool_execute_before");
        std::fs::create_dir_all(&point).unwrap();
        let file = format!("_20_peek.{}", toolhost::LIBRARY_EXTENSION);
        std::fs::copy(Fixture::PeekExt.path(), point.join(file)).unwrap();
    }
    std::fs::write(
        folder.join("toolhost-plugin.toml"),
        "name = \"hostile\"\nversion = \"0.1.0\"\ndescription = \"Tries what a sandbox must stop.\"\nauthors = [\"Mallory\"]\nlicense = \"MIT\"\nsecrets = [\"GRANTED_KEY\"]\n",
    )
    .unwrap();
    let out = work.path().join("out");
    let secret_key = keys.join("me.key");
    let packed = ok(&root.run_cli(&[
        "pack",
        folder.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--sign",
        secret_key.to_str().unwrap(),
    ]));
    let archive = packed
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("packed "))
        .and_then(|l| l.split(" (").next())
        .unwrap()
        .to_owned();
    ok(&root.run_cli(&["trust", "add", keys.join("me.pub").to_str().unwrap()]));
    let added = ok(&root.run_cli(&["add", &archive, "--yes"]));
    root.tool("usr", "iso", Fixture::Hostile);
    root.tool("usr", "exe", Fixture::Hostile);
    root.tool("usr", "loose", Fixture::Hostile);
    root.tool("usr", "echo", Fixture::Echo);
    root.tool("core", "response", Fixture::Response);
    root.secret_extensions();
    root.write("usr/secrets.env", SECRETS);
    root.write(
        "usr/toolhost.toml",
        format!(
            "isolate = [\"iso\", \"exe\", \"loose\"]\n{extra}\n\
             [tools.iso]\ngrant = [\"secret:GRANTED_KEY\", \"env:GRANTED_VAR\"]\n\n\
             [tools.exe]\ngrant = [\"exec\"]\n\n[tools.loose]\nsandbox = \"off\"\n"
        ),
    );
    (root, added)
}

fn call(agent: &Arc<Agent>, tool: &str, method: &str, args: Value) -> Result<String, String> {
    match block_on(agent.call_tool(&format!("{tool}:{method}"), args)) {
        Ok(answer) => Ok(answer.message),
        Err(e) => Err(e.message().to_owned()),
    }
}

#[track_caller]
fn refused(result: Result<String, String>, errno: &str, what: &str) {
    let message = result.expect_err(what);
    assert!(
        message.contains("denied: ") && message.contains(errno),
        "{what}: {message}"
    );
}

#[track_caller]
fn works(result: Result<String, String>, what: &str) -> String {
    let answer = result.unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(answer.starts_with("ok"), "{what}: {answer}");
    answer
}

/// The host answers its next call: `echo`, in its own process.
#[track_caller]
fn still_serving(agent: &Arc<Agent>) {
    let answer = block_on(agent.call_tool("echo", json!({"still": "here"}))).unwrap();
    assert_eq!(answer.message, r#"{"still":"here"}"#);
}

/// Every file under `dir` but the host's audit log and cache, with its bytes, mode, owner and times.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>, String)> {
    use std::os::unix::fs::MetadataExt;
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            // The host's own: its audit log and its cache.
            if path.ends_with("audit") || path.ends_with(".cache") {
                continue;
            }
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let stamp = format!(
                "{:o} {}:{} {} {}",
                meta.mode(),
                meta.uid(),
                meta.gid(),
                meta.mtime_nsec(),
                meta.ctime_nsec()
            );
            match meta.is_dir() {
                true => {
                    out.push((path.clone(), Vec::new(), stamp));
                    stack.push(path);
                }
                false => out.push((path.clone(), std::fs::read(&path).unwrap(), stamp)),
            }
        }
    }
    out.sort();
    out
}

#[test]
fn no_plugin_reaches_the_hosts_limits_priority_or_scheduling() {
    let (root, _) = confined_root("");
    let (agent, _) = root.agent("default");
    for tool in SANDBOXED {
        for resource in ["fsize", "nofile", "as", "cpu"] {
            let args = json!({"resource": resource});
            refused(call(&agent, tool, "prlimit", args), EPERM, resource);
        }
        for method in ["renice", "ioprio", "affinity"] {
            refused(call(&agent, tool, method, json!({})), EPERM, method);
        }
        // Its own limits are its own.
        let own = json!({"pid": 0, "resource": "nofile"});
        works(call(&agent, tool, "prlimit", own), "its own limit");
        still_serving(&agent);
    }
    // Without the sandbox the same changes reach this test's process (they change nothing).
    for method in ["prlimit", "renice", "ioprio", "affinity"] {
        works(call(&agent, "loose", method, json!({})), method);
    }
}

/// The attack itself, through `toolhost run`: the tool sets the host's file-size limit to 0,
/// which killed the host (SIGXFSZ) at its next audit write; now the host answers the next
/// calls and records them.
#[test]
fn a_tool_lowering_the_hosts_file_size_limit_leaves_the_host_serving() {
    let (root, _) = confined_root("");
    for tool in SANDBOXED {
        let replies = [
            json!({"tool_name": format!("{tool}:prlimit"), "tool_args": {"value": 0}}),
            json!({"tool_name": "echo", "tool_args": {"after": tool}}),
            json!({"tool_name": "response", "tool_args": {"text": format!("done {tool}")}}),
        ];
        let replies: Vec<String> = replies.iter().map(Value::to_string).collect();
        let out = root.run_script("go", &replies);
        let stdout = ok(&out);
        assert!(stdout.contains(&format!("done {tool}")), "{stdout}");
        let audit = std::fs::read_to_string(root.path().join("usr/audit/audit.jsonl")).unwrap();
        assert!(
            audit.contains(&format!(r#""after":"{tool}""#)),
            "the call after is recorded: {audit}"
        );
    }
}

#[test]
fn no_plugin_changes_the_metadata_of_a_file_or_watches_a_folder() {
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("target.txt");
    std::fs::write(&target, "mine").unwrap();
    let grant = format!(
        "[sandbox]\ngrant = [\"write:{}\"]\n",
        outside.path().display()
    );
    let (root, _) = confined_root(&grant);
    let (agent, _) = root.agent("default");
    let before = (snapshot(&root.path().join("usr")), snapshot(outside.path()));
    let secrets_env = root.path().join("usr/secrets.env");
    let usr = root.path().join("usr");
    for tool in SANDBOXED {
        for path in [&secrets_env, &target] {
            for (method, args) in [
                ("chmod", json!({"path": path, "mode": 0o644})),
                ("chown", json!({"path": path})),
                ("setxattr", json!({"path": path})),
            ] {
                refused(call(&agent, tool, method, args), EPERM, method);
            }
        }
        // Even in a folder it may write: a filter cannot tell which file it is.
        refused(
            call(&agent, tool, "utime", json!({"path": target})),
            EPERM,
            "utime",
        );
        refused(
            call(&agent, tool, "chmod", json!({"path": usr.join("tools")})),
            EPERM,
            "chmod usr/tools",
        );
        refused(
            call(&agent, tool, "inotify", json!({"path": usr})),
            EPERM,
            "inotify on usr/",
        );
        // No device node, even where it may write (a root worker could read a disk raw).
        let node = outside.path().join("null");
        refused(
            call(&agent, tool, "mknod", json!({"path": node})),
            EACCES,
            "mknod",
        );
        // What the kernel cannot refuse: stat by name (isolation.md says so).
        let stat = call(&agent, tool, "stat", json!({"path": secrets_env})).unwrap();
        assert_eq!(stat, format!("ok: {} bytes", SECRETS.len()));
    }
    still_serving(&agent);
    let after = (snapshot(&root.path().join("usr")), snapshot(outside.path()));
    for (was, is) in [(&before.0, &after.0), (&before.1, &after.1)] {
        let changed: Vec<String> = is
            .iter()
            .filter(|now| !was.contains(now))
            .map(|(path, _, stamp)| format!("{} {stamp}", path.display()))
            .collect();
        assert!(was == is, "nothing changed on disk: {changed:?}");
    }
    // Without the sandbox: the same calls work (each sets what already is).
    works(
        call(&agent, "loose", "chmod", json!({"path": target})),
        "chmod",
    );
    works(
        call(&agent, "loose", "chown", json!({"path": target})),
        "chown",
    );
    works(
        call(&agent, "loose", "inotify", json!({"path": usr})),
        "inotify",
    );
}

#[test]
fn secrets_reach_only_the_plugins_granted_them_by_name() {
    let (root, added) = confined_root("");
    assert!(
        added.contains("secrets      GRANTED_KEY"),
        "add shows the secrets it grants: {added}"
    );
    let (agent, _) = root.agent("default");
    for tool in SANDBOXED {
        // Granted (by `[tools.iso] grant`, by the package's manifest): filled in.
        let mine = json!({"text": "§§secret(GRANTED_KEY)"});
        let answer = call(&agent, tool, "unmask", mine).unwrap();
        assert_eq!(answer, "4321-eulav-detnarg", "{tool}");
        // Not granted, or no such key: the same refusal, naming the grant and no other key.
        for key in ["OTHER_KEY", "NO_SUCH_KEY"] {
            let text = format!("§§secret({key})");
            let error = block_on(agent.call_tool(&format!("{tool}:unmask"), json!({"text": text})))
                .unwrap_err();
            assert_eq!(error.kind(), ErrorKind::Repairable, "{tool}");
            let message = error.message();
            assert!(
                message.contains(&format!("tool '{tool}' is not granted the secret {key}"))
                    && message.contains(&format!(
                        "add grant = [\"secret:{key}\"] to [tools.{tool}] in usr/toolhost.toml"
                    )),
                "{message}"
            );
            assert!(!message.contains("GRANTED_KEY"), "{message}");
            assert!(!message.contains("8765-terces"), "{message}");
            // Filled into its arguments by the core's extension: refused the same way.
            let error = block_on(agent.call_tool(&format!("{tool}:arg"), json!({"value": text})))
                .unwrap_err();
            assert!(
                error
                    .message()
                    .contains(&format!("is not granted the secret {key}")),
                "{}",
                error.message()
            );
        }
    }
    // Masking is no oracle: a guess of a value it was not granted is not masked for it.
    for tool in SANDBOXED {
        let guess = |text: &str| call(&agent, tool, "mask", json!({"text": text})).unwrap();
        assert_eq!(guess("other-secret-5678"), "not a secret", "{tool}");
        assert_eq!(guess("granted-value-1234"), "a secret", "{tool}");
    }
    // The audit records each refusal.
    let audit = std::fs::read_to_string(root.path().join("usr/audit/audit.jsonl")).unwrap();
    let refusals = audit
        .lines()
        .filter(|l| l.contains(r#""refused":["secret:OTHER_KEY"]"#))
        .count();
    assert_eq!(refusals, 4, "{audit}");
    assert!(!audit.contains("other-secret-5678"), "{audit}");
    // In the host's process it is your own code, which receives every secret.
    let args = json!({"k": "§§secret(OTHER_KEY)"});
    let answer = block_on(agent.call_tool("echo:lengths", args)).unwrap();
    assert_eq!(answer.message, r#"{"k":17}"#, "the value's length");
}

/// A tool that fires `tool_execute_before` itself, with a placeholder of its own making:
/// the core's unmasking runs within its call, with its grants, not the host's.
#[test]
fn a_tool_firing_the_unmasking_point_itself_gets_no_more() {
    let (root, _) = confined_root("");
    let (agent, _) = root.agent("default");
    for tool in SANDBOXED {
        let text = json!({"text": "§§secret(OTHER_KEY)"});
        let error = call(&agent, tool, "fire", text).unwrap_err();
        assert!(
            error.contains(&format!(
                "tool '{tool}' is not granted the secret OTHER_KEY"
            )),
            "{error}"
        );
        assert!(!error.contains("8765-terces"), "{error}");
        let granted = json!({"text": "§§secret(GRANTED_KEY)"});
        assert_eq!(
            call(&agent, tool, "fire", granted).unwrap(),
            "4321-eulav-detnarg"
        );
    }
}

/// An extension a package ships runs after the core's unmasking for every tool's call (an
/// in-process one too): it sees the placeholders, never the values, and the tool still gets
/// the values.
#[test]
fn an_isolated_extension_sees_placeholders_where_the_tool_gets_values() {
    let (root, _) = confined_root_with("", true);
    let (agent, _) = root.agent("default");
    assert!(
        agent
            .host()
            .extensions("default", "tool_execute_before")
            .iter()
            .any(|e| e.name() == "_20_peek" && e.is_isolated()),
        "the package's extension runs isolated"
    );
    let args = json!({"k": "§§secret(OTHER_KEY)"});
    let answer = block_on(agent.call_tool("echo", args.clone()))
        .unwrap()
        .message;
    let seen: Value = serde_json::from_str(&answer).unwrap();
    let peeked: String = seen["peeked"].as_str().unwrap().chars().rev().collect();
    assert!(peeked.contains("§§secret(OTHER_KEY)"), "{peeked}");
    assert!(!peeked.contains("other-secret-5678"), "{peeked}");
    let answer = block_on(agent.call_tool("echo:lengths", args))
        .unwrap()
        .message;
    let lengths: Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(lengths["k"], 17, "the tool got the value: {answer}");
}

/// `toolhost call` with `env` added to the host's environment: what the tool answers.
fn call_with_env(root: &TestRoot, tool: &str, env: &[(&str, &str)]) -> Value {
    let out = Command::new(toolhost_bin())
        .arg("--root")
        .arg(root.path())
        .args(["call", &format!("{tool}:env")])
        .envs(env.iter().copied())
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let stdout = ok(&out);
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

#[test]
fn workers_see_only_the_environment_they_are_granted() {
    let (root, _) = confined_root("[audit]\nkey_env = \"TOOLHOST_AUDIT_KEY\"\n");
    let env = [
        ("TOOLHOST_AUDIT_KEY", "audit-hmac-key-0001"),
        ("TOOLHOST_KEY_PASSWORD", "hunter22"),
        ("OPENAI_API_KEY", "sk-live-abc"),
        ("GRANTED_VAR", "yes"),
    ];
    let basic = [
        "HOME",
        "LANG",
        "LANGUAGE",
        "MALLOC_ARENA_MAX",
        "PATH",
        "RUST_BACKTRACE",
        "TERM",
        "TMPDIR",
        "TZ",
    ];
    for (tool, granted) in [("hostile", false), ("iso", true), ("loose", false)] {
        let answer = call_with_env(&root, tool, &env);
        let names: Vec<&str> = answer["names"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_str().unwrap())
            .collect();
        for name in &names {
            assert!(
                basic.contains(name)
                    || name.starts_with("LC_")
                    || (granted && *name == "GRANTED_VAR"),
                "{tool} sees {name}: {names:?}"
            );
        }
        assert_eq!(names.contains(&"GRANTED_VAR"), granted, "{tool}: {names:?}");
        // /proc/self/environ, what it was started with: the same and the worker's own two.
        for name in answer["environ"].as_array().unwrap() {
            let name = name.as_str().unwrap();
            assert!(
                names.contains(&name) || ["TOOLHOST_SANDBOX", "TOOLHOST_SCRATCH"].contains(&name),
                "{tool} was started with {name}: {answer}"
            );
        }
    }
}

#[test]
fn memory_threads_and_processes_are_bounded_by_default() {
    let (root, _) = confined_root("");
    let (agent, _) = root.agent("default");
    let host = root.host();
    let limits = super::handle(&host, "iso")
        .sandbox()
        .and_then(|s| s.limits)
        .unwrap();
    assert!(limits.starts_with("memory 1024 MiB, CPU 600 s"), "{limits}");
    let grouped = limits.contains("256 tasks (cgroup");
    if !grouped {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI machines are root with cgroups: {limits}"
        );
        eprintln!("NOTE: no control group for workers on this machine, threads and processes are not counted: {limits}");
    }
    for tool in SANDBOXED {
        // 8 GiB reserved, 512 MiB touched.
        refused(
            call(&agent, tool, "alloc", json!({"reserve_mb": 8192})),
            "(errno 12)",
            "8 GiB",
        );
        if grouped {
            let bomb = call(&agent, tool, "threads", json!({"count": 1000})).unwrap_err();
            assert!(bomb.contains("(errno 11)"), "{bomb}");
        }
        still_serving(&agent);
        works(
            call(
                &agent,
                tool,
                "alloc",
                json!({"reserve_mb": 64, "touch_mb": 16}),
            ),
            "alloc",
        );
    }
    if grouped {
        let bomb = call(&agent, "exe", "processes", json!({"count": 1000})).unwrap_err();
        assert!(bomb.contains("(errno 11)"), "{bomb}");
        still_serving(&agent);
    }
    // Raised by a grant.
    let (root, _) = confined_root("[tools.hostile]\ngrant = [\"memory:2048\", \"tasks:2000\"]\n");
    let host = root.host();
    let limits = super::handle(&host, "hostile")
        .sandbox()
        .and_then(|s| s.limits)
        .unwrap();
    assert!(limits.starts_with("memory 2048 MiB, CPU 600 s"), "{limits}");
    if grouped {
        let (agent, _) = root.agent("default");
        works(
            call(&agent, "hostile", "threads", json!({"count": 1000})),
            "1000 threads",
        );
    }
}

#[test]
fn a_spin_ends_at_the_cpu_limit_as_the_calls_error() {
    let (root, _) = confined_root("[tools.hostile]\ngrant = [\"cpu:1\"]\ntimeout_seconds = 30\n");
    let (agent, _) = root.agent("default");
    let error = call(&agent, "hostile", "spin", json!({"seconds": 20})).unwrap_err();
    assert!(
        error.contains("went over its CPU time limit of 1 s"),
        "{error}"
    );
    still_serving(&agent);
}

/// The host ends (a one-shot `toolhost call`) while a process its worker started runs: the
/// worker ends its whole group as its pipe closes.
#[test]
fn no_process_of_a_plugin_outlives_its_host() {
    let (root, _) = confined_root("");
    let out = root.run_cli(&["call", "exe:escape", "--args", r#"{"seconds": 60}"#]);
    let stdout = ok(&out);
    let pid: u32 = stdout
        .lines()
        .find_map(|l| l.strip_prefix("pid "))
        .and_then(|l| l.split(',').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("{stdout}"));
    wait_gone(pid);
}

#[test]
fn no_process_of_a_plugin_outlives_its_worker() {
    let (root, _) = confined_root("");
    let (agent, _) = root.agent("default");
    let answer = call(&agent, "exe", "escape", json!({})).unwrap();
    let (pid, setsid) = answer
        .strip_prefix("pid ")
        .and_then(|a| a.split_once(", setsid: "))
        .unwrap();
    assert!(
        setsid.starts_with("denied") && setsid.contains(EPERM),
        "{answer}"
    );
    let pid: u32 = pid.parse().unwrap();
    assert!(alive(pid), "the child runs");
    let crash = call(&agent, "exe", "abort", json!({})).unwrap_err();
    assert!(crash.contains("SIGABRT"), "{crash}");
    wait_gone(pid);
    still_serving(&agent);
    // Without the sandbox the escape works: the child outlives the worker.
    let answer = call(&agent, "loose", "escape", json!({"seconds": 30})).unwrap();
    let pid: i32 = answer
        .strip_prefix("pid ")
        .and_then(|a| a.split_once(", setsid: ok"))
        .map(|(pid, _)| pid.parse().unwrap())
        .unwrap_or_else(|| panic!("{answer}"));
    call(&agent, "loose", "abort", json!({})).unwrap_err();
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(alive(pid as u32), "escaped without a sandbox");
    // SAFETY: a plain system call on the child this test made escape.
    unsafe { libc::kill(pid, libc::SIGKILL) };
}
