//! The host: finds libraries along a profile's layers, loads each once per content, and caches what wins.

use std::collections::{BTreeMap, HashSet};

use rustc_hash::FxHashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, RwLock};
use std::time::Duration;

use crate::error::{HostError, LoadError};
use crate::layers::{layers_for, Layer};
use crate::libraries::{Libraries, Loaded};
use crate::name::is_safe_name;
use crate::plugin::{ExtensionHandle, ToolHandle};
use crate::reload::ReloadEvent;
use crate::secrets::Secrets;
use crate::ToolInfo;

/// The file extension of native libraries on this platform (`so`, `dylib`, `dll`).
pub const LIBRARY_EXTENSION: &str = std::env::consts::DLL_EXTENSION;

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

/// One row of [`Host::list`].
#[derive(Clone)]
pub struct ToolListing {
    /// The tool's name (its file name).
    pub name: String,
    /// The winner.
    pub found: FoundTool,
    /// Files of the same name in later layers that the winner hides.
    pub shadows: Vec<PathBuf>,
}

/// Everything a profile sees: the tools that win, and the files that were skipped.
#[derive(Clone, Default)]
pub struct Listing {
    /// Tools sorted by name.
    pub tools: Vec<ToolListing>,
    /// Tool and extension files that failed to load, with the reason.
    pub skipped: Vec<LoadError>,
}

/// Settings of a [`Host`].
///
/// ```
/// use std::time::Duration;
/// let options = toolhost::HostOptions::default()
///     .with_debounce(Duration::from_millis(20))
///     .with_warn_generations(100);
/// assert_eq!(options.debounce, Duration::from_millis(20));
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HostOptions {
    /// How long a changed file must stay quiet before the watcher reads it. Default 40 ms.
    pub debounce: Duration,
    /// A warning is logged each time this many more library generations have been loaded
    /// (libraries are never unmapped, so each keeps memory). Default 32.
    pub warn_generations: usize,
}

impl Default for HostOptions {
    fn default() -> Self {
        Self {
            debounce: Duration::from_millis(40),
            warn_generations: 32,
        }
    }
}

impl HostOptions {
    /// Sets [`debounce`](Self::debounce).
    pub fn with_debounce(mut self, debounce: Duration) -> Self {
        self.debounce = debounce;
        self
    }

    /// Sets [`warn_generations`](Self::warn_generations).
    pub fn with_warn_generations(mut self, every: usize) -> Self {
        self.warn_generations = every;
        self
    }
}

/// Library generations of a host (see [`Host::generations`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Generations {
    /// Loaded so far. Libraries are never unmapped, so each keeps memory until the process ends.
    pub loaded: u64,
    /// Still held by the caches or by a running call; the others have been shut down.
    pub live: usize,
}

type PerProfile<T> = RwLock<FxHashMap<String, FxHashMap<String, Arc<T>>>>;

/// The plugin host for one root folder.
///
/// A root holds `core/`, `plugins/` and `usr/` (see [`layers_for`]). The host loads each
/// library file from a private copy, again only when its bytes change, and caches, per profile,
/// which file wins for each tool name and which extensions run at each point.
///
/// ```no_run
/// use std::sync::Arc;
/// use toolhost::{Agent, Host};
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let host = Arc::new(Host::new(".")?);
/// let agent = Agent::new(host.clone(), "A0", "example")?;
/// let response = agent
///     .call_tool("greet", serde_json::json!({"name": "Ada"}))
///     .await
///     .map_err(|e| e.to_string())?;
/// println!("{}", response.message);
/// # Ok(()) }
/// ```
pub struct Host {
    root: PathBuf,
    libraries: Libraries,
    options: HostOptions,
    /// Bumped whenever files change: a lookup that a change overtook is not cached.
    epoch: AtomicU64,
    secrets: RwLock<Arc<Secrets>>,
    has_secrets: AtomicBool,
    layers: RwLock<FxHashMap<String, Arc<[Layer]>>>,
    tools: PerProfile<Resolution>,
    extensions: PerProfile<[Arc<ExtensionHandle>]>,
}

impl Host {
    /// A host for the root folder `root`.
    pub fn new(root: impl Into<PathBuf>) -> Result<Self, HostError> {
        Self::with_options(root, HostOptions::default())
    }

    /// A host for the root folder `root`, with `options`.
    pub fn with_options(root: impl Into<PathBuf>, options: HostOptions) -> Result<Self, HostError> {
        let root = root.into();
        if !root.is_dir() {
            return Err(HostError::MissingRoot(root));
        }
        let secrets = load_secrets(&root);
        Ok(Self {
            has_secrets: AtomicBool::new(!secrets.is_empty()),
            secrets: RwLock::new(Arc::new(secrets)),
            root,
            libraries: Libraries::new(options.warn_generations)?,
            options,
            epoch: AtomicU64::new(0),
            layers: RwLock::default(),
            tools: RwLock::default(),
            extensions: RwLock::default(),
        })
    }

    /// The root folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The secrets (`usr/secrets.env`), as loaded at start or by the last
    /// [`reload_secrets`](Self::reload_secrets).
    pub fn secrets(&self) -> Arc<Secrets> {
        read(&self.secrets).clone()
    }

    /// The secrets, if any are set: each step of a call masks through this, and without
    /// secrets it costs one atomic load instead of a lock and a reference count.
    pub(crate) fn active_secrets(&self) -> Option<Arc<Secrets>> {
        self.has_secrets
            .load(Ordering::Acquire)
            .then(|| self.secrets())
    }

    /// Reads `usr/secrets.env` again (a bad file keeps the previous secrets and logs why).
    pub fn reload_secrets(&self) {
        match Secrets::load(&self.root.join("usr/secrets.env")) {
            Ok(secrets) => self.set_secrets(secrets),
            Err(e) => tracing::warn!("{e}; keeping the secrets loaded before"),
        }
    }

    /// Replaces the secrets (for embedding hosts and tests).
    pub fn set_secrets(&self, secrets: Secrets) {
        let mut current = write(&self.secrets);
        self.has_secrets
            .store(!secrets.is_empty(), Ordering::Release);
        *current = Arc::new(secrets);
    }

    /// The host's settings.
    pub fn options(&self) -> &HostOptions {
        &self.options
    }

    /// Every [`ReloadEvent`] from now on: libraries loaded (new or rebuilt) or failing, files
    /// removed, prompts and folders changed. Dropping the receiver unsubscribes.
    pub fn subscribe(&self) -> mpsc::Receiver<ReloadEvent> {
        self.libraries.subscribe()
    }

    pub(crate) fn emit(&self, event: ReloadEvent) {
        self.libraries.emit(event);
    }

    /// How many library generations were loaded, and how many are still in use.
    pub fn generations(&self) -> Generations {
        let (loaded, live) = self.libraries.generations();
        Generations { loaded, live }
    }

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
    pub fn files_changed(&self, paths: &[PathBuf]) {
        self.epoch.fetch_add(1, Ordering::SeqCst);
        let secrets_file = self.root.join("usr").join("secrets.env");
        for path in paths {
            if *path == secrets_file {
                self.reload_secrets();
                continue;
            }
            match classify(path) {
                FileRole::Tool { layer, name } => {
                    self.reread(path, layer, None);
                    for profile in self.profiles_using(&self.tools, layer, name) {
                        self.resolve_again(&profile, name);
                    }
                }
                FileRole::Extension { layer, point, name } => {
                    self.reread(path, layer, Some((point, name)));
                    for profile in self.profiles_using(&self.extensions, layer, point) {
                        self.extensions_again(&profile, point);
                    }
                }
                FileRole::Prompt => self
                    .libraries
                    .emit(ReloadEvent::Changed { path: path.clone() }),
                FileRole::Other => {}
            }
        }
    }

    /// Loads a changed library file again, or forgets it if it is gone.
    fn reread(&self, path: &Path, layer: &Path, extension: Option<(&str, &str)>) {
        if path.is_file() {
            // A switched-off plugin's rebuild is not loaded: nothing would call it.
            if self.libraries.contains(path) || self.layer_in_use(layer) {
                self.load(path, extension);
            }
        } else if self.libraries.forget(path) {
            self.libraries.emit(ReloadEvent::Removed {
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
        read(&self.layers)
            .values()
            .any(|layers| layers.iter().any(|l| l.dir == layer))
    }

    /// The profiles that have `key` cached and `layer` among their layers.
    fn profiles_using<T: ?Sized>(
        &self,
        cache: &PerProfile<T>,
        layer: &Path,
        key: &str,
    ) -> Vec<String> {
        let cached: Vec<String> = read(cache)
            .iter()
            .filter(|(_, entries)| entries.contains_key(key))
            .map(|(profile, _)| profile.clone())
            .collect();
        cached
            .into_iter()
            .filter(|profile| self.layers(profile).iter().any(|l| l.dir == layer))
            .collect()
    }

    /// Reads the folders again and replaces every cached lookup, so that calls never see the
    /// cache empty while files are being replaced. [`Host::watch`](crate::Host::watch) calls it
    /// when folders appear or go, or a plugin is switched on or off.
    pub fn refresh(&self) {
        self.epoch.fetch_add(1, Ordering::SeqCst);
        // A file whose folder is gone was removed (cargo's window never removes the folder).
        let gone = self
            .libraries
            .forget_if(|path| !path.exists() && path.parent().is_some_and(|dir| !dir.is_dir()));
        for path in gone {
            self.emit(ReloadEvent::Removed { path });
        }
        let profiles: Vec<String> = std::mem::take(&mut *write(&self.layers))
            .into_keys()
            .collect();
        for profile in &profiles {
            self.layers(profile);
        }
        for (profile, name) in cached_keys(&self.tools) {
            self.resolve_again(&profile, &name);
        }
        for (profile, point) in cached_keys(&self.extensions) {
            self.extensions_again(&profile, &point);
        }
        // Libraries of layers no profile uses any more (a plugin switched off) are let go; their
        // generations shut down once no call holds them.
        self.libraries.forget_if(|path| match classify(path) {
            FileRole::Tool { layer, .. } | FileRole::Extension { layer, .. } => {
                !self.layer_in_use(layer)
            }
            _ => false,
        });
    }

    /// Forgets every cached lookup and every library whose file is gone, so the next call reads
    /// the folders again. Libraries whose files did not change are not loaded again.
    pub fn invalidate(&self) {
        self.epoch.fetch_add(1, Ordering::SeqCst);
        self.libraries.forget_if(|path| !path.exists());
        // Taken out and dropped outside the locks: dropping an instance runs plugin code.
        let layers = std::mem::take(&mut *write(&self.layers));
        let tools = std::mem::take(&mut *write(&self.tools));
        let extensions = std::mem::take(&mut *write(&self.extensions));
        drop((layers, tools, extensions));
    }

    /// The profile's layers, most specific first.
    pub fn layers(&self, profile: &str) -> Arc<[Layer]> {
        if let Some(layers) = read(&self.layers).get(profile) {
            return layers.clone();
        }
        let epoch = self.epoch.load(Ordering::SeqCst);
        let layers: Arc<[Layer]> = layers_for(&self.root, profile).into();
        let mut cache = write(&self.layers);
        // Folders that changed meanwhile may have made this list stale: then it is not kept.
        if self.epoch.load(Ordering::SeqCst) == epoch {
            cache.insert(profile.to_owned(), layers.clone());
        }
        layers
    }

    /// Finds the tool `name` for `profile`: the first layer with a loadable `tools/<name>` library.
    /// `name` must already be checked ([`ToolName`](crate::ToolName)).
    pub fn resolve(&self, profile: &str, name: &str) -> Arc<Resolution> {
        if let Some(r) = read(&self.tools).get(profile).and_then(|m| m.get(name)) {
            return r.clone();
        }
        self.resolve_again(profile, name)
    }

    /// Looks `name` up along the layers and caches the outcome, replacing what was cached.
    fn resolve_again(&self, profile: &str, name: &str) -> Arc<Resolution> {
        let epoch = self.epoch.load(Ordering::SeqCst);
        let mut skipped = Vec::new();
        let mut found = None;
        for layer in self.layers(profile).iter() {
            let path = layer
                .dir
                .join("tools")
                .join(format!("{name}.{LIBRARY_EXTENSION}"));
            // A file being replaced may be missing for a moment: it serves until the watcher
            // confirms that it was removed.
            if !path.is_file() && !self.libraries.contains(&path) {
                continue;
            }
            match &*self.load(&path, None) {
                Loaded::Tool(handle) => {
                    found = Some(FoundTool {
                        handle: handle.clone(),
                        layer: layer.clone(),
                        path,
                    });
                    break;
                }
                Loaded::Failed(e) => skipped.push(e.clone()),
                Loaded::Extension(_) => unreachable!("loaded as a tool"),
            }
        }
        let resolution = Arc::new(Resolution { found, skipped });
        // Misses are not cached: a name the model invents must not grow the cache, and a tool
        // dropped in later is found at the next call. Nor is a file caught mid-write, nor a
        // lookup that a change overtook (files changed while it ran).
        let settled = !resolution
            .skipped
            .iter()
            .any(|e| e.kind == crate::LoadErrorKind::Changing);
        let mut tools = write(&self.tools);
        let current = self.epoch.load(Ordering::SeqCst) == epoch;
        let replaced =
            if current && settled && (resolution.found.is_some() || !resolution.skipped.is_empty())
            {
                tools
                    .entry(profile.to_owned())
                    .or_default()
                    .insert(name.to_owned(), resolution.clone())
            } else {
                tools.get_mut(profile).and_then(|names| names.remove(name))
            };
        drop(tools);
        drop(replaced); // outside the lock: dropping an instance runs plugin code
        resolution
    }

    /// The extensions that run at `point` for `profile`, in order: every layer's
    /// `extensions/<point>/` merged by file name (first occurrence wins), sorted by file name.
    pub fn extensions(&self, profile: &str, point: &str) -> Arc<[Arc<ExtensionHandle>]> {
        if let Some(list) = read(&self.extensions)
            .get(profile)
            .and_then(|m| m.get(point))
        {
            return list.clone();
        }
        self.extensions_again(profile, point)
    }

    /// Reads the extensions of `point` from the layers and caches them, replacing the old list.
    fn extensions_again(&self, profile: &str, point: &str) -> Arc<[Arc<ExtensionHandle>]> {
        let epoch = self.epoch.load(Ordering::SeqCst);
        let list: Arc<[Arc<ExtensionHandle>]> = self
            .extension_files(profile, point)
            .iter()
            .filter_map(
                |(stem, path)| match &*self.load(path, Some((point, stem))) {
                    Loaded::Extension(handle) => Some(handle.clone()),
                    _ => None,
                },
            )
            .collect();
        let mut extensions = write(&self.extensions);
        let replaced = if self.epoch.load(Ordering::SeqCst) == epoch {
            extensions
                .entry(profile.to_owned())
                .or_default()
                .insert(point.to_owned(), list.clone())
        } else {
            extensions
                .get_mut(profile)
                .and_then(|points| points.remove(point))
        };
        drop(extensions);
        drop(replaced); // outside the lock
        list
    }

    /// The extension files of `point` that win, by file name (first occurrence across layers).
    fn extension_files(&self, profile: &str, point: &str) -> BTreeMap<String, PathBuf> {
        let mut winners: BTreeMap<String, PathBuf> = BTreeMap::new();
        for layer in self.layers(profile).iter() {
            for (stem, path) in self.served_files(&layer.dir.join("extensions").join(point)) {
                winners.entry(stem).or_insert(path);
            }
        }
        winners
    }

    /// The library files in `dir`, plus those that are missing for a moment but still serve
    /// (a file being replaced serves until the watcher confirms its removal).
    fn served_files(&self, dir: &Path) -> Vec<(String, PathBuf)> {
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

    /// The extension files of `point` that were skipped because they failed to load.
    pub fn skipped_extensions(&self, profile: &str, point: &str) -> Vec<LoadError> {
        self.extension_files(profile, point)
            .iter()
            .filter_map(
                |(stem, path)| match &*self.load(path, Some((point, stem))) {
                    Loaded::Failed(e) => Some(e.clone()),
                    _ => None,
                },
            )
            .collect()
    }

    /// The extension points that have a folder in any of the profile's layers, sorted.
    pub fn extension_points(&self, profile: &str) -> Vec<String> {
        let mut points = std::collections::BTreeSet::new();
        for layer in self.layers(profile).iter() {
            let Ok(entries) = fs::read_dir(layer.dir.join("extensions")) else {
                continue;
            };
            for entry in entries.filter_map(Result::ok) {
                let is_dir = entry.file_type().map(|t| t.is_dir()).unwrap_or(false);
                match entry.file_name().into_string() {
                    Ok(point) if is_dir && is_safe_name(&point) => {
                        points.insert(point);
                    }
                    _ => {}
                }
            }
        }
        points.into_iter().collect()
    }

    /// Every tool the profile sees, with the winning layer and what it shadows; `skipped` also
    /// holds the extension files that failed to load.
    pub fn list(&self, profile: &str) -> Listing {
        let layers = self.layers(profile);
        let mut candidates: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
        for layer in layers.iter() {
            for (stem, path) in self.served_files(&layer.dir.join("tools")) {
                candidates.entry(stem).or_default().push(path);
            }
        }
        let candidates: Vec<(String, Vec<PathBuf>)> = candidates.into_iter().collect();
        let resolutions = self.resolve_all(profile, candidates.iter().map(|(n, _)| n.as_str()));
        let mut listing = Listing::default();
        for ((name, paths), resolution) in candidates.into_iter().zip(resolutions) {
            listing.skipped.extend(resolution.skipped.iter().cloned());
            if let Some(found) = resolution.found.clone() {
                let shadows = paths
                    .into_iter()
                    .skip_while(|p| *p != found.path)
                    .skip(1)
                    .collect();
                listing.tools.push(ToolListing {
                    name,
                    found,
                    shadows,
                });
            }
        }
        for point in self.extension_points(profile) {
            listing
                .skipped
                .extend(self.skipped_extensions(profile, &point));
        }
        listing
    }

    /// Resolves many names, loading libraries on as many threads as there are cores (copying
    /// and checking a library dominate a cold `list`). Results are in the order of `names`.
    fn resolve_all<'a>(
        &self,
        profile: &str,
        names: impl Iterator<Item = &'a str>,
    ) -> Vec<Arc<Resolution>> {
        let names: Vec<&str> = names.collect();
        let cached: Option<Vec<Arc<Resolution>>> = {
            let tools = read(&self.tools);
            let profile_tools = tools.get(profile);
            names
                .iter()
                .map(|n| profile_tools.and_then(|m| m.get(*n)).cloned())
                .collect()
        };
        if let Some(all) = cached {
            return all; // nothing to load: no threads to start
        }
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(names.len());
        if threads <= 1 {
            return names.iter().map(|n| self.resolve(profile, n)).collect();
        }
        let next = std::sync::atomic::AtomicUsize::new(0);
        let mut results: Vec<(usize, Arc<Resolution>)> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..threads)
                .map(|_| {
                    scope.spawn(|| {
                        let mut done = Vec::new();
                        loop {
                            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            let Some(name) = names.get(i) else { break done };
                            done.push((i, self.resolve(profile, name)));
                        }
                    })
                })
                .collect();
            workers
                .into_iter()
                .flat_map(|w| w.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        });
        results.sort_by_key(|(i, _)| *i);
        results.into_iter().map(|(_, r)| r).collect()
    }

    /// The prompt fragments `prompts/agent.system.tool.<name>.md` of every layer, merged by file
    /// name (first occurrence wins) and sorted by file name: `(file name, text)`.
    pub fn prompt_fragments(&self, profile: &str) -> Vec<(String, String)> {
        self.fragments(profile, |file| file.starts_with("agent.system.tool."))
    }

    /// The parts of the system prompt, in order: the `prompts/agent.system.*.md` fragments
    /// other than the tools' (merged by file name, first occurrence wins, sorted by file name),
    /// then the tools section ([`tools_prompt`](Self::tools_prompt)).
    pub fn system_prompt_parts(&self, profile: &str) -> Vec<String> {
        let mut parts: Vec<String> = self
            .fragments(profile, |file| {
                file.starts_with("agent.system.") && !file.starts_with("agent.system.tool.")
            })
            .into_iter()
            .map(|(_, text)| text.trim().to_owned())
            .collect();
        parts.push(self.tools_prompt(profile).trim().to_owned());
        parts
    }

    /// The `prompts/*.md` files that `pick` accepts, merged by file name across the layers.
    fn fragments(&self, profile: &str, pick: impl Fn(&str) -> bool) -> Vec<(String, String)> {
        let mut winners: BTreeMap<String, PathBuf> = BTreeMap::new();
        for layer in self.layers(profile).iter() {
            let Ok(entries) = fs::read_dir(layer.dir.join("prompts")) else {
                continue;
            };
            for entry in entries.filter_map(Result::ok) {
                let Ok(file) = entry.file_name().into_string() else {
                    continue;
                };
                if file.ends_with(".md") && pick(&file) {
                    winners.entry(file).or_insert_with(|| entry.path());
                }
            }
        }
        winners
            .into_iter()
            .filter_map(|(file, path)| match fs::read_to_string(&path) {
                Ok(text) => Some((file, text)),
                Err(e) => {
                    tracing::warn!("skipping prompt {}: {e}", path.display());
                    None
                }
            })
            .collect()
    }

    /// The tools section of the system prompt: every fragment, plus a generated one (from the
    /// tool's description and parameters) for each tool that has no fragment of its own.
    pub fn tools_prompt(&self, profile: &str) -> String {
        let fragments = self.prompt_fragments(profile);
        let covered: HashSet<String> = fragments
            .iter()
            .filter_map(|(file, _)| {
                file.strip_prefix("agent.system.tool.")?
                    .strip_suffix(".md")
                    .map(str::to_owned)
            })
            .collect();
        let mut parts: BTreeMap<String, String> = fragments
            .into_iter()
            .map(|(f, t)| (f, t.trim().to_owned()))
            .collect();
        for tool in self.list(profile).tools {
            if !covered.contains(&tool.name) {
                parts.insert(
                    format!("agent.system.tool.{}.md", tool.name),
                    generated_fragment(&tool.name, tool.found.handle.info()),
                );
            }
        }
        let mut prompt = String::from("## Tools available:\n");
        for text in parts.values() {
            prompt.push('\n');
            prompt.push_str(text);
            prompt.push('\n');
        }
        prompt
    }

    /// What the library at `path` serves; `extension` is `(point, name)` for extensions.
    fn load(&self, path: &Path, extension: Option<(&str, &str)>) -> Arc<Loaded> {
        self.libraries.load(path, extension)
    }
}

/// What a file under the root is to the host.
enum FileRole<'a> {
    /// `<layer>/tools/<name>.so`
    Tool {
        layer: &'a Path,
        name: &'a str,
    },
    /// `<layer>/extensions/<point>/<name>.so`
    Extension {
        layer: &'a Path,
        point: &'a str,
        name: &'a str,
    },
    /// `<layer>/prompts/<file>.md`
    Prompt,
    Other,
}

fn classify(path: &Path) -> FileRole<'_> {
    let Some(parent) = path.parent() else {
        return FileRole::Other;
    };
    let extension = path.extension().and_then(|e| e.to_str());
    if extension == Some("md") && name_of(parent) == Some("prompts") {
        return FileRole::Prompt;
    }
    let stem = path.file_stem().and_then(|s| s.to_str());
    let (Some(LIBRARY_EXTENSION), Some(name)) = (extension, stem) else {
        return FileRole::Other;
    };
    if !is_safe_name(name) {
        return FileRole::Other;
    }
    let grandparent = parent.parent();
    match (name_of(parent), grandparent) {
        (Some("tools"), Some(layer)) => FileRole::Tool { layer, name },
        (Some(point), Some(extensions)) if name_of(extensions) == Some("extensions") => {
            match extensions.parent() {
                Some(layer) => FileRole::Extension { layer, point, name },
                None => FileRole::Other,
            }
        }
        _ => FileRole::Other,
    }
}

fn load_secrets(root: &Path) -> Secrets {
    Secrets::load(&root.join("usr/secrets.env")).unwrap_or_else(|e| {
        tracing::warn!("{e}; running without secrets");
        Secrets::empty()
    })
}

fn name_of(path: &Path) -> Option<&str> {
    path.file_name()?.to_str()
}

/// `(file stem, path)` of the library files directly in `dir`, with safe names only.
fn library_files(dir: &Path) -> Vec<(String, PathBuf)> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<(String, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_type()
                .map(|t| t.is_file() || t.is_symlink())
                .unwrap_or(false)
        })
        .filter_map(|e| {
            let path = e.path();
            if path.extension()? != LIBRARY_EXTENSION {
                return None;
            }
            let stem = path.file_stem()?.to_str()?.to_owned();
            if !is_safe_name(&stem) {
                tracing::debug!(
                    "ignoring {}: not a valid tool or extension name",
                    path.display()
                );
                return None;
            }
            Some((stem, path))
        })
        .collect();
    files.sort();
    files
}

fn generated_fragment(name: &str, info: &ToolInfo) -> String {
    let mut text = format!("### {name}\n{}", info.description.trim());
    if info.parameters.get("properties").is_some() {
        text.push_str("\nArguments (JSON Schema): ");
        text.push_str(&info.parameters.to_string());
    }
    text
}

/// Every `(profile, key)` a per-profile cache holds.
fn cached_keys<T: ?Sized>(cache: &PerProfile<T>) -> Vec<(String, String)> {
    read(cache)
        .iter()
        .flat_map(|(profile, keys)| keys.keys().map(|key| (profile.clone(), key.clone())))
        .collect()
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|e| e.into_inner())
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(|e| e.into_inner())
}
