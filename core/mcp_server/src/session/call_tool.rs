//! `tools/call`: which tools a listener serves, the approval asked first, and whether the
//! call runs plainly, as a task, or in rounds and then as a task.

use super::*;

impl Session {
    /// Serves one `tools/call`.
    pub(super) async fn serve_call(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if self.shared.is_read_only() {
            self.refuse_unless_read(&request.name).await?;
        }
        let yes = self
            .shared
            .yes_to_writes
            .load(std::sync::atomic::Ordering::SeqCst);
        // A 2026-07-28 client is asked through the call's round trip, on any transport.
        let round = match cache_hints::is_stateless(&context) {
            true => {
                let capabilities = context.client_capabilities().unwrap_or_default();
                let key = self.state_key();
                Some(Arc::new(RoundTrip::begin(key, &request, capabilities)?))
            }
            false => None,
        };
        if let Some(round) = &round {
            if let Some(asked) = self.approval_first(round, &request, yes).await? {
                return Ok(asked);
            }
        }
        if let Some(plan) = self.task_deadline(&request, &context).await? {
            if let (true, Some(round)) = (plan.input_first, &round) {
                let round = round.clone();
                return self.input_first(plan, request, context, round, yes).await;
            }
            if let Some((task, cancel)) = self.shared.tasks.create(plan.deadline) {
                let id = task.task_id.clone();
                self.run_task(id, cancel, request, context, round, yes);
                return Ok(CreateTaskResult::new(task).into());
            }
        }
        self.plain_call(request, context, round, yes).await
    }

    /// Refuses a tool other than a read tool (a listener without a token serves only those).
    async fn refuse_unless_read(&self, name: &str) -> Result<(), ErrorData> {
        let listed = self.blocking("listing the tools", tools::list).await?;
        match listed.iter().find(|t| t.name == name) {
            Some(tool) if tools::is_read(tool) => Ok(()),
            Some(_) => {
                let message = format!(
                    "tool '{}' is not served: without a token (--token-secret) this listener serves only read tools; start it with --allow-writes-without-token to serve the others",
                    crate::echo::echoed(name)
                );
                Err(ErrorData::invalid_params(message, None))
            }
            None => {
                let message = format!("Unknown tool: {}", crate::echo::echoed(name));
                Err(ErrorData::invalid_params(message, None))
            }
        }
    }

    /// A 2026-07-28 call of a tool the user approves first: its approval asked in an
    /// `InputRequiredResult`, before the tool runs; `None` when none is to be asked.
    async fn approval_first(
        &self,
        round: &RoundTrip,
        request: &CallToolRequestParams,
        yes: bool,
    ) -> Result<Option<CallToolResponse>, ErrorData> {
        if !round.elicits() || round.answer(APPROVAL).is_some() {
            return Ok(None);
        }
        let asking = request.clone();
        let asked = self
            .blocking("looking up the tool's policy", move |host, profile| {
                approval::asked_before_running(host, profile, &asking, yes)
            })
            .await?;
        let Some(asked) = asked else {
            return Ok(None);
        };
        let form = approval::approval_request(&asked)
            .map_err(|e| ErrorData::internal_error(format!("the approval form: {e}"), None))?;
        round.ask(APPROVAL.to_owned(), form);
        Ok(Some(
            round.input_required(self.state_key(), request)?.into(),
        ))
    }

    /// Runs the call in place and answers with its result, or, for a 2026-07-28 call, with
    /// what it asked ([`Session::after_round`]).
    async fn plain_call(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
        round: Option<Arc<RoundTrip>>,
        yes_to_writes: bool,
    ) -> Result<CallToolResponse, ErrorData> {
        // A 2026-07-28 request says its own log level (none: no log messages).
        let threshold = match round.is_some() {
            true => Arc::new(LogThreshold::of_request(context.meta.log_level())),
            false => self.log_threshold.clone(),
        };
        let approvals = call::Approvals {
            session: &self.approved,
            unavailable: if round.is_some() {
                None
            } else {
                self.no_approvals
            },
            yes_to_writes,
            log_threshold: &threshold,
            round: round.clone(),
            task: None,
            escalation: None,
        };
        let call_id = context.id.to_string();
        // Only a 2026-07-28 round answers with the request again (its state): a plain call's
        // arguments are not copied (a large one would be held twice while the tool runs).
        let retry = round.as_ref().map(|_| request.clone());
        let shared = &self.shared;
        let result = call::call(&shared.host, &shared.profile, approvals, request, context);
        let result = toolhost::telemetry::with_call_id(&call_id, result).await?;
        match (round.as_deref(), retry) {
            (Some(round), Some(request)) => self.after_round(round, &request, result),
            _ => Ok(result.into()),
        }
    }

    /// The answer of a run of `request` that ended with `result`: for a 2026-07-28 call that
    /// asked something, the question (an `InputRequiredResult`) instead of the result; for one
    /// that failed having asked only for what the client did not declare, -32021.
    pub(super) fn after_round(
        &self,
        round: &RoundTrip,
        request: &CallToolRequestParams,
        result: CallToolResult,
    ) -> Result<CallToolResponse, ErrorData> {
        if round.asks() {
            return Ok(round.input_required(self.state_key(), request)?.into());
        }
        if result.is_error == Some(true) {
            if let Some(missing) = round.missing_capabilities() {
                return Err(missing);
            }
        }
        Ok(result.into())
    }
}
