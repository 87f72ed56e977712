//! Governance answers: may a tool be called at all (`[access]`), and does a call need a
//! person's approval (`[tools.<name>] policy`, then `[policy]` by risk level, then defaults).

use std::fmt;

use plugin_api::RiskLevel;

use super::source::{clean, Source};
use super::Config;

/// What happens when a tool is called: it runs, a person is asked first, or it is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PolicyDecision {
    /// The call runs.
    Allow,
    /// A person approves the call first (once, for the session, always) or denies it.
    Ask,
    /// The call is refused.
    Deny,
}

impl PolicyDecision {
    /// `allow`, `ask` or `deny`, as written in `toolhost.toml`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Ask => "ask",
            Self::Deny => "deny",
        }
    }
}

impl fmt::Display for PolicyDecision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether `[access]` lets a tool be called at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Access {
    /// The tool may be called (the approval policy still applies).
    Allowed,
    /// The tool may not be called.
    Denied {
        /// One line: which entry of which file refuses it, e.g. ``tool `shell` is denied by
        /// "cap:exec" in usr/toolhost.toml:14 [access] deny``.
        reason: String,
    },
}

impl Config {
    /// Whether a call of `tool` runs, needs approval, or is refused, and where that was decided:
    /// `[tools.<tool>] policy` if a file sets it, else `[policy] <risk>`, else the defaults
    /// (`read` and `write` allow, `exec` asks).
    ///
    /// ```
    /// use toolhost::config::{Config, PolicyDecision};
    /// use toolhost::RiskLevel;
    ///
    /// let (decision, source) = Config::default().policy("shell", RiskLevel::Exec);
    /// assert_eq!(decision, PolicyDecision::Ask);
    /// assert_eq!(source.to_string(), "default: exec asks");
    /// ```
    pub fn policy(&self, tool: &str, risk: RiskLevel) -> (PolicyDecision, Source) {
        let own = self.values.tools.get(tool).and_then(|t| t.policy);
        if let Some(decision) = own {
            return (decision, self.source(&["tools", tool, "policy"]));
        }
        self.risk_policy(risk)
    }

    /// The policy for a call of `tool` by an MCP client (`toolhost serve-mcp`): `[tools.<tool>]
    /// mcp_policy` if a file sets it; else `[tools.<tool>] policy` when it asks or denies; else
    /// `[policy] <risk>`, else the defaults. A tool's own `policy = "allow"` (what answering
    /// "always" in a terminal saves) does not let MCP clients call it without asking:
    /// `mcp_policy = "allow"` does.
    ///
    /// ```
    /// use toolhost::config::{Config, PolicyDecision};
    /// use toolhost::{Layout, RiskLevel};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let root = std::env::temp_dir().join(format!("toolhost-mcp-policy-doc-{}", std::process::id()));
    /// std::fs::create_dir_all(root.join("usr"))?;
    /// let file = root.join("usr/toolhost.toml");
    /// std::fs::write(&file, "[tools.shell]\npolicy = \"allow\"\n")?;
    /// let config = Config::load(&Layout::new(&root), "default", toolhost::DEFAULT_MAX_TEXT_BYTES)?;
    /// assert_eq!(config.policy("shell", RiskLevel::Exec).0, PolicyDecision::Allow);
    /// assert_eq!(config.mcp_policy("shell", RiskLevel::Exec).0, PolicyDecision::Ask);
    /// std::fs::write(&file, "[tools.shell]\npolicy = \"allow\"\nmcp_policy = \"allow\"\n")?;
    /// let config = Config::load(&Layout::new(&root), "default", toolhost::DEFAULT_MAX_TEXT_BYTES)?;
    /// assert_eq!(config.mcp_policy("shell", RiskLevel::Exec).0, PolicyDecision::Allow);
    /// # std::fs::remove_dir_all(&root)?;
    /// # Ok(()) }
    /// ```
    pub fn mcp_policy(&self, tool: &str, risk: RiskLevel) -> (PolicyDecision, Source) {
        let entry = self.values.tools.get(tool);
        if let Some(decision) = entry.and_then(|t| t.mcp_policy) {
            return (decision, self.source(&["tools", tool, "mcp_policy"]));
        }
        match entry.and_then(|t| t.policy) {
            Some(PolicyDecision::Allow) | None => self.risk_policy(risk),
            Some(decision) => (decision, self.source(&["tools", tool, "policy"])),
        }
    }

    /// `[policy] <risk>`, else the defaults.
    fn risk_policy(&self, risk: RiskLevel) -> (PolicyDecision, Source) {
        let levels = &self.values.policy;
        let (set, default, what) = match risk {
            RiskLevel::Read => (levels.read, PolicyDecision::Allow, "default: read allows"),
            RiskLevel::Write => (levels.write, PolicyDecision::Allow, "default: write allows"),
            // `exec`, and any level a later plugin-api adds: the most dangerous one known.
            _ => (levels.exec, PolicyDecision::Ask, "default: exec asks"),
        };
        match set {
            Some(decision) => (decision, self.source(&["policy", risk.as_str()])),
            None => (default, Source::Default(what)),
        }
    }

    /// Whether `[access]` lets `tool` (which declares `capabilities`) be called: never if an
    /// entry of `deny` names it or one of its capabilities (`cap:<tag>`); else, if `allow` is
    /// set, only if an entry of `allow` does; else always. Deny wins over allow.
    ///
    /// ```
    /// use toolhost::config::{Access, Config};
    ///
    /// assert_eq!(Config::default().access("shell", &["exec".to_owned()]), Access::Allowed);
    /// ```
    pub fn access(&self, tool: &str, capabilities: &[String]) -> Access {
        let lists = &self.values.access;
        let denied_by = lists.deny.iter().flatten();
        if let Some(entry) = denied_by
            .into_iter()
            .find(|e| e.matches(tool, capabilities))
        {
            let (tool_shown, entry) = (clean(tool), clean(&entry.to_string()));
            let source = self.source(&["access", "deny"]);
            let reason = format!("tool `{tool_shown}` is denied by \"{entry}\" in {source}");
            return Access::Denied { reason };
        }
        match &lists.allow {
            Some(allow) if !allow.iter().any(|e| e.matches(tool, capabilities)) => {
                let (tool_shown, source) = (clean(tool), self.source(&["access", "allow"]));
                let reason = format!("tool `{tool_shown}` is not in {source}");
                Access::Denied { reason }
            }
            _ => Access::Allowed,
        }
    }
}
