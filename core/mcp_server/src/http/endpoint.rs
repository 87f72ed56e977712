//! What each request goes to: the readiness answer, the Host and Origin rule, the token,
//! the metrics, and `/mcp` through the body's bounds and the JSON-RPC check to rmcp.

use crate::jsonrpc::{self, Refusal, INVALID_REQUEST};
use crate::session::Session;
use crate::shutdown::{Entered, InFlight};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::SessionManager;
use rmcp::transport::StreamableHttpService;
use sha2::{Digest, Sha256};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;

use super::*;

pub(super) type Body = http_body_util::combinators::BoxBody<bytes::Bytes, Infallible>;

/// What every connection's requests go to.
pub(super) struct Endpoint {
    pub(super) service: StreamableHttpService<Session, LocalSessionManager>,
    pub(super) manager: Arc<LocalSessionManager>,
    pub(super) token: Option<[u8; 32]>,
    pub(super) sessions: bool,
    pub(super) max_body_bytes: usize,
    pub(super) body_timeout: Duration,
    /// The bytes of request bodies that may be held at once ([`BODY_BYTES_IN_FLIGHT`]), one
    /// permit a byte.
    pub(super) body_bytes: Arc<Semaphore>,
    /// `false` once the server is asked to stop.
    pub(super) ready: std::sync::atomic::AtomicBool,
    /// The requests being answered (their bodies included).
    pub(super) requests: Arc<InFlight>,
    /// Whether it listens on a loopback address (then `Host` must name this machine).
    pub(super) loopback: bool,
    /// The browser origins accepted ([`LOCAL_ORIGINS`] and the configured ones).
    pub(super) origins: Vec<String>,
}

impl Endpoint {
    /// `/mcp` with the right token goes to rmcp (which checks `Origin`, `Host`, the
    /// protocol's headers and the sessions), a POST once its body is a JSON-RPC message;
    /// anything else is refused.
    pub(super) async fn route(&self, request: Request<Incoming>) -> Response<Body> {
        use http_body_util::BodyExt;
        let ready = self.ready.load(std::sync::atomic::Ordering::SeqCst);
        // Every path, not only rmcp's: no page of another site reads `/metrics` or `/ready`.
        if let Some(why) = crate::guard::refusal(request.headers(), self.loopback, &self.origins) {
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

    pub(super) async fn route_counted(&self, request: Request<Incoming>) -> Response<Body> {
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
    pub(super) async fn post(&self, request: Request<Incoming>) -> Response<Body> {
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
    pub(super) async fn unknown_session(
        &self,
        request: &Request<Incoming>,
    ) -> Option<Response<Body>> {
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
pub(super) fn open_sessions(
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
pub(super) struct Counted {
    pub(super) body: Body,
    pub(super) _counted: Entered,
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
pub(super) fn closing(mut response: Response<Body>, ready: bool) -> Response<Body> {
    if !ready {
        let close = hyper::header::HeaderValue::from_static("close");
        response
            .headers_mut()
            .insert(hyper::header::CONNECTION, close);
    }
    response
}

/// The metrics, as OpenMetrics text.
pub(super) fn metrics() -> Response<Body> {
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
pub(super) fn busy() -> Response<Body> {
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
pub(super) fn refused(status: StatusCode, code: i64, message: String) -> Response<Body> {
    let refusal = Refusal {
        code,
        message,
        id: serde_json::Value::Null,
        notification: false,
    };
    json_error(status, &refusal)
}

pub(super) fn json_error(status: StatusCode, refusal: &Refusal) -> Response<Body> {
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

pub(super) fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

pub(super) fn plain(status: StatusCode, text: &'static str) -> Response<Body> {
    use http_body_util::BodyExt;
    let body = http_body_util::Full::new(bytes::Bytes::from_static(text.as_bytes()));
    let mut response = Response::new(body.boxed());
    *response.status_mut() = status;
    response
}
