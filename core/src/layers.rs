//! The ordered folders a profile looks in, most specific first.

use std::fs;
use std::path::{Path, PathBuf};

/// Which kind of layer a folder belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LayerKind {
    /// A profile's own folder (user, plugin or built-in).
    Profile,
    /// The user's folder, `usr/`.
    User,
    /// A plugin's folder (user plugins, then built-in plugins).
    Plugin,
    /// The core, `core/`.
    Core,
}

impl LayerKind {
    /// `profile`, `user`, `plugin` or `core`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Profile => "profile",
            Self::User => "user",
            Self::Plugin => "plugin",
            Self::Core => "core",
        }
    }
}

/// One folder of the search order. It holds `tools/`, `extensions/<point>/` and `prompts/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layer {
    /// The kind of layer.
    pub kind: LayerKind,
    /// The folder, relative to the root (`usr/agents/example`).
    pub label: String,
    /// The folder.
    pub dir: PathBuf,
}

/// The search order for `profile` under `root` (design: first occurrence wins):
///
/// 1. `usr/agents/<profile>/`
/// 2. `<plugin>/agents/<profile>/` for each plugin: `usr/plugins/*` then `plugins/*`, by folder
///    name; a user plugin hides a built-in plugin of the same folder name
/// 3. `core/agents/<profile>/`
/// 4. `usr/`
/// 5. each plugin's own folder, same order
/// 6. `core/`
///
/// A plugin folder holding a file named `.toggle-0` is switched off.
pub fn layers_for(root: &Path, profile: &str) -> Vec<Layer> {
    let plugins = plugin_dirs(root);
    let mut layers = Vec::with_capacity(plugins.len() * 2 + 4);
    let mut push = |kind, label: String| {
        let dir = root.join(&label);
        layers.push(Layer { kind, label, dir });
    };
    push(LayerKind::Profile, format!("usr/agents/{profile}"));
    for plugin in &plugins {
        push(LayerKind::Profile, format!("{plugin}/agents/{profile}"));
    }
    push(LayerKind::Profile, format!("core/agents/{profile}"));
    push(LayerKind::User, "usr".to_owned());
    for plugin in &plugins {
        push(LayerKind::Plugin, plugin.clone());
    }
    push(LayerKind::Core, "core".to_owned());
    layers
}

/// `usr/plugins/<name>` and `plugins/<name>` labels in order, user first, each name once.
fn plugin_dirs(root: &Path) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for parent in ["usr/plugins", "plugins"] {
        let Ok(entries) = fs::read_dir(root.join(parent)) else {
            continue;
        };
        let mut names: Vec<String> = entries
            .filter_map(Result::ok)
            .filter(|e| e.file_type().map(|t| t.is_dir()).unwrap_or(false))
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| !n.starts_with('.'))
            .collect();
        names.sort();
        for name in names {
            if !seen.insert(name.clone()) {
                continue; // a user plugin hides the built-in one
            }
            if root.join(parent).join(&name).join(".toggle-0").exists() {
                continue;
            }
            out.push(format!("{parent}/{name}"));
        }
    }
    out
}
