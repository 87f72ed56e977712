//! The rows of a [`Catalog`]: tools and extensions, loaded or known from the metadata cache.

use std::path::PathBuf;
use std::sync::Arc;

use plugin_api::{ExtensionInfo, Readiness, ToolInfo};

use crate::governance::BreakerStatus;
use crate::layout::Layer;
use crate::load::error::LoadError;
#[cfg(feature = "mcp")]
use crate::mcp::McpTool;
use crate::plugin::{ExtensionHandle, ToolHandle, ToolSandbox};

/// What a profile sees: the tools that win, the extensions in run order, the skipped files.
/// [`Host::list`] fills it with every library loaded; [`Host::catalog`] (what `toolhost list`
/// and the tools prompt show) leaves a library whose bytes the metadata cache knows unloaded.
///
/// [`Host::list`]: crate::Host::list
/// [`Host::catalog`]: crate::Host::catalog
#[derive(Clone, Default)]
pub struct Catalog {
    /// Library tools sorted by name (those an MCP tool of the same name hides are left out).
    pub tools: Vec<ListedTool>,
    /// The tools of the profile's MCP servers that are ready now, sorted by name.
    #[cfg(feature = "mcp")]
    pub mcp: Vec<ListedMcpTool>,
    /// The extensions that run at each point, in run order; points sorted by name.
    pub extensions: Vec<(String, Vec<ListedExtension>)>,
    /// Tool and extension files that failed to load (or are known to), with the reason.
    pub skipped: Vec<LoadError>,
    /// How many library files had to be looked at through the loader (not served by a library
    /// this host already holds, and not known to the metadata cache): 0 for a warm `list`.
    pub loads: usize,
}

/// One tool of an MCP server in a [`Catalog`].
#[cfg(feature = "mcp")]
#[derive(Clone)]
pub struct ListedMcpTool {
    /// The tool (`<server>.<tool>`).
    pub tool: Arc<McpTool>,
    /// Library files of the same name that it hides (MCP tools are looked up first).
    pub shadows: Vec<PathBuf>,
}

/// How [`Host::catalog`](crate::Host::catalog) learns what a library is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CatalogMode {
    /// From the libraries this host holds, then the metadata cache, loading the others.
    #[default]
    Cached,
    /// Every library through the loader, as [`Host::list`](crate::Host::list) does (`toolhost
    /// list --load`); what is learnt still refreshes the cache.
    Load,
}

/// A tool's metadata as the metadata cache recorded it when its library was last loaded.
#[derive(Debug, Clone, PartialEq)]
pub struct CachedTool {
    /// Its metadata.
    pub info: ToolInfo,
    /// The crate that built it.
    pub package: String,
    /// The version of that crate.
    pub version: String,
    /// The plugin-abi version (the wire contract) it was built against.
    pub contract: String,
}

/// Where a listed tool's metadata comes from.
#[derive(Clone)]
pub enum ToolSource {
    /// A library this host loaded (its readiness and breaker are live).
    Loaded(Arc<ToolHandle>),
    /// The metadata cache: the tool was ready when last loaded, and is not loaded now.
    Cached(Arc<CachedTool>),
}

/// One tool of a [`Catalog`].
#[derive(Clone)]
pub struct ListedTool {
    /// The tool's name (its file name).
    pub name: String,
    /// The layer whose file won.
    pub layer: Layer,
    /// The winning file.
    pub path: PathBuf,
    /// Files of the same name in later layers that the winner hides.
    pub shadows: Vec<PathBuf>,
    /// Where its metadata comes from.
    pub source: ToolSource,
    /// Whether the profile runs it in a worker process (for a tool known from the cache).
    pub(crate) isolated: bool,
    /// The sandbox the profile runs it in (for a tool known from the cache).
    pub(crate) sandbox: Option<ToolSandbox>,
}

impl ListedTool {
    /// The tool's metadata.
    pub fn info(&self) -> &ToolInfo {
        match &self.source {
            ToolSource::Loaded(handle) => handle.info(),
            ToolSource::Cached(cached) => &cached.info,
        }
    }

    /// The crate that built it.
    pub fn package(&self) -> &str {
        match &self.source {
            ToolSource::Loaded(handle) => handle.package(),
            ToolSource::Cached(cached) => &cached.package,
        }
    }

    /// The version of the crate that built it.
    pub fn version(&self) -> &str {
        match &self.source {
            ToolSource::Loaded(handle) => handle.version(),
            ToolSource::Cached(cached) => &cached.version,
        }
    }

    /// The plugin-abi version (the wire contract) it was built against.
    pub fn contract(&self) -> &str {
        match &self.source {
            ToolSource::Loaded(handle) => handle.contract(),
            ToolSource::Cached(cached) => &cached.contract,
        }
    }

    /// Whether it runs in a worker process.
    pub fn is_isolated(&self) -> bool {
        match &self.source {
            ToolSource::Loaded(handle) => handle.is_isolated(),
            ToolSource::Cached(_) => self.isolated,
        }
    }

    /// The sandbox it runs in, if it is isolated and sandboxed: a loaded tool's as its worker
    /// enforces it, else the one its configuration gives it.
    pub fn sandbox(&self) -> Option<ToolSandbox> {
        match &self.source {
            ToolSource::Loaded(handle) => handle.sandbox(),
            ToolSource::Cached(_) => self.sandbox.clone(),
        }
    }

    /// Whether it can run now: asked of a loaded tool; a tool known from the cache was ready
    /// when last loaded (one that was not is always loaded and asked again).
    pub fn readiness(&self) -> Readiness {
        match &self.source {
            ToolSource::Loaded(handle) => handle.readiness(),
            ToolSource::Cached(_) => Readiness::Ready,
        }
    }

    /// The state of its circuit breaker (closed for a library this host has not loaded: a
    /// build starts with a closed breaker).
    pub fn breaker_state(&self) -> BreakerStatus {
        match &self.source {
            ToolSource::Loaded(handle) => handle.breaker_state(),
            ToolSource::Cached(_) => BreakerStatus::Closed(0),
        }
    }

    /// Why it cannot be called now, if it cannot ([`ToolHandle::unavailable`]).
    pub fn unavailable(&self) -> Option<String> {
        match &self.source {
            ToolSource::Loaded(handle) => handle.unavailable(),
            ToolSource::Cached(_) => None,
        }
    }

    /// The loaded tool, if this host has loaded it.
    pub fn handle(&self) -> Option<&Arc<ToolHandle>> {
        match &self.source {
            ToolSource::Loaded(handle) => Some(handle),
            ToolSource::Cached(_) => None,
        }
    }
}

/// One extension of a [`Catalog`].
#[derive(Clone)]
pub struct ListedExtension {
    /// Its name (its file name without extension); the order it runs in.
    pub name: String,
    /// Its file.
    pub path: PathBuf,
    /// Its metadata.
    pub info: ExtensionInfo,
    /// Whether it runs in a worker process.
    pub isolated: bool,
    /// The loaded extension, if this host has loaded it.
    pub handle: Option<Arc<ExtensionHandle>>,
}

impl ListedExtension {
    pub(crate) fn loaded(handle: &Arc<ExtensionHandle>) -> Self {
        Self {
            name: handle.name().to_owned(),
            path: handle.source().to_owned(),
            info: handle.info().clone(),
            isolated: handle.is_isolated(),
            handle: Some(handle.clone()),
        }
    }
}
