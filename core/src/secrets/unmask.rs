//! Unmasking: the values put back into a tool's arguments just before it runs.

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::{placeholder, Secrets, PLACEHOLDER_START};
use plugin_api::ToolError;

/// The most unknown keys an error names; past that it says there are more.
const LISTED_UNKNOWN: usize = 10;
/// The most characters of an unknown key an error shows.
const SHOWN_KEY_CHARS: usize = 64;

/// The unknown keys met so far: each once, the first [`LISTED_UNKNOWN`] of them.
#[derive(Debug, Default)]
struct Unknown {
    listed: Vec<String>,
    more: bool,
}

impl Unknown {
    fn add(&mut self, key: &str) {
        let key = match key.char_indices().nth(SHOWN_KEY_CHARS) {
            Some((cut, _)) => format!("{}…", &key[..cut]),
            None => key.to_owned(),
        };
        if self.listed.contains(&key) {
            return;
        }
        if self.listed.len() < LISTED_UNKNOWN {
            self.listed.push(key);
        } else {
            self.more = true;
        }
    }

    /// The repairable error that names the unknown keys and lists the known ones (`shown`:
    /// only these of them).
    fn check(self, secrets: &Secrets, shown: Option<&[String]>) -> Result<(), ToolError> {
        if self.listed.is_empty() {
            return Ok(());
        }
        let known: Vec<&str> = secrets
            .keys()
            .filter(|k| shown.is_none_or(|shown| shown.iter().any(|s| s == k)))
            .collect();
        let names: Vec<String> = self.listed.iter().map(|k| placeholder(k)).collect();
        Err(ToolError::repairable(format!(
            "unknown secret {}{}: the known secret keys are {}; write §§secret(KEY) with one of \
             them",
            names.join(", "),
            if self.more { " and others" } else { "" },
            if known.is_empty() {
                format!(
                    "none (no secrets are set: put KEY=VALUE lines in {})",
                    secrets.origin()
                )
            } else {
                known.join(", ")
            }
        )))
    }
}

impl Secrets {
    /// `text` with every `§§secret(KEY)` replaced by the value of `KEY`.
    ///
    /// # Errors
    ///
    /// A [repairable](crate::ErrorKind::Repairable) error naming each unknown key once (the
    /// first ten) and listing the known ones (never a value). A key this process masks but
    /// gives no tool ([`MaskedInLogs`](crate::MaskedInLogs): a model's API key, an MCP
    /// server's access token) is not unknown: its placeholder stays, as text.
    pub fn unmask<'a>(&self, text: &'a str) -> Result<Cow<'a, str>, ToolError> {
        let mut unknown = Unknown::default();
        let out = self.fill(text, &mut unknown);
        unknown.check(self, None)?;
        Ok(out)
    }

    /// Replaces placeholders in every string and every object key of `value`, at any depth;
    /// returns whether anything changed. Fails like [`unmask`](Self::unmask), naming the
    /// unknown keys of the whole value, and leaves `value` unchanged.
    pub fn unmask_value(&self, value: &mut Value) -> Result<bool, ToolError> {
        self.unmask_value_shown(value, None)
    }

    /// [`unmask_value`](Self::unmask_value) whose error for an unknown key lists only the
    /// known keys among `listed`.
    pub(crate) fn unmask_value_listing(
        &self,
        value: &mut Value,
        listed: &[String],
    ) -> Result<bool, ToolError> {
        self.unmask_value_shown(value, Some(listed))
    }

    fn unmask_value_shown(
        &self,
        value: &mut Value,
        shown: Option<&[String]>,
    ) -> Result<bool, ToolError> {
        let mut unknown = Unknown::default();
        let new = self.fill_value(value, &mut unknown);
        unknown.check(self, shown)?;
        Ok(new.map(|new| *value = new).is_some())
    }

    /// `text` with each known placeholder filled in; unknown ones are left and noted.
    fn fill<'a>(&self, text: &'a str, unknown: &mut Unknown) -> Cow<'a, str> {
        if !text.contains(PLACEHOLDER_START) {
            return Cow::Borrowed(text);
        }
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(start) = rest.find(PLACEHOLDER_START) {
            out.push_str(&rest[..start]);
            let after = &rest[start + PLACEHOLDER_START.len()..];
            let Some(end) = after.find(')') else {
                out.push_str(&rest[start..]);
                rest = "";
                break;
            };
            let key = &after[..end];
            match self.get(key) {
                Some(value) => out.push_str(value),
                // A value the process masks but gives no tool: the placeholder is the text.
                None if super::in_logs::masks_key(key) => {
                    out.push_str(&rest[start..start + PLACEHOLDER_START.len() + end + 1]);
                }
                None => {
                    unknown.add(key);
                    out.push_str(&rest[start..start + PLACEHOLDER_START.len() + end + 1]);
                }
            }
            rest = &after[end + 1..];
        }
        out.push_str(rest);
        Cow::Owned(out)
    }

    /// The filled-in copy of `value`, or `None` if nothing in it changes.
    fn fill_value(&self, value: &Value, unknown: &mut Unknown) -> Option<Value> {
        match value {
            Value::String(s) => match self.fill(s, unknown) {
                Cow::Owned(new) => Some(Value::String(new)),
                Cow::Borrowed(_) => None,
            },
            Value::Array(items) => {
                let mut changed = None;
                for (i, item) in items.iter().enumerate() {
                    if let Some(new) = self.fill_value(item, unknown) {
                        changed.get_or_insert_with(|| items.clone())[i] = new;
                    }
                }
                changed.map(Value::Array)
            }
            Value::Object(map) => self.fill_map(map, unknown).map(Value::Object),
            _ => None,
        }
    }

    /// Keys and values both.
    fn fill_map(
        &self,
        map: &Map<String, Value>,
        unknown: &mut Unknown,
    ) -> Option<Map<String, Value>> {
        let mut changed = false;
        let entries: Vec<(Cow<'_, str>, Option<Value>)> = map
            .iter()
            .map(|(key, item)| {
                let key = self.fill(key, unknown);
                let item = self.fill_value(item, unknown);
                changed |= matches!(key, Cow::Owned(_)) || item.is_some();
                (key, item)
            })
            .collect();
        changed.then(|| {
            entries
                .into_iter()
                .zip(map.values())
                .map(|((key, new), old)| (key.into_owned(), new.unwrap_or_else(|| old.clone())))
                .collect()
        })
    }
}
