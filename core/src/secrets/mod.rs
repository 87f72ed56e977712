//! Secrets: the model only ever sees `§§secret(KEY)` placeholders; tools get the values.
//!
//! The values live in `usr/secrets.env` (`KEY=VALUE` lines). [`Secrets::mask`] replaces every
//! value of 4 characters or more, and each of its common encodings (upper and lower case, JSON
//! escapes, URL encoding, base64, hex, HTML entities: see `variants.rs`), with its placeholder,
//! in one pass over the text (an Aho-Corasick DFA over the first bytes of each form, and a
//! table that confirms a form where one may start: `matcher.rs`). Where values overlap, the whole
//! stretch is replaced: a value inside a longer one is part of it, and two that overlap become
//! both placeholders, so no part of either shows. [`Secrets::unmask_value`] puts the values back
//! into a tool's arguments, in strings and object keys at any depth. [`MaskStream`] masks text
//! that arrives in chunks, holding back only what could be the start of a value.
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

use serde_json::{Map, Value};

use plugin_api::ToolError;

mod access;
mod cover;
mod decoded;
mod in_logs;
mod masked;
mod matcher;
mod store;
mod stream;
mod unmask;
mod variants;

pub(crate) use access::{SecretAccess, SecretGrant};
#[cfg(feature = "mcp")]
pub(crate) use in_logs::mask_value_in_logs;
pub use in_logs::{mask_log_line, MaskedInLogs};
pub use masked::{Masked, MaskedError};
pub(crate) use store::SecretStore;
pub use stream::MaskStream;

/// The text before a key in a placeholder.
pub const PLACEHOLDER_START: &str = "§§secret(";

/// Values shorter than this are not masked (they would match ordinary text), though they are
/// still filled into arguments; loading such a value logs a warning.
pub const MIN_MASKED_LEN: usize = 4;

/// A set of secrets, ready to mask and unmask. Its `Debug` shows the keys, never the values.
#[derive(Clone, Default)]
pub struct Secrets {
    /// `(key, value)`, sorted by key.
    pairs: Vec<(String, String)>,
    /// Over the values of `MIN_MASKED_LEN` or more and their encodings.
    matcher: Option<matcher::Matcher>,
    /// The placeholder of each key, in the order of `pairs`.
    placeholders: Vec<String>,
    /// The file they were read from, for messages (`None`: `usr/secrets.env`).
    origin: Option<String>,
}

/// Why a secrets file cannot be read: the [kind](crate::layout::ReadErrorKind) of the read's
/// failure (a FIFO, a device, a folder or a dangling link, a file over the cap, an I/O error)
/// and one line naming the file and what is wrong with it. A missing file is not an error (no
/// secrets), nor is a line that is not `KEY=VALUE` (skipped with a warning: [`SecretsError`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SecretsFileError {
    /// Why the file was not read.
    pub kind: crate::layout::ReadErrorKind,
    /// One line: `cannot read FILE: ...`, saying what the path is instead of a file of
    /// `KEY=VALUE` lines within the cap.
    pub message: String,
}

/// A line of `secrets.env` that is not `KEY=VALUE`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "line {line} of the secrets file is not KEY=VALUE (keys use letters, digits and '_'): fix or remove it"
)]
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
    /// quoted). A missing file means no secrets. The file must be a regular file of at most
    /// [`DEFAULT_MAX_TEXT_BYTES`](crate::layout::DEFAULT_MAX_TEXT_BYTES) (see [`load_capped`](Self::load_capped)).
    /// A line that is not `KEY=VALUE` is skipped with a warning naming the file and the line
    /// (never its text, which may hold a value); the other lines stay in force.
    pub fn load(path: &Path) -> Result<Self, SecretsFileError> {
        Self::load_capped(path, crate::layout::DEFAULT_MAX_TEXT_BYTES)
    }

    /// [`load`](Self::load) with a size cap of `max_bytes`: a FIFO, a device, a folder, a
    /// dangling link or a larger file is an error that names the file, and is never waited
    /// on or read whole.
    pub fn load_capped(path: &Path, max_bytes: u64) -> Result<Self, SecretsFileError> {
        let name = crate::layout::Escaped(path);
        match crate::layout::read_text(path, max_bytes, "HostOptions::max_text_bytes") {
            Ok(text) => {
                let (secrets, skipped) = Self::parse_lines(&text);
                for error in skipped {
                    let at = crate::layout::Location::new(path, Some(error.line));
                    tracing::warn!(
                        "{at} is not KEY=VALUE (keys use letters, digits and '_'): \
                         skipped, the other lines are in force; fix or remove it"
                    );
                }
                Ok(secrets)
            }
            Err(e) if e.kind == crate::layout::ReadErrorKind::Missing => Ok(Self::empty()),
            Err(e) => Err(SecretsFileError {
                kind: e.kind(),
                message: format!("cannot read {name}: {e}"),
            }),
        }
    }

    /// Parses the `KEY=VALUE` text of a secrets file; the first line that is not one is the
    /// error (a file is read with [`parse_lines`](Self::parse_lines), which skips it).
    pub fn parse(text: &str) -> Result<Self, SecretsError> {
        let (secrets, skipped) = Self::parse_lines(text);
        match skipped.into_iter().next() {
            Some(error) => Err(error),
            None => Ok(secrets),
        }
    }

    /// Parses the `KEY=VALUE` text of a secrets file: the secrets of its good lines, and each
    /// line that is not one (skipped, so one mistake does not drop every secret).
    pub fn parse_lines(text: &str) -> (Self, Vec<SecretsError>) {
        let mut pairs = Vec::new();
        let mut skipped = Vec::new();
        for (i, line) in text.lines().enumerate() {
            match pair(line) {
                Ok(Some(pair)) => pairs.push(pair),
                Ok(None) => {}
                Err(()) => skipped.push(SecretsError { line: i + 1 }),
            }
        }
        (Self::from_pairs(pairs), skipped)
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
        let matcher = matcher::Matcher::build(
            pairs
                .iter()
                .enumerate()
                .filter(|(_, (_, v))| v.chars().count() >= MIN_MASKED_LEN)
                .map(|(i, (_, v))| (i, v.as_str())),
        );
        let placeholders = pairs.iter().map(|(k, _)| placeholder(k)).collect();
        Self {
            matcher,
            placeholders,
            pairs,
            origin: None,
        }
    }

    /// Says which file these secrets came from (messages about a missing key name it).
    pub fn from_file(mut self, path: &Path) -> Self {
        self.origin = Some(crate::layout::Escaped(path).to_string());
        self
    }

    /// The file these secrets came from, for messages: the one given to
    /// [`from_file`](Self::from_file), else `usr/secrets.env`.
    pub fn origin(&self) -> &str {
        self.origin.as_deref().unwrap_or("usr/secrets.env")
    }

    /// How many forms of the values are masked (each value and its encodings), and the heap
    /// memory in bytes of the automaton that finds them.
    pub fn matcher_size(&self) -> (usize, usize) {
        self.matcher
            .as_ref()
            .map_or((0, 0), |m| (m.patterns(), m.memory()))
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

    /// Each of `items` with each of its text fields masked (a model's native tool calls).
    pub fn mask_each<T: TextFields>(&self, mut items: Vec<T>) -> Masked<Vec<T>> {
        for item in &mut items {
            item.for_each_text(&mut |field| self.text_in_place(field));
        }
        Masked::new(items)
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
        let mut out: Option<String> = None;
        let (mut at, mut last_key) = (0, usize::MAX);
        matcher.pieces(text, |piece| {
            let out = out.get_or_insert_with(|| String::with_capacity(text.len()));
            out.push_str(&text[at..piece.start]);
            // Overlapping forms of one value give one placeholder.
            if !(piece.joined && piece.key == last_key) {
                out.push_str(&self.placeholders[piece.key]);
            }
            (at, last_key) = (piece.end, piece.key);
        });
        match out {
            Some(mut out) => {
                out.push_str(&text[at..]);
                Cow::Owned(out)
            }
            None => Cow::Borrowed(text),
        }
    }

    pub(crate) fn value_in_place(&self, value: &mut Value) {
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

    /// A filter for text that arrives in chunks (a model's streamed reply).
    pub fn stream(&self) -> MaskStream<'_> {
        MaskStream::new(self)
    }
}

/// The `(key, value)` of one line of a secrets file; `None` for a blank line or a comment.
fn pair(line: &str) -> Result<Option<(String, String)>, ()> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return Ok(None);
    }
    let line = line.strip_prefix("export ").unwrap_or(line);
    let (key, value) = line.split_once('=').ok_or(())?;
    let key = key.trim();
    if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(());
    }
    let value = value.trim();
    let value = ['"', '\'']
        .iter()
        .find_map(|q| value.strip_prefix(*q)?.strip_suffix(*q))
        .unwrap_or(value);
    Ok(Some((key.to_owned(), value.to_owned())))
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secrets")
            .field("keys", &self.keys().collect::<Vec<_>>())
            .field("origin", &self.origin())
            .finish_non_exhaustive()
    }
}

/// `§§secret(KEY)`.
pub fn placeholder(key: &str) -> String {
    format!("{PLACEHOLDER_START}{key})")
}

/// A value whose text fields are masked one by one ([`Secrets::mask_each`]), such as a
/// model's native [`ToolCall`](crate::ToolCall).
pub trait TextFields {
    /// Calls `f` with each text field.
    fn for_each_text(&mut self, f: &mut dyn FnMut(&mut String));
}

#[cfg(test)]
mod tests;
