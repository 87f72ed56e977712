//! `toolhost mcp login SERVER`: signs in to one HTTP server anew and keeps its tokens.

use std::path::PathBuf;
use std::sync::{Arc, Weak};
use std::time::Duration;

use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;

use super::browser::{BrowserStep, WAIT};
use super::client::OAuthHttp;
use super::settings::Grant;
use super::{OAuthError, OAuthErrorKind};
use crate::layout::Layout;
use crate::mcp::config::{McpConfig, Transport};
use crate::mcp::handler::Handler;
use crate::secrets::Secrets;

/// What a login did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedIn {
    /// Whether the server asked to sign in (if not, nothing was stored).
    pub asked: bool,
    /// The scopes granted.
    pub scopes: Vec<String>,
    /// The token file.
    pub file: PathBuf,
}

/// Signs in to server `server` of `profile` (an HTTP server of its `mcp.json` files without
/// an `Authorization` header): its tokens are forgotten, then it is connected to and its
/// tools listed, signing in (the browser step as `step` says) whenever it asks; a server
/// that said, during an earlier command, that it needs more scopes is signed in to for them
/// first. With `"grant": "client_credentials"` the client's credentials are exchanged, no
/// browser involved. The error is one line, with its kind.
pub async fn login(
    layout: &Layout,
    profile: &str,
    server: &str,
    secrets: &Secrets,
    max_text_bytes: u64,
    step: BrowserStep,
) -> Result<SignedIn, OAuthError> {
    let fail = |kind: OAuthErrorKind| move |e: String| OAuthError::new(kind, e);
    let config = McpConfig::load(layout, profile, max_text_bytes);
    let entry = find_entry(&config, profile, server)?;
    let Transport::Http {
        url,
        headers,
        oauth,
        tokens,
    } = &entry.transport
    else {
        return Err(OAuthError::new(
            OAuthErrorKind::NotOAuth,
            format!("'{server}' is a stdio server: signing in is for servers with a \"url\""),
        ));
    };
    let url =
        super::super::connect::interpolated(url, "url").map_err(fail(OAuthErrorKind::Settings))?;
    let signer = super::signer(server, &url, headers, oauth, tokens, secrets, Some(step))
        .map_err(fail(OAuthErrorKind::Settings))?;
    let Some(signer) = signer else {
        return Err(OAuthError::new(
            OAuthErrorKind::NotOAuth,
            format!("'{server}' sends a fixed Authorization header (mcp.json): remove it to sign in with OAuth"),
        ));
    };
    let _ = rustls::crypto::ring::default_provider().install_default();
    let challenge = signer.store.challenge();
    signer
        .store
        .remove()
        .map_err(fail(OAuthErrorKind::Tokens))?;
    let done = |asked: bool| SignedIn {
        asked,
        scopes: signer.store.granted_scopes(),
        file: signer.store.path().to_owned(),
    };
    if oauth.grant == Grant::ClientCredentials {
        signer
            .sign_in(None)
            .await
            .map_err(fail(OAuthErrorKind::SignIn))?;
        return Ok(done(true));
    }
    if let Some(challenge) = challenge {
        signer
            .sign_in(Some(&challenge))
            .await
            .map_err(fail(OAuthErrorKind::SignIn))?;
    }
    let client = OAuthHttp::new(super::http_client(), signer.clone());
    list_tools(&client, &url, entry)
        .await
        .map_err(fail(OAuthErrorKind::SignIn))?;
    let asked = client.sign_ins().await > 0 || signer.store.has_token();
    Ok(done(asked))
}

/// The server `server` of the profile's `mcp.json` files, or why there is none (its entry's
/// mistake, if it has one).
fn find_entry<'a>(
    config: &'a McpConfig,
    profile: &str,
    server: &str,
) -> Result<&'a crate::mcp::config::ServerConfig, OAuthError> {
    if let Some(entry) = config.servers.iter().find(|s| s.name == server) {
        return Ok(entry);
    }
    let mistake = config
        .errors
        .iter()
        .find(|e| e.message.starts_with(&format!("mcpServers.{server}:")));
    Err(match mistake {
        Some(e) => OAuthError::new(OAuthErrorKind::Settings, e.to_string()),
        None => OAuthError::new(
            OAuthErrorKind::UnknownServer,
            format!("profile '{profile}' has no MCP server '{server}' (see `toolhost mcp`)"),
        ),
    })
}

/// Greets the server through `client` (which signs in when the server asks) and lists its
/// tools, within the time a person may take to sign in ([`WAIT`] each time).
async fn list_tools(
    client: &OAuthHttp,
    url: &str,
    entry: &crate::mcp::config::ServerConfig,
) -> Result<(), String> {
    let transport = || {
        StreamableHttpClientTransport::with_client(
            client.clone(),
            StreamableHttpClientTransportConfig::with_uri(url),
        )
    };
    let handler = Handler {
        server: Weak::new(),
        progress: Arc::default(),
        group: Default::default(),
        broken: tokio::sync::watch::channel(None).0,
    };
    let limit = WAIT * (super::MAX_SIGN_INS + 1) + Duration::from_secs(30);
    tokio::time::timeout(limit, async {
        let service = crate::mcp::connect::greet_http(handler, transport, entry)
            .await
            .map_err(|e| connect_failed(url, &e.to_string()))?;
        let listed = service.list_all_tools().await;
        let _ = service.cancel().await;
        listed
            .map(drop)
            .map_err(|e| connect_failed(url, &e.to_string()))
    })
    .await
    .map_err(|_| format!("no answer from {url} within {} s", limit.as_secs()))?
}

/// One line for a failed connection: the sign-in's own when it was one.
fn connect_failed(url: &str, error: &str) -> String {
    match super::failure_line(error) {
        Some(line) => line.to_owned(),
        None => format!("{url}: {}", error.replace('\n', " ")),
    }
}
