//! Listing what a profile sees, loading libraries on every core.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use super::{FoundTool, Host, Resolution};
use crate::load::error::LoadError;
#[cfg(feature = "mcp")]
use crate::mcp::McpTool;

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

#[cfg(feature = "mcp")]
/// One tool of an MCP server in [`Host::list`].
#[derive(Clone)]
pub struct McpListing {
    /// The tool (`<server>.<tool>`).
    pub tool: Arc<McpTool>,
    /// Library files of the same name that it hides (MCP tools are looked up first).
    pub shadows: Vec<PathBuf>,
}

/// Everything a profile sees: the tools that win, and the files that were skipped.
#[derive(Clone, Default)]
pub struct Listing {
    /// Library tools sorted by name (those an MCP tool of the same name hides are left out).
    pub tools: Vec<ToolListing>,
    /// The tools of the profile's MCP servers that are ready now, sorted by name; they are
    /// looked up before the layers.
    #[cfg(feature = "mcp")]
    pub mcp: Vec<McpListing>,
    /// Tool and extension files that failed to load, with the reason.
    pub skipped: Vec<LoadError>,
}

impl Host {
    /// Every tool the profile sees, with the winning layer and what it shadows; `skipped` also
    /// holds the extension files that failed to load.
    pub fn list(&self, profile: &str) -> Listing {
        let mut candidates: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
        for layer in self.layers(profile).iter() {
            for (stem, path) in self.served_files(&layer.tools_dir()) {
                candidates.entry(stem).or_default().push(path);
            }
        }
        let names: Vec<&str> = candidates.keys().map(String::as_str).collect();
        let resolutions = self.resolve_all(profile, &names);
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
        #[cfg(feature = "mcp")]
        {
            listing.mcp = self.mcp_listing(profile, &mut listing.tools);
        }
        for point in self.extension_points(profile) {
            let skipped = self.skipped_extensions(profile, &point);
            listing.skipped.extend(skipped);
        }
        listing
    }

    #[cfg(feature = "mcp")]
    /// The profile's MCP tools; library tools of the same name move to their `shadows`.
    fn mcp_listing(&self, profile: &str, tools: &mut Vec<ToolListing>) -> Vec<McpListing> {
        let mut listed = Vec::new();
        for tool in self.mcp_tools(profile) {
            let mut shadows = Vec::new();
            tools.retain(|t| {
                if t.name != tool.name() {
                    return true;
                }
                shadows.push(t.found.path.clone());
                shadows.extend(t.shadows.iter().cloned());
                false
            });
            listed.push(McpListing { tool, shadows });
        }
        listed
    }

    /// Resolves many names, loading libraries on as many threads as there are cores (copying
    /// and checking a library dominate a cold `list`). Results are in the order of `names`.
    fn resolve_all(&self, profile: &str, names: &[&str]) -> Vec<Arc<Resolution>> {
        if let Some(all) = self.tools.get_all(profile, names) {
            return all; // nothing to load: no threads to start
        }
        super::catalog::on_every_core(names, |name| self.resolve(profile, name))
    }
}
