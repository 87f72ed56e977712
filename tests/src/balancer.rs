//! HAProxy in front of `toolhost serve-mcp --http` instances, with the config the fleet page
//! (docs/src/guide/fleet.md) shows, one MCP request sent through it on its own connection,
//! and a client that keeps its connection ([`KeepAlive`]): shared by the fleet test and the
//! fleet bench.

use std::io::{BufRead, BufReader, Read, Write};
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
        let port = free_port();
        let servers: String = backends
            .iter()
            .enumerate()
            .map(|(i, p)| format!("    server toolhost{i} 127.0.0.1:{p} check\n"))
            .collect();
        let config = format!(
            "global\n    maxconn 1024\n\
             defaults\n    mode http\n    timeout connect 1s\n    timeout client 30s\n    timeout server 30s\n    retries 3\n    option redispatch\n\
             frontend mcp\n    bind 127.0.0.1:{port}\n    default_backend toolhost\n\
             backend toolhost\n    balance roundrobin\n    option httpchk GET /ready\n    http-check expect status 200\n    default-server inter 200ms fall 2 rise 2\n{servers}"
        );
        Self::with_config(root, &config, port)
    }

    /// [`start`](Self::start) with `config` as it is (a config whose frontend binds
    /// `127.0.0.1:port`).
    ///
    /// # Panics
    ///
    /// As [`start`](Self::start).
    pub fn with_config(root: &TestRoot, config: &str, port: u16) -> Self {
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

/// A loopback port free now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// One HTTP/1.1 connection kept open across requests, as a pooling client (or a balancer)
/// keeps it; it reconnects only after an answer that closed it (`Connection: close`).
pub struct KeepAlive {
    port: u16,
    /// Sent with each request (`Authorization: Bearer ...`).
    headers: String,
    connection: Option<BufReader<TcpStream>>,
}

impl KeepAlive {
    /// A client of `127.0.0.1:port`, sending `headers` with each request; it connects at its
    /// first request.
    pub fn new(port: u16, headers: &[(&str, &str)]) -> Self {
        let headers = headers
            .iter()
            .map(|(name, value)| format!("{name}: {value}\r\n"))
            .collect();
        Self {
            port,
            headers,
            connection: None,
        }
    }

    /// Posts one JSON-RPC `body` to `/mcp`: the status and the body of the answer (an event
    /// stream's or a JSON body's, de-chunked), or the I/O error's words.
    pub fn post_mcp(&mut self, body: &str) -> Result<(u16, String), String> {
        self.exchange("POST", "/mcp", body)
            .map_err(|e| e.to_string())
    }

    /// Sends `method path` with `body`: the status and the body of the answer.
    pub fn exchange(
        &mut self,
        method: &str,
        path: &str,
        body: &str,
    ) -> std::io::Result<(u16, String)> {
        let port = self.port;
        let reader = match &mut self.connection {
            Some(reader) => reader,
            None => {
                let stream = TcpStream::connect(("127.0.0.1", port))?;
                stream.set_read_timeout(Some(Duration::from_secs(30)))?;
                self.connection.insert(BufReader::new(stream))
            }
        };
        let request = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n{}Content-Length: {}\r\n\r\n{body}",
            self.headers,
            body.len()
        );
        let answer = reader
            .get_mut()
            .write_all(request.as_bytes())
            .and_then(|()| read_answer(reader));
        match answer {
            Ok((status, body, close)) => {
                if close {
                    self.connection = None;
                }
                Ok((status, body))
            }
            Err(e) => {
                self.connection = None;
                Err(e)
            }
        }
    }
}

/// Reads one HTTP/1.1 answer: its status, its body (by `Content-Length` or chunked), and
/// whether it closes the connection.
fn read_answer(reader: &mut BufReader<TcpStream>) -> std::io::Result<(u16, String, bool)> {
    let invalid =
        |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_owned());
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "the connection closed before an answer",
        ));
    }
    let status: u16 = line
        .get(9..12)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| invalid("not an HTTP status line"))?;
    let (mut length, mut chunked, mut close) = (None, false, false);
    loop {
        line.clear();
        reader.read_line(&mut line)?;
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        let Some((name, value)) = header.split_once(':') else {
            continue;
        };
        let value = value.trim().to_ascii_lowercase();
        match name.to_ascii_lowercase().as_str() {
            "content-length" => length = value.parse::<usize>().ok(),
            "transfer-encoding" => chunked = value.contains("chunked"),
            "connection" => close = value.contains("close"),
            _ => {}
        }
    }
    let mut body = Vec::new();
    if chunked {
        loop {
            line.clear();
            reader.read_line(&mut line)?;
            let size = line.trim_end().split(';').next().unwrap_or("");
            let size = usize::from_str_radix(size, 16).map_err(|_| invalid("a bad chunk size"))?;
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk)?;
            if size == 0 {
                break; // no trailers are sent
            }
            body.extend_from_slice(&chunk[..size]);
        }
    } else if let Some(length) = length {
        body.resize(length, 0);
        reader.read_exact(&mut body)?;
    } else {
        reader.read_to_end(&mut body)?;
        close = true;
    }
    Ok((status, String::from_utf8_lossy(&body).into_owned(), close))
}

/// Posts one JSON-RPC `body` to `/mcp` on `port` on a new connection (`Connection: close`,
/// as a fleet's clients behind a balancer may) and returns the whole HTTP answer, status
/// line and headers included, or the I/O error's words. Waits at most 20 s for the answer.
pub fn post_mcp(port: u16, body: &str) -> Result<String, String> {
    post_mcp_with(port, &[], body)
}

/// [`post_mcp`] with `headers` too (`Authorization: Bearer ...`).
pub fn post_mcp_with(port: u16, headers: &[(&str, &str)], body: &str) -> Result<String, String> {
    let headers: String = headers
        .iter()
        .map(|(name, value)| format!("{name}: {value}\r\n"))
        .collect();
    let mut stream = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .map_err(|e| e.to_string())?;
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
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
