//! Secrets: the model only ever sees `§§secret(KEY)` placeholders; tools get the values.
//!
//! The values live in `usr/secrets.env` (`KEY=VALUE` lines). [`Secrets::mask`] replaces every
//! value of 4 characters or more with its placeholder, in one pass over the text
//! (Aho-Corasick, leftmost-longest: where two values start at the same place the longer one
//! wins). [`Secrets::unmask_value`] puts the values back into a tool's arguments, in strings at
//! any depth. [`MaskStream`] masks text that arrives in chunks, holding back only what could be
//! the start of a value.
//!
//! ```
//! use toolhost::Secrets;
//!
//! let secrets = Secrets::parse("API_KEY=sk-12345\nUSER=ada\n").unwrap();
//! assert_eq!(secrets.mask("token sk-12345 for ada"), "token §§secret(API_KEY) for ada");
//! let mut args = serde_json::json!({"headers": {"auth": "Bearer §§secret(API_KEY)"}});
//! secrets.unmask_value(&mut args).unwrap();
//! assert_eq!(args["headers"]["auth"], "Bearer sk-12345");
//! ```

use std::borrow::Cow;
use std::path::Path;

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};
use serde_json::{Map, Value};

use crate::ToolError;

mod masked;
mod variants;
mod store;
mod stream;

pub use masked::{Masked, MaskedError};
pub(crate) use store::SecretStore;
pub use stream::MaskStream;

/// The text before a key in a placeholder.
pub const PLACEHOLDER_START: &str = "§§secret(";

/// Values shorter than this are not masked (they would match ordinary text), though they are
/// still filled into arguments; loading such a value logs a warning.
pub const MIN_MASKED_LEN: usize = 4;

/// A set of secrets, ready to mask and unmask.
#[derive(Debug, Clone, Default)]
pub struct Secrets {
    /// `(key, value)`, sorted by key.
    pairs: Vec<(String, String)>,
    /// Over the values of `MIN_MASKED_LEN` or more; pattern `i` is `masked[i]`.
    matcher: Option<AhoCorasick>,
    /// Placeholder of each pattern.
    placeholders: Vec<String>,
    /// Length in bytes of the longest masked value.
    longest: usize,
}

/// A line of `secrets.env` that is not `KEY=VALUE`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line} of the secrets file is not KEY=VALUE (keys use letters, digits and '_'): fix or remove it")]
pub struct SecretsError {
    /// 1-based line number.
    pub line: usize,
}

impl Secrets {
    /// No secrets.
    pub fn empty() -> Self {
        Self::default()
    }

    /// Reads `path` (`KEY=VALUE` lines; blank lines and `#` comments are skipped; a value may be
    /// quoted). A missing file means no secrets.
    pub fn load(path: &Path) -> Result<Self, String> {
        match std::fs::read_to_string(path) {
            Ok(text) => Self::parse(&text).map_err(|e| format!("{}: {e}", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::empty()),
            Err(e) => Err(format!("cannot read {}: {e}", path.display())),
        }
    }

    /// Parses the `KEY=VALUE` text of a secrets file.
    pub fn parse(text: &str) -> Result<Self, SecretsError> {
        let mut pairs = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let line = line.strip_prefix("export ").unwrap_or(line);
            let (key, value) = line.split_once('=').ok_or(SecretsError { line: i + 1 })?;
            let key = key.trim();
            if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(SecretsError { line: i + 1 });
            }
            let value = value.trim();
            let value = ['"', '\'']
                .iter()
                .find_map(|q| value.strip_prefix(*q)?.strip_suffix(*q))
                .unwrap_or(value);
            pairs.push((key.to_owned(), value.to_owned()));
        }
        Ok(Self::from_pairs(pairs))
    }

    /// Secrets from `(key, value)` pairs; a later pair replaces an earlier one of the same key.
    pub fn from_pairs(pairs: impl IntoIterator<Item = (String, String)>) -> Self {
        let mut by_key = std::collections::BTreeMap::new();
        for (key, value) in pairs {
            by_key.insert(key, value);
        }
        let pairs: Vec<(String, String)> = by_key.into_iter().collect();
        for (key, value) in &pairs {
            if value.chars().count() < MIN_MASKED_LEN {
                tracing::warn!(
                    "secret {key} is shorter than {MIN_MASKED_LEN} characters: it is filled into \
                     tool arguments but cannot be masked in what tools return; use a longer value"
                );
            }
        }
        // Each value, and its JSON-escaped form where that differs (a value with a quote or a
        // backslash, inside JSON text a tool returns).
        let mut masked: Vec<(String, String)> = Vec::new();
        for (key, value) in pairs
            .iter()
            .filter(|(_, v)| v.chars().count() >= MIN_MASKED_LEN)
        {
            masked.push((key.clone(), value.clone()));
            let escaped = serde_json::to_string(value).unwrap_or_default();
            let escaped = &escaped[1..escaped.len().saturating_sub(1).max(1)];
            if escaped != value {
                masked.push((key.clone(), escaped.to_owned()));
            }
        }
        let matcher = (!masked.is_empty()).then(|| {
            // A full DFA: about 3x faster to search than the default NFA here (1,000 values of
            // 8 to 40 bytes take a few MB), and secrets change rarely.
            AhoCorasick::builder()
                .match_kind(MatchKind::LeftmostLongest)
                .kind(Some(AhoCorasickKind::DFA))
                .build(masked.iter().map(|(_, v)| v))
                .expect("secret values form a valid automaton")
        });
        let placeholders = masked.iter().map(|(k, _)| placeholder(k)).collect();
        let longest = masked.iter().map(|(_, v)| v.len()).max().unwrap_or(0);
        Self {
            matcher,
            placeholders,
            longest,
            pairs,
        }
    }

    /// The keys, sorted.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.pairs.iter().map(|(k, _)| k.as_str())
    }

    /// Whether there are no secrets.
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.pairs
            .binary_search_by(|(k, _)| k.as_str().cmp(key))
            .ok()
            .map(|i| self.pairs[i].1.as_str())
    }

    /// `text` with every secret value replaced by its placeholder.
    pub fn mask(&self, text: &str) -> Masked {
        Masked::new(self.replace(text).into_owned())
    }

    /// Like [`mask`](Self::mask), reusing `text` (no copy when it holds no secret value).
    pub fn mask_owned(&self, mut text: String) -> Masked {
        self.text_in_place(&mut text);
        Masked::new(text)
    }

    /// `value` with every string masked, at any depth (object keys too).
    pub fn mask_value(&self, mut value: Value) -> Masked<Value> {
        self.value_in_place(&mut value);
        Masked::new(value)
    }

    /// `map` with every key and every string masked, at any depth.
    pub fn mask_map(&self, mut map: Map<String, Value>) -> Masked<Map<String, Value>> {
        self.map_in_place(&mut map);
        Masked::new(map)
    }

    /// The error with its message masked.
    pub fn mask_error(&self, error: &ToolError) -> MaskedError {
        MaskedError::new(error.kind(), self.mask(error.message()))
    }

    /// `text` with every secret value replaced by its placeholder; borrowed when there was none.
    fn replace<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let Some(matcher) = &self.matcher else {
            return Cow::Borrowed(text);
        };
        let mut matches = matcher.find_iter(text).peekable();
        if matches.peek().is_none() {
            return Cow::Borrowed(text);
        }
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        for m in matches {
            out.push_str(&text[at..m.start()]);
            out.push_str(&self.placeholders[m.pattern().as_usize()]);
            at = m.end();
        }
        out.push_str(&text[at..]);
        Cow::Owned(out)
    }

    fn value_in_place(&self, value: &mut Value) {
        if self.matcher.is_none() {
            return;
        }
        match value {
            Value::String(s) => self.text_in_place(s),
            Value::Array(items) => items.iter_mut().for_each(|v| self.value_in_place(v)),
            Value::Object(map) => self.map_in_place(map),
            _ => {}
        }
    }

    /// Masks the strings of `value` at any depth, but not object keys: the field names of
    /// typed data stay what its type expects.
    pub(crate) fn strings_in_place(&self, value: &mut Value) {
        if self.matcher.is_none() {
            return;
        }
        match value {
            Value::String(s) => self.text_in_place(s),
            Value::Array(items) => items.iter_mut().for_each(|v| self.strings_in_place(v)),
            Value::Object(map) => map.values_mut().for_each(|v| self.strings_in_place(v)),
            _ => {}
        }
    }

    fn map_in_place(&self, map: &mut Map<String, Value>) {
        if self.matcher.is_none() {
            return;
        }
        for (key, mut v) in std::mem::take(map) {
            self.value_in_place(&mut v);
            map.insert(self.replace(&key).into_owned(), v);
        }
    }

    /// Allocates only if a value was found.
    fn text_in_place(&self, text: &mut String) {
        if let Cow::Owned(masked) = self.replace(text) {
            *text = masked;
        }
    }

    /// `text` with every `§§secret(KEY)` replaced by the value of `KEY`.
    ///
    /// # Errors
    ///
    /// A [repairable](crate::ErrorKind::Repairable) error naming the unknown keys and listing
    /// the known ones (never a value).
    pub fn unmask<'a>(&self, text: &'a str) -> Result<Cow<'a, str>, ToolError> {
        if !text.contains(PLACEHOLDER_START) {
            return Ok(Cow::Borrowed(text));
        }
        let mut out = String::with_capacity(text.len());
        let mut unknown = Vec::new();
        let mut rest = text;
        while let Some(start) = rest.find(PLACEHOLDER_START) {
            out.push_str(&rest[..start]);
            let after = &rest[start + PLACEHOLDER_START.len()..];
            match after.find(')') {
                Some(end) => {
                    let key = &after[..end];
                    match self.get(key) {
                        Some(value) => out.push_str(value),
                        None => {
                            unknown.push(key.to_owned());
                            out.push_str(&rest[start..start + PLACEHOLDER_START.len() + end + 1]);
                        }
                    }
                    rest = &after[end + 1..];
                }
                None => {
                    out.push_str(&rest[start..]);
                    rest = "";
                }
            }
        }
        out.push_str(rest);
        if unknown.is_empty() {
            return Ok(Cow::Owned(out));
        }
        let known: Vec<&str> = self.keys().collect();
        Err(ToolError::repairable(format!(
            "unknown secret {}: the known secret keys are {}; write §§secret(KEY) with one of them",
            unknown
                .iter()
                .map(|k| placeholder(k))
                .collect::<Vec<_>>()
                .join(", "),
            if known.is_empty() {
                "none (no secrets are set: put KEY=VALUE lines in usr/secrets.env)".to_owned()
            } else {
                known.join(", ")
            }
        )))
    }

    /// Replaces placeholders in every string of `value`, at any depth; returns whether anything
    /// changed. Fails like [`unmask`](Self::unmask), leaving `value` unchanged.
    pub fn unmask_value(&self, value: &mut Value) -> Result<bool, ToolError> {
        fn walk(secrets: &Secrets, value: &Value) -> Result<Option<Value>, ToolError> {
            Ok(match value {
                Value::String(s) => match secrets.unmask(s)? {
                    Cow::Owned(new) => Some(Value::String(new)),
                    Cow::Borrowed(_) => None,
                },
                Value::Array(items) => {
                    let mut changed = None;
                    for (i, item) in items.iter().enumerate() {
                        if let Some(new) = walk(secrets, item)? {
                            changed.get_or_insert_with(|| items.clone())[i] = new;
                        }
                    }
                    changed.map(Value::Array)
                }
                Value::Object(map) => {
                    let mut changed = None;
                    for (key, item) in map {
                        if let Some(new) = walk(secrets, item)? {
                            changed
                                .get_or_insert_with(|| map.clone())
                                .insert(key.clone(), new);
                        }
                    }
                    changed.map(Value::Object)
                }
                _ => None,
            })
        }
        match walk(self, value)? {
            Some(new) => {
                *value = new;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// A filter for text that arrives in chunks (a model's streamed reply).
    pub fn stream(&self) -> MaskStream<'_> {
        MaskStream::new(self)
    }
}

/// `§§secret(KEY)`.
pub fn placeholder(key: &str) -> String {
    format!("{PLACEHOLDER_START}{key})")
}

#[cfg(test)]
mod tests;
