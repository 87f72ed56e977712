//! Test a tool like any Rust code: a [`Context`] with no host behind it (feature `testing`).
//!
//! [`TestContext`] plays the host's part of the contract inside the test process. It records
//! what the plugin does through its [`Context`] (progress, log content, loop data, history,
//! extension calls), lets the test trigger an intervention or a cancellation, fills in and
//! masks secrets, and calls a [`Tool`] through the same JSON conversions the export glue uses,
//! so the test sees the [`Response`] or [`ToolError`] the host would get.
//!
//! `Cargo.toml` of a plugin crate:
//!
//! ```toml
//! [dev-dependencies]
//! plugin-api = { path = "../plugin-api", features = ["testing"] }
//! tokio = { version = "1", features = ["macros", "rt"] }
//! ```
//!
//! A unit test:
//!
//! ```
//! use plugin_api::serde_json::json;
//! use plugin_api::testing::TestContext;
//! use plugin_api::{Args, Context, ErrorKind, Response, Tool, ToolError};
//!
//! #[derive(Default)]
//! struct Hello;
//!
//! impl Tool for Hello {
//!     async fn execute(&self, ctx: &Context, args: Args) -> Result<Response, ToolError> {
//!         let name = args.require_str("name")?;
//!         ctx.set_progress(format!("greeting {name}")).await;
//!         Ok(Response::text(format!("Hello, {name}!")))
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! // in a #[tokio::test] async fn:
//! let ctx = TestContext::new().with_secret("GUEST", "Ada Lovelace");
//! let answer = ctx.call(&Hello, json!({"name": "§§secret(GUEST)"})).await.unwrap();
//! assert_eq!(answer.message, "Hello, §§secret(GUEST)!"); // masked again, as the model sees it
//! assert_eq!(ctx.progress_updates(), ["greeting Ada Lovelace"]); // the tool saw the value
//!
//! let error = TestContext::new().call(&Hello, json!({})).await.unwrap_err();
//! assert_eq!(error.kind(), ErrorKind::Repairable);
//! # }
//! ```
//!
//! # What differs from the host
//!
//! [`TestContext::call`] runs `execute` only: no `before_execution` / `after_execution` hooks,
//! no extensions, no JSON Schema validation, no approval, no deadline or retries. Secrets are
//! filled into the arguments and masked out of the answer as the core's `_10_unmask_secrets` and
//! `_10_mask_secrets` extensions do, but masking replaces the plain values only: the host also
//! masks their encodings (JSON escapes, URL, base64, hex, HTML, case). What the test reads back
//! ([`progress`](TestContext::progress), [`history`](TestContext::history), ...) is what the
//! tool sent, before the host would mask it. A test of the whole lifecycle loads the built
//! library through the real host (the `toolhost-testkit` crate).
//!
//! Enabling this feature adds this module and nothing else: the types that cross the library
//! boundary, and the export glue, are the same with and without it.

mod host;
mod secrets;

use std::fmt;
use std::sync::Arc;

use serde_json::Value;

use plugin_abi::guard::{Guarded, InPlace};

use crate::glue::execute_json;
use crate::{Context, Response, Role, Tool, ToolError};
use host::{lock, State};

/// A message the plugin added to the agent's history ([`Context::add_history`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryEntry {
    /// Who the plugin said wrote it.
    pub role: Role,
    /// The message.
    pub content: String,
}

/// One [`Context::call_extensions`] the plugin made.
#[derive(Debug, Clone, PartialEq)]
pub struct ExtensionCall {
    /// The extension point.
    pub point: String,
    /// The data the plugin passed.
    pub data: Value,
}

/// A host for one test: build it, call a tool with it, read back what the tool did.
///
/// It is cheap to clone (clones share everything), so a test can hand a clone to a spawned
/// call and [`cancel`](Self::cancel) or [`intervene`](Self::intervene) while it runs. The
/// agent is `A0` with profile `default`, the tool is `tool` with no method and log id 1, and
/// there are no secrets, until the `with_*` methods say otherwise.
///
/// ```
/// use plugin_api::serde_json::json;
/// use plugin_api::testing::TestContext;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let ctx = TestContext::new().with_tool_name("search").with_method("deep");
/// let plugin_side = ctx.context(); // what `execute` gets
/// assert_eq!(plugin_side.method().as_deref(), Some("deep"));
/// plugin_side.set_loop_data("seen", json!(3)).unwrap();
/// ctx.intervene("the user stopped the agent");
/// assert!(plugin_side.check_intervention().await.is_err());
/// assert_eq!(ctx.loop_data("seen"), Some(json!(3)));
/// # }
/// ```
#[derive(Clone)]
pub struct TestContext {
    state: Arc<State>,
}

impl Default for TestContext {
    fn default() -> Self {
        Self::new()
    }
}

impl TestContext {
    /// A context with the defaults above.
    pub fn new() -> Self {
        Self {
            state: Arc::new(State::new()),
        }
    }

    /// Sets the agent's name ([`Context::agent_name`]).
    pub fn with_agent_name(self, name: impl Into<String>) -> Self {
        lock(&self.state.identity).agent_name = name.into();
        self
    }

    /// Sets the profile ([`Context::profile`]).
    pub fn with_profile(self, profile: impl Into<String>) -> Self {
        lock(&self.state.identity).profile = profile.into();
        self
    }

    /// Sets the tool's name as the model called it ([`Context::tool_name`]).
    pub fn with_tool_name(self, name: impl Into<String>) -> Self {
        lock(&self.state.identity).tool_name = name.into();
        self
    }

    /// Sets the method of a `name:method` call ([`Context::method`]).
    pub fn with_method(self, method: impl Into<String>) -> Self {
        lock(&self.state.identity).method = Some(method.into());
        self
    }

    /// Sets the id of the call's log item ([`Context::log_id`]).
    pub fn with_log_id(self, id: u64) -> Self {
        lock(&self.state.identity).log_id = id;
        self
    }

    /// Adds a secret: `§§secret(KEY)` in the arguments becomes `value`, and `value` (4
    /// characters or more) in the answer becomes `§§secret(KEY)`.
    pub fn with_secret(self, key: impl Into<String>, value: impl Into<String>) -> Self {
        lock(&self.state.secrets).insert(key.into(), value.into());
        self
    }

    /// Sets a loop-data value before the call ([`Context::loop_data`]); not recorded as a
    /// write.
    pub fn with_loop_data(self, key: impl Into<String>, value: Value) -> Self {
        self.state.recorded().loop_data.insert(key.into(), value);
        self
    }

    /// Scripts what [`Context::call_extensions`] returns for `point`: `handler` gets the data
    /// the plugin passed and returns the data (or the error) the extensions would leave. A
    /// point without a handler returns the data unchanged, as a point with no extensions does.
    ///
    /// ```
    /// use plugin_api::serde_json::json;
    /// use plugin_api::testing::TestContext;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let ctx = TestContext::new().with_extensions("enrich", |mut data| {
    ///     data["checked"] = json!(true);
    ///     Ok(data)
    /// });
    /// let out = ctx.context().call_extensions("enrich", json!({"n": 1})).await.unwrap();
    /// assert_eq!(out, json!({"n": 1, "checked": true}));
    /// assert_eq!(ctx.extension_calls()[0].point, "enrich");
    /// # }
    /// ```
    pub fn with_extensions(
        self,
        point: impl Into<String>,
        handler: impl Fn(Value) -> Result<Value, ToolError> + Send + Sync + 'static,
    ) -> Self {
        let handler: host::ExtensionHandler = Arc::new(handler);
        self.state.recorded().handlers.insert(point.into(), handler);
        self
    }

    /// From now on [`Context::check_intervention`] fails with an
    /// [`Intervention`](crate::ErrorKind::Intervention) error carrying `message`, as when the
    /// user stops or interrupts the agent.
    pub fn intervene(&self, message: impl Into<String>) {
        self.state.recorded().intervention = Some(message.into());
    }

    /// Cancels the call: [`Context::is_cancelled`] is true and [`Context::cancelled`]
    /// completes, as at the host's deadline.
    pub fn cancel(&self) {
        self.state.cancel.send_replace(true);
    }

    /// A [`Context`] backed by this test host, for code that takes one directly (a helper of
    /// the tool, an extension's logic).
    pub fn context(&self) -> Context {
        Context::from_ffi(self.state.to_ffi())
    }

    /// Calls `tool` with `args` as the host's call would reach it: secrets filled into the
    /// arguments, the arguments sent as JSON text and read back by the export glue, `execute`
    /// run, a panic turned into an [`Internal`](crate::ErrorKind::Internal) error with its
    /// message and location, and secrets masked out of the answer's message and the error's.
    ///
    /// Arguments that are not a JSON object (or `null`) are a validation error, as in a
    /// library.
    pub async fn call<T: Tool>(&self, tool: &T, mut args: Value) -> Result<Response, ToolError> {
        let secrets = lock(&self.state.secrets).clone();
        let mask_error = |e: ToolError| ToolError::new(e.kind(), secrets.mask(e.message()));
        secrets.unmask_value(&mut args).map_err(mask_error)?;
        let ctx = self.context();
        let json = args.to_string();
        // In the test's own runtime: the tool runs as plain Rust, with the export glue's guard.
        let answer = Guarded::<_, InPlace>::new(execute_json(tool, &ctx, &json)).await;
        let mut response = Response::from(answer.map_err(mask_error)?);
        response.message = secrets.mask(&response.message);
        Ok(response)
    }

    /// The progress text now: the last [`set_progress`](Context::set_progress) with every
    /// [`add_progress`](Context::add_progress) since appended.
    pub fn progress(&self) -> String {
        self.state.recorded().progress.clone()
    }

    /// Each text passed to [`set_progress`](Context::set_progress), in order.
    pub fn progress_updates(&self) -> Vec<String> {
        self.state.recorded().progress_updates.clone()
    }

    /// The log item's content, if the plugin set it ([`Context::log_content`]).
    pub fn log_content(&self) -> Option<String> {
        self.state.recorded().log_content.clone()
    }

    /// A loop-data value now (set by the test or the plugin).
    pub fn loop_data(&self, key: &str) -> Option<Value> {
        self.state.recorded().loop_data.get(key).cloned()
    }

    /// Each [`set_loop_data`](Context::set_loop_data) the plugin made, in order.
    pub fn loop_data_writes(&self) -> Vec<(String, Value)> {
        self.state.recorded().loop_data_writes.clone()
    }

    /// The messages the plugin added to the history, in order (and the answer, when a hook
    /// called [`default_after_execution`](Context::default_after_execution)).
    pub fn history(&self) -> Vec<HistoryEntry> {
        self.state.recorded().history.clone()
    }

    /// Each [`call_extensions`](Context::call_extensions) the plugin made, in order.
    pub fn extension_calls(&self) -> Vec<ExtensionCall> {
        self.state.recorded().extension_calls.clone()
    }
}

impl fmt::Debug for TestContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TestContext")
            .field("tool", &lock(&self.state.identity).tool_name)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests;
