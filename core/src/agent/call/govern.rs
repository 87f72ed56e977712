//! The governed steps of a tool's call, for a library tool and an MCP tool alike (see
//! `governed/`): admission (access, breaker), validation, readiness, approval, then the
//! attempts under the deadline with retries, and the call's audit record however it ends.

use std::sync::Arc;

use super::governed::Governed;
use crate::agent::call::audit::audit_breaker;
use crate::agent::call::Call;
use crate::audit::BreakerState;
use crate::config::{Access, Backoff};
use crate::governance::{
    is_infrastructure, jitter, retryable, CallRules, EndedCall, Trail, Transition,
};
use crate::telemetry;
use crate::transcript::LogKind;
use plugin_api::ToolError;

impl Call {
    /// Refuses the call at once if the config denies the tool, or if its breaker is open.
    /// (Readiness is checked after validation: a call with bad arguments is told what is wrong
    /// with them, not that the tool is not ready.)
    pub(crate) fn admit<T: Governed>(&self, tool: &T, rules: &CallRules) -> Result<(), ToolError> {
        let capabilities = &tool.info().capabilities;
        if let Access::Denied { reason } = rules.config.access(tool.name(), capabilities) {
            return Err(ToolError::repairable(format!(
                "tool {} is not allowed for this agent ({reason}): choose another tool",
                tool.name()
            )));
        }
        let transition = tool.breaker().admit(tool.name(), &rules.breaker)?;
        self.breaker_moved(tool.name(), rules, transition);
        Ok(())
    }

    /// Validates the arguments (defaults filled in), asks for approval, then runs the tool
    /// under the deadline, retrying infrastructure failures with backoff where the tool allows
    /// it. The call is audited, however it ends.
    pub(crate) async fn execute_governed<T: Governed>(
        &mut self,
        tool: &Arc<T>,
        rules: &CallRules,
    ) -> Result<T::Answer, ToolError> {
        self.trail = Trail::start(rules.config.audit().enabled);
        let result = self.govern(tool, rules).await;
        let metadata = match self.trail.audited() {
            true => result.as_ref().ok().and_then(T::metadata),
            false => None,
        };
        let outcome = match &result {
            Ok(_) => Ok(metadata.as_ref()),
            Err(e) => Err(e),
        };
        let trail = std::mem::replace(&mut self.trail, Trail::start(false));
        let root = self.agent().host.root();
        let audited = self.audit_call(EndedCall {
            request: &self.request,
            source: || tool.audit_source(root),
            sandbox: tool.sandbox(),
            refused: self.context.refused(),
            rules,
            args: &self.args,
            trail,
            outcome,
        });
        match (result, audited) {
            (Ok(_), Err(refused)) => Err(refused),
            (result, _) => result,
        }
    }

    async fn govern<T: Governed>(
        &mut self,
        tool: &Arc<T>,
        rules: &CallRules,
    ) -> Result<T::Answer, ToolError> {
        telemetry::step("validation").run_sync(|| tool.schema().check(&mut self.args))?;
        if let Some(reason) = tool.not_ready() {
            return Err(ToolError::dependency(format!(
                "tool {} is not ready: {reason}",
                tool.name()
            )));
        }
        let risk = tool.info().risk_level;
        let approving = self.approve(&rules.config, tool.name(), risk);
        let approved = telemetry::step("approval").run(approving).await;
        telemetry::metrics::approval(approved.is_ok());
        match approved {
            Ok(decision) => self.trail.approval(true, || decision.source),
            Err((e, source)) => {
                self.trail.approval(false, || source);
                return Err(e);
            }
        }
        // Written before the tool runs: a call that kills the process stays visible.
        self.audit_start(rules)?;
        let retries = match retryable(tool.info()) {
            true => rules.max_retries,
            false => 0,
        };
        let mut attempt = 1;
        loop {
            let start = self.trail.attempt_starts();
            let attempting = tool.attempt(self.agent(), &self.context, &self.args, rules.timeout);
            let result = telemetry::execute(attempt).run(attempting).await;
            self.trail.attempt(start, result.as_ref().err());
            let outcome = result.as_ref().map(|_| ());
            let transition = tool.breaker().record(outcome, &rules.breaker);
            let opened = transition
                .as_ref()
                .is_some_and(|t| t.to == BreakerState::Open);
            self.breaker_moved(tool.name(), rules, transition);
            let error = match result {
                Ok(answer) => return Ok(answer),
                Err(e) if attempt <= retries && !opened && is_infrastructure(e.kind()) => e,
                Err(e) => return Err(e),
            };
            telemetry::retrying(error.kind().as_str(), attempt + 1);
            // Boxed: a rare path, whose large future would be moved on every call.
            Box::pin(self.wait_to_retry(attempt, retries, &rules.backoff, &error)).await?;
            attempt += 1;
        }
    }

    /// Notes the retry, then waits for its backoff (or a stop).
    async fn wait_to_retry(
        &self,
        attempt: u32,
        retries: u32,
        backoff: &Backoff,
        error: &ToolError,
    ) -> Result<(), ToolError> {
        let delay = backoff.delay(attempt, jitter());
        let agent = self.agent();
        agent.add_note(
            LogKind::Warning,
            format!(
                "Retrying tool '{}' (attempt {} of {})",
                self.request,
                attempt + 1,
                retries + 1
            ),
            format!(
                "after {} error: {}; waiting {delay:?}",
                error.kind(),
                error.message()
            ),
        );
        tokio::select! {
            () = tokio::time::sleep(delay) => Ok(()),
            e = agent.intervention.stopped() => Err(e),
        }
    }

    /// Logs and audits a breaker's change of state.
    fn breaker_moved(&self, tool: &str, rules: &CallRules, transition: Option<Transition>) {
        let Some(t) = transition else {
            return;
        };
        let (from, to) = (t.from.as_str(), t.to.as_str());
        tracing::warn!("tool {tool}: circuit breaker {from} -> {to} ({})", t.reason);
        telemetry::breaker_moved(tool, from, to);
        let agent = self.agent();
        agent.add_note(
            LogKind::Warning,
            format!("Circuit breaker of tool '{tool}': {from} -> {to}"),
            t.reason.clone(),
        );
        audit_breaker(agent, tool, t, &rules.config);
    }
}
