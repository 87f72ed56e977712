//! `toolhost serve-mcp`: the host's tools for any MCP client, over stdio or streamable HTTP.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use toolhost::Host;
use toolhost_mcp_server::{HttpOptions, McpServer, MCP_PATH};

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
