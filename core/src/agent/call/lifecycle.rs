//! The fixed lifecycle of one tool call: resolve, hooks, extension points and intervention
//! checks, in the order documented on [`plugin_api::Tool`](plugin_api::Tool#lifecycle).

use std::borrow::Cow;
use std::sync::Arc;

use plugin_api::points::{
    ToolExecuteAfter, ToolExecuteBefore, ToolExecuteError, TOOL_EXECUTE_AFTER, TOOL_EXECUTE_BEFORE,
    TOOL_EXECUTE_ERROR,
};
use serde_json::{Map, Value};

use crate::agent::call::context::{Call, CallContext};
use crate::agent::call::extension_points::json_text;
use crate::agent::call::governed::Governed;
use crate::agent::call::long_output::Answer;
use crate::agent::intervention::Check;
use crate::agent::Agent;
use crate::governance::{CallRules, EarlyCall};
use crate::host::FoundTool;
use crate::layout::ToolName;
#[cfg(feature = "mcp")]
use crate::mcp::McpTool;
use crate::plugin::ToolHandle;
use crate::telemetry::ToolSpan;
use crate::transcript::{HistoryMessage, LogKind};
use plugin_api::ErrorKind;
use plugin_api::Response;
use plugin_api::ToolError;

/// Clears the agent's current tool when dropped (step 11, "finally").
struct ClearCurrentTool<'a>(&'a Agent);

impl Drop for ClearCurrentTool<'_> {
    fn drop(&mut self) {
        self.0.set_current_tool(None);
    }
}

/// The tool a request resolved to.
enum Target {
    /// A library tool, and the rules that govern its call.
    Library(Arc<ToolHandle>, CallRules),
    /// A tool of an MCP server, and the rules that govern its call.
    #[cfg(feature = "mcp")]
    Mcp(Arc<McpTool>, CallRules),
    /// No layer has the tool: the built-in Unknown tool answers.
    Unknown,
    /// The built-in `parallel` tool.
    Parallel,
}

impl Target {
    /// What the call's span says of the tool.
    fn describe(&self, span: &ToolSpan, root: &std::path::Path) {
        match self {
            Self::Library(tool, _) => {
                let layer = || tool.layer_label(root).to_owned();
                let sha256 = || tool.sha256();
                let risk = tool.info().risk_level;
                span.resolved(tool.shared_name(), layer, sha256, risk, tool.is_isolated());
            }
            #[cfg(feature = "mcp")]
            Self::Mcp(tool, _) => {
                let risk = tool.info.risk_level;
                let layer = || "mcp".to_owned();
                span.resolved(&tool.name, layer, || None, risk, false);
            }
            Self::Unknown => {}
            Self::Parallel => {
                let risk = plugin_api::RiskLevel::Read;
                span.resolved(&Arc::from("parallel"), String::new, || None, risk, false);
            }
        }
    }
}

impl Agent {
    /// Calls a tool through the whole lifecycle and returns its response.
    ///
    /// `request` is `name` or `name:method`; `args` is the JSON object of arguments (`null` is
    /// taken as `{}`). The steps, in order, are stated once, on
    /// [`plugin_api::Tool`](plugin_api::Tool#lifecycle); an interruption is
    /// [`interject`](Self::interject).
    pub async fn call_tool(
        self: &Arc<Self>,
        request: &str,
        args: Value,
    ) -> Result<Response, ToolError> {
        self.call_tool_as(request, args, false).await
    }

    /// Whether a call of `request` (`name` or `name:method`) reaches a tool of that name (a
    /// library in the profile's layers, a ready MCP server's tool, or the built-in `parallel`)
    /// rather than the Unknown tool. An invalid name is not a tool.
    pub fn has_tool(&self, request: &str) -> bool {
        let Ok(request) = ToolName::parse(request) else {
            return false;
        };
        let name = request.name();
        name == "parallel"
            || self.host.resolve(self.profile(), name).found.is_some()
            || self.has_mcp_tool(name)
    }

    /// Whether a ready MCP server of the profile offers the tool `name` (`<server>.<tool>` or
    /// `<server>__<tool>`).
    #[cfg(feature = "mcp")]
    fn has_mcp_tool(&self, name: &str) -> bool {
        let dotted = crate::mcp::from_native_name(name);
        let mcp =
            |tool: &Arc<McpTool>| *tool.name == *name || dotted.as_deref() == Some(&*tool.name);
        self.host.mcp_tools(self.profile()).iter().any(mcp)
    }

    /// Without the MCP client, no MCP server offers a tool.
    #[cfg(not(feature = "mcp"))]
    fn has_mcp_tool(&self, _name: &str) -> bool {
        false
    }

    /// `call_tool`, as a call of `parallel` when `nested`: its result goes into the combined
    /// result rather than the history, and it leaves the agent's current tool alone.
    pub(crate) async fn call_tool_as(
        self: &Arc<Self>,
        request: &str,
        args: Value,
        nested: bool,
    ) -> Result<Response, ToolError> {
        let span = ToolSpan::start(request);
        let called = self.resolve_and_run(request, args, nested, &span);
        let result = span.run(called).await;
        span.ended(result.as_ref().map(|_| ()));
        result
    }

    /// `call_tool_as` within its span.
    async fn resolve_and_run(
        self: &Arc<Self>,
        request: &str,
        args: Value,
        nested: bool,
        span: &ToolSpan,
    ) -> Result<Response, ToolError> {
        let request_name = ToolName::parse(request)?;
        let args = match args {
            Value::Object(map) => map,
            Value::Null => Map::new(),
            other => {
                let error = ToolError::repairable(format!(
                    "the arguments of tool '{request}' must be a JSON object, not {other}"
                ));
                return Err(self.ended_early(&request_name, None, &Map::new(), error, "resolve"));
            }
        };
        let name = request_name.name();
        // An MCP server starting, failed or down, or a tool that cannot be loaded: audited too.
        let found = match self.mcp_target(name).await {
            Ok(Some(target)) => Ok(target),
            Ok(None) => self.layer_target(name),
            Err(e) => Err(e),
        };
        let target = match found {
            Ok(target) => target,
            Err(e) => return Err(self.ended_early(&request_name, None, &args, e, "resolve")),
        };
        target.describe(span, self.host.root());
        if nested {
            return self.run_lifecycle(&request_name, target, args, true).await;
        }
        self.set_current_tool(Some(request));
        // Cleared however the call ends: returned, failed, or cancelled mid-way.
        let _current = ClearCurrentTool(self);
        self.run_lifecycle(&request_name, target, args, false).await
    }

    /// The tool `name` resolves to along the layers: a library, the built-in `parallel`, or
    /// the Unknown tool.
    fn layer_target(&self, name: &str) -> Result<Target, ToolError> {
        let resolution = self.host.resolve(self.profile(), name);
        Ok(match &resolution.found {
            Some(found) => self.library_target(found)?,
            // The built-in `parallel` (a library named `parallel` replaces it).
            None if name == "parallel" => Target::Parallel,
            None => {
                if let Some(error) = resolution.skipped.first() {
                    // Installed but unusable: say so, rather than "not found".
                    return Err(ToolError::dependency(format!(
                        "tool '{name}' cannot be loaded: {error}"
                    )));
                }
                match &self.host.resolve(self.profile(), "unknown").found {
                    Some(found) => self.library_target(found)?,
                    None => Target::Unknown,
                }
            }
        })
    }

    #[cfg(feature = "mcp")]
    /// The MCP tool `name` (`<server>.<tool>`) if a server of the profile offers it, waiting
    /// for a server that is still starting (at most the call's deadline); `<server>__<tool>`
    /// finds it too. A name with neither `.` nor `__` costs two byte searches.
    async fn mcp_target(&self, name: &str) -> Result<Option<Target>, ToolError> {
        let alias; // `server__tool`, as models that call tools natively name it
        let name = match name.contains('.') {
            true => name,
            false if !name.contains("__") => return Ok(None),
            false => match crate::mcp::from_native_name(name) {
                Some(dotted) => {
                    alias = dotted;
                    &alias
                }
                None => return Ok(None),
            },
        };
        let Ok(config) = self.host.config(self.profile()) else {
            return Ok(None); // the layers' lookup reports the mistake
        };
        let declared = std::time::Duration::from_secs(crate::mcp::DEFAULT_TIMEOUT_SECONDS);
        let wait = match config.timeout(name, declared) {
            d if d.is_zero() => std::time::Duration::from_secs(365 * 86_400),
            d => d,
        };
        let Some(tool) = self.host.mcp_tool(self.profile(), name, wait).await? else {
            return Ok(None);
        };
        let layer = format!("mcp:{}", tool.server()).into();
        let rules = CallRules::new(tool.name(), tool.info(), layer, config);
        Ok(Some(Target::Mcp(tool, rules)))
    }

    /// Without the MCP client, no MCP server offers a tool.
    #[cfg(not(feature = "mcp"))]
    async fn mcp_target(&self, _name: &str) -> Result<Option<Target>, ToolError> {
        Ok(None)
    }

    /// Runs only `execute` of an already resolved library tool: no lookup, hooks, extensions,
    /// intervention checks, log or history. This is the raw cost of crossing the plugin
    /// boundary, for benchmarks and debugging; agents use [`call_tool`](Self::call_tool).
    pub async fn execute_bare(
        self: &Arc<Self>,
        tool: &ToolHandle,
        args: &Value,
    ) -> Result<Response, ToolError> {
        let call = Call::new(
            self.clone(),
            tool.shared_name().clone(),
            tool.secret_access(),
        );
        let call = Arc::new(CallContext::new(call));
        let answer = tool.execute(call.to_ffi(), json_text(args)).await?;
        let len = answer.message().len();
        Ok(answer.into_response(len))
    }

    async fn run_lifecycle(
        self: &Arc<Self>,
        request: &ToolName,
        target: Target,
        args: Map<String, Value>,
        nested: bool,
    ) -> Result<Response, ToolError> {
        if let Err(e) = self.check_intervention().await {
            if self.intervention.interrupted() && !nested {
                // The model's request still gets a result in the history.
                let content = "(interrupted by the user before it started)";
                self.add_tool_result(request, content.to_owned());
            }
            return Err(e);
        }
        let heading = format!("Using tool '{request}'");
        let log_id = self.add_log(LogKind::Tool, heading, String::new(), args.clone(), false);
        let tool_name = match &target {
            #[cfg(feature = "mcp")]
            Target::Mcp(tool, _) => tool.name.clone(),
            Target::Library(tool, _) if tool.name() == request.name() => tool.shared_name().clone(),
            _ => request.name().into(),
        };
        let secrets = match &target {
            Target::Library(tool, _) => tool.secret_access(),
            _ => Default::default(),
        };
        let call = Arc::new(CallContext::new(Call {
            method: request.method().map(Into::into),
            log_id,
            nested,
            ..Call::new(self.clone(), tool_name, secrets)
        }));
        match self.lifecycle_steps(&call, request, &target, args).await {
            Ok(response) => Ok(response),
            Err(error) => {
                self.tool_execute_error(&call, request, &error).await;
                Err(self.finish_failed_call(&call, request, error))
            }
        }
    }

    /// The `tool_execute_error` extensions of a failed call (not an intervention): read only;
    /// one that fails is logged, and the call's own error stands.
    async fn tool_execute_error(
        self: &Arc<Self>,
        call: &Arc<CallContext>,
        request: &ToolName,
        error: &ToolError,
    ) {
        if error.kind() == ErrorKind::Intervention {
            return;
        }
        let extensions = self.host.extensions(self.profile(), TOOL_EXECUTE_ERROR);
        if extensions.is_empty() {
            return;
        }
        let message = self.mask(error.message().to_owned()).into_inner();
        let data = ToolExecuteError::new(request.to_string(), error.kind().to_string(), message);
        if let Err(e) = self.run_point_with(&extensions, data, call).await {
            tracing::warn!("a {TOOL_EXECUTE_ERROR} extension failed: {}", e.message());
        }
    }

    /// Steps 3 to 10 of a call whose log item exists. Up to `execute` an interruption ends the
    /// call; after it, the call completes.
    async fn lifecycle_steps(
        self: &Arc<Self>,
        call: &Arc<CallContext>,
        request: &ToolName,
        target: &Target,
        args: Map<String, Value>,
    ) -> Result<Response, ToolError> {
        let admitted = match target {
            Target::Library(tool, rules) => self.admit(&**tool, rules),
            #[cfg(feature = "mcp")]
            Target::Mcp(tool, rules) => self.admit(&**tool, rules),
            _ => Ok(()),
        };
        if let Err(e) = admitted {
            return Err(self.ended_early(request, Some(target), &args, e, "admit"));
        }
        let mut args = args;
        if let Err(e) = self.before_steps(call, request, target, &mut args).await {
            let refused = call.refused();
            let early = (Some(target), &args, &refused[..]);
            return Err(self.ended_early_refused(request, early, e, "before"));
        }
        let answer = match target {
            Target::Library(tool, rules) => Answer::Plugin(
                self.execute_governed(call, request, tool, &mut args, rules)
                    .await?,
            ),
            // Boxed: an MCP call's state is 4 KiB (a network round trip, where an allocation
            // is nothing), which every call's future would otherwise hold and copy.
            #[cfg(feature = "mcp")]
            Target::Mcp(tool, rules) => Answer::Host(
                Box::pin(self.execute_governed(call, request, tool, &mut args, rules)).await?,
            ),
            Target::Unknown => {
                // No tool runs: the record says the Unknown tool answered.
                self.audit_early(None, early(request, None, &args, "unknown_tool"), None);
                Answer::Host(self.unknown_tool(request.name()))
            }
            Target::Parallel => Answer::Host(self.run_parallel(args).await?),
        };
        // An interruption now waits for the loop's next checkpoint.
        self.intervention.check(Check::PauseOrStop).await?;
        let config = match target {
            Target::Library(_, rules) => Some(rules.config.clone()),
            #[cfg(feature = "mcp")]
            Target::Mcp(_, rules) => Some(rules.config.clone()),
            _ => self.host.config(self.profile()).ok(),
        };
        let mut response = self.limit_output(call, config.as_deref(), answer);
        if let Target::Library(tool, _) = target {
            check_structured(tool.name(), &tool.info().output_schema, &response)?;
        }
        if let Some(metadata) = response.metadata.take() {
            let metadata = self.host.secret_store().map(metadata);
            self.transcript
                .update_log(call.log_id, |item| item.metadata = Some(metadata));
        }
        self.after_steps(call, request, target, response).await
    }

    /// `before_execution`, an intervention check and the `tool_execute_before` extensions;
    /// `args` become the arguments they leave (on a failure, they are the arguments as asked).
    async fn before_steps(
        self: &Arc<Self>,
        call: &Arc<CallContext>,
        request: &ToolName,
        target: &Target,
        args: &mut Map<String, Value>,
    ) -> Result<(), ToolError> {
        match target {
            Target::Library(tool, _) if tool.has_before_hook() => {
                tool.before_execution(call.to_ffi(), json_text(args))
                    .await?
            }
            _ => self.default_before_execution(call, args),
        }
        self.check_intervention().await?;
        let extensions = self.host.extensions(self.profile(), TOOL_EXECUTE_BEFORE);
        if extensions.is_empty() {
            return Ok(()); // no extensions: the data need not be built
        }
        // A copy: if an extension fails, the call's record has the arguments as asked.
        let before = ToolExecuteBefore::new(request.name().to_owned(), args.clone());
        *args = self.run_point_with(&extensions, before, call).await?.args;
        Ok(())
    }

    /// Audits a call that ended before its governed steps (`stage`: `resolve`, `admit` or
    /// `before`) and returns the error to report.
    fn ended_early(
        &self,
        request: &ToolName,
        target: Option<&Target>,
        args: &Map<String, Value>,
        error: ToolError,
        stage: &'static str,
    ) -> ToolError {
        self.ended_early_refused(request, (target, args, &[]), error, stage)
    }

    /// [`ended_early`](Self::ended_early) of a call whose plugins were refused something
    /// (`secret:KEY`), which its record says.
    fn ended_early_refused(
        &self,
        request: &ToolName,
        (target, args, refused): (Option<&Target>, &Map<String, Value>, &[String]),
        error: ToolError,
        stage: &'static str,
    ) -> ToolError {
        let outcome = error.kind().as_str();
        let root = self.host.root();
        let (config, layer, source) = match target {
            Some(Target::Library(tool, rules)) => (
                Some(&*rules.config),
                &*rules.layer,
                Some(tool.audit_source(root)),
            ),
            #[cfg(feature = "mcp")]
            Some(Target::Mcp(tool, rules)) => (
                Some(&*rules.config),
                &*rules.layer,
                Some(tool.audit_source(root)),
            ),
            _ => (None, "", None),
        };
        let (file, sha256) = source.unwrap_or((Cow::Borrowed(""), None));
        let call = EarlyCall {
            layer,
            file: &file,
            library_sha256: sha256,
            ..early(request, None, args, outcome)
        };
        let call = EarlyCall {
            stage,
            refused,
            ..call
        };
        let error_message = error.message().to_owned();
        self.audit_early(config, call, Some(error))
            .unwrap_or_else(|| ToolError::internal(error_message))
    }

    /// The `tool_execute_after` extensions (they may change the message and `additional`,
    /// never `break_loop`), `after_execution` and an intervention check.
    async fn after_steps(
        self: &Arc<Self>,
        call: &Arc<CallContext>,
        request: &ToolName,
        target: &Target,
        response: Response,
    ) -> Result<Response, ToolError> {
        let extensions = self.host.extensions(self.profile(), TOOL_EXECUTE_AFTER);
        let response = if extensions.is_empty() {
            response // no extensions: the data need not be built
        } else {
            let break_loop = response.break_loop;
            let after = ToolExecuteAfter::new(request.name().to_owned(), response);
            let after = self.run_point_with(&extensions, after, call).await?;
            // Extensions may change the message and `additional`, never `break_loop`.
            after.response.with_break_loop(break_loop)
        };
        match target {
            Target::Library(tool, _) if tool.has_after_hook() => {
                tool.after_execution(call.to_ffi(), &response).await?
            }
            _ => self.default_after_execution(call, &response),
        }
        self.intervention.check(Check::PauseOrStop).await?;
        Ok(response)
    }

    /// Ends the log item of a call that failed, and returns the error to report. An
    /// interrupted call's result is its progress so far: in the history (or, for a call of
    /// `parallel`, in its error, since the combined result reports it).
    fn finish_failed_call(
        &self,
        call: &CallContext,
        request: &ToolName,
        error: ToolError,
    ) -> ToolError {
        let interrupted =
            error.kind() == ErrorKind::Intervention && self.intervention.interrupted();
        let content = match interrupted {
            true => "(interrupted by the user)".to_owned(),
            false => format!("error ({}): {}", error.kind(), error.message()),
        };
        let content = self.mask(content);
        let mut progress = String::new();
        self.transcript.update_log(call.log_id, |item| {
            progress = item.progress.to_string();
            item.content = content;
            item.finished = true;
        });
        if !interrupted {
            return error;
        }
        let content = if progress.is_empty() {
            "(interrupted by the user before it reported progress)".to_owned()
        } else {
            format!("(interrupted by the user) progress so far: {progress}")
        };
        if call.nested {
            return ToolError::intervention(content);
        }
        self.add_tool_result(request, content);
        error
    }

    /// Adds a tool's result that is not its response (it was interrupted) to the history.
    fn add_tool_result(&self, request: &ToolName, content: String) {
        let message = HistoryMessage::tool_result(request.to_string(), self.mask(content), None);
        self.transcript.add_history(message);
    }

    /// A library tool to call, with the rules for it. A mistake in the profile's config fails
    /// the call with that mistake's one line.
    fn library_target(&self, found: &FoundTool) -> Result<Target, ToolError> {
        let tool = &found.handle;
        let config = self
            .host
            .config(self.profile())
            .map_err(|e| ToolError::dependency(e.to_string()))?;
        let layer = found.layer.kind.as_str().into();
        Ok(Target::Library(
            tool.clone(),
            CallRules::new(tool.name(), tool.info(), layer, config),
        ))
    }

    /// The built-in Unknown tool: names the missing tool and lists the available ones.
    fn unknown_tool(&self, name: &str) -> Response {
        Response::text(format!(
            "Tool {name} not found. Available tools:\n{}",
            self.host.tools_prompt(self.profile())
        ))
    }
}

/// The record of a call that never reached its tool, with no layer or file (the tool was not
/// found): `outcome` is an error kind, or `unknown_tool` for the Unknown tool's answer.
fn early<'c>(
    request: &'c ToolName,
    layer: Option<&'c str>,
    args: &'c Map<String, Value>,
    outcome: &'c str,
) -> EarlyCall<'c> {
    EarlyCall {
        request,
        layer: layer.unwrap_or(""),
        file: "",
        library_sha256: None,
        args,
        outcome,
        stage: "resolve",
        refused: &[],
    }
}

/// A tool that declares an output schema must return structured content that matches it.
fn check_structured(
    tool: &str,
    schema: &Option<Value>,
    response: &Response,
) -> Result<(), ToolError> {
    let (Some(schema), structured) = (schema, &response.structured_content) else {
        return Ok(());
    };
    let Some(structured) = structured else {
        return Err(ToolError::internal(format!(
            "tool '{tool}' declares an output schema but returned no structured content"
        )));
    };
    crate::governance::check_output(schema, structured).map_err(|e| {
        ToolError::internal(format!(
            "tool '{tool}' returned structured content that does not match its output schema: {e}"
        ))
    })
}
