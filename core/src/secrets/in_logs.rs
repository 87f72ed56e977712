//! The secrets every log line of the process is masked with: each host's live secrets (its
//! store registers them) and any other set of values a part of the process holds (a model's
//! API key from an environment variable). The binary's tracing writer masks each formatted
//! line with [`mask_log_line`] before it reaches standard error, so no WARN or ERROR line,
//! the host's or a dependency's, can carry a value in any of the forms masking knows.
//!
//! ```
//! use toolhost::{mask_log_line, MaskedInLogs, Secrets};
//!
//! let key = MaskedInLogs::new(Secrets::parse("OPENAI_API_KEY=sk-12345").unwrap());
//! assert_eq!(mask_log_line("401 for sk-12345"), "401 for §§secret(OPENAI_API_KEY)");
//! assert_eq!(mask_log_line("401 for SK-12345"), "401 for §§secret(OPENAI_API_KEY)");
//! drop(key);
//! assert_eq!(mask_log_line("401 for sk-12345"), "401 for sk-12345");
//! ```

use std::borrow::Cow;
use std::sync::{Arc, Mutex, RwLock, Weak};

use super::Secrets;
use crate::sync::{lock, read, write};

/// A set of secrets that may be replaced while it is in force.
pub(crate) type Live = Arc<RwLock<Arc<Secrets>>>;

/// Every registered set, while its owner lives.
static SOURCES: Mutex<Vec<Weak<RwLock<Arc<Secrets>>>>> = Mutex::new(Vec::new());

/// Masks every log line with `live` for as long as it lives.
pub(crate) fn register(live: &Live) {
    let mut sources = lock(&SOURCES);
    sources.retain(|s| s.strong_count() > 0);
    sources.push(Arc::downgrade(live));
}

/// `line` with the values of every set of secrets in force in this process masked (as
/// [`Secrets::mask`] does: each value and its encodings); borrowed when it holds none.
pub fn mask_log_line(line: &str) -> Cow<'_, str> {
    let mut text = Cow::Borrowed(line);
    for secrets in in_force() {
        let masked = match secrets.replace(&text) {
            Cow::Owned(masked) => Some(masked),
            Cow::Borrowed(_) => None,
        };
        if let Some(masked) = masked {
            text = Cow::Owned(masked);
        }
    }
    text
}

/// Every string in `value` masked as [`mask_log_line`] masks a line: for text a peer sends
/// that may echo a value this process holds (an MCP server's result echoing its access token).
#[cfg(feature = "mcp")]
pub(crate) fn mask_value_in_logs(value: &mut serde_json::Value) {
    for secrets in in_force() {
        secrets.value_in_place(value);
    }
}

/// Whether `key` names a value this process masks though no host gives it to tools (a
/// model's API key, an MCP server's access token): its placeholder in a tool's arguments is
/// text that stays as it is, not a mistake (a model quoting its own masked key in an answer).
pub(crate) fn masks_key(key: &str) -> bool {
    in_force().iter().any(|secrets| secrets.get(key).is_some())
}

/// The sets of secrets in force now, those that hold any.
fn in_force() -> Vec<Arc<Secrets>> {
    lock(&SOURCES)
        .iter()
        .filter_map(Weak::upgrade)
        .map(|live| read(&live).clone())
        .filter(|secrets| !secrets.is_empty())
        .collect()
}

/// Secrets that every log line is masked with while this value lives (a model keeps its API
/// key's here). Its `Debug` shows the keys only.
#[derive(Debug)]
pub struct MaskedInLogs(Live);

impl MaskedInLogs {
    /// Masks every log line with `secrets` from now until this is dropped.
    pub fn new(secrets: Secrets) -> Self {
        let live = Arc::new(RwLock::new(Arc::new(secrets)));
        register(&live);
        Self(live)
    }

    /// Replaces the secrets.
    pub fn set(&self, secrets: Secrets) {
        *write(&self.0) = Arc::new(secrets);
    }
}
