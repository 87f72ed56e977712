//! Values stored apart: a record larger than [`MAX_INLINE_BYTES`] keeps its largest fields in
//! files beside the log, named by their content's SHA-256 (`blobs/<sha256>.json`), so no
//! legitimate record, whatever its arguments, makes a line the readers refuse.
//!
//! The record keeps, in place of each such field, the text `(stored apart)`, and lists them
//! in a field of its own, covered by the line's hash like the rest:
//!
//! ```text
//! …,"args":"(stored apart)",…,"apart":{"args":{"sha256":"<hex>","bytes":1200042}}}
//! ```
//!
//! A file is written once (same content, same name) and atomically (a new file renamed into
//! place), so a reader sees all of it or none. [`verify`](super::verify()) checks that each one
//! is there, is as long as the record says and hashes to its name.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use sha2::{Digest, Sha256};

use super::{AuditError, AuditErrorKind};
use crate::layout::{open_regular, write_atomically_with};

/// The largest record kept whole in its line, in bytes of JSON: 64 KiB. Larger ones store
/// their largest fields apart.
pub const MAX_INLINE_BYTES: usize = 64 << 10;

/// Fields shorter than this stay in the line, in bytes of JSON.
const MIN_APART_BYTES: usize = 1024;

/// The folder of the values stored apart, in the log's folder.
pub use crate::layout::AUDIT_BLOBS_DIR as BLOBS_DIR;

/// What a field stored apart leaves in the record.
pub(crate) const PLACEHOLDER: &str = "(stored apart)";

/// Where a field's value went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Apart {
    /// The hex SHA-256 of the value's JSON: its file's name.
    pub(crate) sha256: String,
    /// The length of that JSON.
    pub(crate) bytes: u64,
}

/// The file of the value whose JSON hashes to `sha256` (64 hex digits).
pub(crate) fn blob_path(dir: &Path, sha256: &str) -> PathBuf {
    dir.join(BLOBS_DIR).join(format!("{sha256}.json"))
}

/// `body` (a record's JSON object) with its largest fields stored apart until it is at most
/// [`MAX_INLINE_BYTES`] long; `body` itself when it already is.
pub(crate) fn store_apart(dir: &Path, body: &[u8], durable: bool) -> Result<Vec<u8>, AuditError> {
    let encode = |e: serde_json::Error| {
        AuditError::new(
            AuditErrorKind::Encode,
            dir,
            format!("cannot store a large record's fields apart: {e}"),
        )
    };
    // Each field's JSON as it is in `body`, borrowed: nothing is copied but the record's
    // shorter new form.
    let fields: BTreeMap<String, &RawValue> = serde_json::from_slice(body).map_err(encode)?;
    let mut sizes: Vec<(usize, &str)> = fields
        .iter()
        .filter(|(name, json)| *name != "type" && json.get().len() >= MIN_APART_BYTES)
        .map(|(name, json)| (json.get().len(), name.as_str()))
        .collect();
    sizes.sort_by_key(|s| std::cmp::Reverse(s.0));
    let placeholder = serde_json::value::to_raw_value(PLACEHOLDER).map_err(encode)?;
    let mut kept = fields.clone();
    let mut left = body.len();
    let mut apart = BTreeMap::new();
    for (len, name) in sizes {
        if left <= MAX_INLINE_BYTES {
            break;
        }
        let json = fields[name].get().as_bytes();
        let sha256 = crate::hash::sha256_hex(json);
        write_blob(dir, &sha256, json, durable)?;
        kept.insert(name.to_owned(), &placeholder);
        left = left.saturating_sub(len);
        apart.insert(
            name.to_owned(),
            Apart {
                sha256,
                bytes: len as u64,
            },
        );
    }
    let apart = serde_json::value::to_raw_value(&apart).map_err(encode)?;
    kept.insert("apart".to_owned(), &apart);
    serde_json::to_vec(&kept).map_err(encode)
}

/// Writes the value's file, unless a file of that name and length is there already.
fn write_blob(dir: &Path, sha256: &str, json: &[u8], durable: bool) -> Result<(), AuditError> {
    let path = blob_path(dir, sha256);
    if std::fs::metadata(&path).is_ok_and(|m| m.is_file() && m.len() == json.len() as u64) {
        return Ok(());
    }
    write_atomically_with(&path, json, durable)
        .map_err(|e| AuditError::io(&path, "store a large value apart", e))
}

/// The fields a line stores apart, if it names any (`None` for nearly every line: it is
/// looked for only when the line mentions `"apart":`).
pub(crate) fn parts(line: &[u8]) -> Result<Option<BTreeMap<String, Apart>>, String> {
    if memchr::memmem::find(line, b"\"apart\":").is_none() {
        return Ok(None);
    }
    #[derive(Deserialize)]
    struct Parts {
        apart: Option<BTreeMap<String, Apart>>,
    }
    let parts: Parts =
        serde_json::from_slice(line).map_err(|e| format!("its \"apart\" field is bad: {e}"))?;
    Ok(parts.apart)
}

/// Checks the file of each field stored apart: there, a regular file, as long as the record
/// says, and hashing to its name. The reason, when one is not.
pub(crate) fn check_parts(dir: &Path, parts: &BTreeMap<String, Apart>) -> Result<(), String> {
    for (field, part) in parts {
        let valid = part.sha256.len() == 64
            && part
                .sha256
                .bytes()
                .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        if !valid {
            return Err(format!(
                "its field {field} is stored apart under a name that is not a SHA-256"
            ));
        }
        let path = blob_path(dir, &part.sha256);
        let shown = format!("{BLOBS_DIR}/{}.json", part.sha256);
        let (file, metadata) = open_regular(&path)
            .map_err(|e| format!("its field {field}, stored apart in {shown}: {e}"))?;
        if metadata.len() != part.bytes {
            return Err(format!(
                "its field {field}, stored apart in {shown}, is {} bytes, not {}: the file was \
                 changed",
                metadata.len(),
                part.bytes
            ));
        }
        let digest = sha256_of(file.take(part.bytes)).map_err(|e| {
            format!("its field {field}, stored apart in {shown}: cannot read it: {e}")
        })?;
        if digest != part.sha256 {
            return Err(format!(
                "its field {field}, stored apart in {shown}, does not hash to its name: the file \
                 was changed"
            ));
        }
    }
    Ok(())
}

/// The hex SHA-256 of what `reader` gives, read in chunks.
fn sha256_of(mut reader: impl Read) -> std::io::Result<String> {
    let mut hasher = Sha256::new();
    let mut chunk = vec![0u8; 64 << 10];
    loop {
        match reader.read(&mut chunk) {
            Ok(0) => return Ok(hex::encode(hasher.finalize())),
            Ok(n) => hasher.update(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}
