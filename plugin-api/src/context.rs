//! The host services a plugin reaches during a call.

use std::fmt;

use abi_stable::std_types::RString;
use plugin_abi::{ContextField, FfiContext, FfiResponse};
use serde_json::Value;

use crate::{Args, Response, Role, ToolError};

/// The call's view of the agent: who is calling, the log item, progress, intervention,
/// loop data and history.
///
/// Every tool call and every extension run gets one. It is cheap to clone (a reference count on
/// the host side) and may be moved into spawned tasks; it stays valid as long as you hold it.
///
/// ```no_run
/// # use plugin_api::{Args, Context, Response, ToolError};
/// async fn long_job(ctx: &Context, args: Args) -> Result<Response, ToolError> {
///     for step in 1..=3 {
///         ctx.check_intervention().await?; // waits while paused, stops when asked
///         ctx.set_progress(format!("step {step} of 3")).await;
///     }
///     ctx.set_loop_data("last_job", serde_json::json!(args.str("name")))?;
///     Ok(Response::text(format!("{} finished", ctx.agent_name())))
/// }
/// ```
pub struct Context {
    ffi: FfiContext,
}

impl Context {
    /// The context the host handed over (with its reference).
    pub(crate) fn from_ffi(ffi: FfiContext) -> Self {
        Self { ffi }
    }

    fn field(&self, field: ContextField) -> String {
        self.ffi.field(field).into_string()
    }

    /// The agent's display name.
    pub fn agent_name(&self) -> String {
        self.field(ContextField::AgentName)
    }
    /// The active profile.
    pub fn profile(&self) -> String {
        self.field(ContextField::Profile)
    }
    /// The tool being called, as the model named it (without `:method`).
    pub fn tool_name(&self) -> String {
        self.field(ContextField::ToolName)
    }
    /// The method of a `name:method` call.
    pub fn method(&self) -> Option<String> {
        Some(self.field(ContextField::Method)).filter(|m| !m.is_empty())
    }
    /// The extension point being run, when this is an extension's context.
    pub fn extension_point(&self) -> Option<String> {
        Some(self.field(ContextField::ExtensionPoint)).filter(|m| !m.is_empty())
    }
    /// The running extension's file name without extension (`_50_audit_log`).
    pub fn extension_name(&self) -> Option<String> {
        Some(self.field(ContextField::ExtensionName)).filter(|m| !m.is_empty())
    }
    /// The id of the call's log item.
    pub fn log_id(&self) -> u64 {
        self.field(ContextField::LogId).parse().unwrap_or(0)
    }

    /// The W3C Trace Context `traceparent` (`00-<trace id>-<span id>-<flags>`) of the call's
    /// span, when the host exports traces (`OTEL_*` variables or `[telemetry]`): put it on the
    /// plugin's own outgoing requests (an HTTP `traceparent` header, an MCP `_meta`) so that
    /// they join the call's trace. `None` when traces are not exported.
    pub fn traceparent(&self) -> Option<String> {
        Some(self.field(ContextField::TraceParent)).filter(|t| !t.is_empty())
    }

    /// The call's private scratch folder, when the tool runs in a worker process
    /// ([isolated](https://docs.rs/toolhost), sandboxed or not): a folder of its own for this
    /// call, emptied and removed when the call ends. A sandboxed tool may write here and
    /// nowhere else unless the user granted it more. `None` in the host's process.
    pub fn scratch_dir(&self) -> Option<std::path::PathBuf> {
        Some(self.field(ContextField::Scratch))
            .filter(|dir| !dir.is_empty())
            .map(std::path::PathBuf::from)
    }

    /// Replaces the text content of the call's log item.
    pub fn log_content(&self, content: &str) {
        self.ffi.log_content(content)
    }

    /// Sets the progress text, firing the `tool_output_update` extension point.
    pub async fn set_progress(&self, text: impl Into<String>) {
        self.ffi.set_progress(RString::from(text.into())).await
    }

    /// Appends to the progress text without firing any extension point.
    pub fn add_progress(&self, text: &str) {
        self.ffi.add_progress(text)
    }

    /// Waits while the agent is paused; returns an [`Intervention`](crate::ErrorKind::Intervention)
    /// error when the user stopped or interrupted it. Long-running tools call this between steps.
    pub async fn check_intervention(&self) -> Result<(), ToolError> {
        self.ffi
            .check_intervention()
            .await
            .into_result()
            .map_err(ToolError::from)
    }

    /// Whether the host has cancelled this call: its deadline passed, or the user stopped or
    /// interrupted the agent. A tool that loops without awaiting checks it between steps.
    pub fn is_cancelled(&self) -> bool {
        self.ffi.is_cancelled().unwrap_or(false)
    }

    /// Completes when the host cancels this call (see [`is_cancelled`](Self::is_cancelled)).
    /// Select on it to stop long work cleanly; the host has already answered the caller with
    /// a `timeout` or `intervention` error by then, so what the tool returns afterwards is
    /// dropped.
    ///
    /// ```
    /// # use plugin_api::{Context, ToolError};
    /// async fn crawl(ctx: &Context) -> Result<(), ToolError> {
    ///     tokio::select! {
    ///         _ = ctx.cancelled() => Err(ToolError::timeout("cancelled by the host")),
    ///         _ = tokio::time::sleep(std::time::Duration::from_secs(60)) => Ok(()),
    ///     }
    /// }
    /// ```
    pub async fn cancelled(&self) {
        match self.ffi.cancelled() {
            Some(cancelled) => cancelled.await,
            None => std::future::pending().await,
        }
    }

    /// A value of the current loop's data, if set.
    pub fn loop_data(&self, key: &str) -> Option<Value> {
        let text = self.ffi.loop_data_get(key);
        text.into_option()
            .and_then(|t| serde_json::from_str(&t).ok())
    }

    /// Sets a value of the current loop's data.
    pub fn set_loop_data(&self, key: &str, value: Value) -> Result<(), ToolError> {
        let text = RString::from(serde_json::to_string(&value).unwrap_or_default());
        self.ffi
            .loop_data_set(key, text)
            .into_result()
            .map_err(ToolError::from)
    }

    /// Adds a message to the agent's history, as `role`.
    ///
    /// ```no_run
    /// # fn f(ctx: &plugin_api::Context) {
    /// use plugin_api::Role;
    /// ctx.add_history(Role::Warning, "the cache was stale; results may be old");
    /// # }
    /// ```
    pub fn add_history(&self, role: Role, content: impl Into<String>) {
        self.ffi
            .history_add(role.as_str(), RString::from(content.into()))
    }

    /// The host's default `before_execution`: creates the log item and prints the call.
    /// Call it from your own [`ToolHooks::before_execution`](crate::ToolHooks::before_execution)
    /// to keep that behaviour.
    pub async fn default_before_execution(&self, args: &Args) -> Result<(), ToolError> {
        let json = RString::from(serde_json::to_string(&**args).unwrap_or_default());
        self.ffi
            .default_before_execution(json)
            .await
            .into_result()
            .map_err(ToolError::from)
    }

    /// The host's default `after_execution`: records the result in history and the log.
    pub async fn default_after_execution(&self, response: &Response) -> Result<(), ToolError> {
        self.ffi
            .default_after_execution(FfiResponse::from(response.clone()))
            .await
            .into_result()
            .map_err(ToolError::from)
    }
}

impl Context {
    /// Replaces `§§secret(KEY)` placeholders with the secret values in every string of `value`,
    /// at any depth. An unknown key is a [repairable](crate::ErrorKind::Repairable) error that
    /// lists the known keys. The built-in `_10_unmask_secrets` extension does this for every
    /// call's arguments.
    pub fn unmask_secrets(&self, value: &mut Value) -> Result<(), ToolError> {
        let json = RString::from(serde_json::to_string(&*value).unwrap_or_default());
        let Some(out) = self.ffi.unmask_json(json) else {
            return Err(ToolError::dependency(
                "this host has no secrets service: update the host",
            ));
        };
        let out = out.into_result().map_err(ToolError::from)?;
        *value = serde_json::from_str(&out)?;
        Ok(())
    }

    /// `text` with every secret value replaced by its `§§secret(KEY)` placeholder (unchanged
    /// on a host without secrets).
    pub fn mask_secrets(&self, text: &str) -> String {
        match self.ffi.mask_text(RString::from(text)) {
            Some(masked) => masked.into_string(),
            None => text.to_owned(),
        }
    }

    /// Runs the extensions of `point` (one of the host's, or a point of your own) on `data`,
    /// in file-name order; returns the data the last one left.
    pub async fn call_extensions(&self, point: &str, data: Value) -> Result<Value, ToolError> {
        let json = RString::from(serde_json::to_string(&data).unwrap_or_default());
        let Some(call) = self.ffi.call_extensions(RString::from(point), json) else {
            return Err(ToolError::dependency(
                "this host cannot run extension points for plugins: update the host",
            ));
        };
        let out = call.await.into_result().map_err(ToolError::from)?;
        Ok(serde_json::from_str(&out)?)
    }
}

/// Asking whoever the call is served to: log messages, questions for the user, completions
/// of a model, the client's roots (see [`ask`](crate::ask) for where each goes).
///
/// # Asking a client of MCP 2026-07-28
///
/// A server of that version may not send requests to its client while a call runs: what a
/// tool asks ([`elicit`](Self::elicit), [`sample`](Self::sample), [`roots`](Self::roots)) ends
/// this run of the tool, and the call is answered with an `InputRequiredResult` holding the
/// question and a `requestState`. The client answers and calls the tool again with its
/// answers and that state; the tool then **runs again from the start**, and each ask takes
/// the recorded answer of its key (`elicit-1`, `sample-1`, `roots-1`, ... in the order asked,
/// or the key given), so a tool that asks the same questions in the same order gets them
/// answered and goes on. Nothing is kept in the server between the rounds: the answers
/// travel in the `requestState`, sealed (HMAC-SHA256) by the server's key, bound to the tool
/// and its arguments, good for ten minutes and for one retry; one changed, expired, from
/// another call or sealed with another key is refused (invalid params) and the tool does not
/// run, so any instance sharing the key (one `--token-secret`) can continue the call.
///
/// The limits, for authors: whatever the tool does before an ask is **done again** in every
/// round (ask first, then change things; or make those steps idempotent); its questions must
/// come in the same order given the same answers; several questions are asked in one round
/// only when asked at once (join their futures), since the first unanswered ask ends the
/// run. Clients of 2025-11-25 and earlier, the terminal and tasks answer in place: the tool
/// runs once.
impl Context {
    async fn ask(&self, request: &crate::ask::Ask) -> Result<Value, ToolError> {
        let json = RString::from(serde_json::to_string(request).unwrap_or_default());
        let Some(asking) = self.ffi.ask(json) else {
            return Err(ToolError::dependency(
                "this host cannot be asked (log, elicit, sample): update the host",
            ));
        };
        let answer = asking.await.into_result().map_err(ToolError::from)?;
        Ok(serde_json::from_str(&answer)?)
    }

    /// Sends a log message: to the MCP client when served (if its level is at or above the
    /// client's `logging/setLevel`), else to the host's log. Never fails: a message that cannot
    /// be delivered is dropped.
    ///
    /// ```no_run
    /// # async fn f(ctx: &plugin_api::Context) {
    /// use plugin_api::ask::LogLevel;
    /// ctx.log(LogLevel::Info, "fetched 3 pages").await;
    /// # }
    /// ```
    pub async fn log(&self, level: crate::ask::LogLevel, message: impl Into<String>) {
        let request = crate::ask::Ask::Log {
            level,
            message: message.into(),
        };
        let _ = self.ask(&request).await;
    }

    /// Asks the user to fill in a form: `schema` is an object schema of flat fields (strings,
    /// numbers, integers, booleans, enums; MCP's `requestedSchema`). Answered by the MCP
    /// client's elicitation when served (an `InputRequiredResult` round for a 2026-07-28
    /// client, which runs the tool again from the start with the answer: ask before changing
    /// anything), on the terminal in `toolhost call`, `watch` and `chat`; where nobody can
    /// answer, a [`dependency`](crate::ErrorKind::Dependency) error says so. Never ask for a secret
    /// this way: secrets belong in `usr/secrets.env`.
    ///
    /// ```no_run
    /// # async fn f(ctx: &plugin_api::Context) -> Result<(), plugin_api::ToolError> {
    /// use plugin_api::ask::ElicitAction;
    /// let schema = serde_json::json!({
    ///     "type": "object",
    ///     "properties": {"city": {"type": "string", "description": "Where you are"}},
    ///     "required": ["city"]
    /// });
    /// let answer = ctx.elicit("Which city?", schema).await?;
    /// if answer.action == ElicitAction::Accept {
    ///     println!("{:?}", answer.content);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn elicit(
        &self,
        message: impl Into<String>,
        schema: Value,
    ) -> Result<crate::ask::Elicited, ToolError> {
        let request = crate::ask::Ask::Elicit {
            message: message.into(),
            schema,
            key: None,
        };
        Ok(serde_json::from_value(self.ask(&request).await?)?)
    }

    /// [`elicit`](Self::elicit), with the question's key in a 2026-07-28 client's
    /// `inputRequests` (unique within the call; the client sees it, and a tool whose
    /// questions depend on earlier answers keeps each one's answer to itself by its key).
    pub async fn elicit_as(
        &self,
        key: impl Into<String>,
        message: impl Into<String>,
        schema: Value,
    ) -> Result<crate::ask::Elicited, ToolError> {
        let request = crate::ask::Ask::Elicit {
            message: message.into(),
            schema,
            key: Some(key.into()),
        };
        Ok(serde_json::from_value(self.ask(&request).await?)?)
    }

    /// The roots the MCP client shares (its `roots/list`), for a 2026-07-28 client in a round
    /// as [`elicit`](Self::elicit) is; off MCP, or where the client has none, a
    /// [`dependency`](crate::ErrorKind::Dependency) error says so. `key`: the question's key
    /// in `inputRequests` (`None`: `roots-1`, ...).
    pub async fn roots(&self, key: Option<&str>) -> Result<Vec<crate::ask::Root>, ToolError> {
        let request = crate::ask::Ask::Roots {
            key: key.map(str::to_owned),
        };
        let answer = self.ask(&request).await?;
        Ok(serde_json::from_value(answer["roots"].clone())?)
    }

    /// Asks a model for a completion: the MCP client's (sampling) when served, else the
    /// host's configured model (`models.toml`) once the user's policy allows it; where there
    /// is none to ask, or nobody to approve, a [`dependency`](crate::ErrorKind::Dependency)
    /// error says so.
    ///
    /// ```no_run
    /// # async fn f(ctx: &plugin_api::Context) -> Result<(), plugin_api::ToolError> {
    /// use plugin_api::ask::SampleRequest;
    /// let answer = ctx.sample(SampleRequest::new("Summarise: ...", 200)).await?;
    /// println!("{} said {}", answer.model, answer.text);
    /// # Ok(()) }
    /// ```
    pub async fn sample(
        &self,
        request: crate::ask::SampleRequest,
    ) -> Result<crate::ask::Sampled, ToolError> {
        let request = crate::ask::Ask::Sample(request);
        Ok(serde_json::from_value(self.ask(&request).await?)?)
    }
}

impl Clone for Context {
    fn clone(&self) -> Self {
        Self {
            ffi: self.ffi.clone(),
        }
    }
}

impl fmt::Debug for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Context")
            .field("tool", &self.tool_name())
            .finish_non_exhaustive()
    }
}
