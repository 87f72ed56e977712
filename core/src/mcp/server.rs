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

    /// The server said its tool list changed: a re-list after [`RELIST_DEBOUNCE`], unless
    /// one is already waiting (a storm of notifications costs one re-list per window).
    pub(crate) fn list_changed(self: &Arc<Self>, peer: Peer<RoleClient>) {
        {
            let mut relist = lock(&self.relist);
            if relist.scheduled {
                relist.again = true;
                return;
            }
            relist.scheduled = true;
        }
        let server = self.clone();
        self.runtime.spawn(async move {
            loop {
                tokio::time::sleep(RELIST_DEBOUNCE).await;
                lock(&server.relist).again = false;
                server.refresh_tools(peer.clone()).await;
                let mut relist = lock(&server.relist);
                if !std::mem::take(&mut relist.again) {
                    relist.scheduled = false;
                    break;
                }
            }
        });
    }

    /// Reads its tool list again (after `notifications/tools/list_changed`).
    async fn refresh_tools(self: &Arc<Self>, peer: Peer<RoleClient>) {
        let listed = self.list_tools(&peer).await;
        let mut inner = self.inner();
        if !matches!(inner.state, McpState::Ready | McpState::Starting) {
            return; // it failed or stopped meanwhile: it offers no tools
        }
        match listed {
            Ok(tools) => inner.tools = tools,
            Err(reason) => inner.last_error = Some(reason),
        }
        drop(inner);
        self.bump();
    }

    async fn list_tools(
        self: &Arc<Self>,
        peer: &Peer<RoleClient>,
    ) -> Result<Arc<[Arc<McpTool>]>, String> {
        let listed = list_all_tools(&self.config.name, peer).await?;
        let changed = self.pinned(&listed)?;
        let mut tools = Vec::with_capacity(listed.len());
        for tool in &listed {
            if changed.iter().any(|c| c.tool == *tool.name) {
                continue;
            }
            let breaker = self.breaker(&tool.name);
            match McpTool::new(self, tool, breaker) {
                Ok(tool) => tools.push(Arc::new(tool)),
                Err(reason) => {
                    tracing::warn!("MCP server {}: {reason}", self.config.name);
                    self.inner().last_error = Some(reason);
                }
            }
        }
        tools.sort_by(|a, b| a.name.cmp(&b.name));
        let before = std::mem::replace(&mut self.inner().changed, changed.clone());
        let approved: Vec<&str> = before
            .iter()
            .filter(|b| !changed.iter().any(|c| c.tool == b.tool))
            .map(|b| b.tool.as_str())
            .collect();
        if !approved.is_empty() {
            tracing::info!(
                "MCP server {}: the approved definition of {} is offered again",
                self.config.name,
                crate::layout::Escaped(std::path::Path::new(&approved.join(", ")))
            );
        }
        Ok(tools.into())
    }

    /// The tools of `listed` whose definitions changed since approved (those seen for the
    /// first time are recorded), each change logged. A lock that cannot be used fails the
    /// listing: no definition can be told approved.
    fn pinned(&self, listed: &[rmcp::model::Tool]) -> Result<Vec<ChangedTool>, String> {
        let name = &self.config.name;
        let changed = self
            .pins
            .check(name, listed)
            .map_err(|e| format!("its tool definitions cannot be checked: {e}"))?;
        if !changed.is_empty() {
            let tools: Vec<&str> = changed.iter().map(|c| c.tool.as_str()).collect();
            tracing::warn!(
                "MCP server {name}: the definition of {} changed since it was approved (or \
                 the tool is new), held back until approved: see `toolhost mcp diff {name}`, \
                 which says how to approve exactly what it shows",
                crate::layout::Escaped(std::path::Path::new(&tools.join(", ")))
            );
        }
        Ok(changed)
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

    /// Its tools whose definitions changed since approved.
    pub(crate) fn changed_tools(&self) -> Vec<ChangedTool> {
        self.inner().changed.clone()
    }

    /// A lock in `usr/mcp-tools/` changed (an approval by another process, `toolhost mcp
    /// approve`):
    /// if tools of its are held back, it lists its tools again.
    pub(crate) fn pins_changed(self: &Arc<Self>) {
        let peer = {
            let inner = self.inner();
            match inner.changed.is_empty() {
                true => None,
                false => inner.service.as_ref().map(|s| s.peer().clone()),
            }
        };
        if let Some(peer) = peer {
            self.list_changed(peer);
        }
    }

    /// Approves the changed definitions of its tools (recorded in the lock), then lists its
    /// tools again if it runs. The tools approved. `digest` must be the
    /// [`changes_digest`](super::pins::changes_digest) of the changes held now: what was shown
    /// is what is approved.
    pub(crate) fn approve(self: &Arc<Self>, digest: &str) -> Result<Vec<String>, String> {
        let changed = self.changed_tools();
        if changed.is_empty() {
            return Ok(Vec::new());
        }
        let now = super::pins::changes_digest(&changed);
        if now != digest {
            let name = &self.config.name;
            return Err(format!(
                "the held-back definitions of {name} are not those shown with digest \
                 {digest} (their digest is {now} now): nothing approved; look at them again \
                 with `toolhost mcp diff {name}`"
            ));
        }
        self.pins.approve(&self.config.name, &changed)?;
        let peer = {
            let mut inner = self.inner();
            inner.changed.clear();
            inner.service.as_ref().map(|s| s.peer().clone())
        };
        if let Some(peer) = peer {
            self.list_changed(peer);
        }
        Ok(changed.into_iter().map(|c| c.tool).collect())
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

/// At most this many pages of `tools/list` are read from one server: one that keeps giving a
/// next cursor is a failure, not a loop.
const MAX_LIST_PAGES: usize = 1_000;

/// Every page of the server's `tools/list`, in one client span whose `traceparent` each page
/// request carries (the server's span is its child); the error is one line.
async fn list_all_tools(
    server: &str,
    peer: &Peer<RoleClient>,
) -> Result<Vec<rmcp::model::Tool>, String> {
    let span = telemetry::McpClientSpan::request("tools/list", server);
    let listed = async {
        let mut tools = Vec::new();
        let mut cursor = None;
        for _ in 0..MAX_LIST_PAGES {
            let mut params = PaginatedRequestParams::default().with_cursor(cursor);
            if let Some(traceparent) = telemetry::traceparent() {
                params.set_traceparent(&traceparent);
            }
            let page = peer
                .list_tools(Some(params))
                .await
                .map_err(|e| format!("listing its tools failed: {e}"))?;
            tools.extend(page.tools);
            cursor = page.next_cursor;
            if cursor.is_none() {
                return Ok(tools);
            }
        }
        Err(format!(
            "listing its tools failed: it gave a next page {MAX_LIST_PAGES} times; check the \
             server's paging"
        ))
    };
    let listed = span.span().run(listed).await;
    if let Err(reason) = &listed {
        span.failed("list_failed", reason);
    }
    listed
}

/// Closes a connection: the SDK closes the child's input, waits for it to exit, then sends
/// SIGTERM, then kills it.
pub(crate) async fn shutdown(mut service: Service) {
    let _ = service.close_with_timeout(Duration::from_secs(5)).await;
}
