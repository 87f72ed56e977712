//! The streamable HTTP transport: rmcp's service behind a bearer-token check and the
//! JSON-RPC check of each body ([`crate::jsonrpc`]), served by hyper on each accepted
//! connection (`TCP_NODELAY` set: an answer's last bytes never wait for the client's delayed
//! ACK), with a bound on the time a client may take and on the connections served at once,
//! and a graceful stop ([`HttpServer::serve`]).

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
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};
use tokio_util::sync::CancellationToken;

use super::error::{McpServerError, McpServerErrorKind};
use super::jsonrpc::{self, Refusal, INVALID_REQUEST};
use super::round_trip::StateKey;
use super::session::Session;
use super::shutdown::{Entered, InFlight, DEFAULT_DRAIN, DEFAULT_GRACE};
use super::McpServer;

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
                self.options.grace.as_secs_f64()
            );
            server.shared.tasks.cancel_all();
        }
        streams.cancel();
        let last = tokio::time::Instant::now() + Duration::from_millis(500);
        let _ = tokio::time::timeout_at(grace_end.max(last), accept.connections.idle()).await;
        Ok(())
    }
}

/// What serves each accepted connection.
struct Accept {
    endpoint: Arc<Endpoint>,
    permits: Arc<Semaphore>,
    header_timeout: Duration,
    /// `true` once the server stops: each connection closes after its answer.
    closing: watch::Sender<bool>,
    connections: Arc<InFlight>,
}

impl Accept {
    /// Serves `stream` in a task of its own.
    fn spawn(&self, stream: TcpStream) {
        // The answer's last bytes go at once, not after the client's delayed ACK (40 ms a
        // call on a kept-alive connection without it).
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!("TCP_NODELAY could not be set: {e}");
        }
        let permit = self.permits.clone().try_acquire_owned().ok();
        let endpoint = self.endpoint.clone();
        let mut closing = self.closing.subscribe();
        let counted = self.connections.enter();
        let mut builder = hyper::server::conn::http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(self.header_timeout);
        tokio::spawn(async move {
            let _counted = counted;
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
            let connection = builder.serve_connection(TokioIo::new(stream), handler);
            tokio::pin!(connection);
            let stopping = async move {
                let _ = closing.wait_for(|closing| *closing).await;
            };
            let served = tokio::select! {
                served = connection.as_mut() => served,
                () = stopping => {
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
            };
            if let Err(e) = served {
                tracing::debug!("connection ended: {e}");
            }
        });
    }
}

/// Accepts connections on `listener` and hands each to `accept` until `stop` completes; a
/// failed accept waits as `failures` says (the serving and the draining phase alike).
async fn accept_until(
    listener: &TcpListener,
    accept: &Accept,
    failures: &mut AcceptFailures,
    stop: impl Future<Output = ()>,
) {
    tokio::pin!(stop);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    failures.wait(&e).await;
                    continue;
                }
            },
            () = &mut stop => return,
        };
        failures.reset();
        accept.spawn(stream);
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
    /// The bytes of request bodies that may be held at once ([`BODY_BYTES_IN_FLIGHT`]), one
    /// permit a byte.
    body_bytes: Arc<Semaphore>,
    /// `false` once the server is asked to stop.
    ready: std::sync::atomic::AtomicBool,
    /// The requests being answered (their bodies included).
    requests: Arc<InFlight>,
    /// Whether it listens on a loopback address (then `Host` must name this machine).
    loopback: bool,
    /// The browser origins accepted ([`LOCAL_ORIGINS`] and the configured ones).
    origins: Vec<String>,
}

impl Endpoint {
    /// `/mcp` with the right token goes to rmcp (which checks `Origin`, `Host`, the
    /// protocol's headers and the sessions), a POST once its body is a JSON-RPC message;
    /// anything else is refused.
    async fn route(&self, request: Request<Incoming>) -> Response<Body> {
        use http_body_util::BodyExt;
        let ready = self.ready.load(std::sync::atomic::Ordering::SeqCst);
        // Every path, not only rmcp's: no page of another site reads `/metrics` or `/ready`.
        if let Some(why) = super::guard::refusal(request.headers(), self.loopback, &self.origins) {
            return closing(plain(StatusCode::FORBIDDEN, why), ready);
        }
        if request.uri().path() == READY_PATH {
            let status = match ready {
                true => StatusCode::OK,
                false => StatusCode::SERVICE_UNAVAILABLE,
            };
            return closing(plain(status, ""), ready);
        }
        // A call (a POST) is counted until its answer's body has been sent, or dropped; a
        // session's GET stream is not: it is ended at the end of the grace period.
        let counted = (request.method() == hyper::Method::POST).then(|| self.requests.enter());
        let response = self.route_counted(request).await;
        let response = match counted {
            Some(counted) => response.map(|body| {
                Counted {
                    body,
                    _counted: counted,
                }
                .boxed()
            }),
            None => response,
        };
        closing(response, ready)
    }

    async fn route_counted(&self, request: Request<Incoming>) -> Response<Body> {
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
        // The body's bytes are reserved first (as its length says, else the most a body may
        // have), and held until the answer is made.
        let length = parts
            .headers
            .get(hyper::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<usize>().ok())
            .map_or(self.max_body_bytes, |n| n.min(self.max_body_bytes));
        let permits = u32::try_from(length.max(1)).unwrap_or(u32::MAX);
        let reserved = self.body_bytes.clone().acquire_many_owned(permits);
        let _reserved = match tokio::time::timeout(self.body_timeout, reserved).await {
            Ok(Ok(reserved)) => reserved,
            _ => {
                let message = "too many large requests at once: try again".to_owned();
                return refused(StatusCode::SERVICE_UNAVAILABLE, INVALID_REQUEST, message);
            }
        };
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
            let status = match refusal.code {
                jsonrpc::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
                _ => StatusCode::BAD_REQUEST,
            };
            return json_error(status, &refusal);
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

/// A body counted in flight until it has been sent or dropped; its size is the inner body's,
/// so a whole body keeps its `Content-Length`.
struct Counted {
    body: Body,
    _counted: Entered,
}

impl hyper::body::Body for Counted {
    type Data = bytes::Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        std::pin::Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

/// `response`, closing its connection if the server is stopping (not `ready`).
fn closing(mut response: Response<Body>, ready: bool) -> Response<Body> {
    if !ready {
        let close = hyper::header::HeaderValue::from_static("close");
        response
            .headers_mut()
            .insert(hyper::header::CONNECTION, close);
    }
    response
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
