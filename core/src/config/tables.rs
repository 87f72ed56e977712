//! The schema of `toolhost.toml`: one struct per table, every key optional, unknown keys
//! refused. Each value type checks its range while it is read, so a mistake is reported with
//! the span of the value (see [`locate`](super::locate)), and its `expecting` text is what the
//! error message says is expected.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, Deserializer, Unexpected, Visitor};
use serde::Deserialize;

pub(super) use super::amounts::{
    AtLeastOne, Bytes, Count, ExportInterval, Mebibytes, Millis, Seconds, WholeSeconds,
};
use super::PolicyDecision;
use crate::layout::is_safe_name;

/// One file, or several merged: what is not set is `None`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default, expecting = "a table")]
pub(super) struct FileConfig {
    pub limits: Limits,
    pub calls: Calls,
    pub breaker: Breaker,
    pub policy: Policy,
    pub tools: BTreeMap<String, ToolEntry>,
    pub access: AccessLists,
    pub audit: Audit,
    /// Which tools run in a worker process (top-level `isolate = [...]`).
    pub isolate: Option<Vec<IsolateEntry>>,
    pub isolation: Isolation,
    /// `pinning = true`: refuse libraries not pinned in `usr/plugins.lock`.
    pub pinning: Option<bool>,
    pub packages: Packages,
    pub sandbox: Sandbox,
    pub telemetry: Telemetry,
}

/// `[telemetry]`: the OpenTelemetry export, the same settings as the standard `OTEL_*`
/// variables (which win over it). Only in `usr/toolhost.toml`: one process exports for all.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default, expecting = "a table")]
pub(super) struct Telemetry {
    /// `OTEL_EXPORTER_OTLP_ENDPOINT`
    pub endpoint: Option<Endpoint>,
    /// `OTEL_SERVICE_NAME`
    pub service_name: Option<String>,
    /// `OTEL_TRACES_EXPORTER`
    pub traces_exporter: Option<Exporter>,
    /// `OTEL_METRICS_EXPORTER`
    pub metrics_exporter: Option<Exporter>,
    /// `OTEL_METRIC_EXPORT_INTERVAL`
    pub metric_export_interval_ms: Option<ExportInterval>,
    /// `OTEL_EXPORTER_OTLP_HEADERS`
    pub headers: Option<BTreeMap<String, String>>,
}

/// An OTLP endpoint: an `http://` or `https://` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Endpoint(pub String);

impl<'de> Deserialize<'de> for Endpoint {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let url = String::deserialize(d)?;
        match url.starts_with("http://") || url.starts_with("https://") {
            true => Ok(Self(url)),
            false => Err(de::Error::custom(format!(
                "expected an http:// or https:// URL, not \"{url}\""
            ))),
        }
    }
}

/// Where a signal goes: `otlp` or `none`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase", expecting = "\"otlp\" or \"none\"")]
pub(super) enum Exporter {
    Otlp,
    None,
}

/// `[sandbox]`: what every sandboxed tool of the profile is granted, per plugin folder too,
/// and whether a kernel that enforces only part of it may run sandboxed tools.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default, expecting = "a table")]
pub(super) struct Sandbox {
    pub grant: Option<Vec<Grant>>,
    pub weaker: Option<bool>,
    /// `[sandbox.plugins.<folder>]`: the grants of one plugin's tools.
    pub plugins: BTreeMap<String, PluginSandbox>,
}

/// `[sandbox.plugins.<folder>]`
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default, expecting = "a table")]
pub(super) struct PluginSandbox {
    pub grant: Option<Vec<Grant>>,
}

/// One entry of a `grant` list: a [`Capability`](super::Capability).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Grant(pub super::Capability);

impl<'de> Deserialize<'de> for Grant {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Read through a visitor, so a mistake is reported at the entry, not its list.
        d.deserialize_any(GrantVisitor)
    }
}

struct GrantVisitor;

impl Visitor<'_> for GrantVisitor {
    type Value = Grant;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(super::sandbox::CAPABILITY_EXPECTED)
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Grant, E> {
        match super::Capability::parse(text) {
            Ok(Some(cap)) => Ok(Grant(cap)),
            Ok(None) => Err(E::custom(format!(
                "`{text}` is not a capability: expected {}",
                super::sandbox::CAPABILITY_EXPECTED
            ))),
            Err(e) => Err(E::custom(e)),
        }
    }
}

/// `sandbox = "on" | "off"` of a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct SandboxSwitch(pub bool);

impl<'de> Deserialize<'de> for SandboxSwitch {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match String::deserialize(d)?.as_str() {
            "on" => Ok(Self(true)),
            "off" => Ok(Self(false)),
            other => Err(de::Error::invalid_value(
                Unexpected::Str(other),
                &r#""on" or "off""#,
            )),
        }
    }
}

/// `[packages]`: the trust policy of `toolhost add` and `update`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default, expecting = "a table")]
pub(super) struct Packages {
    pub require_signature: Option<bool>,
    /// `only_installed = true`: a library under `usr/` loads only as a file of an installed
    /// package.
    pub only_installed: Option<bool>,
    /// `[packages.signers]`: source prefix -> the key ids allowed to sign packages from it.
    pub signers: Option<BTreeMap<SignerPattern, Vec<KeyId>>>,
    /// `isolate = false`: installed packages run where `isolate` says, not isolated by default.
    pub isolate: Option<bool>,
}

/// A source prefix of `[packages.signers]`, checked to be one a source can start with: a
/// source, as the lock records it, is an `https://`/`http://` URL, an absolute path,
/// `path+/DIR` or `git+URL`, never with a `.` or `..` part; a prefix that cannot match
/// would leave the rule silently unused (and every trusted key allowed).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct SignerPattern(pub String);

impl<'de> Deserialize<'de> for SignerPattern {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let pattern = String::deserialize(deserializer)?;
        check_signer_pattern(&pattern).map_err(de::Error::custom)?;
        Ok(Self(pattern))
    }
}

/// Why `pattern` can never be the start of a package's source, if it cannot.
pub(crate) fn check_signer_pattern(pattern: &str) -> Result<(), String> {
    let rest = ["https://", "http://", "git+", "path+"]
        .iter()
        .find_map(|scheme| pattern.strip_prefix(scheme));
    let absolute = std::path::Path::new(pattern).is_absolute() || pattern.starts_with('/');
    let cannot = match rest {
        _ if pattern.is_empty() => Some("it is empty"),
        None if !absolute => {
            Some("a source is an https:// or http:// URL, an absolute path, path+DIR or git+URL")
        }
        _ if pattern.chars().any(char::is_control) => Some("it has a control character"),
        _ => {
            let path = rest.unwrap_or(pattern);
            // A last part may be a partial name (`https://example.com/pkg-`): only whole
            // `.`/`..` parts before it, or as it, cannot match.
            path.split(['/', '\\'])
                .any(|part| part == ".." || part == ".")
                .then_some(
                    "sources are written without `.` or `..` parts (URLs and paths are resolved)",
                )
        }
    };
    match cannot {
        Some(why) => Err(format!(
            "the source prefix {pattern:?} can never match a package's source ({why}): write it as `toolhost installed` shows sources"
        )),
        None => Ok(()),
    }
}

/// A key id in `[packages.signers]`: 16 hex digits, as `toolhost trust list` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct KeyId(pub String);

impl<'de> Deserialize<'de> for KeyId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let id = String::deserialize(deserializer)?;
        // A key id as minisign prints it (`package::signature::is_key_id`, below this module).
        match id.len() == 16 && id.bytes().all(|b| b.is_ascii_hexdigit()) {
            true => Ok(Self(id)),
            false => Err(de::Error::custom(format!(
                "{id:?} is not a key id: 16 hex digits, as `toolhost trust list` shows"
            ))),
        }
    }
}

/// `[isolation]`: the limits of worker processes.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default, expecting = "a table")]
pub(super) struct Isolation {
    pub memory_mb: Option<Mebibytes>,
    pub cpu_seconds: Option<WholeSeconds>,
    pub grace_ms: Option<Millis>,
}

/// An entry of `isolate`: which tools run in a worker process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum IsolateEntry {
    /// `*`: every tool.
    All,
    /// A kind of layer: `usr`, `plugins`, `core`, `profile`.
    Layer(crate::layout::LayerKind),
    /// `plugin:<folder>`: the tools of one plugin (its own folder and its profiles' folders).
    Plugin(String),
    /// A tool, by name.
    Tool(String),
}

impl<'de> Deserialize<'de> for IsolateEntry {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(IsolateEntryVisitor)
    }
}

struct IsolateEntryVisitor;

impl Visitor<'_> for IsolateEntryVisitor {
    type Value = IsolateEntry;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(r#"a tool name, plugin:<folder>, "usr", "plugins", "core", "profile" or "*""#)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<IsolateEntry, E> {
        use crate::layout::LayerKind;
        Ok(match v {
            "*" => IsolateEntry::All,
            "usr" | "user" => IsolateEntry::Layer(LayerKind::User),
            "plugins" => IsolateEntry::Layer(LayerKind::Plugin),
            "core" => IsolateEntry::Layer(LayerKind::Core),
            "profile" => IsolateEntry::Layer(LayerKind::Profile),
            _ => match v.strip_prefix("plugin:") {
                Some(folder) if is_safe_name(folder) => IsolateEntry::Plugin(folder.to_owned()),
                None if is_safe_name(v) => IsolateEntry::Tool(v.to_owned()),
                _ => return Err(E::invalid_value(Unexpected::Str(v), &self)),
            },
        })
    }
}

/// `[limits]`
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default, expecting = "a table")]
pub(super) struct Limits {
    pub max_output: Option<Bytes>,
    pub init_seconds: Option<Seconds>,
}

/// `[calls]`: defaults for every tool.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default, expecting = "a table")]
pub(super) struct Calls {
    pub timeout_seconds: Option<Seconds>,
    pub max_retries: Option<Count>,
    pub backoff_ms: Option<Millis>,
    pub backoff_max_ms: Option<Millis>,
}

/// `[breaker]`
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default, expecting = "a table")]
pub(super) struct Breaker {
    pub failures: Option<AtLeastOne>,
    pub cooldown_seconds: Option<Seconds>,
    pub half_open_calls: Option<AtLeastOne>,
}

/// `[policy]`: a decision per risk level.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default, expecting = "a table")]
pub(super) struct Policy {
    pub read: Option<PolicyDecision>,
    pub write: Option<PolicyDecision>,
    pub exec: Option<PolicyDecision>,
}

/// `[tools.<name>]`
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default, expecting = "a table")]
pub(super) struct ToolEntry {
    pub timeout_seconds: Option<Seconds>,
    pub max_retries: Option<Count>,
    pub policy: Option<PolicyDecision>,
    /// The policy for the calls of MCP clients (`toolhost serve-mcp`), where `policy =
    /// "allow"` does not apply.
    pub mcp_policy: Option<PolicyDecision>,
    /// What the tool is granted in its sandbox.
    pub grant: Option<Vec<Grant>>,
    /// `sandbox = "off"`: isolated without a sandbox.
    pub sandbox: Option<SandboxSwitch>,
}

/// `[access]`
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default, expecting = "a table")]
pub(super) struct AccessLists {
    pub allow: Option<Vec<AccessEntry>>,
    pub deny: Option<Vec<AccessEntry>>,
}

/// `[audit]`
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default, expecting = "a table")]
pub(super) struct Audit {
    pub enabled: Option<bool>,
    pub fsync: Option<bool>,
    pub required: Option<bool>,
    pub key_env: Option<EnvName>,
}

/// The name of an environment variable: letters, digits and `_`, not starting with a digit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct EnvName(pub String);

impl<'de> Deserialize<'de> for EnvName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        let valid = !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        match valid {
            true => Ok(Self(name)),
            false => Err(serde::de::Error::custom(format!(
                "expected the name of an environment variable (letters, digits and _), not \"{name}\""
            ))),
        }
    }
}

impl<'de> Deserialize<'de> for PolicyDecision {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(DecisionVisitor)
    }
}

struct DecisionVisitor;

impl Visitor<'_> for DecisionVisitor {
    type Value = PolicyDecision;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(r#""allow", "ask" or "deny""#)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<PolicyDecision, E> {
        match v {
            "allow" => Ok(PolicyDecision::Allow),
            "ask" => Ok(PolicyDecision::Ask),
            "deny" => Ok(PolicyDecision::Deny),
            _ => Err(E::invalid_value(Unexpected::Str(v), &self)),
        }
    }
}

/// An entry of `[access] allow` or `deny`: a tool's name, or `cap:<capability tag>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum AccessEntry {
    /// A tool, by name.
    Tool(String),
    /// Every tool that declares this capability tag.
    Capability(String),
}

impl AccessEntry {
    /// Whether this entry names the tool `name`, or one of its capability tags.
    pub(super) fn matches(&self, name: &str, capabilities: &[String]) -> bool {
        match self {
            Self::Tool(tool) => tool == name,
            Self::Capability(tag) => capabilities.iter().any(|c| c == tag),
        }
    }
}

impl fmt::Display for AccessEntry {
    /// As written in the file: `weather`, `cap:network`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Tool(name) => f.write_str(name),
            Self::Capability(tag) => write!(f, "cap:{tag}"),
        }
    }
}

impl<'de> Deserialize<'de> for AccessEntry {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(AccessEntryVisitor)
    }
}

struct AccessEntryVisitor;

impl Visitor<'_> for AccessEntryVisitor {
    type Value = AccessEntry;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a tool name or cap:<capability tag>")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<AccessEntry, E> {
        match v.strip_prefix("cap:") {
            Some(tag) if !tag.is_empty() && !tag.chars().any(char::is_control) => {
                Ok(AccessEntry::Capability(tag.to_owned()))
            }
            None if is_safe_name(v) => Ok(AccessEntry::Tool(v.to_owned())),
            _ => Err(E::invalid_value(Unexpected::Str(v), &self)),
        }
    }
}

#[cfg(test)]
mod signer_pattern_tests {
    use super::check_signer_pattern;

    #[test]
    fn a_signers_prefix_must_be_one_a_source_can_start_with() {
        for good in [
            "https://plugins.example.com/",
            "https://plugins.example.com/pkg-",
            "/srv/packages/",
            "path+/srv/src",
            "git+https://example.com/repo",
        ] {
            assert!(check_signer_pattern(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "dist/",
            "/srv/../x",
            "https://example.com/a/../b",
            "./x",
            "/srv/./x",
        ] {
            let why = check_signer_pattern(bad).unwrap_err();
            assert!(why.contains("can never match"), "{bad}: {why}");
        }
    }
}
