//! Connecting to a server: the child process (its environment's secret placeholders filled
//! in, its standard error kept for the failure reason) or the streamable HTTP endpoint (its
//! headers' placeholders filled in), the handshake, all bounded in time.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use std::collections::BTreeMap;

use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::ProtocolVersion;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientLifecycleMode, ClientServiceExt};
use tokio::io::{AsyncBufReadExt, BufReader};

use super::config::{ServerConfig, Transport};
use super::handler::Handler;
use super::server::Service;
use crate::secrets::Secrets;
use crate::sync::lock;

/// How long the server may take to answer its greeting.
const HANDSHAKE: Duration = Duration::from_secs(30);
/// How a server is greeted: `server/discover` of 2026-07-28 first, and a server that answers
/// it with an error (one of 2025-11-25 or earlier), or not within 10 s, gets that version's
/// `initialize` on the same connection. A stdio server that ends the connection instead (some
/// of earlier versions do, on a request before `initialize`) is started again and greeted
/// with `initialize` ([`connect`]).
pub(crate) fn http_lifecycle() -> ClientLifecycleMode {
    ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28, ProtocolVersion::V_2025_11_25],
        legacy_version: Some(ProtocolVersion::V_2025_11_25),
    }
}

/// Greets an HTTP server with [`http_lifecycle`] over `transport()` (with `initialize` only
/// for a server configured so); a server of 2025-11-25
/// or earlier that answers `server/discover` with a result (as some answer any request they
/// do not know) instead of an error is greeted again with `initialize`, over a new
/// transport.
pub(crate) async fn greet_http<T, E, A>(
    handler: Handler,
    transport: impl Fn() -> T,
    config: &ServerConfig,
) -> Result<Service, rmcp::service::ClientInitializeError>
where
    T: rmcp::transport::IntoTransport<rmcp::RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    if config.initialize_only {
        let initialize = ClientLifecycleMode::Initialize;
        return handler.serve_with_lifecycle(transport(), initialize).await;
    }
    let again = handler.again();
    match handler
        .serve_with_lifecycle(transport(), http_lifecycle())
        .await
    {
        Err(rmcp::service::ClientInitializeError::ExpectedInitResult(_)) => {
            again
                .serve_with_lifecycle(transport(), ClientLifecycleMode::Initialize)
                .await
        }
        greeted => greeted,
    }
}

/// How many lines of the server's standard error are kept for a failure's reason.
const STDERR_LINES: usize = 3;

/// Starts the server and completes the handshake; the error is one line.
pub(crate) async fn connect(
    config: &ServerConfig,
    secrets: &Secrets,
    handler: Handler,
) -> Result<Service, String> {
    match &config.transport {
        Transport::Stdio { .. } => {
            // A server that refuses `server/discover` or ends the connection on it is
            // started again and greeted with `initialize` (a 2025-11-25 one).
            let again = handler.again();
            let lifecycle = match config.initialize_only {
                true => ClientLifecycleMode::Initialize,
                false => http_lifecycle(),
            };
            match start_stdio(config, secrets, handler, lifecycle).await {
                Err(Started::Refused(why)) => {
                    tracing::info!(
                        "MCP server '{}' did not take server/discover ({why}): started again and greeted with initialize",
                        config.name
                    );
                    let initialize = ClientLifecycleMode::Initialize;
                    let started = start_stdio(config, secrets, again, initialize).await;
                    started.map_err(Started::line)
                }
                started => started.map_err(Started::line),
            }
        }
        Transport::Http {
            url,
            headers,
            oauth,
            tokens,
        } => connect_http(config, url, headers, oauth, tokens, secrets, handler).await,
    }
}

/// Why a stdio server did not start.
enum Started {
    /// Its greeting failed (it may take another).
    Refused(String),
    /// Anything else: the line to show.
    Failed(String),
}

impl Started {
    fn line(self) -> String {
        match self {
            Self::Refused(line) | Self::Failed(line) => line,
        }
    }
}

/// Starts a stdio server and greets it with `lifecycle`.
async fn start_stdio(
    config: &ServerConfig,
    secrets: &Secrets,
    handler: Handler,
    lifecycle: ClientLifecycleMode,
) -> Result<Service, Started> {
    let cmd = stdio_command(config, secrets).map_err(Started::Failed)?;
    let command = cmd.as_std().get_program().to_string_lossy().into_owned();
    let mut broken = handler.broken.subscribe();
    let (process, stderr) = super::child::spawn(cmd, handler.broken.clone())
        .await
        .map_err(|e| Started::Failed(format!("cannot start `{command}`: {e}")))?;
    // Its process group goes with the connection (the handler it owns).
    *lock(&handler.group) = process.id().and_then(super::child::Group::new);
    let tail = Arc::new(Mutex::new(Vec::<String>::new()));
    if let Some(stderr) = stderr {
        let masking = secrets.clone();
        let name = config.name.clone();
        tokio::spawn(keep_stderr(name, stderr, tail.clone(), masking));
    }
    let said = || {
        let lines = lock(&tail).join(" | ");
        match lines.is_empty() {
            true => String::new(),
            false => format!(" (its standard error: {lines})"),
        }
    };
    let greeting = handler.serve_with_lifecycle(process, lifecycle);
    let served = tokio::select! {
        served = tokio::time::timeout(HANDSHAKE, greeting) => served,
        why = super::stdout_check::broke(&mut broken) => {
            return Err(Started::Failed(format!("the handshake failed: {why}{}", said())));
        }
    };
    match served {
        Ok(Ok(service)) => Ok(service),
        Ok(Err(e)) => Err(Started::Refused(format!(
            "the handshake failed: {e}{}",
            said()
        ))),
        Err(_) => Err(Started::Failed(format!(
            "no answer to its greeting within {} s{}",
            HANDSHAKE.as_secs(),
            said()
        ))),
    }
}

/// The command of a stdio server, its arguments' and environment's placeholders filled in.
fn stdio_command(
    config: &ServerConfig,
    secrets: &Secrets,
) -> Result<tokio::process::Command, String> {
    let Transport::Stdio {
        command,
        args,
        env,
        cwd,
    } = &config.transport
    else {
        return Err("not a stdio server".to_owned());
    };
    let command = &interpolated(command, "command")?;
    let mut cmd = tokio::process::Command::new(command);
    for arg in args {
        let arg = interpolated(arg, "args")?;
        let arg = secrets
            .unmask(&arg)
            .map_err(|e| format!("args: {}", e.message()))?;
        cmd.arg(arg.as_ref());
    }
    cmd.kill_on_drop(true);
    if let Some(dir) = cwd {
        cmd.current_dir(dir);
    }
    for (key, value) in env {
        let value = interpolated(value, &format!("env {key}"))?;
        let value = secrets
            .unmask(&value)
            .map_err(|e| format!("env {key}: {}", e.message()))?;
        cmd.env(key, value.as_ref());
    }
    Ok(cmd)
}

/// Connects to a streamable HTTP server (signing in with OAuth when it asks and no fixed
/// `Authorization` header is given) and greets it ([`greet_http`]).
async fn connect_http(
    config: &ServerConfig,
    url: &str,
    headers: &BTreeMap<String, String>,
    oauth: &super::oauth::OAuthSettings,
    tokens: &std::path::Path,
    secrets: &Secrets,
    handler: Handler,
) -> Result<Service, String> {
    let url = &interpolated(url, "url")?;
    let http = http_config(url, headers, secrets)?;
    // HTTPS through rustls with ring (installed once; a provider set earlier stays).
    let _ = rustls::crypto::ring::default_provider().install_default();
    // Without a fixed Authorization header, a server that asks to sign in gets OAuth.
    let step = super::oauth::BrowserStep::from_env();
    let signer = super::oauth::signer(&config.name, url, headers, oauth, tokens, secrets, step)?;
    let served = match signer {
        Some(signer) => {
            let client = super::oauth::OAuthHttp::new(super::oauth::http_client(), signer);
            let transport =
                || StreamableHttpClientTransport::with_client(client.clone(), http.clone());
            tokio::time::timeout(HANDSHAKE, greet_http(handler, transport, config)).await
        }
        None => {
            let client = super::oauth::http_client();
            let transport =
                || StreamableHttpClientTransport::with_client(client.clone(), http.clone());
            tokio::time::timeout(HANDSHAKE, greet_http(handler, transport, config)).await
        }
    };
    match served {
        Ok(Ok(service)) => Ok(service),
        Ok(Err(e)) => Err(http_failure(url, &e.to_string())),
        Err(_) => Err(format!(
            "no answer to its greeting from {url} within {} s",
            HANDSHAKE.as_secs()
        )),
    }
}

/// The line of a failed greeting of the HTTP server at `url`.
fn http_failure(url: &str, e: &str) -> String {
    if let Some(line) = super::oauth::failure_line(e) {
        return line.to_owned();
    }
    if e.to_lowercase().contains("auth required") {
        return format!(
            "{url} refused the credentials (HTTP 401): check the Authorization header \
             of this server in mcp.json and the secret it names"
        );
    }
    if e.contains("error sending request") {
        return format!(
            "cannot reach {url}: no server answered there (is it running, and is the \
             url in mcp.json right?)"
        );
    }
    format!("the handshake with {url} failed: {e}")
}

/// The HTTP transport's settings: the URL, and each header with its secret placeholders
/// filled in (`Authorization: Bearer …` becomes the transport's bearer token).
fn http_config(
    url: &str,
    headers: &BTreeMap<String, String>,
    secrets: &Secrets,
) -> Result<StreamableHttpClientTransportConfig, String> {
    let mut config = StreamableHttpClientTransportConfig::with_uri(url);
    for (name, value) in headers {
        let value = interpolated(value, &format!("header {name}"))?;
        let value = secrets
            .unmask(&value)
            .map_err(|e| format!("header {name}: {}", e.message()))?;
        if name.eq_ignore_ascii_case("authorization") {
            let token = value.strip_prefix("Bearer ").unwrap_or(&value);
            config.auth_header = Some(token.to_owned());
            continue;
        }
        let header = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("header {name}: not a valid header name"))?;
        let value = HeaderValue::from_str(&value)
            .map_err(|_| format!("header {name}: not a valid header value"))?;
        config.custom_headers.insert(header, value);
    }
    Ok(config)
}

/// Logs the server's standard error at debug level and keeps its last lines, each masked
/// with `secrets` before it is cut short (a cut through a value would leave its start).
async fn keep_stderr(
    server: String,
    stderr: tokio::process::ChildStderr,
    tail: Arc<Mutex<Vec<String>>>,
    secrets: Secrets,
) {
    let mut lines = BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        // Masked here, with the host's secrets: the line may be logged after the host is gone
        // (a server that fails as the command ends), when the log's own masking no longer
        // knows them.
        let line = secrets.mask(&line);
        tracing::debug!("MCP server {server}: {line}");
        let mut tail = lock(&tail);
        if tail.len() == STDERR_LINES {
            tail.remove(0);
        }
        tail.push(line.chars().take(200).collect());
    }
}

/// `text` with each `${env:NAME}` replaced by the host's environment variable `NAME` (as
/// Cursor and VS Code write them), and each `${input:ID}` by the placeholder of the secret that
/// keeps its answer (`§§secret(MCP_INPUT_ID)`, filled in with the other secrets); `what`
/// names the key for the error. A variable that is not set is an error.
pub(crate) fn interpolated(text: &str, what: &str) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            return Ok(out);
        };
        let inner = &after[..end];
        if let Some(name) = inner.strip_prefix("env:") {
            let value = std::env::var(name).map_err(|_| {
                format!("{what}: ${{env:{name}}} is not set in the host's environment")
            })?;
            out.push_str(&value);
        } else if let Some(id) = inner.strip_prefix("input:") {
            // Asked once on the terminal and kept as a secret (`config::McpInput`).
            let name = super::config::input_secret_name(id);
            out.push_str(&crate::secrets::placeholder(&name));
        } else {
            out.push_str(&rest[start..start + 2 + end + 1]);
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::interpolated;

    #[test]
    fn env_variables_are_filled_in_and_inputs_become_secrets() {
        let path = std::env::var("PATH").unwrap();
        assert_eq!(
            interpolated("a ${env:PATH} b ${other} ${", "k").unwrap(),
            format!("a {path} b ${{other}} ${{")
        );
        let missing = interpolated("${env:TOOLHOST_SURELY_UNSET_VAR}", "env X").unwrap_err();
        assert_eq!(
            missing,
            "env X: ${env:TOOLHOST_SURELY_UNSET_VAR} is not set in the host's environment"
        );
        let input = interpolated("Bearer ${input:api-key}", "header Authorization").unwrap();
        assert_eq!(input, "Bearer §§secret(MCP_INPUT_API_KEY)");
    }
}
