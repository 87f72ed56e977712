//! Getting a token for one server: from the token file, by a person's sign-in (authorization
//! code with PKCE S256 through the loopback redirect), or by the client's own credentials.
//!
//! rmcp's [`AuthorizationManager`] does the protocol: discovery from the server's challenge
//! (`WWW-Authenticate`: its `resource_metadata` and `scope`), else the protected resource
//! metadata at the well-known paths (RFC 9728), then the authorization server's metadata
//! (RFC 8414 or OpenID Connect discovery, path-aware); scope selection (the challenge's scope,
//! else the resource's `scopes_supported`, else none; a step-up asks for the union with what
//! was granted); the `resource` parameter (RFC 8707) on every authorization and token
//! request; refresh. This file chooses the client: the pre-registered `client_id` of the
//! `oauth` settings, else the client ID metadata document (`client_metadata_url`) where the
//! authorization server supports it, else dynamic registration (whose secret is kept in the
//! token file, so a refresh in a later process authenticates as the same client).

use rmcp::transport::auth::{
    AuthError, AuthorizationCallback, AuthorizationManager, AuthorizationRequest,
    AuthorizationSession, ClientCredentialsConfig, OAuthClientConfig,
};

use super::browser::{BrowserStep, Loopback};
use super::settings::{Grant, OAuthSettings};
use super::store::TokenFile;

/// The client name sent with dynamic registration.
const CLIENT_NAME: &str = "toolhost";

/// What a server's tokens come from.
#[derive(Clone)]
pub(crate) struct Signer {
    /// The server's name in mcp.json.
    pub(crate) server: String,
    /// Its URL.
    pub(crate) url: String,
    /// Its `oauth` settings, the client secret's placeholders filled in.
    pub(crate) settings: OAuthSettings,
    pub(crate) store: TokenFile,
    /// How a person's sign-in reaches a browser; `None`: no one can sign in now.
    pub(crate) step: Option<BrowserStep>,
}

/// A failure as a one-line message.
fn said(e: AuthError) -> String {
    e.to_string().replace('\n', " ")
}

impl Signer {
    /// Whether a token can be had now without the token file: a person can sign in, or the
    /// grant needs no person.
    pub(crate) fn can_sign_in(&self) -> bool {
        self.step.is_some() || self.settings.grant == Grant::ClientCredentials
    }

    async fn manager(&self) -> Result<AuthorizationManager, String> {
        let mut manager = AuthorizationManager::new(self.url.as_str())
            .await
            .map_err(said)?;
        manager.set_credential_store(self.store.clone());
        Ok(manager)
    }

    /// The manager of the tokens in the file, if it holds any.
    pub(crate) async fn stored(&self) -> Result<Option<AuthorizationManager>, String> {
        if !self.store.has_token() {
            return Ok(None);
        }
        let mut manager = self.manager().await?;
        if !manager.initialize_from_store().await.map_err(said)? {
            return Ok(None);
        }
        let secret = self
            .settings
            .client_secret
            .clone()
            .or_else(|| self.store.client_secret());
        if let (Some(secret), Some(stored)) = (
            secret,
            rmcp::transport::auth::CredentialStore::load(&self.store)
                .await
                .ok()
                .flatten(),
        ) {
            let config = OAuthClientConfig::new(stored.client_id, self.url.as_str())
                .with_client_secret(secret);
            manager.configure_client(config).map_err(said)?;
        }
        Ok(Some(manager))
    }

    /// A new token: the client's credentials, or a person's sign-in starting from
    /// `challenge` (the server's `WWW-Authenticate`, if it sent one).
    pub(crate) async fn sign_in(
        &self,
        challenge: Option<&str>,
    ) -> Result<AuthorizationManager, String> {
        match self.settings.grant {
            Grant::ClientCredentials => self.client_credentials(challenge).await,
            Grant::AuthorizationCode => match self.step {
                Some(step) => self.authorization_code(challenge, step).await,
                None => Err(self.needs_login()),
            },
        }
    }

    /// The line that says a person has to sign in.
    pub(crate) fn needs_login(&self) -> String {
        format!(
            "{} asks to sign in (OAuth): run `toolhost mcp login {}`",
            self.url, self.server
        )
    }

    async fn client_credentials(
        &self,
        challenge: Option<&str>,
    ) -> Result<AuthorizationManager, String> {
        let mut manager = self.manager().await?;
        let resolution = manager
            .resolve_metadata_from_challenge(challenge)
            .await
            .map_err(said)?;
        manager.set_metadata(resolution.metadata);
        let (Some(client_id), Some(client_secret)) = (
            self.settings.client_id.clone(),
            self.settings.client_secret.clone(),
        ) else {
            return Err(
                "\"grant\": \"client_credentials\" needs client_id and client_secret".into(),
            );
        };
        let scopes = match self.settings.scopes.is_empty() {
            true => manager.select_scopes(None, &[]),
            false => self.settings.scopes.clone(),
        };
        let config = ClientCredentialsConfig::ClientSecret {
            client_id,
            client_secret,
            scopes,
            resource: Some(self.url.clone()),
        };
        manager
            .validate_client_credentials_metadata(&config)
            .map_err(said)?;
        manager
            .configure_client_credentials(&config)
            .map_err(said)?;
        manager
            .exchange_client_credentials(&config)
            .await
            .map_err(said)?;
        Ok(manager)
    }

    async fn authorization_code(
        &self,
        challenge: Option<&str>,
        step: BrowserStep,
    ) -> Result<AuthorizationManager, String> {
        let mut manager = self.manager().await?;
        let resolution = manager
            .resolve_metadata_from_challenge(challenge)
            .await
            .map_err(said)?;
        let cimd = resolution
            .metadata
            .additional_fields
            .get("client_id_metadata_document_supported")
            .and_then(serde_json::Value::as_bool)
            .unwrap_or(false);
        manager.set_metadata(resolution.metadata);
        let loopback = Loopback::bind().await?;
        let mut request =
            AuthorizationRequest::new(loopback.redirect_uri.as_str()).with_client_name(CLIENT_NAME);
        // The configured scopes; else those the server asks for now, with those granted
        // before (a step-up keeps what it had); none when nothing names any.
        let mut scopes = self.settings.scopes.clone();
        if scopes.is_empty() {
            scopes = manager.select_scopes(None, &[]);
            for granted in self.store.granted_scopes() {
                if !scopes.contains(&granted) {
                    scopes.push(granted);
                }
            }
        }
        if !scopes.is_empty() {
            request = request.with_scopes(scopes.iter().cloned());
        }
        let mut registered_secret = None;
        if let Some(client_id) = &self.settings.client_id {
            request = request.with_preregistered_client(client_id.as_str());
            if let Some(secret) = &self.settings.client_secret {
                request = request.with_client_secret(secret.as_str());
            }
        } else if let (Some(url), true) = (&self.settings.client_metadata_url, cimd) {
            request = request.with_client_metadata_url(url.as_str());
        } else {
            // Dynamic registration here rather than in rmcp, to keep the secret it issues.
            let scopes: Vec<&str> = scopes.iter().map(String::as_str).collect();
            let registered = manager
                .register_client(CLIENT_NAME, &loopback.redirect_uri, &scopes)
                .await
                .map_err(|e| {
                    format!(
                        "the authorization server offers no way to identify this client ({}): \
                         give \"oauth\": {{\"client_id\": ...}} in mcp.json",
                        said(e)
                    )
                })?;
            request = request.with_preregistered_client(registered.client_id.as_str());
            if let Some(secret) = &registered.client_secret {
                request = request.with_client_secret(secret.as_str());
            }
            registered_secret = registered.client_secret;
        }
        let session = AuthorizationSession::new(manager, request)
            .await
            .map_err(|(_, e)| said(e))?;
        let callback = loopback
            .complete(&self.server, session.get_authorization_url(), step)
            .await?;
        let callback = AuthorizationCallback::from_redirect_url(&callback).map_err(said)?;
        session
            .handle_callback_with_issuer(
                &callback.code,
                &callback.csrf_token,
                callback.issuer.as_deref(),
            )
            .await
            .map_err(said)?;
        self.store.set_client_secret(registered_secret)?;
        Ok(session.auth_manager)
    }
}
