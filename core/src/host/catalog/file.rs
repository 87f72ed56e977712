//! What one library file is, for the catalog: from the library this host holds, else from the
//! metadata cache, else loaded (and what loading gave recorded in the cache).

use std::path::Path;
use std::sync::Arc;

use super::rows::{CachedTool, ListedExtension, ToolSource};
use crate::host::libraries::{Loaded, Mode};
use crate::host::Host;
use crate::layout::read_capped;
use crate::load::error::{LoadError, LoadErrorKind};
use crate::load::image::sha256_hex;
use crate::load::metadata_cache::{FileKey, Outcome};

/// What a file was found to be.
pub(super) enum Found {
    Tool(ToolSource),
    Extension(ListedExtension),
    Skipped(LoadError),
}

/// A file's content as the catalog knows it: its SHA-256 and, if it was read just now, the
/// XXH3 hash the loader takes of the same bytes.
struct Seen {
    sha256: String,
    xxh3: Option<u128>,
}

/// The refusals that depend only on a library's bytes and the host's contract: worth
/// remembering. (A library that failed to start, or that the dynamic loader refused, may work
/// in another environment, so it is loaded again each time, as are files that cannot be read.)
const REMEMBERED: [LoadErrorKind; 5] = [
    LoadErrorKind::NotAPlugin,
    LoadErrorKind::IncompatibleVersion,
    LoadErrorKind::IncompatibleLayout,
    LoadErrorKind::WrongKind,
    LoadErrorKind::BadSchema,
];

impl Host {
    /// What the library at `path` is; `extension` is `(point, name)` for an extension;
    /// `loads` counts the files looked at through the loader.
    pub(super) fn catalog_file(
        &self,
        path: &Path,
        extension: Option<(&str, &str)>,
        mode: Mode,
        load: bool,
        loads: &std::sync::atomic::AtomicUsize,
    ) -> Found {
        if !load {
            if let Some(loaded) = self.libraries.peek(path, mode.clone()) {
                self.observe(path, mode, &loaded);
                return found(path, extension, &loaded);
            }
        }
        let seen = self.seen(path);
        if let (Some(seen), false) = (&seen, load) {
            if let Some(found) = self.known(path, extension, mode.clone(), seen) {
                return found;
            }
        }
        loads.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let loaded = self.libraries.load(path, extension, mode.clone());
        tracing::debug!(
            "list: {} looked at through the loader",
            crate::layout::Escaped(path)
        );
        if let Some(seen) = seen {
            self.learn(path, extension.is_some(), mode, seen, &loaded);
        }
        found(path, extension, &loaded)
    }

    /// Records the readiness a tool this host holds reports now, if the cache says otherwise
    /// (so a tool that stopped being ready is loaded and asked by the next `list`).
    fn observe(&self, path: &Path, mode: Mode, loaded: &Loaded) {
        let Loaded::Tool(handle) = loaded else {
            return;
        };
        let Some(seen) = self.seen(path) else {
            return;
        };
        let ready = handle.readiness().is_ready();
        let known = self.metadata.outcome(&seen.sha256, false);
        if !matches!(known, Some(Outcome::Tool { ready: r, .. }) if r == ready) {
            self.learn(path, false, mode, seen, loaded);
        }
    }

    /// The SHA-256 of the file at `path`: from the stat index while the file's identity on
    /// disk is unchanged, else read and hashed (and indexed).
    fn seen(&self, path: &Path) -> Option<Seen> {
        let key = FileKey::of(path)?;
        if let Some(sha256) = self.metadata.sha256(path, key) {
            return Some(Seen { sha256, xxh3: None });
        }
        let seen = read(path, self.options.max_library_bytes)?;
        // Changed while it was read: left to the loader, which reports it.
        (FileKey::of(path)? == key).then(|| {
            self.metadata.remember_file(path, key, &seen.sha256);
            seen
        })
    }

    /// What the cache knows of the bytes `seen`, if it may be trusted without loading them.
    fn known(
        &self,
        path: &Path,
        extension: Option<(&str, &str)>,
        mode: Mode,
        seen: &Seen,
    ) -> Option<Found> {
        // The pin check is never skipped. (A file that served in this host goes through the
        // loader, which keeps its last good build serving.)
        if let Some(Err(reason)) = self.libraries.pin_check(path, &seen.sha256) {
            if !self.libraries.contains(path) {
                let error = LoadError::new(path, LoadErrorKind::Unpinned, reason);
                tracing::warn!("{error}");
                return Some(Found::Skipped(error));
            }
            return None;
        }
        let isolated = matches!(mode, Mode::Isolated(_));
        Some(
            match self.metadata.outcome(&seen.sha256, extension.is_some())? {
                // Not ready when last loaded: loaded, and asked again.
                Outcome::Tool { ready: false, .. } => return None,
                Outcome::Tool {
                    info,
                    package,
                    version,
                    contract,
                    ready: true,
                } => Found::Tool(ToolSource::Cached(Arc::new(CachedTool {
                    info,
                    package,
                    version,
                    contract,
                }))),
                Outcome::Extension { info } => Found::Extension(ListedExtension {
                    name: extension.map_or_else(String::new, |(_, name)| name.to_owned()),
                    path: path.to_owned(),
                    info,
                    isolated,
                    handle: None,
                }),
                Outcome::Failed { kind, reason } => {
                    let kind = REMEMBERED.into_iter().find(|k| k.as_str() == kind)?;
                    let error = LoadError::new(path, kind, reason);
                    // As the loader says it (a skipped file is a warning outside `list`).
                    tracing::warn!("{error}");
                    Found::Skipped(error)
                }
            },
        )
    }

    /// Records in the metadata cache what loading `path` gave, if what the loader read is the
    /// content `seen` (the file may have changed in between).
    fn learn(&self, path: &Path, extension: bool, mode: Mode, seen: Seen, loaded: &Loaded) {
        let Some((hash, failing)) = self.libraries.last_read(path) else {
            return;
        };
        let outcome = match loaded {
            Loaded::Tool(handle) if !failing => Outcome::Tool {
                info: handle.info().clone(),
                package: handle.package().to_owned(),
                version: handle.version().to_owned(),
                contract: handle.contract().to_owned(),
                ready: handle.readiness().is_ready(),
            },
            Loaded::Extension(handle) if !failing => Outcome::Extension {
                info: handle.info().clone(),
            },
            // Refusals are remembered from loads in this process only (a worker that failed to
            // start says nothing of the library).
            Loaded::Failed(error)
                if failing && mode == Mode::InProcess && REMEMBERED.contains(&error.kind) =>
            {
                Outcome::Failed {
                    kind: error.kind.as_str().to_owned(),
                    reason: error.reason.clone(),
                }
            }
            _ => return,
        };
        if self.metadata.outcome(&seen.sha256, extension).as_ref() == Some(&outcome) {
            return; // known already (`list --load`): no need to read the file again
        }
        let xxh3 = match seen.xxh3 {
            Some(xxh3) => Some(xxh3),
            None => read(path, self.options.max_library_bytes)
                .filter(|again| again.sha256 == seen.sha256)
                .and_then(|again| again.xxh3),
        };
        if xxh3 == Some(hash) {
            self.metadata.record(&seen.sha256, extension, outcome);
        }
    }
}

/// Reads and hashes the file at `path`.
fn read(path: &Path, cap: u64) -> Option<Seen> {
    let read = read_capped(path, cap, "HostOptions::max_library_bytes").ok()?;
    Some(Seen {
        sha256: sha256_hex(&read.bytes),
        xxh3: Some(xxhash_rust::xxh3::xxh3_128(&read.bytes)),
    })
}

/// What the loader's answer makes of the file.
fn found(path: &Path, extension: Option<(&str, &str)>, loaded: &Loaded) -> Found {
    match loaded {
        Loaded::Tool(handle) if extension.is_none() => {
            Found::Tool(ToolSource::Loaded(handle.clone()))
        }
        Loaded::Extension(handle) if extension.is_some() => {
            Found::Extension(ListedExtension::loaded(handle))
        }
        Loaded::Failed(error) => Found::Skipped(error.clone()),
        _ => Found::Skipped(LoadError::new(
            path,
            LoadErrorKind::WrongKind,
            "loaded in another role",
        )),
    }
}
