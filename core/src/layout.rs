//! The on-disk layout of a root folder: which folders a profile looks in, what any path under
//! the root is to the host, and which folders a watcher must watch. Every other module asks
//! this one; nothing here loads a library.
//!
//! ```text
//! <root>/usr/agents/<P>/            1. the user's profile folder
//! <root>/usr/plugins/*/agents/<P>/  2. each plugin's profile folder (user plugins, then
//! <root>/plugins/*/agents/<P>/         built-in ones, by folder name)
//! <root>/core/agents/<P>/           3. the built-in profile folder
//! <root>/usr/                       4. the user
//! <root>/usr/plugins/*/             5. each plugin (same order)
//! <root>/plugins/*/
//! <root>/core/                      6. the core
//! ```
//!
//! Each of those folders is a [`Layer`] and holds `tools/<name>.<ext>`,
//! `extensions/<point>/<name>.<ext>` and `prompts/*.md`.

use std::collections::{BTreeSet, HashSet};
use std::fs;
use std::path::{Path, PathBuf};

use crate::name::is_safe_name;

/// The file extension of native libraries on this platform (`so`, `dylib`, `dll`).
pub const LIBRARY_EXTENSION: &str = std::env::consts::DLL_EXTENSION;

/// The file that switches a plugin folder off.
pub const TOGGLE_OFF: &str = ".toggle-0";

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

impl Layer {
    /// `<layer>/tools/`.
    pub fn tools_dir(&self) -> PathBuf {
        self.dir.join("tools")
    }

    /// `<layer>/tools/<name>.<ext>`.
    pub fn tool_file(&self, name: &str) -> PathBuf {
        self.tools_dir().join(format!("{name}.{LIBRARY_EXTENSION}"))
    }

    /// `<layer>/extensions/`.
    pub fn extensions_dir(&self) -> PathBuf {
        self.dir.join("extensions")
    }

    /// `<layer>/extensions/<point>/`.
    pub fn point_dir(&self, point: &str) -> PathBuf {
        self.extensions_dir().join(point)
    }

    /// `<layer>/prompts/`.
    pub fn prompts_dir(&self) -> PathBuf {
        self.dir.join("prompts")
    }
}

/// What a path under the root is to the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileRole<'a> {
    /// `<layer>/tools/<name>.<ext>`
    Tool {
        /// The layer folder.
        layer: &'a Path,
        /// The tool's name (the file stem).
        name: &'a str,
    },
    /// `<layer>/extensions/<point>/<name>.<ext>`
    Extension {
        /// The layer folder.
        layer: &'a Path,
        /// The extension point.
        point: &'a str,
        /// The extension's name (the file stem, its sort key).
        name: &'a str,
    },
    /// `<layer>/prompts/<file>.md`
    Prompt,
    /// A plugin's `.toggle-0` switch.
    Toggle,
    /// `usr/secrets.env`.
    Secrets,
    /// Anything else.
    Other,
}

/// The layout of one root folder.
///
/// ```
/// use std::path::Path;
/// use toolhost::{FileRole, Layout};
///
/// let layout = Layout::new("/srv/agent");
/// let role = layout.role(Path::new("/srv/agent/usr/extensions/monologue_start/_10_hi.so"));
/// # if toolhost::LIBRARY_EXTENSION == "so" {
/// assert!(matches!(role, FileRole::Extension { point: "monologue_start", name: "_10_hi", .. }));
/// # }
/// assert_eq!(layout.role(Path::new("/srv/agent/usr/secrets.env")), FileRole::Secrets);
/// ```
#[derive(Debug, Clone)]
pub struct Layout {
    root: PathBuf,
}

impl Layout {
    /// The layout of `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The root folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `usr/secrets.env`: `KEY=VALUE` lines.
    pub fn secrets_file(&self) -> PathBuf {
        self.root.join("usr").join("secrets.env")
    }

    /// `usr/sessions/`: one folder per recorded session.
    pub fn sessions_dir(&self) -> PathBuf {
        self.root.join("usr").join("sessions")
    }

    /// The search order for `profile` (see the [module docs](self)); first occurrence wins.
    /// A plugin folder holding a `.toggle-0` file is left out.
    pub fn layers(&self, profile: &str) -> Vec<Layer> {
        let plugins = self.plugin_labels();
        let mut layers = Vec::with_capacity(plugins.len() * 2 + 4);
        let mut push = |kind, label: String| {
            let dir = self.root.join(&label);
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

    /// `usr/plugins/<name>` and `plugins/<name>` labels in order, user first, each name once
    /// (a user plugin hides the built-in one of the same name), switched-off ones left out.
    fn plugin_labels(&self) -> Vec<String> {
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        for parent in ["usr/plugins", "plugins"] {
            let mut names: Vec<String> = subdirs(&self.root.join(parent))
                .into_iter()
                .filter_map(|dir| dir.file_name()?.to_str().map(str::to_owned))
                .collect();
            names.sort();
            for name in names {
                if seen.insert(name.clone())
                    && !self.root.join(parent).join(&name).join(TOGGLE_OFF).exists()
                {
                    out.push(format!("{parent}/{name}"));
                }
            }
        }
        out
    }

    /// What `path` is to the host.
    pub fn role<'a>(&self, path: &'a Path) -> FileRole<'a> {
        if path == self.secrets_file() {
            return FileRole::Secrets;
        }
        if path.file_name().is_some_and(|n| n == TOGGLE_OFF) {
            return FileRole::Toggle;
        }
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
        match (name_of(parent), parent.parent()) {
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

    /// What a watcher must watch (see [`WatchTargets`]).
    pub fn watch_targets(&self) -> WatchTargets {
        let root = &self.root;
        let mut dirs = BTreeSet::from([root.clone(), root.join("usr/plugins")]);
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
    /// The root, `usr/`, `plugins/`, `core/`, every plugin folder, every `agents/` folder and
    /// every layer's `tools/`, `extensions/<point>/` and `prompts/` folder that exists.
    pub dirs: BTreeSet<PathBuf>,
    /// `(link, its target)` for each library that is a symbolic link.
    pub links: Vec<(PathBuf, PathBuf)>,
}

fn name_of(path: &Path) -> Option<&str> {
    path.file_name()?.to_str()
}

/// `(file stem, path)` of the library files directly in `dir`, with safe names only, sorted.
pub(crate) fn library_files(dir: &Path) -> Vec<(String, PathBuf)> {
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

/// The extension points that have a folder in any of `layers`, sorted.
pub(crate) fn extension_points(layers: &[Layer]) -> Vec<String> {
    let mut points = BTreeSet::new();
    for layer in layers {
        for dir in subdirs(&layer.extensions_dir()) {
            if let Some(point) = name_of(&dir).filter(|p| is_safe_name(p)) {
                points.insert(point.to_owned());
            }
        }
    }
    points.into_iter().collect()
}

/// `(file name, path)` of the prompt files `pick` accepts in `layers`, merged by file name
/// (first occurrence wins), sorted by file name.
pub(crate) fn prompt_files(
    layers: &[Layer],
    pick: impl Fn(&str) -> bool,
) -> Vec<(String, PathBuf)> {
    let mut winners = std::collections::BTreeMap::new();
    for layer in layers {
        let Ok(entries) = fs::read_dir(layer.prompts_dir()) else {
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
    winners.into_iter().collect()
}

/// Where the symbolic link `file` points, with its folder resolved, even if the file itself
/// does not exist (yet): a link made before the first build must follow that build.
fn link_target(file: &Path) -> Option<PathBuf> {
    let dest = fs::read_link(file).ok()?;
    let dest = file.parent()?.join(dest); // an absolute `dest` replaces the folder
    let dir = fs::canonicalize(dest.parent()?).ok()?;
    Some(dir.join(dest.file_name()?))
}

/// The folders in `dir`, following symbolic links (a profile folder may be one), hidden ones
/// (starting with `.`) left out.
fn subdirs(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| fs::metadata(e.path()).is_ok_and(|m| m.is_dir()))
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| e.path())
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    fn lib(stem: &str) -> String {
        format!("{stem}.{LIBRARY_EXTENSION}")
    }

    fn tree(paths: &[&str]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for path in paths {
            let path = dir.path().join(path);
            if path.to_string_lossy().ends_with('/') {
                fs::create_dir_all(&path).unwrap();
            } else {
                fs::create_dir_all(path.parent().unwrap()).unwrap();
                fs::write(&path, b"x").unwrap();
            }
        }
        dir
    }

    #[test]
    fn layers_come_most_specific_first_and_user_plugins_hide_built_ins() {
        let dir = tree(&[
            "usr/plugins/b/",
            "plugins/a/",
            "plugins/b/",
            "plugins/c/.toggle-0",
        ]);
        let labels: Vec<String> = Layout::new(dir.path())
            .layers("p")
            .into_iter()
            .map(|l| format!("{}:{}", l.kind.as_str(), l.label))
            .collect();
        assert_eq!(
            labels,
            [
                "profile:usr/agents/p",
                "profile:usr/plugins/b/agents/p",
                "profile:plugins/a/agents/p",
                "profile:core/agents/p",
                "user:usr",
                "plugin:usr/plugins/b",
                "plugin:plugins/a",
                "core:core",
            ]
        );
    }

    #[test]
    fn every_role_is_recognised() {
        let layout = Layout::new("/r");
        let tool = format!("/r/usr/tools/{}", lib("greet"));
        let extension = format!("/r/core/extensions/tool_execute_after/{}", lib("_10_m"));
        let hidden = format!("/r/usr/tools/{}", lib(".hidden"));
        let loose = format!("/r/usr/{}", lib("x"));
        let role = |p: &'static str| layout.role(Path::new(p));
        assert_eq!(
            layout.role(Path::new(&tool)),
            FileRole::Tool {
                layer: Path::new("/r/usr"),
                name: "greet"
            }
        );
        assert_eq!(
            layout.role(Path::new(&extension)),
            FileRole::Extension {
                layer: Path::new("/r/core"),
                point: "tool_execute_after",
                name: "_10_m"
            }
        );
        assert_eq!(
            role("/r/usr/prompts/agent.system.tool.x.md"),
            FileRole::Prompt
        );
        assert_eq!(role("/r/plugins/x/.toggle-0"), FileRole::Toggle);
        assert_eq!(role("/r/usr/secrets.env"), FileRole::Secrets);
        assert_eq!(role("/r/usr/tools/readme.txt"), FileRole::Other);
        for other in [&hidden, &loose] {
            assert_eq!(layout.role(Path::new(other)), FileRole::Other, "{other}");
        }
    }

    #[test]
    fn layer_paths() {
        let layer = Layer {
            kind: LayerKind::User,
            label: "usr".into(),
            dir: PathBuf::from("/r/usr"),
        };
        assert_eq!(
            layer.tool_file("x"),
            Path::new("/r/usr/tools").join(lib("x"))
        );
        assert_eq!(layer.point_dir("p"), Path::new("/r/usr/extensions/p"));
        assert_eq!(layer.prompts_dir(), Path::new("/r/usr/prompts"));
        let layout = Layout::new("/r");
        assert_eq!(layout.sessions_dir(), Path::new("/r/usr/sessions"));
    }

    #[test]
    fn watch_targets_cover_existing_layer_folders_and_follow_links() {
        let dir = tree(&[
            "usr/tools/",
            "usr/agents/p/prompts/",
            "plugins/a/extensions/monologue_start/",
            "plugins/a/.toggle-0",
            "target/debug/",
        ]);
        let root = dir.path();
        #[cfg(unix)]
        std::os::unix::fs::symlink(
            root.join("target/debug").join(lib("libx")),
            root.join("usr/tools").join(lib("x")),
        )
        .unwrap();
        let targets = Layout::new(root).watch_targets();
        for want in [
            "",
            "usr",
            "usr/tools",
            "usr/agents",
            "usr/agents/p",
            "usr/agents/p/prompts",
            "plugins/a",
            "plugins/a/extensions",
            "plugins/a/extensions/monologue_start",
        ] {
            assert!(
                targets.dirs.contains(&root.join(want)),
                "{want} not watched"
            );
        }
        assert!(!targets.dirs.contains(&root.join("target/debug")));
        assert!(
            !targets.dirs.contains(&root.join("usr/prompts")),
            "missing folders are not listed"
        );
        #[cfg(unix)]
        assert_eq!(
            targets.links,
            [(
                root.join("usr/tools").join(lib("x")),
                fs::canonicalize(root.join("target/debug"))
                    .unwrap()
                    .join(lib("libx"))
            )]
        );
    }

    #[test]
    fn points_and_prompts_merge_by_name() {
        let dir = tree(&[
            "usr/extensions/b/",
            "core/extensions/a/",
            "core/extensions/.hidden/",
            "usr/prompts/agent.system.tool.x.md",
            "core/prompts/agent.system.tool.x.md",
            "core/prompts/agent.system.main.md",
            "core/prompts/notes.txt",
        ]);
        let layers = Layout::new(dir.path()).layers("default");
        assert_eq!(extension_points(&layers), ["a", "b"]);
        let prompts = prompt_files(&layers, |f| f.starts_with("agent.system."));
        let found: Vec<(&str, bool)> = prompts
            .iter()
            .map(|(f, p)| (f.as_str(), p.starts_with(dir.path().join("usr"))))
            .collect();
        assert_eq!(
            found,
            [
                ("agent.system.main.md", false),
                ("agent.system.tool.x.md", true)
            ]
        );
    }
}
