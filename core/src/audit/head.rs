//! The chain's head, anchored outside the log: `head.json` beside it holds the last record's
//! `seq` and `hash` (and, with a key, their MAC), rewritten atomically after each append. The
//! chain alone cannot show records cut from its end; the head can, and a copy of it kept
//! elsewhere (`toolhost audit verify` prints it) can also when the whole folder is rewritten.
//!
//! ```text
//! {"format":2,"seq":42,"hash":"9f2c…","mac":"…"}
//! ```

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::chain::Link;
use super::key::AuditKey;
use super::AuditError;
use crate::layout::{read_capped, write_atomically_with, ReadErrorKind};

/// The head's file name in the log's folder.
pub const HEAD_FILE: &str = "head.json";

/// The log format a head describes: 2 (format 1 had no head, no MACs and no values stored
/// apart; its records verify as they did).
pub const FORMAT: u32 = 2;

/// What the head file says: where the chain ended after its writer's last append.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Head {
    /// The log format ([`FORMAT`]).
    pub format: u32,
    /// The last record's `seq`.
    pub seq: u64,
    /// The last record's `hash`.
    pub hash: String,
    /// The HMAC of `head:<seq>:<hash>`, when the writer had a key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
}

impl Head {
    /// `42:9f2c…`: the form `toolhost audit verify --head` takes back.
    pub fn anchor(&self) -> String {
        format!("{}:{}", self.seq, self.hash)
    }
}

/// Rewrites the head after an append that ended at `link`.
pub(crate) fn write_head(
    dir: &Path,
    link: &Link,
    key: Option<&AuditKey>,
    durable: bool,
) -> Result<(), AuditError> {
    let hash = link.hash_str();
    let head = Head {
        format: FORMAT,
        seq: link.seq,
        hash: hash.to_owned(),
        mac: key.map(|key| String::from_utf8_lossy(&key.head_mac(link.seq, hash)).into_owned()),
    };
    let path = dir.join(HEAD_FILE);
    // Serializing these plain fields cannot fail.
    let mut bytes = serde_json::to_vec(&head).unwrap_or_default();
    bytes.push(b'\n');
    write_atomically_with(&path, &bytes, durable)
        .map_err(|e| AuditError::io(&path, "write the chain's head", e))
}

/// The head in `dir`: `Ok(None)` when there is no head file, `Err` with the reason when it
/// cannot be read or is not a head.
pub(crate) fn read_head(dir: &Path) -> Result<Option<Head>, String> {
    let path = dir.join(HEAD_FILE);
    let read = match read_capped(&path, 4096, "a 4 KiB limit") {
        Ok(read) => read,
        Err(e) if e.kind() == ReadErrorKind::Missing => return Ok(None),
        Err(e) => return Err(format!("{HEAD_FILE}: {e}")),
    };
    serde_json::from_slice(&read.bytes)
        .map(Some)
        .map_err(|e| format!("{HEAD_FILE} is not a head: {e}"))
}
