//! Extensions: code that runs at a named point of the agent's loop.

use std::cell::OnceCell;
use std::future::Future;

use abi_stable::std_types::RString;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::{Context, ExtensionInfo, ToolError};

/// Code that runs at one extension point, with that point's data: one required method.
///
/// # Lifecycle
///
/// An extension library lives in `extensions/<point>/<file>.so` in any layer. For each point the
/// host collects the files of every layer, keeps the first occurrence of each file name (so a
/// profile or the user replaces a built-in extension by dropping a file of the same name) and
/// runs them one after another **sorted by file name**: `_10_x` before `_50_y`. Each gets the
/// data left by the one before. The host creates one instance per loaded library.
///
/// An `Err` or a panic stops the point and fails the call it belongs to with that error.
///
/// # Data of the built-in points
///
/// | point | data |
/// |---|---|
/// | `tool_execute_before` | `{"tool_name": str, "args": object}`: change `args` to change the call |
/// | `tool_execute_after` | `{"tool_name": str, "response": {"message": str, "break_loop": bool, "additional": object \| null}}`: change `message`; `break_loop` is restored |
/// | `tool_output_update` | `{"tool_name": str, "progress": str}` |
///
/// ```
/// use plugin_api::{Context, Extension, PointData, ToolError};
///
/// /// Shouts every tool answer.
/// #[derive(Default)]
/// struct Shout;
///
/// impl Extension for Shout {
///     async fn execute(&self, _ctx: &Context, data: &mut PointData) -> Result<(), ToolError> {
///         if let Some(msg) = data.value_mut().pointer_mut("/response/message") {
///             *msg = msg.as_str().unwrap_or_default().to_uppercase().into();
///         }
///         Ok(())
///     }
/// }
/// plugin_api::export_extension!(Shout);
/// ```
pub trait Extension: Send + Sync + 'static {
    /// Runs at the point, reading and possibly changing its data.
    fn execute(
        &self,
        ctx: &Context,
        data: &mut PointData,
    ) -> impl Future<Output = Result<(), ToolError>> + Send;

    /// Describes the extension. Empty fields are filled from the plugin's `Cargo.toml`.
    fn info(&self) -> ExtensionInfo {
        ExtensionInfo::default()
    }
}

/// The data of an extension point. Parsed only when read, sent back only when changed.
#[derive(Debug)]
pub struct PointData {
    raw: RString,
    parsed: OnceCell<Value>,
    changed: bool,
}

impl PointData {
    /// Data from JSON text (invalid JSON reads as `null`).
    pub fn from_json(raw: impl Into<RString>) -> Self {
        Self {
            raw: raw.into(),
            parsed: OnceCell::new(),
            changed: false,
        }
    }

    /// Data from a value.
    pub fn from_value(value: Value) -> Self {
        Self {
            raw: RString::new(),
            parsed: OnceCell::from(value),
            changed: false,
        }
    }

    /// The data.
    pub fn value(&self) -> &Value {
        self.parsed
            .get_or_init(|| serde_json::from_str(&self.raw).unwrap_or(Value::Null))
    }

    /// The data, for changing; marks it changed.
    pub fn value_mut(&mut self) -> &mut Value {
        self.value();
        self.changed = true;
        self.parsed.get_mut().expect("initialised by value()")
    }

    /// One top-level field.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.value().get(key)
    }

    /// One top-level string field.
    pub fn get_str(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(Value::as_str)
    }

    /// Sets one top-level field (the data becomes an object if it was not one).
    pub fn set(&mut self, key: &str, value: impl Serialize) -> Result<(), ToolError> {
        let value = serde_json::to_value(value)?;
        let data = self.value_mut();
        if !data.is_object() {
            *data = Value::Object(Default::default());
        }
        data.as_object_mut()
            .expect("just made an object")
            .insert(key.to_owned(), value);
        Ok(())
    }

    /// Deserializes the data into a typed struct.
    pub fn parse<T: DeserializeOwned>(&self) -> Result<T, ToolError> {
        T::deserialize(self.value())
            .map_err(|e| ToolError::internal(format!("unexpected extension point data: {e}")))
    }

    /// Whether [`value_mut`](Self::value_mut) or [`set`](Self::set) was called.
    pub fn is_changed(&self) -> bool {
        self.changed
    }

    /// The data as JSON text if it was changed.
    pub fn into_changed_json(self) -> Option<String> {
        if self.changed {
            self.parsed
                .into_inner()
                .and_then(|v| serde_json::to_string(&v).ok())
        } else {
            None
        }
    }
}
