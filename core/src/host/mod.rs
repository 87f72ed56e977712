//! The host: finds libraries along a profile's layers, loads each once per content, and caches
//! what wins. One job per file: this one owns the host's state; [`lookup`] resolves tools and
//! extensions, [`changes`] reacts to file changes, [`listing`] lists what a profile sees, and
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
mod profile_config;
mod prompt;
pub(crate) mod reload;

use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc};
use std::time::Duration;

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
pub use lookup::{FoundTool, Resolution};

/// Settings of a [`Host`].
///
/// ```
/// use std::time::Duration;
/// let options = toolhost::HostOptions::default()
///     .with_debounce(Duration::from_millis(20))
///     .with_warn_generations(100);
/// assert_eq!(options.debounce, Duration::from_millis(20));
///
/// let options = toolhost::HostOptions::default()
///     .with_max_library_bytes(64 << 20)
///     .with_max_text_bytes(64 << 10)
///     .with_settle(Duration::from_millis(500));
/// assert_eq!(options.max_text_bytes, 64 << 10);
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HostOptions {
    /// How long a changed file must stay quiet before the watcher reads it. Default 40 ms.
    pub debounce: Duration,
    /// A warning is logged each time this many more library generations have been loaded
    /// (libraries are never unmapped, so each keeps memory). Default 32.
    pub warn_generations: usize,
    /// The most bytes of a tool's answer that go on to the model and the history (cut at a
    /// character boundary, with a note saying how much was cut; the whole answer goes to the
    /// session's `outputs/` folder when a session is recorded). `None` (the default): the
    /// profile's `[limits] max_output` in `toolhost.toml`, else
    /// [`DEFAULT_MAX_OUTPUT`](crate::DEFAULT_MAX_OUTPUT) (64 KiB); a value set here wins over
    /// the config.
    pub max_output: Option<usize>,
    /// The largest library file the host reads, in bytes; a larger one is skipped
    /// ([`LoadErrorKind::TooLarge`](crate::LoadErrorKind::TooLarge)) without being read.
    /// Default 256 MiB.
    pub max_library_bytes: u64,
    /// The largest text file the host reads from the layers (a prompt fragment, the secrets
    /// file), in bytes; a larger one is skipped with a warning. Default 1 MiB.
    pub max_text_bytes: u64,
    /// With a [`Watcher`](crate::Watcher), a library that fails to load while its last
    /// modification is younger than this is not reported yet: it may still be being written in
    /// chunks. The watcher looks at it again once it has been quiet this long, and reports it
    /// then, once. A library that loads is reported at once; a lookup (a call, `list`) always
    /// gets the reason. Default 1 s.
    pub settle: Duration,
    /// With `pinning = true` in `usr/toolhost.toml`, load a library that is not pinned (or
    /// whose bytes changed) anyway, with a warning, instead of refusing it (see
    /// [`crate::load::pins`]). Default `false`.
    pub allow_unpinned: bool,
    /// Runs every tool in a worker process, whatever `isolate` in `toolhost.toml` says (the
    /// command line's `--isolate`). Default `false`.
    pub isolate_all: bool,
    /// The program that runs worker processes (`toolhost __worker`). `None` (the default):
    /// `TOOLHOST_WORKER` if set, else this program if it is `toolhost`, else a `toolhost`
    /// binary beside it or one folder up.
    pub worker_program: Option<PathBuf>,
    /// Load every library from a file copy in a private folder, never from an in-memory file
    /// (Linux's `memfd_create`; other systems always copy). Default `false`, or `true` when
    /// `TOOLHOST_LOAD_COPY=1` is set.
    pub file_copies: bool,
}

pub use crate::layout::{DEFAULT_MAX_LIBRARY_BYTES, DEFAULT_MAX_TEXT_BYTES};

impl Default for HostOptions {
    fn default() -> Self {
        Self {
            debounce: Duration::from_millis(40),
            warn_generations: 32,
            max_output: None,
            max_library_bytes: DEFAULT_MAX_LIBRARY_BYTES,
            max_text_bytes: DEFAULT_MAX_TEXT_BYTES,
            settle: Duration::from_secs(1),
            allow_unpinned: false,
            isolate_all: false,
            worker_program: None,
            file_copies: std::env::var_os("TOOLHOST_LOAD_COPY").is_some_and(|v| v == "1"),
        }
    }
}

impl HostOptions {
    /// Sets [`allow_unpinned`](Self::allow_unpinned).
    pub fn with_allow_unpinned(mut self, allow: bool) -> Self {
        self.allow_unpinned = allow;
        self
    }

    /// Sets [`debounce`](Self::debounce).
    pub fn with_debounce(mut self, debounce: Duration) -> Self {
        self.debounce = debounce;
        self
    }

    /// Sets [`warn_generations`](Self::warn_generations).
    pub fn with_warn_generations(mut self, every: usize) -> Self {
        self.warn_generations = every;
        self
    }

    /// Sets [`max_output`](Self::max_output), over what the config says.
    pub fn with_max_output(mut self, bytes: usize) -> Self {
        self.max_output = Some(bytes);
        self
    }

    /// Sets [`max_library_bytes`](Self::max_library_bytes).
    pub fn with_max_library_bytes(mut self, bytes: u64) -> Self {
        self.max_library_bytes = bytes;
        self
    }

    /// Sets [`max_text_bytes`](Self::max_text_bytes).
    pub fn with_max_text_bytes(mut self, bytes: u64) -> Self {
        self.max_text_bytes = bytes;
        self
    }

    /// Sets [`file_copies`](Self::file_copies).
    pub fn with_file_copies(mut self, copies: bool) -> Self {
        self.file_copies = copies;
        self
    }

    /// Sets [`isolate_all`](Self::isolate_all).
    pub fn with_isolate_all(mut self, isolate: bool) -> Self {
        self.isolate_all = isolate;
        self
    }

    /// Sets [`settle`](Self::settle).
    pub fn with_settle(mut self, settle: Duration) -> Self {
        self.settle = settle;
        self
    }
}

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
    /// The audit log, opened on first use.
    pub(crate) audit: std::sync::OnceLock<Option<crate::audit::Audit>>,
    /// The MCP servers, by profile. Dropped with the host: every server is shut down.
    #[cfg(feature = "mcp")]
    mcp: crate::mcp::McpClients,
    /// What `list` and the tools prompt know of libraries without loading them.
    metadata: crate::load::metadata_cache::MetadataCache,
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
        let secrets = Secrets::load_capped(&layout.secrets_file(), options.max_text_bytes)
            .unwrap_or_else(|e| {
                tracing::warn!("{e}; running without secrets");
                Secrets::empty()
            });
        let metadata =
            crate::load::metadata_cache::MetadataCache::new(layout.metadata_cache_file());
        let host = Self {
            secrets: SecretStore::new(secrets),
            libraries: Libraries::new(
                &options,
                pins(&layout, &options),
                LayoutChecks::in_root(layout.root()),
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
        };
        // The default profile's MCP servers start now, in the background.
        #[cfg(feature = "mcp")]
        host.mcp_profile("default");
        Ok(host)
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
        match Secrets::load_capped(&self.layout.secrets_file(), self.options.max_text_bytes) {
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

/// The pin check, if `usr/toolhost.toml` turns pinning on (read once, at the host's start).
/// It fails closed: a mistake in the file keeps the `pinning = true` it still says, and one
/// that hides what it says refuses every library until it is fixed.
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
    match pinning {
        Pinning::Off => None,
        Pinning::On => Some(Pins::new(layout.clone(), max, allow)),
        Pinning::Unknown(reason) => Some(Pins::new(layout.clone(), max, allow).refusing(reason)),
    }
}
