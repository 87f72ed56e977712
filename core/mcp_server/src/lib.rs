//! # toolhost-mcp-server: the host's tools over MCP
//!
//! Serving the host's native tools to any MCP client, with the official Rust SDK (`rmcp`).
//!
//! - `tools.rs`: a native tool as an MCP tool (schema, annotations), and which are listed;
//! - `session/`: the handler of one MCP session (`as_task.rs` a call become a task,
//!   `prompt_args.rs` a prompt's arguments asked for);
//! - `call.rs`: one `tools/call` through the lifecycle, on an agent of its own;
//! - `progress.rs`: a call's progress as `notifications/progress`;
//! - `approval.rs`: approvals asked with elicitation;
//! - `asker.rs`: what a tool asks (log, elicit, sample), asked of the client;
//! - `prompts.rs`: prompts from the layers' `mcp-prompts/` folders, and their completion;
//! - `resources.rs`: resources from the layers' `resources/` folders, templates, completion;
//! - `peers.rs`: the connected clients, told when the tools change;
//! - `listen.rs`: `subscriptions/listen`, the changes told to 2026-07-28 clients;
//! - `round_trip.rs`: what a 2026-07-28 client is asked, as `InputRequiredResult`s with a
//!   sealed `requestState`;
//! - `skills.rs`: skills from the layers' `skills/` folders (the Skills extension);
//! - `tasks.rs`: long calls of 2026-07-28 clients as tasks (the Tasks extension);
//! - `cache_hints.rs`: the `ttlMs` and `cacheScope` of lists and reads (2026-07-28);
//! - `jsonrpc.rs`: each message checked as JSON-RPC before rmcp reads it;
//! - `stdio.rs`: the stdio transport, a bounded line at a time;
//! - `http/`: the streamable HTTP transport (`accept.rs` the connections, `endpoint.rs` each
//!   request and its checks, and `/metrics`);
//! - `guard.rs`: the Host and Origin rule every HTTP endpoint applies (DNS rebinding);
//! - `echo.rs`: a client's text repeated in an error, masked, escaped and bounded;
//! - `telemetry.rs`: each request's span, its parent from the client's `traceparent`;
//! - `error.rs`: the errors.
//!
//! ```no_run
//! use std::sync::Arc;
//! use toolhost_mcp_server::McpServer;
//!
//! # #[tokio::main]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let host = Arc::new(toolhost::Host::new(".")?);
//! let server = McpServer::new(host, "default")?;
//! let _reloads = server.watch()?; // tools/list_changed on every reload
//! server.serve_stdio().await?;
//! # Ok(()) }
//! ```
#![deny(missing_docs)]
// Library code handles its errors, or says with `expect` why a value cannot be missing.
#![cfg_attr(not(test), warn(clippy::unwrap_used))]

mod approval;
mod asker;
mod cache_hints;
mod call;
mod echo;
mod error;
mod escalate;
mod guard;
mod http;
mod jsonrpc;
mod listen;
mod peers;
mod progress;
mod prompts;
mod resources;
mod round_trip;
mod session;
mod shutdown;
mod skills;
mod stdio;
mod tasks;
mod telemetry;
mod tools;

use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

pub use call::{AGENT_NAME, AUDIT_ERROR_META};
pub use error::{McpServerError, McpServerErrorKind};
pub use http::{
    HttpOptions, HttpServer, BODY_BYTES_IN_FLIGHT, DEFAULT_BODY_TIMEOUT, DEFAULT_HEADER_TIMEOUT,
    DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_CONNECTIONS, MCP_PATH, METRICS_PATH, READY_PATH,
};
pub use peers::ReloadNotifier;
pub use shutdown::{DEFAULT_DRAIN, DEFAULT_GRACE};
pub use tasks::{DEFAULT_MAX_TASKS, RESULT_RETENTION, TASK_MIN_DEADLINE};

use peers::Peers;
use session::Session;

use toolhost::is_safe_name;
use toolhost::Host;

/// What every session shares.
pub(crate) struct Shared {
    host: Arc<Host>,
    profile: String,
    peers: Arc<Peers>,
    /// `--yes`: asks for `write` tools are approved without asking (never `exec`).
    yes_to_writes: std::sync::atomic::AtomicBool,
    /// The longest line read over stdio, in bytes.
    max_line_bytes: std::sync::atomic::AtomicUsize,
    /// Only `read` tools are offered (an HTTP listener without a token).
    read_only: std::sync::atomic::AtomicBool,
    /// Seals the `requestState` of 2026-07-28 clients' calls (an HTTP listener with a token
    /// uses one derived from it instead).
    state_key: Arc<round_trip::StateKey>,
    /// The calls running, or finished, as tasks (2026-07-28 clients).
    tasks: Arc<tasks::Tasks>,
}

/// An MCP server for one profile of a host: lists the tools the profile may call and runs
/// each call through the lifecycle.
#[derive(Clone)]
pub struct McpServer {
    shared: Arc<Shared>,
}

impl McpServer {
    /// A server for `profile`'s tools.
    pub fn new(host: Arc<Host>, profile: &str) -> Result<Self, McpServerError> {
        if !is_safe_name(profile) {
            let message = format!("invalid profile name '{profile}'");
            return Err(McpServerError::new(
                McpServerErrorKind::InvalidProfile,
                message,
            ));
        }
        let shared = Shared {
            host,
            profile: profile.to_owned(),
            peers: Arc::default(),
            yes_to_writes: Default::default(),
            max_line_bytes: DEFAULT_MAX_BODY_BYTES.into(),
            read_only: Default::default(),
            state_key: Arc::new(round_trip::StateKey::random().map_err(|e| {
                McpServerError::new(
                    McpServerErrorKind::Key,
                    format!("cannot make the key that seals requestState: {e}"),
                )
            })?),
            tasks: Arc::default(),
        };
        Ok(Self {
            shared: Arc::new(shared),
        })
    }

    /// The tools a client is offered now, as `tools/list` gives them.
    pub fn tools(&self) -> Vec<rmcp::model::Tool> {
        tools::list(&self.shared.host, &self.shared.profile)
            .into_iter()
            .filter(|t| !self.shared.is_read_only() || tools::is_read(t))
            .collect()
    }

    /// Offers only the tools whose risk level is `read` (`tools/list` leaves the others out,
    /// and a call of one is refused): what `toolhost serve-mcp --http` does without a token
    /// unless started with `--allow-writes-without-token`.
    pub fn serve_only_read(&self, yes: bool) {
        let flag = &self.shared.read_only;
        flag.store(yes, std::sync::atomic::Ordering::SeqCst);
    }

    /// Approves the asks for `write` tools without asking the client (`--yes`); `exec` tools
    /// are still asked.
    pub fn approve_writes(&self, yes: bool) {
        let flag = &self.shared.yes_to_writes;
        flag.store(yes, std::sync::atomic::Ordering::SeqCst);
    }

    /// The longest message a client may send over stdio, in bytes (default
    /// [`DEFAULT_MAX_BODY_BYTES`], as for an HTTP body): a longer line is answered with an
    /// invalid-request error and skipped.
    pub fn limit_lines(&self, bytes: usize) {
        let limit = &self.shared.max_line_bytes;
        limit.store(bytes, std::sync::atomic::Ordering::SeqCst);
    }

    /// Holds at most `max` tasks at a time (default [`DEFAULT_MAX_TASKS`]; 0 makes no call
    /// a task): a long call of a 2026-07-28 client that declares the Tasks extension
    /// (`io.modelcontextprotocol/tasks`) answers at once with a task it polls with
    /// `tasks/get`, when its tool's deadline is at least [`TASK_MIN_DEADLINE`]. Tasks live in
    /// this process's memory: a finished one is kept [`RESULT_RETENTION`], and when the store
    /// is full a call runs as a plain call. Several instances behind one balancer must send
    /// a task's requests to the instance that made it (route on the `Mcp-Name` header, which
    /// clients set to the task id, or pin clients to an instance).
    pub fn limit_tasks(&self, max: usize) {
        self.shared.tasks.limit(max);
    }

    /// How many clients are connected (initialised sessions still open).
    pub fn sessions(&self) -> usize {
        self.shared.peers.len()
    }

    /// Watches the host's folders and sends `notifications/tools/list_changed` (and
    /// `prompts/list_changed`) to every client when a library is loaded, reloaded, removed or
    /// fails, and the resources' notifications when a resource file changes, comes or goes,
    /// until the notifier is dropped. Call it within a tokio runtime. It reports nothing itself (its events are
    /// logged at debug level): print [`Host::subscribe`](toolhost::Host::subscribe)'s events
    /// with [`ReloadEvent::report`](toolhost::ReloadEvent::report), as `toolhost serve-mcp`
    /// does.
    pub fn watch(&self) -> Result<ReloadNotifier, McpServerError> {
        peers::watch(
            &self.shared.host,
            &self.shared.profile,
            self.shared.peers.clone(),
        )
    }

    /// Serves one client over standard input and output, until it disconnects. Standard
    /// output carries JSON-RPC alone: on Unix it is moved to a private descriptor first and
    /// fd 1 is pointed at standard error, so what a tool prints goes to the log.
    pub async fn serve_stdio(&self) -> Result<(), McpServerError> {
        self.serve_stdio_until(std::future::pending(), DEFAULT_GRACE)
            .await
    }

    /// [`serve_stdio`](Self::serve_stdio), stopping gracefully when `shutdown` completes: a
    /// request that arrives after it is refused (`-32000`), the answers to those in flight
    /// and the tasks running get `grace` to finish (then they are cancelled), and the session
    /// ends.
    pub async fn serve_stdio_until(
        &self,
        shutdown: impl Future<Output = ()> + Send + 'static,
        grace: Duration,
    ) -> Result<(), McpServerError> {
        let output = stdio::private_stdout().map_err(|e| {
            McpServerError::new(
                McpServerErrorKind::Session,
                format!("cannot keep standard output for JSON-RPC: {e}"),
            )
        })?;
        self.serve_io_until((tokio::io::stdin(), output), shutdown, grace)
            .await
    }

    /// Serves one client over any byte stream pair (a pipe, a socket), until it disconnects.
    /// Each line is checked as JSON-RPC first: one that is not JSON, not a message, or a known
    /// method with parameters of the wrong shape gets its error response (`-32700`, `-32600`,
    /// `-32602`), and batches are refused.
    pub async fn serve_io<R, W>(&self, io: (R, W)) -> Result<(), McpServerError>
    where
        R: tokio::io::AsyncRead + Send + Unpin + 'static,
        W: tokio::io::AsyncWrite + Send + Unpin + 'static,
    {
        self.serve_io_until(io, std::future::pending(), DEFAULT_GRACE)
            .await
    }

    /// [`serve_io`](Self::serve_io), stopping gracefully when `shutdown` completes, as
    /// [`serve_stdio_until`](Self::serve_stdio_until) does.
    pub async fn serve_io_until<R, W>(
        &self,
        io: (R, W),
        shutdown: impl Future<Output = ()> + Send + 'static,
        grace: Duration,
    ) -> Result<(), McpServerError>
    where
        R: tokio::io::AsyncRead + Send + Unpin + 'static,
        W: tokio::io::AsyncWrite + Send + Unpin + 'static,
    {
        let stop = stdio::Stop {
            asked: Box::pin(shutdown),
            grace,
            tasks: self.shared.tasks.clone(),
        };
        let max_line = self
            .shared
            .max_line_bytes
            .load(std::sync::atomic::Ordering::SeqCst);
        // Boxed: rmcp's service future is deep enough that a caller's own future holding it
        // whole overflows the compiler's default query depth (the example above did).
        Box::pin(stdio::serve(
            Session::new(self.shared.clone()),
            io,
            max_line,
            stop,
        ))
        .await
    }

    /// Binds the streamable HTTP transport; [`HttpServer::serve`] then serves it.
    pub async fn bind_http(&self, options: HttpOptions) -> Result<HttpServer, McpServerError> {
        http::bind(options).await
    }
}

impl Shared {
    fn is_read_only(&self) -> bool {
        self.read_only.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// Locks `mutex`, poisoned or not (the host's own `lock`, which this crate cannot reach: a
/// panicked holder leaves the peers and the session's approvals valid).
fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}
