//! The errors of setting up a host.

use std::path::PathBuf;

use crate::load::PrivateDirError;

/// Errors setting up a host.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HostError {
    /// The root folder does not exist.
    #[error(
        "root folder {0} does not exist: pass --root with the folder that holds core/, plugins/ and usr/"
    )]
    MissingRoot(PathBuf),
    /// A profile name with characters outside `[A-Za-z0-9_.-]`.
    #[error("invalid profile name '{0}': use letters, digits, '_', '-' and '.' only")]
    InvalidProfile(String),
    /// A profile that no layer has a folder for (a misspelling, most likely).
    #[error("unknown profile '{name}': no layer has agents/{name}/ (known profiles: {})", known.join(", "))]
    UnknownProfile {
        /// The name given.
        name: String,
        /// The profiles the layers have.
        known: Vec<String>,
    },
    /// The private folder for loaded copies could not be made.
    #[error(transparent)]
    PrivateDir(#[from] PrivateDirError),
    /// File watching could not start.
    #[error("cannot watch the plugin folders: {0}")]
    Watch(String),
}
