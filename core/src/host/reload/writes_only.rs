//! The platform's file watcher with access events filtered out.

use std::path::{Path, PathBuf};

use notify_debouncer_mini::notify::{
    self, Event, EventHandler, RecommendedWatcher, RecursiveMode, WatcherKind,
};

/// The platform's watcher, without access events. Reading a folder or a library opens it, and
/// inotify reports every open: without this filter the watcher's own reads (or a build's reads
/// of the sources it watches) would come back to it as changes, for ever. Use it as the
/// watcher type of a debouncer: `new_debouncer_opt::<_, WriteWatcher>(config, handler)`.
pub struct WriteWatcher(RecommendedWatcher);

impl notify::Watcher for WriteWatcher {
    fn new<F: EventHandler>(mut handler: F, config: notify::Config) -> notify::Result<Self> {
        let writes_only = move |event: notify::Result<Event>| match event {
            Ok(e) if e.kind.is_access() => {}
            // Lost events carry no path, and the debouncer keys on paths: pass an empty one.
            Ok(e) if e.need_rescan() => handler
                .handle_event(Ok(
                    Event::new(notify::EventKind::Other).add_path(PathBuf::new())
                )),
            other => handler.handle_event(other),
        };
        RecommendedWatcher::new(writes_only, config).map(Self)
    }

    fn watch(&mut self, path: &Path, mode: RecursiveMode) -> notify::Result<()> {
        self.0.watch(path, mode)
    }

    fn unwatch(&mut self, path: &Path) -> notify::Result<()> {
        self.0.unwatch(path)
    }

    fn kind() -> WatcherKind {
        RecommendedWatcher::kind()
    }
}
