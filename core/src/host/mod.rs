//! The host: finds libraries along a profile's layers, loads each once per content, and caches
//! what wins. One job per file: this one owns the host's state; [`lookup`] resolves tools and
//! extensions, [`changes`](reload::changes) reacts to file changes, [`listing`] lists what a profile sees, and
//! [`prompt`] assembles the system prompt.

mod audit_log;
pub(crate) mod cache;
mod catalog;
pub(crate) mod error;
pub(crate) mod libraries;
mod listing;
mod lookup;
#[cfg(feature = "mcp")]
mod mcp;
mod options;
mod profile_config;
mod prompt;
pub(crate) mod reload;
pub(crate) mod skills;

use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc};

use crate::config::{Config, ConfigError};
use crate::host::cache::{Epoch, Found, ProfileCache};
use crate::host::libraries::Libraries;
use crate::host::reload::ReloadEvent;
use crate::layout::{Layer, Layout};
use crate::load::layout_checks::LayoutChecks;
use crate::load::loader::LoadStats;
use crate::load::pins::Pins;
use crate::plugin::ExtensionHandle;
use crate::secrets::{SecretStore, Secrets};

#[cfg(feature = "mcp")]
pub use catalog::ListedMcpTool;
pub use catalog::{CachedTool, Catalog, CatalogMode, ListedExtension, ListedTool, ToolSource};
pub use error::HostError;
pub use listing::RunsAs;
pub use lookup::{FoundTool, Resolution};
#[cfg(feature = "mcp")]
pub use mcp::{McpApprovalError, McpApprovalErrorKind};
pub use options::HostOptions;

/// Library generations of a host (see [`Host::generations`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Generations {
    /// Loaded so far. Libraries are never unmapped, so each keeps memory until the process ends.
    pub loaded: u64,
    /// Still held by the caches or by a running call; the others have been shut down.
    pub live: usize,
}

/// The key under which [`Host::layers`] caches a profile's layers.
const LAYERS: &str = "";

/// The plugin host for one root folder.
///
/// A root holds `core/`, `plugins/` and `usr/` (see [`Layout`]). The host loads each library
/// file from a private copy, again only when its bytes change, and caches, per profile, which
/// file wins for each tool name and which extensions run at each point.
///
/// ```no_run
/// use std::sync::Arc;
/// use toolhost::{Agent, Host};
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let host = Arc::new(Host::new(".")?);
/// let agent = Agent::new(host.clone(), "A0", "example")?;
/// let response = agent
///     .call_tool("greet", serde_json::json!({"name": "Ada"}))
///     .await?;
/// println!("{}", response.message);
/// # Ok(()) }
/// ```
pub struct Host {
    layout: Layout,
    libraries: Libraries,
    options: HostOptions,
    /// Bumped whenever files change: a lookup that a change overtook is not cached.
    epoch: Epoch,
    secrets: SecretStore,
    layers: ProfileCache<[Layer]>,
    tools: ProfileCache<Resolution>,
    extensions: ProfileCache<[Arc<ExtensionHandle>]>,
    /// Each profile's `toolhost.toml` configuration, or the mistake in it.
    configs: ProfileCache<Result<Arc<Config>, ConfigError>>,
    /// The audit log, opened on first use (tried again on each use until it opens).
    pub(crate) audit: std::sync::OnceLock<crate::audit::Audit>,
    /// The MCP servers, by profile. Dropped with the host: every server is shut down.
    #[cfg(feature = "mcp")]
    mcp: crate::mcp::McpClients,
    /// What `list` and the tools prompt know of libraries without loading them.
    metadata: crate::load::metadata_cache::MetadataCache,
    /// The models sampling requests go to, if any ([`Host::set_sampling_models`]).
    pub(crate) sampling: std::sync::Mutex<Option<std::sync::Arc<dyn crate::model::SamplingModels>>>,
}

impl Host {
    /// A host for the root folder `root`.
    pub fn new(root: impl Into<PathBuf>) -> Result<Self, HostError> {
        Self::with_options(root, HostOptions::default())
    }

    /// A host for the root folder `root`, with `options`.
    pub fn with_options(root: impl Into<PathBuf>, options: HostOptions) -> Result<Self, HostError> {
        let layout = Layout::new(root);
        if !layout.root().is_dir() {
            return Err(HostError::MissingRoot(layout.root().to_owned()));
        }
        let secrets = load_secrets(&layout, &options).unwrap_or_else(|e| {
            tracing::warn!("{e}; running without secrets");
            with_env(Secrets::empty(), &options)
        });
        let metadata =
            crate::load::metadata_cache::MetadataCache::new(layout.metadata_cache_file());
        let host = Self {
            secrets: SecretStore::new(secrets),
            libraries: Libraries::new(
                &options,
                pins(&layout, &options),
                LayoutChecks::in_root(layout.root()),
                init_timeout(&layout, &options),
            )?,
            layout,
            options,
            epoch: Epoch::default(),
            layers: ProfileCache::default(),
            tools: ProfileCache::default(),
            extensions: ProfileCache::default(),
            configs: ProfileCache::default(),
            audit: std::sync::OnceLock::new(),
            #[cfg(feature = "mcp")]
            mcp: Default::default(),
            metadata,
            sampling: std::sync::Mutex::default(),
        };
        Ok(host)
    }

    /// Sets where sampling requests find their model: a plugin's `Context::sample` when its
    /// call is not served over MCP, and an MCP server's `sampling/createMessage`. Without one,
    /// they are declined, saying no model is configured.
    pub fn set_sampling_models(&self, models: Arc<dyn crate::model::SamplingModels>) {
        *crate::sync::lock(&self.sampling) = Some(models);
    }

    /// The root folder.
    pub fn root(&self) -> &Path {
        self.layout.root()
    }

    /// The layout of the root folder: layers, file roles, well-known files.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The secrets (`usr/secrets.env`), as loaded at start or by the last
    /// [`reload_secrets`](Self::reload_secrets).
    pub fn secrets(&self) -> Arc<Secrets> {
        self.secrets.get()
    }

    /// The live secrets: what masks everything a person, a log or the model sees.
    pub(crate) fn secret_store(&self) -> &SecretStore {
        &self.secrets
    }

    /// Reads `usr/secrets.env` again (a bad file keeps the previous secrets and logs why).
    pub fn reload_secrets(&self) {
        match load_secrets(&self.layout, &self.options) {
            Ok(secrets) => self.set_secrets(secrets),
            Err(e) => tracing::warn!("{e}; keeping the secrets loaded before"),
        }
    }

    /// Replaces the secrets (for embedding hosts and tests).
    pub fn set_secrets(&self, secrets: Secrets) {
        self.secrets.set(secrets);
    }

    /// The host's settings.
    pub fn options(&self) -> &HostOptions {
        &self.options
    }

    /// Every [`ReloadEvent`] from now on: libraries loaded (new or rebuilt) or failing, files
    /// removed, prompts and folders changed. Dropping the receiver unsubscribes.
    pub fn subscribe(&self) -> mpsc::Receiver<ReloadEvent> {
        self.libraries.subscribe()
    }

    pub(crate) fn emit(&self, event: ReloadEvent) {
        self.libraries.emit(event);
    }

    /// A watcher starts (`true`) or stops (see [`HostOptions::settle`]).
    pub(crate) fn watching(&self, starts: bool) {
        self.libraries.watching(starts);
    }

    /// How many library generations were loaded, and how many are still in use.
    pub fn generations(&self) -> Generations {
        let (loaded, live) = self.libraries.generations();
        Generations { loaded, live }
    }

    /// What loading libraries took so far: how many were mapped from in-memory files or from
    /// file copies, and how many layout checks ran or were skipped (the same bytes passed
    /// against this host's contract before; recorded in `usr/.cache/checked-layouts`).
    pub fn load_stats(&self) -> LoadStats {
        self.libraries.load_stats()
    }

    /// The profile's layers, most specific first ([`Layout::layers`], cached).
    pub fn layers(&self, profile: &str) -> Arc<[Layer]> {
        if let Some(layers) = self.layers.get(profile, LAYERS) {
            return layers;
        }
        let ticket = self.epoch.ticket();
        let layers: Arc<[Layer]> = self.layout.layers(profile).into();
        // Folders that changed meanwhile may have made this list stale: then it is not kept.
        let found = Found::Keep(layers.clone());
        self.layers
            .settle(&self.epoch, ticket, profile, LAYERS, found);
        layers
    }
}

/// `usr/secrets.env`, with the options' [`secrets_from_env`](HostOptions::secrets_from_env)
/// over it.
fn load_secrets(
    layout: &Layout,
    options: &HostOptions,
) -> Result<Secrets, crate::secrets::SecretsFileError> {
    let secrets = Secrets::load_capped(&layout.secrets_file(), options.max_text_bytes)?;
    Ok(with_env(secrets, options))
}

/// `secrets` with the options' [`secrets_from_env`](HostOptions::secrets_from_env) over them.
fn with_env(secrets: Secrets, options: &HostOptions) -> Secrets {
    let from_env: Vec<(String, String)> = options
        .secrets_from_env
        .iter()
        .filter_map(|name| Some((name.clone(), std::env::var(name).ok()?)))
        .filter(|(_, value)| !value.is_empty())
        .collect();
    if from_env.is_empty() {
        return secrets;
    }
    let from_file = secrets
        .keys()
        .filter_map(|key| Some((key.to_owned(), secrets.get(key)?.to_owned())));
    Secrets::from_pairs(from_file.collect::<Vec<_>>().into_iter().chain(from_env))
}

/// How long a library's constructor and metadata read may take: the options', else
/// `[limits] init_seconds` of `usr/toolhost.toml` (read once, at the host's start; a mistake
/// there is reported where the configuration is used), else the default.
fn init_timeout(layout: &Layout, options: &HostOptions) -> std::time::Duration {
    options.init_timeout.unwrap_or_else(|| {
        crate::config::Config::load(layout, "default", options.max_text_bytes)
            .map_or(crate::config::DEFAULT_INIT_TIMEOUT, |c| c.init_timeout())
    })
}

/// The pin check (always made: the packages of a key removed from `usr/trusted-keys/` are
/// refused whatever the pinning), with the pinning lock's check if `usr/toolhost.toml` turns
/// pinning on (read once, at the host's start). It fails closed: a mistake in the file keeps
/// the `pinning = true` it still says, and one that hides what it says refuses every library
/// until it is fixed.
fn pins(layout: &Layout, options: &HostOptions) -> Option<Pins> {
    use crate::config::pinning::Pinning;
    let pinning = match Pinning::read(layout, options.max_text_bytes) {
        Ok(pinning) => pinning,
        Err((Pinning::On, e)) => {
            tracing::warn!("{e}; pinning stays on (the file still says pinning = true): fix it");
            Pinning::On
        }
        Err((Pinning::Unknown(reason), _)) => {
            tracing::error!("{reason}");
            Pinning::Unknown(reason)
        }
        // Pinning was never turned on: the mistake is reported where the configuration is used.
        Err((Pinning::Off, _)) => Pinning::Off,
    };
    let (max, allow) = (options.max_text_bytes, options.allow_unpinned);
    // `[packages] only_installed`: read from the same files, once, failing closed as pinning
    // does (a mistake in `[packages]` turns it on until it is fixed); `Some` is the reason a
    // hand-copied library is refused.
    let only_installed = match crate::config::pinning::only_installed(layout, max) {
        Ok(true) => Some(
            "it is not a file of a package installed with `toolhost add` ([packages] \
             only_installed = true in usr/toolhost.toml): install it as a package, or pass \
             --allow-unpinned while developing"
                .to_owned(),
        ),
        Ok(false) | Err((false, _)) => None,
        Err((true, message)) => {
            tracing::error!("{message}");
            Some(format!(
                "it is not a file of a package installed with `toolhost add`, and {message}"
            ))
        }
    };
    // Always a check: the packages of a key removed from usr/trusted-keys/ are refused
    // whatever the pinning.
    match pinning {
        Pinning::Off => {
            Some(Pins::new(layout.clone(), max, allow).with_checks(false, only_installed))
        }
        Pinning::On => {
            Some(Pins::new(layout.clone(), max, allow).with_checks(true, only_installed))
        }
        Pinning::Unknown(reason) => Some(Pins::new(layout.clone(), max, allow).refusing(reason)),
    }
}
