//! The line format and the chain rule, shared by the writer, the verifier and `tail`.
//!
//! A record line is the record's JSON object with a header in front:
//!
//! ```text
//! {"seq":N,"time_ms":T,"prev":"<P>","hash":"<H>",<the record's fields>}\n
//! ```
//!
//! `P` is the previous line's `H` (64 zeros before the first line, whose `seq` is 1). `H` is
//! the hex SHA-256 of the line without its `"hash":"<H>",` part and without the newline:
//! `{"seq":N,"time_ms":T,"prev":"<P>",<the record's fields>}`. The header is always written
//! in exactly this form (no spaces), so the verifier can rebuild the hashed text from the line.
//!
//! A writer with a key ([`AuditKey`]) puts `"mac":"<M>",` right after the hash: `M` is the
//! HMAC-SHA256 of `record:<H>`. The MAC is not part of the hashed text, so a line with a MAC
//! and one without follow the same chain rule (lines written before keys existed verify as
//! they did).

use std::io::Write;

use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::key::AuditKey;

/// The `prev` of the first record: 64 zeros.
pub const GENESIS_PREV: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// Where the chain stands after a line: its `seq` and its `hash` (hex).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Link {
    pub(crate) seq: u64,
    pub(crate) hash: [u8; 64],
}

impl Link {
    /// Before the first line: `seq` 0, the zero hash.
    pub(crate) const GENESIS: Link = Link {
        seq: 0,
        hash: [b'0'; 64],
    };

    /// The hash as text.
    pub(crate) fn hash_str(&self) -> &str {
        // Only ever hex digits: written by `hex::encode_to_slice` or checked by `is_hex64`.
        std::str::from_utf8(&self.hash).unwrap_or(GENESIS_PREV)
    }
}

/// The header fields of a line, as read back.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Header {
    pub(crate) seq: u64,
    pub(crate) time_ms: u64,
    pub(crate) prev: String,
    pub(crate) hash: String,
    /// The MAC, on a line written with a key.
    #[serde(default)]
    pub(crate) mac: Option<String>,
}

impl Header {
    /// The link this line ends with, if its hash is 64 lower-case hex digits.
    pub(crate) fn link(&self) -> Option<Link> {
        let hash: [u8; 64] = self.hash.as_bytes().try_into().ok()?;
        is_hex64(&self.hash).then_some(Link {
            seq: self.seq,
            hash,
        })
    }
}

/// Why a line is not a valid record line on its own (before the chain is looked at).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LineFault {
    /// Not a JSON object with the header fields.
    BadJson(String),
    /// The header is not in the form the writer writes.
    NotCanonical,
    /// `hash` does not match the line's content.
    HashMismatch,
}

/// Writes the line for `body` (a record serialized as one JSON object) after `prev` into
/// `out`, newline included, and returns the new link.
pub(crate) fn encode(
    prev: &Link,
    time_ms: u64,
    body: &[u8],
    key: Option<&AuditKey>,
    out: &mut Vec<u8>,
) -> Link {
    debug_assert!(
        body.len() > 2 && body[0] == b'{',
        "a record is a JSON object"
    );
    let rest = &body[1..];
    let seq = prev.seq + 1;
    out.clear();
    prefix(out, seq, time_ms, prev.hash_str());
    let hash = digest(out, rest);
    out.extend_from_slice(b"\"hash\":\"");
    out.extend_from_slice(&hash);
    out.extend_from_slice(b"\",");
    if let Some(key) = key {
        out.extend_from_slice(b"\"mac\":\"");
        out.extend_from_slice(&key.record_mac(&hash));
        out.extend_from_slice(b"\",");
    }
    out.extend_from_slice(rest);
    out.push(b'\n');
    Link { seq, hash }
}

/// Reads the header of `line` (without its newline): the line must be a JSON object.
pub(crate) fn header(line: &[u8]) -> Result<Header, LineFault> {
    let header: Header =
        serde_json::from_slice(line).map_err(|e| LineFault::BadJson(e.to_string()))?;
    let mac_ok = header.mac.as_deref().is_none_or(is_hex64);
    if !is_hex64(&header.prev) || !is_hex64(&header.hash) || !mac_ok {
        return Err(LineFault::BadJson(
            "prev, hash and mac must be 64 lower-case hex digits".to_owned(),
        ));
    }
    Ok(header)
}

/// Reads `line` (without its newline) and checks that its hash matches its content.
pub(crate) fn check(line: &[u8]) -> Result<Header, (Option<Header>, LineFault)> {
    let header = header(line).map_err(|fault| (None, fault))?;
    let mut start = Vec::with_capacity(160);
    prefix(&mut start, header.seq, header.time_ms, &header.prev);
    let hash_field = format!("\"hash\":\"{}\",", header.hash);
    let mac_field = header.mac.as_ref().map(|mac| format!("\"mac\":\"{mac}\","));
    let Some(rest) = line
        .strip_prefix(start.as_slice())
        .and_then(|rest| rest.strip_prefix(hash_field.as_bytes()))
        .and_then(|rest| match &mac_field {
            Some(field) => rest.strip_prefix(field.as_bytes()),
            None => Some(rest),
        })
    else {
        return Err((Some(header), LineFault::NotCanonical));
    };
    if digest(&start, rest) != header.hash.as_bytes() {
        return Err((Some(header), LineFault::HashMismatch));
    }
    Ok(header)
}

/// `{"seq":N,"time_ms":T,"prev":"<prev>",`
fn prefix(out: &mut Vec<u8>, seq: u64, time_ms: u64, prev: &str) {
    // Writing to a Vec cannot fail.
    let _ = write!(
        out,
        "{{\"seq\":{seq},\"time_ms\":{time_ms},\"prev\":\"{prev}\","
    );
}

/// The hex SHA-256 of `start` followed by `rest`.
fn digest(start: &[u8], rest: &[u8]) -> [u8; 64] {
    let mut hasher = Sha256::new();
    hasher.update(start);
    hasher.update(rest);
    let mut hex = [0u8; 64];
    // 32 bytes always fit 64 hex digits.
    let _ = hex::encode_to_slice(hasher.finalize(), &mut hex);
    hex
}

/// Whether `text` is 64 lower-case hex digits.
fn is_hex64(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}
