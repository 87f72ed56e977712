//! What the host does when files under its root change.

use std::path::{Path, PathBuf};

use crate::host::cache::ProfileCache;
use crate::host::reload::ReloadEvent;
use crate::host::Host;
use crate::layout::{entry_exists, FileRole};

impl Host {
    /// Tells the host that these files under its root changed: created, rewritten, renamed
    /// into place or removed. [`Host::watch`](crate::Host::watch) calls it; call it yourself
    /// if you replace files without a watcher.
    ///
    /// A library file that exists is read again at once (if it was loaded before, or its layer
    /// is one a profile uses): if its bytes changed it is loaded as a new generation, and if
    /// that fails the previous generation keeps serving. A library file that is gone is
    /// forgotten at once (the watcher waits a second quiet period before it says so). Then
    /// exactly the cached lookups the file takes part in are looked up again and replaced in
    /// place: the tool of that name, or the extensions of that point, in the profiles whose
    /// layers hold the file. Calls already running finish on the generation they started with.
    /// The [`ReloadEvent`]s are sent after that, so a call made on one runs what it reports.
    pub fn files_changed(&self, paths: &[PathBuf]) {
        // Reported once the caches serve the change (a call made on "reloaded" runs it).
        let _held = self.libraries.hold_events();
        self.epoch.bump();
        for path in paths {
            #[cfg(feature = "mcp")]
            if self.is_mcp_file(path) {
                self.mcp_files_changed();
                continue;
            }
            #[cfg(feature = "mcp")]
            if path.parent() == Some(self.layout.mcp_pins_dir().as_path()) {
                self.mcp.pins_changed(); // an approval made elsewhere (`toolhost mcp approve`)
                continue;
            }
            if *path == self.layout.pins_file() {
                // Libraries refused as unpinned may be pinned now: look them up again.
                if self.libraries.retry_unpinned() > 0 {
                    self.refresh();
                }
                continue;
            }
            match self.layout.role(path) {
                FileRole::Secrets => self.reload_secrets(),
                FileRole::Tool { layer, name } => {
                    self.reread(path, layer, name, None);
                    for profile in self.profiles_using(&self.tools, layer, name) {
                        self.resolve_again(&profile, name);
                    }
                }
                FileRole::Extension { layer, point, name } => {
                    self.reread(path, layer, name, Some((point, name)));
                    for profile in self.profiles_using(&self.extensions, layer, point) {
                        self.extensions_again(&profile, point);
                    }
                }
                FileRole::Prompt => self.emit(ReloadEvent::Changed { path: path.clone() }),
                // Read again on next use (a global file applies to every profile).
                FileRole::Config { .. } => drop(self.configs.clear()),
                FileRole::Toggle | FileRole::Other => {}
            }
        }
    }

    /// Loads a changed library file again, or forgets it if it is gone. Something that is
    /// not a library file (a folder, a FIFO, a link leading nowhere) is read too, to say why.
    fn reread(&self, path: &Path, layer: &Path, name: &str, extension: Option<(&str, &str)>) {
        if path.exists() {
            // A switched-off plugin's rebuild is not loaded: nothing would call it.
            if self.libraries.contains(path) || self.layer_in_use(layer) {
                self.load_changed(path, layer, name, extension);
            }
            return;
        }
        let forgot = self.libraries.forget(path);
        if entry_exists(path) && (forgot || self.layer_in_use(layer)) {
            self.load_changed(path, layer, name, extension); // a dangling link or a loop: its failure says so
        } else if forgot {
            self.emit(ReloadEvent::Removed {
                path: path.to_owned(),
            });
        }
    }

    /// Every library file the host has loaded or tried to load.
    pub(crate) fn loaded_files(&self) -> Vec<PathBuf> {
        self.libraries.paths()
    }

    /// Whether `layer` is among the layers of a profile the host has looked at.
    fn layer_in_use(&self, layer: &Path) -> bool {
        self.layers
            .any(|layers| layers.iter().any(|l| l.dir == layer))
    }

    /// The profiles that have `key` cached and `layer` among their layers.
    fn profiles_using<T: ?Sized>(
        &self,
        cache: &ProfileCache<T>,
        layer: &Path,
        key: &str,
    ) -> Vec<String> {
        cache
            .profiles_with(key)
            .into_iter()
            .filter(|profile| self.layers(profile).iter().any(|l| l.dir == layer))
            .collect()
    }

    /// Reads the folders again and replaces every cached lookup, so that calls never see the
    /// cache empty while files are being replaced. [`Host::watch`](crate::Host::watch) calls it
    /// when folders appear or go, or a plugin is switched on or off.
    pub fn refresh(&self) {
        let _held = self.libraries.hold_events();
        self.epoch.bump();
        // A file whose folder is gone was removed (cargo's window never removes the folder).
        let gone = self
            .libraries
            .forget_if(|path| !path.exists() && path.parent().is_some_and(|dir| !dir.is_dir()));
        for path in gone {
            self.emit(ReloadEvent::Removed { path });
        }
        let profiles = self.layers.clear();
        for profile in &profiles {
            self.layers(profile);
        }
        for (profile, name) in self.tools.keys() {
            self.resolve_again(&profile, &name);
        }
        for (profile, point) in self.extensions.keys() {
            self.extensions_again(&profile, &point);
        }
        // Libraries of layers no profile uses any more (a plugin switched off) are let go; their
        // generations shut down once no call holds them.
        self.libraries
            .forget_if(|path| match self.layout.role(path) {
                FileRole::Tool { layer, .. } | FileRole::Extension { layer, .. } => {
                    !self.layer_in_use(layer)
                }
                _ => false,
            });
    }

    /// Forgets every cached lookup and every library whose file is gone, so the next call reads
    /// the folders again. Libraries whose files did not change are not loaded again.
    pub fn invalidate(&self) {
        self.epoch.bump();
        self.libraries.forget_if(|path| !path.exists());
        self.layers.clear();
        self.tools.clear();
        self.extensions.clear();
        self.configs.clear();
    }
}
