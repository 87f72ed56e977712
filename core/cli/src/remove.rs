//! `toolhost remove NAME`: takes an installed package out of the layers (one rename) and out
//! of usr/packages.lock; a running host falls back to the next layer.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;
use toolhost::package::install;
use toolhost::Layout;

pub(crate) fn remove(root: &Path, name: &str) -> Result<ExitCode> {
    let locked = install::remove(&Layout::new(root), name)?;
    println!(
        "removed {name} {} (from usr/plugins/{name})",
        locked.version
    );
    Ok(ExitCode::SUCCESS)
}
