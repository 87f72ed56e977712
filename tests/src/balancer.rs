//! HAProxy in front of `toolhost serve-mcp --http` instances, with the config the fleet page
//! (docs/src/guide/fleet.md) shows, and one MCP request sent through it on its own
//! connection: shared by the fleet test and the fleet bench.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::TestRoot;

/// HAProxy in the foreground, balancing round robin over `serve-mcp --http` backends with a
/// health check on `/metrics` every 200 ms; killed when dropped.
pub struct Balancer {
    child: Child,
    /// The loopback port clients connect to.
    pub port: u16,
}

impl Balancer {
    /// Checks the config with `haproxy -c`, starts HAProxy in front of `backends` (loopback
    /// ports) and waits until it listens and its health checks have had time to find every
    /// backend up (600 ms: three checks).
    ///
    /// # Panics
    ///
    /// If HAProxy refuses the config (with its message) or does not listen within 10 s.
    pub fn start(root: &TestRoot, backends: &[u16]) -> Self {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let servers: String = backends
            .iter()
            .enumerate()
            .map(|(i, p)| format!("    server toolhost{i} 127.0.0.1:{p} check\n"))
            .collect();
        let config = format!(
            "global\n    maxconn 1024\n\
             defaults\n    mode http\n    timeout connect 1s\n    timeout client 30s\n    timeout server 30s\n    retries 3\n    option redispatch\n\
             frontend mcp\n    bind 127.0.0.1:{port}\n    default_backend toolhost\n\
             backend toolhost\n    balance roundrobin\n    option httpchk GET /metrics\n    http-check expect status 200\n    default-server inter 200ms fall 2 rise 2\n{servers}"
        );
        let path = root.write(&format!("haproxy-{port}.cfg"), config);
        let check = Command::new("haproxy")
            .arg("-c")
            .arg("-f")
            .arg(&path)
            .output()
            .expect("haproxy -c");
        assert!(
            check.status.success(),
            "haproxy refused the config: {}",
            String::from_utf8_lossy(&check.stderr)
        );
        let child = Command::new("haproxy")
            .arg("-db")
            .arg("-f")
            .arg(&path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("haproxy");
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "haproxy did not listen");
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(600));
        Self { child, port }
    }
}

impl Drop for Balancer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Posts one JSON-RPC `body` to `/mcp` on `port` on a new connection (`Connection: close`,
/// as a fleet's clients behind a balancer may) and returns the whole HTTP answer, status
/// line and headers included, or the I/O error's words. Waits at most 20 s for the answer.
pub fn post_mcp(port: u16, body: &str) -> Result<String, String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .map_err(|e| e.to_string())?;
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream
        .write_all(request.as_bytes())
        .map_err(|e| e.to_string())?;
    let mut answer = String::new();
    stream
        .read_to_string(&mut answer)
        .map_err(|e| e.to_string())?;
    Ok(answer)
}
