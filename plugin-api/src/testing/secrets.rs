//! The test kit's secrets: `§§secret(KEY)` placeholders filled in, and values replaced by them.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::ToolError;

/// What starts a placeholder: `§§secret(KEY)`.
const START: &str = "§§secret(";
/// Values shorter than this are filled in but never masked (as the host does).
const MIN_MASKED_CHARS: usize = 4;

/// Secrets by key, sorted.
#[derive(Debug, Default, Clone)]
pub(super) struct TestSecrets {
    values: BTreeMap<String, String>,
}

impl TestSecrets {
    pub(super) fn insert(&mut self, key: String, value: String) {
        self.values.insert(key, value);
    }

    /// Fills the placeholders of every string and object key of `value`, at any depth. An
    /// unknown key is a repairable error worded as the host's, and `value` is left unchanged.
    pub(super) fn unmask_value(&self, value: &mut Value) -> Result<(), ToolError> {
        let mut unknown = Vec::new();
        let filled = self.fill_value(value, &mut unknown);
        if unknown.is_empty() {
            *value = filled;
            return Ok(());
        }
        let known: Vec<&str> = self.values.keys().map(String::as_str).collect();
        let names: Vec<String> = unknown.iter().map(|k| format!("{START}{k})")).collect();
        Err(ToolError::repairable(format!(
            "unknown secret {}: the known secret keys are {}; write §§secret(KEY) with one of \
             them",
            names.join(", "),
            if known.is_empty() {
                "none (no secrets are set: put KEY=VALUE lines in usr/secrets.env)".to_owned()
            } else {
                known.join(", ")
            }
        )))
    }

    fn fill_value(&self, value: &Value, unknown: &mut Vec<String>) -> Value {
        match value {
            Value::String(s) => Value::String(self.fill(s, unknown)),
            Value::Array(items) => Value::Array(
                items
                    .iter()
                    .map(|item| self.fill_value(item, unknown))
                    .collect(),
            ),
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| (self.fill(k, unknown), self.fill_value(v, unknown)))
                    .collect::<Map<_, _>>(),
            ),
            other => other.clone(),
        }
    }

    /// `text` with each known placeholder filled in; unknown keys are noted once each.
    fn fill(&self, text: &str, unknown: &mut Vec<String>) -> String {
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(start) = rest.find(START) {
            out.push_str(&rest[..start]);
            let after = &rest[start + START.len()..];
            let Some(end) = after.find(')') else {
                break;
            };
            let key = &after[..end];
            match self.values.get(key) {
                Some(value) => out.push_str(value),
                None => {
                    if !unknown.iter().any(|k| k == key) {
                        unknown.push(key.to_owned());
                    }
                    out.push_str(&rest[start..start + START.len() + end + 1]);
                }
            }
            rest = &after[end + 1..];
        }
        out.push_str(rest);
        out
    }

    /// `text` with each value of 4 characters or more replaced by its placeholder, longest
    /// value first (plain text only: the host also masks the values' encodings).
    pub(super) fn mask(&self, text: &str) -> String {
        let mut values: Vec<(&String, &String)> = self
            .values
            .iter()
            .filter(|(_, v)| v.chars().count() >= MIN_MASKED_CHARS)
            .collect();
        values.sort_by_key(|(_, v)| std::cmp::Reverse(v.len()));
        values
            .into_iter()
            .fold(text.to_owned(), |text, (key, value)| {
                text.replace(value.as_str(), &format!("{START}{key})"))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn secrets() -> TestSecrets {
        let mut s = TestSecrets::default();
        s.insert("TOKEN".into(), "tok-123456".into());
        s.insert("TOK".into(), "tok".into());
        s
    }

    #[test]
    fn fills_strings_and_keys_at_any_depth() {
        let mut v = json!({"a": ["x §§secret(TOKEN) y"], "§§secret(TOK)": {"b": "§§secret(TOK)"}});
        secrets().unmask_value(&mut v).unwrap();
        assert_eq!(v, json!({"a": ["x tok-123456 y"], "tok": {"b": "tok"}}));
    }

    #[test]
    fn unknown_keys_are_one_repairable_error_and_change_nothing() {
        let mut v = json!({"a": "§§secret(NOPE) §§secret(NOPE) §§secret(TOKEN)"});
        let before = v.clone();
        let e = secrets().unmask_value(&mut v).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Repairable);
        assert_eq!(e.message().matches("NOPE").count(), 1, "{}", e.message());
        assert!(e.message().contains("TOK, TOKEN"), "{}", e.message());
        assert!(!e.message().contains("tok-123456"));
        assert_eq!(v, before);
    }

    #[test]
    fn masks_long_values_longest_first_and_leaves_short_ones() {
        let masked = secrets().mask("tok-123456 and tok");
        assert_eq!(masked, "§§secret(TOKEN) and tok");
    }
}
