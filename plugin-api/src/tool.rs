//! The tool trait and its optional hooks.

use std::future::Future;

use serde::de::DeserializeOwned;

use crate::{Args, Context, Readiness, Response, ToolError, ToolInfo};

/// A tool the model can call: one required method, [`execute`](Tool::execute).
///
/// # Lifecycle
///
/// This is the one description of a call's lifecycle; the host's code (`Agent::call_tool`)
/// follows it step by step, and other documentation links here.
///
/// The host creates one instance when it loads the library and keeps it while the library is
/// in use; calls may run concurrently, so state shared between calls needs synchronisation.
/// For each call of `name` or `name:method` with a JSON object of arguments, in order:
///
/// 1. **Resolve.** A name that is not a valid tool name, or arguments that are not a JSON
///    object (`null` counts as `{}`), are refused with a
///    [`Repairable`](crate::ErrorKind::Repairable) error. A name with `.` (or `__`) is looked
///    for among the tools of the profile's MCP servers first; then along the profile's layers:
///    the first loadable `tools/<name>` library, else the built-in `parallel`, else (if a
///    library of that name was skipped) a `dependency` error saying why, else a library named
///    `unknown`, else the built-in Unknown tool, whose answer lists the tools there are. The
///    tool becomes the agent's current tool.
/// 2. **Intervention check**: waits while the agent is paused; a stop or an interruption ends
///    the call here. Then the call's log item (`Using tool 'name:method'`, with the
///    arguments) is created.
/// 3. **Admission**, before any code of the tool runs: the call is refused at once if the
///    profile's config does not allow the tool (`repairable`), or if its circuit breaker is
///    open.
/// 4. **`before_execution`** ([`ToolHooks`], or the host's default: prints the call and its
///    arguments); **intervention check**.
/// 5. The **`tool_execute_before`** extensions, which may rewrite the arguments (the core's
///    `_10_unmask_secrets` fills in `§§secret(KEY)` placeholders here).
/// 6. **Validation** of the arguments against [`ToolInfo::parameters`] (schema defaults filled
///    in; every failure listed in one `validation` error), then **readiness**: a tool that is
///    not [ready](Tool::readiness) is refused (`dependency`, with its reason; after
///    validation, so bad arguments are told as such), then **approval** by the policy for the
///    tool's [`RiskLevel`](crate::RiskLevel) (allow, ask the user, or deny).
/// 7. **`execute`**, under the tool's deadline ([`ToolInfo::timeout_seconds`], overridable in
///    the config): at the deadline the call ends with a `timeout` error and
///    [`Context::cancelled`] completes, even if `execute` never awaits. Infrastructure failures
///    (`timeout`, `dependency`, `internal`) are retried up to [`ToolInfo::max_retries`] times
///    with backoff, for `read` tools or tools with the capability `idempotent`, unless the
///    attempt opened the circuit breaker. The call is audited however this step ends.
/// 8. **Intervention check**: a pause or a stop still ends the call; from here an interruption
///    waits for the agent loop's next checkpoint, so a finished result is never thrown away.
///    An answer longer than the host's output limit is cut (the whole of it is kept in the
///    session), and its `metadata` goes to the log item, never to the model. A tool that
///    declares an output schema ([`ToolInfo::output_schema`]) fails here, with an `internal`
///    error, if its [structured content](crate::Response::structured_content) is missing or
///    does not match it.
/// 9. The **`tool_execute_after`** extensions, which may rewrite the message and `additional`
///    but not `break_loop` (the core's `_10_mask_secrets` masks secret values here).
/// 10. **`after_execution`** ([`ToolHooks`], or the host's default: the result joins the
///     history, the message followed by each [content block](crate::Content) as
///     [`Content::describe`](crate::Content::describe) gives it, and the log item is completed); **intervention check** (pause or stop). If
///     `break_loop` is set the agent's loop ends with the message.
/// 11. Finally, however the call ended, the agent's current tool is cleared.
///
/// A call made by the built-in `parallel` tool goes through the same steps, except that its
/// result goes into `parallel`'s combined answer instead of the history, and it leaves the
/// current tool alone.
///
/// An `Err` or a panic at any step ends the call with that error (the log item says so); a
/// panic keeps its message and becomes an [`Internal`](crate::ErrorKind::Internal) error. The
/// host lives on either way. If the user interrupts the call before `execute` returned, the
/// tool's progress so far becomes its result in the history.
///
/// # Reloads and shutdown
///
/// When the library file is rebuilt, a watching host loads the new build next to this one:
/// new calls go to the new instance, and calls already running finish on this one. When the
/// last of them ends, the host drops this instance (implement `Drop` to release what it holds)
/// and then calls the library's shutdown hook, which stops this plugin's tokio runtime and drops
/// the tasks still spawned on it. The library's code stays mapped, but nothing of it runs again.
///
/// # Async and tokio
///
/// `execute` runs on the host's executor, inside this plugin's own tokio runtime context, so
/// `tokio::time::sleep`, timers and tokio I/O work as usual (a plugin has its own copy of tokio;
/// without this it would panic with "there is no reactor running").
///
/// ```
/// use plugin_api::{Args, Context, Response, Tool, ToolError, ToolInfo};
///
/// #[derive(Default)]
/// struct Wait;
///
/// impl Tool for Wait {
///     fn info(&self) -> ToolInfo {
///         ToolInfo::new("Waits a number of milliseconds.").timeout_seconds(5)
///     }
///     async fn execute(&self, _ctx: &Context, args: Args) -> Result<Response, ToolError> {
///         let ms = args.get("ms").and_then(|v| v.as_u64()).unwrap_or(10);
///         tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
///         Ok(Response::text(format!("waited {ms} ms")))
///     }
/// }
/// plugin_api::export_tool!(Wait);
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a tool: it does not implement `plugin_api::Tool`",
    note = "implement `Tool` (one `async fn execute`) or `TypedTool` for `{Self}`, or export an `Extension` with `export_extension!`"
)]
pub trait Tool: Send + Sync + 'static {
    /// Runs the tool. `ctx.method()` holds the `method` of a `name:method` call.
    fn execute(
        &self,
        ctx: &Context,
        args: Args,
    ) -> impl Future<Output = Result<Response, ToolError>> + Send;

    /// Describes the tool. Empty fields are filled from the plugin's `Cargo.toml`
    /// (`description`, `version`).
    fn info(&self) -> ToolInfo {
        ToolInfo::default()
    }

    /// Whether the tool can run now; checked before each call and when the tools are listed.
    /// The default is ready. Keep it cheap (no I/O): it runs on every call.
    ///
    /// ```
    /// use plugin_api::{Args, Context, Readiness, Response, Tool, ToolError};
    ///
    /// struct Weather { key: Option<String> }
    ///
    /// impl Tool for Weather {
    ///     fn readiness(&self) -> Readiness {
    ///         match self.key {
    ///             Some(_) => Readiness::Ready,
    ///             None => Readiness::not_ready("WEATHER_API_KEY not configured"),
    ///         }
    ///     }
    ///     async fn execute(&self, _ctx: &Context, _args: Args) -> Result<Response, ToolError> {
    ///         Ok(Response::text("sunny"))
    ///     }
    /// }
    /// ```
    fn readiness(&self) -> Readiness {
        Readiness::Ready
    }
}

/// Replaces the host's default `before_execution` / `after_execution` for one tool.
///
/// Implement it only when you need to; [`export_tool!`](crate::export_tool) notices the
/// implementation. Each method defaults to the host's own behaviour, so override one and keep
/// the other, or call [`Context::default_before_execution`] to add to the default rather than
/// replace it.
///
/// ```
/// use plugin_api::{Args, Context, Response, Tool, ToolError, ToolHooks};
///
/// #[derive(Default)]
/// struct Quiet;
/// impl Tool for Quiet {
///     async fn execute(&self, _ctx: &Context, _args: Args) -> Result<Response, ToolError> {
///         Ok(Response::text("shh"))
///     }
/// }
/// impl ToolHooks for Quiet {
///     async fn before_execution(&self, ctx: &Context, _args: &Args) -> Result<(), ToolError> {
///         ctx.log_content("running quietly"); // no "Using tool" line
///         Ok(())
///     }
/// }
/// plugin_api::export_tool!(Quiet);
/// ```
pub trait ToolHooks: Tool {
    /// Runs before the `tool_execute_before` extensions.
    fn before_execution(
        &self,
        ctx: &Context,
        args: &Args,
    ) -> impl Future<Output = Result<(), ToolError>> + Send {
        ctx.default_before_execution(args)
    }

    /// Runs after the `tool_execute_after` extensions.
    fn after_execution(
        &self,
        ctx: &Context,
        response: &Response,
    ) -> impl Future<Output = Result<(), ToolError>> + Send {
        ctx.default_after_execution(response)
    }
}

/// A tool whose arguments are a Rust type: named once, as [`Args`](TypedTool::Args).
///
/// Every `TypedTool` is a [`Tool`]: its [`ToolInfo::parameters`] is the JSON Schema derived from
/// `Args` (with `#[derive(JsonSchema)]`; doc comments become descriptions, `#[serde(default)]`
/// fields are optional), and each call's arguments are deserialized into `Args` before
/// [`execute`](TypedTool::execute) runs. Arguments that do not fit are a
/// [`Validation`](crate::ErrorKind::Validation) error and `execute` is not called (the host
/// validates against the same schema first, so this is a second line of defence).
///
/// ```
/// use plugin_api::{Context, Response, ToolError, ToolInfo, TypedTool};
/// use schemars::JsonSchema;
/// use serde::Deserialize;
///
/// #[derive(Deserialize, JsonSchema)]
/// struct WeatherArgs {
///     /// The city, e.g. "Paris".
///     city: String,
///     /// Days ahead (0 = today).
///     #[serde(default)]
///     days: u8,
/// }
///
/// #[derive(Default)]
/// struct Weather;
///
/// impl TypedTool for Weather {
///     type Args = WeatherArgs;
///
///     fn info(&self) -> ToolInfo {
///         ToolInfo::new("Weather for a city.")
///     }
///     async fn execute(&self, _ctx: &Context, args: WeatherArgs) -> Result<Response, ToolError> {
///         Ok(Response::text(format!("{} in {} days: sunny", args.city, args.days)))
///     }
/// }
///
/// plugin_api::export_tool!(Weather);
///
/// let info = plugin_api::Tool::info(&Weather);
/// assert_eq!(info.parameters["required"], serde_json::json!(["city"]));
/// ```
pub trait TypedTool: Send + Sync + 'static {
    /// The arguments of a call; their JSON Schema is the tool's parameters.
    type Args: DeserializeOwned + schemars::JsonSchema + Send;

    /// Runs the tool with its arguments, already parsed. `ctx.method()` holds the `method` of
    /// a `name:method` call.
    fn execute(
        &self,
        ctx: &Context,
        args: Self::Args,
    ) -> impl Future<Output = Result<Response, ToolError>> + Send;

    /// Describes the tool, as [`Tool::info`]; its `parameters` are replaced by the schema of
    /// [`Args`](TypedTool::Args).
    fn info(&self) -> ToolInfo {
        ToolInfo::default()
    }

    /// Whether the tool can run now, as [`Tool::readiness`].
    fn readiness(&self) -> Readiness {
        Readiness::Ready
    }
}

impl<T: TypedTool> Tool for T {
    async fn execute(&self, ctx: &Context, args: Args) -> Result<Response, ToolError> {
        let args = serde_json::from_value::<T::Args>(args.into_value())
            .map_err(|e| ToolError::validation(format!("invalid tool arguments: {e}")))?;
        TypedTool::execute(self, ctx, args).await
    }

    fn info(&self) -> ToolInfo {
        TypedTool::info(self).parameters_for::<T::Args>()
    }

    fn readiness(&self) -> Readiness {
        TypedTool::readiness(self)
    }
}
