//! Listing what a profile sees, loading every library on every core: the same [`Catalog`] as
//! [`Host::catalog`] gives, with every tool loaded.

use std::sync::Arc;

use super::{Catalog, Host, ListedExtension, ListedTool, Resolution, ToolSource};
use crate::host::libraries::{Loaded, Mode};
use crate::plugin::{Declared, Inspection, ToolSandbox};

/// Where a tool's library runs, as the configuration says ([`Host::runs_as`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RunsAs {
    /// In the host's process.
    InProcess,
    /// In a worker process, sandboxed or not.
    Isolated {
        /// Its sandbox, if it runs in one.
        sandbox: Option<ToolSandbox>,
    },
}

impl Host {
    /// Where the library `file` runs for `profile` if it is a tool of one of the profile's
    /// layers (`<layer>/tools/<name>.so`): in this process, or isolated with its sandbox.
    /// `None` for a file outside the layers' tool folders.
    pub fn runs_as(&self, profile: &str, file: &std::path::Path) -> Option<RunsAs> {
        let (layer, name, _) = self.tool_file(profile, file)?;
        Some(match self.tool_mode(profile, &layer, &name) {
            Mode::InProcess => RunsAs::InProcess,
            Mode::Isolated(settings) => RunsAs::Isolated {
                sandbox: settings.sandbox.as_deref().map(ToolSandbox::configured),
            },
        })
    }

    /// What the tool library `file` declares, read in the worker process (and sandbox) that
    /// `profile` runs it in, so that none of its code runs in this process: `None` if `file`
    /// is not a tool of the profile's layers that runs isolated (then
    /// [`inspect`](crate::inspect) reads it).
    pub fn inspect_isolated(
        &self,
        profile: &str,
        file: &std::path::Path,
    ) -> Option<Result<Inspection, crate::LoadError>> {
        let (layer, name, path) = self.tool_file(profile, file)?;
        let mode = self.tool_mode(profile, &layer, &name);
        if mode == Mode::InProcess {
            return None;
        }
        match &*self.libraries.load(&path, None, mode) {
            Loaded::Tool(handle) => Some(Ok(Inspection {
                path: file.to_owned(),
                size: std::fs::metadata(&path).map_or(0, |m| m.len()),
                sha256: handle.sha256().unwrap_or_default().to_owned(),
                contract: handle.contract().to_owned(),
                package: handle.package().to_owned(),
                version: handle.version().to_owned(),
                kind: Declared::Tool {
                    info: handle.info().clone(),
                    schema_error: None,
                },
            })),
            Loaded::Failed(error) => Some(Err(error.clone())),
            Loaded::Extension(_) => None,
        }
    }

    /// The layer, tool name and path (in the layer's `tools/`) of `file`, if it is a tool
    /// library of one of `profile`'s layers.
    fn tool_file(
        &self,
        profile: &str,
        file: &std::path::Path,
    ) -> Option<(crate::layout::Layer, String, std::path::PathBuf)> {
        let real = std::fs::canonicalize(file).unwrap_or_else(|_| file.to_owned());
        let name = real.file_stem()?.to_str()?.to_owned();
        let layer = self
            .layers(profile)
            .iter()
            .find(|l| {
                let tools = std::fs::canonicalize(l.tools_dir()).unwrap_or_else(|_| l.tools_dir());
                real.parent() == Some(tools.as_path())
            })?
            .clone();
        let path = layer.tool_file(&name);
        Some((layer, name, path))
    }

    /// Every tool the profile sees, with the winning layer and what it shadows, loaded as a call
    /// would load it (each row's source is [`ToolSource::Loaded`]); the extensions that run at
    /// each point; `skipped` holds the tool and extension files that failed to load. Unlike
    /// [`catalog`](Self::catalog), the metadata cache is neither read nor written.
    pub fn list(&self, profile: &str) -> Catalog {
        let candidates = self.tool_candidates(profile);
        let names: Vec<&str> = candidates.keys().map(String::as_str).collect();
        let resolutions = self.resolve_all(profile, &names);
        let mut listing = Catalog::default();
        for ((name, files), resolution) in candidates.into_iter().zip(resolutions) {
            listing.skipped.extend(resolution.skipped.iter().cloned());
            if let Some(found) = resolution.found.clone() {
                let shadows = files
                    .into_iter()
                    .map(|(_, path)| path)
                    .skip_while(|p| *p != found.path)
                    .skip(1)
                    .collect();
                listing.tools.push(ListedTool {
                    name,
                    isolated: found.handle.is_isolated(),
                    sandbox: found.handle.sandbox(),
                    layer: found.layer,
                    path: found.path,
                    shadows,
                    source: ToolSource::Loaded(found.handle),
                });
            }
        }
        #[cfg(feature = "mcp")]
        {
            listing.mcp = self.mcp_catalog(profile, &mut listing.tools);
        }
        for point in self.extension_points(profile) {
            listing
                .skipped
                .extend(self.skipped_extensions(profile, &point));
            let run = self.extensions(profile, &point);
            let run = run.iter().map(ListedExtension::loaded).collect();
            listing.extensions.push((point, run));
        }
        listing
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
