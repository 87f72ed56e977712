//! The governed steps of a library tool's call: admission (readiness, breaker), validation,
//! then `execute` under the deadline with retries.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};

use super::audit_trail::{now_ms, Trail};
use super::call_threads::{self, Ended};
use super::{is_infrastructure, Transition};
use crate::audit::BreakerState;
use crate::config::{Access, Backoff, BreakerSettings, Config};
use crate::context::CallContext;
use crate::plugin::{PluginAnswer, ToolHandle};
use crate::transcript::LogKind;
use crate::{Agent, RiskLevel, ToolError, ToolName};

/// What governs one call of a tool: its declared values, overridden by the config.
#[derive(Debug, Clone)]
pub(crate) struct CallRules {
    /// How long one attempt may run; `None` for no deadline (`timeout_seconds = 0`).
    pub(crate) timeout: Option<Duration>,
    /// Attempts after the first, for infrastructure failures of a retryable tool.
    pub(crate) max_retries: u32,
    pub(crate) backoff: Backoff,
    pub(crate) breaker: BreakerSettings,
    /// The profile's configuration (policy, access).
    pub(crate) config: Arc<Config>,
    /// The kind of layer the tool was found in, for the audit.
    pub(crate) layer: &'static str,
}

impl CallRules {
    /// The rules for a call of `tool`: what it declares, overridden by the profile's config.
    pub(crate) fn new(tool: &ToolHandle, layer: &'static str, config: Arc<Config>) -> Self {
        let info = tool.info();
        let declared = Duration::from_secs(info.timeout_seconds);
        let timeout = config.timeout(tool.name(), declared);
        Self {
            timeout: (!timeout.is_zero()).then_some(timeout),
            max_retries: config.max_retries(tool.name(), info.max_retries),
            backoff: config.backoff(),
            breaker: config.breaker(),
            config,
            layer,
        }
    }
}

/// Whether a tool's failed attempts may be retried: it only reads, or says it is idempotent.
fn retryable(tool: &ToolHandle) -> bool {
    let info = tool.info();
    info.risk_level == RiskLevel::Read || info.capabilities.iter().any(|c| c == "idempotent")
}

impl Agent {
    /// Refuses a call at once if the config denies the tool, if it is not ready, or if its
    /// breaker is open.
    pub(crate) fn admit(&self, tool: &ToolHandle, rules: &CallRules) -> Result<(), ToolError> {
        let capabilities = &tool.info().capabilities;
        if let Access::Denied { reason } = rules.config.access(tool.name(), capabilities) {
            return Err(ToolError::repairable(format!(
                "tool {} is not allowed for this agent ({reason}): choose another tool",
                tool.name()
            )));
        }
        if let Some(reason) = tool.readiness().reason() {
            return Err(ToolError::dependency(format!(
                "tool {} is not ready: {reason}",
                tool.name()
            )));
        }
        let transition = tool.breaker.admit(tool.name(), &rules.breaker)?;
        self.breaker_moved(tool, rules, transition);
        Ok(())
    }

    /// Validates the arguments (defaults filled in), asks for approval, then runs `execute`
    /// under the deadline, retrying infrastructure failures with backoff where the tool allows
    /// it. The call is audited, however it ends.
    pub(crate) async fn execute_governed(
        self: &Arc<Self>,
        call: &Arc<CallContext>,
        request: &ToolName,
        tool: &Arc<ToolHandle>,
        args: &mut Map<String, Value>,
        rules: &CallRules,
    ) -> Result<PluginAnswer, ToolError> {
        let mut trail = Trail::start();
        let result = self
            .govern(call, request, tool, args, rules, &mut trail)
            .await;
        let metadata = result.as_ref().ok().and_then(PluginAnswer::metadata);
        let outcome = match &result {
            Ok(_) => Ok(metadata.as_ref()),
            Err(e) => Err(e),
        };
        self.audit_call(request, tool, rules, args, trail, outcome);
        result
    }

    async fn govern(
        self: &Arc<Self>,
        call: &Arc<CallContext>,
        request: &ToolName,
        tool: &Arc<ToolHandle>,
        args: &mut Map<String, Value>,
        rules: &CallRules,
        trail: &mut Trail,
    ) -> Result<PluginAnswer, ToolError> {
        tool.schema.check(args)?;
        let risk = tool.info().risk_level;
        let approved = self
            .approve(&rules.config, tool.name(), request.method(), risk, args)
            .await;
        trail.approval = Some(match &approved {
            Ok(decision) => (true, decision.source.clone()),
            Err(e) => (false, e.message().to_owned()),
        });
        approved?;
        let args = crate::extension_points::json_text(args);
        let retries = if retryable(tool) {
            rules.max_retries
        } else {
            0
        };
        let mut attempt = 1;
        loop {
            let (started, started_ms) = (std::time::Instant::now(), now_ms());
            let result = self.attempt(call, tool, args.clone(), rules.timeout).await;
            trail.attempt(started, started_ms, result.as_ref().err());
            let outcome = result.as_ref().map(|_| ());
            let transition = tool.breaker.record(outcome, &rules.breaker);
            let opened = transition
                .as_ref()
                .is_some_and(|t| t.to == BreakerState::Open);
            self.breaker_moved(tool, rules, transition);
            let error = match result {
                Ok(answer) => return Ok(answer),
                Err(e) if attempt <= retries && !opened && is_infrastructure(e.kind()) => e,
                Err(e) => return Err(e),
            };
            let delay = rules.backoff.delay(attempt, jitter());
            self.add_note(
                LogKind::Warning,
                format!(
                    "Retrying tool '{request}' (attempt {} of {})",
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
                () = tokio::time::sleep(delay) => {}
                e = self.intervention.stopped() => return Err(e),
            }
            attempt += 1;
        }
    }

    /// One attempt: `execute` on a call thread, until it answers, the deadline passes or the
    /// user intervenes. The plugin sees the cancellation through its context.
    async fn attempt(
        self: &Arc<Self>,
        call: &Arc<CallContext>,
        tool: &Arc<ToolHandle>,
        args: String,
        timeout: Option<Duration>,
    ) -> Result<PluginAnswer, ToolError> {
        let call = call.for_attempt();
        let running = {
            let (tool, call) = (tool.clone(), call.clone());
            async move { tool.execute(&call, args).await }
        };
        let deadline = timeout.unwrap_or(Duration::MAX);
        let interrupt = self.intervention.stopped();
        match call_threads::run(running, deadline, interrupt).await {
            Ok(result) => result,
            Err(Ended::Deadline) => {
                call.cancel.cancel();
                Err(ToolError::timeout(format!(
                    "tool {} did not answer within {}: its deadline passed and the call was abandoned (set [tools.{}] timeout_seconds in toolhost.toml to allow longer)",
                    tool.name(),
                    seconds(deadline),
                    tool.name()
                )))
            }
            Err(Ended::Interrupted(error)) => {
                call.cancel.cancel();
                Err(error)
            }
        }
    }

    /// Logs and audits a breaker's change of state.
    fn breaker_moved(&self, tool: &ToolHandle, rules: &CallRules, transition: Option<Transition>) {
        let Some(t) = transition else {
            return;
        };
        let (from, to) = (t.from.as_str(), t.to.as_str());
        tracing::warn!(
            "tool {}: circuit breaker {from} -> {to} ({})",
            tool.name(),
            t.reason
        );
        self.add_note(
            LogKind::Warning,
            format!("Circuit breaker of tool '{}': {from} -> {to}", tool.name()),
            t.reason.clone(),
        );
        self.audit_breaker(tool.name(), t, rules.config.audit());
    }
}

/// A number in [0, 1] for the backoff's jitter, from a shared xorshift generator.
fn jitter() -> f64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static STATE: AtomicU64 = AtomicU64::new(0);
    let mut x = STATE.load(Ordering::Relaxed);
    if x == 0 {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        x = now.map_or(0x9E37_79B9_7F4A_7C15, |d| d.as_nanos() as u64) | 1;
    }
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    STATE.store(x, Ordering::Relaxed);
    (x >> 11) as f64 / (1u64 << 53) as f64
}

/// `2 s`, `0.5 s`.
fn seconds(d: Duration) -> String {
    format!("{} s", d.as_secs_f64())
}
