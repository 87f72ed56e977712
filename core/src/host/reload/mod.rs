//! What the host reports when a library file changes under it.

pub(crate) mod changes;
mod report;
mod watcher;
mod writes_only;

pub use report::Report;
pub use watcher::Watcher;
pub use writes_only::WriteWatcher;

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use crate::layout::Escaped;
use crate::load::error::LoadError;

/// The version a file served before or after a change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Served {
    /// `CARGO_PKG_VERSION` of the crate that built it.
    pub version: String,
    /// Which load of the file it is: 1 for the first, one more per reload (from 1 again after
    /// the file was removed).
    pub generation: u64,
}

impl fmt::Display for Served {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (generation {})", self.version, self.generation)
    }
}

/// One change the host picked up. Receive them with [`Host::subscribe`](crate::Host::subscribe).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum ReloadEvent {
    /// A library file was loaded: a new file, or a rebuild of one already loaded.
    Loaded {
        /// The file as found in its layer.
        path: PathBuf,
        /// What the file served before, if it was loaded before.
        old: Option<Served>,
        /// What it serves now.
        new: Served,
        /// Reading, checking, copying, loading and creating the instance.
        took: Duration,
    },
    /// A library file failed to load: a new file, or a new build of a loaded one. (A file
    /// caught while it is being written is not reported: its next change brings it back.)
    Failed {
        /// Why; `error.path` is the file.
        error: LoadError,
        /// The previous version, which keeps serving; `None` if the file never loaded.
        kept: Option<Served>,
    },
    /// A library file was removed: the next call falls back to the next layer.
    Removed {
        /// The file as found in its layer.
        path: PathBuf,
    },
    /// A folder of profile `name` appeared where there was none: the profile can be used.
    ProfileAdded {
        /// The profile's name (its folder's).
        name: String,
    },
    /// The last folder of profile `name` went: it falls back to the default tools.
    ProfileRemoved {
        /// The profile's name.
        name: String,
    },
    /// An `mcp.json` changed what a profile's MCP servers are: the servers added started,
    /// those changed restarted, those removed stopped (their tools appear and leave as they
    /// do).
    #[cfg(feature = "mcp")]
    McpServers(crate::mcp::McpReload),
    /// A prompt fragment or a folder changed; the next lookup reads the folders again.
    Changed {
        /// The file or folder.
        path: PathBuf,
    },
}

impl fmt::Display for ReloadEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Loaded {
                path,
                old: Some(old),
                new,
                took,
            } => write!(
                f,
                "reloaded {}: {old} -> {new} in {:.1} ms",
                Escaped(path),
                took.as_secs_f64() * 1e3
            ),
            Self::Loaded {
                path,
                old: None,
                new,
                took,
            } => write!(
                f,
                "loaded {}: {new} in {:.1} ms",
                Escaped(path),
                took.as_secs_f64() * 1e3
            ),
            Self::Failed {
                error,
                kept: Some(kept),
            } => write!(
                f,
                "reload failed, still serving {kept} of {}: {}",
                Escaped(&error.path),
                error.reason
            ),
            Self::Failed { error, kept: None } => write!(f, "{error}"),
            Self::Removed { path } => write!(f, "removed {}", Escaped(path)),
            Self::ProfileAdded { name } => write!(f, "new profile '{name}'"),
            #[cfg(feature = "mcp")]
            Self::McpServers(_) => write!(f, "{}", self.report(std::path::Path::new(""))),
            Self::ProfileRemoved { name } => write!(f, "profile '{name}' is gone"),
            Self::Changed { path } => write!(f, "changed {}", Escaped(path)),
        }
    }
}
