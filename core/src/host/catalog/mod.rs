//! The catalog: what `toolhost list` and the tools prompt show, without loading the libraries
//! whose bytes the metadata cache knows (see [`crate::load::metadata_cache`]).

mod file;
mod rows;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

#[cfg(feature = "mcp")]
pub use rows::ListedMcpTool;
pub use rows::{CachedTool, Catalog, CatalogMode, ListedExtension, ListedTool, ToolSource};

use super::Host;
use crate::layout::Layer;
use crate::load::error::LoadError;
use crate::plugin::ToolSandbox;
use file::Found;

/// A tool name's files along the layers, most specific first.
type Candidates = Vec<(Layer, PathBuf)>;

impl Host {
    /// What `profile` sees, as `toolhost list` shows it: the tools that win, the extensions in
    /// run order, the skipped files. A library this host already holds answers for itself; one
    /// whose bytes the metadata cache knows (and that was ready when last loaded) is not loaded;
    /// the others are loaded, and what they are is recorded in the cache.
    pub fn catalog(&self, profile: &str) -> Catalog {
        self.catalog_with(profile, CatalogMode::Cached)
    }

    /// [`catalog`](Self::catalog), learning each library as `mode` says.
    pub fn catalog_with(&self, profile: &str, mode: CatalogMode) -> Catalog {
        let load = mode == CatalogMode::Load;
        let loads = AtomicUsize::new(0);
        let names: Vec<(String, Candidates)> = self.tool_candidates(profile).into_iter().collect();
        let resolved = on_every_core(&names, |(name, files)| {
            self.catalog_tool(profile, name, files, load, &loads)
        });
        let mut catalog = Catalog::default();
        for (tool, skipped) in resolved {
            catalog.skipped.extend(skipped);
            catalog.tools.extend(tool);
        }
        #[cfg(feature = "mcp")]
        {
            catalog.mcp = self.mcp_catalog(profile, &mut catalog.tools);
        }
        for point in self.extension_points(profile) {
            let mut run = Vec::new();
            for (stem, (path, layer)) in self.extension_files(profile, &point) {
                let mode = self.extension_mode(profile, &layer);
                let ext = Some((point.as_str(), stem.as_str()));
                match self.catalog_file(&path, ext, mode, load, &loads) {
                    Found::Extension(listed) => run.push(listed),
                    Found::Skipped(error) => catalog.skipped.push(error),
                    Found::Tool(_) => {}
                }
            }
            catalog.extensions.push((point, run));
        }
        self.metadata.save();
        catalog.loads = loads.into_inner();
        tracing::debug!(
            "list: {} librar{} looked at through the loader",
            catalog.loads,
            if catalog.loads == 1 { "y" } else { "ies" }
        );
        catalog
    }

    /// Each tool name of the profile's layers, with its files along them, most specific first.
    pub(super) fn tool_candidates(&self, profile: &str) -> BTreeMap<String, Candidates> {
        let mut candidates: BTreeMap<String, Candidates> = BTreeMap::new();
        for layer in self.layers(profile).iter() {
            for (stem, path) in self.served_files(&layer.tools_dir()) {
                candidates
                    .entry(stem)
                    .or_default()
                    .push((layer.clone(), path));
            }
        }
        candidates
    }

    /// The winner among one name's files, and the files before it that were skipped.
    fn catalog_tool(
        &self,
        profile: &str,
        name: &str,
        files: &[(Layer, PathBuf)],
        load: bool,
        loads: &AtomicUsize,
    ) -> (Option<ListedTool>, Vec<LoadError>) {
        let mut skipped = Vec::new();
        for (i, (layer, path)) in files.iter().enumerate() {
            let mode = self.tool_mode(profile, layer, name);
            let (isolated, sandbox) = match &mode {
                crate::host::libraries::Mode::Isolated(settings) => (
                    true,
                    settings.sandbox.as_deref().map(ToolSandbox::configured),
                ),
                crate::host::libraries::Mode::InProcess => (false, None),
            };
            match self.catalog_file(path, None, mode, load, loads) {
                Found::Tool(source) => {
                    let listed = ListedTool {
                        name: name.to_owned(),
                        layer: layer.clone(),
                        path: path.clone(),
                        shadows: files[i + 1..].iter().map(|(_, p)| p.clone()).collect(),
                        source,
                        isolated,
                        sandbox,
                    };
                    return (Some(listed), skipped);
                }
                Found::Skipped(error) => skipped.push(error),
                Found::Extension(_) => {}
            }
        }
        (None, skipped)
    }

    #[cfg(feature = "mcp")]
    /// The profile's MCP tools; library tools of the same name move to their `shadows`.
    pub(super) fn mcp_catalog(
        &self,
        profile: &str,
        tools: &mut Vec<ListedTool>,
    ) -> Vec<ListedMcpTool> {
        let mut listed = Vec::new();
        for tool in self.mcp_tools_shown(profile) {
            let mut shadows = Vec::new();
            tools.retain(|t| {
                if t.name != tool.name() {
                    return true;
                }
                shadows.push(t.path.clone());
                shadows.extend(t.shadows.iter().cloned());
                false
            });
            listed.push(ListedMcpTool { tool, shadows });
        }
        listed
    }
}

/// `work` on every item, on as many threads as there are cores (loading a library the cache
/// does not know dominates a cold `list`). Results are in the order of `items`.
pub(super) fn on_every_core<T: Sync, R: Send>(
    items: &[T],
    work: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(items.len());
    if threads <= 1 {
        return items.iter().map(work).collect();
    }
    let next = AtomicUsize::new(0);
    let worker = || {
        let mut done = Vec::new();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(item) = items.get(i) else { break done };
            done.push((i, work(item)));
        }
    };
    let mut results: Vec<(usize, R)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads).map(|_| scope.spawn(worker)).collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    results.sort_by_key(|(i, _)| *i);
    results.into_iter().map(|(_, r)| r).collect()
}
