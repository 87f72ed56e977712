//! The tokens of one HTTP server, `usr/mcp-tokens/<server>.json`: the access and refresh
//! tokens, the client ID (and a dynamically registered client's secret), written with the
//! secrets' protections: the folder of mode 0700, the file of mode 0600 (a file found readable
//! by others is set back to 0600, with a warning), replaced whole by a rename, and every value
//! masked in each log line of the process from the moment it is read or written
//! ([`MaskedInLogs`]). No command prints them; they never reach a tool's arguments, its result
//! or the audit (they travel in the `Authorization` header only).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use rmcp::transport::auth::{AuthError, CredentialStore, StoredCredentials};
use serde::{Deserialize, Serialize};

use crate::secrets::{MaskedInLogs, Secrets};

/// The folder of the token files, under the root.
pub const TOKENS_DIR: &str = "usr/mcp-tokens";

/// What the file holds.
#[derive(Default, Serialize, Deserialize)]
struct Saved {
    /// The server's URL: tokens saved for another URL are not sent.
    url: String,
    #[serde(default)]
    credentials: Option<StoredCredentials>,
    /// A dynamically registered client's secret (a pre-registered one stays in mcp.json).
    #[serde(default)]
    client_secret: Option<String>,
    /// The last challenge (`WWW-Authenticate`) no one could answer: `login` starts from it,
    /// so it asks for the scopes the server asked for.
    #[serde(default)]
    challenge: Option<String>,
}

/// One server's token file.
#[derive(Clone)]
pub(crate) struct TokenFile {
    path: PathBuf,
    url: String,
    /// Its placeholder's key, `MCP_TOKEN_<SERVER>`.
    key: String,
    masked: Arc<MaskedInLogs>,
}

impl TokenFile {
    /// The file `path` of server `server` at `url`.
    pub(crate) fn new(path: &Path, server: &str, url: &str) -> Self {
        let key = format!(
            "MCP_TOKEN_{}",
            server.to_ascii_uppercase().replace('-', "_")
        );
        let file = Self {
            path: path.to_owned(),
            url: url.to_owned(),
            key,
            masked: Arc::new(MaskedInLogs::new(Secrets::empty())),
        };
        let saved = file.read();
        file.mask(&saved);
        file
    }

    /// Where it is.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Whether it holds a token for this URL.
    pub(crate) fn has_token(&self) -> bool {
        self.read()
            .credentials
            .is_some_and(|c| c.token_response.is_some())
    }

    /// The scopes the last token was granted.
    pub(crate) fn granted_scopes(&self) -> Vec<String> {
        self.read()
            .credentials
            .map(|c| c.granted_scopes)
            .unwrap_or_default()
    }

    pub(crate) fn client_secret(&self) -> Option<String> {
        self.read().client_secret
    }

    pub(crate) fn set_client_secret(&self, secret: Option<String>) -> Result<(), String> {
        let mut saved = self.read();
        saved.client_secret = secret;
        self.write(&saved)
    }

    pub(crate) fn challenge(&self) -> Option<String> {
        self.read().challenge
    }

    pub(crate) fn set_challenge(&self, challenge: Option<String>) -> Result<(), String> {
        let mut saved = self.read();
        if saved.challenge == challenge {
            return Ok(());
        }
        saved.challenge = challenge;
        self.write(&saved)
    }

    /// Forgets everything (`login` starts afresh).
    pub(crate) fn remove(&self) -> Result<(), String> {
        match std::fs::remove_file(&self.path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(format!("cannot remove {}: {e}", self.path.display())),
        }
    }

    /// What the file holds for this URL (nothing when it is missing, unreadable or for
    /// another URL).
    fn read(&self) -> Saved {
        let Ok(text) = std::fs::read_to_string(&self.path) else {
            return Saved::default();
        };
        self.keep_private();
        let saved = match serde_json::from_str::<Saved>(&text) {
            Ok(saved) if saved.url == self.url => saved,
            Ok(_) => Saved::default(),
            Err(e) => {
                tracing::warn!(
                    "{}: not a token file this host wrote ({e}): sign in again with `toolhost mcp login`",
                    self.path.display()
                );
                Saved::default()
            }
        };
        self.mask(&saved);
        saved
    }

    fn write(&self, saved: &Saved) -> Result<(), String> {
        let saved = Saved {
            url: self.url.clone(),
            credentials: saved.credentials.clone(),
            client_secret: saved.client_secret.clone(),
            challenge: saved.challenge.clone(),
        };
        self.mask(&saved);
        let text = serde_json::to_string_pretty(&saved).map_err(|e| e.to_string())?;
        let dir = self.path.parent().unwrap_or(Path::new("."));
        let failed = |e: std::io::Error| format!("cannot write {}: {e}", self.path.display());
        private_dir(dir).map_err(failed)?;
        let tmp = self.path.with_extension("json.tmp");
        let _ = std::fs::remove_file(&tmp);
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = options.open(&tmp).map_err(failed)?;
        std::io::Write::write_all(&mut file, text.as_bytes()).map_err(failed)?;
        file.sync_all().map_err(failed)?;
        std::fs::rename(&tmp, &self.path).map_err(failed)
    }

    /// Sets the file back to mode 0600 if others may read it.
    fn keep_private(&self) {
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let Ok(meta) = std::fs::metadata(&self.path) else {
                return;
            };
            if meta.permissions().mode() & 0o077 != 0 {
                tracing::warn!(
                    "{} could be read by others: set back to mode 0600",
                    self.path.display()
                );
                let _ =
                    std::fs::set_permissions(&self.path, std::fs::Permissions::from_mode(0o600));
            }
        }
    }

    /// Masks the values of `saved` in every log line from now on.
    fn mask(&self, saved: &Saved) {
        let mut pairs = Vec::new();
        // The token response as the server sent it (the oauth2 crate's type serializes to it).
        let token = saved
            .credentials
            .as_ref()
            .and_then(|c| c.token_response.as_ref())
            .and_then(|t| serde_json::to_value(t).ok());
        for (field, suffix) in [("access_token", "ACCESS"), ("refresh_token", "REFRESH")] {
            if let Some(value) = token.as_ref().and_then(|t| t[field].as_str()) {
                pairs.push((format!("{}_{suffix}", self.key), value.to_owned()));
            }
        }
        if let Some(secret) = &saved.client_secret {
            pairs.push((format!("{}_CLIENT_SECRET", self.key), secret.clone()));
        }
        if !pairs.is_empty() {
            self.masked.set(Secrets::from_pairs(pairs));
        }
    }
}

/// Creates `dir` (mode 0700) if it is missing.
fn private_dir(dir: &Path) -> std::io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

#[async_trait]
impl CredentialStore for TokenFile {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        Ok(self.read().credentials)
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        let mut saved = self.read();
        saved.credentials = Some(credentials);
        saved.challenge = None;
        self.write(&saved).map_err(AuthError::CredentialStoreError)
    }

    async fn clear(&self) -> Result<(), AuthError> {
        let mut saved = self.read();
        saved.credentials = None;
        saved.client_secret = None;
        self.write(&saved).map_err(AuthError::CredentialStoreError)
    }
}
