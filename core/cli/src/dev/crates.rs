//! Which plugin crates `toolhost dev` builds: those `toolhost new` made in the profile's user layers
//! (the crate `<layer>/tools/NAME/` beside the library `<layer>/tools/NAME.so`, and the same
//! under `extensions/<point>/`), looked for again every second, and those named on the
//! command line.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Result;
use toolhost::{Escaped, Host, Layer, LayerKind, LIBRARY_EXTENSION};

/// A plugin crate: its folder, with a Cargo.toml.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct PluginCrate {
    /// The folder, absolute with links resolved (so an event's path is matched to it).
    pub(crate) dir: PathBuf,
}

impl PluginCrate {
    /// The folder as the user sees it: relative to the host's root when under it.
    pub(crate) fn shown(&self, host: &Host) -> String {
        let root = host.root().canonicalize().unwrap_or_default();
        Escaped(self.dir.strip_prefix(&root).unwrap_or(&self.dir)).to_string()
    }
}

/// The crates named on the command line, each checked for its Cargo.toml.
pub(crate) fn named(dirs: &[PathBuf]) -> Result<Vec<PluginCrate>> {
    dirs.iter()
        .map(|given| {
            let dir = given
                .canonicalize()
                .ok()
                .filter(|d| d.join("Cargo.toml").is_file());
            match dir {
                Some(dir) => Ok(PluginCrate { dir }),
                None => crate::exit::usage!(
                    "toolhost dev {}: no Cargo.toml there (name the folder of a plugin crate)",
                    Escaped(given)
                ),
            }
        })
        .collect()
}

/// The crates of one profile's layers and the named ones.
pub(crate) struct Crates {
    host: Arc<Host>,
    profile: String,
    named: Vec<PluginCrate>,
}

impl Crates {
    pub(crate) fn new(host: Arc<Host>, profile: &str, named: Vec<PluginCrate>) -> Self {
        Self {
            host,
            profile: profile.to_owned(),
            named,
        }
    }

    pub(crate) fn host(&self) -> &Arc<Host> {
        &self.host
    }

    /// Every crate now: the named ones, then those beside a library in a layer.
    pub(crate) fn scan(&self) -> BTreeSet<PluginCrate> {
        let mut found: BTreeSet<PluginCrate> = self.named.iter().cloned().collect();
        // Only the user's layers (usr/, usr/agents/P/), where `toolhost new` makes crates: the
        // built-ins beside core/ and plugins/ libraries are the repository's workspace members,
        // built by `cargo xtask install` into its own target folder.
        for folder in self.library_folders_of(|layer| {
            matches!(layer.kind, LayerKind::User | LayerKind::Profile)
                && layer.label.starts_with("usr")
        }) {
            for library in libraries_in(&folder) {
                let Some(stem) = library.file_stem() else {
                    continue;
                };
                let dir = folder.join(stem);
                if dir.join("Cargo.toml").is_file() {
                    if let Ok(dir) = dir.canonicalize() {
                        found.insert(PluginCrate { dir });
                    }
                }
            }
        }
        found
    }

    /// The folders of the profile's layers that hold libraries: `tools/` and each
    /// `extensions/<point>/`.
    fn library_folders(&self) -> Vec<PathBuf> {
        self.library_folders_of(|_| true)
    }

    /// [`Self::library_folders`] of the layers `keep` keeps.
    fn library_folders_of(&self, keep: impl Fn(&Layer) -> bool) -> Vec<PathBuf> {
        let mut folders = Vec::new();
        for layer in self.host.layers(&self.profile).iter().filter(|l| keep(l)) {
            folders.push(layer.tools_dir());
            if let Ok(points) = std::fs::read_dir(layer.extensions_dir()) {
                folders.extend(points.flatten().map(|p| p.path()).filter(|p| p.is_dir()));
            }
        }
        folders
    }

    /// The library entries of the profile's layers that are `artifact` (a link to it, or the
    /// file itself): what a build of it changes.
    pub(crate) fn entries_of(&self, artifact: &Path) -> Vec<PathBuf> {
        let Ok(artifact) = artifact.canonicalize() else {
            return Vec::new();
        };
        self.library_folders()
            .iter()
            .flat_map(|folder| libraries_in(folder))
            .filter(|entry| entry.canonicalize().is_ok_and(|e| e == artifact))
            .collect()
    }
}

/// The library files (or links, dangling ones included) directly in `folder`.
fn libraries_in(folder: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(folder) else {
        return Vec::new();
    };
    entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == LIBRARY_EXTENSION))
        .collect()
}
