//! The host's library cache: one entry per file, which keeps the last good generation serving.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use crate::host::error::HostError;
use crate::host::options::HostOptions;
use crate::host::reload::{ReloadEvent, Served};
use crate::isolation::IsolationSettings;
use crate::load::error::{LoadError, LoadErrorKind};
use crate::load::image::Stamp;
use crate::load::layout_checks::LayoutChecks;
use crate::load::loader::{LoadStats, Loader};
use crate::load::pins::Pins;
use crate::plugin::{ExtensionHandle, ToolHandle};
use crate::sync::lock;

mod loading;

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
}
