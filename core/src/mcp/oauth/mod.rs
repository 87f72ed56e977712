//! OAuth 2.1 for streamable HTTP servers that ask to sign in (the MCP authorization spec,
//! 2025-06-18 and 2025-11-25), on rmcp's `auth` feature.
//!
//! - `settings.rs`: the `oauth` key of a server's entry in `mcp.json`;
//! - `store.rs`: the token file, `usr/mcp-tokens/<server>.json` (mode 0600, masked in logs);
//! - `sign_in.rs`: a token from the file, a person's sign-in, or client credentials;
//! - `browser.rs`: the loopback redirect and the way the URL reaches a browser;
//! - `client.rs`: the HTTP client that sends the token and answers a server's challenges;
//! - `login.rs`: `toolhost mcp login SERVER`.
//!
//! A server with an `Authorization` header in `mcp.json` keeps that fixed header and is never
//! signed in to.

mod browser;
mod client;
mod login;
mod settings;
mod sign_in;
mod store;

use std::collections::BTreeMap;
use std::path::Path;

pub use browser::{BrowserStep, FETCH_ENV};
pub(crate) use client::OAuthHttp;
pub use client::MAX_SIGN_INS;
pub use login::{login, SignedIn};
pub use settings::{Grant, OAuthSettings, OAUTH_KEYS};
pub(crate) use sign_in::Signer;
pub use store::TOKENS_DIR;

use crate::secrets::Secrets;

/// What kept a sign-in, or a server's `oauth` settings, from working.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum OAuthErrorKind {
    /// The `oauth` object of a server's entry in `mcp.json` is wrong, or a placeholder of the
    /// entry cannot be filled in: fix the entry (the message names the key).
    Settings,
    /// The profile's `mcp.json` files have no such server: `toolhost mcp` lists them.
    UnknownServer,
    /// Not a server to sign in to: a stdio server, or one that sends a fixed `Authorization`
    /// header.
    NotOAuth,
    /// The token file (`usr/mcp-tokens/<server>.json`) cannot be read, written or removed.
    Tokens,
    /// The sign-in, or the connection it was for, failed or ran out of time: try again.
    SignIn,
}

/// Why a sign-in or a server's `oauth` settings failed: a [kind](OAuthErrorKind) and one line
/// saying what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct OAuthError {
    /// What went wrong.
    pub kind: OAuthErrorKind,
    /// One line: what is wrong, and what to do.
    pub message: String,
}

impl OAuthError {
    /// An error of `kind` saying `message`.
    pub(crate) fn new(kind: OAuthErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }
}

/// How long an idle connection to an HTTP server is kept for the next request: below the
/// keep-alive timeout of common servers (Node's and uvicorn's 5 s), so the client never sends
/// a request on a connection the server is closing at that moment (a reset, which cannot be
/// retried safely for a `tools/call`).
const POOL_IDLE: std::time::Duration = std::time::Duration::from_secs(4);

/// The HTTP client of an MCP server: `TCP_NODELAY` set (reqwest's default, stated here), so a
/// request's last bytes never wait for the server's delayed ACK; idle connections dropped
/// after [`POOL_IDLE`].
pub(crate) fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .tcp_nodelay(true)
        .pool_idle_timeout(POOL_IDLE)
        .build()
        .unwrap_or_default()
}

/// The signer of an HTTP server, unless it sends a fixed `Authorization` header; `step`: how
/// a person's sign-in reaches a browser (`None`: no one can sign in now). The client secret's
/// `${env:…}` and `§§secret(…)` placeholders are filled in.
pub(crate) fn signer(
    server: &str,
    url: &str,
    headers: &BTreeMap<String, String>,
    settings: &OAuthSettings,
    tokens: &Path,
    secrets: &Secrets,
    step: Option<BrowserStep>,
) -> Result<Option<Signer>, String> {
    if headers
        .keys()
        .any(|k| k.eq_ignore_ascii_case("authorization"))
    {
        return Ok(None);
    }
    let mut settings = settings.clone();
    if let Some(secret) = &settings.client_secret {
        let secret = super::connect::interpolated(secret, "oauth.client_secret")?;
        let secret = secrets
            .unmask(&secret)
            .map_err(|e| format!("oauth.client_secret: {}", e.message()))?;
        settings.client_secret = Some(secret.as_ref().to_owned());
    }
    Ok(Some(Signer {
        server: server.to_owned(),
        url: url.to_owned(),
        settings,
        store: store::TokenFile::new(tokens, server, url),
        step,
    }))
}

/// The line an OAuth failure carries inside a transport error's text, if it is one.
pub(crate) fn failure_line(error: &str) -> Option<&str> {
    const MARK: &str = "OAuth authorization failed: ";
    error.find(MARK).map(|at| &error[at + MARK.len()..])
}
