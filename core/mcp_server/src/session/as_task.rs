//! A call that becomes a task (the Tasks extension): its deadline, and its run in the
//! background.

use super::*;

impl Session {
    /// How long `request` may run when it is to become a task ([`crate::tasks`]): a request
    /// of 2026-07-28 that declares the Tasks extension, of a tool with a long deadline.
    pub(super) async fn task_deadline(
        &self,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<Option<tools::TaskPlan>, ErrorData> {
        let declares = context
            .client_capabilities()
            .is_some_and(|c| c.supports_tasks());
        if !cache_hints::is_stateless(context) {
            return Ok(None);
        }
        let name = request.name.to_string();
        if !declares {
            // A tool whose calls must be tasks cannot serve a client without the extension.
            let asking = name.clone();
            let required = self
                .blocking("looking up the tool", move |host, profile| {
                    tools::task_required(host, profile, &asking)
                })
                .await?;
            if required {
                let required: rmcp::model::ClientCapabilities = serde_json::from_value(
                    serde_json::json!({"extensions": {"io.modelcontextprotocol/tasks": {}}}),
                )
                .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
                return Err(ErrorData::missing_required_client_capability(required));
            }
            return Ok(None);
        }
        self.blocking("looking up the tool's deadline", move |host, profile| {
            tools::task_deadline(host, profile, &name)
        })
        .await
    }

    /// Runs `request` as task `id` in the background, through the same lifecycle as a plain
    /// call: `cancel` (`tasks/cancel`) stops it as a client's cancellation does, and its
    /// outcome is kept for `tasks/get`. The tool's questions are asked in the task
    /// ([`TaskQuestions`]). Progress is not sent for a task (the extension does not carry it).
    pub(super) fn run_task(
        &self,
        id: String,
        cancel: CancellationToken,
        request: CallToolRequestParams,
        mut context: RequestContext<RoleServer>,
        round: Option<Arc<RoundTrip>>,
        yes_to_writes: bool,
    ) {
        context.ct = cancel;
        context.meta.0.remove("progressToken");
        let shared = self.shared.clone();
        let (approved, threshold) = (self.approved.clone(), self.log_threshold.clone());
        let call_id = context.id.to_string();
        // A child of the request's span, which ends when the task is created.
        let span = telemetry::task_span(&request.name, &id);
        tracing::info!("tool {}: runs as task {id}", request.name);
        let running = async move {
            let approvals = call::Approvals {
                session: &approved,
                unavailable: None,
                yes_to_writes,
                log_threshold: &threshold,
                round: round.clone(),
                task: Some(TaskQuestions {
                    tasks: shared.tasks.clone(),
                    id: id.clone(),
                }),
                escalation: None,
            };
            let name = request.name.to_string();
            let result =
                call::call_with_kind(&shared.host, &shared.profile, approvals, request, context);
            let result = toolhost::telemetry::with_call_id(&call_id, result).await;
            let result = task_outcome(&name, result, round.as_deref());
            shared.tasks.finish(&id, result);
        };
        tokio::spawn(span.own(running));
    }
}

/// How a task's call ended, as the task records it: a bug or a crash of plugin code (an
/// internal error) is a protocol-level failure of the task (`failed`, with the error), not a
/// result; an approval asked inside the task (which cannot carry it) is an error result.
pub(super) fn task_outcome(
    name: &str,
    result: Result<(CallToolResult, Option<plugin_api::ErrorKind>), ErrorData>,
    round: Option<&RoundTrip>,
) -> Result<CallToolResult, ErrorData> {
    let result = match result {
        Ok((result, Some(plugin_api::ErrorKind::Internal))) => {
            let text = result
                .content
                .first()
                .and_then(|c| c.as_text())
                .map_or_else(String::new, |t| t.text.clone());
            Err(ErrorData::internal_error(text, None))
        }
        Ok((result, _)) => Ok(result),
        Err(e) => Err(e),
    };
    match (result, round) {
        (Ok(_), Some(round)) if round.asks() => {
            let text = format!(
                "tool '{name}' asked the client for an approval inside its task, which a task cannot carry: call it again without the tasks extension (io.modelcontextprotocol/tasks) in the request's client capabilities"
            );
            Ok(CallToolResult::error(vec![ContentBlock::text(text)]))
        }
        (result, _) => result,
    }
}
