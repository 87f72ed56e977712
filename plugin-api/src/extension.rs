//! Extensions: code that runs at a named point of the agent's loop.

use std::cell::OnceCell;
use std::future::Future;

use abi_stable::std_types::RString;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::points::Point;
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
/// # Data
///
/// Each built-in point has a type in [`points`](crate::points) that says when the point runs
/// and what an extension may change there; [`PointData::read`] and [`PointData::write`] use it.
/// A point of your own (fired with [`Context::call_extensions`]) uses the untyped
/// [`value`](PointData::value) / [`set`](PointData::set). Write only when you change
/// something: unchanged data is not sent back, which keeps the point cheap.
///
/// ```
/// use plugin_api::points::ToolExecuteAfter;
/// use plugin_api::{Context, Extension, PointData, ToolError};
///
/// /// Shouts every tool answer.
/// #[derive(Default)]
/// struct Shout;
///
/// impl Extension for Shout {
///     async fn execute(&self, _ctx: &Context, data: &mut PointData) -> Result<(), ToolError> {
///         let mut after: ToolExecuteAfter = data.read()?;
///         let loud = after.response.message.to_uppercase();
///         if loud != after.response.message {
///             after.response.message = loud;
///             data.write(&after)?;
///         }
///         Ok(())
///     }
/// }
/// plugin_api::export_extension!(Shout);
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an extension: it does not implement `plugin_api::Extension`",
    note = "implement `Extension` for `{Self}` (one `async fn execute`), or export a `Tool` with `export_tool!`"
)]
pub trait Extension: Send + Sync + 'static {
    /// Runs at the point, reading and possibly changing its data.
    fn execute(
        &self,
        ctx: &Context,
        data: &mut PointData,
    ) -> impl Future<Output = Result<(), ToolError>> + Send;

    /// Describes the extension. Empty fields are filled from the plugin's `Cargo.toml`
    /// (`description`, `version`).
    fn info(&self) -> ExtensionInfo {
        ExtensionInfo::default()
    }
}

/// The data of an extension point. Parsed only when read, sent back only when changed.
///
/// ```
/// use plugin_api::points::{HistAddBefore, Point};
/// use plugin_api::PointData;
/// use serde_json::json;
///
/// let mut data = PointData::from_value(json!({"role": "user", "content": "hi"}));
/// let mut msg: HistAddBefore = data.read().unwrap();
/// assert!(!data.is_changed());
/// msg.content.push('!');
/// data.write(&msg).unwrap();
/// assert!(data.is_changed());
/// assert_eq!(data.get_str("content"), Some("hi!"));
/// assert_eq!(HistAddBefore::NAME, "hist_add_before");
/// ```
#[derive(Debug)]
pub struct PointData {
    raw: RString,
    parsed: OnceCell<Value>,
    changed: bool,
}

impl PointData {
    /// Data from JSON text (invalid JSON reads as `null`).
    pub(crate) fn from_json(raw: impl Into<RString>) -> Self {
        Self {
            raw: raw.into(),
            parsed: OnceCell::new(),
            changed: false,
        }
    }

    /// Data from a value (to test an extension without a host).
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

    /// Deserializes the data into a type of your own (for a point of your own; a built-in
    /// point's type is read with [`read`](Self::read)).
    pub fn parse<T: DeserializeOwned>(&self) -> Result<T, ToolError> {
        T::deserialize(self.value())
            .map_err(|e| ToolError::internal(format!("unexpected extension point data: {e}")))
    }

    /// The data as the built-in point `P`'s type. Does not mark the data changed.
    ///
    /// Fails with an [`Internal`](crate::ErrorKind::Internal) error naming the point if a field
    /// has the wrong type. Missing fields take their defaults (so data of a newer or older host
    /// still reads), which also means this does not tell one point's data from another's: check
    /// [`Context::extension_point`](crate::Context::extension_point) if your extension may be
    /// installed under several points.
    pub fn read<P: Point>(&self) -> Result<P, ToolError> {
        let read = match self.parsed.get() {
            Some(value) => P::deserialize(value),
            // Straight from the text: no intermediate `Value`.
            None => serde_json::from_str(&self.raw),
        };
        read.map_err(|e| {
            ToolError::internal(format!("unexpected data at the {} point: {e}", P::NAME))
        })
    }

    /// Replaces the data with `data` and marks it changed, so the host receives it. Fields
    /// that `P` does not know (added by a newer host) are kept.
    pub fn write<P: Point>(&mut self, data: &P) -> Result<(), ToolError> {
        let new = serde_json::to_value(data)?;
        let old = self.value_mut();
        match (old, new) {
            (Value::Object(old), Value::Object(new)) => old.extend(new),
            (old, new) => *old = new,
        }
        Ok(())
    }

    /// Whether [`value_mut`](Self::value_mut), [`set`](Self::set) or [`write`](Self::write)
    /// was called.
    pub fn is_changed(&self) -> bool {
        self.changed
    }

    /// The data as JSON text if it was changed.
    pub(crate) fn into_changed_json(self) -> Option<String> {
        if self.changed {
            self.parsed
                .into_inner()
                .and_then(|v| serde_json::to_string(&v).ok())
        } else {
            None
        }
    }
}
