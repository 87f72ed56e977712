//! The audit log's optional key: an HMAC-SHA256 of each record's hash and of the head, so a
//! rewrite that recomputes every hash is still detected by whoever holds the key.

use std::fmt;
use std::path::Path;

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use super::{AuditError, AuditErrorKind};

/// A secret key for the audit log's MACs ([`AuditOptions::key`](super::AuditOptions::key),
/// [`VerifyOptions::key`](super::VerifyOptions::key)). Its bytes are never displayed.
///
/// ```
/// let key = toolhost::audit::AuditKey::new(b"correct horse battery staple").unwrap();
/// assert_eq!(format!("{key:?}"), "AuditKey(..)");
/// ```
#[derive(Clone)]
pub struct AuditKey(Hmac<Sha256>);

impl fmt::Debug for AuditKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AuditKey(..)")
    }
}

impl PartialEq for AuditKey {
    /// Keys are compared by what they sign: the same MAC of the same text.
    fn eq(&self, other: &Self) -> bool {
        self.mac(b"compare") == other.mac(b"compare")
    }
}

impl Eq for AuditKey {}

/// The shortest key accepted, in bytes: 16 (128 bits).
pub const MIN_KEY_BYTES: usize = 16;

impl AuditKey {
    /// A key from its bytes; `None` if shorter than [`MIN_KEY_BYTES`].
    pub fn new(bytes: &[u8]) -> Option<Self> {
        if bytes.len() < MIN_KEY_BYTES {
            return None;
        }
        Hmac::<Sha256>::new_from_slice(bytes).ok().map(Self)
    }

    /// The key held by the environment variable `name` (`[audit] key_env`): its bytes. `dir`,
    /// the log's folder, is what the error names.
    pub fn from_env(name: &str, dir: &Path) -> Result<Self, AuditError> {
        let value = std::env::var_os(name).unwrap_or_default();
        Self::new(value.as_encoded_bytes()).ok_or_else(|| {
            let why = match value.is_empty() {
                true => "is not set".to_owned(),
                false => format!("is shorter than {MIN_KEY_BYTES} bytes"),
            };
            AuditError::new(
                AuditErrorKind::Key,
                dir,
                format!(
                    "the key's variable {name} ([audit] key_env) {why}: set it to a secret of at \
                     least {MIN_KEY_BYTES} bytes, the same for every process that writes or \
                     verifies this log"
                ),
            )
        })
    }

    /// The hex MAC of `text`.
    pub(crate) fn mac(&self, text: &[u8]) -> [u8; 64] {
        let mut mac = self.0.clone();
        mac.update(text);
        let mut hex = [0u8; 64];
        // 32 bytes always fit 64 hex digits.
        let _ = hex::encode_to_slice(mac.finalize().into_bytes(), &mut hex);
        hex
    }

    /// The MAC of a record line whose hash is `hash` (hex): the hash covers the line and,
    /// through `prev`, every line before it.
    pub(crate) fn record_mac(&self, hash: &[u8]) -> [u8; 64] {
        let mut text = Vec::with_capacity(7 + hash.len());
        text.extend_from_slice(b"record:");
        text.extend_from_slice(hash);
        self.mac(&text)
    }

    /// The MAC of the head: the last record's `seq` and `hash`.
    pub(crate) fn head_mac(&self, seq: u64, hash: &str) -> [u8; 64] {
        self.mac(format!("head:{seq}:{hash}").as_bytes())
    }
}

/// Whether the hex MAC `given` equals `expected`, in time that does not depend on where they
/// differ.
pub(crate) fn same_mac(given: &[u8], expected: &[u8; 64]) -> bool {
    given.len() == expected.len()
        && given
            .iter()
            .zip(expected)
            .fold(0u8, |diff, (a, b)| diff | (a ^ b))
            == 0
}
