//! The host's library cache: one entry per file, which keeps the last good generation serving.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use crate::host::error::HostError;
use crate::host::options::HostOptions;
use crate::host::reload::{ReloadEvent, Served};
use crate::isolation::{IsolatedTool, IsolationSettings};
use crate::layout::Escaped;
use crate::load::error::{LoadError, LoadErrorKind};
use crate::load::generation::Generation;
use crate::load::image::{Image, Stamp};
use crate::load::layout_checks::LayoutChecks;
use crate::load::loader::{LoadStats, Loader};
use crate::load::pins::Pins;
use crate::plugin::{ExtensionHandle, ToolHandle};
use crate::sync::lock;

/// What a library file serves.
pub(crate) enum Loaded {
    Tool(Arc<ToolHandle>),
    Extension(Arc<ExtensionHandle>),
    Failed(LoadError),
}

impl Loaded {
    fn served(&self) -> Option<Served> {
        let (version, generation) = match self {
            Self::Tool(h) => (h.version(), h.generation()),
            Self::Extension(h) => (h.version(), h.generation()),
            Self::Failed(_) => return None,
        };
        Some(Served {
            version: version.to_owned(),
            generation,
        })
    }
}

/// Where a tool is loaded: in this process, or in a worker process with these settings.
/// Every load says which: a file is never loaded in this process by default.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Mode {
    InProcess,
    Isolated(IsolationSettings),
}

struct Entry {
    /// Where it was loaded; `None`: in this process.
    isolated: Option<IsolationSettings>,
    /// The file's stamp when it was last read.
    stamp: Stamp,
    /// The hash of the bytes last read, loaded or not.
    hash: Option<u128>,
    /// The last generation that loaded, or the failure if none ever did.
    current: Arc<Loaded>,
    /// Generations loaded from this path so far.
    generations: u64,
    /// The last bytes read were refused as unpinned (pinning is on).
    unpinned: bool,
    /// To be read again at the next lookup, whatever its stamp (the pins changed).
    stale: bool,
    /// The last bytes read failed to load (`current` is an older generation, or the failure).
    failing: bool,
}

thread_local! {
    /// Events held back on this thread ([`Libraries::hold_events`]), with the nesting depth.
    static HELD: std::cell::RefCell<Option<(usize, Vec<ReloadEvent>)>> =
        const { std::cell::RefCell::new(None) };
}

/// Sends the held events when dropped (the outermost guard of the thread).
pub(crate) struct HeldEvents<'a>(&'a Libraries);

impl Drop for HeldEvents<'_> {
    fn drop(&mut self) {
        let events = HELD.with(|held| {
            let mut held = held.borrow_mut();
            match &mut *held {
                Some((depth, _)) if *depth > 1 => {
                    *depth -= 1;
                    Vec::new()
                }
                _ => held.take().map(|(_, events)| events).unwrap_or_default(),
            }
        });
        for event in &events {
            self.0.send(event);
        }
    }
}

/// Library files by path. A file is read again only when its stamp changes, and loaded again only
/// when its bytes change. A new build that fails to load leaves the previous generation serving.
pub(crate) struct Libraries {
    loader: Loader,
    entries: Mutex<HashMap<PathBuf, Entry>>,
    /// Held while a file is read and loaded.
    loading: Mutex<HashMap<PathBuf, Arc<Mutex<()>>>>,
    /// Generations still held by a handle or a running call.
    live: Arc<AtomicUsize>,
    /// Libraries mapped so far (every generation, and every build that mapped but failed to
    /// start): they are never unmapped, so each one keeps memory.
    loaded: AtomicU64,
    /// Warn each time `loaded` passes another multiple of this.
    warn_every: u64,
    subscribers: Mutex<Vec<mpsc::Sender<ReloadEvent>>>,
    /// The largest library file read ([`HostOptions::max_library_bytes`]).
    max_bytes: u64,
    /// [`HostOptions::settle`]: how long a failure of a fresh file waits while a watcher runs.
    settle: Duration,
    /// Watchers running: they look at a fresh file again once it settles.
    watchers: AtomicUsize,
    /// The pin check, when pinning is on.
    pins: Option<Pins>,
    /// The program that runs worker processes.
    worker_program: PathBuf,
    /// How long a constructor and metadata read may take ([`HostOptions::init_timeout`]).
    init_timeout: Duration,
}

impl Libraries {
    pub(crate) fn new(
        options: &HostOptions,
        pins: Option<Pins>,
        checks: LayoutChecks,
        init_timeout: Duration,
    ) -> Result<Self, HostError> {
        Ok(Self {
            loader: Loader::new(checks, options.file_copies)?,
            entries: Mutex::default(),
            loading: Mutex::default(),
            live: Arc::default(),
            loaded: AtomicU64::new(0),
            warn_every: options.warn_generations.max(1) as u64,
            subscribers: Mutex::default(),
            max_bytes: options.max_library_bytes,
            settle: options.settle,
            watchers: AtomicUsize::new(0),
            pins,
            worker_program: options
                .worker_program
                .clone()
                .unwrap_or_else(crate::isolation::default_worker_program),
            init_timeout,
        })
    }

    /// A watcher starts (`true`) or stops: while one runs, a failure of a file that may still
    /// be being written waits until the file settles (the watcher looks at it again then).
    pub(crate) fn watching(&self, starts: bool) {
        match starts {
            true => self.watchers.fetch_add(1, Ordering::Relaxed),
            false => self.watchers.fetch_sub(1, Ordering::Relaxed),
        };
    }

    /// Whether `error` may come from a file still being written in chunks, to be reported
    /// only once it settles: a watcher will look at it again.
    fn unsettled(&self, path: &Path, error: &LoadError) -> bool {
        matches!(
            error.kind,
            LoadErrorKind::NotALibrary | LoadErrorKind::Empty
        ) && self.watchers.load(Ordering::Relaxed) > 0
            && Stamp::of(path).is_some_and(|s| s.is_younger_than(self.settle))
    }

    /// `(loaded, live)`: generations loaded so far, and those still in use.
    pub(crate) fn generations(&self) -> (u64, usize) {
        (
            self.loaded.load(Ordering::Relaxed),
            self.live.load(Ordering::Relaxed),
        )
    }

    /// What the loader did so far.
    pub(crate) fn load_stats(&self) -> LoadStats {
        self.loader.stats()
    }

    pub(crate) fn subscribe(&self) -> mpsc::Receiver<ReloadEvent> {
        let (tx, rx) = mpsc::channel();
        lock(&self.subscribers).push(tx);
        rx
    }

    pub(crate) fn emit(&self, event: ReloadEvent) {
        let held = HELD.with(|held| match &mut *held.borrow_mut() {
            Some((_, events)) => {
                events.push(event.clone());
                true
            }
            None => false,
        });
        if !held {
            self.send(&event);
        }
    }

    fn send(&self, event: &ReloadEvent) {
        let counted = match event {
            ReloadEvent::Loaded { old: None, .. } => Some("loaded"),
            ReloadEvent::Loaded { old: Some(_), .. } => Some("reloaded"),
            ReloadEvent::Failed { .. } => Some("failed"),
            ReloadEvent::Removed { .. } => Some("removed"),
            _ => None,
        };
        if let Some(counted) = counted {
            crate::telemetry::metrics::reloaded(counted);
        }
        lock(&self.subscribers).retain(|tx| tx.send(event.clone()).is_ok());
    }

    /// Holds back the events this thread emits until the guard is dropped: a change is
    /// reported once the host's caches serve it, so a call made on seeing "reloaded" runs the
    /// new build.
    pub(crate) fn hold_events(&self) -> HeldEvents<'_> {
        HELD.with(|held| {
            let mut held = held.borrow_mut();
            match &mut *held {
                Some((depth, _)) => *depth += 1,
                None => *held = Some((1, Vec::new())),
            }
        });
        HeldEvents(self)
    }

    /// Whether `path` has an entry (it serves until [`forget`](Self::forget)).
    pub(crate) fn contains(&self, path: &Path) -> bool {
        lock(&self.entries).contains_key(path)
    }

    /// Every path with an entry.
    pub(crate) fn paths(&self) -> Vec<PathBuf> {
        lock(&self.entries).keys().cloned().collect()
    }

    /// The paths with an entry that are directly in `dir`.
    pub(crate) fn paths_in(&self, dir: &Path) -> Vec<PathBuf> {
        lock(&self.entries)
            .keys()
            .filter(|p| p.parent() == Some(dir))
            .cloned()
            .collect()
    }

    /// Drops the entries whose paths `forget` picks; returns those paths.
    pub(crate) fn forget_if(&self, forget: impl Fn(&Path) -> bool) -> Vec<PathBuf> {
        let gone: Vec<PathBuf> = lock(&self.entries)
            .keys()
            .filter(|p| forget(p))
            .cloned()
            .collect();
        gone.into_iter().filter(|p| self.forget(p)).collect()
    }

    /// Marks the files whose last bytes were refused as unpinned to be read again at their
    /// next lookup (the lock changed; a build still serving keeps serving until then);
    /// returns how many.
    pub(crate) fn retry_unpinned(&self) -> usize {
        let mut entries = lock(&self.entries);
        let mut count = 0;
        for entry in entries.values_mut().filter(|e| e.unpinned) {
            (entry.hash, entry.stale, count) = (None, true, count + 1);
        }
        count
    }

    /// Drops the entry of a removed file. Running calls keep their generation.
    pub(crate) fn forget(&self, path: &Path) -> bool {
        lock(&self.loading).remove(path);
        let removed = lock(&self.entries).remove(path);
        removed.is_some() // dropped here, outside the lock (dropping an instance runs plugin code)
    }

    /// What `path` serves now, if its file did not change since it was read. A file that is
    /// gone keeps serving until its removal is confirmed with [`forget`](Self::forget): cargo
    /// deletes a library before it links the new one in place.
    fn cached(&self, path: &Path, mode: &Mode) -> Option<Arc<Loaded>> {
        let stamp = Stamp::of(path);
        let entries = lock(&self.entries);
        let entry = entries.get(path)?;
        let same_mode = match mode {
            Mode::Isolated(settings) => entry.isolated.as_ref() == Some(settings),
            Mode::InProcess => entry.isolated.is_none(),
        };
        (same_mode && !entry.stale && (stamp.is_none() || Some(entry.stamp) == stamp))
            .then(|| entry.current.clone())
    }

    /// What `path` serves now without reading it, if its file did not change since it was read
    /// and it was loaded as `mode` says.
    pub(crate) fn peek(&self, path: &Path, mode: Mode) -> Option<Arc<Loaded>> {
        self.cached(path, &mode)
    }

    /// The hash of the bytes of `path` last read, and whether they failed to load.
    pub(crate) fn last_read(&self, path: &Path) -> Option<(u128, bool)> {
        let entries = lock(&self.entries);
        let entry = entries.get(path)?;
        Some((entry.hash?, entry.failing))
    }

    /// The pin check of the library at `path` whose bytes have SHA-256 `sha256` (hex): `None`
    /// when there is no check; the error is its "skipped" reason.
    pub(crate) fn pin_check(&self, path: &Path, sha256: &str) -> Option<Result<(), String>> {
        let pins = self.pins.as_ref()?;
        Some(pins.check_pin(path, &format!("sha256:{sha256}")))
    }

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
    fn read_and_load(
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
    fn instantiate(
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
    fn replace(&self, path: &Path, entry: Entry, had_entry: bool) {
        let mut entries = lock(&self.entries);
        if forgotten(&entries, path, had_entry) {
            return;
        }
        let replaced = entries.insert(path.to_owned(), entry);
        drop(entries);
        drop(replaced);
    }

    /// Records a failed load: the previous generation keeps serving if there is one.
    fn failed(
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

    fn count_generation(&self) {
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
