//! The fixed lifecycle of one tool call, from its request to its result: resolve, hooks,
//! extension points and intervention checks around the governed execution, in the order
//! documented on [`plugin_api::Tool`](plugin_api::Tool#lifecycle).

use std::sync::Arc;

use plugin_api::points::{
    ToolExecuteAfter, ToolExecuteBefore, ToolExecuteError, TOOL_EXECUTE_AFTER, TOOL_EXECUTE_BEFORE,
    TOOL_EXECUTE_ERROR,
};
use plugin_api::{ErrorKind, Response, ToolError};
use serde_json::{Map, Value};

use crate::agent::call::audit::{audit_early, early, early_end};
use crate::agent::call::context::{CallContext, Shared};
use crate::agent::call::extension_points::json_text;
use crate::agent::call::long_output::Answer;
use crate::agent::call::resolve::{resolve, unknown_tool, Target};
use crate::agent::call::{parallel, Call};
use crate::agent::intervention::Check;
use crate::agent::Agent;
use crate::governance::Trail;
use crate::layout::ToolName;
use crate::plugin::ToolHandle;
use crate::telemetry::ToolSpan;
use crate::transcript::{HistoryMessage, LogKind};

/// Clears the agent's current tool when dropped (step 11, "finally").
struct ClearCurrentTool<'a>(&'a Agent);

impl Drop for ClearCurrentTool<'_> {
    fn drop(&mut self) {
        self.0.set_current_tool(None);
    }
}

/// [`Agent::call_tool`], as a call of `parallel` when `nested`: its result goes into the
/// combined result rather than the history, and it leaves the agent's current tool alone.
pub(crate) async fn call(
    agent: &Arc<Agent>,
    request: &str,
    args: Value,
    nested: bool,
) -> Result<Response, ToolError> {
    let span = ToolSpan::start(request);
    let called = resolve_and_run(agent, request, args, nested, &span);
    let result = span.run(called).await;
    span.ended(result.as_ref().map(|_| ()));
    result
}

/// `call` within its span: the request resolved to its [`Call`], which then runs.
async fn resolve_and_run(
    agent: &Arc<Agent>,
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
            return Err(early_end(agent, &request_name, &Map::new(), error));
        }
    };
    // An MCP server starting, failed or down, or a tool that cannot be loaded: audited too.
    let target = match resolve(agent, request_name.name()).await {
        Ok(target) => target,
        Err(e) => return Err(early_end(agent, &request_name, &args, e)),
    };
    target.describe(span, agent.host.root());
    if nested {
        return Call::start(agent, request_name, target, args, true).await;
    }
    agent.set_current_tool(Some(request));
    // Cleared however the call ends: returned, failed, or cancelled mid-way.
    let _current = ClearCurrentTool(agent);
    Call::start(agent, request_name, target, args, false).await
}

/// Runs only `execute` of an already resolved library tool (see [`Agent::execute_bare`]).
pub(crate) async fn execute_bare(
    agent: &Arc<Agent>,
    tool: &ToolHandle,
    args: &Value,
) -> Result<Response, ToolError> {
    let shared = Shared::new(
        agent.clone(),
        tool.shared_name().clone(),
        tool.secret_access(),
    );
    let context = Arc::new(CallContext::new(shared));
    let answer = tool.execute(context.to_ffi(), json_text(args)).await?;
    let len = answer.message().len();
    Ok(answer.into_response(len))
}

impl Call {
    /// Starts a resolved call: an intervention check, its log item and context, then its
    /// steps; a failed call's log item ends with its error.
    async fn start(
        agent: &Arc<Agent>,
        request: ToolName,
        target: Target,
        args: Map<String, Value>,
        nested: bool,
    ) -> Result<Response, ToolError> {
        if let Err(e) = agent.check_intervention().await {
            if agent.intervention.interrupted() && !nested {
                // The model's request still gets a result in the history.
                let content = "(interrupted by the user before it started)";
                add_tool_result(agent, &request, content.to_owned());
            }
            return Err(e);
        }
        let heading = format!("Using tool '{request}'");
        let shown = super::shown::args(&args, || agent.host.secret_store().get());
        let log_id = agent.add_log(LogKind::Tool, heading, String::new(), shown, false);
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
        let context = Arc::new(CallContext::new(Shared {
            method: request.method().map(Into::into),
            log_id,
            nested,
            ..Shared::new(agent.clone(), tool_name, secrets)
        }));
        let mut call = Call {
            context,
            request,
            target,
            args,
            trail: Trail::start(false),
        };
        match call.run().await {
            Ok(response) => Ok(response),
            Err(error) => {
                call.tool_execute_error(&error).await;
                Err(call.finish_failed(error))
            }
        }
    }

    /// Steps 3 to 10 of a call whose log item exists. Up to `execute` an interruption ends the
    /// call; after it, the call completes.
    async fn run(&mut self) -> Result<Response, ToolError> {
        let admitted = match &self.target {
            Target::Library(tool, rules) => self.admit(&**tool, rules),
            #[cfg(feature = "mcp")]
            Target::Mcp(tool, rules) => self.admit(&**tool, rules),
            _ => Ok(()),
        };
        if let Err(e) = admitted {
            return Err(self.ended_early(e, "admit"));
        }
        if let Err(e) = self.before_steps().await {
            return Err(self.ended_early(e, "before"));
        }
        let answer = self.execute().await?;
        let agent = self.agent().clone();
        // An interruption now waits for the loop's next checkpoint.
        agent.intervention.check(Check::PauseOrStop).await?;
        let config = match self.target.rules() {
            Some(rules) => Some(rules.config.clone()),
            None => agent.host.config(agent.profile()).ok(),
        };
        let mut response = self.limit_output(config.as_deref(), answer);
        if let Target::Library(tool, _) = &self.target {
            check_structured(tool.name(), &tool.info().output_schema, &response)?;
        }
        if let Some(metadata) = response.metadata.take() {
            let metadata = agent.host.secret_store().map(metadata);
            agent
                .transcript
                .update_log(self.context.log_id, |item| item.metadata = Some(metadata));
        }
        self.after_steps(response).await
    }

    /// `execute`: a governed tool's (library or MCP), or the host's own answer (the Unknown
    /// tool, `parallel`).
    async fn execute(&mut self) -> Result<Answer, ToolError> {
        Ok(match &self.target {
            Target::Library(tool, rules) => {
                let (tool, rules) = (tool.clone(), rules.clone());
                Answer::Plugin(self.execute_governed(&tool, &rules).await?)
            }
            // Boxed: an MCP call's state is 4 KiB (a network round trip, where an allocation
            // is nothing), which every call's future would otherwise hold and copy.
            #[cfg(feature = "mcp")]
            Target::Mcp(tool, rules) => {
                let (tool, rules) = (tool.clone(), rules.clone());
                Answer::Host(Box::pin(self.execute_governed(&tool, &rules)).await?)
            }
            Target::Unknown => {
                // No tool runs: the record says the Unknown tool answered.
                let record = early(&self.request, &self.args, "unknown_tool");
                audit_early(self.agent(), None, record, None);
                Answer::Host(unknown_tool(self.agent(), self.request.name()))
            }
            Target::Parallel => {
                let args = std::mem::take(&mut self.args);
                Answer::Host(parallel::run(self.agent(), args).await?)
            }
        })
    }

    /// `before_execution`, an intervention check and the `tool_execute_before` extensions;
    /// the call's arguments become the ones they leave (on a failure, they stay as asked).
    async fn before_steps(&mut self) -> Result<(), ToolError> {
        match &self.target {
            Target::Library(tool, _) if tool.has_before_hook() => {
                tool.before_execution(self.context.to_ffi(), json_text(&self.args))
                    .await?
            }
            _ => self.context.show_call(&self.args),
        }
        let agent = self.agent();
        agent.check_intervention().await?;
        let extensions = agent.host.extensions(agent.profile(), TOOL_EXECUTE_BEFORE);
        if extensions.is_empty() {
            return Ok(()); // no extensions: the data need not be built
        }
        // A copy: if an extension fails, the call's record has the arguments as asked.
        let before = ToolExecuteBefore::new(self.request.name().to_owned(), self.args.clone());
        self.args = self.context.run_point_with(&extensions, before).await?.args;
        Ok(())
    }

    /// The `tool_execute_after` extensions (they may change the message and `additional`,
    /// never `break_loop`), `after_execution` and an intervention check.
    async fn after_steps(&self, response: Response) -> Result<Response, ToolError> {
        let agent = self.agent();
        let extensions = agent.host.extensions(agent.profile(), TOOL_EXECUTE_AFTER);
        let response = if extensions.is_empty() {
            response // no extensions: the data need not be built
        } else {
            let break_loop = response.break_loop;
            let after = ToolExecuteAfter::new(self.request.name().to_owned(), response);
            let after = self.context.run_point_with(&extensions, after).await?;
            // Extensions may change the message and `additional`, never `break_loop`.
            after.response.with_break_loop(break_loop)
        };
        match &self.target {
            Target::Library(tool, _) if tool.has_after_hook() => {
                tool.after_execution(self.context.to_ffi(), &response)
                    .await?
            }
            _ => self.context.record_result(&response),
        }
        agent.intervention.check(Check::PauseOrStop).await?;
        Ok(response)
    }

    /// The `tool_execute_error` extensions of a failed call (not an intervention): read only;
    /// one that fails is logged, and the call's own error stands.
    async fn tool_execute_error(&self, error: &ToolError) {
        if error.kind() == ErrorKind::Intervention {
            return;
        }
        let agent = self.agent();
        let extensions = agent.host.extensions(agent.profile(), TOOL_EXECUTE_ERROR);
        if extensions.is_empty() {
            return;
        }
        let message = agent.mask(error.message().to_owned()).into_inner();
        let request = self.request.to_string();
        let data = ToolExecuteError::new(request, error.kind().to_string(), message);
        if let Err(e) = self.context.run_point_with(&extensions, data).await {
            tracing::warn!("a {TOOL_EXECUTE_ERROR} extension failed: {}", e.message());
        }
    }

    /// Ends the log item of a call that failed, and returns the error to report. An
    /// interrupted call's result is its progress so far: in the history (or, for a call of
    /// `parallel`, in its error, since the combined result reports it).
    fn finish_failed(&self, error: ToolError) -> ToolError {
        let agent = self.agent();
        let interrupted =
            error.kind() == ErrorKind::Intervention && agent.intervention.interrupted();
        let content = match interrupted {
            true => "(interrupted by the user)".to_owned(),
            false => format!("error ({}): {}", error.kind(), error.message()),
        };
        let content = agent.mask(content);
        let mut progress = String::new();
        agent.transcript.update_log(self.context.log_id, |item| {
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
        if self.context.nested {
            return ToolError::intervention(content);
        }
        add_tool_result(agent, &self.request, content);
        error
    }
}

/// Adds a tool's result that is not its response (it was interrupted) to the history.
fn add_tool_result(agent: &Agent, request: &ToolName, content: String) {
    let message = HistoryMessage::tool_result(request.to_string(), agent.mask(content), None);
    agent.transcript.add_history(message);
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
