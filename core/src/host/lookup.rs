//! Resolving a tool name, or an extension point, along a profile's layers.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::Host;
use crate::host::cache::Found;
use crate::host::libraries::{Loaded, Mode};
use crate::layout::{entry_exists, library_files, Layer};
use crate::load::error::{LoadError, LoadErrorKind};
use crate::plugin::{ExtensionHandle, ToolHandle};

/// Where a tool came from.
#[derive(Clone)]
pub struct FoundTool {
    /// The loaded tool.
    pub handle: Arc<ToolHandle>,
    /// The layer whose file won.
    pub layer: Layer,
    /// The winning file.
    pub path: PathBuf,
}

/// The outcome of looking a tool up for a profile.
#[derive(Clone)]
pub struct Resolution {
    /// The winning library, or `None` when no layer has a loadable one (the Unknown tool answers).
    pub found: Option<FoundTool>,
    /// Files of this name that were skipped because they failed to load.
    pub skipped: Vec<LoadError>,
}

impl Resolution {
    /// Worth caching: something was found or skipped, and no file was caught mid-write.
    /// Misses are not cached, so a name the model invents does not grow the cache and a tool
    /// dropped in later is found at the next call.
    fn is_settled(&self) -> bool {
        (self.found.is_some() || !self.skipped.is_empty())
            && !self
                .skipped
                .iter()
                .any(|e| e.kind == LoadErrorKind::Changing)
    }
}

impl Host {
    /// Finds the tool `name` for `profile`: the first layer with a loadable `tools/<name>` library.
    /// `name` must already be checked ([`ToolName`](crate::ToolName)).
    pub fn resolve(&self, profile: &str, name: &str) -> Arc<Resolution> {
        match self.tools.get(profile, name) {
            Some(resolution) => resolution,
            None => self.resolve_again(profile, name),
        }
    }

    /// Looks `name` up along the layers and caches the outcome, replacing what was cached.
    pub(super) fn resolve_again(&self, profile: &str, name: &str) -> Arc<Resolution> {
        let ticket = self.epoch.ticket();
        let mut skipped = Vec::new();
        let mut found = None;
        for layer in self.layers(profile).iter() {
            let path = layer.tool_file(name);
            // A file being replaced may be missing for a moment: it serves until the watcher
            // confirms that it was removed. Anything else there (a folder, a FIFO, a dangling
            // link) is read, to say why it cannot be used.
            if !entry_exists(&path) && !self.libraries.contains(&path) {
                continue;
            }
            let mode = self.tool_mode(profile, layer, name);
            match &*self.libraries.load(&path, None, mode) {
                Loaded::Tool(handle) => {
                    let (handle, layer) = (handle.clone(), layer.clone());
                    found = Some(FoundTool {
                        handle,
                        layer,
                        path,
                    });
                    break;
                }
                Loaded::Failed(e) => skipped.push(e.clone()),
                Loaded::Extension(_) => unreachable!("loaded as a tool"),
            }
        }
        let resolution = Arc::new(Resolution { found, skipped });
        let keep = match resolution.is_settled() {
            true => Found::Keep(resolution.clone()),
            false => Found::Forget,
        };
        self.tools.settle(&self.epoch, ticket, profile, name, keep);
        resolution
    }

    /// The extensions that run at `point` for `profile`, in order: every layer's
    /// `extensions/<point>/` merged by file name (first occurrence wins), sorted by file name.
    pub fn extensions(&self, profile: &str, point: &str) -> Arc<[Arc<ExtensionHandle>]> {
        match self.extensions.get(profile, point) {
            Some(list) => list,
            None => self.extensions_again(profile, point),
        }
    }

    /// Reads the extensions of `point` from the layers and caches them, replacing the old list.
    pub(super) fn extensions_again(
        &self,
        profile: &str,
        point: &str,
    ) -> Arc<[Arc<ExtensionHandle>]> {
        let ticket = self.epoch.ticket();
        let list: Arc<[Arc<ExtensionHandle>]> = self
            .extension_files(profile, point)
            .iter()
            .filter_map(|(stem, (path, layer))| {
                let mode = self.extension_mode(profile, layer);
                match &*self.libraries.load(path, Some((point, stem)), mode) {
                    Loaded::Extension(handle) => Some(handle.clone()),
                    _ => None,
                }
            })
            .collect();
        let keep = Found::Keep(list.clone());
        self.extensions
            .settle(&self.epoch, ticket, profile, point, keep);
        list
    }

    /// The extension files of `point` that were skipped because they failed to load.
    pub fn skipped_extensions(&self, profile: &str, point: &str) -> Vec<LoadError> {
        self.extension_files(profile, point)
            .iter()
            .filter_map(|(stem, (path, layer))| {
                let mode = self.extension_mode(profile, layer);
                match &*self.libraries.load(path, Some((point, stem)), mode) {
                    Loaded::Failed(e) => Some(e.clone()),
                    _ => None,
                }
            })
            .collect()
    }

    /// The extension points that have a folder in any of the profile's layers, sorted.
    pub fn extension_points(&self, profile: &str) -> Vec<String> {
        crate::layout::extension_points(&self.layers(profile))
    }

    /// The extension files of `point` that win, by file name (first occurrence across
    /// layers), with their layers.
    pub(super) fn extension_files(
        &self,
        profile: &str,
        point: &str,
    ) -> BTreeMap<String, (PathBuf, Layer)> {
        let mut winners: BTreeMap<String, (PathBuf, Layer)> = BTreeMap::new();
        for layer in self.layers(profile).iter() {
            for (stem, path) in self.served_files(&layer.point_dir(point)) {
                winners.entry(stem).or_insert_with(|| (path, layer.clone()));
            }
        }
        winners
    }

    /// The library files in `dir`, plus those that are missing for a moment but still serve
    /// (a file being replaced serves until the watcher confirms its removal).
    pub(super) fn served_files(&self, dir: &Path) -> Vec<(String, PathBuf)> {
        let mut files = library_files(dir);
        for path in self.libraries.paths_in(dir) {
            if !files.iter().any(|(_, p)| *p == path) {
                if let Some(stem) = path.file_stem().and_then(|s| s.to_str()) {
                    files.push((stem.to_owned(), path.clone()));
                }
            }
        }
        files.sort();
        files
    }

    /// What the changed library at `path` (in the layer folder `layer`) serves; `extension`
    /// is `(point, name)` for extensions, else the file is the tool `name`. It is loaded where
    /// the profiles whose layers hold it run it ([`changed_mode`](Self::changed_mode)): a file
    /// that appears while the host runs is never loaded in this process when it is to be
    /// isolated.
    pub(super) fn load_changed(
        &self,
        path: &Path,
        layer: &Path,
        name: &str,
        extension: Option<(&str, &str)>,
    ) -> Arc<Loaded> {
        let mode = self.changed_mode(layer, name, extension.is_some());
        self.libraries.load(path, extension, mode)
    }

    /// Where a changed file of the layer folder `layer` runs: isolated if any profile the host
    /// has looked at, whose layers hold that folder, isolates it (the strictest wins, since
    /// one file serves them all), or if [`HostOptions::isolate_all`](crate::HostOptions::isolate_all);
    /// in this process only if none does.
    fn changed_mode(&self, layer: &Path, name: &str, extension: bool) -> Mode {
        let mut profiles: Vec<String> = self.layers.keys().into_iter().map(|(p, _)| p).collect();
        if profiles.is_empty() {
            profiles.push("default".to_owned());
        }
        let mut isolated = None;
        for profile in &profiles {
            let layers = self.layers(profile);
            let Some(found) = layers.iter().find(|l| l.dir == layer) else {
                continue;
            };
            let mode = match extension {
                true => self.extension_mode(profile, found),
                false => self.tool_mode(profile, found, name),
            };
            if let Mode::Isolated(_) = mode {
                isolated.get_or_insert(mode);
            }
        }
        match isolated {
            Some(mode) => mode,
            None if self.options.isolate_all => {
                let layers = self.layers(&profiles[0]);
                let found = layers.iter().find(|l| l.dir == layer);
                let tool = (!extension).then_some(name);
                match (self.config(&profiles[0]), found) {
                    (Ok(config), Some(found)) => self.isolated(&config, tool, found),
                    _ => Mode::Isolated(self.fail_closed()),
                }
            }
            None => Mode::InProcess,
        }
    }

    /// Where the tool `name` of `layer` runs for `profile`: in a worker process if
    /// [`HostOptions::isolate_all`](crate::HostOptions::isolate_all) or the profile's `isolate`
    /// says so. It fails closed: a profile whose config has a mistake (which hides what its
    /// `isolate` says) runs it in a worker with the default limits.
    ///
    /// A tool of a package installed with `toolhost add` (`usr/plugins/<name>/`, recorded in
    /// `usr/packages.lock`) runs in a worker too, unless `[packages] isolate = false`. An
    /// isolated tool runs sandboxed unless `[tools.<name>] sandbox = "off"`
    /// ([`Config::sandbox`](crate::config::Config::sandbox)).
    pub(super) fn tool_mode(&self, profile: &str, layer: &Layer, name: &str) -> Mode {
        self.mode(profile, Some(name), layer)
    }

    /// Where an extension of `layer` runs for `profile` (as [`tool_mode`](Self::tool_mode)).
    pub(super) fn extension_mode(&self, profile: &str, layer: &Layer) -> Mode {
        self.mode(profile, None, layer)
    }

    fn mode(&self, profile: &str, tool: Option<&str>, layer: &Layer) -> Mode {
        let config = match self.config(profile) {
            Ok(config) => config,
            Err(_) => return Mode::Isolated(self.fail_closed()),
        };
        let isolates = match tool {
            Some(name) => config.isolated(name, layer),
            None => config.isolated_extension(layer),
        };
        let package = || config.isolate_packages() && self.installed_package(layer);
        match self.options.isolate_all || isolates || package() {
            true => self.isolated(&config, tool, layer),
            false => Mode::InProcess,
        }
    }

    /// Isolated, with the sandbox `config` gives the tool (or extension) of `layer`, completed
    /// with what the host knows: the plugin folder it reads, the layer folders it never writes.
    fn isolated(&self, config: &crate::config::Config, tool: Option<&str>, layer: &Layer) -> Mode {
        let mut settings = config.isolation_of(tool, layer);
        // What the user accepted when `toolhost add` installed the package: the secrets its
        // manifest declares, shown with the other grants.
        let accepted = self.package_secrets(layer);
        if let Some(policy) = settings.sandbox.take() {
            let mut policy = Arc::unwrap_or_clone(policy);
            policy.reads.extend(self.plugin_dir(layer));
            policy.protected = self.protected_dirs();
            for key in &accepted {
                let grant = crate::config::Capability::Secret(key.clone());
                let from = "its package's manifest, accepted at toolhost add".to_owned();
                policy.grants.push((grant, from));
            }
            settings.sandbox = Some(Arc::new(policy));
        }
        for key in accepted {
            if !settings.secrets.contains(&key) {
                settings.secrets.push(key);
            }
        }
        Mode::Isolated(settings)
    }

    /// A configuration with a mistake hides what it says: its tools run isolated and
    /// sandboxed, with the default limits and nothing granted.
    fn fail_closed(&self) -> crate::IsolationSettings {
        use crate::config::sandbox_defaults as default;
        crate::IsolationSettings {
            sandbox: Some(Arc::new(crate::config::SandboxPolicy {
                protected: self.protected_dirs(),
                ..Default::default()
            })),
            memory_mb: Some(default::MEMORY_MB),
            cpu_seconds: Some(default::CPU_SECONDS),
            tasks: Some(default::TASKS),
            ..Default::default()
        }
    }

    /// The secrets the manifest of the installed package of `layer` declares (none for a
    /// layer that is not an installed package's, or whose manifest cannot be read).
    fn package_secrets(&self, layer: &Layer) -> Vec<String> {
        if !self.installed_package(layer) {
            return Vec::new();
        }
        let Some(dir) = self.plugin_dir(layer) else {
            return Vec::new();
        };
        match crate::package::Manifest::read(&dir.join(crate::package::MANIFEST_FILE_NAME)) {
            Ok(manifest) => manifest.secrets,
            Err(_) => Vec::new(),
        }
    }

    /// The folders no sandboxed tool may write: the root's layer folders.
    fn protected_dirs(&self) -> Vec<PathBuf> {
        let root = self.layout.root();
        ["usr", "plugins", "core"]
            .iter()
            .map(|d| root.join(d))
            .collect()
    }

    /// The plugin folder of `layer` (`plugins/web` for `plugins/web/agents/dev`), if it is a
    /// plugin's.
    fn plugin_dir(&self, layer: &Layer) -> Option<PathBuf> {
        let label = layer.label.as_str();
        let (parent, rest) = match label.strip_prefix("usr/plugins/") {
            Some(rest) => ("usr/plugins", rest),
            None => ("plugins", label.strip_prefix("plugins/")?),
        };
        let folder = rest.split('/').next()?;
        Some(self.layout.root().join(parent).join(folder))
    }

    /// Whether `layer` belongs to a package that `toolhost add` installed (its name is in
    /// `usr/packages.lock`).
    fn installed_package(&self, layer: &Layer) -> bool {
        let Some(rest) = layer.label.strip_prefix("usr/plugins/") else {
            return false;
        };
        let name = rest.split('/').next().unwrap_or(rest);
        let lock = crate::package::install::packages_lock_file(&self.layout);
        match crate::package::PackageLock::read(&lock) {
            Ok(lock) => lock.packages.contains_key(name),
            // A lock that cannot be read: whether it lists the package is unknown, so the
            // package is taken as installed (isolated and sandboxed).
            Err(_) => true,
        }
    }
}
