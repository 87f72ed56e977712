//! Sandboxed isolated tools, with hostile plugins on the real kernel: what the sandbox refuses
//! fails inside the plugin as the OS error it is, and the same call without the sandbox (the
//! same library, isolated with `sandbox = "off"`) succeeds, so the sandbox is what stops it.

use std::sync::Arc;

use plugin_api::ErrorKind;
use serde_json::{json, Value};
use toolhost::{Agent, LoadErrorKind};
use toolhost_tests::{block_on, Fixture, TestRoot};

const EACCES: &str = "(errno 13)";
const EPERM: &str = "(errno 1)";

/// A root with the hostile tool three times: `hostile` in the package folder
/// `usr/plugins/hostile/` (isolated, sandboxed, nothing granted), `loose` in `usr/tools/`
/// (isolated, `sandbox = "off"`) and `granted` in `usr/tools/` (sandboxed, with `grants`);
/// and `echo` in the host's process. `extra` is added to `usr/toolhost.toml`.
fn hostile_root(grants: &[String], extra: &str) -> TestRoot {
    let root = TestRoot::new();
    root.tool("usr/plugins/hostile", "hostile", Fixture::Hostile);
    root.tool("usr", "loose", Fixture::Hostile);
    root.tool("usr", "granted", Fixture::Hostile);
    root.tool("usr", "echo", Fixture::Echo);
    root.tool("core", "response", Fixture::Response);
    let grants: Vec<String> = grants.iter().map(|g| format!("\"{g}\"")).collect();
    root.write(
        "usr/toolhost.toml",
        format!(
            "isolate = [\"hostile\", \"loose\", \"granted\"]\n{extra}\n[isolation]\nmemory_mb = 256\n\n\
             [tools.loose]\nsandbox = \"off\"\n\n[tools.granted]\ngrant = [{}]\n",
            grants.join(", ")
        ),
    );
    root
}

fn call(agent: &Arc<Agent>, tool: &str, method: &str, args: Value) -> Result<String, String> {
    match block_on(agent.call_tool(&format!("{tool}:{method}"), args)) {
        Ok(answer) => Ok(answer.message),
        Err(e) => Err(e.message().to_owned()),
    }
}

/// The call fails with the OS error `errno` (as the plugin saw it), in an error that says the
/// sandbox was in force and what the tool was granted.
#[track_caller]
fn refused(result: Result<String, String>, errno: &str, what: &str) -> String {
    let message = result.expect_err(what);
    assert!(
        message.contains("denied: ") && message.contains(errno),
        "{what}: {message}"
    );
    assert!(
        message.contains("the tool ran sandboxed; granted: nothing"),
        "{what}: {message}"
    );
    message
}

#[track_caller]
fn works(result: Result<String, String>, what: &str) {
    let answer = result.unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(answer.starts_with("ok: "), "{what}: {answer}");
}

fn is_root() -> bool {
    // SAFETY: a plain system call.
    unsafe { libc::geteuid() == 0 }
}

/// A file in the user's home folder, removed when dropped.
fn file_in_home() -> tempfile::NamedTempFile {
    let home = std::env::var_os("HOME").expect("HOME is set");
    tempfile::Builder::new()
        .prefix(".toolhost-sandbox-test-")
        .tempfile_in(home)
        .expect("a file in HOME")
}

#[test]
fn files_outside_the_grants_are_refused_and_readable_without_the_sandbox() {
    let root = hostile_root(&[], "");
    let (agent, _) = root.agent("default");
    let home = file_in_home();
    let home = home.path().display().to_string();
    let echo = root.path().join("usr/tools/echo.so").display().to_string();
    for (what, path) in [
        ("a file under $HOME", &home),
        ("another tool's library", &echo),
    ] {
        refused(
            call(&agent, "hostile", "read", json!({"path": path})),
            EACCES,
            what,
        );
        works(call(&agent, "loose", "read", json!({"path": path})), what);
    }
    refused(
        call(&agent, "hostile", "read", json!({"path": "/etc/shadow"})),
        EACCES,
        "/etc/shadow",
    );
    if is_root() {
        works(
            call(&agent, "loose", "read", json!({"path": "/etc/shadow"})),
            "/etc/shadow",
        );
    }
    // Its own package folder, and the system's libraries, are readable.
    let own = root.path().join("usr/plugins/hostile/tools/hostile.so");
    works(
        call(&agent, "hostile", "read", json!({"path": own})),
        "its own library",
    );
    works(
        call(
            &agent,
            "hostile",
            "read",
            json!({"path": "/etc/ld.so.cache"}),
        ),
        "ld.so.cache",
    );
}

#[test]
fn no_layer_folder_is_writable_but_the_scratch_folder_is() {
    let root = hostile_root(&[], "");
    let (agent, _) = root.agent("default");
    let config = root.path().join("usr/toolhost.toml");
    let before = std::fs::read(&config).unwrap();
    let targets = [
        ("usr/tools/", root.path().join("usr/tools/evil.so")),
        ("usr/plugins/", root.path().join("usr/plugins/evil.txt")),
        (
            "its package folder",
            root.path().join("usr/plugins/hostile/tools/evil.so"),
        ),
        ("usr/toolhost.toml", config.clone()),
    ];
    for (what, path) in &targets {
        refused(
            call(&agent, "hostile", "write", json!({"path": path})),
            EACCES,
            what,
        );
        works(call(&agent, "loose", "write", json!({"path": path})), what);
    }
    assert_eq!(
        std::fs::read(&config).unwrap(),
        before,
        "the config is untouched"
    );
    assert!(!root.path().join("usr/tools/evil.so").exists());
    let answer = call(&agent, "hostile", "scratch", json!({})).unwrap();
    assert!(answer.starts_with("ok: /"), "{answer}");
    let scratch = answer.trim_start_matches("ok: ");
    assert!(
        !std::path::Path::new(scratch).exists(),
        "removed after the call: {scratch}"
    );
    works(
        call(&agent, "loose", "scratch", json!({})),
        "scratch without the sandbox",
    );
}

#[test]
fn tcp_needs_a_grant_by_port_and_bind_is_refused() {
    let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = server.local_addr().unwrap().port();
    let accept = std::thread::spawn(move || {
        // The two connections that must get through: `loose` and `granted`.
        for _ in 0..2 {
            drop(server.accept());
        }
    });
    // A port free a moment ago, for the bind grant.
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let bind_port = free.local_addr().unwrap().port();
    drop(free);
    let root = hostile_root(&[format!("net:{port}"), format!("bind:{bind_port}")], "");
    let (agent, _) = root.agent("default");
    refused(
        call(&agent, "hostile", "connect", json!({"port": port})),
        EACCES,
        "connect",
    );
    works(
        call(&agent, "loose", "connect", json!({"port": port})),
        "connect",
    );
    works(
        call(&agent, "granted", "connect", json!({"port": port})),
        "connect granted",
    );
    accept.join().unwrap();
    refused(call(&agent, "hostile", "bind", json!({})), EACCES, "bind");
    works(call(&agent, "loose", "bind", json!({})), "bind");
    // A bind grant is for its port only.
    works(
        call(&agent, "granted", "bind", json!({"port": bind_port})),
        "bind granted",
    );
    let other = call(&agent, "granted", "bind", json!({}));
    assert!(other.is_err_and(|e| e.contains(EACCES)), "another port");
}

#[test]
fn udp_needs_its_grant_and_unix_sockets_are_refused() {
    let root = hostile_root(&["net:udp".to_owned()], "");
    let (agent, _) = root.agent("default");
    refused(call(&agent, "hostile", "udp", json!({})), EPERM, "udp");
    works(call(&agent, "loose", "udp", json!({})), "udp");
    works(call(&agent, "granted", "udp", json!({})), "udp granted");
    // A Unix socket by path (a container runtime's, a desktop bus): refused, whatever the
    // folder's rights.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("daemon.sock");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    refused(
        call(&agent, "hostile", "unix", json!({"path": path})),
        EPERM,
        "unix socket",
    );
    works(
        call(&agent, "loose", "unix", json!({"path": path})),
        "unix socket",
    );
    drop(listener);
}

#[test]
fn programs_processes_and_signals_to_the_host_are_refused() {
    let root = hostile_root(&["exec".to_owned()], "");
    let (agent, _) = root.agent("default");
    refused(
        call(&agent, "hostile", "execve", json!({})),
        EPERM,
        "execve(/bin/sh)",
    );
    refused(
        call(&agent, "hostile", "spawn", json!({})),
        EPERM,
        "spawn /bin/sh",
    );
    works(call(&agent, "loose", "spawn", json!({})), "spawn");
    works(
        call(&agent, "granted", "spawn", json!({})),
        "spawn with exec granted",
    );
    // SIGKILL to the host: this test process. Without the sandbox, signal 0 (nothing sent).
    refused(
        call(&agent, "hostile", "signal", json!({"signal": 9})),
        EPERM,
        "kill(host)",
    );
    works(
        call(&agent, "loose", "signal", json!({"signal": 0})),
        "kill(host, 0)",
    );
    let bomb = call(&agent, "hostile", "fork_bomb", json!({"depth": 16})).unwrap();
    assert!(
        bomb.starts_with("forks: 0; stopped: ") && bomb.contains(EPERM),
        "{bomb}"
    );
    let forks = call(&agent, "loose", "fork_bomb", json!({"depth": 2})).unwrap();
    assert_eq!(forks, "forks: 2");
    // The host and the other tools go on.
    assert_eq!(
        block_on(agent.call_tool("echo", json!({"a": 1})))
            .unwrap()
            .message,
        r#"{"a":1}"#
    );
    works(
        call(&agent, "hostile", "scratch", json!({})),
        "after the bomb",
    );
}

#[test]
fn a_constructor_is_confined_before_the_tool_exists() {
    let root = TestRoot::new();
    root.tool("usr", "init_sandboxed", Fixture::HostileInit);
    root.tool("usr", "init_loose", Fixture::HostileInit);
    root.tool("core", "response", Fixture::Response);
    root.write(
        "usr/toolhost.toml",
        "isolate = [\"init_sandboxed\", \"init_loose\"]\n\n[tools.init_loose]\nsandbox = \"off\"\n",
    );
    let (agent, _) = root.agent("default");
    let confined = block_on(agent.call_tool("init_sandboxed", json!({}))).unwrap();
    assert_eq!(
        confined.message,
        "shadow: denied (errno 13); tmp: denied (errno 13); signal: denied (errno 1)"
    );
    let loose = block_on(agent.call_tool("init_loose", json!({}))).unwrap();
    let shadow = match is_root() {
        true => "shadow: ok",
        false => "shadow: denied (errno 13)",
    };
    assert_eq!(loose.message, format!("{shadow}; tmp: ok; signal: ok"));
}

#[test]
fn a_tool_asking_for_what_is_not_granted_is_refused_with_how_to_grant_it() {
    let root = TestRoot::new();
    root.tool("usr", "asks", Fixture::HostileAsks);
    root.tool("core", "response", Fixture::Response);
    root.write(
        "usr/toolhost.toml",
        "isolate = [\"asks\"]\n\n[tools.asks]\ngrant = [\"net:443\"]\n",
    );
    let host = root.host();
    let resolution = host.resolve("default", "asks");
    assert!(resolution.found.is_none());
    let error = &resolution.skipped[0];
    assert_eq!(error.kind, LoadErrorKind::NotGranted, "{error}");
    assert!(
        error.reason.contains("asks for exec, read:/srv/data")
            && error.reason.contains("(granted: net:443)")
            && error.reason.contains(
                r#"add grant = ["exec", "read:/srv/data"] to [tools.asks] in usr/toolhost.toml"#
            ),
        "{error}"
    );
    // `inspect` reads it in its worker, as a call would load it: refused the same way.
    let file = root.path().join("usr/tools/asks.so");
    let out = root.run_cli(&["inspect", file.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("asks for exec, read:/srv/data"),
        "{stderr}"
    );
    // Granted (a folder above the one it asks for covers it), it loads.
    root.write(
        "usr/toolhost.toml",
        "isolate = [\"asks\"]\n\n[sandbox]\ngrant = [\"net:443\"]\n\n[tools.asks]\ngrant = [\"exec\", \"read:/srv\"]\n",
    );
    let (agent, _) = root.agent("default");
    assert_eq!(
        block_on(agent.call_tool("asks", json!({})))
            .unwrap()
            .message,
        "asked"
    );
    // Without a sandbox nothing is asked of the user.
    root.write(
        "usr/toolhost.toml",
        "isolate = [\"asks\"]\n\n[tools.asks]\nsandbox = \"off\"\n",
    );
    let (agent, _) = root.agent("default");
    assert_eq!(
        block_on(agent.call_tool("asks", json!({})))
            .unwrap()
            .message,
        "asked"
    );
}

#[test]
fn no_grant_opens_a_layer_folder_for_writing() {
    let root = TestRoot::new();
    root.tool("usr", "hostile", Fixture::Hostile);
    let parent = root.path().parent().unwrap().display().to_string();
    root.write(
        "usr/toolhost.toml",
        format!("isolate = [\"hostile\"]\n\n[tools.hostile]\ngrant = [\"write:{parent}\"]\n"),
    );
    let host = root.host();
    let resolution = host.resolve("default", "hostile");
    let error = &resolution.skipped[0];
    assert_eq!(error.kind, LoadErrorKind::Sandbox, "{error}");
    assert!(
        error.reason.contains(&format!(
            "the grant write:{parent} would make the layer folder"
        )) && error.reason.contains("no layer folder is ever writable"),
        "{error}"
    );
}

#[test]
fn installed_packages_run_isolated_and_sandboxed_by_default() {
    let root = TestRoot::new();
    root.tool("usr/plugins/hostile", "hostile", Fixture::Hostile);
    root.tool("core", "response", Fixture::Response);
    // Signed by a key the root trusts (a package of a key no longer trusted does not load).
    root.write(
        "usr/packages.lock",
        "[packages.hostile]\nversion = \"0.1.0\"\nsource = \"hostile-0.1.0.tar.gz\"\nsigner = \"0123456789ABCDEF\"\n\n[packages.hostile.files]\n",
    );
    root.write("usr/trusted-keys/0123456789ABCDEF.pub", "the key's file\n");
    let host = root.host();
    let agent = Agent::new(host.clone(), "A0", "default").unwrap();
    let home = file_in_home();
    let read = json!({"path": home.path()});
    refused(
        call(&agent, "hostile", "read", read.clone()),
        EACCES,
        "a package's tool",
    );
    assert!(
        super::handle(&host, "hostile").worker_pid().is_some(),
        "isolated"
    );
    // The user's config says otherwise: in the host's process, as any plugin.
    root.write("usr/toolhost.toml", "[packages]\nisolate = false\n");
    let agent = Agent::new(
        Arc::new(toolhost::Host::new(root.path()).unwrap()),
        "A0",
        "default",
    )
    .unwrap();
    works(call(&agent, "hostile", "read", read), "in process");
}

#[test]
fn the_audit_record_of_a_denied_call_names_the_sandbox_and_its_grants() {
    let root = hostile_root(&[], "");
    let (agent, _) = root.agent("default");
    refused(
        call(&agent, "hostile", "read", json!({"path": "/etc/shadow"})),
        EACCES,
        "/etc/shadow",
    );
    let audit = std::fs::read_to_string(root.path().join("usr/audit/audit.jsonl")).unwrap();
    let line = audit
        .lines()
        .rfind(|l| l.contains("hostile"))
        .expect("a record of the call");
    let record: Value = serde_json::from_str(line).unwrap();
    assert_eq!(record["sandbox"], "sandboxed; granted: nothing", "{line}");
    assert_eq!(
        block_on(agent.call_tool("hostile:read", json!({"path": "/etc/shadow"})))
            .unwrap_err()
            .kind(),
        ErrorKind::Business
    );
}

#[test]
fn list_and_inspect_show_each_tools_sandbox() {
    let root = hostile_root(&["net:443".to_owned(), "read:/srv".to_owned()], "");
    let out = root.run_cli(&["list"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    for line in [
        "usr/plugins/hostile/tools/hostile.so (isolated, sandboxed; granted: nothing)",
        "usr/tools/loose.so (isolated: runs in a worker process, not sandboxed)",
        "usr/tools/granted.so (isolated, sandboxed; granted: net:443, read:/srv)",
    ] {
        assert!(stdout.contains(line), "{line}: {stdout}");
    }
    let out = root.run_cli(&["list", "--json"]);
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let granted = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "granted")
        .unwrap();
    assert_eq!(
        granted["sandbox"]["grants"],
        json!(["net:443", "read:/srv"])
    );
    let file = root.path().join("usr/tools/granted.so");
    let out = root.run_cli(&["inspect", file.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("runs         in a worker process, sandboxed; granted: net:443, read:/srv (profile default)"),
        "{stdout}"
    );
}
