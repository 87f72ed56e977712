//! `toolhost remove NAME`: takes an installed package out of the layers (one rename) and out
//! of usr/packages.lock; a running host falls back to the next layer.

use std::path::Path;
use std::process::ExitCode;

use crate::Global;
use anyhow::Result;
use toolhost::package::install;
use toolhost::Layout;

/// Remove an installed package from usr/plugins/ and usr/packages.lock.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// The package.
    name: String,
}

impl Args {
    /// `toolhost remove`.
    pub(crate) fn run(self, global: &Global) -> Result<ExitCode> {
        remove(&global.root, &self.name)
    }
}

pub(crate) fn remove(root: &Path, name: &str) -> Result<ExitCode> {
    let locked = install::remove(&Layout::new(root), name)?;
    println!(
        "removed {name} {} (from usr/plugins/{name})",
        locked.version
    );
    Ok(ExitCode::SUCCESS)
}
