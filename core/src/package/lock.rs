//! The package lock, `usr/packages.lock`: its types, reading and writing are the loader's
//! (core/src/load/package_lock.rs, which checks installed files against it), re-exported here.

pub use crate::load::package_lock::{
    is_package_name, Locked, PackageLock, PackageLockError, PackageLockErrorKind, NAME_RULE,
    PACKAGES_LOCK_FILE_NAME,
};
