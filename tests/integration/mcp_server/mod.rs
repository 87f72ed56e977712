//! `toolhost serve-mcp` driven by real MCP clients: the Python `mcp` package (stdio and
//! streamable HTTP), rmcp's own client, and raw HTTP for the transport's checks.

mod conformance;
mod http_checks;
mod json_rpc;
mod python;
mod rust_client;
mod service;
mod skills_package;
mod stateless;
mod tasks;

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use serde_json::Value;
use toolhost_tests::{peers, toolhost_bin, Fixture, TestRoot};

/// A secret the tools may see but no client may.
pub(crate) const SECRET: &str = "sk-live-4f9a8b7c6d5e";

/// A root with `echo` (progress, failures), `governed` (spins for cancellation), `versioned`
/// (replaced for a reload), `noop` (policy `ask`) and `hidden` (refused by `[access]`); the
/// secret `API_KEY`; `governed`'s deadline is 60 s (TOOLHOST_FX_TIMEOUT, set for the server).
pub(crate) fn root() -> TestRoot {
    let root = TestRoot::new();
    root.tool("usr", "echo", Fixture::Echo);
    root.tool("usr", "governed", Fixture::Governed);
    root.tool("usr", "versioned", Fixture::Versioned);
    root.tool("usr", "noop", Fixture::Noop);
    root.tool("usr", "hidden", Fixture::Noop);
    root.write(
        "usr/toolhost.toml",
        "[access]\ndeny = [\"hidden\"]\n[tools.noop]\npolicy = \"ask\"\n",
    );
    root.write(
        "usr/secrets.env",
        format!("API_KEY={SECRET}\nMCP_TOKEN=tok-123456789\n"),
    );
    root
}

/// `toolhost serve-mcp` over stdio on `root`, as rmcp's client transport (the fixtures'
/// own deadline raised to 60 s, as for the slow calls of a loaded machine).
pub(crate) fn stdio_transport(root: &TestRoot) -> rmcp::transport::TokioChildProcess {
    let mut command = tokio::process::Command::new(toolhost_bin());
    command
        .arg("--root")
        .arg(root.path())
        .arg("serve-mcp")
        .env("TOOLHOST_FX_TIMEOUT", "60");
    rmcp::transport::TokioChildProcess::new(command).expect("serve-mcp")
}

/// The fixture of the conformance plugin's tool `name` (`test_elicitation`, ...).
pub(crate) fn conformance_fixture(name: &str) -> Fixture {
    let package = format!("conformance-{}", name.replace('_', "-"));
    Fixture::ALL
        .into_iter()
        .find(|f| f.package() == package)
        .unwrap_or_else(|| panic!("the conformance plugin's {name}"))
}

/// The params of a `tools/call` of `name` with the object `args`.
pub(crate) fn call(name: &str, args: Value) -> rmcp::model::CallToolRequestParams {
    let Value::Object(args) = args else {
        panic!("arguments must be an object")
    };
    rmcp::model::CallToolRequestParams::new(name.to_owned()).with_arguments(args)
}

/// The Python client script, written into the root.
fn client_script(root: &TestRoot) -> PathBuf {
    root.write("client.py", include_str!("client.py"))
}

/// Runs the Python client with `args`; `on_reload` runs when it asks for a reload. Returns
/// the JSON events it printed.
fn run_python(root: &TestRoot, args: &[&str], on_reload: impl FnOnce()) -> Vec<Value> {
    run_script(&client_script(root), args, on_reload)
}

/// Runs the Python script `script` with `args`, as [`run_python`] does.
fn run_script(script: &std::path::Path, args: &[&str], on_reload: impl FnOnce()) -> Vec<Value> {
    let mut child = Command::new(peers::mcp_python())
        .arg(script)
        .args(args)
        .env("TOOLHOST_FX_TIMEOUT", "60")
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python client");
    let stderr = drain(child.stderr.take().expect("stderr"));
    let mut events = Vec::new();
    let mut on_reload = Some(on_reload);
    for line in BufReader::new(child.stdout.take().expect("stdout")).lines() {
        let line = line.expect("client output");
        let event: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("client printed a non-JSON line ({e}): {line}"));
        if event["event"] == "reload-now" {
            if let Some(reload) = on_reload.take() {
                reload();
            }
        }
        events.push(event);
    }
    let status = child.wait().expect("client exit");
    let stderr = stderr.join().expect("stderr reader");
    assert!(
        status.success(),
        "the Python client failed: {stderr}\nevents: {events:?}"
    );
    events
}

/// Reads a pipe to its end on a thread.
fn drain(mut pipe: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = pipe.read_to_string(&mut text);
        text
    })
}

/// The first event of `kind`.
fn event<'a>(events: &'a [Value], kind: &str) -> &'a Value {
    events
        .iter()
        .find(|e| e["event"] == kind)
        .unwrap_or_else(|| panic!("no '{kind}' event in {events:?}"))
}

/// A `toolhost serve-mcp --http 127.0.0.1:0 ARGS...` process, killed when dropped.
pub(crate) struct HttpServer {
    child: Child,
    /// `http://127.0.0.1:PORT/mcp`.
    pub(crate) url: String,
    /// The lines it writes on standard error after the one with its address.
    pub(crate) stderr: std::sync::mpsc::Receiver<String>,
}

impl HttpServer {
    pub(crate) fn start(root: &TestRoot, args: &[&str]) -> Self {
        Self::start_at(root, "127.0.0.1:0", args)
    }

    fn start_at(root: &TestRoot, addr: &str, args: &[&str]) -> Self {
        let mut command = Command::new(toolhost_bin());
        command
            .arg("--root")
            .arg(root.path())
            .args(["serve-mcp", "--http", addr])
            .args(args)
            .env("TOOLHOST_FX_TIMEOUT", "60");
        Self::spawn(command)
    }

    /// Starts `command`, a `toolhost ... serve-mcp --http ADDR` made by the caller (its own
    /// options and environment), and waits for the line with its address.
    pub(crate) fn spawn(mut command: Command) -> Self {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("toolhost serve-mcp");
        let mut stderr = BufReader::new(child.stderr.take().expect("stderr"));
        let mut line = String::new();
        let url = loop {
            line.clear();
            let read = stderr.read_line(&mut line).expect("server stderr");
            assert!(read > 0, "serve-mcp exited before listening");
            if let Some(url) = line.trim().strip_prefix("toolhost: serving MCP on ") {
                break url.to_owned();
            }
        };
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in stderr.lines().map_while(Result::ok) {
                // Read on even when nobody listens: a full pipe would block the server.
                let _ = tx.send(line);
            }
        });
        Self {
            child,
            url,
            stderr: lines,
        }
    }

    /// Sends `signal` (`libc::SIGTERM`, ...) to the process.
    pub(crate) fn signal(&self, signal: i32) {
        let pid = i32::try_from(self.child.id()).expect("a pid");
        // SAFETY: kill(2) with a pid of our own child, which is not reaped before `wait`.
        assert_eq!(unsafe { libc::kill(pid, signal) }, 0, "kill");
    }

    /// Waits for the process to end (at most `limit`): its exit status.
    ///
    /// # Panics
    ///
    /// If it is still running after `limit`.
    pub(crate) fn wait(&mut self, limit: std::time::Duration) -> std::process::ExitStatus {
        let deadline = std::time::Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "serve-mcp still running after {limit:?}"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// `127.0.0.1:PORT`.
    pub(crate) fn authority(&self) -> &str {
        let rest = self.url.strip_prefix("http://").expect("http URL");
        rest.split('/').next().expect("authority")
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The audit records of `tool` (`usr/audit/audit.jsonl`).
pub(crate) fn audited_calls(root: &TestRoot, tool: &str) -> Vec<Value> {
    let log =
        std::fs::read_to_string(root.path().join("usr/audit/audit.jsonl")).unwrap_or_default();
    log.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["type"] == "call" && r["tool"] == tool)
        .collect()
}
