//! A governed call's audit record: what was asked, decided and tried, and how it ended. One
//! hash-chained line per call in `usr/audit/audit.jsonl` (see [`crate::audit`]).

use std::borrow::Cow;
use std::fmt;
use std::sync::OnceLock;
use std::time::Instant;

use serde::Serialize;
use serde_json::{Map, Value};

use super::approval::DecisionSource;
use super::{CallRules, Transition};
use crate::audit::{
    now_ms, ApprovalRecord, Attempt, Audit, AuditError, AuditRecord, BreakerRecord, Decision,
};
use crate::layout::ToolName;
use crate::secrets::SecretStore;
use plugin_api::ToolError;

/// What a governed call did, gathered while it runs; nothing (not even the clock) when the
/// call is not audited.
pub(crate) struct Trail {
    /// When the call started; `None` when it is not audited.
    started: Option<(Instant, u64)>,
    /// The call's number in this process (part of its execution id).
    number: u64,
    pub(crate) approval: Option<(bool, DecisionSource)>,
    pub(crate) attempts: Vec<Attempt>,
    /// Where the call ended without running, if it did (see
    /// [`CallRecord::stage`](crate::audit::CallRecord::stage)).
    pub(crate) stage: Option<&'static str>,
}

/// When one attempt started, for its record; `None` when the call is not audited.
pub(crate) struct AttemptStart(Option<(Instant, u64)>);

impl Trail {
    /// A new trail; `audited` says whether it will be written.
    pub(crate) fn start(audited: bool) -> Self {
        Self {
            started: audited.then(|| (Instant::now(), now_ms())),
            number: if audited { next_number() } else { 0 },
            approval: None,
            attempts: Vec::new(),
            stage: None,
        }
    }

    /// Whether the call will be written to the audit.
    pub(crate) fn audited(&self) -> bool {
        self.started.is_some()
    }

    /// Notes the decision on the call's approval.
    pub(crate) fn approval(&mut self, allowed: bool, source: impl FnOnce() -> DecisionSource) {
        if self.started.is_some() {
            self.approval = Some((allowed, source()));
        }
    }

    /// The start of an attempt.
    pub(crate) fn attempt_starts(&self) -> AttemptStart {
        AttemptStart(self.started.map(|_| (Instant::now(), now_ms())))
    }

    /// Records one attempt of `execute`, and how it ended.
    pub(crate) fn attempt(&mut self, start: AttemptStart, error: Option<&ToolError>) {
        let Some((started, started_ms)) = start.0 else {
            return;
        };
        self.attempts.push(Attempt {
            attempt: self.attempts.len() as u32 + 1,
            error_kind: error.map(|e| e.kind().as_str().to_owned()),
            started_ms,
            duration_ms: started.elapsed().as_secs_f64() * 1e3,
        });
    }
}

/// The next call number of this process, from 1: two calls of one process never share one,
/// whatever their threads and start times.
fn next_number() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// A random number drawn once per process, in execution ids beside the process id: two
/// processes writing to one root (a process id reused, or the same id in two containers'
/// PID namespaces) do not share ids.
fn process_nonce() -> u32 {
    static NONCE: OnceLock<u32> = OnceLock::new();
    *NONCE.get_or_init(|| {
        use std::hash::{BuildHasher as _, Hasher as _};
        // `RandomState` is seeded from the system's randomness.
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u32(std::process::id());
        hasher.finish() as u32
    })
}

/// This process's id, asked of the system once (each ask is a system call).
fn process_id() -> u32 {
    static PID: OnceLock<u32> = OnceLock::new();
    *PID.get_or_init(std::process::id)
}

fn decision(allowed: bool) -> Decision {
    match allowed {
        true => Decision::Allowed,
        false => Decision::Denied,
    }
}

/// A call's record as written: the fields of [`CallRecord`](crate::audit::CallRecord), in its order, borrowed from the
/// call (a test checks that it reads back as a `CallRecord`).
#[derive(Serialize)]
#[serde(tag = "type", rename = "call")]
struct CallLine<'a> {
    #[serde(serialize_with = "display")]
    execution_id: &'a ExecutionId<'a>,
    agent: &'a str,
    profile: &'a str,
    tool: &'a str,
    method: Option<&'a str>,
    layer: &'a str,
    file: &'a str,
    library_sha256: Option<&'a str>,
    args: MaybeMasked<'a>,
    approval: Option<ApprovalLine<'a>>,
    attempts: &'a [Attempt],
    started_ms: u64,
    ended_ms: u64,
    duration_ms: f64,
    outcome: &'a str,
    metadata: Option<MaybeMasked<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stage: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sandbox: Option<&'a str>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    refused: &'a [String],
}

/// A call's start as written: the fields of [`StartRecord`](crate::audit::StartRecord),
/// borrowed.
#[derive(Serialize)]
#[serde(tag = "type", rename = "start")]
struct StartLine<'a> {
    #[serde(serialize_with = "display")]
    execution_id: &'a ExecutionId<'a>,
    pid: u32,
    agent: &'a str,
    profile: &'a str,
    tool: &'a str,
    method: Option<&'a str>,
    args: MaybeMasked<'a>,
    started_ms: u64,
}

/// [`ApprovalDecision`](crate::audit::ApprovalDecision), borrowed.
#[derive(Serialize)]
struct ApprovalLine<'a> {
    decision: Decision,
    #[serde(serialize_with = "display")]
    source: &'a DecisionSource,
}

/// `<pid>-<agent>-<start ms>`: a call's execution id.
struct ExecutionId<'a> {
    pid: u32,
    /// [`process_nonce`].
    nonce: u32,
    agent: &'a str,
    started_ms: u64,
    /// The call's number in its process ([`next_number`]).
    number: u64,
}

/// `PID-AGENT-STARTED_MS-NUMBER.NONCE`: unique per root across processes and threads.
impl fmt::Display for ExecutionId<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}-{}-{}-{}.{:08x}",
            self.pid, self.agent, self.started_ms, self.number, self.nonce
        )
    }
}

/// A JSON object as the audit may hold it: as it is when no secret is set, masked otherwise.
#[derive(Serialize)]
#[serde(untagged)]
enum MaybeMasked<'a> {
    Plain(&'a Map<String, Value>),
    Masked(Map<String, Value>),
}

impl<'a> MaybeMasked<'a> {
    /// The object itself, as masked (a copy if it needed no mask).
    fn into_owned(self) -> Map<String, Value> {
        match self {
            Self::Plain(map) => map.clone(),
            Self::Masked(map) => map,
        }
    }

    fn new(secrets: &SecretStore, map: &'a Map<String, Value>) -> Self {
        match secrets.active() {
            Some(secrets) => Self::Masked(secrets.mask_map(map.clone()).into_inner()),
            None => Self::Plain(map),
        }
    }
}

fn display<T: fmt::Display, S: serde::Serializer>(value: &T, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(value)
}

/// Who made a call, for its records.
pub(crate) struct Caller<'a> {
    pub(crate) agent: &'a str,
    pub(crate) profile: &'a str,
}

/// A call that has ended, for its record: the request, where the tool comes from (a file
/// relative to the root and its SHA-256, asked for only when the record is written), its
/// rules and arguments, what it did and how it ended.
pub(crate) struct EndedCall<'c, S> {
    pub(crate) request: &'c ToolName,
    pub(crate) source: S,
    /// The sandbox the tool ran in, if it ran in one (`sandboxed; granted: net:443`).
    pub(crate) sandbox: Option<String>,
    /// What the host refused the call's plugins (`secret:KEY`).
    pub(crate) refused: Vec<String>,
    pub(crate) rules: &'c CallRules,
    pub(crate) args: &'c Map<String, Value>,
    pub(crate) trail: Trail,
    pub(crate) outcome: Result<Option<&'c Map<String, Value>>, &'c ToolError>,
}

/// Appends the record of a call (one whose trail is audited), and the user's own decision as
/// a record of its own, with the call's id and arguments.
///
/// The record is serialized from borrowed parts (a [`CallLine`]), so a call's audit costs no
/// copy of its arguments or names; the arguments and metadata are copied only when there are
/// secrets to mask in them. `source` (the file and library hash) is asked for only here.
pub(crate) fn append_call<'a>(
    audit: &Audit,
    secrets: &SecretStore,
    caller: Caller<'_>,
    call: EndedCall<'_, impl FnOnce() -> (Cow<'a, str>, Option<&'a str>)>,
) -> Result<(), AuditError> {
    let EndedCall {
        request,
        source,
        sandbox,
        refused,
        rules,
        args,
        trail,
        outcome,
    } = call;
    let Some((started, started_ms)) = trail.started else {
        return Ok(());
    };
    let execution_id = ExecutionId {
        pid: process_id(),
        nonce: process_nonce(),
        agent: caller.agent,
        started_ms,
        number: trail.number,
    };
    let (file, library_sha256) = source();
    let line = CallLine {
        execution_id: &execution_id,
        agent: caller.agent,
        profile: caller.profile,
        tool: request.name(),
        method: request.method(),
        layer: &rules.layer,
        file: &file,
        library_sha256,
        args: MaybeMasked::new(secrets, args),
        approval: trail
            .approval
            .as_ref()
            .map(|(allowed, source)| ApprovalLine {
                decision: decision(*allowed),
                source,
            }),
        attempts: &trail.attempts,
        started_ms,
        ended_ms: now_ms(),
        duration_ms: started.elapsed().as_secs_f64() * 1e3,
        outcome: match outcome {
            Ok(_) => "success",
            Err(e) => e.kind().as_str(),
        },
        metadata: match outcome {
            Ok(Some(m)) => Some(MaybeMasked::new(secrets, m)),
            _ => None,
        },
        stage: trail.stage,
        sandbox: sandbox.as_deref(),
        refused: &refused,
    };
    // The user's own decision, and any denial, gets a record of its own, with the call's id
    // and arguments: before the call's, as it was decided before the call ended.
    let approval = trail
        .approval
        .as_ref()
        .filter(|(allowed, s)| s.is_user() || !allowed);
    if let Some((allowed, source)) = approval {
        let decided = Decided {
            execution_id: &execution_id,
            allowed: *allowed,
            source,
        };
        append_decision(audit, secrets, caller, request, args, decided)?;
    }
    audit.append_serialized(&line)
}

/// A user's decision (or a denial) about a call, recorded apart.
struct Decided<'a> {
    execution_id: &'a ExecutionId<'a>,
    allowed: bool,
    source: &'a DecisionSource,
}

/// Appends the record of a decision, with the call's id and arguments.
fn append_decision(
    audit: &Audit,
    secrets: &SecretStore,
    caller: Caller<'_>,
    request: &ToolName,
    args: &Map<String, Value>,
    decided: Decided<'_>,
) -> Result<(), AuditError> {
    audit.append(&AuditRecord::Approval(ApprovalRecord {
        execution_id: decided.execution_id.to_string(),
        agent: caller.agent.to_owned(),
        profile: caller.profile.to_owned(),
        tool: request.name().to_owned(),
        method: request.method().map(str::to_owned),
        args: Value::Object(MaybeMasked::new(secrets, args).into_owned()),
        decision: decision(decided.allowed),
        source: decided.source.to_string(),
        time_ms: now_ms(),
    }))
}

/// Appends the start of a call (one whose trail is audited) that is about to run its tool:
/// the record its call record completes.
pub(crate) fn append_start(
    audit: &Audit,
    secrets: &SecretStore,
    caller: Caller<'_>,
    request: &ToolName,
    args: &Map<String, Value>,
    trail: &Trail,
) -> Result<(), AuditError> {
    let Some((_, started_ms)) = trail.started else {
        return Ok(());
    };
    let execution_id = ExecutionId {
        pid: process_id(),
        nonce: process_nonce(),
        agent: caller.agent,
        started_ms,
        number: trail.number,
    };
    audit.append_serialized(&StartLine {
        execution_id: &execution_id,
        pid: process_id(),
        agent: caller.agent,
        profile: caller.profile,
        tool: request.name(),
        method: request.method(),
        args: MaybeMasked::new(secrets, args),
        started_ms,
    })
}

/// A call that ended before its governed steps (see
/// [`CallRecord::stage`](crate::audit::CallRecord::stage)): no approval, no attempt.
pub(crate) struct EarlyCall<'c> {
    pub(crate) request: &'c ToolName,
    /// The layer the tool came from, if it was found (`mcp:<server>` for an MCP tool).
    pub(crate) layer: &'c str,
    /// Its file, relative to the root, if it was found.
    pub(crate) file: &'c str,
    pub(crate) library_sha256: Option<&'c str>,
    pub(crate) args: &'c Map<String, Value>,
    /// The outcome: an error kind, or `unknown_tool`.
    pub(crate) outcome: &'c str,
    pub(crate) stage: &'static str,
    /// What the host refused the call's plugins before it ended (`secret:KEY`).
    pub(crate) refused: &'c [String],
}

/// Appends the record of a call that ended before its governed steps.
pub(crate) fn append_early(
    audit: &Audit,
    secrets: &SecretStore,
    caller: Caller<'_>,
    call: EarlyCall<'_>,
) -> Result<(), AuditError> {
    let now = now_ms();
    let execution_id = ExecutionId {
        pid: process_id(),
        nonce: process_nonce(),
        agent: caller.agent,
        started_ms: now,
        number: next_number(),
    };
    audit.append_serialized(&CallLine {
        execution_id: &execution_id,
        agent: caller.agent,
        profile: caller.profile,
        tool: call.request.name(),
        method: call.request.method(),
        layer: call.layer,
        file: call.file,
        library_sha256: call.library_sha256,
        args: MaybeMasked::new(secrets, call.args),
        approval: None,
        attempts: &[],
        started_ms: now,
        ended_ms: now,
        duration_ms: 0.0,
        outcome: call.outcome,
        metadata: None,
        stage: Some(call.stage),
        sandbox: None,
        refused: call.refused,
    })
}

/// Appends a breaker's change of state.
pub(crate) fn append_breaker(
    audit: &Audit,
    profile: &str,
    tool: &str,
    moved: Transition,
) -> Result<(), AuditError> {
    let record = AuditRecord::Breaker(BreakerRecord {
        tool: tool.to_owned(),
        profile: profile.to_owned(),
        from: moved.from,
        to: moved.to,
        reason: moved.reason,
        time_ms: now_ms(),
    });
    audit.append(&record)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::audit::{ApprovalDecision, CallRecord};

    /// The borrowed line reads back as the public record, field for field.
    #[test]
    fn a_call_line_reads_back_as_a_call_record() {
        let args = json!({"city": "Paris", "days": 3});
        let metadata = json!({"rows": 2});
        let source = DecisionSource::Said("user: approved once".into());
        let attempts = vec![Attempt {
            attempt: 1,
            error_kind: Some("timeout".to_owned()),
            started_ms: 5,
            duration_ms: 1.5,
        }];
        let id = ExecutionId {
            pid: 7,
            nonce: 0xab,
            agent: "A0",
            started_ms: 5,
            number: 3,
        };
        let line = CallLine {
            execution_id: &id,
            agent: "A0",
            profile: "default",
            tool: "weather",
            method: Some("today"),
            layer: "usr",
            file: "usr/tools/weather.so",
            library_sha256: Some("ab"),
            args: MaybeMasked::Plain(args.as_object().unwrap()),
            approval: Some(ApprovalLine {
                decision: Decision::Allowed,
                source: &source,
            }),
            attempts: &attempts,
            started_ms: 5,
            ended_ms: 9,
            duration_ms: 4.25,
            outcome: "timeout",
            metadata: Some(MaybeMasked::Masked(metadata.as_object().unwrap().clone())),
            stage: None,
            sandbox: Some("sandboxed; granted: net:443"),
            refused: &[],
        };
        let text = serde_json::to_string(&line).unwrap();
        let expected = AuditRecord::Call(CallRecord {
            execution_id: "7-A0-5-3.000000ab".to_owned(),
            agent: "A0".to_owned(),
            profile: "default".to_owned(),
            tool: "weather".to_owned(),
            method: Some("today".to_owned()),
            layer: "usr".to_owned(),
            file: "usr/tools/weather.so".to_owned(),
            library_sha256: Some("ab".to_owned()),
            args,
            approval: Some(ApprovalDecision {
                decision: Decision::Allowed,
                source: "user: approved once".to_owned(),
            }),
            attempts,
            started_ms: 5,
            ended_ms: 9,
            duration_ms: 4.25,
            outcome: "timeout".to_owned(),
            metadata: Some(metadata),
            stage: None,
            sandbox: Some("sandboxed; granted: net:443".to_owned()),
            refused: Vec::new(),
        });
        assert_eq!(
            serde_json::from_str::<AuditRecord>(&text).unwrap(),
            expected
        );
        assert_eq!(
            text,
            serde_json::to_string(&expected).unwrap(),
            "same fields, same order"
        );
    }
}
