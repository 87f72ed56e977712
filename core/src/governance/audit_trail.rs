//! A governed call's audit record: what was asked, decided and tried, and how it ended. One
//! hash-chained line per call in `usr/audit/audit.jsonl` (see [`crate::audit`]).

use std::sync::OnceLock;
use std::time::{Instant, SystemTime};

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::{CallRules, Transition};
use crate::audit::{
    ApprovalDecision, ApprovalRecord, Attempt, Audit, AuditOptions, AuditRecord, BreakerRecord,
    CallRecord, Decision,
};
use crate::config::AuditSettings;
use crate::{Agent, Host, ToolError, ToolName};

/// What a governed call did, gathered while it runs.
pub(crate) struct Trail {
    started: Instant,
    started_ms: u64,
    pub(crate) approval: Option<(bool, String)>,
    pub(crate) attempts: Vec<Attempt>,
}

impl Trail {
    pub(crate) fn start() -> Self {
        Self {
            started: Instant::now(),
            started_ms: now_ms(),
            approval: None,
            attempts: Vec::new(),
        }
    }

    /// Records one attempt of `execute` that started at `started`.
    pub(crate) fn attempt(&mut self, started: Instant, started_ms: u64, error: Option<&ToolError>) {
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
        (file, library_sha256): (String, Option<String>),
        rules: &CallRules,
        args: &Map<String, Value>,
        trail: Trail,
        outcome: Result<Option<&Map<String, Value>>, &ToolError>,
    ) {
        let settings = rules.config.audit();
        if !settings.enabled {
            return;
        }
        let Some(audit) = self.host.audit(settings.fsync) else {
            return;
        };
        let secrets = self.host.secret_store();
        let masked_args = Value::Object(secrets.map(args.clone()).into_inner());
        let execution_id = format!(
            "{}-{}-{}",
            std::process::id(),
            self.name(),
            trail.started_ms
        );
        let record = AuditRecord::Call(CallRecord {
            execution_id: execution_id.clone(),
            agent: self.name().to_owned(),
            profile: self.profile().to_owned(),
            tool: request.name().to_owned(),
            method: request.method().map(str::to_owned),
            layer: rules.layer.to_string(),
            file,
            library_sha256,
            args: masked_args.clone(),
            approval: trail
                .approval
                .clone()
                .map(|(allowed, source)| ApprovalDecision {
                    decision: if allowed {
                        Decision::Allowed
                    } else {
                        Decision::Denied
                    },
                    source,
                }),
            attempts: trail.attempts,
            started_ms: trail.started_ms,
            ended_ms: now_ms(),
            duration_ms: trail.started.elapsed().as_secs_f64() * 1e3,
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
        if let Some((allowed, source)) = trail.approval.filter(|(_, s)| s.starts_with("user")) {
            let approval = AuditRecord::Approval(ApprovalRecord {
                execution_id,
                agent: self.name().to_owned(),
                profile: self.profile().to_owned(),
                tool: request.name().to_owned(),
                method: request.method().map(str::to_owned),
                args: masked_args,
                decision: if allowed {
                    Decision::Allowed
                } else {
                    Decision::Denied
                },
                source,
                time_ms: now_ms(),
            });
            if let Err(e) = audit.append(&approval) {
                tracing::warn!("{e}");
            }
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

/// The SHA-256 of a file, in hex (`None` if it cannot be read).
pub(crate) fn file_sha256(path: &std::path::Path) -> Option<String> {
    let bytes = std::fs::read(path).ok()?;
    Some(sha256_hex(&bytes))
}

/// The SHA-256 of `bytes`, in hex: how the audit and `inspect` name a library's build.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}
