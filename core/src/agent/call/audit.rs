//! A call's records in the audit log, the agent's side: which log, which secrets, who called,
//! whether the record is required, and what happens when one cannot be written (the records
//! themselves are built by the governance's audit trail).
//!
//! A record that cannot be written is logged each time (a warning) and kept as the agent's
//! [`audit_failure`](Agent::audit_failure), which `toolhost call` turns into its exit status
//! and `serve-mcp` into the result's `_meta`. With `[audit] required` on, a call whose start
//! cannot be recorded is refused before its tool runs, and one whose end cannot be recorded
//! fails.

use std::borrow::Cow;

use serde_json::{Map, Value};

use crate::agent::Agent;
use crate::audit::{Audit, AuditError, AuditErrorKind};
use crate::config::{AuditSettings, Config};
use crate::governance::{
    append_breaker, append_call, append_early, append_start, CallRules, Caller, EarlyCall,
    EndedCall, Trail, Transition,
};
use crate::layout::ToolName;
use crate::sync::lock;
use plugin_api::ToolError;

impl Agent {
    /// The first audit record this agent could not write since it was made, if any: the call
    /// it belongs to ran (or failed) without it. Each failure is also logged as a warning.
    pub fn audit_failure(&self) -> Option<AuditError> {
        lock(&self.state).audit_failure.clone()
    }

    /// Logs a record that could not be written, and keeps the first.
    fn audit_failed(&self, error: &AuditError) {
        tracing::warn!("{error}: a record of agent {} is missing", self.name());
        let mut state = lock(&self.state);
        if state.audit_failure.is_none() {
            state.audit_failure = Some(error.clone());
        }
    }

    fn caller(&self) -> Caller<'_> {
        Caller {
            agent: self.name(),
            profile: self.profile(),
        }
    }

    /// The log, opened with `config`'s settings. Without them (the profile's configuration has
    /// a mistake), only a log already open: opening it with defaults could leave out the key.
    fn audit_log(&self, config: Option<&Config>) -> Result<&Audit, AuditError> {
        match config {
            Some(config) => self.host.audit(config),
            None => self.host.audit.get().ok_or_else(|| {
                AuditError::new(
                    AuditErrorKind::Io,
                    &self.host.layout().audit_dir(),
                    format!(
                        "not opened: the configuration of profile {} has a mistake, so its \
                         [audit] settings (the key) are not known",
                        self.profile()
                    ),
                )
            }),
        }
    }

    /// Appends the start of a call about to run its tool (when the profile's config enables
    /// the audit). When it cannot be written and the record is required, the call is refused.
    pub(crate) fn audit_start(
        &self,
        request: &ToolName,
        rules: &CallRules,
        args: &Map<String, Value>,
        trail: &mut Trail,
    ) -> Result<(), ToolError> {
        if !trail.audited() {
            return Ok(());
        }
        let written = self.audit_log(Some(&rules.config)).and_then(|audit| {
            append_start(
                audit,
                self.host.secret_store(),
                self.caller(),
                request,
                args,
                trail,
            )
        });
        let Err(e) = written else {
            return Ok(());
        };
        self.audit_failed(&e);
        if !self.host.audit_required(&rules.config) {
            return Ok(());
        }
        trail.stage = Some("audit");
        Err(ToolError::dependency(format!(
            "tool {} was not run: its audit record cannot be written ({e}), and [audit] \
             required is on: fix the audit log, or set [audit] required = false",
            request.name()
        )))
    }

    /// Appends the call's record (when the profile's config enables the audit). When it
    /// cannot be written and the record is required, the error to fail the call with.
    pub(crate) fn audit_call<'a>(
        &self,
        call: EndedCall<'_, impl FnOnce() -> (Cow<'a, str>, Option<&'a str>)>,
    ) -> Result<(), ToolError> {
        if !call.trail.audited() {
            return Ok(());
        }
        let config = call.rules.config.clone();
        let request = call.request.name().to_owned();
        let written = self
            .audit_log(Some(&config))
            .and_then(|audit| append_call(audit, self.host.secret_store(), self.caller(), call));
        let Err(e) = written else {
            return Ok(());
        };
        self.audit_failed(&e);
        match self.host.audit_required(&config) {
            true => Err(ToolError::dependency(format!(
                "tool {request} ran, but its audit record could not be written ({e}), and \
                 [audit] required is on"
            ))),
            false => Ok(()),
        }
    }

    /// Appends the record of a call that ended before its governed steps, and returns the
    /// error it ended with (when the record is required and cannot be written, the error says
    /// so too). `config`: the rules' configuration, when the call got that far.
    pub(crate) fn audit_early(
        &self,
        config: Option<&Config>,
        call: EarlyCall<'_>,
        error: Option<ToolError>,
    ) -> Option<ToolError> {
        let fallback;
        let config = match config {
            Some(config) => Some(config),
            None => {
                fallback = self.host.config(self.profile()).ok();
                fallback.as_deref()
            }
        };
        let enabled = config.map_or(AuditSettings::default().enabled, |c| c.audit().enabled);
        // A folder that is no root (no usr/, core/ or plugins/) has no tool to call, and
        // recording that would create usr/audit/ in whatever folder `toolhost call` ran in.
        if !enabled || !self.host.layout().is_root() {
            return error;
        }
        let written = self
            .audit_log(config)
            .and_then(|audit| append_early(audit, self.host.secret_store(), self.caller(), call));
        let Err(e) = written else {
            return error;
        };
        self.audit_failed(&e);
        let required = self
            .host
            .audit_required(config.unwrap_or(&Config::default()));
        match (error, required) {
            (Some(error), true) => Some(ToolError::new(
                error.kind(),
                format!(
                    "{} (and its audit record could not be written: {e})",
                    error.message()
                ),
            )),
            (error, _) => error,
        }
    }

    /// Appends a breaker's change of state (when the profile's config enables the audit).
    pub(crate) fn audit_breaker(&self, tool: &str, moved: Transition, config: &Config) {
        let settings: AuditSettings = config.audit();
        if !settings.enabled {
            return;
        }
        let written = self
            .audit_log(Some(config))
            .and_then(|audit| append_breaker(audit, self.profile(), tool, moved));
        if let Err(e) = written {
            self.audit_failed(&e);
        }
    }
}
