//! Loading one library file into the cache (see `libraries.rs`): read, checked, instantiated
//! within its time limit, or the last good generation kept with the failure said.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use crate::host::reload::{ReloadEvent, Served};
use crate::isolation::{IsolatedTool, IsolationSettings};
use crate::layout::Escaped;
use crate::load::error::{LoadError, LoadErrorKind};
use crate::load::generation::Generation;
use crate::load::image::{Image, Stamp};
use crate::plugin::{ExtensionHandle, ToolHandle};
use crate::sync::lock;

use super::{Entry, Libraries, Loaded, Mode};

impl Libraries {
    /// What `path` serves; `extension` is `(point, name)` for an extension. It is loaded as
    /// `mode` says; a library loaded the other way before is loaded again.
    pub(crate) fn load(
        &self,
        path: &Path,
        extension: Option<(&str, &str)>,
        mode: Mode,
    ) -> Arc<Loaded> {
        if let Some(current) = self.cached(path, &mode) {
            return current;
        }
        // One load per file at a time, so the one that reads last is the one that stays; other
        // files load in parallel (`list`).
        let file_lock = lock(&self.loading)
            .entry(path.to_owned())
            .or_default()
            .clone();
        let _loading = lock(&file_lock);
        if let Some(current) = self.cached(path, &mode) {
            return current; // loaded by another thread while this one waited
        }
        let isolated = match mode {
            Mode::Isolated(settings) => Some(settings),
            Mode::InProcess => None,
        };
        let previous = lock(&self.entries).get(path).map(|e| {
            // Loaded the other way: its bytes are loaded again, this way.
            let hash = e.hash.filter(|_| e.isolated == isolated);
            (e.current.clone(), hash, e.generations)
        });
        // Read and loaded without holding the lock, so `list` can load several at once.
        self.read_and_load(path, extension, previous, isolated)
    }

    /// Reads `path` and, if its bytes changed since `previous` (what it serves, the hash of its
    /// bytes, its generations so far), loads it as a new generation.
    pub(super) fn read_and_load(
        &self,
        path: &Path,
        extension: Option<(&str, &str)>,
        previous: Option<(Arc<Loaded>, Option<u128>, u64)>,
        isolated: Option<IsolationSettings>,
    ) -> Arc<Loaded> {
        let (previous, hash, generations) = match previous {
            Some((current, hash, generations)) => (Some(current), hash, generations),
            None => (None, None, 0),
        };
        let had_entry = previous.is_some();
        let kept = previous.as_deref().and_then(Loaded::served);
        let started = Instant::now();
        let image = match Image::read(path, self.max_bytes, self.loader.in_memory()) {
            Ok(image) => image,
            Err(error) => {
                // A file caught mid-write is read again at the next lookup; any other failure
                // is recorded, and the file is tried again at its next change.
                let record = match error.kind {
                    LoadErrorKind::Changing | LoadErrorKind::Io => None,
                    _ => Stamp::of_entry(path).map(|s| (s, None)),
                };
                return self.failed(path, error, previous, kept, record, isolated);
            }
        };
        if hash == Some(image.hash) {
            // Same bytes under a new stamp (cargo's hard link, a touch): nothing to load.
            if let Some(e) = lock(&self.entries).get_mut(path) {
                e.stamp = image.stamp;
            }
            return previous.unwrap_or_else(|| unreachable!("a hash is only kept with an entry"));
        }
        let number = generations + 1;
        let loaded = match self.instantiate(path, &image, number, extension, isolated.clone()) {
            Ok(loaded) => Arc::new(loaded),
            Err(error) => {
                let record = Some((image.stamp, Some(image.hash)));
                return self.failed(path, error, previous, kept, record, isolated);
            }
        };
        let entry = Entry {
            isolated,
            stamp: image.stamp,
            hash: Some(image.hash),
            current: loaded.clone(),
            generations: number,
            unpinned: false,
            stale: false,
            failing: false,
        };
        self.replace(path, entry, had_entry);
        let new = loaded.served().unwrap_or_else(|| unreachable!("loaded"));
        tracing::debug!("loaded {} ({new})", Escaped(path));
        let took = started.elapsed();
        let (path, old) = (path.to_owned(), kept);
        self.emit(ReloadEvent::Loaded {
            path,
            old,
            new,
            took,
        });
        loaded
    }

    /// Maps the library and creates its tool or extension instance.
    pub(super) fn instantiate(
        &self,
        path: &Path,
        image: &Image,
        number: u64,
        extension: Option<(&str, &str)>,
        isolated: Option<IsolationSettings>,
    ) -> Result<Loaded, LoadError> {
        if let Some(pins) = &self.pins {
            pins.check(path, &image.bytes)
                .map_err(|reason| LoadError::new(path, LoadErrorKind::Unpinned, reason))?;
        }
        if let Some(settings) = isolated {
            // Never mapped in this process: its worker loads the private copy.
            let copy = self.loader.stage(path, image)?;
            let owned = extension.map(|(p, n)| (p.to_owned(), n.to_owned()));
            let program = &self.worker_program;
            let worker =
                IsolatedTool::start(program, copy, path, owned, settings, self.init_timeout)?;
            return Ok(match extension {
                None => {
                    let handle = ToolHandle::isolated(worker, path, number)?;
                    Loaded::Tool(Arc::new(handle.loaded_from(image.hash)))
                }
                Some(ext) => {
                    let handle = ExtensionHandle::isolated(worker, path, ext, number);
                    Loaded::Extension(Arc::new(handle))
                }
            });
        }
        let module = self.loader.load(path, image)?;
        // Mapped for good from here on, even if creating the instance fails.
        self.count_generation();
        let generation = Arc::new(Generation::new(&module, path, number, self.live.clone()));
        let (source, hash) = (path.to_owned(), image.hash);
        let extension = extension.map(|(p, n)| (p.to_owned(), n.to_owned()));
        let create = move || match extension {
            None => ToolHandle::create(generation, &source)
                .map(|h| Loaded::Tool(Arc::new(h.loaded_from(hash)))),
            Some((point, name)) => ExtensionHandle::create(generation, &source, &point, &name)
                .map(|h| Loaded::Extension(Arc::new(h))),
        };
        within(self.init_timeout, path, create)
    }

    /// Stores `entry` for `path`, read by a load that found an entry there if `had_entry`;
    /// the entry it replaces is dropped outside the lock (dropping an instance runs plugin
    /// code). Not if the file was removed and forgotten while it loaded (see [`forgotten`]).
    pub(super) fn replace(&self, path: &Path, entry: Entry, had_entry: bool) {
        let mut entries = lock(&self.entries);
        if forgotten(&entries, path, had_entry) {
            return;
        }
        let replaced = entries.insert(path.to_owned(), entry);
        drop(entries);
        drop(replaced);
    }

    /// Records a failed load: the previous generation keeps serving if there is one.
    pub(super) fn failed(
        &self,
        path: &Path,
        error: LoadError,
        previous: Option<Arc<Loaded>>,
        kept: Option<Served>,
        record: Option<(Stamp, Option<u128>)>,
        isolated: Option<IsolationSettings>,
    ) -> Arc<Loaded> {
        let previous_entry = previous.is_some();
        let current = match previous {
            Some(previous) if !matches!(*previous, Loaded::Failed(_)) => previous,
            _ => Arc::new(Loaded::Failed(error.clone())),
        };
        if error.kind == LoadErrorKind::Changing || self.unsettled(path, &error) {
            // Being written or replaced right now: its next change, or the watcher once it
            // settles, brings it back here.
            tracing::debug!("{error}");
            return current;
        }
        // A host with a subscriber (`toolhost watch`, `serve-mcp`, `chat`) reports the event
        // itself: one line, not two.
        let reported = !lock(&self.subscribers).is_empty();
        match &kept {
            _ if reported => tracing::debug!("{error}"),
            Some(kept) => tracing::warn!(
                "{}: the new build failed to load, still serving {kept}: {}; it is tried again \
                 at its next change",
                Escaped(path),
                error.reason
            ),
            None => tracing::warn!("{error}"),
        }
        self.emit(ReloadEvent::Failed {
            error: error.clone(),
            kept,
        });
        if let Some((stamp, hash)) = record {
            let mut entries = lock(&self.entries);
            if forgotten(&entries, path, previous_entry) {
                return current;
            }
            let generations = entries.get(path).map_or(0, |e| e.generations);
            let current = current.clone();
            let entry = Entry {
                isolated,
                stamp,
                hash,
                current,
                generations,
                unpinned: error.kind == LoadErrorKind::Unpinned,
                stale: false,
                failing: true,
            };
            let replaced = entries.insert(path.to_owned(), entry);
            drop(entries);
            drop(replaced); // outside the lock: dropping an instance runs plugin code
        }
        current
    }

    pub(super) fn count_generation(&self) {
        let loaded = self.loaded.fetch_add(1, Ordering::Relaxed) + 1;
        if loaded.is_multiple_of(self.warn_every) {
            tracing::warn!(
                "{loaded} library generations have been loaded in this process; libraries are \
                 never unmapped, so each keeps about its file size of memory: restart the host \
                 to give it back (the threshold is HostOptions::warn_generations)"
            );
        }
    }
}

/// Runs `create` (a library's constructor and metadata read) on a call thread, and gives up
/// on it after `limit`: a constructor that blocks keeps that thread, never the host (whatever
/// it makes when it returns at last is dropped there).
fn within(
    limit: Duration,
    path: &Path,
    create: impl FnOnce() -> Result<Loaded, LoadError> + Send + 'static,
) -> Result<Loaded, LoadError> {
    let (tx, rx) = mpsc::sync_channel(1);
    // Without a thread, `tx` is dropped with the job: the wait below ends at once.
    let _ = crate::exec::call_threads::dispatch(Box::new(move || drop(tx.send(create()))));
    let reason = match rx.recv_timeout(limit) {
        Ok(made) => return made,
        Err(mpsc::RecvTimeoutError::Timeout) => format!(
            "its constructor did not return within {} s ([limits] init_seconds); it is tried again at its next change",
            crate::config::numbers::Shown(limit.as_secs_f64())
        ),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            "no thread could be started to run its constructor".to_owned()
        }
    };
    Err(LoadError::new(path, LoadErrorKind::InitFailed, reason))
}

/// Whether the entry of `path` was forgotten while a load that found one (`had_entry`), or
/// none, read it: its file is gone and the watcher has already said so (or will find nothing
/// to say). Storing it would keep a removed library serving for good, as a missing file serves
/// while it has an entry. Checked under the entries' lock, after the removal (a removal is
/// forgotten only once seen), so a file removed later is forgotten later, as usual.
fn forgotten(entries: &HashMap<PathBuf, Entry>, path: &Path, had_entry: bool) -> bool {
    match had_entry {
        true => !entries.contains_key(path),
        false => !entries.contains_key(path) && !crate::layout::entry_exists(path),
    }
}
