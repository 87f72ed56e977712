//! What the audit log records: a tool call, an approval decision, a circuit-breaker change.
//! Plain structs with public fields; the caller masks arguments and metadata before it
//! builds them (the log never sees a secret).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One entry of the audit log. On disk its fields follow the line's chain header, with
/// `"type": "call" | "approval" | "breaker"` first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
// Records are read back one at a time (verify, tail), never kept in bulk: a call's record
// inline costs less than a box per record.
#[allow(clippy::large_enum_variant)]
pub enum AuditRecord {
    /// A tool call, from request to result.
    Call(CallRecord),
    /// An approval decision on its own (asked before the call ran, or a denial).
    Approval(ApprovalRecord),
    /// A circuit breaker changed state.
    Breaker(BreakerRecord),
    /// A call is about to run its tool: written before `execute`, completed by the call's
    /// [`CallRecord`] (same `execution_id`). One without a completion is a call that never
    /// finished (its process died).
    Start(StartRecord),
    /// A host that opened the log found a [`StartRecord`] whose process has ended without
    /// completing it: the call started and never finished.
    Unfinished(UnfinishedRecord),
    /// The first record of a segment: the log before it (now the file `previous`) ended in a
    /// damaged last line, kept there and no longer appended to.
    Segment(SegmentRecord),
    /// A completion of the host's model asked by an MCP server or a plugin (sampling): who
    /// asked, the decision, the outcome.
    Sampling(SamplingRecord),
    /// An MCP server's tool definition changed since it was approved, or the user approved
    /// the change (`usr/mcp-tools.lock`).
    Definition(DefinitionRecord),
    /// A writer found the log behind its head (records deleted from its end, the file emptied
    /// or replaced by an older copy) and recorded it before appending: the chain goes on
    /// from what is left, and `verify` reports this record on every later run.
    Cut(CutRecord),
}

impl AuditRecord {
    /// `call`, `approval`, `breaker`, `start`, `unfinished`, `segment`, `sampling`,
    /// `definition` or `cut`.
    pub const fn type_name(&self) -> &'static str {
        match self {
            Self::Call(_) => "call",
            Self::Approval(_) => "approval",
            Self::Breaker(_) => "breaker",
            Self::Start(_) => "start",
            Self::Unfinished(_) => "unfinished",
            Self::Segment(_) => "segment",
            Self::Sampling(_) => "sampling",
            Self::Definition(_) => "definition",
            Self::Cut(_) => "cut",
        }
    }
}

/// A tool call through the lifecycle.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallRecord {
    /// The call's execution id.
    pub execution_id: String,
    /// The agent's name (`A0`).
    pub agent: String,
    /// The agent's profile.
    pub profile: String,
    /// The tool's name.
    pub tool: String,
    /// The method (`name:method`), if one was asked for.
    pub method: Option<String>,
    /// The layer the tool came from (`usr`, `plugins/web`, ...).
    pub layer: String,
    /// The library file, relative to the root.
    pub file: String,
    /// The hex SHA-256 of the library's bytes, when known.
    pub library_sha256: Option<String>,
    /// The arguments, masked by the caller.
    pub args: Value,
    /// The approval decision, if the call needed one.
    pub approval: Option<ApprovalDecision>,
    /// Each attempt, in order (retries add attempts).
    pub attempts: Vec<Attempt>,
    /// When the call started, Unix milliseconds.
    pub started_ms: u64,
    /// When the call ended, Unix milliseconds.
    pub ended_ms: u64,
    /// How long the call took, in milliseconds.
    pub duration_ms: f64,
    /// `success`, an error kind, `denied` or `unavailable`.
    pub outcome: String,
    /// The tool's result metadata, masked by the caller.
    pub metadata: Option<Value>,
    /// Where a call that never reached its tool's `execute` ended: `resolve` (no tool, or an
    /// MCP server starting, failed or down), `admit` (denied, breaker open),
    /// `before` (a `before_execution` hook or a `tool_execute_before` extension failed) or
    /// `audit` (its start could not be recorded). `None` for a call that ran (or was refused
    /// by validation or approval, which its `approval` and `outcome` say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<String>,
    /// The sandbox an isolated tool ran in: what the kernel enforced and what the user had
    /// granted (`sandboxed; granted: net:443`); `None` for a tool without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<String>,
    /// What the host refused the call's plugins: each secret a tool or extension in a worker
    /// process asked for without its grant (`secret:API_KEY`). Empty for most calls.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<String>,
}

/// A call about to run its tool ([`AuditRecord::Start`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StartRecord {
    /// The call's execution id: its [`CallRecord`] has the same.
    pub execution_id: String,
    /// The id of the process that runs the call.
    pub pid: u32,
    /// The agent's name.
    pub agent: String,
    /// The agent's profile.
    pub profile: String,
    /// The tool's name.
    pub tool: String,
    /// The method, if one was asked for.
    pub method: Option<String>,
    /// The arguments, masked by the caller.
    pub args: Value,
    /// When the call started, Unix milliseconds.
    pub started_ms: u64,
}

/// A started call whose process ended before it finished ([`AuditRecord::Unfinished`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnfinishedRecord {
    /// The call's execution id.
    pub execution_id: String,
    /// The `seq` of its [`StartRecord`].
    pub start_seq: u64,
    /// The tool's name.
    pub tool: String,
    /// Why it is taken as never finished (`its process 1234 has ended`).
    pub reason: String,
}

/// The first record of a new segment ([`AuditRecord::Segment`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SegmentRecord {
    /// The file the log before this segment was kept in (`audit.3.jsonl`), in the same folder.
    pub previous: String,
    /// The bytes of `previous` that are good records: what follows them is the damaged tail.
    pub good_bytes: u64,
    /// The damaged tail's length in bytes.
    pub quarantined_bytes: u64,
    /// What was wrong with it: `cut off (no newline at its end)`, `longer than 1048576 bytes`
    /// or `not a record line`.
    pub reason: String,
}

/// Records lost from the log, found by a writer before it appended ([`AuditRecord::Cut`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CutRecord {
    /// The `seq` the head file said the chain had reached.
    pub head_seq: u64,
    /// The hash the head file gave for that record.
    pub head_hash: String,
    /// The `seq` of the last record the log still held (0: it was empty).
    pub found_seq: u64,
    /// What was found: `records 69 to 71 were deleted from the end`, `the log was emptied`,
    /// `the log was replaced by another copy`.
    pub reason: String,
    /// The process that found it.
    pub pid: u32,
}

/// One attempt of a call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attempt {
    /// The attempt's number, from 1.
    pub attempt: u32,
    /// The error kind it failed with, or `None` if it succeeded.
    pub error_kind: Option<String>,
    /// When it started, Unix milliseconds.
    pub started_ms: u64,
    /// How long it took, in milliseconds.
    pub duration_ms: f64,
}

/// Allowed or denied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// The call may run.
    Allowed,
    /// The call may not run.
    Denied,
}

impl Decision {
    /// `allowed` or `denied`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Allowed => "allowed",
            Self::Denied => "denied",
        }
    }
}

/// A decision and who made it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalDecision {
    /// Allowed or denied.
    pub decision: Decision,
    /// Who or what decided: `policy: read allowed`, `user: approved once`, `--yes`, ...
    pub source: String,
}

/// An approval decision, recorded when it is made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalRecord {
    /// The call's execution id.
    pub execution_id: String,
    /// The agent's name.
    pub agent: String,
    /// The agent's profile.
    pub profile: String,
    /// The tool's name.
    pub tool: String,
    /// The method, if one was asked for.
    pub method: Option<String>,
    /// The arguments, masked by the caller.
    pub args: Value,
    /// Allowed or denied.
    pub decision: Decision,
    /// Who or what decided.
    pub source: String,
    /// When it was decided, Unix milliseconds. Written as `at_ms`: the line's own `time_ms`
    /// is when it was appended.
    #[serde(rename = "at_ms")]
    pub time_ms: u64,
}

/// A circuit breaker's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BreakerState {
    /// Calls go through.
    Closed,
    /// Calls are refused.
    Open,
    /// One trial call goes through.
    HalfOpen,
}

impl BreakerState {
    /// `closed`, `open` or `half_open`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Closed => "closed",
            Self::Open => "open",
            Self::HalfOpen => "half_open",
        }
    }
}

/// A circuit breaker changed state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BreakerRecord {
    /// The tool.
    pub tool: String,
    /// The profile.
    pub profile: String,
    /// The state before.
    pub from: BreakerState,
    /// The state after.
    pub to: BreakerState,
    /// Why (`5 failures in a row`, `trial call succeeded`, ...).
    pub reason: String,
    /// When it changed, Unix milliseconds. Written as `at_ms` (see [`ApprovalRecord::time_ms`]).
    #[serde(rename = "at_ms")]
    pub time_ms: u64,
}

/// A sampling request ([`AuditRecord::Sampling`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SamplingRecord {
    /// The agent whose call it happened during.
    pub agent: String,
    /// The agent's profile.
    pub profile: String,
    /// Who asked: `mcp:<server>` for an MCP server, `tool` for the plugin tool itself.
    pub requester: String,
    /// The tool being called when it asked.
    pub tool: String,
    /// The model that answered or would have, if one is configured.
    pub model: Option<String>,
    /// The request (its messages, system prompt and token bound), masked.
    pub request: Value,
    /// Allowed or denied.
    pub decision: Decision,
    /// Who or what decided (`policy: ...`, `user: approved once`, `no model`, ...).
    pub source: String,
    /// `success`, an error kind, `denied` or `unavailable` (no model).
    pub outcome: String,
    /// The length of the answer in characters, when there is one.
    pub answer_chars: Option<u64>,
    /// When it was asked, Unix milliseconds. Written as `at_ms`.
    #[serde(rename = "at_ms")]
    pub time_ms: u64,
}

/// What happened to a pinned MCP tool definition ([`AuditRecord::Definition`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DefinitionEvent {
    /// The server gives a definition that differs from the one approved.
    Changed,
    /// The user approved the definition the server gives now.
    Approved,
}

impl DefinitionEvent {
    /// `changed` or `approved`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Changed => "changed",
            Self::Approved => "approved",
        }
    }
}

/// A pinned MCP tool definition changed, or its change was approved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DefinitionRecord {
    /// The MCP server.
    pub server: String,
    /// The tool's name on the server.
    pub tool: String,
    /// Changed or approved.
    pub event: DefinitionEvent,
    /// The hex SHA-256 of the definition approved before (empty for a tool the server did not
    /// have when it was first seen).
    pub approved_sha256: String,
    /// The hex SHA-256 of the definition the server gives now.
    pub now_sha256: String,
    /// The members of the definition that differ (`description`, `inputSchema`, ...).
    pub members: Vec<String>,
    /// For a change: whether the tool is held back until approved (always, since a changed
    /// definition is never offered unapproved; records written before that say `false` when
    /// library pinning was off).
    pub held: bool,
    /// When it happened, Unix milliseconds. Written as `at_ms`.
    #[serde(rename = "at_ms")]
    pub time_ms: u64,
}
