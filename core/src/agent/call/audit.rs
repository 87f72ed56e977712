//! A governed call's records in the audit log: the agent's side (which log, which secrets,
//! who called); the records themselves are written by the governance's audit trail.

use std::borrow::Cow;

use serde_json::{Map, Value};

use crate::agent::Agent;
use crate::config::AuditSettings;
use crate::governance::{append_breaker, append_call, CallRules, Caller, Trail, Transition};
use crate::layout::ToolName;
use plugin_api::ToolError;

impl Agent {
    /// Appends the call's record (when the profile's config enables the audit).
    pub(crate) fn audit_call<'a>(
        &self,
        request: &ToolName,
        source: impl FnOnce() -> (Cow<'a, str>, Option<&'a str>),
        rules: &CallRules,
        args: &Map<String, Value>,
        trail: Trail,
        outcome: Result<Option<&Map<String, Value>>, &ToolError>,
    ) {
        if !trail.audited() {
            return;
        }
        let Some(audit) = self.host.audit(rules.config.audit().fsync) else {
            return;
        };
        let caller = Caller {
            agent: self.name(),
            profile: self.profile(),
        };
        let secrets = self.host.secret_store();
        append_call(
            audit, &secrets, caller, request, source, rules, args, trail, outcome,
        );
    }

    /// Appends a breaker's change of state (when the profile's config enables the audit).
    pub(crate) fn audit_breaker(&self, tool: &str, moved: Transition, settings: AuditSettings) {
        if !settings.enabled {
            return;
        }
        if let Some(audit) = self.host.audit(settings.fsync) {
            append_breaker(audit, self.profile(), tool, moved);
        }
    }
}
