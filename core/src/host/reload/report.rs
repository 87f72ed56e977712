//! The one line a long-lived host prints for each [`ReloadEvent`].

use std::fmt;
use std::path::{Component, Path};
use std::time::Duration;

use crate::host::reload::ReloadEvent;
use crate::layout::Escaped;

/// A [`ReloadEvent`] as one line for the user, with paths relative to the root and each
/// library's layer named: `reloaded usr/tools/hello.so [layer usr]: 0.1.0 (generation 1) ->
/// 0.1.0 (generation 2) in 28.6 ms`. Made by [`ReloadEvent::report`]; `toolhost watch`,
/// `serve-mcp` and `chat` print these.
pub struct Report<'a> {
    event: &'a ReloadEvent,
    root: &'a Path,
}

impl ReloadEvent {
    /// This event as the line a host prints, with paths shown relative to `root` (the host's
    /// root as the user gave it).
    pub fn report<'a>(&'a self, root: &'a Path) -> Report<'a> {
        Report { event: self, root }
    }
}

impl Report<'_> {
    /// `path` relative to the root, without a leading `./`.
    fn shown(&self, path: &Path) -> String {
        let rel = path.strip_prefix(self.root).unwrap_or(path);
        let rel: std::path::PathBuf = rel
            .components()
            .skip_while(|c| *c == Component::CurDir)
            .collect();
        Escaped(&rel).to_string()
    }

    /// A library's path and its layer: `usr/agents/p/tools/x.so [layer usr/agents/p]`.
    /// Both with the system's separator (`usr\tools\x.dll [layer usr]` on Windows).
    fn place(&self, path: &Path) -> String {
        let rel = path.strip_prefix(self.root).unwrap_or(path);
        let parts: Vec<Component> = rel
            .components()
            .skip_while(|c| *c == Component::CurDir)
            .collect();
        let layer = match parts
            .iter()
            .rposition(|p| p.as_os_str() == "tools" || p.as_os_str() == "extensions")
        {
            Some(0) | None => ".".to_owned(),
            Some(i) => Escaped(&parts[..i].iter().collect::<std::path::PathBuf>()).to_string(),
        };
        format!("{} [layer {layer}]", self.shown(path))
    }
}

fn ms(took: &Duration) -> String {
    format!("{:.1} ms", took.as_secs_f64() * 1e3)
}

impl fmt::Display for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.event {
            ReloadEvent::Loaded {
                path,
                old: Some(old),
                new,
                took,
            } => write!(
                f,
                "reloaded {}: {old} -> {new} in {}",
                self.place(path),
                ms(took)
            ),
            ReloadEvent::Loaded {
                path,
                old: None,
                new,
                took,
            } => write!(f, "loaded {}: {new} in {}", self.place(path), ms(took)),
            ReloadEvent::Failed {
                error,
                kept: Some(kept),
            } => write!(
                f,
                "reload of {} failed, still serving {kept}: {}",
                self.place(&error.path),
                error.reason
            ),
            ReloadEvent::Failed { error, kept: None } => {
                write!(
                    f,
                    "cannot load {}: {}",
                    self.place(&error.path),
                    error.reason
                )
            }
            ReloadEvent::Removed { path } => write!(f, "removed {}", self.place(path)),
            #[cfg(feature = "mcp")]
            ReloadEvent::McpServers(reload) => f.write_str(&mcp_servers(reload)),
            ReloadEvent::ProfileAdded { name } => {
                write!(f, "new profile '{name}': `--profile {name}` uses it")
            }
            ReloadEvent::ProfileRemoved { name } => {
                write!(f, "profile '{name}' is gone: it has no folder any more")
            }
            ReloadEvent::Changed { path } => self.changed(f, path),
        }
    }
}

impl Report<'_> {
    /// A prompt, a folder or a switch (`TOGGLE_OFF`) that changed.
    fn changed(&self, f: &mut fmt::Formatter<'_>, path: &Path) -> fmt::Result {
        let shown = self.shown(path);
        let what = if path.extension().is_some_and(|e| e == "md") {
            "prompt"
        } else if path
            .file_name()
            .is_some_and(|n| n == crate::layout::TOGGLE_OFF)
        {
            let folder = self.shown(path.parent().unwrap_or(path));
            return match path.exists() {
                true => write!(f, "switched off {folder}"),
                false => write!(f, "switched on {folder}"),
            };
        } else {
            "folder"
        };
        match (crate::layout::entry_exists(path), what) {
            (true, "folder") => write!(f, "new folder {shown}"),
            (true, _) => write!(f, "{what} {shown} changed"),
            (false, _) => write!(f, "{what} {shown} is gone"),
        }
    }
}

/// The MCP servers of a profile started, restarted and stopped, and their errors.
#[cfg(feature = "mcp")]
fn mcp_servers(reload: &crate::mcp::McpReload) -> String {
    let mut parts = Vec::new();
    for (what, names) in [
        ("started", &reload.started),
        ("restarted", &reload.restarted),
        ("stopped", &reload.stopped),
    ] {
        if !names.is_empty() {
            parts.push(format!("{what} {}", names.join(", ")));
        }
    }
    parts.extend(reload.errors.iter().cloned());
    if parts.is_empty() {
        parts.push("no server changed".to_owned());
    }
    format!(
        "MCP servers of profile '{}' (mcp.json): {}",
        reload.profile,
        parts.join("; ")
    )
}
