//! # toolhost-testkit: test a plugin's built library through the real host
//!
//! Unit tests of a tool use `plugin_api::testing::TestContext` (plugin-api's feature
//! `testing`). One integration test per plugin crate should also load the library cargo built,
//! through the host's own loader, and call it through the whole lifecycle: the contract's
//! version and layout check, the tool's metadata and JSON Schema, the default hooks, governance.
//! That is [`load_built_tool`]:
//!
//! ```no_run
//! // tests/loaded.rs of a plugin crate; `toolhost-testkit` and `tokio` (features `rt`,
//! // `macros`) in its [dev-dependencies].
//! #[tokio::test]
//! async fn the_built_library_answers() {
//!     let tool = toolhost_testkit::load_built_tool(env!("CARGO_MANIFEST_DIR"))
//!         .unwrap_or_else(|e| panic!("{e}"));
//!     let answer = tool.call("greet", serde_json::json!({"name": "Ada"})).await.unwrap();
//!     assert_eq!(answer.message, "Hello, Ada!");
//! }
//! ```
//!
//! Cargo does not rebuild a `cdylib`-only crate's library before its integration tests (they
//! cannot link it), so [`load_built_tool`] runs `cargo build --lib` for the crate first, once
//! per test process: the test never loads a stale library.
//!
//! Each load copies the library into a new temporary root, and the host loads it from a private
//! copy of that, never from `target/`: the dynamic loader would hand back an image it already
//! mapped for a path it has seen, and cargo rewrites `target/` files while another build runs.
//! The host reads each library's header itself (not abi_stable's `RootModule::load_from_*`,
//! which caches one module per type per process), so several tests in one process may load
//! several libraries, or the same one again. Libraries are never unloaded.
#![deny(missing_docs)]
// Library code handles its errors, or says with `expect` why a value cannot be missing.
#![cfg_attr(not(test), warn(clippy::unwrap_used))]

mod cargo_build;
mod locate;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use plugin_api::{Response, ToolError};
use toolhost::output::Captured;
use toolhost::{Agent, Host, HostError, LoadError, ToolHandle, LIBRARY_EXTENSION};

use locate::PluginCrate;

/// Why a built library could not be made ready to call. Each is displayed as one line.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TestkitError {
    /// The crate's `Cargo.toml` could not be read.
    #[error("cannot read {}: {reason}", path.display())]
    Manifest {
        /// The manifest.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The crate does not build a dynamic library.
    #[error("crate '{package}' builds no plugin library: add `[lib] crate-type = [\"cdylib\"]`")]
    NotACdylib {
        /// The crate.
        package: String,
    },
    /// `cargo build` of the crate failed: its first error line.
    #[error("building crate '{package}' failed: {reason}")]
    Build {
        /// The crate.
        package: String,
        /// The first error cargo reported.
        reason: String,
    },
    /// No built library was found.
    #[error(
        "no library built for crate '{package}' (looked for {}): run the test with `cargo test` \
         in the crate, or `cargo build` it first",
        looked.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
    )]
    NotBuilt {
        /// The crate.
        package: String,
        /// Every path looked at, most likely first.
        looked: Vec<PathBuf>,
    },
    /// Laying out the temporary root failed.
    #[error("cannot prepare a temporary root: {0}")]
    Io(#[from] std::io::Error),
    /// The host could not start.
    #[error("{0}")]
    Host(#[from] HostError),
    /// The host refused the library: `skipping <path>: <reason>`.
    #[error("{0}")]
    Load(LoadError),
}

/// Builds the library of the plugin crate in `crate_dir` (pass `env!("CARGO_MANIFEST_DIR")`)
/// and loads it as tool `<folder name>` of a fresh root, through the real loader; see
/// [`Loader`] for other names and profiles, and [`Loader::load`] for the build.
///
/// The library (`lib<name>.so`, `lib<name>.dylib` or `<name>.dll`, from the crate's
/// `Cargo.toml`) is looked for in the profile folder of the running test binary, then under
/// `$CARGO_TARGET_DIR`, the crate's `target/`, and the `target/` of each enclosing workspace.
///
/// # Errors
///
/// A [`TestkitError`]: no such crate or no `cdylib`, the build failed, nothing built, or the
/// host refused the library (built against another plugin-abi, not a plugin, its constructor
/// panicked...).
pub fn load_built_tool(crate_dir: impl AsRef<Path>) -> Result<BuiltTool, TestkitError> {
    Loader::new(crate_dir).load()
}

/// Options of a load: the tool's name, the agent's profile, and whether to build first.
#[derive(Debug, Clone)]
pub struct Loader {
    crate_dir: PathBuf,
    name: Option<String>,
    profile: String,
    build: bool,
}

impl Loader {
    /// A load of the crate in `crate_dir`.
    pub fn new(crate_dir: impl AsRef<Path>) -> Self {
        Self {
            crate_dir: crate_dir.as_ref().to_owned(),
            name: None,
            profile: "default".to_owned(),
            build: true,
        }
    }

    /// Loads the library as it is in `target/`, without running `cargo build` for the crate
    /// first (see [`load`](Self::load)).
    pub fn without_build(mut self) -> Self {
        self.build = false;
        self
    }

    /// The tool's name (its file name in `usr/tools/`); the default is the crate's folder
    /// name, as `cargo xtask install` and `usr/tools/<name>/` crates have it.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// The agent's profile (the default is `default`).
    pub fn profile(mut self, profile: impl Into<String>) -> Self {
        self.profile = profile.into();
        self
    }

    /// Builds the crate's library, finds it, installs a copy as `usr/tools/<name>` of a
    /// temporary root, and has a host load it.
    ///
    /// Cargo does not rebuild a `cdylib`-only crate's library for its integration tests, so
    /// this runs `cargo build --lib` for the crate first (once per test process, into the test
    /// binary's target folder and profile; about 0.3 s when it is up to date). That build
    /// resolves features as `cargo build` does: the library loaded is the one that would be
    /// installed, without plugin-api's `testing`.
    ///
    /// # Errors
    ///
    /// As [`load_built_tool`].
    pub fn load(self) -> Result<BuiltTool, TestkitError> {
        let krate = PluginCrate::read(&self.crate_dir)?;
        if self.build {
            cargo_build::build_once(&krate, locate::exe_profile_dir().as_deref())?;
        }
        let library = krate.find_library()?;
        let name = match self.name {
            Some(name) => name,
            None => default_name(&krate),
        };
        let root = tempfile::Builder::new()
            .prefix("toolhost-testkit-")
            .tempdir()?;
        let installed = root
            .path()
            .join("usr/tools")
            .join(format!("{name}.{LIBRARY_EXTENSION}"));
        std::fs::create_dir_all(root.path().join("usr/tools"))?;
        std::fs::copy(&library, &installed)?;
        let host = Arc::new(Host::new(root.path())?);
        let resolution = host.resolve(&self.profile, &name);
        let handle = match (&resolution.found, resolution.skipped.first()) {
            (Some(found), _) => found.handle.clone(),
            (None, Some(error)) => return Err(TestkitError::Load(error.clone())),
            (None, None) => {
                let gone = std::io::Error::other(format!("{} vanished", installed.display()));
                return Err(TestkitError::Io(gone));
            }
        };
        let output = Arc::new(Captured::default());
        let agent = Agent::with_output(host, "A0", &self.profile, output.clone())?;
        Ok(BuiltTool {
            root,
            library,
            handle,
            agent,
            output,
        })
    }
}

/// The crate's folder name if it is a usable tool name, else its library's name.
fn default_name(krate: &PluginCrate) -> String {
    krate
        .dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .filter(|n| toolhost::is_safe_name(n))
        .unwrap_or_else(|| krate.package.replace('-', "_"))
}

/// A built library loaded by a real host, in a temporary root removed when this is dropped
/// (the library stays mapped: libraries are never unloaded).
pub struct BuiltTool {
    root: tempfile::TempDir,
    library: PathBuf,
    handle: Arc<ToolHandle>,
    agent: Arc<Agent>,
    output: Arc<Captured>,
}

impl BuiltTool {
    /// Calls `request` (`name` or `name:method`) with `args` through the host's whole
    /// lifecycle, as the agent `A0` would: hooks, extension points, schema validation,
    /// approval, the deadline. Other tools can be called too, if the test installed them in
    /// [`root`](Self::root).
    pub async fn call(
        &self,
        request: &str,
        args: serde_json::Value,
    ) -> Result<Response, ToolError> {
        self.agent.call_tool(request, args).await
    }

    /// The loaded tool: its name, [`ToolInfo`](plugin_api::ToolInfo), readiness, version.
    pub fn handle(&self) -> &ToolHandle {
        &self.handle
    }

    /// The tool's name.
    pub fn name(&self) -> &str {
        self.handle.name()
    }

    /// The library cargo built, that was copied into the root.
    pub fn library(&self) -> &Path {
        &self.library
    }

    /// The temporary root (`usr/tools/<name>.so` in it), to add files to.
    pub fn root(&self) -> &Path {
        self.root.path()
    }

    /// The agent the calls run as: its history and log after a call.
    pub fn agent(&self) -> &Arc<Agent> {
        &self.agent
    }

    /// What the host printed, one line per item, in order.
    pub fn output(&self) -> Vec<String> {
        self.output
            .lines()
            .into_iter()
            .map(|(_, line)| line)
            .collect()
    }
}

impl std::fmt::Debug for BuiltTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BuiltTool")
            .field("name", &self.name())
            .field("library", &self.library)
            .field("root", &self.root.path())
            .finish_non_exhaustive()
    }
}
