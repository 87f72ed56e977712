//! A call that gathers its input in rounds and then becomes a task ([`crate::escalate`]).

use super::as_task::task_outcome;
use super::*;
use crate::escalate::Escalation;
use crate::tools::TaskPlan;

impl Session {
    /// Runs `request` in the background and answers with whichever comes first: its task,
    /// made when the tool takes the last answer `round` brought (`CreateTaskResult`; the run
    /// goes on as the task), or the end of the run (what it asked, or its result: a task
    /// already done when the tool's calls must be tasks). A client's cancellation before the
    /// task is made cancels the run.
    pub(super) async fn input_first(
        &self,
        plan: TaskPlan,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
        round: Arc<RoundTrip>,
        yes_to_writes: bool,
    ) -> Result<CallToolResponse, ErrorData> {
        let cancel = CancellationToken::new();
        let tasks = self.shared.tasks.clone();
        let (escalation, mut made) = Escalation::new(tasks, plan.deadline, cancel.clone(), &round);
        let retry = request.clone();
        let request_ct = context.ct.clone();
        let mut ended = self.run_escalating(request, context, &round, &escalation, yes_to_writes);
        let ended = tokio::select! {
            biased;
            Ok(task) = &mut made => return Ok(CreateTaskResult::new(task).into()),
            ended = &mut ended => ended,
            () = request_ct.cancelled() => {
                cancel.cancel();
                (&mut ended).await
            }
        };
        let result = ended.map_err(|_| {
            ErrorData::internal_error("the call ended without an outcome".to_owned(), None)
        })??;
        let answered = self.after_round(&round, &retry, result)?;
        match answered {
            CallToolResponse::Complete(result) if plan.required => {
                // The tool's calls must be tasks: one already done.
                let Some((task, _)) = self.shared.tasks.create(plan.deadline) else {
                    return Ok(CallToolResponse::Complete(result));
                };
                self.shared.tasks.finish(&task.task_id, Ok(result));
                Ok(CreateTaskResult::new(task).into())
            }
            answered => Ok(answered),
        }
    }

    /// Starts the run of an input-first call: once it has become a task its outcome goes to
    /// the task, else to the receiver returned.
    fn run_escalating(
        &self,
        request: CallToolRequestParams,
        mut context: RequestContext<RoleServer>,
        round: &Arc<RoundTrip>,
        escalation: &Arc<Escalation>,
        yes_to_writes: bool,
    ) -> tokio::sync::oneshot::Receiver<Result<CallToolResult, ErrorData>> {
        let (send, ended) = tokio::sync::oneshot::channel();
        context.ct = escalation.cancel_token();
        context.meta.0.remove("progressToken");
        let threshold = Arc::new(LogThreshold::of_request(context.meta.log_level()));
        let (shared, approved) = (self.shared.clone(), self.approved.clone());
        let (round, escalation) = (round.clone(), escalation.clone());
        let call_id = context.id.to_string();
        let span = telemetry::task_span(&request.name, "");
        let running = async move {
            let approvals = call::Approvals {
                session: &approved,
                unavailable: None,
                yes_to_writes,
                log_threshold: &threshold,
                round: Some(round.clone()),
                task: None,
                escalation: Some(escalation.clone()),
            };
            let name = request.name.to_string();
            let result =
                call::call_with_kind(&shared.host, &shared.profile, approvals, request, context);
            let result = toolhost::telemetry::with_call_id(&call_id, result).await;
            match escalation.task_id() {
                Some(id) => shared
                    .tasks
                    .finish(id, task_outcome(&name, result, Some(&round))),
                None => {
                    let _ = send.send(result.map(|(result, _)| result));
                }
            }
        };
        tokio::spawn(span.own(running));
        ended
    }
}
