//! The governed steps of a tool's call, for a library tool and an MCP tool alike (see
//! `governed.rs`): admission (access, readiness, breaker), validation, approval, then the
//! attempts under the deadline with retries.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};

use super::approval::DecisionSource;
use super::audit_trail::Trail;
use super::governed::Governed;
use super::{is_infrastructure, Transition};
use crate::agent::transcript::LogKind;
use crate::agent::Agent;
use crate::audit::BreakerState;
use crate::config::{Access, Backoff, BreakerSettings, Config};
use crate::exec::context::CallContext;
use crate::layout::ToolName;
use plugin_api::RiskLevel;
use plugin_api::ToolError;
use plugin_api::ToolInfo;

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
    /// The kind of layer the tool was found in (`mcp:<server>` for an MCP tool), for the
    /// audit.
    pub(crate) layer: Cow<'static, str>,
}

impl CallRules {
    /// The rules for a call of `tool`: what it declares, overridden by the profile's config.
    pub(crate) fn new<T: Governed>(
        tool: &T,
        layer: Cow<'static, str>,
        config: Arc<Config>,
    ) -> Self {
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
fn retryable(info: &ToolInfo) -> bool {
    info.risk_level == RiskLevel::Read || info.capabilities.iter().any(|c| c == "idempotent")
}

/// The error of an attempt whose deadline passed.
pub(crate) fn timed_out(tool: &str, deadline: Duration) -> ToolError {
    // A dotted name (an MCP tool's) is quoted as a TOML key.
    let key = match tool.contains('.') {
        true => format!("\"{tool}\""),
        false => tool.to_owned(),
    };
    ToolError::timeout(format!(
        "tool {tool} did not answer within {}: its deadline passed and the call was abandoned (set [tools.{key}] timeout_seconds in toolhost.toml to allow longer)",
        seconds(deadline),
    ))
}

impl Agent {
    /// Refuses a call at once if the config denies the tool, if it is not ready, or if its
    /// breaker is open.
    pub(crate) fn admit<T: Governed>(&self, tool: &T, rules: &CallRules) -> Result<(), ToolError> {
        let capabilities = &tool.info().capabilities;
        if let Access::Denied { reason } = rules.config.access(tool.name(), capabilities) {
            return Err(ToolError::repairable(format!(
                "tool {} is not allowed for this agent ({reason}): choose another tool",
                tool.name()
            )));
        }
        if let Some(reason) = tool.not_ready() {
            return Err(ToolError::dependency(format!(
                "tool {} is not ready: {reason}",
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
        self: &Arc<Self>,
        call: &Arc<CallContext>,
        request: &ToolName,
        tool: &Arc<T>,
        args: &mut Map<String, Value>,
        rules: &CallRules,
    ) -> Result<T::Answer, ToolError> {
        let mut trail = Trail::start(rules.config.audit().enabled);
        let result = self
            .govern(call, request, tool, args, rules, &mut trail)
            .await;
        let metadata = match trail.audited() {
            true => result.as_ref().ok().and_then(T::metadata),
            false => None,
        };
        let outcome = match &result {
            Ok(_) => Ok(metadata.as_ref()),
            Err(e) => Err(e),
        };
        let source = || tool.audit_source(&self.host);
        self.audit_call(request, source, rules, args, trail, outcome);
        result
    }

    async fn govern<T: Governed>(
        self: &Arc<Self>,
        call: &Arc<CallContext>,
        request: &ToolName,
        tool: &Arc<T>,
        args: &mut Map<String, Value>,
        rules: &CallRules,
        trail: &mut Trail,
    ) -> Result<T::Answer, ToolError> {
        tool.schema().check(args)?;
        let risk = tool.info().risk_level;
        let approved = self
            .approve(&rules.config, tool.name(), request.method(), risk, args)
            .await;
        match &approved {
            Ok(decision) => trail.approval(true, || decision.source.clone()),
            Err(e) => trail.approval(false, || {
                DecisionSource::Said(e.message().to_owned().into())
            }),
        }
        approved?;
        let retries = match retryable(tool.info()) {
            true => rules.max_retries,
            false => 0,
        };
        let mut attempt = 1;
        loop {
            let start = trail.attempt_starts();
            let result = tool.attempt(self, call, args, rules.timeout).await;
            trail.attempt(start, result.as_ref().err());
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
            // Boxed: a rare path, whose large future would be moved on every call.
            Box::pin(self.wait_to_retry(request, attempt, retries, &rules.backoff, &error)).await?;
            attempt += 1;
        }
    }

    /// Notes the retry, then waits for its backoff (or a stop).
    async fn wait_to_retry(
        &self,
        request: &ToolName,
        attempt: u32,
        retries: u32,
        backoff: &Backoff,
        error: &ToolError,
    ) -> Result<(), ToolError> {
        let delay = backoff.delay(attempt, jitter());
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
            () = tokio::time::sleep(delay) => Ok(()),
            e = self.intervention.stopped() => Err(e),
        }
    }

    /// Logs and audits a breaker's change of state.
    fn breaker_moved(&self, tool: &str, rules: &CallRules, transition: Option<Transition>) {
        let Some(t) = transition else {
            return;
        };
        let (from, to) = (t.from.as_str(), t.to.as_str());
        tracing::warn!("tool {tool}: circuit breaker {from} -> {to} ({})", t.reason);
        self.add_note(
            LogKind::Warning,
            format!("Circuit breaker of tool '{tool}': {from} -> {to}"),
            t.reason.clone(),
        );
        self.audit_breaker(tool, t, rules.config.audit());
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
