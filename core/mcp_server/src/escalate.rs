//! A call that gathers its input in `InputRequiredResult` rounds and then becomes a task
//! (SEP-2663's composition of multi round-trip requests and Tasks), for a tool that says so
//! ([`plugin_api::ToolInfo::input_before_task()`]).
//!
//! Each round runs the tool from the start, as any 2026-07-28 round does. The task is made in
//! the round whose answers the tool takes all of: the moment it takes the last answer the
//! client brought (the approval's aside), the call's `CreateTaskResult` goes back and the run
//! goes on as that task; what the tool asks after that comes through the task
//! (`inputRequests` on `tasks/get`, answered with `tasks/update`). A first round brings no
//! answers: it asks (an `InputRequiredResult`) or runs to its end.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use rmcp::model::Task;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::asker::TaskQuestions;
use crate::lock;
use crate::round_trip::{RoundTrip, APPROVAL};
use crate::tasks::Tasks;

/// The task a running call becomes once it has taken the client's answers.
pub(crate) struct Escalation {
    tasks: Arc<Tasks>,
    deadline: Duration,
    /// Cancels the run: the task's `tasks/cancel` once there is one.
    cancel: CancellationToken,
    /// The keys of the answers the client brought, not yet taken by the tool.
    untaken: Mutex<BTreeSet<String>>,
    /// The task's id, once made.
    task: OnceLock<String>,
    /// Where the new task goes (the request waiting to answer with it).
    made: Mutex<Option<oneshot::Sender<Task>>>,
}

impl Escalation {
    /// The escalation of the run of `round`, which `cancel` cancels and which may run for
    /// `deadline`; and where its task comes when made.
    pub(crate) fn new(
        tasks: Arc<Tasks>,
        deadline: Duration,
        cancel: CancellationToken,
        round: &RoundTrip,
    ) -> (Arc<Self>, oneshot::Receiver<Task>) {
        let untaken = round
            .answered()
            .filter(|key| *key != APPROVAL)
            .map(str::to_owned)
            .collect();
        let (made, receiver) = oneshot::channel();
        let escalation = Self {
            tasks,
            deadline,
            cancel,
            untaken: Mutex::new(untaken),
            task: OnceLock::new(),
            made: Mutex::new(Some(made)),
        };
        (Arc::new(escalation), receiver)
    }

    /// The tool took the client's answer `key`: the last one makes the task (unless the store
    /// of tasks is full: then the call goes on as a plain call).
    pub(crate) fn took(&self, key: &str) {
        let mut untaken = lock(&self.untaken);
        if !untaken.remove(key) || !untaken.is_empty() {
            return;
        }
        drop(untaken);
        let Some(made) = lock(&self.made).take() else {
            return;
        };
        let Some((task, _)) = self.tasks.create_with(self.deadline, self.cancel.clone()) else {
            tracing::info!("the store of tasks is full: the call goes on as a plain call");
            return;
        };
        let _ = self.task.set(task.task_id.clone());
        tracing::info!(
            "the call took its answers and runs as task {}",
            task.task_id
        );
        let _ = made.send(task);
    }

    /// The token that cancels the run.
    pub(crate) fn cancel_token(&self) -> CancellationToken {
        self.cancel.clone()
    }

    /// The task's id, once made.
    pub(crate) fn task_id(&self) -> Option<&str> {
        self.task.get().map(String::as_str)
    }

    /// The task's questions, once it is made.
    pub(crate) fn questions(&self) -> Option<TaskQuestions> {
        Some(TaskQuestions {
            tasks: self.tasks.clone(),
            id: self.task.get()?.clone(),
        })
    }
}
