//! An installed package checked against what it carries (an MCP Bundle's root, at its
//! server's start: `serve-mcp --verify-packages`): its manifest's signature and every file's
//! SHA-256, as the lock and the manifest list them.

use std::collections::BTreeMap;
use std::path::Path;

use super::install::{plugin_dir, trusted_keys_dir};
use super::lock::Locked;
use super::manifest::{Manifest, MANIFEST_FILE_NAME};
use super::signature::{self, PublicKey};
use super::verify::{sha256_file, walk};
use super::{host_target, PackageError, PackageErrorKind};
use crate::layout::{Escaped, Layout};

/// Checks the installed package `name` against what it carries (an MCP Bundle's root, at its
/// server's start: `serve-mcp --verify-packages`): its manifest's signature
/// (`toolhost-plugin.toml.minisig` beside it) is by the key the lock names, a trusted one; and
/// every installed file has the SHA-256 both the lock and the manifest list, with no other
/// file beside them. Returns the signer (`None`: the lock names none, the package is
/// unsigned). The error is one line naming the file.
pub fn verify_installed(
    layout: &Layout,
    name: &str,
    locked: &Locked,
) -> Result<Option<PublicKey>, PackageError> {
    let folder = plugin_dir(layout, name);
    let manifest_file = folder.join(MANIFEST_FILE_NAME);
    let signer = match &locked.signer {
        Some(id) => Some(installed_signer(layout, &folder, &manifest_file, id)?),
        None => None,
    };
    let manifest = Manifest::read_as(&manifest_file, &manifest_file)?;
    if manifest.name != name || manifest.version.to_string() != locked.version {
        return Err(not_served(
            &folder,
            format!(
                "its manifest is {}, and usr/packages.lock records {name} {}",
                manifest.label(),
                locked.version
            ),
        ));
    }
    check_installed_files(&folder, &manifest, locked)?;
    Ok(signer)
}

/// An installed package refused: `why`, in the folder `folder`.
fn not_served(folder: &Path, why: String) -> PackageError {
    PackageError::new(
        PackageErrorKind::Hash,
        format!("{}: {why}; it is not served", Escaped(folder)),
    )
}

/// The trusted key that signed the installed package's manifest, which must be the key `id`
/// the lock names.
fn installed_signer(
    layout: &Layout,
    folder: &Path,
    manifest_file: &Path,
    id: &str,
) -> Result<PublicKey, PackageError> {
    let keys = signature::trusted_keys(&trusted_keys_dir(layout))?;
    let key = signature::verify(
        manifest_file,
        &signature::signature_path(manifest_file),
        &keys,
    )
    .map_err(|e| {
        let message = e
            .message
            .replace("; nothing was installed", "; it is not served");
        PackageError::new(e.kind, message)
    })?;
    if !key.id.eq_ignore_ascii_case(id) {
        return Err(not_served(
            folder,
            format!(
                "its manifest is signed by key {}, and usr/packages.lock names key {id}",
                key.id
            ),
        ));
    }
    Ok(key)
}

/// Every file in the installed package's `folder` has the SHA-256 both the lock and the
/// manifest list, with no other file beside them and none missing.
fn check_installed_files(
    folder: &Path,
    manifest: &Manifest,
    locked: &Locked,
) -> Result<(), PackageError> {
    let refuse = |why: String| not_served(folder, why);
    let mut listed: BTreeMap<&str, &str> = manifest
        .files
        .iter()
        .map(|(p, h)| (p.as_str(), h.as_str()))
        .collect();
    for (place, library) in manifest.libraries_for(host_target()).into_iter().flatten() {
        listed.insert(place, &library.sha256);
    }
    let mut present = Vec::new();
    walk(folder, folder, &mut present)?;
    let signature_file = format!("{MANIFEST_FILE_NAME}.minisig");
    for file in &present {
        if *file == signature_file {
            continue;
        }
        let Some(recorded) = locked.files.get(file) else {
            return Err(refuse(format!("{file} is not a file of the package")));
        };
        if *file != MANIFEST_FILE_NAME && listed.get(file.as_str()) != Some(&recorded.as_str()) {
            return Err(refuse(format!(
                "{file}: its manifest does not list the SHA-256 usr/packages.lock records"
            )));
        }
        if sha256_file(&folder.join(file))? != *recorded {
            return Err(refuse(format!(
                "the SHA-256 of {file} is not the one its manifest lists (changed after packing)"
            )));
        }
    }
    match locked.files.keys().find(|file| !present.contains(file)) {
        Some(file) => Err(refuse(format!(
            "{file}, listed in usr/packages.lock, is missing"
        ))),
        None => Ok(()),
    }
}
