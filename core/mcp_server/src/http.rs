//! The streamable HTTP transport: rmcp's service behind a bearer-token check and the
//! JSON-RPC check of each body ([`crate::jsonrpc`]), served by hyper on each accepted
//! connection, with a bound on the time a client may take and on the connections served at
//! once.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::SessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use sha2::{Digest, Sha256};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use super::error::{McpServerError, McpServerErrorKind};
use super::jsonrpc::{self, Refusal, INVALID_REQUEST};
use super::round_trip::StateKey;
use super::session::Session;
use super::McpServer;

/// The largest request body accepted by default: 4 MiB (413 beyond).
pub const DEFAULT_MAX_BODY_BYTES: usize = 4 << 20;

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

    fn rmcp_config(&self) -> StreamableHttpServerConfig {
        let origins = LOCAL_ORIGINS
            .iter()
            .map(|o| (*o).to_owned())
            .chain(self.allowed_origins.iter().cloned());
        let config = StreamableHttpServerConfig::default()
            .with_allowed_origins(origins)
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

    /// Serves `server` until `shutdown` completes.
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
            self.options.rmcp_config(),
        );
        let endpoint = Arc::new(Endpoint {
            service,
            manager,
            token: self.options.token.as_deref().map(digest),
            sessions,
            max_body_bytes: self.options.max_body_bytes,
            body_timeout: self.options.body_timeout,
        });
        let connections = Arc::new(Semaphore::new(self.options.max_connections.max(1)));
        let mut failures = AcceptFailures::default();
        tokio::pin!(shutdown);
        loop {
            let (stream, _) = tokio::select! {
                accepted = self.listener.accept() => match accepted {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        failures.wait(&e).await;
                        continue;
                    }
                },
                () = &mut shutdown => return Ok(()),
            };
            failures.reset();
            let permit = connections.clone().try_acquire_owned().ok();
            let endpoint = endpoint.clone();
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(self.options.header_timeout);
            tokio::spawn(async move {
                let Some(_permit) = permit else {
                    // Over the cap: answered at once, and closed.
                    builder.keep_alive(false);
                    let busy = service_fn(|_| async { Ok::<_, Infallible>(busy()) });
                    let _ = builder.serve_connection(TokioIo::new(stream), busy).await;
                    return;
                };
                let handler = service_fn(move |request: Request<Incoming>| {
                    let endpoint = endpoint.clone();
                    async move { Ok::<_, Infallible>(endpoint.route(request).await) }
                });
                if let Err(e) = builder
                    .serve_connection(TokioIo::new(stream), handler)
                    .await
                {
                    tracing::debug!("connection ended: {e}");
                }
            });
        }
    }
}

/// A failing `accept` (no file descriptor left, most often): the loop waits a little longer
/// after each failure in a row (up to a second), and says so at most once a second.
#[derive(Default)]
struct AcceptFailures {
    in_a_row: u32,
    unreported: u64,
    reported: Option<Instant>,
}

impl AcceptFailures {
    async fn wait(&mut self, error: &std::io::Error) {
        self.in_a_row = self.in_a_row.saturating_add(1);
        self.unreported += 1;
        if self
            .reported
            .is_none_or(|at| at.elapsed() >= Duration::from_secs(1))
        {
            let more = match self.unreported {
                1 => String::new(),
                n => format!(" ({n} failures since the last report)"),
            };
            tracing::warn!("accepting a connection failed: {error}{more}; retrying with backoff");
            self.reported = Some(Instant::now());
            self.unreported = 0;
        }
        let delay = Duration::from_millis(5) * 2u32.saturating_pow(self.in_a_row.min(8));
        tokio::time::sleep(delay.min(Duration::from_secs(1))).await;
    }

    fn reset(&mut self) {
        self.in_a_row = 0;
    }
}

type Body = http_body_util::combinators::BoxBody<bytes::Bytes, Infallible>;

/// What every connection's requests go to.
struct Endpoint {
    service: StreamableHttpService<Session, LocalSessionManager>,
    manager: Arc<LocalSessionManager>,
    token: Option<[u8; 32]>,
    sessions: bool,
    max_body_bytes: usize,
    body_timeout: Duration,
}

impl Endpoint {
    /// `/mcp` with the right token goes to rmcp (which checks `Origin`, `Host`, the
    /// protocol's headers and the sessions), a POST once its body is a JSON-RPC message;
    /// anything else is refused.
    async fn route(&self, request: Request<Incoming>) -> Response<Body> {
        let path = request.uri().path();
        if path != MCP_PATH && path != METRICS_PATH {
            return plain(StatusCode::NOT_FOUND, "not found: the MCP endpoint is /mcp");
        }
        if let Some(expected) = &self.token {
            let given = request
                .headers()
                .get(hyper::header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "));
            // Digests compared, so the time taken says nothing about the token.
            if given.map(digest).as_ref() != Some(expected) {
                let mut response = plain(StatusCode::UNAUTHORIZED, "a bearer token is required");
                let challenge = hyper::header::HeaderValue::from_static("Bearer");
                response
                    .headers_mut()
                    .insert(hyper::header::WWW_AUTHENTICATE, challenge);
                return response;
            }
        }
        if request.uri().path() == METRICS_PATH {
            return metrics();
        }
        match *request.method() {
            hyper::Method::POST => self.post(request).await,
            hyper::Method::DELETE if self.sessions => match self.unknown_session(&request).await {
                Some(response) => response,
                None => self.service.handle(request).await,
            },
            _ => self.service.handle(request).await,
        }
    }

    /// A POST: its body read (within the size and time bounds) and checked, then handed to
    /// rmcp whole.
    async fn post(&self, request: Request<Incoming>) -> Response<Body> {
        use http_body_util::BodyExt;
        let (parts, body) = request.into_parts();
        let limited = http_body_util::Limited::new(body, self.max_body_bytes);
        let bytes = match tokio::time::timeout(self.body_timeout, limited.collect()).await {
            Ok(Ok(collected)) => collected.to_bytes(),
            Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => {
                let message = format!(
                    "the request body is larger than {} bytes (--max-body-bytes)",
                    self.max_body_bytes
                );
                return refused(StatusCode::PAYLOAD_TOO_LARGE, INVALID_REQUEST, message);
            }
            Ok(Err(e)) => {
                let message = format!("the request body could not be read: {e}");
                return refused(StatusCode::BAD_REQUEST, INVALID_REQUEST, message);
            }
            Err(_) => {
                let message = format!(
                    "the request body did not arrive within {} s",
                    self.body_timeout.as_secs_f64()
                );
                return refused(StatusCode::REQUEST_TIMEOUT, INVALID_REQUEST, message);
            }
        };
        if let Err(refusal) = jsonrpc::check(&bytes) {
            return json_error(StatusCode::BAD_REQUEST, &refusal);
        }
        let body = http_body_util::Full::new(bytes);
        self.service.handle(Request::from_parts(parts, body)).await
    }

    /// A DELETE of a session this server never issued, or has closed: 404, as the MCP
    /// specification says (rmcp would accept it).
    async fn unknown_session(&self, request: &Request<Incoming>) -> Option<Response<Body>> {
        let id = request.headers().get("mcp-session-id")?.to_str().ok()?;
        let known = self.manager.has_session(&id.to_owned().into()).await;
        match known {
            Ok(false) => Some(plain(
                StatusCode::NOT_FOUND,
                "not found: no such session (it ended, or this server never issued it)",
            )),
            _ => None,
        }
    }
}

/// What counts `manager`'s open sessions for the metrics: rmcp's own map, from which a DELETE
/// and an idle expiry both remove the session. `None` once the server is gone.
fn open_sessions(
    manager: &Arc<LocalSessionManager>,
) -> impl Fn() -> Option<u64> + Send + Sync + use<> {
    let manager = Arc::downgrade(manager);
    let last = std::sync::atomic::AtomicU64::new(0);
    move || {
        use std::sync::atomic::Ordering::Relaxed;
        let manager = manager.upgrade()?;
        // The lock is held only to insert or remove one entry; if it stays taken, the last count.
        for _ in 0..1000 {
            if let Ok(open) = manager.sessions.try_read() {
                last.store(open.len() as u64, Relaxed);
                break;
            }
            std::thread::yield_now();
        }
        Some(last.load(Relaxed))
    }
}

/// The metrics, as OpenMetrics text.
fn metrics() -> Response<Body> {
    use http_body_util::BodyExt;
    let text = toolhost::telemetry::metrics::render();
    let body = http_body_util::Full::new(bytes::Bytes::from(text));
    let mut response = Response::new(body.boxed());
    let kind = toolhost::telemetry::metrics::CONTENT_TYPE;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(kind),
    );
    response
}

/// The answer to a connection over the cap.
fn busy() -> Response<Body> {
    let message = "the server is serving as many connections as it may; retry shortly";
    let mut response = refused(
        StatusCode::SERVICE_UNAVAILABLE,
        INVALID_REQUEST,
        message.into(),
    );
    let retry = hyper::header::HeaderValue::from_static("1");
    response
        .headers_mut()
        .insert(hyper::header::RETRY_AFTER, retry);
    response
}

/// A JSON-RPC error response with id `null`, with HTTP status `status`.
fn refused(status: StatusCode, code: i64, message: String) -> Response<Body> {
    let refusal = Refusal {
        code,
        message,
        id: serde_json::Value::Null,
        notification: false,
    };
    json_error(status, &refusal)
}

fn json_error(status: StatusCode, refusal: &Refusal) -> Response<Body> {
    use http_body_util::BodyExt;
    let body = http_body_util::Full::new(bytes::Bytes::from(refusal.to_json()));
    let mut response = Response::new(body.boxed());
    *response.status_mut() = status;
    let json = hyper::header::HeaderValue::from_static("application/json");
    response
        .headers_mut()
        .insert(hyper::header::CONTENT_TYPE, json);
    response
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

fn plain(status: StatusCode, text: &'static str) -> Response<Body> {
    use http_body_util::BodyExt;
    let body = http_body_util::Full::new(bytes::Bytes::from_static(text.as_bytes()));
    let mut response = Response::new(body.boxed());
    *response.status_mut() = status;
    response
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
