//! Verifying a package before it is installed (see `install.rs`; an installed package against
//! what it carries: `installed.rs`): the staging folder, the signature against the trusted
//! keys, the manifest, every file's SHA-256, the `[compat]` ranges and the target triple.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::archive::{unpack_reader, MAX_ENTRIES, MAX_UNPACKED_BYTES};
use super::install::{trusted_keys_dir, Policy};
use super::manifest::{check_path, Library, Manifest, MANIFEST_FILE_NAME};
use super::signature::{self, PublicKey};
use super::{host_target, PackageError, PackageErrorKind};
use crate::layout::{Escaped, Layout};

/// A temporary folder under `usr/.cache/packages/`, removed when dropped.
#[derive(Debug)]
pub(crate) struct Staging(pub(crate) PathBuf);

impl Staging {
    pub(super) fn new(layout: &Layout, what: &str) -> Result<Self, PackageError> {
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = layout.cache_dir().join("packages").join(format!(
            "{what}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).map_err(|e| PackageError::io("cannot create", &dir, e))?;
        Ok(Self(dir))
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// A package that passed every check, laid out in a staging folder, ready to
/// [`install`](super::install::install()).
#[derive(Debug)]
pub struct Verified {
    /// Its manifest.
    pub manifest: Manifest,
    /// The trusted key that signed it (`None`: unsigned, allowed by the policy).
    pub signer: Option<PublicKey>,
    /// Whether `[packages.signers]` names that key for the package's source (it may then
    /// replace another signer without `--new-signer`).
    pub signer_named: bool,
    /// Where it came from, as the lock records it.
    pub source: String,
    /// The archive's SHA-256 (hex), for an archive.
    pub archive_sha256: Option<String>,
    /// Every file that will be installed (path in `usr/plugins/<name>/` -> SHA-256 hex).
    pub files: BTreeMap<String, String>,
    /// The host libraries it installs: their places (`tools/x.so`, ...).
    pub libraries: Vec<String>,
    /// The folder to install.
    pub(super) folder: PathBuf,
    _staging: Staging,
}

/// Verifies the package at `path` (an archive, with its `.minisig` beside it, or an unpacked
/// package folder, with `toolhost-plugin.toml.minisig`); `source` is what the lock records
/// (the URL it was downloaded from, or the path).
pub fn verify(
    layout: &Layout,
    path: &Path,
    source: &str,
    policy: &Policy,
) -> Result<Verified, PackageError> {
    let keys = signature::trusted_keys(&trusted_keys_dir(layout))?;
    let staging = Staging::new(layout, "add")?;
    let unpacked = staging.0.join("unpacked");
    fs::create_dir_all(&unpacked).map_err(|e| PackageError::io("cannot create", &unpacked, e))?;
    let is_dir = is_folder(path)?;
    // What is verified is what is used: an archive is opened once, hashed, verified and
    // unpacked from that one open file; a folder is copied first, and its copy's manifest
    // verified.
    let (signed, archive_sha256) = match is_dir {
        true => (signed_folder(path, &unpacked, &keys, policy)?, None),
        false => {
            let (signed, hash) = signed_archive(path, &unpacked, &keys, policy)?;
            (signed, Some(hash))
        }
    };
    let signer = signed?;
    let mut signer_named = false;
    if let Some(key) = &signer {
        signer_named = policy.check_signer(source, key).map_err(|why| {
            PackageError::new(
                PackageErrorKind::Signature,
                format!("{}: refused: {why}; nothing was installed", Escaped(path)),
            )
        })?;
    }
    // Errors name the manifest where the user has it: in the folder, or in the archive.
    let shown = match is_dir {
        true => path.join(MANIFEST_FILE_NAME),
        false => PathBuf::from(format!("{}: {MANIFEST_FILE_NAME}", Escaped(path))),
    };
    let manifest = Manifest::read_as(&unpacked.join(MANIFEST_FILE_NAME), &shown)?;
    let label = format!("{} ({})", manifest.label(), Escaped(path));
    check_compat(&manifest, &label)?;
    let host_libraries = host_libraries(&manifest, &label)?;
    check_hashes(&manifest, &unpacked, &label)?;
    let folder = staging.0.join(&manifest.name);
    let files = lay_out(&manifest, host_libraries, &unpacked, &folder)?;
    Ok(Verified {
        libraries: host_libraries.keys().cloned().collect(),
        manifest,
        signer,
        signer_named,
        source: source.to_owned(),
        archive_sha256,
        files,
        folder,
        _staging: staging,
    })
}

/// Whether `path` is a package folder (else an archive); anything but a folder or a regular
/// file is refused.
fn is_folder(path: &Path) -> Result<bool, PackageError> {
    let metadata = fs::metadata(path).map_err(|e| PackageError::io("cannot read", path, e))?;
    if metadata.is_dir() {
        return Ok(true);
    }
    match crate::layout::not_regular(&metadata) {
        None => Ok(false),
        Some(what) => Err(PackageError::new(
            PackageErrorKind::NotAnArchive,
            format!(
                "{}: refused: it is {what}, not a package archive or folder; nothing was installed",
                Escaped(path)
            ),
        )),
    }
}

/// The package folder `path` copied into `unpacked`, and the signer of its copy's manifest
/// (the outer error: the copy failed; the inner one: the signature was refused).
fn signed_folder(
    path: &Path,
    unpacked: &Path,
    keys: &[PublicKey],
    policy: &Policy,
) -> Result<Result<Option<PublicKey>, PackageError>, PackageError> {
    copy_folder(path, unpacked)?;
    let manifest = path.join(MANIFEST_FILE_NAME);
    let copy = unpacked.join(MANIFEST_FILE_NAME);
    let mut data = fs::File::open(&copy).map_err(|_| {
        PackageError::new(
            PackageErrorKind::Manifest,
            format!(
                "{}: no manifest: a package folder has toolhost-plugin.toml at its top",
                Escaped(&manifest)
            ),
        )
    })?;
    Ok(check_signature(&mut data, &manifest, keys, policy))
}

/// The archive `path` opened once, hashed, its signature checked and, if it holds, unpacked
/// into `unpacked` from that one open file: the signer (or why it was refused) and the
/// archive's SHA-256.
fn signed_archive(
    path: &Path,
    unpacked: &Path,
    keys: &[PublicKey],
    policy: &Policy,
) -> Result<(Result<Option<PublicKey>, PackageError>, String), PackageError> {
    // Opened without blocking, and only if it is still a regular file.
    let (mut data, _) = crate::layout::open_regular(path).map_err(|e| {
        PackageError::new(
            PackageErrorKind::NotAnArchive,
            format!("{}: refused: {e}; nothing was installed", Escaped(path)),
        )
    })?;
    let hash = sha256_reader(&mut data, path)?;
    let signed = check_signature(&mut data, path, keys, policy);
    if signed.is_ok() {
        std::io::Seek::rewind(&mut data).map_err(|e| PackageError::io("cannot read", path, e))?;
        unpack_reader(std::io::BufReader::new(data), path, unpacked)?;
    }
    Ok((signed, hash))
}

/// The libraries the package has for this host's target triple, or why there are none.
fn host_libraries<'a>(
    manifest: &'a Manifest,
    label: &str,
) -> Result<&'a BTreeMap<String, Library>, PackageError> {
    let triple = host_target();
    manifest.libraries_for(triple).ok_or_else(|| {
        let has = manifest.triples();
        let has = if has.is_empty() {
            "none".to_owned()
        } else {
            has.join(", ")
        };
        PackageError::new(
            PackageErrorKind::Target,
            format!("{label}: no library for this host ({triple}); it has libraries for: {has}"),
        )
    })
}

/// The folder to install, laid out from `unpacked`: the manifest, the other files, and this
/// host's libraries in their places; every file's SHA-256 by its place.
fn lay_out(
    manifest: &Manifest,
    host_libraries: &BTreeMap<String, Library>,
    unpacked: &Path,
    folder: &Path,
) -> Result<BTreeMap<String, String>, PackageError> {
    let mut files = BTreeMap::new();
    let mut place = |from: &Path, to: &str| -> Result<(), PackageError> {
        let target = folder.join(to);
        if let Some(parent) = target.parent() {
            fs::create_dir_all(parent).map_err(|e| PackageError::io("cannot create", parent, e))?;
        }
        fs::rename(from, &target).map_err(|e| PackageError::io("cannot move", from, e))?;
        files.insert(to.to_owned(), sha256_file(&target)?);
        Ok(())
    };
    place(&unpacked.join(MANIFEST_FILE_NAME), MANIFEST_FILE_NAME)?;
    for file in manifest.files.keys() {
        place(&unpacked.join(file), file)?;
    }
    for (to, library) in host_libraries {
        place(&unpacked.join(&library.path), to)?;
    }
    Ok(files)
}

/// The signer of `data` (the bytes of `file`, whose signature is `<file>.minisig`), `None`
/// for an unsigned package that the policy allows.
fn check_signature(
    data: &mut fs::File,
    file: &Path,
    keys: &[PublicKey],
    policy: &Policy,
) -> Result<Option<PublicKey>, PackageError> {
    match signature::verify_reader(data, file, &signature::signature_path(file), keys) {
        Ok(key) => Ok(Some(key)),
        Err(e) if e.kind == PackageErrorKind::Unsigned && !policy.require_signature => Ok(None),
        Err(e) if e.kind == PackageErrorKind::Unsigned => Err(PackageError::new(
            PackageErrorKind::Unsigned,
            format!(
                "{}; or allow unsigned packages with `require_signature = false` in [packages] of usr/toolhost.toml",
                e.message
            ),
        )),
        Err(e) => Err(e),
    }
}

/// Refuses a package built for another contract or toolhost version.
fn check_compat(manifest: &Manifest, label: &str) -> Result<(), PackageError> {
    let contract = semver::Version::parse(plugin_abi::ABI_VERSION).expect("the contract's version");
    let host = semver::Version::parse(env!("CARGO_PKG_VERSION")).expect("toolhost's version");
    let refuse = |what: &str, range: &semver::VersionReq, have: &semver::Version| {
        PackageError::new(
            PackageErrorKind::Compat,
            format!(
                "{label}: built for {what} {range}, and this toolhost has {have}: install a version of the package made for it, or update toolhost"
            ),
        )
    };
    if !manifest.compat.plugin_api.matches(&contract) {
        return Err(refuse(
            "plugin-api contract",
            &manifest.compat.plugin_api,
            &contract,
        ));
    }
    if !manifest.compat.toolhost.matches(&host) {
        return Err(refuse("toolhost", &manifest.compat.toolhost, &host));
    }
    Ok(())
}

/// Every file in `dir` must be the manifest or listed in it with its hash; every file listed
/// must be there.
fn check_hashes(manifest: &Manifest, dir: &Path, label: &str) -> Result<(), PackageError> {
    let mut listed: BTreeMap<&str, &str> = manifest
        .files
        .iter()
        .map(|(p, h)| (p.as_str(), h.as_str()))
        .collect();
    for libraries in manifest.libraries.values() {
        for library in libraries.values() {
            listed.insert(&library.path, &library.sha256);
        }
    }
    let mut present = Vec::new();
    walk(dir, dir, &mut present)?;
    for file in &present {
        if file != MANIFEST_FILE_NAME && !listed.contains_key(file.as_str()) {
            return Err(PackageError::new(
                PackageErrorKind::Hash,
                format!(
                    "{label}: refused: {file} is not listed in its manifest; nothing was installed"
                ),
            ));
        }
    }
    for (file, hash) in listed {
        let path = dir.join(file);
        if !path.is_file() {
            return Err(PackageError::new(
                PackageErrorKind::Hash,
                format!(
                    "{label}: refused: {file}, listed in its manifest, is missing; nothing was installed"
                ),
            ));
        }
        if sha256_file(&path)? != hash {
            return Err(PackageError::new(
                PackageErrorKind::Hash,
                format!(
                    "{label}: refused: the SHA-256 of {file} is not the one its manifest lists (tampered or damaged); nothing was installed"
                ),
            ));
        }
    }
    Ok(())
}

/// The files under `dir`, `/`-separated paths relative to `root`.
pub(super) fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) -> Result<(), PackageError> {
    let entries = fs::read_dir(dir).map_err(|e| PackageError::io("cannot read", dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| PackageError::io("cannot read", dir, e))?;
        let path = entry.path();
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            walk(root, &path, out)?;
        } else {
            let relative = path.strip_prefix(root).unwrap_or(&path);
            out.push(relative.to_string_lossy().replace('\\', "/"));
        }
    }
    Ok(())
}

/// Copies the package folder `from` into `to`: regular files and folders only (a link is
/// refused), within the same limits as an archive.
fn copy_folder(from: &Path, to: &Path) -> Result<(), PackageError> {
    let mut total = 0u64;
    let mut count = 0usize;
    copy_dir(from, from, to, &mut total, &mut count)
}

fn copy_dir(
    root: &Path,
    dir: &Path,
    to: &Path,
    total: &mut u64,
    count: &mut usize,
) -> Result<(), PackageError> {
    let refuse = |why: String| {
        PackageError::new(
            PackageErrorKind::UnsafeArchive,
            format!("{}: refused: {why}; nothing was installed", Escaped(root)),
        )
    };
    let entries = fs::read_dir(dir).map_err(|e| PackageError::io("cannot read", dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| PackageError::io("cannot read", dir, e))?;
        let path = entry.path();
        let relative = path
            .strip_prefix(root)
            .unwrap_or(&path)
            .to_string_lossy()
            .replace('\\', "/");
        // A signature beside the manifest is not part of the package.
        if relative == format!("{MANIFEST_FILE_NAME}.minisig") {
            continue;
        }
        check_path(&relative).map_err(|why| refuse(format!("file {why}")))?;
        let kind =
            fs::symlink_metadata(&path).map_err(|e| PackageError::io("cannot read", &path, e))?;
        *count += 1;
        if *count > MAX_ENTRIES {
            return Err(refuse(format!("more than {MAX_ENTRIES} files")));
        }
        if kind.is_dir() {
            fs::create_dir_all(to.join(&relative))
                .map_err(|e| PackageError::io("cannot create", to, e))?;
            copy_dir(root, &path, to, total, count)?;
        } else if kind.is_file() {
            *total = total.saturating_add(kind.len());
            if *total > MAX_UNPACKED_BYTES {
                return Err(refuse(format!(
                    "more than {} MiB of files",
                    MAX_UNPACKED_BYTES >> 20
                )));
            }
            fs::copy(&path, to.join(&relative))
                .map_err(|e| PackageError::io("cannot copy", &path, e))?;
        } else {
            return Err(refuse(format!(
                "{relative} is a link or special file (a package holds regular files only)"
            )));
        }
    }
    Ok(())
}

/// The SHA-256 of a file, in hex (read in pieces: a package's files are not held whole).
pub(crate) fn sha256_file(path: &Path) -> Result<String, PackageError> {
    let mut file = fs::File::open(path).map_err(|e| PackageError::io("cannot read", path, e))?;
    sha256_reader(&mut file, path)
}

/// The SHA-256 of what `file` holds from where it is read, in hex; `path` names it in errors.
fn sha256_reader(file: &mut fs::File, path: &Path) -> Result<String, PackageError> {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 16];
    loop {
        let n = std::io::Read::read(file, &mut buffer)
            .map_err(|e| PackageError::io("cannot read", path, e))?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}
