//! Plugin packages: a plugin folder (`tools/`, `extensions/<point>/`, `prompts/`,
//! `agents/<P>/`) with a manifest, `toolhost-plugin.toml`, shipped as one signed archive per
//! version and installed into `usr/plugins/<name>/`. The operator's guide and the manifest
//! format are in the book (docs/src/reference/packages.md).
//!
//! One concept per file: [`manifest`] (the format), [`archive`] (the deterministic tar.gz and
//! its safe unpacking), [`signature`] (minisign keys and signatures, the trusted keys),
//! [`pack`] (a plugin folder into an archive), [`mcpb`] (an MCP Bundle of it), [`install`] (verify, install atomically,
//! remove) and [`lock`] (`usr/packages.lock`).

pub mod archive;
mod error;
pub mod install;
mod installed;
pub mod lock;
pub mod manifest;
pub mod mcpb;
pub mod pack;
pub mod signature;
mod verify;

pub use crate::layout::{needs_escape, Shown};
pub use error::{PackageError, PackageErrorKind};
pub use install::{Policy, Replace, Verified};
pub use lock::{Locked, PackageLock, NAME_RULE};
pub use manifest::{Manifest, MANIFEST_FILE_NAME};

/// The target triple this host was built for (`x86_64-unknown-linux-gnu`): the libraries of a
/// package it installs.
pub fn host_target() -> &'static str {
    env!("TOOLHOST_TARGET")
}

pub(crate) use crate::hash::sha256_hex;
