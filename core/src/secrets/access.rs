//! Which secrets a plugin may receive. A plugin in the host's process is your own code in your
//! process: it may receive every secret (and could read `usr/secrets.env` itself). A tool or
//! extension in a worker process receives only the secrets granted to it by name
//! (`secret:KEY`, or declared by the manifest of the package you installed): for any other
//! key, whether it exists or not, the placeholder stays and the error says which grant would
//! fill it, and names no other key.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::Value;

use super::{placeholder, Secrets, PLACEHOLDER_START};
use plugin_api::ToolError;

/// Which secrets a call's plugin may receive.
#[derive(Debug, Clone, Default)]
pub(crate) enum SecretAccess {
    /// Every secret: a plugin in the host's process.
    #[default]
    All,
    /// Only these: a plugin in a worker process.
    Granted(Arc<SecretGrant>),
}

/// The secrets granted to one isolated tool or extension, and how to grant more.
#[derive(Debug)]
pub(crate) struct SecretGrant {
    /// The keys it may receive.
    pub(crate) keys: Vec<String>,
    /// Who, in messages: `tool 'fetch'`, `extension '_20_sign'`.
    pub(crate) holder: String,
    /// Where a grant is written: `[tools.fetch]`, `[sandbox.plugins.web]`.
    pub(crate) table: String,
}

/// A plugin asked for secrets it was not granted.
#[derive(Debug)]
pub(crate) struct Refused {
    /// The keys it was refused, in order, each once.
    pub(crate) keys: Vec<String>,
    /// The repairable error for the call.
    pub(crate) error: ToolError,
}

impl SecretAccess {
    /// Whether every placeholder in `value` names a key this access may receive.
    pub(crate) fn check(&self, value: &Value) -> Result<(), Refused> {
        let SecretAccess::Granted(grant) = self else {
            return Ok(());
        };
        let mut asked = BTreeSet::new();
        placeholder_keys(value, &mut asked);
        let keys: Vec<String> = asked
            .into_iter()
            .filter(|key| !grant.keys.contains(key))
            .collect();
        if keys.is_empty() {
            return Ok(());
        }
        let names: Vec<String> = keys.iter().map(|k| placeholder(k)).collect();
        let grants: Vec<String> = keys.iter().map(|k| format!("\"secret:{k}\"")).collect();
        let error = ToolError::repairable(format!(
            "{} is not granted the secret {}, so {} stays as it is: to give it, add grant = [{}] to {} in usr/toolhost.toml",
            grant.holder,
            keys.join(", "),
            names.join(", "),
            grants.join(", "),
            grant.table,
        ));
        Err(Refused { keys, error })
    }

    /// The keys granted, if this access is limited to some.
    pub(crate) fn granted(&self) -> Option<&[String]> {
        match self {
            SecretAccess::All => None,
            SecretAccess::Granted(grant) => Some(&grant.keys),
        }
    }
}

impl Secrets {
    /// [`unmask_value`](Self::unmask_value) for a plugin with `access`: refused if a
    /// placeholder names a key it may not receive (nothing is filled in then), and an unknown
    /// key's error lists only the keys it may receive.
    pub(crate) fn unmask_value_with(
        &self,
        value: &mut Value,
        access: &SecretAccess,
    ) -> Result<bool, ToolError> {
        match access.granted() {
            None => self.unmask_value(value),
            Some(listed) => self.unmask_value_listing(value, listed),
        }
    }
}

impl Secrets {
    /// `json` with every secret value in it masked, for a plugin that may not see them, and
    /// the keys whose placeholders the masking put there (to put back with
    /// [`restore_in_json`](Self::restore_in_json)).
    pub(crate) fn hide_in_json(&self, json: &str) -> (String, Vec<String>) {
        let masked = self.mask(json).into_inner();
        if masked == json {
            return (masked, Vec::new());
        }
        let (mut before, mut after) = (BTreeSet::new(), BTreeSet::new());
        keys_in(json, &mut before);
        keys_in(&masked, &mut after);
        let keys = after.difference(&before).cloned().collect();
        (masked, keys)
    }

    /// `json` (what a plugin gave back) with the placeholders of `keys` filled in again: only
    /// the values that were there before they were hidden.
    pub(crate) fn restore_in_json(&self, json: &str, keys: &[String]) -> Result<String, ToolError> {
        let mut value: Value = serde_json::from_str(json)
            .map_err(|e| ToolError::internal(format!("an extension left invalid JSON: {e}")))?;
        let pairs: Vec<(String, &str)> = keys
            .iter()
            .filter_map(|k| self.get(k).map(|v| (placeholder(k), v)))
            .collect();
        restore(&mut value, &pairs);
        Ok(value.to_string())
    }
}

/// Puts each `(placeholder, value)` of `pairs` back into the strings and object keys of
/// `value`.
fn restore(value: &mut Value, pairs: &[(String, &str)]) {
    let fill = |text: &str| -> Option<String> {
        let mut out = None::<String>;
        for (placeholder, secret) in pairs {
            let current = out.as_deref().unwrap_or(text);
            if current.contains(placeholder.as_str()) {
                out = Some(current.replace(placeholder.as_str(), secret));
            }
        }
        out
    };
    match value {
        Value::String(s) => {
            if let Some(new) = fill(s) {
                *s = new;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| restore(v, pairs)),
        Value::Object(map) => {
            let old = std::mem::take(map);
            for (key, mut item) in old {
                restore(&mut item, pairs);
                map.insert(fill(&key).unwrap_or(key), item);
            }
        }
        _ => {}
    }
}

/// The keys of the `§§secret(KEY)` placeholders in the strings and object keys of `value`,
/// read as unmasking reads them.
fn placeholder_keys(value: &Value, keys: &mut BTreeSet<String>) {
    match value {
        Value::String(s) => keys_in(s, keys),
        Value::Array(items) => items.iter().for_each(|v| placeholder_keys(v, keys)),
        Value::Object(map) => {
            for (k, v) in map {
                keys_in(k, keys);
                placeholder_keys(v, keys);
            }
        }
        _ => {}
    }
}

fn keys_in(text: &str, keys: &mut BTreeSet<String>) {
    for (i, _) in text.match_indices(PLACEHOLDER_START) {
        let rest = &text[i + PLACEHOLDER_START.len()..];
        if let Some(end) = rest.find(')') {
            keys.insert(rest[..end].to_owned());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn granted(keys: &[&str]) -> SecretAccess {
        SecretAccess::Granted(Arc::new(SecretGrant {
            keys: keys.iter().map(|k| k.to_string()).collect(),
            holder: "tool 'fetch'".to_owned(),
            table: "[tools.fetch]".to_owned(),
        }))
    }

    #[test]
    fn a_granted_key_is_filled_and_any_other_refused_without_naming_the_rest() {
        let secrets = Secrets::parse("API_KEY=sk-12345\nDB_PASSWORD=hunter22\n").unwrap();
        let access = granted(&["API_KEY"]);
        let mut args = serde_json::json!({"a": "§§secret(API_KEY)"});
        access.check(&args).unwrap();
        secrets.unmask_value_with(&mut args, &access).unwrap();
        assert_eq!(args["a"], "sk-12345");

        for key in ["DB_PASSWORD", "NO_SUCH_KEY"] {
            let args = serde_json::json!({"k": [format!("§§secret({key})")]});
            let refused = access.check(&args).unwrap_err();
            assert_eq!(refused.keys, [key]);
            let message = refused.error.message().to_owned();
            assert!(
                message.contains(&format!("grant = [\"secret:{key}\"] to [tools.fetch]")),
                "{message}"
            );
            assert!(!message.contains("API_KEY"), "{message}");
        }
        // An unknown granted key lists only what is granted.
        let access = granted(&["API_KEY", "GONE"]);
        let mut args = serde_json::json!("§§secret(GONE)");
        let error = secrets.unmask_value_with(&mut args, &access).unwrap_err();
        assert!(
            !error.message().contains("DB_PASSWORD"),
            "{}",
            error.message()
        );
        // Hidden from an isolated extension, put back in what it returns.
        let json = r#"{"args":{"auth":"Bearer sk-12345","note":"§§secret(DB_PASSWORD)"}}"#;
        let (hidden, keys) = secrets.hide_in_json(json);
        assert_eq!(keys, ["API_KEY"]);
        assert!(!hidden.contains("sk-12345"), "{hidden}");
        let returned = hidden.replace("note", "comment");
        let restored: Value =
            serde_json::from_str(&secrets.restore_in_json(&returned, &keys).unwrap()).unwrap();
        assert_eq!(restored["args"]["auth"], "Bearer sk-12345");
        assert_eq!(
            restored["args"]["comment"], "§§secret(DB_PASSWORD)",
            "never filled in here"
        );
        // In the host's process, everything.
        let mut args = serde_json::json!("§§secret(DB_PASSWORD)");
        SecretAccess::All.check(&args).unwrap();
        secrets
            .unmask_value_with(&mut args, &SecretAccess::All)
            .unwrap();
        assert_eq!(args, "hunter22");
    }
}
