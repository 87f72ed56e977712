//! What a watcher must watch under a root.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use super::{subdirs, Layout, LIBRARY_EXTENSION};

impl Layout {
    /// What a watcher must watch (see [`WatchTargets`]).
    pub fn watch_targets(&self) -> WatchTargets {
        let root = &self.root;
        // `usr/mcp-tools/`: an approval made by another process.
        let mut dirs = BTreeSet::from([
            root.clone(),
            root.join("usr/plugins"),
            root.join("usr").join(super::MCP_PINS_DIR_NAME),
        ]);
        let mut layers = Vec::new();
        for base in ["usr", "plugins", "core"] {
            dirs.insert(root.join(base));
            layers.push(root.join(base));
        }
        let mut agents = vec![root.join("usr/agents"), root.join("core/agents")];
        for plugin in subdirs(&root.join("usr/plugins"))
            .into_iter()
            .chain(subdirs(&root.join("plugins")))
        {
            // Watched even when switched off, to see its `.toggle-0` go.
            dirs.insert(plugin.clone());
            agents.push(plugin.join("agents"));
            layers.push(plugin);
        }
        for dir in agents {
            layers.extend(subdirs(&dir));
            dirs.insert(dir);
        }
        let mut links = Vec::new();
        for layer in layers {
            let tools = layer.join("tools");
            let extensions = layer.join("extensions");
            let points = subdirs(&extensions);
            for folder in std::iter::once(&tools).chain(&points) {
                for file in watched_files(folder) {
                    if let Some(target) = link_target(&file) {
                        links.push((file, target));
                    }
                }
            }
            dirs.extend(points);
            dirs.extend([tools, extensions, layer.join("prompts"), layer]);
        }
        dirs.retain(|d| d.is_dir());
        WatchTargets { dirs, links }
    }
}

/// The folders to watch under a root, and the library links to follow.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WatchTargets {
    /// The root, `usr/`, `usr/mcp-tools/`, `plugins/`, `core/`, every plugin folder, every
    /// `agents/` folder and
    /// every layer's `tools/`, `extensions/<point>/` and `prompts/` folder that exists.
    pub dirs: BTreeSet<PathBuf>,
    /// `(link, its target)` for each library that is a symbolic link.
    pub links: Vec<(PathBuf, PathBuf)>,
}

/// Where the symbolic link `file` points, with the part of its path that exists resolved, even
/// if the file itself, or its folder, does not exist (yet): a link made before the first build
/// must follow that build, into a `target/debug/` that cargo creates then.
fn link_target(file: &Path) -> Option<PathBuf> {
    let dest = fs::read_link(file).ok()?;
    let dest = file.parent()?.join(dest); // an absolute `dest` replaces the folder
    let name = dest.file_name()?;
    let mut missing = Vec::new();
    let mut dir = dest.parent()?;
    loop {
        if let Ok(found) = fs::canonicalize(dir) {
            let resolved = missing.iter().rev().fold(found, |d, part| d.join(part));
            return Some(resolved.join(name));
        }
        // `..` in the missing part would be resolved against a folder that is not there yet.
        let part = dir.file_name()?;
        missing.push(part.to_owned());
        dir = dir.parent()?;
    }
}

/// The deepest folder of `dir` and its ancestors that exists: watched in place of a link
/// target's folder that does not exist yet, to see the folders on the way to it appear.
pub(crate) fn nearest_existing(dir: &Path) -> Option<&Path> {
    dir.ancestors().find(|d| d.is_dir())
}

/// The library files and prompt fragments directly in `dir`: what a watcher reports as changed
/// when it starts watching a folder.
pub(crate) fn watched_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.extension()
                .is_some_and(|e| e == LIBRARY_EXTENSION || e == "md")
        })
        .collect()
}
