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

mod name;
mod read;
mod watch;
mod write;

pub use name::{is_safe_name, ToolName};
pub(crate) use read::{
    check_path, line_of, not_regular, open_regular, read_at_most, read_capped, read_capped_with,
};
pub use read::{
    needs_escape, Escaped, Location, Shown, DEFAULT_MAX_LIBRARY_BYTES, DEFAULT_MAX_TEXT_BYTES,
    MAX_LINK_HOPS,
};
pub use read::{read_text, ReadError, ReadErrorKind};
pub use watch::WatchTargets;
pub(crate) use watch::{nearest_existing, watched_files};
#[cfg(feature = "mcp")]
pub(crate) use write::write_privately;
pub(crate) use write::{write_atomically, write_atomically_with};

mod names;
pub use names::*;

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

    /// `<layer>/mcp-prompts/`: the prompts `toolhost serve-mcp` offers (`<name>.toml`).
    pub fn mcp_prompts_dir(&self) -> PathBuf {
        self.dir.join("mcp-prompts")
    }

    /// `<layer>/resources/`: the resources `toolhost serve-mcp` offers (its files, and
    /// `resources.toml`).
    pub fn resources_dir(&self) -> PathBuf {
        self.dir.join("resources")
    }

    /// `<layer>/skills/`: the skills `toolhost serve-mcp` offers (`<name>/SKILL.md` and the
    /// files beside it; MCP's Skills extension).
    pub fn skills_dir(&self) -> PathBuf {
        self.dir.join("skills")
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
    /// A configuration file: `usr/toolhost.toml`, or a profile's
    /// `usr/agents/<profile>/toolhost.toml` (see [`crate::config`]).
    Config {
        /// The profile whose file it is; `None` for `usr/toolhost.toml`, which every profile
        /// reads.
        profile: Option<&'a str>,
    },
    /// Anything else.
    Other,
}

/// The layout of one root folder. A profile `P` looks in these folders, most specific first,
/// and the first occurrence of a name wins:
///
/// ```text
/// <root>/usr/agents/<P>/            1. the user's profile folder
/// <root>/usr/plugins/*/agents/<P>/  2. each plugin's profile folder (user plugins, then
/// <root>/plugins/*/agents/<P>/         built-in ones, by folder name)
/// <root>/core/agents/<P>/           3. the built-in profile folder
/// <root>/usr/                       4. the user
/// <root>/usr/plugins/*/             5. each plugin (same order)
/// <root>/plugins/*/
/// <root>/core/                      6. the core
/// ```
///
/// Each of those folders is a [`Layer`] and holds `tools/<name>.<ext>`,
/// `extensions/<point>/<name>.<ext>` and `prompts/*.md`. A user plugin hides a built-in plugin
/// of the same folder name, and a plugin folder holding `.toggle-0` is switched off.
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
/// let role = layout.role(Path::new("/srv/agent/usr/agents/dev/toolhost.toml"));
/// assert_eq!(role, FileRole::Config { profile: Some("dev") });
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

    /// Whether the root folder is one: it holds `usr/`, `core/` or `plugins/` (a layer). A
    /// command run in another folder writes nothing there (no `usr/audit/`), and `toolhost new`
    /// makes a standalone crate instead of one in `usr/tools/`.
    pub fn is_root(&self) -> bool {
        ["usr", "core", "plugins"]
            .iter()
            .any(|layer| self.root.join(layer).is_dir())
    }

    /// `usr/secrets.env`: `KEY=VALUE` lines.
    pub fn secrets_file(&self) -> PathBuf {
        self.root.join("usr").join("secrets.env")
    }

    /// `usr/toolhost.toml`: the configuration every profile reads (see [`crate::config`]).
    pub fn config_file(&self) -> PathBuf {
        self.root.join("usr").join(CONFIG_FILE_NAME)
    }

    /// `usr/agents/<profile>/toolhost.toml`: a profile's configuration, which overrides
    /// [`config_file`](Self::config_file) key by key.
    pub fn profile_config_file(&self, profile: &str) -> PathBuf {
        self.root
            .join("usr/agents")
            .join(profile)
            .join(CONFIG_FILE_NAME)
    }

    /// `usr/.cache/`: what the host keeps to save time (the metadata cache); it never holds
    /// plugins, and the watcher ignores it.
    pub fn cache_dir(&self) -> PathBuf {
        self.root.join("usr").join(CACHE_DIR_NAME)
    }

    /// `usr/.cache/metadata.json`: what `list` and the tools prompt know of each library
    /// without loading it (see the book, `docs/src/reference/loading.md`).
    pub fn metadata_cache_file(&self) -> PathBuf {
        self.cache_dir().join(METADATA_FILE_NAME)
    }

    /// `usr/plugins.lock`: the SHA-256 of every pinned library (see [`crate::load::pins`]).
    pub fn pins_file(&self) -> PathBuf {
        self.root.join("usr").join(PINS_FILE_NAME)
    }

    /// `usr/mcp-tools.lock`: the MCP tool definitions approved by versions before 0.9, all
    /// servers in one file (read, never written).
    pub fn mcp_pins_file(&self) -> PathBuf {
        self.root.join("usr").join(MCP_PINS_FILE_NAME)
    }

    /// `usr/mcp-tools/`: the hash and the text of each MCP server's tool definitions as first
    /// seen or last approved, one `SERVER.lock` per server.
    pub fn mcp_pins_dir(&self) -> PathBuf {
        self.root.join("usr").join(MCP_PINS_DIR_NAME)
    }

    /// `usr/mcp-tools/SERVER.lock`: the approved tool definitions of MCP server `server` (a
    /// server name is letters, digits, `_` and `-`).
    pub fn mcp_pins_file_of(&self, server: &str) -> PathBuf {
        self.mcp_pins_dir().join(format!("{server}.lock"))
    }

    /// `usr/packages.lock`: the installed packages (see [`crate::package::lock`]).
    pub fn packages_lock_file(&self) -> PathBuf {
        self.root.join("usr").join(PACKAGES_LOCK_FILE_NAME)
    }

    /// `usr/trusted-keys/`: the public keys whose signatures `add` accepts.
    pub fn trusted_keys_dir(&self) -> PathBuf {
        self.root.join("usr").join(TRUSTED_KEYS_DIR)
    }

    /// `usr/plugins/<name>/`: where the package `name` is installed.
    pub fn package_dir(&self, name: &str) -> PathBuf {
        self.root.join("usr").join("plugins").join(name)
    }

    /// `usr/sessions/`: one folder per recorded session.
    pub fn sessions_dir(&self) -> PathBuf {
        self.root.join("usr").join("sessions")
    }

    /// `usr/audit/`: the audit log, `audit.jsonl` (see [`audit`](crate::audit)).
    pub fn audit_dir(&self) -> PathBuf {
        self.root.join("usr").join("audit")
    }

    /// The search order for `profile` (see [`Layout`]); first occurrence wins.
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

    /// Every profile some layer has a folder for (`usr/agents/P`, `<plugin>/agents/P`,
    /// `core/agents/P`), sorted, with `default` always among them.
    pub fn profiles(&self) -> Vec<String> {
        let mut parents = vec![self.root.join("usr/agents"), self.root.join("core/agents")];
        parents.extend(
            self.plugin_labels()
                .iter()
                .map(|p| self.root.join(p).join("agents")),
        );
        let mut names: Vec<String> = parents
            .iter()
            .flat_map(|parent| dirs_in(parent, true))
            .filter_map(|dir| dir.file_name()?.to_str().map(str::to_owned))
            .chain(std::iter::once("default".to_owned()))
            .collect();
        names.sort();
        names.dedup();
        names
    }

    /// `usr/plugins/<name>` and `plugins/<name>` labels in order, user first, each name once
    /// (a user plugin hides the built-in one of the same name), switched-off ones left out.
    fn plugin_labels(&self) -> Vec<String> {
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        for parent in ["usr/plugins", "plugins"] {
            let mut names: Vec<String> = dirs_in(&self.root.join(parent), false)
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
        if let Some(role) = self.config_role(path) {
            return role;
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
}

impl Layout {
    /// [`FileRole::Config`] if `path` is `usr/toolhost.toml` or a profile's
    /// `usr/agents/<profile>/toolhost.toml`.
    fn config_role<'a>(&self, path: &'a Path) -> Option<FileRole<'a>> {
        if path.file_name()? != CONFIG_FILE_NAME {
            return None;
        }
        let dir = path.parent()?;
        if dir == self.root.join("usr") {
            return Some(FileRole::Config { profile: None });
        }
        let profile = name_of(dir).filter(|p| is_safe_name(p))?;
        let agents = self.root.join("usr/agents");
        (dir.parent()? == agents).then_some(FileRole::Config {
            profile: Some(profile),
        })
    }
}

fn name_of(path: &Path) -> Option<&str> {
    path.file_name()?.to_str()
}

/// `(file stem, path)` of the entries directly in `dir` named like libraries, with safe names
/// only, sorted. Every kind of entry counts (a folder, a FIFO, a dangling link): reading it
/// then says why it cannot be used, instead of the name silently being unknown.
pub(crate) fn library_files(dir: &Path) -> Vec<(String, PathBuf)> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<(String, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let path = e.path();
            if path.extension()? != LIBRARY_EXTENSION {
                return None;
            }
            let Some(stem) = path.file_stem()?.to_str().filter(|s| is_safe_name(s)) else {
                tracing::debug!(
                    "ignoring {}: not a valid tool or extension name",
                    Escaped(&path)
                );
                return None;
            };
            Some((stem.to_owned(), path))
        })
        .collect();
    files.sort();
    files
}

/// Whether anything is at `path`, without following a link (a dangling link is there).
pub(crate) fn entry_exists(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok()
}

/// The extension points that have a folder in any of `layers`, sorted.
pub(crate) fn extension_points(layers: &[Layer]) -> Vec<String> {
    let mut points = BTreeSet::new();
    for layer in layers {
        for dir in dirs_in(&layer.extensions_dir(), false) {
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

/// The folders in `dir`, following symbolic links (a profile folder may be one), hidden ones
/// (starting with `.`) left out: what a watcher watches.
pub(crate) fn subdirs(dir: &Path) -> Vec<PathBuf> {
    dirs_in(dir, true)
}

/// The folders in `dir`, hidden ones left out; a symbolic link counts only if `follow`. Plugin
/// folders and extension points are real folders (a link there is not searched).
fn dirs_in(dir: &Path, follow: bool) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let is_dir = |e: &fs::DirEntry| match follow {
        true => fs::metadata(e.path()).is_ok_and(|m| m.is_dir()),
        false => e.file_type().is_ok_and(|t| t.is_dir()),
    };
    entries
        .filter_map(Result::ok)
        .filter(is_dir)
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| e.path())
        .collect()
}

#[cfg(test)]
mod tests;
