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

use crate::agent::call::governed::Governed;
use crate::agent::call::resolve::Target;
use crate::agent::call::Call;
use crate::agent::Agent;
use crate::audit::{Audit, AuditError, AuditErrorKind};
use crate::config::{AuditSettings, Config};
use crate::governance::{
    append_breaker, append_call, append_early, append_start, CallRules, Caller, EarlyCall,
    EndedCall, Transition,
};
use crate::layout::ToolName;
use plugin_api::ToolError;

/// Logs a record that could not be written, and keeps the first.
fn audit_failed(agent: &Agent, error: &AuditError) {
    tracing::warn!("{error}: a record of agent {} is missing", agent.name());
    let mut state = agent.state();
    if state.audit_failure.is_none() {
        state.audit_failure = Some(error.clone());
    }
}

fn caller(agent: &Agent) -> Caller<'_> {
    Caller {
        agent: agent.name(),
        profile: agent.profile(),
    }
}

/// The log, opened with `config`'s settings. Without them (the profile's configuration has
/// a mistake), only a log already open: opening it with defaults could leave out the key.
fn audit_log<'a>(agent: &'a Agent, config: Option<&Config>) -> Result<&'a Audit, AuditError> {
    match config {
        Some(config) => agent.host.audit(config),
        None => agent.host.audit.get().ok_or_else(|| {
            AuditError::new(
                AuditErrorKind::Io,
                &agent.host.layout().audit_dir(),
                format!(
                    "not opened: the configuration of profile {} has a mistake, so its \
                     [audit] settings (the key) are not known",
                    agent.profile()
                ),
            )
        }),
    }
}

impl Call {
    /// Appends the start of a call about to run its tool (when the profile's config enables
    /// the audit). When it cannot be written and the record is required, the call is refused.
    pub(crate) fn audit_start(&mut self, rules: &CallRules) -> Result<(), ToolError> {
        if !self.trail.audited() {
            return Ok(());
        }
        let agent = self.agent();
        let written = audit_log(agent, Some(&rules.config)).and_then(|audit| {
            append_start(
                audit,
                agent.host.secret_store(),
                caller(agent),
                &self.request,
                &self.args,
                &self.trail,
            )
        });
        let Err(e) = written else {
            return Ok(());
        };
        audit_failed(agent, &e);
        if !agent.host.audit_required(&rules.config) {
            return Ok(());
        }
        let error = ToolError::dependency(format!(
            "tool {} was not run: its audit record cannot be written ({e}), and [audit] \
             required is on: fix the audit log, or set [audit] required = false",
            self.request.name()
        ));
        self.trail.stage = Some("audit");
        Err(error)
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
        let agent = self.agent();
        let config = call.rules.config.clone();
        let request = call.request.name().to_owned();
        let written = audit_log(agent, Some(&config))
            .and_then(|audit| append_call(audit, agent.host.secret_store(), caller(agent), call));
        let Err(e) = written else {
            return Ok(());
        };
        audit_failed(agent, &e);
        match agent.host.audit_required(&config) {
            true => Err(ToolError::dependency(format!(
                "tool {request} ran, but its audit record could not be written ({e}), and \
                 [audit] required is on"
            ))),
            false => Ok(()),
        }
    }

    /// Audits a call that ended before its governed steps (`stage`: `admit` or `before`) and
    /// returns the error to report. Its record says what the host refused the call's
    /// plugins (`secret:KEY`) so far.
    pub(crate) fn ended_early(&self, error: ToolError, stage: &'static str) -> ToolError {
        let agent = self.agent();
        let root = agent.host.root();
        let (config, layer, source) = match &self.target {
            Target::Library(tool, rules) => (
                Some(&*rules.config),
                &*rules.layer,
                Some(tool.audit_source(root)),
            ),
            #[cfg(feature = "mcp")]
            Target::Mcp(tool, rules) => (
                Some(&*rules.config),
                &*rules.layer,
                Some(tool.audit_source(root)),
            ),
            _ => (None, "", None),
        };
        let (file, sha256) = source.unwrap_or((Cow::Borrowed(""), None));
        let refused = self.context.refused();
        let call = EarlyCall {
            layer,
            file: &file,
            library_sha256: sha256,
            stage,
            refused: &refused,
            ..early(&self.request, &self.args, error.kind().as_str())
        };
        report_early(agent, config, call, error)
    }
}

/// Audits a call that ended before it resolved to a tool (stage `resolve`) and returns the
/// error to report.
pub(crate) fn early_end(
    agent: &Agent,
    request: &ToolName,
    args: &Map<String, Value>,
    error: ToolError,
) -> ToolError {
    let call = early(request, args, error.kind().as_str());
    report_early(agent, None, call, error)
}

/// Appends the record of a call that ended early; the error to report.
fn report_early(
    agent: &Agent,
    config: Option<&Config>,
    call: EarlyCall<'_>,
    error: ToolError,
) -> ToolError {
    let error_message = error.message().to_owned();
    audit_early(agent, config, call, Some(error))
        .unwrap_or_else(|| ToolError::internal(error_message))
}

/// The record of a call that never reached its tool, with no layer or file (the tool was not
/// found): `outcome` is an error kind, or `unknown_tool` for the Unknown tool's answer.
pub(crate) fn early<'c>(
    request: &'c ToolName,
    args: &'c Map<String, Value>,
    outcome: &'c str,
) -> EarlyCall<'c> {
    EarlyCall {
        request,
        layer: "",
        file: "",
        library_sha256: None,
        args,
        outcome,
        stage: "resolve",
        refused: &[],
    }
}

/// Appends the record of a call that ended before its governed steps, and returns the
/// error it ended with (when the record is required and cannot be written, the error says
/// so too). `config`: the rules' configuration, when the call got that far.
pub(crate) fn audit_early(
    agent: &Agent,
    config: Option<&Config>,
    call: EarlyCall<'_>,
    error: Option<ToolError>,
) -> Option<ToolError> {
    let fallback;
    let config = match config {
        Some(config) => Some(config),
        None => {
            fallback = agent.host.config(agent.profile()).ok();
            fallback.as_deref()
        }
    };
    let enabled = config.map_or(AuditSettings::default().enabled, |c| c.audit().enabled);
    // A folder that is no root (no usr/, core/ or plugins/) has no tool to call, and
    // recording that would create usr/audit/ in whatever folder `toolhost call` ran in.
    if !enabled || !agent.host.layout().is_root() {
        return error;
    }
    let written = audit_log(agent, config)
        .and_then(|audit| append_early(audit, agent.host.secret_store(), caller(agent), call));
    let Err(e) = written else {
        return error;
    };
    audit_failed(agent, &e);
    let required = agent
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
pub(crate) fn audit_breaker(agent: &Agent, tool: &str, moved: Transition, config: &Config) {
    let settings: AuditSettings = config.audit();
    if !settings.enabled {
        return;
    }
    let written = audit_log(agent, Some(config))
        .and_then(|audit| append_breaker(audit, agent.profile(), tool, moved));
    if let Err(e) = written {
        audit_failed(agent, &e);
    }
}
