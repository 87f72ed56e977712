//! The package lock, `usr/packages.lock` (beside the pinning lock `usr/plugins.lock`): for each
//! installed package its version, source, signer, the archive's SHA-256 and every installed
//! file's SHA-256, so that another machine can reproduce the same install
//! (`toolhost add --locked`) and `toolhost installed` can say where each came from. Here, below
//! the packages (`crate::package` re-exports it), because the loader checks installed files
//! against it (`pins.rs`).

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use crate::layout::{check_path, Escaped, Shown};

/// What a package's name may be, for the errors that refuse one: a folder name that `.` and
/// `..` are not.
pub const NAME_RULE: &str =
    "a folder name: letters, digits, '_', '-' and '.', not starting with '.' (so not `.` or `..`)";

/// Whether `id` is a key id as minisign prints it: 16 hex digits.
pub fn is_key_id(id: &str) -> bool {
    id.len() == 16 && id.bytes().all(|b| b.is_ascii_hexdigit())
}

/// What kept the package lock from being read or written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PackageLockErrorKind {
    /// It cannot be read, is not a lock, or names a path outside its folders: restore it
    /// (the message says how).
    Lock,
    /// It cannot be written.
    Io,
}

/// Why the package lock cannot be used: a [kind](PackageLockErrorKind) and one line naming
/// the file and what to do (a [`PackageError`](crate::package::PackageError) of kind `lock` or
/// `io` where a package is installed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct PackageLockError {
    /// What went wrong.
    pub kind: PackageLockErrorKind,
    /// One line: the file, what is wrong, and what to do.
    pub message: String,
}

impl PackageLockError {
    fn lock(message: String) -> Self {
        Self {
            kind: PackageLockErrorKind::Lock,
            message,
        }
    }
}

/// Whether `name` can be a package's name: one safe folder name under `usr/plugins/`
/// (letters, digits, '_', '-' and '.', not starting with '.').
pub fn is_package_name(name: &str) -> bool {
    crate::is_safe_name(name)
}

pub use crate::layout::PACKAGES_LOCK_FILE_NAME;

/// One installed package, as the lock records it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Locked {
    /// Its version.
    pub version: String,
    /// Where it was installed from: an archive's path, a folder, or a URL.
    pub source: String,
    /// The id of the key that signed it, if it was signed.
    #[serde(default)]
    pub signer: Option<String>,
    /// The SHA-256 (hex) of the archive it came from (none for a folder).
    #[serde(default)]
    pub archive_sha256: Option<String>,
    /// The SHA-256 (hex) of every installed file, by its path in `usr/plugins/<name>/`.
    pub files: BTreeMap<String, String>,
}

/// The lock: the installed packages by name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PackageLock {
    /// The installed packages, by name.
    #[serde(default)]
    pub packages: BTreeMap<String, Locked>,
}

const HEADER: &str = "\
# The packages `toolhost add` installed into usr/plugins/: source, version, signer and the
# SHA-256 of every file. Written by toolhost add, update and remove; `toolhost add --locked`
# installs exactly what is recorded here.
";

impl PackageLock {
    /// Reads the lock at `path` (an empty lock if there is none).
    pub fn read(path: &Path) -> Result<Self, PackageLockError> {
        let text = match crate::layout::read_text(path, 16 << 20, "the lock's limit of 16 MiB") {
            Ok(text) => text,
            Err(e) if e.kind == crate::layout::ReadErrorKind::Missing => return Ok(Self::default()),
            Err(e) => {
                return Err(PackageLockError::lock(format!("{}: {e}", Escaped(path))));
            }
        };
        let lock: Self = toml::from_str(&text).map_err(|e| {
            let line = e.span().map_or(1, |s| crate::layout::line_of(&text, s.start));
            PackageLockError::lock(format!(
                "{}: {} (the lock is written by `toolhost add`; restore it or remove the packages and add them again)",
                crate::layout::Location::new(path, Some(line)),
                e.message().trim()
            ))
        })?;
        lock.check(path)?;
        Ok(lock)
    }

    /// Refuses a lock whose names could reach outside `usr/plugins/<name>/` or the trusted
    /// keys: every package name must be one safe folder name, every file a plain relative
    /// path, every signer a key id (16 hex digits). Checked before any file is touched.
    fn check(&self, path: &Path) -> Result<(), PackageLockError> {
        let refuse = |what: String| {
            PackageLockError::lock(format!(
                "{}: {what} (the lock is written by `toolhost add`: restore it, or delete that entry by hand and add the package again)",
                Escaped(path)
            ))
        };
        for (name, locked) in &self.packages {
            if !is_package_name(name) {
                return Err(refuse(format!(
                    "package {} is not {}",
                    Shown(name),
                    NAME_RULE
                )));
            }
            if let Some(signer) = locked.signer.as_ref().filter(|s| !is_key_id(s)) {
                return Err(refuse(format!(
                    "package {name}: signer {} is not a key id (16 hex digits)",
                    Shown(signer)
                )));
            }
            for file in locked.files.keys() {
                if let Err(why) = check_path(file) {
                    return Err(refuse(format!("package {name}: file {why}")));
                }
            }
        }
        Ok(())
    }

    /// Writes the lock to `path` atomically.
    pub fn write(&self, path: &Path) -> Result<(), PackageLockError> {
        crate::layout::write_atomically(path, self.to_text().as_bytes()).map_err(|e| {
            PackageLockError {
                kind: PackageLockErrorKind::Io,
                message: format!("cannot write {}: {e}", Escaped(path)),
            }
        })
    }

    /// The lock file's text.
    pub fn to_text(&self) -> String {
        let mut doc = toml_edit::DocumentMut::new();
        let mut packages = toml_edit::Table::new();
        packages.set_implicit(true);
        for (name, locked) in &self.packages {
            let mut table = toml_edit::Table::new();
            table["version"] = toml_edit::value(&locked.version);
            table["source"] = toml_edit::value(&locked.source);
            if let Some(signer) = &locked.signer {
                table["signer"] = toml_edit::value(signer);
            }
            if let Some(hash) = &locked.archive_sha256 {
                table["archive_sha256"] = toml_edit::value(hash);
            }
            let mut files = toml_edit::Table::new();
            for (file, hash) in &locked.files {
                files[file.as_str()] = toml_edit::value(hash);
            }
            table["files"] = toml_edit::Item::Table(files);
            packages[name.as_str()] = toml_edit::Item::Table(table);
        }
        doc["packages"] = toml_edit::Item::Table(packages);
        format!("{HEADER}{doc}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(text: &str) -> String {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(PACKAGES_LOCK_FILE_NAME);
        std::fs::write(&path, text).unwrap();
        PackageLock::read(&path).unwrap_err().message
    }

    #[test]
    fn a_lock_naming_a_path_outside_its_folder_is_refused_whole() {
        let entry = |name: &str, signer: &str, file: &str| {
            format!(
                "[packages.{name:?}]\nversion = \"1.0.0\"\nsource = \"/x\"\nsigner = {signer:?}\n[packages.{name:?}.files]\n{file:?} = \"00\"\n"
            )
        };
        let ok = entry("ver", "0123456789ABCDEF", "tools/ver.so");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(PACKAGES_LOCK_FILE_NAME);
        std::fs::write(&path, &ok).unwrap();
        assert!(PackageLock::read(&path).is_ok());
        let message = refused(&entry("../../core", "0123456789ABCDEF", "a.md"));
        assert!(
            message.contains("package \"../../core\" is not a folder name")
                || message.contains("package ../../core is not a folder name"),
            "{message}"
        );
        assert!(refused(&entry("ver", "../../x", "a.md")).contains("is not a key id"));
        assert!(
            refused(&entry("ver", "0123456789ABCDEF", "../a.md")).contains("not a relative path")
        );
    }
}
