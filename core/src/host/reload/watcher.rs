//! Live reload: watches every folder of every layer and tells the host what changed.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use notify_debouncer_mini::notify::RecursiveMode;
use notify_debouncer_mini::{
    new_debouncer_opt, Config, DebounceEventResult, DebouncedEventKind, Debouncer,
};

use super::writes_only::WriteWatcher;

use crate::config::numbers::later;
use crate::host::error::HostError;
use crate::host::reload::ReloadEvent;
use crate::host::Host;
use crate::layout::{
    nearest_existing, watched_files, Escaped, FileRole, Layout, LIBRARY_EXTENSION,
};
use crate::load::image::Stamp;

/// Keeps a [`Host`] up to date with its folders while it lives; stops watching when dropped.
///
/// Made by [`Host::watch`]. It watches, without recursing into anything else (such as a
/// `target/` folder), the root, `usr/`, `plugins/`, `core/`, every plugin folder, every
/// `agents/` folder and every layer's `tools/`, `extensions/<point>/` and `prompts/` folder,
/// plus the parent of each one that does not exist yet, so folders created later are picked
/// up. A library that is a symbolic link (for example to `target/debug/libmy_tool.so`) is
/// followed: the folder of its target is watched too, so `cargo build` alone reloads it.
///
/// Events are debounced per file ([`HostOptions::debounce`](crate::HostOptions::debounce)),
/// so a file is read once its writer has gone quiet: cargo's delete, link and rename, or an
/// editor's atomic save, is one change. Each change goes to [`Host::files_changed`].
pub struct Watcher {
    stop: mpsc::Sender<Message>,
    thread: Option<JoinHandle<()>>,
}

enum Message {
    Events(DebounceEventResult),
    Stop,
}

impl Host {
    /// Starts watching this host's folders; see [`Watcher`]. When this returns, every folder
    /// is watched: a change made afterwards is picked up. (If the OS drops events, its queue
    /// being full, the watcher looks at every folder and loaded file again.)
    ///
    /// ```no_run
    /// use std::sync::Arc;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let host = Arc::new(toolhost::Host::new(".")?);
    /// let reloads = host.subscribe();
    /// let _watcher = host.watch()?;
    /// for event in reloads {
    ///     println!("{event}"); // "reloaded usr/tools/hello.so: 0.1.0 (generation 1) -> ..."
    /// }
    /// # Ok(()) }
    /// ```
    pub fn watch(self: &Arc<Self>) -> Result<Watcher, HostError> {
        let (tx, rx) = mpsc::channel();
        let events = tx.clone();
        let config = Config::default()
            .with_timeout(crate::config::numbers::capped(self.options().debounce))
            .with_batch_mode(false);
        let debouncer =
            new_debouncer_opt::<_, WriteWatcher>(config, move |result: DebounceEventResult| {
                let _ = events.send(Message::Events(result));
            })
            .map_err(|e| {
                HostError::Watch(format!(
                    "{e}; on Linux, raise fs.inotify.max_user_instances, or run without watching"
                ))
            })?;
        let mut state = WatchState {
            host: Arc::downgrade(self),
            layout: self.layout().clone(),
            debouncer,
            watched: BTreeMap::new(),
            links: BTreeMap::new(),
            pending: BTreeMap::new(),
            debounce: crate::config::numbers::capped(self.options().debounce),
            settle: self.options().settle,
            profiles: self.layout().profiles(),
        };
        state.rescan(true);
        let thread = std::thread::Builder::new()
            .name("toolhost-watcher".to_owned())
            .spawn(move || state.run(&rx))
            .map_err(|e| HostError::Watch(format!("cannot start its thread: {e}")))?;
        Ok(Watcher {
            stop: tx,
            thread: Some(thread),
        })
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        let _ = self.stop.send(Message::Stop);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// What one batch of events changed.
#[derive(Default)]
struct Changes {
    /// Files (libraries, prompts) that changed.
    files: BTreeSet<PathBuf>,
    /// Folders that appeared, went or were switched on or off.
    structure: Vec<PathBuf>,
    /// Watched folders whose watch must be made again.
    stale: Vec<PathBuf>,
}

/// What [`WatchState::rescan`] found.
struct Rescan {
    /// The files in newly watched folders.
    fresh: Vec<PathBuf>,
    /// Folders (as the host names them) no longer watched: gone, or no longer wanted.
    gone: Vec<PathBuf>,
}

struct WatchState {
    host: Weak<Host>,
    layout: Layout,
    debouncer: Debouncer<WriteWatcher>,
    /// Watched folder (as the OS names it) -> the same folder as the host names it.
    watched: BTreeMap<PathBuf, PathBuf>,
    /// Target of a library that is a symbolic link -> the links, as the host names them.
    links: BTreeMap<PathBuf, Vec<PathBuf>>,
    /// Library files to look at again -> when: one found missing, to confirm its removal;
    /// one modified less than `settle` ago, once it has settled (see [`HostOptions::settle`]).
    ///
    /// [`HostOptions::settle`]: crate::HostOptions::settle
    pending: BTreeMap<PathBuf, Instant>,
    debounce: Duration,
    settle: Duration,
    /// The profiles that have a folder, as last seen: to report those that appear or go.
    profiles: Vec<String>,
}

impl WatchState {
    fn run(mut self, rx: &mpsc::Receiver<Message>) {
        let mut warned = false;
        if let Some(host) = self.host.upgrade() {
            host.watching(true);
        }
        loop {
            let message = match self.pending.values().min() {
                Some(due) => match rx.recv_timeout(due.saturating_duration_since(Instant::now())) {
                    Ok(message) => Some(message),
                    Err(mpsc::RecvTimeoutError::Timeout) => None,
                    Err(mpsc::RecvTimeoutError::Disconnected) => break,
                },
                None => match rx.recv() {
                    Ok(message) => Some(message),
                    Err(_) => break,
                },
            };
            match message {
                Some(Message::Stop) => break,
                Some(Message::Events(Ok(events))) => {
                    let paths: Vec<PathBuf> = events
                        .into_iter()
                        // A file still being written comes again as `Any` once it is quiet.
                        .filter(|e| e.kind == DebouncedEventKind::Any)
                        .map(|e| e.path)
                        .collect();
                    self.handle(&paths);
                }
                Some(Message::Events(Err(e))) if !warned => {
                    warned = true;
                    tracing::warn!(
                        "file watching reported an error: {e}; changes may be missed (on \
                         Linux, raise fs.inotify.max_user_watches)"
                    );
                }
                Some(Message::Events(Err(e))) => tracing::debug!("file watching: {e}"),
                None => {}
            }
            // Also after events: a steady stream of them must not hold removals back.
            self.look_again();
        }
        if let Some(host) = self.host.upgrade() {
            host.watching(false);
        }
    }

    /// Library files that were still missing one more debounce period after they went are
    /// removed for good (or are back), and fresh ones have settled: tell the host.
    fn look_again(&mut self) {
        let now = Instant::now();
        let due: Vec<PathBuf> = self
            .pending
            .iter()
            .filter(|(_, due)| **due <= now)
            .map(|(path, _)| path.clone())
            .collect();
        if due.is_empty() {
            return;
        }
        for path in &due {
            self.pending.remove(path);
        }
        if let Some(host) = self.host.upgrade() {
            host.files_changed(&due);
            self.until_settled(&due);
        }
    }

    /// Schedules a second look at each library in `files` modified less than `settle` ago:
    /// one written in chunks may have failed to load, unreported, while it was incomplete.
    fn until_settled(&mut self, files: &[PathBuf]) {
        for path in files {
            let left = Stamp::of(path).and_then(|s| s.settles_in(self.settle));
            if let (Some(left), true) = (left, is_library(path)) {
                let due = later(
                    Instant::now(),
                    left.saturating_add(Duration::from_millis(1)),
                );
                self.pending.insert(path.clone(), due);
            }
        }
    }

    fn handle(&mut self, events: &[PathBuf]) {
        let Some(host) = self.host.upgrade() else {
            return;
        };
        let mut changes = Changes::default();
        for event in events {
            self.sort_event(&host, event, &mut changes);
        }
        // A folder replaced (a package's update swaps a plugin folder in one rename) takes its
        // subfolders with it: their watches are on the old ones, which may never report
        // anything again (moved aside, or removed later), so they are made again too.
        let below: Vec<PathBuf> = (self.watched.keys())
            .filter(|w| changes.stale.iter().any(|s| w.starts_with(s) && *w != s))
            .cloned()
            .collect();
        for os in changes.stale.into_iter().chain(below) {
            let _ = self.debouncer.watcher().unwatch(&os);
            self.watched.remove(&os);
        }
        // Folders may have appeared or gone, and links may point elsewhere: look again, and
        // treat what is in newly watched folders as changed (it may predate the watch).
        let found = self.rescan(false);
        changes.files.extend(found.fresh);
        // A folder can be gone before its own events come (they are debounced, and any event
        // triggers this look): once its watch is dropped, its events and those of its files
        // are not recognised any more, so its removal is reported here.
        for dir in found.gone {
            if !changes.structure.contains(&dir) {
                changes.structure.push(dir);
            }
        }
        let files = self.hold_back_removals(changes.files);
        // The layers first: the libraries of a plugin folder that just appeared (an install's
        // rename) are then in a layer in use, and are loaded and reported with the others.
        if !changes.structure.is_empty() {
            host.refresh();
        }
        host.files_changed(&files);
        self.until_settled(&files);
        if !changes.structure.is_empty() {
            for path in changes.structure {
                host.emit(ReloadEvent::Changed { path });
            }
            let profiles = self.layout.profiles();
            for name in profiles.iter().filter(|p| !self.profiles.contains(p)) {
                let name = name.clone();
                host.emit(ReloadEvent::ProfileAdded { name });
            }
            for name in self.profiles.iter().filter(|p| !profiles.contains(p)) {
                let name = name.clone();
                host.emit(ReloadEvent::ProfileRemoved { name });
            }
            self.profiles = profiles;
        }
    }

    /// Whether a new folder at `dir` can hold plugins or their folders: `usr`, `plugins` or
    /// `core` in the root; a profile, plugin or extension point folder; or a `tools`,
    /// `extensions`, `prompts`, `agents` or `plugins` folder. Never `usr/.cache`.
    fn can_hold_plugins(&self, dir: &Path) -> bool {
        let name = |p: &Path| p.file_name().and_then(|n| n.to_str()).map(str::to_owned);
        let (Some(own), Some(parent)) = (name(dir), dir.parent()) else {
            return true;
        };
        if parent == self.layout.root() {
            return matches!(own.as_str(), "usr" | "plugins" | "core");
        }
        if own == ".cache" && parent == self.layout.root().join("usr") {
            return false; // the host's own caches (checked layouts), written while it loads
        }
        if dir == self.layout.mcp_pins_dir() {
            return true; // the MCP locks: an approval made by another process
        }
        let folders = ["tools", "extensions", "prompts", "agents", "plugins"];
        folders.contains(&own.as_str())
            || name(parent)
                .is_some_and(|p| matches!(p.as_str(), "agents" | "plugins" | "extensions"))
    }

    /// Sorts one event into changed files, changed folders and watches to drop.
    fn sort_event(&self, host: &Host, event: &Path, changes: &mut Changes) {
        if event.as_os_str().is_empty() {
            // The OS dropped events (inotify's queue overflowed): look at everything.
            tracing::warn!("file events were lost; checking every plugin file again");
            changes.stale.extend(self.watched.keys().cloned());
            changes.files.extend(host.loaded_files());
            changes.structure.push(self.layout.root().to_owned());
            return;
        }
        let mut named = Vec::new();
        if let Some(links) = self.links.get(event) {
            named.extend(links.iter().cloned());
        }
        // A link target's folder is named `""`: its events count through `links` only.
        let named_dir = |p: &Path| self.watched.get(p).filter(|d| !d.as_os_str().is_empty());
        if let Some(dir) = named_dir(event) {
            // A watched folder itself changed: removed, replaced, renamed. Its watch may be
            // gone with it, so it is watched again from scratch.
            changes.structure.push(dir.clone());
            changes.stale.push(event.to_owned());
        } else if let (Some(dir), Some(file)) =
            (event.parent().and_then(named_dir), event.file_name())
        {
            named.push(dir.join(file));
        }
        for path in named {
            if path.is_dir() {
                // A new folder matters only where plugins can live (not usr/audit, usr/.cache,
                // .deps).
                if self.can_hold_plugins(&path) {
                    changes.structure.push(path);
                }
            } else if self.layout.role(&path) == FileRole::Toggle {
                changes.structure.push(path);
            } else {
                changes.files.insert(path);
            }
        }
    }

    /// The files to report now. A library that is gone may be between cargo's delete and link:
    /// it keeps serving, and its removal is confirmed one debounce period later. Unless a
    /// library appeared in the same folder in the same batch: that is a rename, and the old
    /// name goes at once.
    fn hold_back_removals(&mut self, files: BTreeSet<PathBuf>) -> Vec<PathBuf> {
        let (missing, mut files): (Vec<PathBuf>, Vec<PathBuf>) = files
            .into_iter()
            .partition(|p| is_library(p) && !p.exists());
        for path in &files {
            self.pending.remove(path);
        }
        for path in missing {
            let renamed = files
                .iter()
                .any(|f| is_library(f) && f.parent() == path.parent());
            if renamed {
                self.pending.remove(&path);
                files.push(path);
            } else {
                self.pending
                    .insert(path, later(Instant::now(), self.debounce));
            }
        }
        files
    }

    /// Brings the watches in line with the folders; returns the files of newly watched folders
    /// and the folders whose watch was dropped.
    fn rescan(&mut self, first: bool) -> Rescan {
        let targets = self.layout.watch_targets();
        let wanted: BTreeMap<PathBuf, PathBuf> = targets
            .dirs
            .into_iter()
            .filter_map(|dir| Some((fs::canonicalize(&dir).ok()?, dir)))
            .collect();
        let mut link_dirs = BTreeSet::new();
        let mut new_links = BTreeMap::<PathBuf, Vec<PathBuf>>::new();
        for (link, target) in targets.links {
            // The target's folder, or, while it does not exist (`target/debug/` before the
            // first build), the deepest folder on the way to it that does: any event there
            // makes this look again, one folder deeper each time, until the folder is there.
            if let Some(dir) = target.parent().and_then(nearest_existing) {
                link_dirs.insert(dir.to_owned());
            }
            new_links.entry(target).or_default().push(link);
        }
        let old: Vec<PathBuf> = self.watched.keys().cloned().collect();
        let mut gone = Vec::new();
        for os in old {
            if !wanted.contains_key(&os) && !link_dirs.contains(&os) {
                let _ = self.debouncer.watcher().unwatch(&os);
                // A link target's folder is named `""`: its links are looked at through `links`.
                if let Some(dir) = self
                    .watched
                    .remove(&os)
                    .filter(|d| !d.as_os_str().is_empty())
                {
                    gone.push(dir);
                }
            }
        }
        let (mut fresh, new_link_dirs) = self.watch_new(&wanted, &link_dirs, !first);
        if !first {
            for (target, links) in &new_links {
                // A new link, one pointing elsewhere, or one whose target's folder is watched
                // only now (it appeared) and whose target is there: it may predate the watch.
                let watched_now = target
                    .parent()
                    .is_some_and(|dir| new_link_dirs.contains(dir) && target.exists());
                if self.links.get(target) != Some(links) || watched_now {
                    fresh.extend(links.iter().cloned());
                }
            }
        }
        self.links = new_links;
        Rescan { fresh, gone }
    }

    /// Watches the folders in `wanted` (OS name -> host name) and `link_dirs` that are not
    /// watched yet; returns the files in the newly watched folders of `wanted` if `collect`,
    /// and the folders of `link_dirs` watched now.
    fn watch_new(
        &mut self,
        wanted: &BTreeMap<PathBuf, PathBuf>,
        link_dirs: &BTreeSet<PathBuf>,
        collect: bool,
    ) -> (Vec<PathBuf>, BTreeSet<PathBuf>) {
        let mut fresh = Vec::new();
        let watcher = self.debouncer.watcher();
        for (os, dir) in wanted {
            if self.watched.contains_key(os) {
                continue;
            }
            match watcher.watch(os, RecursiveMode::NonRecursive) {
                Ok(()) => {
                    self.watched.insert(os.clone(), dir.clone());
                }
                // Not recorded as watched: the next change anywhere tries again.
                Err(e) => tracing::warn!(
                    "cannot watch {}: {e}; its changes are missed until another folder's \
                     change makes the watcher try again (on Linux, raise \
                     fs.inotify.max_user_watches if the limit was reached)",
                    Escaped(dir)
                ),
            }
            // What is there now is loaded even if the folder could not be watched.
            if collect {
                fresh.extend(watched_files(dir));
            }
        }
        let mut new_link_dirs = BTreeSet::new();
        for os in link_dirs {
            if !self.watched.contains_key(os)
                && watcher.watch(os, RecursiveMode::NonRecursive).is_ok()
            {
                // A link target's folder: events there are mapped through `links` only.
                self.watched.insert(os.clone(), PathBuf::new());
                new_link_dirs.insert(os.clone());
            }
        }
        (fresh, new_link_dirs)
    }
}

fn is_library(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == LIBRARY_EXTENSION)
}
