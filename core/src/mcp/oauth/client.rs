//! The HTTP client of an OAuth-protected server: rmcp's reqwest client with the server's
//! token in each request's `Authorization` header, reacting to the server's answers.
//!
//! - No token yet (or one that expired with no refresh token): the request goes out without
//!   one, and the server's 401 challenge starts a sign-in.
//! - A 401 for a token: one refresh (with the refresh token), one retry.
//! - A 403 `insufficient_scope`: a sign-in for the scopes the challenge names, together with
//!   those granted (step-up).
//! - A sign-in happens only where one can: `toolhost mcp login`, a machine's client
//!   credentials, or any command when [`FETCH_ENV`](super::FETCH_ENV) is set; elsewhere the
//!   request fails with the line that says to run `toolhost mcp login SERVER`, and the
//!   challenge is kept in the token file for that login. At most [`MAX_SIGN_INS`] sign-ins
//!   per connection, so a server that never accepts cannot loop.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use futures_util::stream::BoxStream;
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::auth::{AuthError, AuthorizationManager};
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use sse_stream::{Error as SseError, Sse};

use super::sign_in::Signer;

/// The most sign-ins one connection makes.
pub const MAX_SIGN_INS: u32 = 3;

type HttpError = StreamableHttpError<reqwest::Error>;

/// See the module's documentation.
#[derive(Clone)]
pub(crate) struct OAuthHttp {
    http: reqwest::Client,
    state: Arc<tokio::sync::Mutex<State>>,
}

struct State {
    signer: Signer,
    manager: Option<AuthorizationManager>,
    /// Whether the token file was read.
    loaded: bool,
    sign_ins: u32,
}

fn failed(message: String) -> HttpError {
    StreamableHttpError::Auth(AuthError::AuthorizationFailed(message))
}

impl OAuthHttp {
    pub(crate) fn new(http: reqwest::Client, signer: Signer) -> Self {
        let state = State {
            signer,
            manager: None,
            loaded: false,
            sign_ins: 0,
        };
        Self {
            http,
            state: Arc::new(tokio::sync::Mutex::new(state)),
        }
    }

    /// How many sign-ins this connection made.
    pub(crate) async fn sign_ins(&self) -> u32 {
        self.state.lock().await.sign_ins
    }

    /// The token to send now, if there is one (refreshed first when it has expired).
    async fn token(state: &mut State) -> Result<Option<String>, HttpError> {
        if !state.loaded {
            state.loaded = true;
            state.manager = state.signer.stored().await.map_err(failed)?;
        }
        let Some(manager) = &state.manager else {
            return Ok(None);
        };
        match manager.get_access_token().await {
            Ok(token) => Ok(Some(token)),
            Err(AuthError::AuthorizationRequired) => {
                state.manager = None;
                Ok(None)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Runs `call` with the token, reacting to a challenge as the module says; `may_sign_in`:
    /// whether this request may start a sign-in (not the optional GET stream).
    async fn with_token<T, F, Fut>(&self, may_sign_in: bool, call: F) -> Result<T, HttpError>
    where
        F: Fn(Option<String>) -> Fut,
        Fut: Future<Output = Result<T, HttpError>>,
    {
        let mut token = Self::token(&mut *self.state.lock().await).await?;
        let mut refreshed = false;
        loop {
            let result = call(token.clone()).await;
            let (challenge, scope) = match &result {
                Err(StreamableHttpError::AuthRequired(e)) => {
                    (e.www_authenticate_header.clone(), None)
                }
                Err(StreamableHttpError::InsufficientScope(e)) => (
                    e.www_authenticate_header.clone(),
                    Some(e.required_scope.clone().unwrap_or_default()),
                ),
                _ => return result,
            };
            let mut state = self.state.lock().await;
            // Another request got a new token meanwhile: retry with it.
            let now = Self::token(&mut state).await?;
            if now.is_some() && now != token {
                token = now;
                continue;
            }
            if scope.is_none() && token.is_some() && !refreshed {
                refreshed = true;
                if let Some(manager) = &state.manager {
                    if manager.refresh_token().await.is_ok() {
                        token = Self::token(&mut state).await?;
                        continue;
                    }
                }
            }
            if !may_sign_in {
                return result;
            }
            if !state.signer.can_sign_in() {
                let _ = state.signer.store.set_challenge(Some(challenge));
                let mut line = state.signer.needs_login();
                if let Some(scope) = scope.filter(|s| !s.is_empty()) {
                    line = format!("{line} (it asks for more scopes: {scope})");
                }
                return Err(failed(line));
            }
            if state.sign_ins >= MAX_SIGN_INS {
                return Err(failed(format!(
                    "{} still refuses after {MAX_SIGN_INS} sign-ins ({challenge}); giving up",
                    state.signer.url
                )));
            }
            state.sign_ins += 1;
            let manager = state
                .signer
                .sign_in(Some(&challenge))
                .await
                .map_err(failed)?;
            token = Some(manager.get_access_token().await?);
            state.manager = Some(manager);
        }
    }
}

impl StreamableHttpClient for OAuthHttp {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        self.with_token(true, |token| {
            let (uri, message) = (uri.clone(), message.clone());
            let (session_id, headers) = (session_id.clone(), custom_headers.clone());
            async move {
                self.http
                    .post_message(uri, message, session_id, token, headers)
                    .await
            }
        })
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        self.with_token(true, |token| {
            let (uri, message) = (uri.clone(), message.clone());
            let (session_id, headers) = (session_id.clone(), custom_headers.clone());
            async move {
                self.http
                    .post_message_with_max_sse_event_size(
                        uri,
                        message,
                        session_id,
                        token,
                        headers,
                        max_sse_event_size,
                    )
                    .await
            }
        })
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        self.with_token(true, |token| {
            let (uri, message) = (uri.clone(), message.clone());
            let (session_id, headers) = (session_id.clone(), custom_headers.clone());
            async move {
                self.http
                    .post_message_with_response_limits(
                        uri, message, session_id, token, headers, limits,
                    )
                    .await
            }
        })
        .await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), HttpError> {
        self.with_token(false, |token| {
            let (uri, session_id, headers) =
                (uri.clone(), session_id.clone(), custom_headers.clone());
            async move {
                self.http
                    .delete_session(uri, session_id, token, headers)
                    .await
            }
        })
        .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, HttpError> {
        self.with_token(false, |token| {
            let (uri, session_id) = (uri.clone(), session_id.clone());
            let (last_event_id, headers) = (last_event_id.clone(), custom_headers.clone());
            async move {
                self.http
                    .get_stream(uri, session_id, last_event_id, token, headers)
                    .await
            }
        })
        .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, HttpError> {
        self.with_token(false, |token| {
            let (uri, session_id) = (uri.clone(), session_id.clone());
            let (last_event_id, headers) = (last_event_id.clone(), custom_headers.clone());
            async move {
                self.http
                    .get_stream_with_max_sse_event_size(
                        uri,
                        session_id,
                        last_event_id,
                        token,
                        headers,
                        max_sse_event_size,
                    )
                    .await
            }
        })
        .await
    }
}
