//! The streamable HTTP transport: rmcp's service behind a bearer-token check and the
//! JSON-RPC check of each body ([`crate::jsonrpc`]), served by hyper on each accepted
//! connection (`TCP_NODELAY` set: an answer's last bytes never wait for the client's delayed
//! ACK), with a bound on the time a client may take and on the connections served at once,
//! and a graceful stop ([`HttpServer::serve`]).

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};
use tokio_util::sync::CancellationToken;

use super::error::{McpServerError, McpServerErrorKind};
use super::round_trip::StateKey;
use super::session::Session;
use super::shutdown::{DEFAULT_DRAIN, DEFAULT_GRACE};
use super::McpServer;

mod accept;
mod endpoint;
use accept::*;
use endpoint::*;

/// The largest request body accepted by default: 4 MiB (413 beyond).
pub const DEFAULT_MAX_BODY_BYTES: usize = 4 << 20;

/// The request bodies held at once, in bytes, at least: 32 MiB (or one body of
/// [`HttpOptions::max_body_bytes`], if that is more). A request whose body would go over waits
/// for others to be answered (within the body's time bound): many clients sending large
/// bodies at once cost the server this much, not their sum.
pub const BODY_BYTES_IN_FLIGHT: usize = 32 << 20;

/// How long a client may take to send a request's headers, and how long a kept-alive
/// connection may stay idle, by default: 10 s (then the connection is closed).
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a client may take to send a request's body by default: 30 s (408 beyond).
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// The most connections served at once by default: 256 (a connection beyond gets 503).
pub const DEFAULT_MAX_CONNECTIONS: usize = 256;

/// The path the MCP endpoint is served at.
pub const MCP_PATH: &str = "/mcp";

/// The path the metrics are served at (Prometheus text, behind the same token as `/mcp`;
/// turn them on with [`toolhost::telemetry::metrics::enable`]).
pub const METRICS_PATH: &str = "/metrics";

/// The readiness path: `200` while the server takes calls, `503` from the moment it is asked
/// to stop. Not behind the token, and no data in either answer: a balancer's health check.
pub const READY_PATH: &str = "/ready";

/// Browser origins always accepted: pages served from this machine.
const LOCAL_ORIGINS: [&str; 6] = [
    "http://localhost:*",
    "https://localhost:*",
    "http://127.0.0.1:*",
    "https://127.0.0.1:*",
    "http://[::1]:*",
    "https://[::1]:*",
];

/// How the HTTP transport is served.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HttpOptions {
    /// Where to listen. Default `127.0.0.1:8080`: only this machine.
    pub addr: SocketAddr,
    /// A request must carry `Authorization: Bearer <token>` (else 401). Default: none.
    pub token: Option<String>,
    /// Browser origins accepted besides this machine's (`https://app.example.com:443`; `:*`
    /// for any port). A request with another `Origin` is refused with 403; one without is
    /// accepted.
    pub allowed_origins: Vec<String>,
    /// The largest request body, in bytes (413 beyond). Default [`DEFAULT_MAX_BODY_BYTES`].
    pub max_body_bytes: usize,
    /// Keep a session per client (`Mcp-Session-Id`) for protocol versions before 2026-07-28,
    /// so that the server can send `tools/list_changed`, ask for approvals and take
    /// cancellations outside a request's own response. Default `false`: every request stands
    /// alone, so instances can share a load balancer.
    pub sessions: bool,
    /// How long a client may take to send a request's headers, and how long a kept-alive
    /// connection may stay idle. Default [`DEFAULT_HEADER_TIMEOUT`].
    pub header_timeout: Duration,
    /// How long a client may take to send a request's body (408 beyond). Default
    /// [`DEFAULT_BODY_TIMEOUT`].
    pub body_timeout: Duration,
    /// The most connections served at once; a connection beyond is answered 503 with
    /// `Retry-After` and closed. Default [`DEFAULT_MAX_CONNECTIONS`].
    pub max_connections: usize,
    /// Once asked to stop: how long calls in flight and tasks running may take to finish,
    /// counted from the request to stop (the drain included). Default [`DEFAULT_GRACE`].
    pub grace: Duration,
    /// Once asked to stop: how long connections are still accepted (and served, each closed
    /// after its answer) while [`READY_PATH`] answers 503, so that a balancer takes the
    /// server out before it stops listening. At most [`grace`](Self::grace). Default
    /// [`DEFAULT_DRAIN`].
    pub drain: Duration,
}

impl Default for HttpOptions {
    fn default() -> Self {
        Self {
            addr: SocketAddr::from(([127, 0, 0, 1], 8080)),
            token: None,
            allowed_origins: Vec::new(),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            sessions: false,
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            body_timeout: DEFAULT_BODY_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            grace: DEFAULT_GRACE,
            drain: DEFAULT_DRAIN,
        }
    }
}

impl HttpOptions {
    /// Options listening on `addr`.
    pub fn new(addr: SocketAddr) -> Self {
        Self {
            addr,
            ..Self::default()
        }
    }

    /// Requires `Authorization: Bearer <token>`.
    pub fn with_token(mut self, token: Option<String>) -> Self {
        self.token = token;
        self
    }

    /// Accepts these browser origins too.
    pub fn with_allowed_origins(mut self, origins: Vec<String>) -> Self {
        self.allowed_origins = origins;
        self
    }

    /// Sets [`max_body_bytes`](Self::max_body_bytes).
    pub fn with_max_body_bytes(mut self, bytes: usize) -> Self {
        self.max_body_bytes = bytes;
        self
    }

    /// Sets [`sessions`](Self::sessions).
    pub fn with_sessions(mut self, sessions: bool) -> Self {
        self.sessions = sessions;
        self
    }

    /// Sets [`header_timeout`](Self::header_timeout).
    pub fn with_header_timeout(mut self, timeout: Duration) -> Self {
        self.header_timeout = timeout;
        self
    }

    /// Sets [`body_timeout`](Self::body_timeout).
    pub fn with_body_timeout(mut self, timeout: Duration) -> Self {
        self.body_timeout = timeout;
        self
    }

    /// Sets [`max_connections`](Self::max_connections).
    pub fn with_max_connections(mut self, connections: usize) -> Self {
        self.max_connections = connections;
        self
    }

    /// Sets [`grace`](Self::grace).
    pub fn with_grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// Sets [`drain`](Self::drain).
    pub fn with_drain(mut self, drain: Duration) -> Self {
        self.drain = drain;
        self
    }

    /// The browser origins accepted: this machine's pages, and the configured ones.
    fn origins(&self) -> Vec<String> {
        LOCAL_ORIGINS
            .iter()
            .map(|o| (*o).to_owned())
            .chain(self.allowed_origins.iter().cloned())
            .collect()
    }

    fn rmcp_config(&self) -> StreamableHttpServerConfig {
        let config = StreamableHttpServerConfig::default()
            .with_allowed_origins(self.origins())
            .enforce_origin_validation()
            .with_max_request_body_bytes(self.max_body_bytes)
            .with_legacy_session_mode(self.sessions);
        if self.addr.ip().is_loopback() {
            config // `Host` must name this machine: no DNS rebinding
        } else {
            // Listening for other machines, by request: any name may reach it.
            config.disable_allowed_hosts()
        }
    }
}

/// A bound HTTP listener, ready to serve.
pub struct HttpServer {
    listener: TcpListener,
    options: HttpOptions,
}

impl HttpServer {
    /// The address it listens on (the port chosen when `addr` had port 0).
    pub fn local_addr(&self) -> Result<SocketAddr, McpServerError> {
        self.listener
            .local_addr()
            .map_err(|e| McpServerError::new(McpServerErrorKind::Bind, e))
    }

    /// Serves `server` until `shutdown` completes, then stops gracefully:
    ///
    /// 1. [`READY_PATH`] answers 503 at once, and every answer closes its connection;
    /// 2. connections are still accepted for [`drain`](HttpOptions::drain), so that a
    ///    balancer's health check takes the server out first, then the listener is closed
    ///    and idle connections with it;
    /// 3. calls in flight and tasks running get until [`grace`](HttpOptions::grace) (from
    ///    `shutdown`) to finish;
    /// 4. sessions and their streams are ended, and the connections left are closed.
    ///
    /// Ending sooner (a second signal) is the caller's: drop the future.
    pub async fn serve(
        self,
        server: McpServer,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), McpServerError> {
        let (shared, sessions) = (server.shared.clone(), self.options.sessions);
        let manager = Arc::new(LocalSessionManager::default());
        if sessions {
            toolhost::telemetry::metrics::observe_open_sessions(open_sessions(&manager));
        }
        let token_key = self.options.token.as_deref().map(StateKey::from_token);
        let token_key = token_key.map(Arc::new);
        // Cancelled at the end of the grace period: rmcp ends its sessions and streams.
        let streams = CancellationToken::new();
        let service = StreamableHttpService::new(
            move || {
                let session = match sessions {
                    true => {
                        // rmcp calls this once per session it creates (an `initialize`).
                        toolhost::telemetry::metrics::mcp_session_started();
                        Session::new(shared.clone())
                    }
                    false => Session::stateless(shared.clone()),
                };
                Ok(session.with_token_key(token_key.clone()))
            },
            manager.clone(),
            self.options
                .rmcp_config()
                .with_cancellation_token(streams.clone()),
        );
        let endpoint = Arc::new(Endpoint {
            service,
            manager,
            token: self.options.token.as_deref().map(digest),
            sessions,
            max_body_bytes: self.options.max_body_bytes,
            body_bytes: Arc::new(Semaphore::new(
                BODY_BYTES_IN_FLIGHT.max(self.options.max_body_bytes),
            )),
            body_timeout: self.options.body_timeout,
            ready: std::sync::atomic::AtomicBool::new(true),
            requests: Arc::default(),
            loopback: self.options.addr.ip().is_loopback(),
            origins: self.options.origins(),
        });
        let accept = Accept {
            endpoint: endpoint.clone(),
            permits: Arc::new(Semaphore::new(self.options.max_connections.max(1))),
            header_timeout: self.options.header_timeout,
            closing: watch::channel(false).0,
            connections: Arc::default(),
        };
        let mut failures = AcceptFailures::default();
        // Serving, until asked to stop.
        accept_until(&self.listener, &accept, &mut failures, shutdown).await;
        let asked = tokio::time::Instant::now();
        let grace_end = asked + self.options.grace;
        endpoint
            .ready
            .store(false, std::sync::atomic::Ordering::SeqCst);
        // Draining: still accepting, so that nothing a balancer sends before it sees the 503s
        // is refused.
        let drain_end = asked + self.options.drain.min(self.options.grace);
        let draining = tokio::time::sleep_until(drain_end);
        accept_until(&self.listener, &accept, &mut failures, draining).await;
        drop(self.listener);
        finish(&endpoint, &server, &accept, grace_end, self.options.grace).await;
        streams.cancel();
        let last = tokio::time::Instant::now() + Duration::from_millis(500);
        let _ = tokio::time::timeout_at(grace_end.max(last), accept.connections.idle()).await;
        Ok(())
    }
}

/// Once the listener is closed: the requests in flight and the tasks running get until
/// `grace_end`; what still runs then is cancelled, with a warning.
async fn finish(
    endpoint: &Endpoint,
    server: &McpServer,
    accept: &Accept,
    grace_end: tokio::time::Instant,
    grace: Duration,
) {
    // Idle connections close now, busy ones after their answer.
    accept.closing.send_replace(true);
    let finished = tokio::time::timeout_at(grace_end, async {
        endpoint.requests.idle().await;
        while server.shared.tasks.running() > 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    if finished.is_err() {
        tracing::warn!(
            "{} request(s) and {} task(s) still running at the end of the grace period ({} s): cancelled",
            endpoint.requests.count(),
            server.shared.tasks.running(),
            grace.as_secs_f64()
        );
        server.shared.tasks.cancel_all();
    }
}

/// Binds `options.addr`.
pub(crate) async fn bind(options: HttpOptions) -> Result<HttpServer, McpServerError> {
    let listener = TcpListener::bind(options.addr).await.map_err(|e| {
        McpServerError::new(
            McpServerErrorKind::Bind,
            format!("cannot listen on {}: {e}", options.addr),
        )
    })?;
    Ok(HttpServer { listener, options })
}
