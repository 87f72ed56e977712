//! The layered configuration, `toolhost.toml`: limits, call defaults, the circuit breaker,
//! approval policy, access lists and the audit log.
//!
//! Two files, both optional: the user's `usr/toolhost.toml`, and each profile's
//! `usr/agents/<P>/toolhost.toml`, which overrides it key by key (tables merge at any depth; a
//! key the profile sets wins; an array is replaced, not appended to). A missing file, or a
//! missing key, means the default. Both are read through the layout's safe reader (a regular
//! file of at most [`HostOptions::max_text_bytes`](crate::HostOptions::max_text_bytes)), and
//! every mistake (a typo in a key, a value of the wrong type or range, invalid TOML) is one
//! [`ConfigError`] line naming the file, the line and the key.
//!
//! ```
//! use std::time::Duration;
//! use toolhost::config::{Access, Config, PolicyDecision};
//! use toolhost::{Layout, RiskLevel};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let root = std::env::temp_dir().join(format!("toolhost-config-doc-{}", std::process::id()));
//! std::fs::create_dir_all(root.join("usr/agents/dev"))?;
//! std::fs::write(root.join("usr/toolhost.toml"), "[calls]\ntimeout_seconds = 20\n")?;
//! std::fs::write(
//!     root.join("usr/agents/dev/toolhost.toml"),
//!     "[tools.weather]\ntimeout_seconds = 2.5\n\n[access]\ndeny = [\"cap:exec\"]\n",
//! )?;
//! let config = Config::load(&Layout::new(&root), "dev", toolhost::DEFAULT_MAX_TEXT_BYTES)?;
//! let declared = Duration::from_secs(30); // the tool's ToolInfo::timeout_seconds
//! assert_eq!(config.timeout("weather", declared), Duration::from_millis(2500));
//! assert_eq!(config.timeout("greet", declared), Duration::from_secs(20));
//! assert!(matches!(config.access("shell", &["exec".into()]), Access::Denied { .. }));
//! assert_eq!(config.policy("greet", RiskLevel::Read).0, PolicyDecision::Allow);
//! # std::fs::remove_dir_all(&root)?;
//! # Ok(()) }
//! ```

mod amounts;
mod edit;
mod error;
mod load;
mod locate;
pub mod numbers;
pub(crate) mod pinning;
mod policy;
mod sandbox;
mod settings;
mod source;
mod tables;

use std::path::PathBuf;
use std::time::Duration;

use crate::layout::Layout;
use source::Origins;
use tables::FileConfig;

pub use edit::{save_tool_mcp_policy, save_tool_policy};
pub use error::{ConfigError, ConfigErrorKind};
pub use policy::{Access, PolicyDecision};
pub use sandbox::{
    Capability, CapabilityError, CapabilityErrorKind, Port, SandboxPolicy, CAPABILITY_EXPECTED,
};
pub use settings::{
    sandbox_defaults, AuditSettings, Backoff, BreakerSettings, IsolationSettings,
    TelemetrySettings, DEFAULT_INIT_TIMEOUT, MIN_WORKER_MEMORY_MB,
};
pub use source::{Origin, Source};

pub use crate::layout::CONFIG_FILE_NAME;

/// A profile's configuration: its files merged, each value resolved with its default, and
/// where each value set came from ([`origin`](Self::origin)). [`Config::default`] is the
/// configuration of no file at all.
#[derive(Debug, Clone, Default)]
pub struct Config {
    values: FileConfig,
    origins: Origins,
    files: Vec<PathBuf>,
}

impl Config {
    /// Reads `usr/toolhost.toml` and `usr/agents/<profile>/toolhost.toml` under `layout`'s
    /// root (see the [module docs](self)), each at most `max_text_bytes` long.
    ///
    /// Fails on the first mistake: a file that is not a regular file (a folder, a FIFO: it is
    /// never waited on), is too large or cannot be read, is not valid TOML, or has a key the
    /// schema does not know or a value it does not accept; or a profile name that is not a
    /// safe name.
    pub fn load(layout: &Layout, profile: &str, max_text_bytes: u64) -> Result<Self, ConfigError> {
        let layered = load::load(layout, Some(profile), max_text_bytes)?;
        Ok(Self {
            values: layered.values,
            origins: layered.origins,
            files: layered.files,
        })
    }

    /// Reads `usr/toolhost.toml` alone: the host-wide settings, such as
    /// [`telemetry`](Self::telemetry), before a command knows its profile. Fails as
    /// [`load`](Self::load) does.
    pub fn load_host(layout: &Layout, max_text_bytes: u64) -> Result<Self, ConfigError> {
        let layered = load::load(layout, None, max_text_bytes)?;
        Ok(Self {
            values: layered.values,
            origins: layered.origins,
            files: layered.files,
        })
    }

    /// The files read, the global one first (missing files are left out).
    pub fn files(&self) -> &[PathBuf] {
        &self.files
    }

    /// Where the value at `keys` was set, if a file sets it: `&["tools", "weather",
    /// "timeout_seconds"]`, `&["calls", "max_retries"]`. An array is one value
    /// (`&["access", "allow"]`).
    pub fn origin(&self, keys: &[&str]) -> Option<&Origin> {
        let keys: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
        self.origins.get(&keys)
    }

    /// [`origin`](Self::origin) as a [`Source`], for a value known to be set.
    fn source(&self, keys: &[&str]) -> Source {
        match self.origin(keys) {
            Some(origin) => Source::File(origin.clone()),
            None => Source::Default("toolhost.toml"),
        }
    }

    /// How long one attempt of `tool` may run: `[tools.<tool>] timeout_seconds`, else
    /// `[calls] timeout_seconds`, else `declared` (the tool's `ToolInfo::timeout_seconds`).
    pub fn timeout(&self, tool: &str, declared: Duration) -> Duration {
        let own = self.values.tools.get(tool).and_then(|t| t.timeout_seconds);
        match own.or(self.values.calls.timeout_seconds) {
            Some(seconds) => seconds.0,
            None => declared,
        }
    }

    /// How many times a failed call of `tool` is tried again: `[tools.<tool>] max_retries`,
    /// else `[calls] max_retries`, else `declared` (the tool's `ToolInfo::max_retries`).
    pub fn max_retries(&self, tool: &str, declared: u32) -> u32 {
        let own = self.values.tools.get(tool).and_then(|t| t.max_retries);
        match own.or(self.values.calls.max_retries) {
            Some(count) => count.0,
            None => declared,
        }
    }

    /// The delays between retries (`[calls] backoff_ms`, `backoff_max_ms`).
    pub fn backoff(&self) -> Backoff {
        let (calls, default) = (&self.values.calls, Backoff::default());
        Backoff {
            first: calls.backoff_ms.map_or(default.first, |ms| ms.0),
            max: calls.backoff_max_ms.map_or(default.max, |ms| ms.0),
        }
    }

    /// The circuit breaker's settings (`[breaker]`).
    pub fn breaker(&self) -> BreakerSettings {
        let (breaker, default) = (&self.values.breaker, BreakerSettings::default());
        BreakerSettings {
            failures: breaker.failures.map_or(default.failures, |n| n.0),
            cooldown: breaker.cooldown_seconds.map_or(default.cooldown, |s| s.0),
            half_open_calls: breaker
                .half_open_calls
                .map_or(default.half_open_calls, |n| n.0),
        }
    }

    /// The most bytes of a tool's answer that go on to the model and the history:
    /// `[limits] max_output`, else `otherwise` (the host's
    /// [`HostOptions::max_output`](crate::HostOptions::max_output), 64 KiB by default).
    pub fn max_output(&self, otherwise: usize) -> usize {
        self.values.limits.max_output.map_or(otherwise, |b| b.0)
    }

    /// How long a library's constructor and its metadata read may take, in this process or in
    /// a worker (`[limits] init_seconds`, else [`DEFAULT_INIT_TIMEOUT`]). The host reads it
    /// from `usr/toolhost.toml` once, when it starts.
    pub fn init_timeout(&self) -> Duration {
        self.values
            .limits
            .init_seconds
            .map_or(DEFAULT_INIT_TIMEOUT, |s| s.0)
    }

    /// Whether libraries must be pinned in `usr/plugins.lock` (`pinning`, default `false`;
    /// see [`crate::load::pins`]). The host reads it from `usr/toolhost.toml` once, when it starts.
    pub fn pinning(&self) -> bool {
        self.values.pinning.unwrap_or(false)
    }

    /// Whether `toolhost add` and `update` refuse a package without a signature by a trusted
    /// key (`[packages] require_signature`, default `true`).
    pub fn require_signature(&self) -> bool {
        self.values.packages.require_signature.unwrap_or(true)
    }

    /// Whether a library under `usr/` loads only as a file of a package installed with
    /// `toolhost add` (`[packages] only_installed`, default `false`): hand-copied libraries
    /// and `toolhost new` links are refused. The host reads it once, when it starts.
    pub fn only_installed(&self) -> bool {
        self.values.packages.only_installed.unwrap_or(false)
    }

    /// `[packages.signers]`: for sources starting with each prefix (a URL or a folder), the
    /// ids of the only keys whose signatures `toolhost add` accepts from there.
    pub fn package_signers(&self) -> Vec<(String, Vec<String>)> {
        self.values
            .packages
            .signers
            .iter()
            .flatten()
            .map(|(prefix, ids)| {
                (
                    prefix.0.clone(),
                    ids.iter().map(|id| id.0.clone()).collect(),
                )
            })
            .collect()
    }

    /// Whether `tool`, found in `layer`, runs in a worker process: `isolate` names it, its
    /// plugin (`plugin:<folder>`), its kind of layer (`usr`, `plugins`, `core`, `profile`), or
    /// `*`. See the book, `docs/src/reference/isolation.md`.
    pub fn isolated(&self, tool: &str, layer: &crate::layout::Layer) -> bool {
        self.isolates(Some(tool), layer)
    }

    /// Whether an extension found in `layer` runs in a worker process: `isolate` names its
    /// plugin, its kind of layer, or `*` (tool names do not pick extensions).
    pub fn isolated_extension(&self, layer: &crate::layout::Layer) -> bool {
        self.isolates(None, layer)
    }

    fn isolates(&self, tool: Option<&str>, layer: &crate::layout::Layer) -> bool {
        use tables::IsolateEntry;
        let Some(entries) = &self.values.isolate else {
            return false;
        };
        entries.iter().any(|entry| match entry {
            IsolateEntry::All => true,
            IsolateEntry::Layer(kind) => *kind == layer.kind,
            IsolateEntry::Tool(name) => Some(name.as_str()) == tool,
            IsolateEntry::Plugin(folder) => plugin_folder(layer) == Some(folder.as_str()),
        })
    }

    /// The limits of worker processes (`[isolation]`), without a sandbox (see
    /// [`sandbox`](Self::sandbox)).
    pub fn isolation(&self) -> IsolationSettings {
        let (table, default) = (&self.values.isolation, IsolationSettings::default());
        IsolationSettings {
            memory_mb: table.memory_mb.map(|m| m.0),
            cpu_seconds: table.cpu_seconds.map(|s| s.0),
            grace: table.grace_ms.map_or(default.grace, |ms| ms.0),
            ..default
        }
    }

    /// How the isolated `tool` (`None` for an extension) found in `layer` runs: the
    /// `[isolation]` limits, its sandbox ([`sandbox`](Self::sandbox)), and what its grants
    /// give it besides (secrets, environment variables, higher limits). A sandboxed worker is
    /// bounded by default: each limit is its grant (`memory:MB`, `cpu:SECONDS`, `tasks:N`),
    /// else `[isolation]`'s, else [`sandbox_defaults`].
    pub fn isolation_of(
        &self,
        tool: Option<&str>,
        layer: &crate::layout::Layer,
    ) -> IsolationSettings {
        let mut settings = self.isolation();
        let grants = self.grants(tool, layer);
        let granted =
            |pick: fn(&Capability) -> Option<u64>| grants.iter().filter_map(|(g, _)| pick(g)).max();
        for (grant, _) in &grants {
            match grant {
                Capability::Secret(key) if !settings.secrets.contains(key) => {
                    settings.secrets.push(key.clone())
                }
                Capability::Env(name) if !settings.env.contains(name) => {
                    settings.env.push(name.clone())
                }
                _ => {}
            }
        }
        settings.sandbox = self.sandbox(tool, layer).map(std::sync::Arc::new);
        if settings.sandbox.is_some() {
            use sandbox_defaults as default;
            let memory = granted(|g| match g {
                Capability::Memory(mb) => Some(*mb),
                _ => None,
            });
            let cpu = granted(|g| match g {
                Capability::Cpu(s) => Some(*s),
                _ => None,
            });
            let tasks = granted(|g| match g {
                Capability::Tasks(n) => Some(*n),
                _ => None,
            });
            settings.memory_mb = memory.or(settings.memory_mb).or(Some(default::MEMORY_MB));
            settings.cpu_seconds = cpu.or(settings.cpu_seconds).or(Some(default::CPU_SECONDS));
            settings.tasks = tasks.or(Some(default::TASKS));
            let cpus = granted(|g| match g {
                Capability::Cpus(n) => Some(*n),
                _ => None,
            });
            settings.cpus = cpus;
        }
        settings
    }

    /// Whether packages installed with `toolhost add` run isolated (and so sandboxed) when
    /// `isolate` does not name them (`[packages] isolate`, default `true`).
    pub fn isolate_packages(&self) -> bool {
        self.values.packages.isolate.unwrap_or(true)
    }

    /// The sandbox of `tool` (`None` for an extension) found in `layer`, if it runs isolated:
    /// `None` when `[tools.<tool>] sandbox = "off"`; else its grants, from `[sandbox] grant`,
    /// `[sandbox.plugins.<folder>] grant` (its plugin's) and `[tools.<tool>] grant`.
    pub fn sandbox(
        &self,
        tool: Option<&str>,
        layer: &crate::layout::Layer,
    ) -> Option<SandboxPolicy> {
        let entry = tool.and_then(|t| self.values.tools.get(t));
        if entry.and_then(|e| e.sandbox).is_some_and(|on| !on.0) {
            return None;
        }
        Some(SandboxPolicy {
            grants: self.grants(tool, layer),
            weaker: self.values.sandbox.weaker.unwrap_or(false),
            ..SandboxPolicy::default()
        })
    }

    /// What `tool` (`None` for an extension) of `layer` is granted, each with where: from
    /// `[sandbox] grant`, `[sandbox.plugins.<folder>] grant` (its plugin's) and
    /// `[tools.<tool>] grant`, whether it runs sandboxed or not.
    pub fn grants(
        &self,
        tool: Option<&str>,
        layer: &crate::layout::Layer,
    ) -> Vec<(Capability, String)> {
        let entry = tool.and_then(|t| self.values.tools.get(t));
        let sandbox = &self.values.sandbox;
        let mut grants = Vec::new();
        let mut add = |list: &Option<Vec<tables::Grant>>, keys: &[&str]| {
            let from = self.source(keys).to_string();
            for grant in list.iter().flatten() {
                grants.push((grant.0.clone(), from.clone()));
            }
        };
        add(&sandbox.grant, &["sandbox", "grant"]);
        if let Some(folder) = plugin_folder(layer) {
            if let Some(plugin) = sandbox.plugins.get(folder) {
                add(&plugin.grant, &["sandbox", "plugins", folder, "grant"]);
            }
        }
        if let (Some(tool), Some(entry)) = (tool, entry) {
            add(&entry.grant, &["tools", tool, "grant"]);
        }
        grants
    }

    /// The audit log's settings (`[audit]`).
    pub fn audit(&self) -> AuditSettings {
        let (audit, default) = (&self.values.audit, AuditSettings::default());
        AuditSettings {
            enabled: audit.enabled.unwrap_or(default.enabled),
            fsync: audit.fsync.unwrap_or(default.fsync),
            required: audit.required.or(default.required),
        }
    }

    /// The OpenTelemetry export `[telemetry]` asks for (only `usr/toolhost.toml` may set it).
    pub fn telemetry(&self) -> TelemetrySettings {
        let t = &self.values.telemetry;
        let exporter = |e: &Option<tables::Exporter>| {
            e.map(|e| match e {
                tables::Exporter::Otlp => "otlp".to_owned(),
                tables::Exporter::None => "none".to_owned(),
            })
        };
        TelemetrySettings {
            endpoint: t.endpoint.as_ref().map(|e| e.0.clone()),
            service_name: t.service_name.clone(),
            traces_exporter: exporter(&t.traces_exporter),
            metrics_exporter: exporter(&t.metrics_exporter),
            metric_export_interval_ms: t.metric_export_interval_ms.map(|ms| ms.0),
            headers: t
                .headers
                .iter()
                .flatten()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        }
    }

    /// The environment variable that holds the audit log's key (`[audit] key_env`), if the
    /// file names one.
    pub fn audit_key_env(&self) -> Option<&str> {
        self.values
            .audit
            .key_env
            .as_ref()
            .map(|name| name.0.as_str())
    }
}

/// The plugin folder `layer` belongs to (`web` for `plugins/web`, `usr/plugins/web` and
/// `plugins/web/agents/dev`), if it is a plugin's.
fn plugin_folder(layer: &crate::layout::Layer) -> Option<&str> {
    let label = layer.label.strip_prefix("usr/").unwrap_or(&layer.label);
    let rest = label.strip_prefix("plugins/")?;
    Some(rest.split('/').next().unwrap_or(rest)).filter(|f| !f.is_empty())
}

#[cfg(test)]
mod tests;
