//! From a file to a checked, loaded generation: the bytes read into a private image, the
//! contract checked (and the layout walk skipped for bytes already checked), the pins, the
//! metadata cache that lists without loading.

pub(crate) mod error;
pub(crate) mod generation;
pub(crate) mod image;
pub(crate) mod layout_checks;
pub(crate) mod loader;
pub(crate) mod metadata_cache;
pub(crate) mod package_lock;
pub mod pins;

pub use error::{LoadError, LoadErrorKind, PrivateDirError};
pub use loader::{version_compatible, LoadStats};
