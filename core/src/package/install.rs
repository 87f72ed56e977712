//! Installing a verified package into `usr/plugins/<name>/` (verifying it: `verify.rs`).
//!
//! [`verify`] unpacks the package into a staging folder under `usr/.cache/packages/` (which
//! the watcher ignores), checks its signature against the trusted keys, its manifest, every
//! file's SHA-256, the `[compat]` ranges and the target triple, and lays out the folder to
//! install: nothing in the layers has changed yet. [`install`] then records it in the lock and
//! puts that folder in place with one rename (on Linux an atomic exchange with the old version,
//! which keeps serving until then). A failure at any step removes the staging folder.

use std::fs;
use std::path::{Path, PathBuf};

use super::lock::{Locked, PackageLock};
use super::signature::PublicKey;
use super::{PackageError, PackageErrorKind};
use crate::layout::{Escaped, Layout};

pub use super::installed::verify_installed;
use super::verify::Staging;
pub use super::verify::{verify, Verified};

/// What the user's trust policy asks of a package.
#[derive(Debug, Clone)]
pub struct Policy {
    /// Refuse a package without a signature (default `true`).
    pub require_signature: bool,
    /// For sources starting with each prefix, the ids of the only keys allowed to sign them
    /// (the longest matching prefix applies); other sources take any trusted key.
    pub signers: Vec<(String, Vec<String>)>,
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            require_signature: true,
            signers: Vec::new(),
        }
    }
}

impl Policy {
    /// Whether `key` may sign a package from `source`: `Ok(true)` when a rule of
    /// `[packages.signers]` names it for that source, `Ok(false)` when no rule applies; the
    /// error is the refusal's reason.
    pub(super) fn check_signer(&self, source: &str, key: &PublicKey) -> Result<bool, String> {
        let Some((prefix, allowed)) = self
            .signers
            .iter()
            .filter(|(prefix, _)| source.starts_with(prefix.as_str()))
            .max_by_key(|(prefix, _)| prefix.len())
        else {
            return Ok(false);
        };
        if allowed.iter().any(|id| id.eq_ignore_ascii_case(&key.id)) {
            return Ok(true);
        }
        Err(format!(
            "it is signed by key {}, and [packages.signers] of usr/toolhost.toml allows only {} for sources under {prefix}",
            key.id,
            if allowed.is_empty() {
                "no key".to_owned()
            } else {
                allowed.join(", ")
            }
        ))
    }
}

/// `usr/packages.lock` ([`Layout::packages_lock_file`]).
pub fn packages_lock_file(layout: &Layout) -> PathBuf {
    layout.packages_lock_file()
}

/// `usr/trusted-keys/` ([`Layout::trusted_keys_dir`]).
pub fn trusted_keys_dir(layout: &Layout) -> PathBuf {
    layout.trusted_keys_dir()
}

/// `usr/plugins/<name>/` ([`Layout::package_dir`]).
pub fn plugin_dir(layout: &Layout, name: &str) -> PathBuf {
    layout.package_dir(name)
}

/// Whether `verified` is exactly what the lock records for its name (`toolhost add
/// --locked`): the same version and the same bytes of every file.
pub fn check_locked(layout: &Layout, verified: &Verified) -> Result<(), PackageError> {
    let lock = PackageLock::read(&packages_lock_file(layout))?;
    let name = &verified.manifest.name;
    let refuse = |why: String| {
        PackageError::new(
            PackageErrorKind::Lock,
            format!(
                "{}: --locked: {why}; nothing was installed",
                verified.manifest.label()
            ),
        )
    };
    let Some(locked) = lock.packages.get(name) else {
        return Err(refuse(format!("usr/packages.lock has no package {name}")));
    };
    if locked.version != verified.manifest.version.to_string() {
        return Err(refuse(format!(
            "usr/packages.lock locks version {}",
            locked.version
        )));
    }
    if locked.files != verified.files {
        return Err(refuse(
            "its files are not the bytes usr/packages.lock records".to_owned(),
        ));
    }
    Ok(())
}

/// What an install may do to the installed version of the same package: the operator's
/// `--allow-downgrade` and `--new-signer`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Replace {
    /// Install a version older than, or the same as, the installed one.
    pub allow_downgrade: bool,
    /// Accept a signer other than the one the installed version was signed by.
    pub new_signer: bool,
}

/// What installing `verified` would replace: the lock's entry for its name, if it is
/// installed.
pub fn installed(layout: &Layout, verified: &Verified) -> Result<Option<Locked>, PackageError> {
    let lock = PackageLock::read(&packages_lock_file(layout))?;
    Ok(lock.packages.get(&verified.manifest.name).cloned())
}

/// Whether `verified` may replace `installed` (the lock's entry of the same name): its signer
/// is the one pinned at the first install (or `--new-signer`, or `[packages.signers]` names
/// the new key for its source), and its version is newer (or `--allow-downgrade`). The
/// error names both keys or both versions and the flag that allows it.
pub fn check_replace(
    installed: &Locked,
    verified: &Verified,
    replace: Replace,
) -> Result<(), PackageError> {
    let name = &verified.manifest.name;
    let new_signer = verified.signer.as_ref().map(|k| k.id.as_str());
    let old_signer = installed.signer.as_deref();
    let same_signer = match (old_signer, new_signer) {
        (Some(old), Some(new)) => old.eq_ignore_ascii_case(new),
        (Some(_), None) => false,
        // A first signature pins the key from now on.
        (None, _) => true,
    };
    if !same_signer && !replace.new_signer && !verified.signer_named {
        return Err(PackageError::new(
            PackageErrorKind::Signer,
            format!(
                "{}: refused: the installed {name} {} is signed by key {}, and this one {}; nothing was installed (if the publisher changed keys, pass --new-signer, or name the new key for this source in [packages.signers])",
                verified.manifest.label(),
                installed.version,
                old_signer.unwrap_or("nobody"),
                match new_signer {
                    Some(key) => format!("by key {key}"),
                    None => "is unsigned".to_owned(),
                }
            ),
        ));
    }
    let new = &verified.manifest.version;
    let older = match semver::Version::parse(&installed.version) {
        Ok(old) if *new > old => None,
        Ok(old) if *new == old => Some("the same version as"),
        _ => Some("older than"),
    };
    // Not a let chain: the Windows build's Rust (1.85) has none.
    if let (Some(how), false) = (older, replace.allow_downgrade) {
        return Err(PackageError::new(
            PackageErrorKind::Downgrade,
            format!(
                "{name} {new} is {how} the installed {name} {}: refused; nothing was installed (pass --allow-downgrade to install {new} over {} anyway)",
                installed.version, installed.version
            ),
        ));
    }
    Ok(())
}

/// Records `verified` in `usr/packages.lock`, then installs it into `usr/plugins/<name>/` with
/// one rename (the old version, if any, serves until then). An installed version is replaced
/// only as [`check_replace`] allows. Returns what it replaced, as the lock recorded it.
pub fn install(
    layout: &Layout,
    verified: Verified,
    replace: Replace,
) -> Result<Option<Locked>, PackageError> {
    let name = verified.manifest.name.clone();
    let target = plugin_dir(layout, &name);
    let lock_file = packages_lock_file(layout);
    let mut lock = PackageLock::read(&lock_file)?;
    if let Some(installed) = lock.packages.get(&name) {
        check_replace(installed, &verified, replace)?;
    }
    let parent = target.parent().expect("usr/plugins");
    fs::create_dir_all(parent).map_err(|e| PackageError::io("cannot create", parent, e))?;
    let old = fs::symlink_metadata(&target).is_ok();
    if old && !lock.packages.contains_key(&name) {
        return Err(PackageError::new(
            PackageErrorKind::Io,
            format!(
                "{} exists and was not installed by `toolhost add`: move it away first; nothing was installed",
                Escaped(&target)
            ),
        ));
    }
    let previous = lock.clone();
    let replaced = lock.packages.get(&name).cloned();
    lock.packages.insert(
        name,
        Locked {
            version: verified.manifest.version.to_string(),
            source: verified.source.clone(),
            signer: verified.signer.as_ref().map(|k| k.id.clone()),
            archive_sha256: verified.archive_sha256.clone(),
            files: verified.files.clone(),
        },
    );
    // Recorded before it is placed: with pinning on, the new bytes are pinned before a watcher
    // sees them, and no install is ever in the layers without its lock entry. A failed move
    // puts the lock back as it was.
    lock.write(&lock_file)?;
    let placed = match old {
        // The old version ends up in the staging folder, removed with it.
        true => swap(&verified.folder, &target),
        false => fs::rename(&verified.folder, &target)
            .map_err(|e| PackageError::io("cannot install into", &target, e)),
    };
    if let Err(e) = placed {
        let _ = previous.write(&lock_file);
        return Err(e);
    }
    Ok(replaced)
}

/// Exchanges the folders `new` and `old` (Linux: one atomic `renameat2(RENAME_EXCHANGE)`;
/// elsewhere two renames).
fn swap(new: &Path, old: &Path) -> Result<(), PackageError> {
    #[cfg(target_os = "linux")]
    {
        rustix::fs::renameat_with(
            rustix::fs::CWD,
            new,
            rustix::fs::CWD,
            old,
            rustix::fs::RenameFlags::EXCHANGE,
        )
        .map_err(|e| PackageError::io("cannot install into", old, e.into()))
    }
    #[cfg(not(target_os = "linux"))]
    {
        let aside = new.with_extension("old");
        fs::rename(old, &aside).map_err(|e| PackageError::io("cannot move", old, e))?;
        if let Err(e) = fs::rename(new, old) {
            let _ = fs::rename(&aside, old);
            return Err(PackageError::io("cannot install into", old, e));
        }
        fs::rename(&aside, new).map_err(|e| PackageError::io("cannot move", &aside, e))
    }
}

/// Removes the installed package `name` (one rename out of the layers, then the files) and its
/// lock entry; returns what the lock recorded.
///
/// Only `usr/plugins/<name>/` and the lock are touched: `name` must be one safe folder name,
/// and the lock is refused whole if any of its names is not.
pub fn remove(layout: &Layout, name: &str) -> Result<Locked, PackageError> {
    if !super::lock::is_package_name(name) {
        return Err(PackageError::new(
            PackageErrorKind::NotInstalled,
            format!(
                "{} is not a package's name (one folder under usr/plugins/, {}); nothing was removed",
                super::Shown(name),
                super::NAME_RULE
            ),
        ));
    }
    let lock_file = packages_lock_file(layout);
    let mut lock = PackageLock::read(&lock_file)?;
    let Some(locked) = lock.packages.remove(name) else {
        let known: Vec<&str> = lock.packages.keys().map(String::as_str).collect();
        return Err(PackageError::new(
            PackageErrorKind::NotInstalled,
            format!(
                "no installed package {name:?} (installed: {}); `toolhost installed` lists them",
                if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                }
            ),
        ));
    };
    let target = plugin_dir(layout, name);
    if fs::symlink_metadata(&target).is_ok() {
        let trash = Staging::new(layout, "remove")?;
        let aside = trash.0.join(name);
        fs::rename(&target, &aside).map_err(|e| PackageError::io("cannot remove", &target, e))?;
    }
    lock.write(&lock_file)?;
    Ok(locked)
}
