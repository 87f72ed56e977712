//! The `oauth` key of an HTTP server's entry in `mcp.json`: how this client identifies itself
//! to the server's authorization server, and which grant it uses.
//!
//! ```json
//! "docs": {"url": "https://docs.example.com/mcp", "oauth": {
//!   "client_id": "toolhost-cli", "client_secret": "§§secret(DOCS_CLIENT_SECRET)",
//!   "scopes": ["docs:read"], "grant": "authorization_code"
//! }}
//! ```
//!
//! Every key is optional; without the key at all an HTTP server that asks for sign-in gets
//! the defaults (a client registered dynamically, or the client ID metadata document when
//! `client_metadata_url` is given and the server supports it).

use serde_json::Value;

use super::{OAuthError, OAuthErrorKind};

/// The keys of the `oauth` object.
pub const OAUTH_KEYS: &[&str] = &[
    "client_id",
    "client_secret",
    "client_metadata_url",
    "scopes",
    "grant",
];

/// How the client gets its tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Grant {
    /// A person signs in in a browser (`toolhost mcp login SERVER`): authorization code with
    /// PKCE, through a loopback redirect.
    #[default]
    AuthorizationCode,
    /// A machine: the client's own ID and secret are exchanged for a token, no person involved
    /// (needs `client_id` and `client_secret`).
    ClientCredentials,
}

/// An HTTP server's `oauth` settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct OAuthSettings {
    /// A client ID registered with the authorization server beforehand; none: a client ID
    /// metadata document or dynamic registration.
    pub client_id: Option<String>,
    /// The pre-registered client's secret (`§§secret(NAME)` placeholders filled in when used).
    pub client_secret: Option<String>,
    /// The HTTPS URL of this client's ID metadata document, used as the client ID where the
    /// authorization server supports it (`client_id_metadata_document_supported`).
    pub client_metadata_url: Option<String>,
    /// The scopes to ask for; empty: chosen from the server's challenge or metadata.
    pub scopes: Vec<String>,
    /// The grant.
    pub grant: Grant,
}

impl OAuthSettings {
    /// Reads the `oauth` object; the error (of kind [`Settings`](OAuthErrorKind::Settings)) is
    /// one line naming the key.
    pub fn parse(value: &Value) -> Result<Self, OAuthError> {
        Self::parse_value(value).map_err(|e| OAuthError::new(OAuthErrorKind::Settings, e))
    }

    fn parse_value(value: &Value) -> Result<Self, String> {
        let Value::Object(map) = value else {
            return Err(format!("\"oauth\" must be an object, not {value}"));
        };
        if let Some(key) = map.keys().find(|k| !OAUTH_KEYS.contains(&k.as_str())) {
            return Err(format!(
                "unknown key \"oauth.{key}\" (known keys: {})",
                OAUTH_KEYS.join(", ")
            ));
        }
        let string = |key: &str| match map.get(key) {
            None => Ok(None),
            Some(Value::String(s)) if !s.is_empty() => Ok(Some(s.clone())),
            Some(other) => Err(format!(
                "\"oauth.{key}\" must be a non-empty string, not {other}"
            )),
        };
        let scopes = match map.get("scopes") {
            None => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .map(|s| match s {
                    Value::String(s) if !s.is_empty() && !s.contains(' ') => Ok(s.clone()),
                    other => Err(format!(
                        "\"oauth.scopes\" must be an array of scope names (no spaces), not {other}"
                    )),
                })
                .collect::<Result<_, _>>()?,
            Some(other) => {
                return Err(format!(
                    "\"oauth.scopes\" must be an array of strings, not {other}"
                ));
            }
        };
        let grant = match string("grant")?.as_deref() {
            None | Some("authorization_code") => Grant::AuthorizationCode,
            Some("client_credentials") => Grant::ClientCredentials,
            Some(other) => {
                return Err(format!(
                    "\"oauth.grant\" is {other:?}: use \"authorization_code\" (a person signs in) \
                     or \"client_credentials\" (a machine)"
                ));
            }
        };
        let settings = Self {
            client_id: string("client_id")?,
            client_secret: string("client_secret")?,
            client_metadata_url: string("client_metadata_url")?,
            scopes,
            grant,
        };
        if let Some(url) = &settings.client_metadata_url {
            if !url.starts_with("https://") {
                return Err(
                    "\"oauth.client_metadata_url\" must be an https:// URL (the client ID \
                            metadata document)"
                        .to_owned(),
                );
            }
        }
        if settings.client_secret.is_some() && settings.client_id.is_none() {
            return Err("\"oauth.client_secret\" needs \"oauth.client_id\"".to_owned());
        }
        if settings.grant == Grant::ClientCredentials
            && (settings.client_id.is_none() || settings.client_secret.is_none())
        {
            return Err(
                "\"oauth.grant\": \"client_credentials\" needs \"client_id\" and \"client_secret\""
                    .to_owned(),
            );
        }
        Ok(settings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_keys_are_read_and_mistakes_named() {
        let full = json!({"client_id": "c", "client_secret": "§§secret(S)", "scopes": ["a", "b"],
                          "grant": "client_credentials"});
        let settings = OAuthSettings::parse(&full).unwrap();
        assert_eq!(settings.grant, Grant::ClientCredentials);
        assert_eq!(settings.scopes, ["a", "b"]);
        let wrong = |v: Value| OAuthSettings::parse(&v).unwrap_err().message;
        assert!(wrong(json!({"clientid": "c"})).starts_with("unknown key \"oauth.clientid\""));
        assert!(wrong(json!({"grant": "password"})).starts_with("\"oauth.grant\" is \"password\""));
        assert!(wrong(json!({"scopes": "a b"})).contains("array of strings"));
        assert!(wrong(json!({"grant": "client_credentials"})).contains("needs \"client_id\""));
        assert!(wrong(json!({"client_metadata_url": "http://x/c.json"})).contains("https://"));
        assert_eq!(wrong(json!(true)), "\"oauth\" must be an object, not true");
        let kind = OAuthSettings::parse(&json!(true)).unwrap_err().kind;
        assert_eq!(kind, OAuthErrorKind::Settings);
    }
}
