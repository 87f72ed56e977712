//! Observability end to end: `toolhost serve-mcp --http` exporting its spans over OTLP
//! HTTP/protobuf to a receiver that decodes them with the real protobuf classes
//! (`otlp_receiver.py`, on PyPI's `opentelemetry-proto`), and its metrics at `/metrics`.

mod config;
mod metrics;
mod metrics_export;
mod propagation;
mod secrets;
mod traces;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use toolhost_tests::{peers, toolhost_bin, TestRoot};

use crate::mcp_server::HttpServer;

/// The receiver, killed when dropped; the spans and metric data points it decoded so far.
pub(crate) struct Receiver {
    child: Child,
    pub(crate) port: u16,
    spans: Arc<Mutex<Vec<Value>>>,
    /// One per data point of each metric export (`"signal": "metric"`), in arrival order.
    metrics: Arc<Mutex<Vec<Value>>>,
    /// Every body received, as sent.
    pub(crate) raw: PathBuf,
}

impl Receiver {
    pub(crate) fn start(dir: &Path) -> Self {
        let script = dir.join("otlp_receiver.py");
        std::fs::write(&script, include_str!("otlp_receiver.py")).expect("receiver script");
        let raw = dir.join("otlp_bodies.bin");
        let mut child = Command::new(peers::otel_python())
            .arg(&script)
            .arg(&raw)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the OTLP receiver");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let first = lines.next().and_then(Result::ok).unwrap_or_default();
        let port = first
            .strip_prefix("listening ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("the OTLP receiver did not start: {first:?}"));
        let spans = Arc::new(Mutex::new(Vec::new()));
        let metrics = Arc::new(Mutex::new(Vec::new()));
        let (collected, points) = (spans.clone(), metrics.clone());
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                let item: Value = serde_json::from_str(&line).expect("a JSON line");
                let into = match item["signal"] == "metric" {
                    true => &points,
                    false => &collected,
                };
                into.lock().expect("received").push(item);
            }
        });
        Self {
            child,
            port,
            spans,
            metrics,
            raw,
        }
    }

    /// How many metric exports arrived (one line per data point; each export repeats the
    /// cumulative `toolhost.reloads` points, so the count of distinct exports is counted by
    /// the receiver's own marker line).
    pub(crate) fn metrics_bodies(&self) -> usize {
        let points = self.metrics.lock().expect("metrics");
        points.iter().filter(|p| p["name"] == "(export)").count()
    }

    /// The metric data points received once `done` holds for them (at most 30 s).
    pub(crate) fn wait_for_metrics(&self, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        wait_until(&self.metrics, "metrics", done)
    }

    /// The variables that export a process's traces to this receiver as `service`, in
    /// batches sent every 50 ms.
    pub(crate) fn env(&self, service: &str) -> Vec<(&'static str, String)> {
        vec![
            (
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                format!("http://127.0.0.1:{}", self.port),
            ),
            ("OTEL_BSP_SCHEDULE_DELAY", "50".to_owned()),
            ("OTEL_SERVICE_NAME", service.to_owned()),
        ]
    }

    /// The spans received once `done` holds for them (at most 30 s).
    pub(crate) fn wait_for(&self, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        wait_until(&self.spans, "spans", done)
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `toolhost serve-mcp --http 127.0.0.1:0 ARGS...` with `env`, killed when dropped.
pub(crate) struct Served {
    /// Kept for its `Drop`, which stops the server.
    _server: HttpServer,
    /// `127.0.0.1:PORT`.
    pub(crate) authority: String,
}

impl Served {
    pub(crate) fn start(root: &TestRoot, args: &[&str], env: &[(&str, String)]) -> Self {
        let mut command = Command::new(toolhost_bin());
        command
            .arg("--root")
            .arg(root.path())
            .args(["serve-mcp", "--http", "127.0.0.1:0"])
            .args(args);
        for (key, value) in env {
            command.env(key, value);
        }
        let server = HttpServer::spawn(command);
        let authority = server.authority().to_owned();
        Self {
            _server: server,
            authority,
        }
    }

    /// Sends `method PATH` with `headers` and `body`; the status and the whole answer (head,
    /// blank line, body).
    pub(crate) fn exchange(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> (u16, String) {
        let mut stream = TcpStream::connect(&self.authority).expect("connect");
        let mut request = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
            self.authority,
            body.len()
        );
        for (name, value) in headers {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        request.push_str("\r\n");
        request.push_str(body);
        stream.write_all(request.as_bytes()).expect("request");
        let mut answer = String::new();
        stream.read_to_string(&mut answer).expect("answer");
        let status = answer[9..12].parse().expect("a status");
        (status, answer)
    }

    /// Sends `method PATH` with `headers` and `body`; the status and the body of the answer.
    pub(crate) fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> (u16, String) {
        let (status, answer) = self.exchange(method, path, headers, body);
        let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
        (status, body.to_owned())
    }

    /// A `tools/call` of `name` with `arguments`, JSON-RPC id `id` and `meta`: its result.
    pub(crate) fn call(&self, id: &str, name: &str, arguments: Value, meta: Value) -> Value {
        let body = serde_json::json!({
            "jsonrpc": "2.0",
            "id": id,
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments, "_meta": meta},
        });
        let (status, answer) = self.request("POST", "/mcp", &[], &body.to_string());
        assert_eq!(status, 200, "{answer}");
        let data = answer
            .lines()
            .find_map(|l| l.strip_prefix("data: "))
            .unwrap_or(&answer);
        let message: Value = serde_json::from_str(data).unwrap_or_else(|e| {
            let said: Vec<String> = self._server.stderr.try_iter().collect();
            panic!("not a JSON-RPC answer ({e}): {answer:?}; the server said {said:#?}")
        });
        message["result"].clone()
    }
}

/// What `received` holds once `done` holds for it (at most 30 s; `what` names it in the
/// failure).
fn wait_until(
    received: &Mutex<Vec<Value>>,
    what: &str,
    done: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    let start = Instant::now();
    loop {
        let got = received.lock().expect("received").clone();
        if done(&got) {
            return got;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the {what} expected did not arrive within 30 s; received: {got:#?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
