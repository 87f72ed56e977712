//! A governed call's audit record: what was asked, decided and tried, and how it ended. One
//! hash-chained line per call in `usr/audit/audit.jsonl` (see [`crate::audit`]).

use std::sync::OnceLock;
use std::time::{Instant, SystemTime};

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::approval::DecisionSource;
use super::{CallRules, Transition};
use crate::audit::{
    ApprovalDecision, ApprovalRecord, Attempt, Audit, AuditOptions, AuditRecord, BreakerRecord,
    CallRecord, Decision,
};
use crate::config::AuditSettings;
use crate::{Agent, Host, ToolError, ToolName};

/// What a governed call did, gathered while it runs; nothing (not even the clock) when the
/// call is not audited.
pub(crate) struct Trail {
    /// When the call started; `None` when it is not audited.
    started: Option<(Instant, u64)>,
    pub(crate) approval: Option<(bool, DecisionSource)>,
    pub(crate) attempts: Vec<Attempt>,
}

/// When one attempt started, for its record; `None` when the call is not audited.
pub(crate) struct AttemptStart(Option<(Instant, u64)>);

impl Trail {
    /// A new trail; `audited` says whether it will be written.
    pub(crate) fn start(audited: bool) -> Self {
        Self {
            started: audited.then(|| (Instant::now(), now_ms())),
            approval: None,
            attempts: Vec::new(),
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

/// Milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Host {
    /// The audit log, opened on first use (`None` if it cannot be opened: said once).
    fn audit(&self, fsync: bool) -> Option<&Audit> {
        static WARNED: OnceLock<()> = OnceLock::new();
        let audit = self.audit.get_or_init(|| {
            match Audit::open(&self.layout().audit_dir(), AuditOptions { fsync }) {
                Ok(audit) => Some(audit),
                Err(e) => {
                    WARNED.get_or_init(|| tracing::warn!("{e}; calls are not audited"));
                    None
                }
            }
        });
        audit.as_ref()
    }
}

impl Agent {
    /// Appends the call's record (when the profile's config enables the audit).
    pub(crate) fn audit_call(
        &self,
        request: &ToolName,
        source: impl FnOnce() -> (String, Option<String>),
        rules: &CallRules,
        args: &Map<String, Value>,
        trail: Trail,
        outcome: Result<Option<&Map<String, Value>>, &ToolError>,
    ) {
        let Some((started, started_ms)) = trail.started else {
            return;
        };
        let Some(audit) = self.host.audit(rules.config.audit().fsync) else {
            return;
        };
        let (file, library_sha256) = source();
        let secrets = self.host.secret_store();
        let masked_args = Value::Object(secrets.map(args.clone()).into_inner());
        let execution_id = format!("{}-{}-{}", std::process::id(), self.name(), started_ms);
        let record = AuditRecord::Call(CallRecord {
            execution_id,
            agent: self.name().to_owned(),
            profile: self.profile().to_owned(),
            tool: request.name().to_owned(),
            method: request.method().map(str::to_owned),
            layer: rules.layer.to_string(),
            file,
            library_sha256,
            args: masked_args,
            approval: trail
                .approval
                .as_ref()
                .map(|(allowed, source)| ApprovalDecision {
                    decision: if *allowed {
                        Decision::Allowed
                    } else {
                        Decision::Denied
                    },
                    source: source.to_string(),
                }),
            attempts: trail.attempts,
            started_ms,
            ended_ms: now_ms(),
            duration_ms: started.elapsed().as_secs_f64() * 1e3,
            outcome: match outcome {
                Ok(_) => "success".to_owned(),
                Err(e) => e.kind().as_str().to_owned(),
            },
            metadata: match outcome {
                Ok(Some(m)) => Some(Value::Object(secrets.map(m.clone()).into_inner())),
                _ => None,
            },
        });
        if let Err(e) = audit.append(&record) {
            tracing::warn!("{e}");
        }
        // The user's own decision gets a record of its own, with the call's id and arguments.
        let Some((allowed, source)) = trail.approval.filter(|(_, s)| s.is_user()) else {
            return;
        };
        let AuditRecord::Call(call) = record else {
            unreachable!("the call's record")
        };
        let approval = AuditRecord::Approval(ApprovalRecord {
            execution_id: call.execution_id,
            agent: call.agent,
            profile: call.profile,
            tool: call.tool,
            method: call.method,
            args: call.args,
            decision: if allowed {
                Decision::Allowed
            } else {
                Decision::Denied
            },
            source: source.to_string(),
            time_ms: now_ms(),
        });
        if let Err(e) = audit.append(&approval) {
            tracing::warn!("{e}");
        }
    }
}

impl Agent {
    /// Appends a breaker's change of state (when the profile's config enables the audit).
    pub(crate) fn audit_breaker(&self, tool: &str, moved: Transition, settings: AuditSettings) {
        if !settings.enabled {
            return;
        }
        let Some(audit) = self.host.audit(settings.fsync) else {
            return;
        };
        let record = AuditRecord::Breaker(BreakerRecord {
            tool: tool.to_owned(),
            profile: self.profile().to_owned(),
            from: moved.from,
            to: moved.to,
            reason: moved.reason,
            time_ms: now_ms(),
        });
        if let Err(e) = audit.append(&record) {
            tracing::warn!("{e}");
        }
    }
}

/// The SHA-256 of `bytes`, in hex: how the audit and `inspect` name a library's build.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}
