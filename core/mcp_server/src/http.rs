//! The streamable HTTP transport: rmcp's service behind a bearer-token check, served by hyper
//! on each accepted connection.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use sha2::{Digest, Sha256};
use tokio::net::TcpListener;

use super::error::{McpServerError, McpServerErrorKind};
use super::session::Session;
use super::McpServer;

/// The largest request body accepted by default: 4 MiB (413 beyond).
pub const DEFAULT_MAX_BODY_BYTES: usize = 4 << 20;

/// The path the MCP endpoint is served at.
pub const MCP_PATH: &str = "/mcp";

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
}

impl Default for HttpOptions {
    fn default() -> Self {
        Self {
            addr: SocketAddr::from(([127, 0, 0, 1], 8080)),
            token: None,
            allowed_origins: Vec::new(),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            sessions: false,
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
        let service = StreamableHttpService::new(
            move || match sessions {
                true => Ok(Session::new(shared.clone())),
                false => Ok(Session::stateless(shared.clone())),
            },
            Arc::new(LocalSessionManager::default()),
            self.options.rmcp_config(),
        );
        let token = self.options.token.as_deref().map(digest).map(Arc::new);
        tokio::pin!(shutdown);
        loop {
            let (stream, _) = tokio::select! {
                accepted = self.listener.accept() => match accepted {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        tracing::warn!("accepting a connection failed: {e}");
                        continue;
                    }
                },
                () = &mut shutdown => return Ok(()),
            };
            let (service, token) = (service.clone(), token.clone());
            tokio::spawn(async move {
                let handler = service_fn(move |request: Request<Incoming>| {
                    let (service, token) = (service.clone(), token.clone());
                    async move { Ok::<_, Infallible>(route(&service, token.as_deref(), request).await) }
                });
                let connection = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), handler);
                if let Err(e) = connection.await {
                    tracing::debug!("connection ended: {e}");
                }
            });
        }
    }
}

type Body = http_body_util::combinators::BoxBody<bytes::Bytes, Infallible>;

/// `/mcp` with the right token goes to rmcp (which checks `Origin`, `Host` and the body's
/// size); anything else is refused.
async fn route(
    service: &StreamableHttpService<Session, LocalSessionManager>,
    token: Option<&[u8; 32]>,
    request: Request<Incoming>,
) -> Response<Body> {
    if request.uri().path() != MCP_PATH {
        return plain(StatusCode::NOT_FOUND, "not found: the MCP endpoint is /mcp");
    }
    if let Some(expected) = token {
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
    service.handle(request).await
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
