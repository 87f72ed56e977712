//! A governed call's records in the audit log: the agent's side (which log, which secrets,
//! who called); the records themselves are written by the governance's audit trail.

use std::borrow::Cow;

use crate::agent::Agent;
use crate::config::AuditSettings;
use crate::governance::{append_breaker, append_call, Caller, EndedCall, Transition};

impl Agent {
    /// Appends the call's record (when the profile's config enables the audit).
    pub(crate) fn audit_call<'a>(
        &self,
        call: EndedCall<'_, impl FnOnce() -> (Cow<'a, str>, Option<&'a str>)>,
    ) {
        if !call.trail.audited() {
            return;
        }
        let Some(audit) = self.host.audit(call.rules.config.audit().fsync) else {
            return;
        };
        let caller = Caller {
            agent: self.name(),
            profile: self.profile(),
        };
        append_call(audit, self.host.secret_store(), caller, call);
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
