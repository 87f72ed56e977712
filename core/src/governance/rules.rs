//! The rules of one call: its deadline, retries, backoff and breaker settings, from what the
//! tool declares overridden by the profile's config; and the words for a passed deadline.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use crate::config::{Backoff, BreakerSettings, Config};
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
    /// The rules for a call of the tool `name`: what its `info` declares, overridden by the
    /// profile's config.
    pub(crate) fn new(
        name: &str,
        info: &ToolInfo,
        layer: Cow<'static, str>,
        config: Arc<Config>,
    ) -> Self {
        let declared = crate::config::numbers::capped_seconds(info.timeout_seconds);
        let timeout = config.timeout(name, declared);
        Self {
            timeout: (!timeout.is_zero()).then_some(timeout),
            max_retries: config.max_retries(name, info.max_retries),
            backoff: config.backoff(),
            breaker: config.breaker(),
            config,
            layer,
        }
    }
}

/// Whether a tool's failed attempts may be retried: it only reads, or says it is idempotent.
pub(crate) fn retryable(info: &ToolInfo) -> bool {
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

/// A number in [0, 1] for the backoff's jitter, from a shared xorshift generator.
pub(crate) fn jitter() -> f64 {
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
