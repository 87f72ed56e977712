//! `toolhost serve-mcp`: the host's tools for any MCP client, over stdio or streamable HTTP.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use crate::shared_args::seconds;
use crate::Global;
use anyhow::{bail, Context, Result};
use toolhost::Host;
use toolhost_mcp_server::{HttpOptions, McpServer, MCP_PATH};

/// Serve the profile's tools to MCP clients: over standard input and output (JSON-RPC
/// only; logs go to standard error), or over streamable HTTP with --http. Tools reload
/// live, and clients are told (`tools/list_changed`). A call whose audit record cannot be
/// written is refused unless `[audit] required = false`. SIGTERM or SIGINT stops it
/// gracefully (HTTP: /ready answers 503, then the drain and the grace period); a second
/// signal ends it at once.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// The agent profile whose tools are served.
    #[arg(long, short, default_value = "default")]
    profile: String,
    /// Serve streamable HTTP at ADDR (`/mcp`) instead of stdio: `127.0.0.1:8080`; another
    /// machine may connect only with an explicit address such as `0.0.0.0:8080`.
    #[arg(long, value_name = "ADDR")]
    http: Option<std::net::SocketAddr>,
    /// HTTP: require `Authorization: Bearer <value of secret NAME>` (from usr/secrets.env).
    #[arg(long, value_name = "NAME", requires = "http")]
    token_secret: Option<String>,
    /// HTTP: also accept requests from this browser origin (`https://app.example.com:443`,
    /// `:*` for any port); this machine's origins are always accepted. Repeatable.
    #[arg(long, value_name = "ORIGIN", requires = "http")]
    allow_origin: Vec<String>,
    /// The largest message a client may send, in bytes: an HTTP request body (413 beyond),
    /// or a line on standard input (refused as an invalid request).
    #[arg(long, value_name = "BYTES", default_value_t = toolhost_mcp_server::DEFAULT_MAX_BODY_BYTES)]
    max_body_bytes: usize,
    /// HTTP without --token-secret: serve `write` and `exec` tools too. Without it such a
    /// listener serves only `read` tools, since any process of this machine (or, on a
    /// public address, any machine) can call it.
    #[arg(long, requires = "http")]
    allow_writes_without_token: bool,
    /// HTTP: keep a session per client (protocol versions before 2026-07-28), for
    /// list_changed, approvals and cancellation outside a request's own stream. Without it
    /// every request stands alone (instances can share a load balancer).
    #[arg(long, requires = "http")]
    sessions: bool,
    /// The most tasks held at a time (running, or finished and kept for their result): a
    /// 2026-07-28 client that declares the Tasks extension gets a task for a call of a
    /// tool whose deadline is 60 s or more; past this many, calls run plainly. 0: none.
    #[arg(long, value_name = "N", default_value_t = toolhost_mcp_server::DEFAULT_MAX_TASKS)]
    max_tasks: usize,
    /// Do not watch the plugin folders.
    #[arg(long)]
    no_watch: bool,
    /// On SIGTERM or SIGINT: how long calls in flight and tasks running may take to finish
    /// before they are cancelled (counted from the signal; a second signal ends at once).
    #[arg(long, value_name = "SECONDS", default_value_t = toolhost::DEFAULT_GRACE.as_secs_f64(), value_parser = seconds)]
    grace_seconds: f64,
    /// HTTP, on SIGTERM or SIGINT: how long connections are still accepted (each closed
    /// after its answer) while /ready answers 503, so that a balancer takes the instance
    /// out before it stops listening. At least the balancer's time to see a failed check.
    #[arg(long, value_name = "SECONDS", default_value_t = toolhost_mcp_server::DEFAULT_DRAIN.as_secs_f64(), value_parser = seconds, requires = "http")]
    drain_seconds: f64,
    /// Before serving, check each installed package against what it carries: its
    /// manifest's signature (by the key usr/packages.lock names, a trusted one) and every
    /// file's SHA-256; refuse to start otherwise. An MCP Bundle's server starts with it.
    #[arg(long)]
    verify_packages: bool,
    /// Also take the secret NAME from the environment variable NAME, over usr/secrets.env
    /// (an MCP client's configuration sets it: an .mcpb's user_config). Repeatable.
    #[arg(long, value_name = "NAME")]
    secret_env: Vec<String>,
}

impl Args {
    /// `toolhost serve-mcp`: the packages verified if asked, then served.
    pub(crate) fn run(self, global: &Global) -> Result<ExitCode> {
        if self.verify_packages {
            verify_packages(&global.root)?;
        }
        for name in &self.secret_env {
            if let Err(why) = toolhost::package::manifest::check_secret_name(name) {
                crate::exit::usage!("--secret-env {why}");
            }
        }
        // A call whose record cannot be written is refused, unless the config says not.
        // It offers library tools only, so it starts no MCP server of usr/mcp.json.
        let options = global
            .options
            .clone()
            .with_audit_required(true)
            .with_secrets_from_env(self.secret_env)
            .with_mcp_client(false);
        let served = Host::with_options(&global.root, options)?;
        let options = ServeOptions {
            profile: self.profile,
            http: self.http,
            token_secret: self.token_secret,
            allow_origins: self.allow_origin,
            max_body_bytes: self.max_body_bytes,
            allow_writes_without_token: self.allow_writes_without_token,
            sessions: self.sessions,
            max_tasks: self.max_tasks,
            watch: !self.no_watch,
            yes: global.yes,
            grace: Duration::from_secs_f64(self.grace_seconds),
            drain: Duration::from_secs_f64(self.drain_seconds),
        };
        serve(Arc::new(served), options)
    }
}

/// How `serve-mcp` serves.
pub(crate) struct ServeOptions {
    pub(crate) profile: String,
    /// `None`: stdio.
    pub(crate) http: Option<SocketAddr>,
    pub(crate) token_secret: Option<String>,
    pub(crate) allow_origins: Vec<String>,
    pub(crate) max_body_bytes: usize,
    /// HTTP without a token: serve more than `read` tools.
    pub(crate) allow_writes_without_token: bool,
    pub(crate) sessions: bool,
    /// The most tasks held at a time (`--max-tasks`).
    pub(crate) max_tasks: usize,
    pub(crate) watch: bool,
    /// `--yes`: asks for `write` tools are approved.
    pub(crate) yes: bool,
    /// `--grace-seconds`: once asked to stop, how long calls in flight may take.
    pub(crate) grace: Duration,
    /// `--drain-seconds`: once asked to stop, how long HTTP connections are still accepted.
    pub(crate) drain: Duration,
}

/// Serves until the client disconnects (stdio) or a signal (SIGTERM, SIGINT) has stopped it
/// gracefully.
pub(crate) fn serve(host: Arc<Host>, options: ServeOptions) -> Result<ExitCode> {
    crate::check_profile(&host, &options.profile)?;
    let shutdown = crate::signals::Shutdown::listen("calls in flight and tasks", options.grace)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let served: Result<ExitCode> = runtime.block_on(async move {
        let server = McpServer::new(host.clone(), &options.profile)?;
        server.approve_writes(options.yes);
        server.limit_lines(options.max_body_bytes);
        server.limit_tasks(options.max_tasks);
        let _reloads = match options.watch {
            true => {
                crate::reloads::print(&host, crate::reloads::To::Stderr);
                Some(server.watch()?)
            }
            false => None,
        };
        match options.http {
            None => {
                let asked = async move {
                    shutdown.requested().await;
                };
                server.serve_stdio_until(asked, options.grace).await?
            }
            Some(addr) => serve_http(&host, server, addr, options, shutdown).await?,
        }
        Ok(ExitCode::SUCCESS)
    });
    // Standard input's reader may still be blocked in a read (stopped by a signal, the client
    // has not closed its side): not waited for.
    runtime.shutdown_timeout(Duration::from_millis(200));
    served
}

async fn serve_http(
    host: &Host,
    server: McpServer,
    addr: SocketAddr,
    options: ServeOptions,
    shutdown: crate::signals::Shutdown,
) -> Result<()> {
    let token = match &options.token_secret {
        Some(name) => match host.secrets().get(name) {
            Some(value) if !value.is_empty() => Some(value.to_owned()),
            _ => bail!(
                "--token-secret {name}: there is no secret {name} in {}",
                host.layout().secrets_file().display()
            ),
        },
        None => None,
    };
    if !addr.ip().is_loopback() && token.is_none() {
        tracing::warn!("listening on {addr} for other machines without a token (--token-secret)");
    }
    if token.is_none() {
        match options.allow_writes_without_token {
            false => server.serve_only_read(true),
            true => tracing::warn!(
                "serving write and exec tools without a token (--allow-writes-without-token): any process that reaches {addr} may call them"
            ),
        }
    }
    let http = HttpOptions::new(addr)
        .with_token(token)
        .with_allowed_origins(options.allow_origins)
        .with_max_body_bytes(options.max_body_bytes)
        .with_sessions(options.sessions)
        .with_grace(options.grace)
        .with_drain(options.drain);
    // Served at /metrics, behind the same token.
    toolhost::telemetry::metrics::enable();
    let bound = server.bind_http(http).await?;
    let local = bound.local_addr()?;
    // On standard error: scripts and tests read the port from it.
    eprintln!("toolhost: serving MCP on http://{local}{MCP_PATH}");
    let shutdown = async move {
        shutdown.requested().await;
    };
    bound
        .serve(server, shutdown)
        .await
        .context("serving MCP over HTTP")
}

/// `serve-mcp --verify-packages`: every installed package checked against its signature and
/// hashes before anything is served (said on standard error, which an MCP client logs).
pub(crate) fn verify_packages(root: &std::path::Path) -> anyhow::Result<()> {
    use toolhost::package::{install, PackageLock};
    let layout = toolhost::Layout::new(root);
    let lock = PackageLock::read(&install::packages_lock_file(&layout))?;
    for (name, locked) in &lock.packages {
        let signer = install::verify_installed(&layout, name, locked)?;
        match signer {
            Some(key) => eprintln!(
                "verified package {name} {}: signed by key {}, every file as signed",
                locked.version, key.id
            ),
            None => eprintln!(
                "verified package {name} {}: unsigned, every file as its manifest lists",
                locked.version
            ),
        }
    }
    Ok(())
}
