//! The arguments of a tool call.

use std::ops::Deref;

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::ToolError;

/// The JSON object the model passed as `tool_args`.
///
/// It dereferences to a [`serde_json::Map`]; the helpers return errors the model can act on.
///
/// ```
/// use plugin_api::Args;
/// use serde::Deserialize;
/// use serde_json::json;
///
/// let args = Args::from_value(json!({"city": "Oslo", "days": 3})).unwrap();
/// assert_eq!(args.str("city"), Some("Oslo"));
/// assert!(args.require_str("country").unwrap_err().message().contains("'country'"));
///
/// #[derive(Deserialize)]
/// struct Forecast { city: String, days: u8 }
/// let f: Forecast = args.parse().unwrap();
/// assert_eq!((f.city.as_str(), f.days), ("Oslo", 3));
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Args(Map<String, Value>);

impl Args {
    /// Wraps a JSON object.
    pub fn new(map: Map<String, Value>) -> Self {
        Self(map)
    }

    /// Wraps a JSON value; `null` is an empty object, anything else but an object is a
    /// validation error.
    pub fn from_value(value: Value) -> Result<Self, ToolError> {
        match value {
            Value::Object(map) => Ok(Self(map)),
            Value::Null => Ok(Self::default()),
            other => Err(ToolError::validation(format!(
                "tool arguments must be a JSON object, got {}",
                kind_of(&other)
            ))),
        }
    }

    /// Parses JSON text (what crosses the library boundary).
    pub fn from_json(text: &str) -> Result<Self, ToolError> {
        if text.is_empty() {
            return Ok(Self::default());
        }
        let value = serde_json::from_str(text).map_err(|e| {
            ToolError::validation(format!("tool arguments are not valid JSON: {e}"))
        })?;
        Self::from_value(value)
    }

    /// A string argument, if present and a string.
    pub fn str(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(Value::as_str)
    }

    /// A string argument, or a repairable error that names it.
    pub fn require_str(&self, key: &str) -> Result<&str, ToolError> {
        match self.0.get(key) {
            Some(Value::String(s)) => Ok(s),
            Some(other) => Err(ToolError::repairable(format!(
                "argument '{key}' must be a string, got {}",
                kind_of(other)
            ))),
            None => Err(ToolError::repairable(format!("missing argument '{key}'"))),
        }
    }

    /// Deserializes all arguments into a typed struct; a mismatch is a validation error.
    pub fn parse<T: DeserializeOwned>(&self) -> Result<T, ToolError> {
        T::deserialize(Value::Object(self.0.clone()))
            .map_err(|e| ToolError::validation(format!("invalid tool arguments: {e}")))
    }

    /// The underlying map.
    pub fn into_map(self) -> Map<String, Value> {
        self.0
    }

    /// As a JSON value.
    pub fn into_value(self) -> Value {
        Value::Object(self.0)
    }
}

impl Deref for Args {
    type Target = Map<String, Value>;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
