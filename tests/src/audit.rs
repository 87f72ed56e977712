//! Audit records for the audit log's tests, benchmark and writer binary.

use serde_json::json;
use toolhost::audit::{ApprovalDecision, Attempt, AuditRecord, CallRecord, Decision};

/// A typical call record (about 870 bytes on disk): the `i`-th call of `writer`, whose
/// `execution_id` is `<writer>-<i>`.
pub fn call_record(writer: &str, i: u64) -> AuditRecord {
    let started_ms = 1_764_531_200_000 + i;
    AuditRecord::Call(CallRecord {
        execution_id: format!("{writer}-{i}"),
        agent: "A0".into(),
        profile: "default".into(),
        tool: "echo".into(),
        method: Some("sleep".into()),
        layer: "usr".into(),
        file: "usr/tools/echo.so".into(),
        library_sha256: Some(
            "5c1a2d9e8f7b6a5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c".into(),
        ),
        args: json!({
            "path": "/srv/agent/work/report.md",
            "text": "A paragraph of the report the agent is writing, some sixty bytes.",
            "token": "§§secret(API_KEY)",
            "append": true,
        }),
        approval: Some(ApprovalDecision {
            decision: Decision::Allowed,
            source: "policy: read allowed".into(),
        }),
        attempts: vec![Attempt {
            attempt: 1,
            error_kind: None,
            started_ms,
            duration_ms: 2.375,
        }],
        started_ms,
        ended_ms: started_ms + 3,
        duration_ms: 2.5,
        outcome: "success".into(),
        metadata: Some(json!({"bytes_written": 66, "created": false})),
        stage: None,
        sandbox: None,
        refused: Vec::new(),
    })
}
