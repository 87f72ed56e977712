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

use rmcp::model::{CallToolResult, DetailedTask, JsonObject, Task, TaskPayload, TaskStatus};
use rmcp::task_manager::current_timestamp;
use rmcp::ErrorData;
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
}

impl Entry {
    fn expired(&self) -> bool {
        self.created.elapsed() >= self.ttl
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
        let cancel = CancellationToken::new();
        let entry = Entry {
            task: task.clone(),
            payload: TaskPayload::Working,
            created: Instant::now(),
            ttl,
            cancel: cancel.clone(),
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

    /// `tasks/update`: a task of this server never asks for input, so there is nothing to
    /// deliver; known ids are acknowledged.
    pub(crate) fn update(&self, id: &str) -> Result<(), ErrorData> {
        self.get(id).map(|_| ())
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
        assert!(tasks.cancel("nope").is_err() && tasks.update("nope").is_err());
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
