//! Tool calls that answer as tasks: the Tasks extension (`io.modelcontextprotocol/tasks`,
//! SEP-2663) of MCP 2026-07-28.
//!
//! The server decides, per call, whether a call becomes a task: it does when the request is
//! of 2026-07-28 and declares the extension in its `_meta` client capabilities, and the
//! tool's deadline (its `[tools.<tool>] timeout_seconds`, else its declared timeout) is at
//! least [`TASK_MIN_DEADLINE`]. The client then gets a `CreateTaskResult` at once and polls
//! `tasks/get`; `tasks/cancel` ends the call as a client's cancellation does. The 2026-07-28
//! extension has no `tasks/result` and no `tasks/list` (they answer `-32601`), and clients
//! of 2025-11-25 and earlier get their results as before (that version's experimental
//! `task` parameter is not served: rmcp 3.11 models only the extension).
//!
//! A tool's own question inside a task (`Context::elicit`, `Context::sample`) turns the task
//! `input_required`, with the question in its `inputRequests` (`elicit-1`, `sample-1`, ... in
//! the order the tool asks); the client answers with `tasks/update`, whose `inputResponses`
//! go to the waiting tool, and the task is `working` again.
//!
//! Tasks are held in memory by the process that made them, at most [`DEFAULT_MAX_TASKS`] at
//! a time (running or finished and not yet expired); a call made while the store is full
//! runs as a plain call. A task's `ttlMs` covers its every attempt and then
//! [`RESULT_RETENTION`]; a finished task is forgotten after it, and `tasks/get` of it (or of
//! an id this process never made) is invalid params (`-32602`).

use std::collections::HashMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolResult, DetailedTask, InputRequest, InputRequests, InputResponses, JsonObject, Task,
    TaskPayload, TaskStatus,
};
use rmcp::task_manager::current_timestamp;
use rmcp::ErrorData;
use serde_json::Value;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::lock;

/// The least deadline of a tool whose calls become tasks (for a client that declares the
/// extension): a call that may take a minute is better polled than waited on.
pub const TASK_MIN_DEADLINE: Duration = Duration::from_secs(60);

/// How many tasks a server holds at most, running or finished and not yet expired: on stdio
/// the tasks of its one client, over HTTP those of every client of the listener.
pub const DEFAULT_MAX_TASKS: usize = 32;

/// How long a finished task's result is kept for the client to fetch.
pub const RESULT_RETENTION: Duration = Duration::from_secs(300);

/// The polling interval suggested to clients.
const POLL_INTERVAL_MS: u64 = 500;

/// One task: its metadata, its state, and how to cancel it.
struct Entry {
    task: Task,
    payload: TaskPayload,
    /// When it was made, and how long it is kept from then.
    created: Instant,
    ttl: Duration,
    /// Cancels the call (`tasks/cancel`, or the TTL's end).
    cancel: CancellationToken,
    /// The tool's questions the client has not answered yet, and where each answer goes.
    asked: InputRequests,
    waiting: HashMap<String, oneshot::Sender<Value>>,
    /// How many questions of each kind the tool asked (their keys' numbers).
    counts: HashMap<&'static str, usize>,
}

impl Entry {
    fn expired(&self) -> bool {
        self.created.elapsed() >= self.ttl
    }

    /// `input_required` with the open questions, or `working` when none is left; a task that
    /// ended stays as it ended.
    fn show_questions(&mut self) {
        if self.payload.status().is_terminal() {
            return;
        }
        self.payload = match self.asked.is_empty() {
            true => TaskPayload::Working,
            false => TaskPayload::InputRequired {
                input_requests: self.asked.clone(),
            },
        };
        self.task.status = self.payload.status();
        self.task.last_updated_at = current_timestamp();
    }
}

/// The tasks of one server (every session shares them).
pub(crate) struct Tasks {
    entries: Mutex<HashMap<String, Entry>>,
    max: AtomicUsize,
}

impl Default for Tasks {
    fn default() -> Self {
        Self {
            entries: Mutex::default(),
            max: AtomicUsize::new(DEFAULT_MAX_TASKS),
        }
    }
}

impl Tasks {
    /// Holds at most `max` tasks (0: no call becomes a task).
    pub(crate) fn limit(&self, max: usize) {
        self.max.store(max, Ordering::SeqCst);
    }

    /// A new working task for a call that may run for `deadline` (every attempt), and the
    /// token that cancels it; `None` when the store is full.
    pub(crate) fn create(&self, deadline: Duration) -> Option<(Task, CancellationToken)> {
        self.create_with(deadline, CancellationToken::new())
    }

    /// [`Tasks::create`] for a call already running, which `cancel` cancels.
    pub(crate) fn create_with(
        &self,
        deadline: Duration,
        cancel: CancellationToken,
    ) -> Option<(Task, CancellationToken)> {
        let id = new_id()?;
        let ttl = deadline + RESULT_RETENTION;
        let mut entries = lock(&self.entries);
        sweep(&mut entries);
        if entries.len() >= self.max.load(Ordering::SeqCst) {
            return None;
        }
        let now = current_timestamp();
        let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        let task = Task::new(id.clone(), TaskStatus::Working, now.clone(), now)
            .with_ttl_ms(ttl_ms)
            .with_poll_interval_ms(POLL_INTERVAL_MS);
        let entry = Entry {
            task: task.clone(),
            payload: TaskPayload::Working,
            created: Instant::now(),
            ttl,
            cancel: cancel.clone(),
            asked: InputRequests::new(),
            waiting: HashMap::new(),
            counts: HashMap::new(),
        };
        entries.insert(id, entry);
        Some((task, cancel))
    }

    /// Records how task `id`'s call ended: a result (`completed`, or `cancelled` when it was
    /// cancelled and ended with an error result), or a protocol error (`failed`).
    pub(crate) fn finish(&self, id: &str, outcome: Result<CallToolResult, ErrorData>) {
        let mut entries = lock(&self.entries);
        let Some(entry) = entries.get_mut(id) else {
            return;
        };
        let cancelled = entry.cancel.is_cancelled();
        entry.asked.clear();
        entry.waiting.clear();
        entry.payload = match outcome {
            Ok(result) if cancelled && result.is_error == Some(true) => TaskPayload::Cancelled,
            Ok(result) => TaskPayload::Completed {
                result: object(&result),
            },
            Err(error) => {
                entry.task.status_message = Some(error.message.to_string());
                TaskPayload::Failed {
                    error: object(&error),
                }
            }
        };
        if cancelled && matches!(entry.payload, TaskPayload::Cancelled) {
            entry.task.status_message = Some("cancelled by the client".to_owned());
        }
        entry.task.status = entry.payload.status();
        entry.task.last_updated_at = current_timestamp();
    }

    /// `tasks/get`: the task as it is now.
    pub(crate) fn get(&self, id: &str) -> Result<DetailedTask, ErrorData> {
        let mut entries = lock(&self.entries);
        sweep(&mut entries);
        let entry = entries.get(id).ok_or_else(|| unknown(id))?;
        Ok(DetailedTask::new(entry.task.clone(), entry.payload.clone()))
    }

    /// `tasks/cancel`: cancels the call, if it still runs (the task turns `cancelled` when
    /// the call has ended).
    pub(crate) fn cancel(&self, id: &str) -> Result<(), ErrorData> {
        let mut entries = lock(&self.entries);
        sweep(&mut entries);
        let entry = entries.get(id).ok_or_else(|| unknown(id))?;
        if !entry.payload.status().is_terminal() {
            entry.cancel.cancel();
        }
        Ok(())
    }

    /// Asks the client `request`, a question of `kind` (`elicit`, `sample`) the tool of task
    /// `id` asks: it is shown in the task's `inputRequests` under a new key (`elicit-1`, ...)
    /// until [`Tasks::update`] brings its answer to the receiver. `None` when the task is
    /// gone or has ended.
    pub(crate) fn ask(
        &self,
        id: &str,
        kind: &'static str,
        request: InputRequest,
    ) -> Option<(String, oneshot::Receiver<Value>)> {
        let mut entries = lock(&self.entries);
        let entry = entries.get_mut(id)?;
        if entry.payload.status().is_terminal() {
            return None;
        }
        let count = entry.counts.entry(kind).or_insert(0);
        *count += 1;
        let key = format!("{kind}-{count}");
        let (answer, answered) = oneshot::channel();
        entry.asked.insert(key.clone(), request);
        entry.waiting.insert(key.clone(), answer);
        entry.show_questions();
        Some((key, answered))
    }

    /// Takes back task `id`'s question `key`, which the tool no longer waits for (it gave up
    /// waiting).
    pub(crate) fn withdraw(&self, id: &str, key: &str) {
        if let Some(entry) = lock(&self.entries).get_mut(id) {
            entry.asked.remove(key);
            entry.waiting.remove(key);
            entry.show_questions();
        }
    }

    /// `tasks/update`: `responses` answer task `id`'s open questions, each by its key. A key
    /// that is not an open question of the task (never asked, answered already, or given up
    /// on) is ignored, as the Tasks extension says a server should: the answers to open
    /// questions are delivered all the same. Returns how many were delivered.
    pub(crate) fn update(&self, id: &str, responses: InputResponses) -> Result<usize, ErrorData> {
        let mut entries = lock(&self.entries);
        sweep(&mut entries);
        let entry = entries.get_mut(id).ok_or_else(|| unknown(id))?;
        let mut delivered = 0;
        for (key, answer) in responses {
            let Some(waiting) = entry.waiting.remove(&key) else {
                let shown: String = key.chars().take(64).collect();
                tracing::debug!("tasks/update of task {id}: no open input request '{shown}'");
                continue;
            };
            entry.asked.remove(&key);
            if waiting.send(answer).is_ok() {
                delivered += 1;
            }
        }
        entry.show_questions();
        Ok(delivered)
    }

    /// How many tasks are still running (not completed, failed or cancelled).
    pub(crate) fn running(&self) -> usize {
        let entries = lock(&self.entries);
        entries
            .values()
            .filter(|e| !e.payload.status().is_terminal())
            .count()
    }

    /// Cancels every task still running (the server stops).
    pub(crate) fn cancel_all(&self) {
        for entry in lock(&self.entries).values() {
            if !entry.payload.status().is_terminal() {
                entry.cancel.cancel();
            }
        }
    }

    /// How many tasks are held now.
    #[cfg(test)]
    fn len(&self) -> usize {
        lock(&self.entries).len()
    }
}

/// Forgets expired tasks; one still running past its TTL (which its deadline makes rare) is
/// cancelled and forgotten.
fn sweep(entries: &mut HashMap<String, Entry>) {
    entries.retain(|_, entry| {
        let expired = entry.expired();
        if expired {
            entry.cancel.cancel();
        }
        !expired
    });
}

/// The error of an unknown (or forgotten) task id.
fn unknown(id: &str) -> ErrorData {
    let shown: String = id.chars().take(64).collect();
    ErrorData::invalid_params(
        format!("unknown task '{shown}': no such task on this server, or it expired"),
        None,
    )
}

/// 128 random bits as hex: ids are unguessable, as the extension requires.
fn new_id() -> Option<String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).ok()?;
    let mut id = String::with_capacity(32);
    for byte in bytes {
        let _ = write!(id, "{byte:02x}");
    }
    Some(id)
}

fn object(value: &impl serde::Serialize) -> JsonObject {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::Object(map)) => map,
        _ => JsonObject::new(),
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::ContentBlock;

    use super::*;

    #[test]
    fn a_task_runs_to_its_result_and_unknown_ids_are_invalid_params() {
        let tasks = Tasks::default();
        let (task, _cancel) = tasks.create(Duration::from_secs(60)).unwrap();
        assert_eq!(task.task_id.len(), 32);
        assert_eq!(task.ttl_ms, Some(360_000));
        assert_eq!(
            tasks.get(&task.task_id).unwrap().status(),
            TaskStatus::Working
        );
        let result = CallToolResult::success(vec![ContentBlock::text("done")]);
        tasks.finish(&task.task_id, Ok(result));
        let got = tasks.get(&task.task_id).unwrap();
        let TaskPayload::Completed { result } = got.payload else {
            panic!("{got:?}")
        };
        assert_eq!(result["content"][0]["text"], "done");
        let e = tasks.get("nope").unwrap_err();
        assert_eq!(e.code, rmcp::model::ErrorCode::INVALID_PARAMS);
        assert!(tasks.cancel("nope").is_err());
        assert!(tasks.update("nope", InputResponses::new()).is_err());
    }

    #[test]
    fn a_cancelled_call_that_ends_in_error_is_cancelled_and_a_tool_error_is_completed() {
        let tasks = Tasks::default();
        let (task, cancel) = tasks.create(Duration::from_secs(60)).unwrap();
        tasks.cancel(&task.task_id).unwrap();
        assert!(cancel.is_cancelled());
        let stopped = CallToolResult::error(vec![ContentBlock::text("intervention")]);
        tasks.finish(&task.task_id, Ok(stopped.clone()));
        let got = tasks.get(&task.task_id).unwrap();
        assert_eq!(got.status(), TaskStatus::Cancelled);

        let (other, _) = tasks.create(Duration::from_secs(60)).unwrap();
        tasks.finish(&other.task_id, Ok(stopped));
        assert_eq!(
            tasks.get(&other.task_id).unwrap().status(),
            TaskStatus::Completed
        );

        let (failed, _) = tasks.create(Duration::from_secs(60)).unwrap();
        tasks.finish(
            &failed.task_id,
            Err(ErrorData::internal_error("boom", None)),
        );
        let got = tasks.get(&failed.task_id).unwrap();
        assert_eq!(got.status(), TaskStatus::Failed);
        assert_eq!(got.task.status_message.as_deref(), Some("boom"));
    }

    fn question() -> InputRequest {
        let request = serde_json::json!({"method": "elicitation/create", "params": {
            "mode": "form", "message": "ok?",
            "requestedSchema": {"type": "object", "properties": {}}}});
        serde_json::from_value(request).unwrap()
    }

    #[test]
    fn a_question_makes_the_task_input_required_until_tasks_update_answers_it() {
        let tasks = Tasks::default();
        let (task, _cancel) = tasks.create(Duration::from_secs(60)).unwrap();
        let id = task.task_id;
        let (key, mut answered) = tasks.ask(&id, "elicit", question()).unwrap();
        assert_eq!(key, "elicit-1");
        let got = tasks.get(&id).unwrap();
        let TaskPayload::InputRequired { input_requests } = got.payload else {
            panic!("{got:?}")
        };
        assert_eq!(input_requests.keys().collect::<Vec<_>>(), ["elicit-1"]);

        // A key that is not open is ignored; the open one's answer is delivered.
        let mixed = InputResponses::from([
            ("elicit-1".to_owned(), serde_json::json!("yes")),
            ("elicit-2".to_owned(), serde_json::json!(2)),
        ]);
        assert_eq!(tasks.update(&id, mixed.clone()).unwrap(), 1);
        assert_eq!(answered.try_recv().unwrap(), "yes");
        assert_eq!(tasks.get(&id).unwrap().status(), TaskStatus::Working);
        // Answered once: the same key again is not open any more, and nothing is delivered.
        assert_eq!(tasks.update(&id, mixed).unwrap(), 0);

        // A question given up on is withdrawn; an ended task asks nothing.
        let (key, _) = tasks.ask(&id, "elicit", question()).unwrap();
        assert_eq!(key, "elicit-2");
        tasks.withdraw(&id, &key);
        assert_eq!(tasks.get(&id).unwrap().status(), TaskStatus::Working);
        tasks.finish(&id, Ok(CallToolResult::success(vec![])));
        assert!(tasks.ask(&id, "sample", question()).is_none());
    }

    #[test]
    fn the_store_is_bounded_and_forgets_expired_tasks() {
        let tasks = Tasks::default();
        tasks.limit(2);
        assert!(tasks.create(Duration::ZERO).is_some());
        assert!(tasks.create(Duration::from_secs(60)).is_some());
        // Full: the first is not expired yet (its result is kept RESULT_RETENTION).
        assert!(tasks.create(Duration::from_secs(60)).is_none());
        assert_eq!(tasks.len(), 2);
        // An entry past its TTL is forgotten and its call cancelled.
        let mut entries = lock(&tasks.entries);
        let entry = entries.values_mut().next().unwrap();
        entry.ttl = Duration::ZERO;
        let cancel = entry.cancel.clone();
        drop(entries);
        assert!(tasks.create(Duration::from_secs(60)).is_some());
        assert!(cancel.is_cancelled());
        assert_eq!(tasks.len(), 2);
    }
}
