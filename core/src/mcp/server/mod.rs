//! One MCP server: its connection, its state (starting, ready with its tools, failed with the
//! reason), restarts with backoff after a failure, and a clean shutdown.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::{PaginatedRequestParams, RequestParamsMeta};
use rmcp::service::{Peer, RoleClient, RunningService};
use tokio::runtime::Handle;
use tokio::sync::watch;

use super::config::ServerConfig;
use super::connect::connect;
use super::handler::{Handler, ProgressRoutes};
use super::pins::{ChangedTool, ToolPins};
use super::tool::McpTool;
use crate::governance::Breaker;
use crate::secrets::Secrets;
use crate::sync::lock;
use crate::telemetry;
use plugin_api::ToolError;

mod tools;

/// The longest wait between restarts of a server that keeps failing.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// `notifications/tools/list_changed` within this window of the first become one re-list of
/// the server's tools (and those during a re-list, one more after the next window).
pub(crate) const RELIST_DEBOUNCE: Duration = Duration::from_millis(250);

/// Whether a re-list is scheduled, and whether a change came in after it began waiting.
#[derive(Default)]
struct Relist {
    scheduled: bool,
    again: bool,
}

/// Where a server is in its life.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpState {
    /// Being started (the process spawned, the handshake or the tool list under way).
    Starting,
    /// Connected; its tools are offered.
    Ready,
    /// It could not start, or it exited; the reason. It is started again at the next use of
    /// one of its tools, after a backoff that grows with each failure in a row.
    Failed(String),
    /// Shut down with its host.
    Stopped,
}

impl McpState {
    /// `starting`, `ready`, `failed` or `stopped`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Starting => "starting",
            Self::Ready => "ready",
            Self::Failed(_) => "failed",
            Self::Stopped => "stopped",
        }
    }
}

pub(crate) type Service = RunningService<RoleClient, Handler>;

struct Inner {
    state: McpState,
    service: Option<Service>,
    tools: Arc<[Arc<McpTool>]>,
    /// The last thing that went wrong (a failed start, an exit, a tool left out).
    last_error: Option<String>,
    /// Failures in a row (starts or exits), for the backoff; a successful call resets it.
    failures: u32,
    failed_at: Option<Instant>,
    /// The last failure logged as a warning: a server that fails again the same way is
    /// reported once per host (later failures are logged at debug level).
    warned: Option<String>,
    /// Its tools whose definition changed since it was approved (held back while pinning is
    /// on).
    changed: Vec<ChangedTool>,
}

/// A configured server and its connection.
pub(crate) struct Server {
    pub(crate) config: ServerConfig,
    runtime: Handle,
    inner: Mutex<Inner>,
    /// Bumped at each change of state, so callers can wait for one.
    changed: watch::Sender<u64>,
    pub(crate) progress: Arc<ProgressRoutes>,
    /// Each tool's breaker by its name on the server, kept across tool-list refreshes and
    /// restarts.
    breakers: Mutex<HashMap<String, Arc<Breaker>>>,
    relist: Mutex<Relist>,
    /// The approved tool definitions (`usr/mcp-tools/SERVER.lock`).
    pins: ToolPins,
    /// Who can answer for each call under way, by a number of its own: a form the server
    /// sends goes to the latest.
    askers: Mutex<Vec<(u64, super::Asker)>>,
    next_asker: std::sync::atomic::AtomicU64,
}

/// Takes a call's asker off its server when the call ends, however it ends.
pub(crate) struct Asking<'a>(&'a Server, u64);

impl Drop for Asking<'_> {
    fn drop(&mut self) {
        lock(&self.0.askers).retain(|(id, _)| *id != self.1);
    }
}

impl Server {
    pub(crate) fn new(config: ServerConfig, runtime: Handle, pins: ToolPins) -> Arc<Self> {
        Arc::new(Self {
            config,
            runtime,
            inner: Mutex::new(Inner {
                state: McpState::Failed("not started yet".to_owned()),
                service: None,
                tools: Arc::new([]),
                last_error: None,
                failures: 0,
                failed_at: None,
                warned: None,
                changed: Vec::new(),
            }),
            changed: watch::channel(0).0,
            progress: Arc::default(),
            breakers: Mutex::default(),
            relist: Mutex::default(),
            pins,
            askers: Mutex::default(),
            next_asker: Default::default(),
        })
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        lock(&self.inner)
    }

    /// Its state, its tools and its last error.
    pub(crate) fn snapshot(&self) -> (McpState, Arc<[Arc<McpTool>]>, Option<String>) {
        self.check_alive();
        let inner = self.inner();
        (
            inner.state.clone(),
            inner.tools.clone(),
            inner.last_error.clone(),
        )
    }

    /// Starts it in the background if it is not running or starting; a failed server only
    /// once its backoff has passed. Returns when it is not started now, why.
    pub(crate) fn start(self: &Arc<Self>, secrets: &Arc<Secrets>) -> Option<String> {
        self.check_alive();
        let mut inner = self.inner();
        match &inner.state {
            McpState::Starting | McpState::Ready | McpState::Stopped => return None,
            McpState::Failed(reason) => {
                let wait = backoff(inner.failures);
                let since = inner.failed_at.map_or(wait, |at| at.elapsed());
                if since < wait {
                    let left = (wait - since).as_secs_f64().ceil();
                    return Some(format!("{reason}; it is started again in {left} s"));
                }
            }
        }
        inner.state = McpState::Starting;
        drop(inner);
        self.bump();
        let (server, secrets) = (self.clone(), secrets.clone());
        self.runtime.spawn(async move {
            let handler = Handler {
                server: Arc::downgrade(&server),
                progress: server.progress.clone(),
                group: Default::default(),
                broken: tokio::sync::watch::channel(None).0,
            };
            // Starting the process (or reaching the URL) and the handshake: one client span.
            let span = telemetry::McpClientSpan::request("initialize", &server.config.name);
            let connected = span
                .span()
                .run(connect(&server.config, &secrets, handler))
                .await;
            if let Err(reason) = &connected {
                span.failed("handshake", reason);
            }
            drop(span);
            server.connected(connected).await;
        });
        None
    }

    /// Takes the outcome of a start: the service and its tools, or why it failed.
    async fn connected(self: &Arc<Self>, connected: Result<Service, String>) {
        let service = match connected {
            Ok(service) => service,
            Err(reason) => return self.failed(reason),
        };
        let peer = service.peer().clone();
        let mut broken = service.service().broken.subscribe();
        {
            let mut inner = self.inner();
            if inner.state == McpState::Stopped {
                drop(inner);
                drop(self.runtime.spawn(shutdown(service)));
                return;
            }
            inner.service = Some(service);
        }
        // A listing whose answer was dropped (a broken message) fails at once, with why.
        let listed = tokio::select! {
            listed = self.list_tools(&peer) => listed,
            why = super::stdout_check::broke(&mut broken) => Err(format!("listing its tools failed: {why}")),
        };
        match listed {
            Ok(tools) => {
                let mut inner = self.inner();
                inner.tools = tools;
                inner.state = McpState::Ready;
                tracing::info!(
                    "MCP server {}: ready with {} tools",
                    self.config.name,
                    inner.tools.len()
                );
            }
            Err(reason) => return self.failed(reason),
        }
        self.bump();
    }

    /// Registers who can answer for a call under way, until the guard drops.
    pub(crate) fn asking(&self, asker: super::Asker) -> Asking<'_> {
        let id = self
            .next_asker
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        lock(&self.askers).push((id, asker));
        Asking(self, id)
    }

    /// Who can answer for the latest call under way, if one is.
    pub(crate) fn asker(&self) -> Option<super::Asker> {
        lock(&self.askers).last().map(|(_, asker)| asker.clone())
    }

    fn breaker(&self, tool: &str) -> Arc<Breaker> {
        let mut breakers = lock(&self.breakers);
        breakers.entry(tool.to_owned()).or_default().clone()
    }

    /// Records a failure (a start that failed, an exit): the service is dropped (its child is
    /// killed) and the next use starts it again after the backoff.
    pub(crate) fn failed(&self, reason: String) {
        let service = {
            let mut inner = self.inner();
            if inner.state == McpState::Stopped {
                return;
            }
            match inner.warned.as_deref() == Some(reason.as_str()) {
                true => tracing::debug!("MCP server {}: {reason}", self.config.name),
                false => {
                    tracing::warn!("MCP server {}: {reason}", self.config.name);
                    inner.warned = Some(reason.clone());
                }
            }
            inner.state = McpState::Failed(reason.clone());
            inner.last_error = Some(reason);
            inner.failures += 1;
            inner.failed_at = Some(Instant::now());
            inner.tools = Arc::new([]);
            inner.service.take()
        };
        if let Some(service) = service {
            drop(self.runtime.spawn(shutdown(service)));
        }
        self.bump();
    }

    /// A call succeeded: the backoff starts from zero again.
    pub(crate) fn call_succeeded(&self) {
        self.inner().failures = 0;
    }

    /// Marks a ready server whose connection closed as failed.
    fn check_alive(&self) {
        let closed = {
            let inner = self.inner();
            inner.state == McpState::Ready
                && inner
                    .service
                    .as_ref()
                    .is_some_and(|s| s.is_transport_closed())
        };
        if closed {
            self.failed("the server exited (its connection closed)".to_owned());
        }
    }

    /// The connection, once the server is ready; waits while it starts, at most `wait`.
    pub(crate) async fn ready(
        self: &Arc<Self>,
        secrets: &Arc<Secrets>,
        wait: Duration,
    ) -> Result<Peer<RoleClient>, ToolError> {
        let name = &self.config.name;
        let mut changes = self.changed.subscribe();
        if let Some(why) = self.start(secrets) {
            return Err(ToolError::dependency(format!(
                "MCP server '{name}' is down: {why}"
            )));
        }
        let deadline = crate::config::numbers::later(tokio::time::Instant::now(), wait);
        loop {
            let state = {
                let inner = self.inner();
                match (&inner.state, &inner.service) {
                    (McpState::Ready, Some(service)) => return Ok(service.peer().clone()),
                    (state, _) => state.clone(),
                }
            };
            match state {
                McpState::Starting => {}
                McpState::Failed(why) => {
                    return Err(ToolError::dependency(format!(
                        "MCP server '{name}' failed to start: {why}"
                    )));
                }
                _ => {
                    return Err(ToolError::dependency(format!(
                        "MCP server '{name}' is stopped"
                    )));
                }
            }
            let waited = tokio::time::timeout_at(deadline, changes.changed()).await;
            if waited.is_err() {
                return Err(ToolError::timeout(format!(
                    "MCP server '{name}' was still starting after {} s",
                    wait.as_secs_f64()
                )));
            }
        }
    }

    /// Waits until it is not starting, at most `wait`.
    pub(crate) async fn settled(&self, wait: Duration) {
        let mut changes = self.changed.subscribe();
        let deadline = crate::config::numbers::later(tokio::time::Instant::now(), wait);
        while self.inner().state == McpState::Starting {
            if tokio::time::timeout_at(deadline, changes.changed())
                .await
                .is_err()
            {
                return;
            }
        }
    }

    /// Stops it for good: the service to shut down, if it runs.
    pub(crate) fn stop(&self) -> Option<Service> {
        let mut inner = self.inner();
        inner.state = McpState::Stopped;
        inner.tools = Arc::new([]);
        inner.service.take()
    }

    fn bump(&self) {
        self.changed.send_modify(|n| *n += 1);
    }
}

/// 0 s before the first restart, then 1 s, 2 s, 4 s ... up to [`MAX_BACKOFF`].
fn backoff(failures: u32) -> Duration {
    match failures {
        0 | 1 => Duration::ZERO,
        n => Duration::from_secs(1u64 << (n - 2).min(5)).min(MAX_BACKOFF),
    }
}

/// Closes a connection: the SDK closes the child's input, waits for it to exit, then sends
/// SIGTERM, then kills it.
pub(crate) async fn shutdown(mut service: Service) {
    let _ = service.close_with_timeout(Duration::from_secs(5)).await;
}
